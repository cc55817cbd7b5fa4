"""The ROI box head (seamseg flavour): shapes, parameter counts, initialisation."""
from functools import partial

import torch

from gluontrain.torch.twostage.box_head import FPNROIHead
from gluontrain.torch.twostage.norm import GroupNormAct


def test_roi_head_shapes_params_and_init():
    classes = {'total': 10, 'stuff': 0, 'thing': 10}
    head = FPNROIHead(256, classes, (14, 14))
    assert head.fc.fc1.in_features == 12544
    assert sum(p.numel() for p in head.parameters()) == (
        12544 * 1024 + 2048 + 1024 * 1024 + 2048 + 1025 * 11 + 1025 * 40)
    assert head.fc.bn1.weight.eq(1).all() and head.roi_bbx.bias.eq(0).all()
    head.eval()
    cls, bbx = head(torch.randn(5, 256, 14, 14))
    assert cls.shape == (5, 11) and bbx.shape == (5, 10, 4)
    gn_head = FPNROIHead(8, classes, (14, 14), 32, partial(GroupNormAct, num_groups=4))
    assert gn_head(torch.randn(3, 8, 14, 14))[0].shape == (3, 11)
