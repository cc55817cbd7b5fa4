"""Box head pieces: pooler, matcher, proposal sampler, Fast R-CNN loss, relation modes."""
import math

import torch

from sgg_model_helpers import make_batch, tiny_cfg
from gluontrain.torch.ops import match_by_iou as match, roi_align
from gluontrain.torch.sgg.modeling.detector import box_sampler, build_box_head
from gluontrain.torch.twostage.box_head import Pooler, box_loss
from gluontrain.torch.twostage.structures import BoxList


def _feats(n=1, c=4, size=64):
    g = torch.Generator().manual_seed(0)
    return [torch.randn(n, c, size // s, size // s, generator=g) for s in (4, 8, 16, 32)]


def test_pooler_levels_and_cat_all_levels():
    feats = _feats()
    scales = (0.25, 0.125, 0.0625, 0.03125)
    # 10 x 10 (+1 convention) -> floor(4 + log2(10 / 224)) = -1, clamped to level 2 (finest)
    boxes = [BoxList(torch.tensor([[0., 0., 9., 9.], [0., 0., 63., 63.]]), (64, 64))]
    out = Pooler((7, 7), scales, 2)(feats, boxes)
    assert out.shape == (2, 4, 7, 7)
    idx = torch.zeros(1, dtype=torch.long)
    assert torch.allclose(out[0], roi_align(feats[0], boxes[0].bbox[:1], idx, (7, 7), .25, 2)[0])
    # sqrt(64*64) = 64 -> floor(4 + log2(64/224)) = 2: also the finest level
    assert torch.allclose(out[1], roi_align(feats[0], boxes[0].bbox[1:], idx, (7, 7), .25, 2)[0])
    cat = Pooler((7, 7), scales, 2, in_channels=4, cat_all_levels=True)
    assert cat(feats, boxes).shape == (2, 4, 7, 7)
    assert cat.reduce_channel[0].in_channels == 16


def test_match_thresholds():
    iou = torch.tensor([[0.7, 0.4, 0.1, 0.5], [0.2, 0.45, 0.0, 0.1]])
    # >= 0.5 matched, [0.3, 0.5) between (-2), < 0.3 below (-1)
    assert match(iou, 0.5, 0.3).tolist() == [0, -2, -1, 0]


def test_sampler_counts_and_labels():
    cfg = tiny_cfg(relation_on=False)
    cfg.MODEL.ROI_HEADS.BATCH_SIZE_PER_IMAGE = 4
    cfg.MODEL.ROI_HEADS.POSITIVE_FRACTION = 0.5
    cfg.MODEL.ROI_HEADS.BG_IOU_THRESHOLD = 0.3
    s = box_sampler(cfg, torch.Generator().manual_seed(0))
    gt = BoxList(torch.tensor([[0., 0., 9., 9.]]), (100, 100))
    gt.add_field('labels', torch.tensor([3]))
    # 3 positives (IoU 1, .9, .8), 1 ignored (IoU .4), 4 negatives
    props = BoxList(torch.tensor([[0., 0., 9., 9.], [0., 0., 9., 8.], [0., 0., 9., 7.],
                                  [0., 0., 3., 9.], [50., 50., 60., 60.], [70., 70., 80., 80.],
                                  [20., 20., 30., 30.], [40., 0., 50., 9.]]), (100, 100))
    out = s.subsample([props], [gt])[0]
    labels = out.get_field('labels')
    # 4 x 0.5 = 2 positives, 4 - 2 = 2 negatives, the ignored one never sampled
    assert len(out) == 4 and (labels == 3).sum() == 2 and (labels == 0).sum() == 2
    assert (out.get_field('matched_idxs') != -2).all()


def test_box_loss_hand_computed():
    props = BoxList(torch.zeros(2, 4), (10, 10))
    props.add_field('labels', torch.tensor([1, 0]))
    props.add_field('regression_targets', torch.tensor([[0.5, 0., 2., 0.], [9., 9., 9., 9.]]))
    logits = torch.tensor([[0., 0.], [math.log(3.), 0.]])
    reg = torch.zeros(2, 8)
    cls, loc = box_loss(logits, reg, [props])
    assert math.isclose(cls.item(), (math.log(2.) + math.log(4. / 3.)) / 2, rel_tol=1e-6)
    # smooth-L1 (beta 1) of class 1's deltas: 0.5*0.25 + 0 + (2 - 0.5) + 0, / 2 sampled
    assert math.isclose(loc.item(), (0.125 + 1.5) / 2, rel_tol=1e-6)


def test_relation_modes_of_the_box_head():
    images, targets = make_batch()
    feats = [torch.randn(2, 16, 128 // s, 128 // s) for s in (4, 8, 16, 32, 64)]
    for mode in ('predcls', 'sgcls'):
        head = build_box_head(tiny_cfg(mode), 16).eval()
        x, props, losses = head(feats, None, targets)
        assert losses == {} and x.shape == (7, 32)
        assert [len(p) for p in props] == [3, 4]
        assert torch.equal(props[1].bbox, targets[1].bbox)
        assert props[0].has_field('predict_logits') == (mode == 'sgcls')
        assert not props[0].has_field('relation')
    head = build_box_head(tiny_cfg('sgdet'), 16).eval()
    proposals = [t.copy() for t in targets]
    _, dets, _ = head(feats, proposals, targets)
    for d in dets:
        assert {'labels', 'predict_logits', 'boxes_per_cls', 'pred_scores'} <= set(d.fields())
        assert d.get_field('boxes_per_cls').shape[1:] == (6, 4)
