"""The sgg-detector: backbone/FPN shapes, a training step that lowers the loss,
evaluation outputs."""
import pytest
import torch

from sgg_model_helpers import make_batch, tiny_cfg
from gluontrain.torch.sgg.modeling.detector import build_backbone, build_detector


def test_backbone_levels():
    bb = build_backbone(tiny_cfg(relation_on=False))
    feats = bb(torch.randn(1, 3, 64, 96))
    assert [tuple(f.shape[-2:]) for f in feats] == [(16, 24), (8, 12), (4, 6), (2, 3), (1, 2)]
    assert all(f.shape[1] == 16 for f in feats)


def test_freeze_conv_body_at():
    cfg = tiny_cfg(relation_on=False)
    cfg.MODEL.BACKBONE.FREEZE_CONV_BODY_AT = 2
    bb = build_backbone(cfg)
    frozen = {n.split('.')[0] for n, p in bb.body.named_parameters() if not p.requires_grad}
    assert frozen == {'stem', 'layer1'}


def test_unknown_body_is_a_clear_error():
    cfg = tiny_cfg(relation_on=False)
    cfg.MODEL.BACKBONE.CONV_BODY = 'R-50-C4'
    with pytest.raises(ValueError, match='CONV_BODY'):
        build_backbone(cfg)


def test_train_step_reduces_loss_and_eval_outputs():
    torch.manual_seed(0)
    cfg = tiny_cfg(relation_on=False)
    det = build_detector(cfg, torch.Generator().manual_seed(0))
    images, targets = make_batch()
    opt = torch.optim.SGD([p for p in det.parameters() if p.requires_grad], lr=0.02,
                          momentum=0.9)
    det.train()
    totals = []
    for _ in range(12):
        losses = det(images, targets)
        assert set(losses) == {'loss_objectness', 'loss_rpn_box_reg', 'loss_classifier',
                               'loss_box_reg'}
        total = sum(losses.values())
        opt.zero_grad()
        total.backward()
        opt.step()
        totals.append(total.item())
    assert sum(totals[-3:]) / 3 < 0.7 * totals[0], totals
    det.eval()
    with torch.no_grad():
        out = det(images)
    assert len(out) == 2
    for o, img in zip(out, images):
        assert o.size == (img.shape[2], img.shape[1])
        assert {'pred_labels', 'pred_scores', 'labels', 'predict_logits',
                'box_features'} <= set(o.fields())
        assert len(o) <= cfg.MODEL.ROI_HEADS.DETECTIONS_PER_IMG
        assert o.get_field('predict_logits').shape == (len(o), 6)
        assert o.get_field('box_features').shape == (len(o), 32)
        assert (o.get_field('pred_labels') >= 1).all()
