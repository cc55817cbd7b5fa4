"""ROIRelationHead: sampled pairs reach the predictor; losses and predictions."""
import torch

from sgg_model_helpers import TinyPredictor, make_batch, tiny_cfg
from gluontrain.torch.sgg.modeling.relation_head import build_roi_relation_head


class Spy(TinyPredictor):
    def forward(self, proposals, rel_pair_idxs, rel_labels, rel_binarys, roi_features,
                union_features, logger=None):
        self.seen = (rel_pair_idxs, rel_labels, rel_binarys, roi_features, union_features)
        obj, rel, _ = super().forward(proposals, rel_pair_idxs, rel_labels, rel_binarys,
                                      roi_features, union_features)
        return obj, rel, {'loss_extra': rel[0].sum() * 0}


def _head(mode='predcls', batch=16):
    cfg = tiny_cfg(mode)
    cfg.MODEL.ROI_RELATION_HEAD.BATCH_SIZE_PER_IMAGE = batch
    spy = Spy(cfg, 32)
    return build_roi_relation_head(cfg, 16, predictor=spy,
                                   generator=torch.Generator().manual_seed(0)), spy


def _feats():
    return [torch.randn(2, 16, 128 // s, 128 // s) for s in (4, 8, 16, 32, 64)]


def test_training_pairs_features_and_losses():
    head, spy = _head(batch=16)
    _, targets = make_batch()
    head.train()
    _, props, losses = head(_feats(), [t.copy_with_fields(['labels']) for t in targets],
                            targets)
    pairs, labels, binarys, roi, union = spy.seen
    # image 0: 3 boxes, 2 GT pairs + all 4 others; image 1: 4 boxes, 3 GT + 9 others (< 16)
    assert [len(p) for p in pairs] == [6, 12]
    assert [int((l > 0).sum()) for l in labels] == [2, 3]
    assert roi.shape == (7, 32) and union.shape == (18, 32)
    assert binarys[1].shape == (4, 4)
    assert set(losses) == {'loss_rel', 'loss_refine_obj', 'loss_extra'}


def test_eval_predictions():
    head, spy = _head()
    _, targets = make_batch()
    head.eval()
    with torch.no_grad():
        _, results, losses = head(_feats(), [t.copy_with_fields(['labels']) for t in targets])
    assert losses == {} and spy.seen[1] is None
    assert [len(r.get_field('rel_pair_idxs')) for r in results] == [6, 12]
    scores = results[0].get_field('pred_scores')
    assert torch.allclose(scores, torch.ones(3))  # PredCls: the +-1000 one-hot labels
