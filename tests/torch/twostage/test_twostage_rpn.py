"""The shared RPN head (seamseg flavour): shapes, parameter counts, initialisation, the
flattening order."""
import math

import torch

from gluontrain.torch.twostage import rpn as H


def test_rpn_head_shapes_params_and_init():
    head = H.RPNHead(256, 3, 1, 256)
    assert sum(p.numel() for p in head.parameters()) == 589824 + 512 + 771 + 3084
    assert torch.count_nonzero(head.conv_obj.bias) == 0
    # xavier-normal gain .01 on a 1x1 conv 256 -> 3: std = .01 * sqrt(2 / (256 + 3))
    assert abs(head.conv_bbx.weight.std().item() - .01 * math.sqrt(2 / (256 + 12))) < 2e-4
    obj, bbx = head(torch.randn(2, 256, 5, 7))
    assert obj.shape == (2, 3, 5, 7) and bbx.shape == (2, 12, 5, 7)


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
