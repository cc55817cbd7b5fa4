"""ROI sampling / ROIAlign against the references' C++ loops written out, hand-computed
values, gradient checks and FPN level assignment; ROIAlign's adaptive sampling ratio also
against maskrcnn-benchmark's compiled kernel (recorded fixture)."""
import json
import math
import os

import numpy as np

import pytest
import torch

from gluontrain.torch.ops import (fpn_levels, multilevel_roi_align, multilevel_roi_sampling,
                                  roi_align, roi_sampling)


def seamseg_loop(x, boxes, idx, size, padding='border'):
    """seamseg's roi_sampling_cpu.cpp + include/roi_sampling.h, one output value at a time."""
    k, (c, h, w) = boxes.shape[0], x.shape[1:]
    out = torch.zeros(k, c, *size, dtype=x.dtype)

    def get(n, ch, i, j):
        if padding == 'border':
            return x[n, ch, min(max(i, 0), h - 1), min(max(j, 0), w - 1)].item()
        return x[n, ch, i, j].item() if 0 <= i < h and 0 <= j < w else 0.0

    for r in range(k):
        y0, x0, y1, x1 = boxes[r].tolist()
        for ch in range(c):
            for a in range(size[0]):
                sy = (a + 0.5) / size[0] * (y1 - y0) + y0
                il = math.floor(sy - 0.5)
                dy = sy - (il + 0.5)
                for b in range(size[1]):
                    sx = (b + 0.5) / size[1] * (x1 - x0) + x0
                    jl = math.floor(sx - 0.5)
                    dx = sx - (jl + 0.5)
                    n = int(idx[r])
                    lo = (1 - dx) * get(n, ch, il, jl) + dx * get(n, ch, il, jl + 1)
                    hi = (1 - dx) * get(n, ch, il + 1, jl) + dx * get(n, ch, il + 1, jl + 1)
                    out[r, ch, a, b] = (1 - dy) * lo + dy * hi
    return out


def roialign_loop(x, boxes, idx, size, scale, ratio, aligned=False):
    """maskrcnn-benchmark's ROIAlign_cpu.cpp (and torchvision's aligned variant), with its
    adaptive ``ratio <= 0`` grid ``ceil(roi size / bins)`` (torchvision: an empty grid -> 0)."""
    k, (c, h, w) = boxes.shape[0], x.shape[1:]
    out = torch.zeros(k, c, *size, dtype=x.dtype)
    off = 0.5 if aligned else 0.0
    for r in range(k):
        x1, y1, x2, y2 = [v * scale - off for v in boxes[r].tolist()]
        rw, rh = x2 - x1, y2 - y1
        if not aligned:
            rw, rh = max(rw, 1.), max(rh, 1.)
        bh, bw = rh / size[0], rw / size[1]
        gh = ratio if ratio > 0 else math.ceil(rh / size[0])
        gw = ratio if ratio > 0 else math.ceil(rw / size[1])
        for ph in range(size[0]):
            for pw in range(size[1]):
                acc = torch.zeros(c, dtype=x.dtype)
                for iy in range(gh):
                    yy = y1 + ph * bh + (iy + .5) * bh / gh
                    for ix in range(gw):
                        xx = x1 + pw * bw + (ix + .5) * bw / gw
                        y, xv = yy, xx
                        if y < -1.0 or y > h or xv < -1.0 or xv > w:
                            continue
                        y, xv = max(y, 0.), max(xv, 0.)
                        yl, xl = int(y), int(xv)
                        if yl >= h - 1:
                            yh = yl = h - 1
                            y = float(yl)
                        else:
                            yh = yl + 1
                        if xl >= w - 1:
                            xh = xl = w - 1
                            xv = float(xl)
                        else:
                            xh = xl + 1
                        ly, lx = y - yl, xv - xl
                        hy, hx = 1 - ly, 1 - lx
                        f = x[int(idx[r])]
                        acc += (hy * hx * f[:, yl, xl] + hy * lx * f[:, yl, xh]
                                + ly * hx * f[:, yh, xl] + ly * lx * f[:, yh, xh])
                out[r, :, ph, pw] = acc / max(gh * gw, 1)
    return out


def random_rois(k, seed, h, w):
    gen = torch.Generator().manual_seed(seed)
    lo = torch.rand(k, 2, generator=gen) * torch.tensor([h, w]) * 1.2 - 2
    size = torch.rand(k, 2, generator=gen) * torch.tensor([h, w])
    boxes = torch.cat([lo, lo + size], 1).double()
    if k >= 2:
        boxes[0] = torch.tensor([3., 3., 3., 3.])       # empty box
        boxes[1] = torch.tensor([-5., -5., h + 5., w + 5.])  # beyond every border
    return boxes, torch.randint(0, 2, (k,), generator=gen)


@pytest.mark.parametrize('k,size', [(1, (2, 3)), (6, (14, 14)), (9, (5, 4))])
@pytest.mark.parametrize('padding', ['border', 'zero'])
def test_roi_sampling_equals_seamseg_loop(k, size, padding):
    x = torch.randn(2, 2, 7, 9, dtype=torch.float64, generator=torch.Generator().manual_seed(k))
    boxes, idx = random_rois(k, k, 7, 9)
    got = roi_sampling(x, boxes, idx, size, padding)
    assert torch.allclose(got, seamseg_loop(x, boxes, idx, size, padding), atol=1e-12)


@pytest.mark.parametrize('k,size,scale,ratio', [(1, (7, 7), 1.0, 2), (8, (3, 4), .5, 2),
                                                (5, (2, 2), .25, 3)])
@pytest.mark.parametrize('aligned', [False, True])
def test_roi_align_equals_maskrcnn_loop(k, size, scale, ratio, aligned):
    x = torch.randn(2, 3, 6, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(k))
    boxes, idx = random_rois(k, 10 + k, 6 / scale, 8 / scale)
    boxes = boxes[:, [1, 0, 3, 2]]  # (x1, y1, x2, y2)
    got = roi_align(x, boxes, idx, size, scale, ratio, aligned)
    want = roialign_loop(x, boxes, idx, size, scale, ratio, aligned)
    assert torch.allclose(got, want, atol=1e-12)


def test_hand_computed_values():
    # a ramp x[i, j] = 10 i + j: bilinear sampling returns the sample point's own value
    ramp = (10 * torch.arange(6.)[:, None] + torch.arange(8.)[None]).view(1, 1, 6, 8)
    # seamseg: box (y 1..3, x 2..6) at 2x2 -> centres y 1.5, 2.5 and x 3, 5; pixel centres
    # at +0.5, so value = 10 (y - 0.5) + (x - 0.5)
    got = roi_sampling(ramp, torch.tensor([[1., 2., 3., 6.]]), torch.tensor([0]), (2, 2))
    assert got.view(-1).tolist() == [12.5, 14.5, 22.5, 24.5]
    # ROIAlign: box x 2..6, y 1..3, one 1x1 bin of 2x2 samples at y 1.5, 2.5 and x 3, 5
    got = roi_align(ramp, torch.tensor([[2., 1., 6., 3.]]), torch.tensor([0]), (1, 1), 1.0, 2)
    assert got.item() == pytest.approx((10 * 1.5 + 3 + 10 * 1.5 + 5 + 10 * 2.5 + 3
                                        + 10 * 2.5 + 5) / 4)
    # ROIAlign forces a degenerate box to 1x1 pixel: point (2, 1) -> samples at +0.25, +0.75
    got = roi_align(ramp, torch.tensor([[2., 1., 2., 1.]]), torch.tensor([0]), (1, 1), 1.0, 2)
    assert got.item() == pytest.approx(10 * 1.5 + 2.5)


def test_empty_rois():
    x = torch.randn(1, 4, 5, 5)
    none, idx = torch.zeros(0, 4), torch.zeros(0, dtype=torch.long)
    assert roi_sampling(x, none, idx).shape == (0, 4, 14, 14)
    assert roi_align(x, none, idx).shape == (0, 4, 7, 7)
    assert multilevel_roi_align([x, x], none, idx, (1 / 4, 1 / 8)).shape == (0, 4, 7, 7)


def test_batch_index_out_of_range_is_refused():
    with pytest.raises(ValueError, match='batch_idx'):
        roi_sampling(torch.zeros(1, 1, 4, 4), torch.tensor([[0., 0., 2., 2.]]), torch.tensor([1]))
    with pytest.raises(ValueError, match='batch_idx'):
        roi_align(torch.zeros(1, 1, 4, 4), torch.tensor([[0., 0., 2., 2.]]), torch.tensor([-1]))


def test_gradcheck():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(2, 2, 5, 6, dtype=torch.float64, generator=gen, requires_grad=True)
    boxes, idx = random_rois(4, 3, 5, 6)
    assert torch.autograd.gradcheck(lambda t: roi_sampling(t, boxes, idx, (3, 4)), (x,))
    assert torch.autograd.gradcheck(
        lambda t: roi_align(t, boxes[:, [1, 0, 3, 2]], idx, (2, 3), 1.0, 2), (x,))
    assert torch.autograd.gradcheck(
        lambda t: roi_align(t, boxes[:, [1, 0, 3, 2]], idx, (2, 2), 0.5, 2, True), (x,))


def test_fpn_levels_hand_computed():
    boxes = torch.tensor([[0., 0., 224., 224.], [0., 0., 112., 112.], [0., 0., 16., 16.],
                          [0., 0., 2000., 2000.], [0., 0., 447., 447.], [0., 0., 0., 0.]])
    # maskrcnn-benchmark LevelMapper (levels 2..5, canonical 224 -> 4, +1 areas): the
    # 447-pixel box is 448 = 2 x 224 wide with the +1, so one level up
    assert fpn_levels(boxes, 2, 5, 224, 4, plus_one=True).tolist() == [2, 1, 0, 3, 3, 0]
    # seamseg (levels 0..3, canonical 224 -> 2, no +1): 447 < 448 stays on level 2
    assert fpn_levels(boxes, 0, 3, 224, 2).tolist() == [2, 1, 0, 3, 2, 0]


def test_multilevel_poolers_assemble_the_single_level_ops():
    gen = torch.Generator().manual_seed(1)
    feats = [torch.randn(2, 3, 64 // s, 48 // s, generator=gen) for s in (4, 8, 16, 32)]
    boxes = torch.tensor([[0., 0., 30., 40.], [5., 3., 60., 45.], [0., 0., 64., 48.],
                          [10., 10., 12., 11.]]) * 4
    idx = torch.tensor([0, 1, 1, 0])
    feats = [f.repeat(1, 1, 4, 4) for f in feats]  # input 256 x 192
    got = multilevel_roi_sampling(feats, boxes, idx, (256, 192))
    levels = fpn_levels(boxes, 0, 3, 224, 2)
    for r in range(4):
        f = feats[levels[r]]
        stride = torch.tensor([f.shape[2] / 256, f.shape[3] / 192]).repeat(2)
        want = roi_sampling(f, (boxes[r:r + 1] - 0.5) * stride + 0.5, idx[r:r + 1])
        assert torch.equal(got[r:r + 1], want)
    xyxy = boxes[:, [1, 0, 3, 2]]
    got = multilevel_roi_align(feats, xyxy, idx, (1 / 4, 1 / 8, 1 / 16, 1 / 32))
    levels = fpn_levels(xyxy, 2, 5, plus_one=True)
    for r in range(4):
        want = roi_align(feats[levels[r]], xyxy[r:r + 1], idx[r:r + 1], (7, 7),
                         1 / 2 ** (levels[r].item() + 2), 2)
        assert torch.equal(got[r:r + 1], want)


# ----- adaptive sampling ratio (sampling_ratio <= 0: ceil(roi size / bins) samples per side)

FIXTURE = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'fixtures',
                       'roi_align', 'roi_align_adaptive.npz')
FIXTURE_CASES = ['scale4_7x7_f64', 'scale8_2x3_f64', 'scale4_7x7_f32', 'scale8_2x3_ratio2_f64']


@pytest.mark.parametrize('k,size,scale', [(1, (7, 7), 1.0), (8, (3, 4), .5), (9, (2, 3), .25),
                                          (6, (7, 7), .125)])
@pytest.mark.parametrize('ratio', [0, -1])
@pytest.mark.parametrize('aligned', [False, True])
def test_roi_align_adaptive_equals_maskrcnn_loop(k, size, scale, ratio, aligned):
    x = torch.randn(2, 3, 6, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(k))
    boxes, idx = random_rois(k, 20 + k, 6 / scale, 8 / scale)
    boxes = boxes[:, [1, 0, 3, 2]]
    got = roi_align(x, boxes, idx, size, scale, ratio, aligned)
    want = roialign_loop(x, boxes, idx, size, scale, ratio, aligned)
    assert torch.allclose(got, want, atol=1e-12)


def test_roi_align_adaptive_hand_computed():
    # f[i, j] = 10 i^2 + j^2 (not bilinear, so the sample grid shows in the average)
    f = (10 * torch.arange(10.)[:, None] ** 2 + torch.arange(12.)[None] ** 2).view(1, 1, 10, 12)
    idx = torch.tensor([0])
    # box x 1.5..3.5, y 0.5..3.5 in one bin: grid ceil(3 / 1) x ceil(2 / 1) = 3 x 2, samples
    # on the pixels y 1, 2, 3 and x 2, 3
    box = torch.tensor([[1.5, 0.5, 3.5, 3.5]])
    got = roi_align(f, box, idx, (1, 1), 1.0, 0)
    assert got.item() == pytest.approx(10 * (1 + 4 + 9) / 3 + (4 + 9) / 2)
    # a fixed ratio 2 samples y 1.25, 2.75 (bilinear i^2: 1.75, 7.75) instead
    assert roi_align(f, box, idx, (1, 1), 1.0, 2).item() == pytest.approx(10 * 4.75 + 6.5)
    # 2 x 3 bins of a 6 x 6 box: bins 3 x 2 pixels, grid 3 x 2, samples y 1 + 3 a + {0, 1, 2},
    # x 1 + 2 b + {0, 1}
    got = roi_align(f, torch.tensor([[0.5, 0.5, 6.5, 6.5]]), idx, (2, 3), 1.0, 0)
    rows = [(1 + 4 + 9) / 3, (16 + 25 + 36) / 3]
    cols = [(1 + 4) / 2, (9 + 16) / 2, (25 + 36) / 2]
    want = [[10 * r + c for c in cols] for r in rows]
    assert torch.allclose(got.view(2, 3), torch.tensor(want))
    # legacy: a 0.4 x 0.3 box is forced to 1 x 1 pixel -> grid 1, one sample at its centre
    ramp = (10 * torch.arange(6.)[:, None] + torch.arange(8.)[None]).view(1, 1, 6, 8)
    got = roi_align(ramp, torch.tensor([[2., 1., 2.4, 1.3]]), idx, (1, 1), 1.0, 0)
    assert got.item() == pytest.approx(10 * 1.5 + 2.5)
    # aligned (torchvision): an empty or inverted box has an empty grid and pools to 0
    boxes = torch.tensor([[2., 2., 2., 2.], [5., 4., 2., 1.], [1., 1., 4., 4.]])
    got = roi_align(ramp, boxes, torch.tensor([0, 0, 0]), (2, 2), 1.0, 0, aligned=True)
    assert got[:2].abs().max().item() == 0 and got[2].abs().min().item() > 0
    # ... also when no box has a sample: zeros that still backpropagate (zero gradient)
    x = ramp.clone().requires_grad_(True)
    got = roi_align(x, boxes[:2], torch.tensor([0, 0]), (2, 2), 1.0, 0, aligned=True)
    got.sum().backward()
    assert got.abs().max().item() == 0 and x.grad.abs().max().item() == 0


@pytest.mark.parametrize('name', FIXTURE_CASES)
def test_roi_align_equals_maskrcnn_kernel_fixture(name):
    """Forward and feature gradient against maskrcnn-benchmark's compiled ``ROIAlign_cpu.cpp``
    on fixed inputs (``tests/fixtures/make_roi_align_fixture.py``). The reference has no CPU
    backward; the recorded gradient is ``J^T g`` with ``J`` read off the compiled forward on
    basis inputs, which is what its CUDA backward (the forward's exact adjoint) computes."""
    data = np.load(FIXTURE)
    assert name in json.loads(str(data['meta']))['cases']
    case = {key.split('/', 1)[1]: torch.from_numpy(data[key]) for key in data.files
            if key.startswith(name + '/')}
    x = case['features'].clone().requires_grad_(True)
    got = roi_align(x, case['boxes'], case['batch_idx'], tuple(case['output_size'].tolist()),
                    case['spatial_scale'].item(), int(case['sampling_ratio']))
    atol = 1e-12 if x.dtype == torch.float64 else 2e-5
    assert got.dtype == x.dtype
    assert torch.allclose(got, case['output'], atol=atol, rtol=0)
    got.backward(case['grad_output'])
    assert torch.allclose(x.grad, case['grad_features'], atol=atol * 4, rtol=0)


def test_fixture_covers_grid_sizes_and_outside_boxes():
    # the fixture exercises what it claims: grids from 1 to 4+ per side, zeros from boxes
    # wholly outside, and non-square grids
    data = np.load(FIXTURE)
    boxes = torch.from_numpy(data['scale4_7x7_f64/boxes']) * 0.25
    grid = torch.ceil(torch.clamp(boxes[:, 2:] - boxes[:, :2], min=1.0) / 7)
    assert grid.min() == 1 and grid.max() >= 6 and bool((grid[:, 0] != grid[:, 1]).any())
    assert bool((data['scale4_7x7_f64/output'] == 0).all(axis=(1, 2, 3)).any())
    assert bool((boxes[:, :2] < 0).any())


def test_roi_align_adaptive_gradcheck():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(2, 2, 5, 6, dtype=torch.float64, generator=gen, requires_grad=True)
    boxes, idx = random_rois(5, 4, 10, 12)
    boxes = boxes[:, [1, 0, 3, 2]]
    assert torch.autograd.gradcheck(lambda t: roi_align(t, boxes, idx, (2, 3), 0.5, 0), (x,))
    assert torch.autograd.gradcheck(
        lambda t: roi_align(t, boxes, idx, (2, 2), 0.5, 0, True), (x,))


@pytest.mark.parametrize('aligned', [False, True])
def test_multilevel_roi_align_adaptive(aligned):
    gen = torch.Generator().manual_seed(2)
    feats = [torch.randn(2, 3, 256 // s, 192 // s, generator=gen) for s in (4, 8, 16, 32)]
    boxes = torch.tensor([[0., 0., 30., 40.], [5., 3., 60., 45.], [0., 0., 64., 48.],
                          [10., 10., 12., 11.], [-20., -10., 190., 250.]]) * 4
    idx = torch.tensor([0, 1, 1, 0, 1])
    scales = (1 / 4, 1 / 8, 1 / 16, 1 / 32)
    got = multilevel_roi_align(feats, boxes, idx, scales, (7, 7), 0, aligned)
    levels = fpn_levels(boxes, 2, 5, plus_one=True)
    assert len(set(levels.tolist())) >= 3
    for r in range(boxes.shape[0]):
        lvl = levels[r].item()
        want = roi_align(feats[lvl], boxes[r:r + 1], idx[r:r + 1], (7, 7), scales[lvl], 0,
                         aligned)
        assert torch.equal(got[r:r + 1], want)
        assert torch.allclose(want, roialign_loop(feats[lvl], boxes[r:r + 1], idx[r:r + 1],
                                                  (7, 7), scales[lvl], 0, aligned), atol=1e-5)


@pytest.mark.parametrize('ratio', [2.5, 2.0, '2', None, True])
def test_sampling_ratio_must_be_an_integer(ratio):
    x, box, idx = torch.zeros(1, 1, 4, 4), torch.tensor([[0., 0., 2., 2.]]), torch.tensor([0])
    with pytest.raises(ValueError, match='sampling_ratio=.*must be an integer'):
        roi_align(x, box, idx, (2, 2), 1.0, ratio)
    with pytest.raises(ValueError, match='sampling_ratio'):
        multilevel_roi_align([x], box[:0], idx[:0], (1.0,), (2, 2), ratio)
    # numpy integers are integers
    assert roi_align(x, box, idx, (2, 2), 1.0, np.int64(0)).shape == (1, 1, 2, 2)
