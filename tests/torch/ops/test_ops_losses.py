"""seamseg's smooth_l1: hand-computed values on both branches, the gradient, reductions;
the ROI box head's loss (seamseg's ``DetectionLoss``) on hand-computed values."""
import math

import pytest
import torch

from gluontrain.torch.ops import fast_rcnn_loss, smooth_l1


def _sl1(d, sigma):
    d = abs(d)
    s2 = sigma ** 2
    return 0.5 * s2 * d * d if d < 1. / s2 else d - 0.5 / s2


def test_hand_computed_sigma_3_and_1():
    x = torch.tensor([0.1, -0.1, 0.5, -2.0], requires_grad=True)
    loss = smooth_l1(x, torch.zeros(4), sigma=3.)
    # |d| < 1/9: 0.5 * 9 * d^2; else |d| - 0.5/9
    want = [4.5 * .01, 4.5 * .01, .5 - .5 / 9, 2. - .5 / 9]
    assert loss.tolist() == pytest.approx(want)
    loss.sum().backward()
    assert x.grad.tolist() == pytest.approx([9 * .1, -9 * .1, 1., -1.])
    assert smooth_l1(torch.tensor([0.5, 2.]), torch.zeros(2)).tolist() == pytest.approx([.125, 1.5])


def test_fast_rcnn_loss_hand_computed():
    p = [[.2, .3, .5], [.6, .3, .1], [.25, .25, .5]]
    cls_logits = torch.tensor(p, dtype=torch.float64).log()
    cls_lbl = torch.tensor([2, 0, 1])
    bbx_logits = torch.zeros(3, 2, 4, dtype=torch.float64)
    bbx_logits[0, 1] = torch.tensor([0.5, 0., 0., 0.], dtype=torch.float64)  # class 2 of ROI 0
    bbx_logits[0, 0] = 9.  # another class: ignored
    bbx_logits[1] = 9.  # background ROI: ignored
    bbx_logits[2, 0] = torch.tensor([0., 2., 0., 0.], dtype=torch.float64)  # class 1 of ROI 2
    bbx_lbl = torch.zeros(2, 4, dtype=torch.float64)
    cls, bbx = fast_rcnn_loss(cls_logits, bbx_logits, cls_lbl, bbx_lbl, sigma=1.)
    assert cls.item() == pytest.approx(-(math.log(.5) + math.log(.6) + math.log(.25)) / 3)
    # divided by all 3 sampled ROIs, not by the 2 positives
    assert bbx.item() == pytest.approx((_sl1(.5, 1.) + _sl1(2., 1.)) / 3)
