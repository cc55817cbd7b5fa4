"""FPN, RPN head and ROI head: shapes, parameter counts, seamseg's initialisation."""
import math

import torch

from gluontrain.torch.frcnn import heads as H
from gluontrain.torch.frcnn.norm import BatchNormAct, GroupNormAct
from functools import partial


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


def test_rpn_head_shapes_params_and_init():
    head = H.RPNHead(256, 3, 1, 256)
    assert sum(p.numel() for p in head.parameters()) == 589824 + 512 + 771 + 3084
    assert torch.count_nonzero(head.conv_obj.bias) == 0
    # xavier-normal gain .01 on a 1x1 conv 256 -> 3: std = .01 * sqrt(2 / (256 + 3))
    assert abs(head.conv_bbx.weight.std().item() - .01 * math.sqrt(2 / (256 + 12))) < 2e-4
    obj, bbx = head(torch.randn(2, 256, 5, 7))
    assert obj.shape == (2, 3, 5, 7) and bbx.shape == (2, 12, 5, 7)


def test_roi_head_shapes_params_and_init():
    classes = {'total': 10, 'stuff': 0, 'thing': 10}
    head = H.FPNROIHead(256, classes, (14, 14))
    assert head.fc.fc1.in_features == 12544
    assert sum(p.numel() for p in head.parameters()) == (
        12544 * 1024 + 2048 + 1024 * 1024 + 2048 + 1025 * 11 + 1025 * 40)
    assert head.fc.bn1.weight.eq(1).all() and head.roi_bbx.bias.eq(0).all()
    head.eval()
    cls, bbx = head(torch.randn(5, 256, 14, 14))
    assert cls.shape == (5, 11) and bbx.shape == (5, 10, 4)
    gn_head = H.FPNROIHead(8, classes, (14, 14), 32, partial(GroupNormAct, num_groups=4))
    assert gn_head(torch.randn(3, 8, 14, 14))[0].shape == (3, 11)


def test_flatten_rpn_outputs_order():
    head = H.RPNHead(4, 3, 1, 4).eval()
    feats = [torch.randn(1, 4, 3, 2), torch.randn(1, 4, 2, 1)]
    obj, bbx, sizes = H.flatten_rpn_outputs(head, feats)
    assert sizes == [(3, 2), (2, 1)] and obj.shape == (1, 3 * 2 * 3 + 2 * 3)
    o0, b0 = head(feats[0])
    # anchor index (y, x, a) = (y * W + x) * A + a
    y, x, a = 2, 1, 2
    assert obj[0, (y * 2 + x) * 3 + a] == o0[0, a, y, x]
    assert torch.equal(bbx[0, (y * 2 + x) * 3 + a], b0[0, 4 * a:4 * a + 4, y, x])
