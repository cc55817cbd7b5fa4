"""seamseg's anchors: hand-computed sizes and the row-major-then-ratio order."""
import math

import pytest
import torch

from gluontrain.torch.ops import base_anchors, fpn_anchors, generate_anchors, grid_anchors


def test_base_anchors_hand_computed():
    a = base_anchors(4)
    # size 8 x stride = 32 at ratio 1, centred on stride / 2 = 2
    assert a[0] == (-14., -14., 18., 18.)
    # ratio .5 (h / w): h = 32 sqrt(.5), w = 32 sqrt(2)
    h, w = 32 * math.sqrt(.5), 32 * math.sqrt(2.)
    assert a[1] == pytest.approx((2 - h / 2, 2 - w / 2, 2 + h / 2, 2 + w / 2))
    assert a[2] == pytest.approx((2 - w / 2, 2 - h / 2, 2 + w / 2, 2 + h / 2))
    for anchor, ratio in zip(a, (1, .5, 2)):  # area 32^2 and ratio h / w kept
        hh, ww = anchor[2] - anchor[0], anchor[3] - anchor[1]
        assert hh * ww == pytest.approx(32 ** 2) and hh / ww == pytest.approx(ratio)
    assert len(base_anchors(16, scales=(4., 8.))) == 6


@pytest.mark.parametrize('h,w', [(1, 1), (3, 5), (4, 2)])
def test_grid_order_equals_naive_loop(h, w):
    stride = 8
    base = base_anchors(stride)
    want = [[b[0] + i * stride, b[1] + j * stride, b[2] + i * stride, b[3] + j * stride]
            for i in range(h) for j in range(w) for b in base]
    got = grid_anchors(base, stride, h, w, dtype=torch.float64)
    assert got.shape == (h * w * 3, 4)
    assert torch.allclose(got, torch.tensor(want, dtype=torch.float64))


def test_fpn_anchors_concatenate_levels_and_empty_map():
    sizes = [(4, 6), (2, 3), (1, 2), (0, 1)]
    anchors = fpn_anchors(sizes)
    assert anchors.shape == ((24 + 6 + 2 + 0) * 3, 4)
    assert (anchors[24 * 3] == torch.tensor([-28., -28., 36., 36.])).all()  # stride 8: size 64
    with pytest.raises(ValueError, match='level sizes'):
        fpn_anchors([(2, 2)])


def test_generate_anchors_detectron_values():
    # Detectron's P2 anchors (stride 4, size 32): rounded ratio sides, +1 convention
    a = generate_anchors(4, (32,), (0.5, 1., 2.))
    assert a.tolist() == [[-22., -10., 25., 13.], [-14., -14., 17., 17.], [-10., -22., 13., 25.]]


def test_grid_anchors_location_major():
    cell = generate_anchors(4, (32,), (0.5, 1., 2.))
    g = grid_anchors(cell, 4, 2, 3, layout='xy')
    assert g.shape == (18, 4)
    # location (y=0, x=1) comes after the 3 anchors of (0, 0)
    assert torch.equal(g[3], cell[0] + torch.tensor([4., 0., 4., 0.]))
    assert torch.equal(g[9], cell[0] + torch.tensor([0., 4., 0., 4.]))
