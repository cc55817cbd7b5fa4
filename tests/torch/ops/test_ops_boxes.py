"""Shared box ops against naive per-pair loops, hand-computed cases and the references' formulas."""
import math

import numpy as np
import pytest
import torch

from gluontrain.core.voc_eval import box_iou as np_box_iou
from gluontrain.torch.ops import (SCALE_CLIP, box_area, box_ioa, box_iou, center_to_corners,
                                  corners_to_center, decode, encode)


def random_boxes(n, seed, degenerate=True):
    gen = torch.Generator().manual_seed(seed)
    lo = torch.rand(n, 2, generator=gen) * 50
    size = torch.rand(n, 2, generator=gen) * 30
    if degenerate and n >= 3:
        size[0] = 0             # a point
        size[1, 0] = 0          # a line
        size[2] = -size[2]      # inverted
    return torch.cat([lo, lo + size], 1).double()


def naive_iou(a, b, plus_one):
    one = 1.0 if plus_one else 0.0
    out = torch.zeros(len(a), len(b), dtype=a.dtype)
    for i in range(len(a)):
        for j in range(len(b)):
            w = max(min(a[i, 2], b[j, 2]) - max(a[i, 0], b[j, 0]) + one, 0.0)
            h = max(min(a[i, 3], b[j, 3]) - max(a[i, 1], b[j, 1]) + one, 0.0)
            inter = w * h
            area_a = (a[i, 2] - a[i, 0] + one) * (a[i, 3] - a[i, 1] + one)
            area_b = (b[j, 2] - b[j, 0] + one) * (b[j, 3] - b[j, 1] + one)
            out[i, j] = inter / (area_a + area_b - inter)
    return out


def test_iou_hand_computed():
    a = torch.tensor([[0., 0., 4., 2.]])
    b = torch.tensor([[2., 0., 6., 2.], [10., 10., 11., 11.]])
    assert box_iou(a, b)[0].tolist() == pytest.approx([4 / 12, 0.0])
    # +1: [0..4] x [0..2] is 5x3 pixels, overlap 3x3
    assert box_iou(a, b, plus_one=True)[0, 0].item() == pytest.approx(9 / 21)
    assert box_ioa(a, b)[0, 0].item() == pytest.approx(4 / 8)
    assert box_area(a).tolist() == [8.0] and box_area(a, plus_one=True).tolist() == [15.0]


@pytest.mark.parametrize('n,m', [(1, 1), (7, 3), (20, 31)])
@pytest.mark.parametrize('plus_one', [False, True])
def test_iou_equals_naive_loop(n, m, plus_one):
    a, b = random_boxes(n, n), random_boxes(m, 100 + m)
    got, want = box_iou(a, b, plus_one), naive_iou(a, b, plus_one)
    assert torch.equal(got.isnan(), want.isnan())
    assert torch.equal(got.nan_to_num(-7), want.nan_to_num(-7))


def test_iou_empty_and_batched():
    assert box_iou(torch.zeros(0, 4), torch.zeros(5, 4)).shape == (0, 5)
    assert box_iou(torch.zeros(3, 4), torch.zeros(0, 4)).shape == (3, 0)
    a, b = random_boxes(6, 1).view(2, 3, 4), random_boxes(8, 2).view(2, 4, 4)
    batched = box_iou(a, b)
    for k in range(2):
        assert torch.equal(batched[k].nan_to_num(-7), box_iou(a[k], b[k]).nan_to_num(-7))


def test_iou_same_numbers_as_numpy_voc_eval():
    # the numpy IoU of core.voc_eval (kept framework-free) and the torch one agree bit for bit
    a, b = random_boxes(5, 3, degenerate=False), random_boxes(9, 4, degenerate=False)
    for plus_one in (False, True):
        want = np.stack([np_box_iou(box, b.numpy(), plus_one) for box in a.numpy()])
        assert np.array_equal(box_iou(a, b, plus_one).numpy(), want)


def test_iou_layout_agnostic():
    # seamseg's (y0, x0, y1, x1): swapping the axes of both sets changes nothing
    a, b = random_boxes(10, 5), random_boxes(12, 6)
    swap = [1, 0, 3, 2]
    assert torch.equal(box_iou(a, b).nan_to_num(-7), box_iou(a[:, swap], b[:, swap]).nan_to_num(-7))


def test_center_corners_round_trip():
    boxes = torch.tensor([[1., 2., 5., 10.]])
    assert corners_to_center(boxes).tolist() == [[3., 6., 4., 8.]]
    assert center_to_corners(corners_to_center(boxes)).tolist() == boxes.tolist()


def seamseg_calculate_shift(bbx0, bbx1, eps=1e-5):
    """seamseg/utils/bbx/bbx.py ``calculate_shift``, written out."""
    yx0, hw0 = 0.5 * (bbx0[:, :2] + bbx0[:, 2:]), bbx0[:, 2:] - bbx0[:, :2]
    yx1, hw1 = 0.5 * (bbx1[:, :2] + bbx1[:, 2:]), bbx1[:, 2:] - bbx1[:, :2]
    hw0 = hw0.clamp(min=eps)
    return torch.cat([(yx1 - yx0) / hw0, (hw1 / hw0).log()], 1)


def seamseg_shift_boxes(bbx, shift, scale_clip=math.log(1000. / 16.)):
    yx, hw = 0.5 * (bbx[:, :2] + bbx[:, 2:]), bbx[:, 2:] - bbx[:, :2]
    yx = yx + hw * shift[:, :2]
    hw = hw * shift[:, 2:].clamp(max=scale_clip).exp()
    return torch.cat([yx - 0.5 * hw, yx + 0.5 * hw], 1)


def test_rcnn_coder_bit_identical_to_seamseg():
    anchors, gt = random_boxes(50, 7, False).float(), random_boxes(50, 8, False).float()
    weights = (10., 10., 5., 5.)
    want = seamseg_calculate_shift(anchors, gt) * anchors.new_tensor(weights)
    got = encode(gt, anchors, weights=weights, size_eps=1e-5)
    assert torch.equal(got, want)
    deltas = torch.randn(50, 4, generator=torch.Generator().manual_seed(0)) * 3
    want = seamseg_shift_boxes(anchors, deltas / anchors.new_tensor(weights))
    assert torch.equal(decode(deltas, anchors, weights=weights, scale_clip=SCALE_CLIP), want)
    # round trip (RPN weights 1)
    back = decode(encode(gt, anchors, weights=(1., 1., 1., 1.)), anchors, weights=(1, 1, 1, 1))
    assert torch.allclose(back, gt, atol=1e-4)


def test_decode_scale_clip_hand_computed():
    anchor = torch.tensor([[0., 0., 16., 16.]])
    huge = torch.tensor([[0., 0., 100., 100.]])
    box = decode(huge, anchor, weights=(1, 1, 1, 1), scale_clip=SCALE_CLIP)
    # exp(log(1000/16)) * 16 = 1000 around centre 8
    assert box.tolist()[0] == pytest.approx([8 - 500, 8 - 500, 8 + 500, 8 + 500])


def test_ssd_variances_and_rcnn_weights_are_one_coder():
    anchors, gt = random_boxes(30, 9, False), random_boxes(30, 10, False)
    by_var = encode(gt, corners_to_center(anchors), variances=(0.1, 0.2), anchors_center=True)
    by_w = encode(gt, anchors, weights=(10., 10., 5., 5.))
    assert torch.allclose(by_var, by_w, rtol=1e-12, atol=1e-12)


def test_coder_needs_exactly_one_parametrisation():
    with pytest.raises(ValueError, match='exactly one'):
        encode(torch.zeros(1, 4), torch.ones(1, 4))
    with pytest.raises(ValueError, match='exactly one'):
        decode(torch.zeros(1, 4), torch.ones(1, 4), weights=(1, 1, 1, 1), variances=(.1, .2))
