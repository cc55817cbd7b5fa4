"""seamseg's smooth_l1: hand-computed values on both branches, the gradient, reductions."""
import pytest
import torch

from gluontrain.torch.ops import smooth_l1


def test_hand_computed_sigma_3_and_1():
    x = torch.tensor([0.1, -0.1, 0.5, -2.0], requires_grad=True)
    loss = smooth_l1(x, torch.zeros(4), sigma=3.)
    # |d| < 1/9: 0.5 * 9 * d^2; else |d| - 0.5/9
    want = [4.5 * .01, 4.5 * .01, .5 - .5 / 9, 2. - .5 / 9]
    assert loss.tolist() == pytest.approx(want)
    loss.sum().backward()
    assert x.grad.tolist() == pytest.approx([9 * .1, -9 * .1, 1., -1.])
    assert smooth_l1(torch.tensor([0.5, 2.]), torch.zeros(2)).tolist() == pytest.approx([.125, 1.5])


def test_reductions():
    a, b = torch.randn(5, 4), torch.randn(5, 4)
    full = smooth_l1(a, b, 3.)
    assert smooth_l1(a, b, 3., 'sum').item() == pytest.approx(full.sum().item())
    assert smooth_l1(a, b, 3., 'mean').item() == pytest.approx(full.mean().item())
    assert smooth_l1(torch.zeros(0, 4), torch.zeros(0, 4), reduction='sum').item() == 0
    with pytest.raises(ValueError, match='reduction'):
        smooth_l1(a, b, reduction='avg')
