"""maskrcnn-benchmark's RPN: targets, loss normalisation, proposal selection."""
import torch

from sgg_model_helpers import tiny_cfg
from gluontrain.torch.sgg.modeling.detector import build_rpn
from gluontrain.torch.twostage.structures import BoxList


def _rpn(**kw):
    cfg = tiny_cfg('sgdet', relation_on=False)
    for k, v in kw.items():
        setattr(cfg.MODEL.RPN, k, v)
    return build_rpn(cfg, 16, torch.Generator().manual_seed(0))


def test_labels_visibility_and_low_quality_match():
    rpn = _rpn()
    anchors = BoxList(torch.tensor([[0., 0., 9., 9.], [0., 0., 19., 19.], [50., 50., 69., 69.],
                                    [-5., 0., 9., 9.]]), (64, 64))
    anchors.add_field('visibility', torch.tensor([True, True, True, False]))
    target = BoxList(torch.tensor([[0., 0., 29., 29.]]), (64, 64))
    labels, reg = rpn._labels(anchors, target)
    # IoUs: 100/900, 400/900 (best for the GT -> positive by low-quality matching), 0;
    # the invisible anchor is ignored
    assert labels.tolist() == [0., 1., 0., -1.]
    assert torch.allclose(reg[1], rpn.box_coder.encode(target.bbox, anchors.bbox[1:2])[0])


def test_training_forward_losses_and_proposals():
    rpn = _rpn(PRE_NMS_TOP_N_TRAIN=50, POST_NMS_TOP_N_TRAIN=20, FPN_POST_NMS_TOP_N_TRAIN=30)
    rpn.train()
    feats = [torch.randn(1, 16, 64 // s, 64 // s) for s in (4, 8, 16, 32, 64)]
    target = BoxList(torch.tensor([[4., 4., 40., 40.]]), (64, 64))
    props, losses = rpn([(64, 64)], feats, [target])
    assert set(losses) == {'loss_objectness', 'loss_rpn_box_reg'}
    # zero-initialised biases, N(0, .01) weights: objectness ~ log 2
    assert abs(losses['loss_objectness'].item() - 0.6931) < 0.05
    # FPN_POST_NMS_PER_BATCH (training): the 30 best of the batch, kept in level order
    assert len(props[0]) == 30 and props[0].has_field('objectness')
    rpn.fpn_post_nms_per_batch = False
    obj = rpn([(64, 64)], feats, [target])[0][0].get_field('objectness')
    assert obj.numel() == 30 and torch.equal(obj, obj.sort(descending=True)[0])
    # ADD_GTBOX_TO_PROPOSAL_IN_TRAIN appends the GT boxes with objectness 1
    rpn.add_gt = True
    props, _ = rpn([(64, 64)], feats, [target])
    assert torch.equal(props[0].bbox[-1], target.bbox[0])
    rpn.eval()
    props, losses = rpn([(64, 64)], feats)
    assert losses == {} and len(props[0]) <= 50
