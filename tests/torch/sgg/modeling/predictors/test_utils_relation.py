"""utils_relation: +1 IoU per class, greedy per-class NMS labels, pair box codes, inits."""
import torch

from gluontrain.torch.sgg.modeling.predictors import utils_relation as ur
from gluontrain.torch.twostage.structures import BoxList


def test_nms_overlaps_equals_plus_one_iou():
    boxes = torch.tensor([[[0., 0., 9., 9.], [0., 0., 1., 1.]],
                          [[5., 0., 14., 9.], [10., 10., 11., 11.]]])
    ov = ur.nms_overlaps(boxes)
    assert ov.shape == (2, 2, 2)
    torch.testing.assert_close(ov[0, 1, 0], torch.tensor(50. / 150.))
    torch.testing.assert_close(ov[0, 1, 1], torch.tensor(0.))
    torch.testing.assert_close(ov[1, 1, 0], torch.tensor(1.))


def test_obj_prediction_nms_suppresses_same_class_overlaps():
    # two objects on the same spot, both preferring class 1; a third far away
    same = [0., 0., 9., 9.]
    boxes = torch.tensor([[same] * 3, [same] * 3, [[50., 50., 59., 59.]] * 3])
    logits = torch.log(torch.tensor([[0.1, 0.6, 0.3], [0.1, 0.5, 0.4], [0.1, 0.2, 0.7]]))
    labels = ur.obj_prediction_nms(boxes, logits, nms_thresh=0.3)
    # object 0 takes class 1 (0.6); object 2 class 2 (0.7); object 1 loses class 1 to
    # object 0 and takes its next class 2 (object 2's class 2 box does not overlap it)
    assert labels.tolist() == [1, 2, 2]
    # all foreground classes suppressed: SGB's decoder leaves the background (0) ...
    two = torch.tensor([[same] * 2, [same] * 2])
    logits2 = torch.log(torch.tensor([[0.2, 0.8], [0.3, 0.7]]))
    assert ur.obj_prediction_nms(two, logits2, 0.3).tolist() == [1, 0]
    # ... its Transformer (bg column -1) gives class 1 anyway
    assert ur.obj_prediction_nms(two, logits2, 0.3, bg_value=-1.0).tolist() == [1, 1]


def test_layer_init_and_make_fc():
    torch.manual_seed(0)
    lin = torch.nn.Linear(200, 300)
    ur.layer_init(lin, 0.01, normal=True)
    assert abs(lin.weight.std().item() - 0.01) < 1e-3 and lin.bias.abs().sum() == 0
    ur.layer_init(lin, xavier=True)
    assert abs(lin.weight.std().item() - (2.0 / 500) ** 0.5) < 3e-3
    fc = ur.make_fc(200, 300)
    assert fc.bias.abs().sum() == 0 and fc.weight.abs().max() <= (3.0 / 200) ** 0.5


def test_box_info_and_pair_info():
    b1 = ur.get_box_info(torch.tensor([[0., 0., 9., 9.]]), need_norm=False)
    b2 = ur.get_box_info(torch.tensor([[20., 0., 29., 9.]]), need_norm=False)
    info = ur.get_box_pair_info(b1, b2)
    assert info.shape == (1, 32)
    torch.testing.assert_close(info[0, 16:20], torch.tensor([0., 0., 29., 9.]))  # union
    assert info[0, 24:].abs().sum() == 0                                            # disjoint
    p = BoxList(torch.tensor([[0., 0., 49., 9.]]), (50, 30))
    torch.testing.assert_close(ur.get_box_info(p.bbox, True, p)[0, 6], torch.tensor(0.5))
