"""FPN (seamseg flavour): shapes, parameter counts, top-down sums, extra scales."""
import math

import torch

from gluontrain.torch.twostage import fpn as H
from gluontrain.torch.twostage.norm import BatchNormAct


def test_fpn_shapes_top_down_and_param_count():
    fpn = H.FPN([256, 512, 1024, 2048], 256)
    # lateral 1x1: 256*(256+512+1024+2048); output 3x3: 4*256*256*9; 8 norms of 2*256
    assert sum(p.numel() for p in fpn.parameters()) == 983040 + 2359296 + 8 * 512
    small = H.FPN([4, 8, 16, 32], 8).eval()
    xs = [torch.randn(1, c, s, s + 1) for c, s in ((4, 16), (8, 8), (16, 4), (32, 2))]
    ys = small(xs)
    assert [tuple(y.shape) for y in ys] == [(1, 8, 16, 17), (1, 8, 8, 9), (1, 8, 4, 5),
                                           (1, 8, 2, 3)]


def test_fpn_nearest_top_down_sum():
    fpn = H.FPN([1, 1], 1).eval()
    with torch.no_grad():
        for m in fpn.modules():
            if isinstance(m, BatchNormAct):
                m.activation = 'identity'
        for m in fpn.lateral:
            m.conv.weight.fill_(1.)
        for m in fpn.output:
            m.conv.weight.zero_()
            m.conv.weight[0, 0, 1, 1] = 1.  # identity 3x3
    fine = torch.zeros(1, 1, 4, 3)
    coarse = torch.arange(4.).view(1, 1, 2, 2)
    ys = fpn([fine, coarse])
    eps = 1 / math.sqrt(1 + 1e-5)  # eval BN with running stats 0/1
    assert torch.allclose(ys[1], coarse * eps * eps)
    up = torch.tensor([[0., 0., 1.], [0., 0., 1.], [2., 2., 3.], [2., 2., 3.]])  # nearest 2x2->4x3
    assert torch.allclose(ys[0][0, 0], up * eps * eps * eps, atol=1e-6)


def test_fpn_extra_scales_start_from_last_input():
    fpn = H.FPN([4, 8], 6, extra_scales=2).eval()
    ys = fpn([torch.randn(1, 4, 16, 16), torch.randn(1, 8, 8, 8)])
    assert [tuple(y.shape[-3:]) for y in ys] == [(6, 16, 16), (6, 8, 8), (6, 4, 4), (6, 2, 2)]
    assert fpn.extra[0].conv.in_channels == 8 and fpn.extra[1].conv.in_channels == 6
