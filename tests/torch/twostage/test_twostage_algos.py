"""The detector's targets, losses, proposals and predictions on tiny hand-computed cases."""
import math

import numpy as np
import pytest
import torch

from gluontrain.torch.twostage import algos
from gluontrain.torch.frcnn.config import load_config
from gluontrain.torch.frcnn.model import make_model
from gluontrain.torch.ops import fpn_anchors


def _sl1(d, sigma):
    d = abs(d)
    s2 = sigma ** 2
    return 0.5 * s2 * d * d if d < 1. / s2 else d - 0.5 / s2


def _bce(logit, target):
    p = 1. / (1. + math.exp(-logit))
    return -(target * math.log(p) + (1 - target) * math.log(1 - p))


def test_rpn_loss_hand_computed():
    obj_logits = torch.tensor([[0., 1., -1., 2.]], dtype=torch.float64)
    obj_lbl = torch.tensor([[1, 0, -1, 1]])
    bbx_logits = torch.zeros(1, 4, 4, dtype=torch.float64)
    bbx_lbl = torch.zeros(1, 4, 4, dtype=torch.float64)
    bbx_lbl[0, 0] = torch.tensor([0.05, 0.5, 0., -2.], dtype=torch.float64)
    bbx_lbl[0, 2] = 7.  # void: ignored
    bbx_lbl[0, 3, 1] = 0.1
    obj, bbx = algos.rpn_loss(obj_logits, bbx_logits, obj_lbl, bbx_lbl, sigma=3.)
    # normalised by the 3 non-void anchors of the batch
    want_obj = (_bce(0., 1) + _bce(1., 0) + _bce(2., 1)) / 3
    want_bbx = sum(_sl1(d, 3.) for d in (0.05, 0.5, 0., -2., 0.1)) / 3
    assert obj.item() == pytest.approx(want_obj, abs=1e-12)
    assert bbx.item() == pytest.approx(want_bbx, abs=1e-12)


def test_rpn_loss_without_positives_is_zero_and_connected():
    bbx_logits = torch.ones(1, 2, 4, requires_grad=True)
    obj, bbx = algos.rpn_loss(torch.zeros(1, 2), bbx_logits, torch.tensor([[0, -1]]),
                              torch.zeros(1, 2, 4))
    assert obj.item() == pytest.approx(math.log(2.))  # one non-void anchor: scale min(1, 1)
    assert bbx.item() == 0.
    bbx.backward()
    assert bbx_logits.grad is not None


def test_rpn_targets_void_outside_and_crowd_and_shift():
    anchors = torch.tensor([[0., 0, 50, 50], [0, 0, 40, 50], [60, 60, 110, 110],
                            [50, 50, 100, 100], [0, 50, 50, 100]])
    gt = torch.tensor([[0., 0, 50, 50]])
    crowd = torch.tensor([[50., 50, 100, 100]])
    obj_lbl, bbx_lbl = algos.rpn_targets(anchors, [gt], [crowd], [(100, 100)],
                                         algos.RPNSettings())
    # A0 IoU 1, A1 IoU .8: positive; A2 leaves the image and A3 lies in the crowd: void
    assert obj_lbl.tolist() == [[1, 1, -1, -1, 0]]
    assert torch.allclose(bbx_lbl[0, 1], torch.tensor([5. / 40, 0., math.log(50. / 40), 0.]))
    assert bbx_lbl[0, 0].abs().sum() == 0 and bbx_lbl[0, 4].abs().sum() == 0


def test_rpn_targets_sampling_counts():
    anchors = fpn_anchors([(16, 16), (8, 8), (4, 4), (2, 2)])
    gt = torch.tensor([[4., 4, 36, 36], [20, 30, 60, 62], [10, 10, 40, 60]])
    settings = algos.RPNSettings(num_samples=16, pos_ratio=.25)
    full = algos.rpn_targets(anchors, [gt], [None], [(64, 64)],
                             algos.RPNSettings(num_samples=10 ** 6, pos_ratio=.5))[0]
    n_pos, n_neg = int((full == 1).sum()), int((full == 0).sum())
    assert n_pos > 4 and n_neg > 12
    torch.manual_seed(0)
    lbl = algos.rpn_targets(anchors, [gt, None], [None, None], [(64, 64), (64, 64)],
                            settings)[0]
    assert int((lbl[0] == 1).sum()) == 4 and int((lbl[0] == 0).sum()) == 12
    # an image without ground truth: 16 negatives among the anchors inside it
    assert int((lbl[1] == 1).sum()) == 0 and int((lbl[1] == 0).sum()) == 16
    assert ((lbl[0] == 1) <= (full[0] == 1)).all()


def test_generate_proposals_min_size_topk_nms_ge():
    anchors = torch.tensor([[0., 0, 10, 40],     # B3: side 10 < 16, dropped
                            [0, 0, 40, 40],      # B0
                            [0, 0, 40, 80],      # B2: IoU with B0 exactly .5 -> suppressed
                            [0, 20, 40, 60],     # B1: IoU 1/3 with B0 -> kept
                            [80, 80, 120, 120]])  # B4: clipped to (80, 80, 100, 100)
    logits = torch.tensor([[9., 5, 4, 3, 1]])
    deltas = torch.zeros(1, 5, 4)
    s = algos.RPNSettings(nms_threshold=.5, num_pre_nms_train=3, num_post_nms_train=10,
                          num_pre_nms_val=10, num_post_nms_val=10, min_size=16)
    val = algos.generate_proposals(logits, deltas, anchors, [(100, 100)], s, training=False)[0]
    assert val.tolist() == [[0, 0, 40, 40], [0, 20, 40, 60], [80, 80, 100, 100]]
    # training: only the 3 best (after the size filter) reach the NMS
    train = algos.generate_proposals(logits, deltas, anchors, [(100, 100)], s, True)[0]
    assert train.tolist() == [[0, 0, 40, 40], [0, 20, 40, 60]]
    s.num_post_nms[True] = 1
    assert algos.generate_proposals(logits, deltas, anchors, [(100, 100)], s,
                                    True)[0].tolist() == [[0, 0, 40, 40]]
    # nothing of the minimum size: None (seamseg's Empty)
    assert algos.generate_proposals(logits, deltas, anchors[:1], [(100, 100)], s,
                                    True) == [None]


def test_generate_proposals_shifts_with_clamp():
    anchors = torch.tensor([[20., 20, 40, 40]])
    deltas = torch.tensor([[[0.5, 0., 10., 0.]]])  # dh clamped to log(1000 / 16)
    s = algos.RPNSettings(min_size=0)
    prop = algos.generate_proposals(torch.zeros(1, 1), deltas, anchors, [(2000, 2000)], s,
                                    False)[0]
    h = 20 * 1000. / 16
    # centre y 30 + 0.5 * 20 = 40, height 1250; the top is clipped at 0
    assert prop[0].tolist() == pytest.approx([0, 20, 40 + h / 2, 40])


def test_roi_targets_gt_prepended_labels_and_weighted_shifts():
    gt = torch.tensor([[0., 0, 40, 40]])
    props = torch.tensor([[0., 0, 40, 50], [50, 50, 90, 90], [0, 0, 40, 80]])
    s = algos.ROISettings(num_samples=8, pos_ratio=.5)
    rois, idx, cls_lbl, bbx_lbl = algos.roi_targets([props], [gt], [torch.tensor([3])],
                                                    [None], num_stuff=1, settings=s,
                                                    rng=np.random.RandomState(0))
    # positives first: the ground truth itself, P0 (IoU .8) and P2 (IoU .5); then P1
    assert cls_lbl.tolist() == [3, 3, 3, 0] and idx.tolist() == [0] * 4
    assert rois[3].tolist() == [50, 50, 90, 90]
    want = {(0., 0., 40., 40.): [0., 0., 0., 0.],
            (0., 0., 40., 50.): [0., -1., 0., 5 * math.log(.8)],
            (0., 0., 40., 80.): [0., -2.5, 0., 5 * math.log(.5)]}
    for roi, lbl in zip(rois[:3].tolist(), bbx_lbl.tolist()):
        assert lbl == pytest.approx(want[tuple(roi)], abs=1e-6)


def test_roi_targets_counts_and_crowd():
    rng = np.random.RandomState(1)
    gt = torch.tensor([[0., 0, 40, 40]])
    near = torch.tensor([[0., 0, 40, 40 + d] for d in range(1, 20)])   # IoU >= .67: positive
    far = torch.tensor([[50. + d, 50, 90 + d, 90] for d in range(20)])  # IoU 0: negative
    s = algos.ROISettings(num_samples=16, pos_ratio=.25)
    _, _, cls_lbl, bbx_lbl = algos.roi_targets([torch.cat([near, far])], [gt],
                                               [torch.tensor([0])], [None], 0, s, rng)
    assert int((cls_lbl > 0).sum()) == 4 and int((cls_lbl == 0).sum()) == 12
    assert bbx_lbl.shape == (4, 4)
    # a crowd over the negatives removes them all: only positives are left
    crowd = torch.tensor([[45., 45, 120, 100]])
    _, _, cls_lbl, _ = algos.roi_targets([torch.cat([near, far])], [gt], [torch.tensor([0])],
                                         [crowd], 0, s, rng)
    assert cls_lbl.tolist() == [1] * 4
    # no proposals and no ground truth anywhere: nothing to sample
    assert algos.roi_targets([None], [None], [None], [None], 0, s, rng) == (None,) * 4


def test_predict_score_threshold_classwise_nms_and_top_k():
    props = torch.tensor([[0., 0, 40, 40], [0, 0, 40, 80], [60, 60, 90, 90]])
    probs = torch.tensor([[.1, .8, .1], [.3, .6, .1], [.5, .04, .46]], dtype=torch.float64)
    bbx_logits = torch.zeros(3, 2, 4, dtype=torch.float64)
    s = algos.ROISettings()
    boxes, cls, score = algos.predict(probs.log(), bbx_logits, props.double(),
                                      torch.zeros(3, dtype=torch.long), [(100, 100)], s)
    # class 0: P1 suppressed by P0 (IoU .5 >= .3), P2 under the .05 threshold;
    # class 1: P1 suppressed by P0 (equal score, lower index first)
    assert cls[0].tolist() == [0, 1, 1]
    assert score[0].tolist() == pytest.approx([.8, .46, .1])
    assert boxes[0].tolist() == [[0, 0, 40, 40], [60, 60, 90, 90], [0, 0, 40, 40]]
    s.max_predictions = 2
    assert algos.predict(probs.log(), bbx_logits, props.double(), torch.zeros(3).long(),
                         [(100, 100)], s)[1][0].tolist() == [0, 1]
    # an image without proposals gets None
    out = algos.predict(probs.log(), bbx_logits, props.double(), torch.zeros(3).long(),
                        [(100, 100), (50, 50)], s)
    assert out[0][1] is None and out[1][1] is None and out[2][1] is None


def test_predict_weights_and_clip():
    props = torch.tensor([[10., 10, 30, 30]])
    deltas = torch.tensor([[[10., 0., 0., 5 * math.log(4.)]]])  # dy = 1, dw = log 4
    probs = torch.tensor([[0., 1.]]).clamp(min=1e-9)
    boxes = algos.predict(probs.log(), deltas, props, torch.zeros(1).long(), [(35, 45)],
                          algos.ROISettings())[0][0]
    # centre (40, 20), size (20, 80): clipped to the 35 x 45 image
    assert boxes.tolist() == [[30., 0., 35., 45.]]


def _model(tmp_path, extra=''):
    p = tmp_path / 'small.ini'
    p.write_text('[body]\nbody = resnet18\nbody_params = {"width_mult": 0.25}\n'
                 'normalization_mode = bn\n'
                 'out_channels = {"mod1": 16, "mod2": 16, "mod3": 32, "mod4": 64, "mod5": 128}\n'
                 '[fpn]\nout_channels = 16\n[rpn]\nhidden_channels = 16\n' + extra)
    return make_model(load_config(str(p)), num_thing=3)


def test_forward_losses_and_predictions(tmp_path):
    torch.manual_seed(0)
    np.random.seed(0)
    model = _model(tmp_path).train()
    imgs = [torch.randn(3, 128, 160), torch.randn(3, 96, 128)]
    cat = [torch.tensor([0, 1, 2]), torch.tensor([1])]
    crowd = [torch.tensor([0, 0, 1]), torch.tensor([0])]
    bbx = [torch.tensor([[10., 10, 60, 70], [30, 40, 100, 120], [0, 0, 50, 50]]),
           torch.tensor([[20., 20, 80, 90]])]
    losses, pred = model(img=imgs, cat=cat, iscrowd=crowd, bbx=bbx, do_loss=True,
                         do_prediction=False)
    assert list(losses) == ['obj_loss', 'bbx_loss', 'roi_cls_loss', 'roi_bbx_loss']
    assert all(v.dim() == 0 and torch.isfinite(v) for v in losses.values())
    # untrained: objectness ~ log 2, ROI classes ~ log(thing + 1)
    assert losses['obj_loss'].item() == pytest.approx(math.log(2), abs=.05)
    assert losses['roi_cls_loss'].item() == pytest.approx(math.log(4), abs=.1)
    assert pred['bbx_pred'] is None
    sum(losses.values()).backward()
    assert model.roi_head.roi_cls.weight.grad.abs().sum() > 0
    assert model.rpn_head.conv_obj.weight.grad.abs().sum() > 0
    model.eval()
    with torch.no_grad():
        losses, pred = model(img=imgs, do_loss=False, do_prediction=True)
    assert losses['obj_loss'] is None and len(pred['bbx_pred']) == 2
    for b, c, s in zip(pred['bbx_pred'], pred['cls_pred'], pred['obj_pred']):
        assert b.shape[0] == c.shape[0] == s.shape[0] <= 100
        assert (s > .05).all() and (c >= 0).all() and (c < 3).all()


def test_forward_without_proposals_gives_zero_connected_roi_loss(tmp_path):
    # every proposal smaller than min_size: seamseg's Empty path, zero ROI losses
    model = _model(tmp_path, 'min_size = 10000\n').train()
    losses, _ = model(img=[torch.randn(3, 64, 64)], cat=[torch.tensor([0])],
                      iscrowd=[torch.tensor([0])], bbx=[torch.tensor([[0., 0, 32, 32]])],
                      do_loss=True, do_prediction=False)
    assert losses['roi_cls_loss'].item() == 0 and losses['roi_bbx_loss'].item() == 0
    sum(losses.values()).backward()


@pytest.mark.parametrize('seed', range(4))
def test_classwise_nms_equals_one_batched_nms(seed):
    from gluontrain.torch.ops import batched_nms
    g = torch.Generator().manual_seed(seed)
    n = 300
    y0, x0 = torch.rand(n, generator=g) * 50, torch.rand(n, generator=g) * 50
    boxes = torch.stack([y0, x0, y0 + 5 + torch.rand(n, generator=g) * 30,
                         x0 + 5 + torch.rand(n, generator=g) * 30], 1)
    scores = (torch.rand(n, generator=g) * 10).round() / 10  # many exact ties
    classes = torch.randint(0, 7, (n,), generator=g)
    for top in (1000, 25):
        want = batched_nms(boxes, scores, classes, .3, suppress_equal=True, max_output=top,
                           reference='seamseg')
        got = algos._classwise_nms(boxes, scores, classes, .3, top)
        assert got.tolist() == want.tolist()
