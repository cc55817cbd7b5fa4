"""The CPU path of the ROI ops (two matrix products per ROI) against the grid_sample path
(float64: the same values up to summation order), hand-computed axis weights, and its
backward against autograd's numerical gradient."""
import importlib

import pytest
import torch

from gluontrain.torch.ops import (multilevel_roi_align, multilevel_roi_sampling, roi_align,
                                  roi_sampling)
from gluontrain.torch.ops.roi_cpu import axis_weights, separable_sample

roi = importlib.import_module('gluontrain.torch.ops.roi')


@pytest.fixture(autouse=True)
def plain_torch(monkeypatch):
    """The plain-torch paths, never torchvision's kernel (that is test_compiled.py's)."""
    monkeypatch.setenv('GLUONTRAIN_TORCH_OPS', 'torch')


def _boxes(gen, n, size, lo=-6.0, dtype=torch.float64):
    """Corner boxes, some across the border or beyond it, some thinner than a pixel."""
    start = torch.rand(n, 2, generator=gen, dtype=dtype) * (size + 8) + lo
    side = torch.rand(n, 2, generator=gen, dtype=dtype) * size * 0.6
    side[::5] *= 0.02
    return torch.cat([start, start + side], 1)


def _both_paths(monkeypatch, fn, *feats):
    """(separable output, grid_sample output) of ``fn`` and their feature gradients."""
    results = []
    for devices in (('cpu',), ()):
        monkeypatch.setattr(roi, '_SEPARABLE_DEVICES', devices)
        leaves = [f.clone().requires_grad_() for f in feats]
        out = fn(*leaves)
        out.backward(torch.arange(out.numel(), dtype=out.dtype).view(out.shape).sin())
        results.append((out.detach(), [leaf.grad for leaf in leaves]))
    return results


def _close_grads(ga, gb):
    """Equal gradients, a map no ROI reads having none on both paths."""
    return all((p is None and q is None) or torch.allclose(p, q, atol=1e-12, rtol=0)
               for p, q in zip(ga, gb))


def test_axis_weights_by_hand():
    # ROI 0: two samples in cell 0 (pixels 2/3, then 3/4), one in cell 1 (pixel 5 only);
    # ROI 1 has no sample
    roi_idx, cell = torch.tensor([0, 0, 0]), torch.tensor([0, 0, 1])
    lo, hi = torch.tensor([2, 3, 5]), torch.tensor([3, 4, 5])
    w_lo, w_hi = torch.tensor([.25, .5, .5]), torch.tensor([.25, 0., .5])
    weights, first, span = axis_weights(roi_idx, cell, lo, hi, w_lo, w_hi, 2, 2)
    assert first.tolist() == [2, 0] and span.tolist() == [4, 1]
    assert weights[0].tolist() == [[.25, .75, 0., 0.], [0., 0., 0., 1.]]
    assert not weights[1].any()


@pytest.mark.parametrize('padding', ['border', 'zero'])
def test_roi_sampling_equals_the_grid_sample_path(monkeypatch, padding):
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(2, 3, 9, 11, generator=gen, dtype=torch.float64)
    boxes = _boxes(gen, 12, 9)[:, [1, 0, 3, 2]]
    idx = torch.randint(0, 2, (12,), generator=gen)
    (a, ga), (b, gb) = _both_paths(
        monkeypatch, lambda t: roi_sampling(t, boxes, idx, (4, 5), padding), x)
    assert a.is_contiguous() and a.shape == (12, 3, 4, 5)
    assert torch.allclose(a, b, atol=1e-12, rtol=0)
    assert torch.allclose(ga[0], gb[0], atol=1e-12, rtol=0)


@pytest.mark.parametrize('ratio,aligned', [(2, False), (0, False), (3, True), (0, True)])
def test_roi_align_equals_the_grid_sample_path(monkeypatch, ratio, aligned):
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(2, 3, 10, 12, generator=gen, dtype=torch.float64)
    boxes = _boxes(gen, 15, 20)  # scale 0.5: across, beyond and inside the map
    boxes[3] = boxes[3, [2, 3, 0, 1]]  # an inverted box (aligned: an empty grid, 0)
    idx = torch.randint(0, 2, (15,), generator=gen)
    (a, ga), (b, gb) = _both_paths(
        monkeypatch, lambda t: roi_align(t, boxes, idx, (3, 4), 0.5, ratio, aligned), x)
    assert a.is_contiguous()
    assert torch.allclose(a, b, atol=1e-12, rtol=0)
    assert torch.allclose(ga[0], gb[0], atol=1e-12, rtol=0)


def test_multilevel_ops_equal_the_grid_sample_path(monkeypatch):
    gen = torch.Generator().manual_seed(2)
    feats = [torch.randn(2, 4, 32 >> k, 40 >> k, generator=gen, dtype=torch.float64)
             for k in range(4)]
    boxes = _boxes(gen, 20, 250, lo=0.0)
    idx = torch.randint(0, 2, (20,), generator=gen)
    (a, ga), (b, gb) = _both_paths(
        monkeypatch, lambda *f: multilevel_roi_align(f, boxes, idx, (1 / 4, 1 / 8, 1 / 16),
                                                     (2, 2), 2), *feats)
    assert torch.allclose(a, b, atol=1e-12, rtol=0)
    assert _close_grads(ga, gb) and sum(g is not None for g in ga) >= 2
    (a, ga), (b, gb) = _both_paths(
        monkeypatch, lambda *f: multilevel_roi_sampling(f, boxes[:, [1, 0, 3, 2]], idx,
                                                        (128, 160), (3, 3)), *feats)
    assert torch.allclose(a, b, atol=1e-12, rtol=0)
    assert _close_grads(ga, gb) and sum(g is not None for g in ga) >= 2


def test_separable_backward_is_the_adjoint():
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(2, 2, 5, 6, generator=gen, dtype=torch.float64, requires_grad=True)
    boxes = _boxes(gen, 4, 5)
    idx = torch.tensor([0, 1, 1, 0])
    assert torch.autograd.gradcheck(lambda t: roi_align(t, boxes, idx, (2, 3), 1.0, 2), (x,))
    assert torch.autograd.gradcheck(lambda t: roi_sampling(t, boxes, idx, (3, 2)), (x,))


def test_channels_last_maps_and_float32():
    gen = torch.Generator().manual_seed(4)
    x = torch.randn(2, 5, 16, 20, generator=gen)
    boxes = _boxes(gen, 7, 16, dtype=torch.float32)
    idx = torch.randint(0, 2, (7,), generator=gen)
    want = roi_align(x, boxes, idx, (3, 3), 1.0, 2)
    got = roi_align(x.contiguous(memory_format=torch.channels_last), boxes, idx, (3, 3), 1.0, 2)
    assert want.dtype == torch.float32 and torch.equal(want, got)
    direct = separable_sample(x, idx, *(roi._align_axis(  # pylint: disable=protected-access
        boxes[:, a], boxes[:, a + 2], 3, 2, False, x.shape[3 - a]) for a in (1, 0)))
    assert not direct.is_contiguous() and torch.equal(direct.contiguous(), want)


def test_no_roi_and_bad_image_index():
    x = torch.randn(1, 2, 4, 4)
    assert roi_align(x, torch.zeros(0, 4), torch.zeros(0, dtype=torch.long)).shape == (0, 2, 7, 7)
    assert roi_sampling(x, torch.zeros(0, 4), torch.zeros(0, dtype=torch.long),
                        (3, 3)).shape == (0, 2, 3, 3)
    with pytest.raises(ValueError, match='batch_idx must index the 1 images'):
        roi_align(x, torch.tensor([[0., 0., 2., 2.]]), torch.tensor([1]))
