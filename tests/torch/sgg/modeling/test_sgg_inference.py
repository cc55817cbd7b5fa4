"""Relation post-processor: ordering and fields on hand-made probabilities; SGDet labelling."""
import torch

from gluontrain.torch.sgg.modeling.inference import PostProcessor
from gluontrain.torch.sgg.modeling.predictors.utils_relation import (nms_overlaps,
                                                                     obj_prediction_nms)
from gluontrain.torch.twostage.structures import BoxList


def test_predcls_ordering_and_fields():
    # logits = log(p): softmax gives back p
    obj_p = torch.tensor([[0.1, 0.9, 0.0], [0.5, 0.2, 0.3], [0.0, 0.4, 0.6]])
    rel_p = torch.tensor([[0.5, 0.5, 0.0], [0.1, 0.1, 0.8], [0.0, 0.7, 0.3]])
    pairs = torch.tensor([[0, 1], [1, 2], [2, 0]])
    box = BoxList(torch.tensor([[0., 0., 5., 5.], [1., 1., 6., 6.], [2., 2., 8., 8.]]), (10, 10))
    out = PostProcessor(use_gt_box=True)(([rel_p.log()], [obj_p.log()]), [pairs], [box])[0]
    assert out.get_field('pred_labels').tolist() == [1, 2, 2]
    assert torch.allclose(out.get_field('pred_scores'), torch.tensor([0.9, 0.3, 0.6]))
    # triplets: 0.5*0.9*0.3 = 0.135, 0.8*0.3*0.6 = 0.144, 0.7*0.6*0.9 = 0.378
    assert out.get_field('rel_pair_idxs').tolist() == [[2, 0], [1, 2], [0, 1]]
    assert out.get_field('pred_rel_labels').tolist() == [1, 2, 1]
    assert torch.allclose(out.get_field('pred_rel_scores'), rel_p[[2, 1, 0]])


def test_nms_overlaps_plus_one():
    boxes = torch.tensor([[[0., 0., 9., 9.]], [[0., 0., 9., 4.]]])
    iou = nms_overlaps(boxes)
    assert iou.shape == (2, 2, 1)
    assert torch.allclose(iou[0, 1, 0], torch.tensor(0.5)) and iou[0, 0, 0] == 1


def test_obj_prediction_nms_greedy():
    # objects 0 and 1 overlap (IoU 1 in every class); 2 is apart
    b = torch.tensor([[0., 0., 9., 9.], [0., 0., 9., 9.], [50., 50., 59., 59.]])
    boxes = b[:, None].expand(3, 3, 4)
    p = torch.tensor([[0.0, 0.8, 0.2], [0.0, 0.7, 0.3], [0.0, 0.6, 0.4]])
    # obj 0 takes class 1 (0.8); obj 1 loses class 1 (overlap), keeps 0.3 in class 2;
    # obj 2 takes class 1 (0.6)
    assert obj_prediction_nms(boxes, p.log(), 0.3).tolist() == [1, 2, 1]


def test_sgdet_boxes_of_the_chosen_class():
    per_cls = torch.tensor([[[0., 0., 1., 1.], [0., 0., 9., 9.], [0., 0., 5., 5.]],
                            [[0., 0., 1., 1.], [20., 20., 29., 29.], [20., 20., 25., 25.]]])
    box = BoxList(torch.tensor([[0., 0., 9., 9.], [20., 20., 29., 29.]]), (40, 40))
    box.add_field('boxes_per_cls', per_cls)
    obj_p = torch.tensor([[0.2, 0.7, 0.1], [0.2, 0.1, 0.7]])
    rel_p = torch.tensor([[0.2, 0.8], [0.6, 0.4]])
    out = PostProcessor(use_gt_box=False)(([rel_p.log()], [obj_p.log()]),
                                          [torch.tensor([[0, 1], [1, 0]])], [box])[0]
    assert out.get_field('pred_labels').tolist() == [1, 2]
    assert out.bbox.tolist() == [[0., 0., 9., 9.], [20., 20., 25., 25.]]
    assert out.get_field('rel_pair_idxs').tolist() == [[0, 1], [1, 0]]
