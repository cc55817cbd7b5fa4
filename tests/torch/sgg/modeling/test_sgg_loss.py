"""Relation losses on hand-made logits."""
import math

import torch

from gluontrain.torch.sgg.modeling.loss import RelationLossComputation, label_smoothing_loss
from gluontrain.torch.twostage.structures import BoxList


def _props(labels):
    b = BoxList(torch.zeros(len(labels), 4), (10, 10))
    b.add_field('labels', torch.tensor(labels))
    return b


def test_cross_entropy_over_the_batch():
    rel = [torch.tensor([[0., 0.]]), torch.tensor([[math.log(3.), 0.]])]
    rel_labels = [torch.tensor([0]), torch.tensor([1])]
    obj = [torch.tensor([[0., 0., 0.]]), torch.tensor([[0., math.log(2.), 0.]])]
    loss_rel, loss_obj = RelationLossComputation()([_props([2]), _props([1])], rel_labels,
                                                   rel, obj)
    # rel: -log(1/2), -log(1/4) -> mean 1.5 log 2; obj: -log(1/3), -log(2/4)
    assert math.isclose(loss_rel.item(), 1.5 * math.log(2.), rel_tol=1e-6)
    assert math.isclose(loss_obj.item(), (math.log(3.) + math.log(2.)) / 2, rel_tol=1e-6)


def test_predcls_one_hot_refine_loss_is_zero():
    obj = torch.full((2, 3), -1000.)
    obj[0, 1] = obj[1, 2] = 1000.
    _, loss_obj = RelationLossComputation()([_props([1, 2])], [torch.tensor([0])],
                                            [torch.zeros(1, 2)], [obj])
    assert loss_obj.item() == 0.0


def test_label_smoothing_value():
    # 2 classes, e = 0.1: targets (0.95, 0.05) for label 0; uniform logits -> log 2
    loss = label_smoothing_loss(torch.zeros(1, 2), torch.tensor([0]), e=0.1)
    assert math.isclose(loss.item(), math.log(2.), rel_tol=1e-6)
    logits = torch.tensor([[math.log(3.), 0.]])  # p = (0.75, 0.25)
    want = -(0.95 * math.log(0.75) + 0.05 * math.log(0.25))
    assert math.isclose(label_smoothing_loss(logits, torch.tensor([0]), e=0.1).item(), want,
                        rel_tol=1e-6)
