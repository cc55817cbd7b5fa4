"""gluontrain.torch.ops.compiled: the backend choice and its switch, torchvision's NMS kernel
written out (its ``nms_kernel.cpp``) so that the threshold and box adjustments are checked
where torchvision does not load, and torchvision's own kernels against ours on each call
site's rule (NMS: the same kept indices, ties included; ROIAlign: within a derived float32
bound, and bit for bit maskrcnn-benchmark's compiled CPU kernel)."""
import json
import math
import os
import subprocess
import sys
import types

import numpy as np
import pytest
import torch

from gluontrain.torch import ops
from gluontrain.torch.ops import compiled

ENV = 'GLUONTRAIN_TORCH_OPS'
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..')
FIXTURE = os.path.join(ROOT, 'tests', 'fixtures', 'roi_align', 'roi_align_adaptive.npz')


def _real_torchvision():
    try:
        from torchvision import ops as tv_ops  # pylint: disable=import-outside-toplevel
        torch.ops.torchvision.nms  # pylint: disable=pointless-statement
        return tv_ops
    except Exception:  # pylint: disable=broad-except
        return None


TV = _real_torchvision()
NEEDS_TV = pytest.mark.skipif(TV is None, reason='torchvision does not load here (the '
                                                 'torch-py313 tox env installs it)')


def torchvision_nms_cpu(boxes, scores, iou_threshold):
    """torchvision's ``csrc/ops/cpu/nms_kernel.cpp`` in float32: signed areas ``(x2 - x1) *
    (y2 - y1)``, ``ovr = inter / (iarea + areas[j] - inter)``, ``ovr > iou_threshold`` with
    the threshold a double; candidates by descending score. Its sort is not stable: equal
    scores here by decreasing index, one order it may produce."""
    b = boxes.numpy().astype(np.float32)
    zero = np.float32(0)
    area = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    order = sorted(range(len(b)), key=lambda i: (-scores[i].item(), -i))
    suppressed, keep = set(), []
    with np.errstate(invalid='ignore', divide='ignore'):
        for a, i in enumerate(order):
            if i in suppressed:
                continue
            keep.append(i)
            for j in order[a + 1:]:
                w = max(zero, min(b[i, 2], b[j, 2]) - max(b[i, 0], b[j, 0]))
                h = max(zero, min(b[i, 3], b[j, 3]) - max(b[i, 1], b[j, 1]))
                inter = np.float32(w * h)
                if float(inter / np.float32(np.float32(area[i] + area[j]) - inter)) \
                        > iou_threshold:
                    suppressed.add(j)
    return torch.tensor(keep, dtype=torch.long)


class Spy:
    """A stand-in ``torchvision.ops`` that counts the calls it gets."""

    def __init__(self, kernels):
        self.kernels, self.calls = kernels, {'nms': 0, 'roi_align': 0}

    def __getattr__(self, name):
        def call(*args):
            self.calls[name] += 1
            return getattr(self.kernels, name)(*args)
        return call


def _install(monkeypatch, kernels, env='torchvision'):
    spy = Spy(kernels)
    monkeypatch.setattr(compiled, '_STATE', {'torchvision': (spy, 'stand-in')})
    if env is None:
        monkeypatch.delenv(ENV, raising=False)
    else:
        monkeypatch.setenv(ENV, env)
    return spy


WRITTEN_OUT = types.SimpleNamespace(
    nms=torchvision_nms_cpu,
    roi_align=lambda x, rois, size, *a: x.new_zeros((rois.shape[0], x.shape[1]) + size))


@pytest.fixture(params=['written-out', 'torchvision'])
def kernels(request):
    """torchvision's ops: its CPU NMS written out (runs everywhere), or the real ones."""
    if request.param == 'torchvision':
        if TV is None:
            pytest.skip('torchvision does not load here (the torch-py313 tox env installs it)')
        return TV
    return WRITTEN_OUT


# ---------------------------------------------------------------------------- the choice
def test_default_is_torchvision_where_it_loads(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    assert ops.backend() == ('torch' if TV is None else 'torchvision')
    monkeypatch.setenv(ENV, 'torch')
    assert ops.backend() == 'torch'
    assert ops.describe() == 'detection ops: plain torch (GLUONTRAIN_TORCH_OPS=torch)'
    monkeypatch.setenv(ENV, 'cuda')
    with pytest.raises(ValueError, match="GLUONTRAIN_TORCH_OPS='cuda': choose torch or "):
        ops.backend()


def test_forcing_torchvision_where_it_does_not_load(monkeypatch):
    monkeypatch.setitem(sys.modules, 'torchvision', None)  # import torchvision -> ImportError
    monkeypatch.setattr(compiled, '_STATE', {})
    monkeypatch.delenv(ENV, raising=False)
    boxes = torch.tensor([[0., 0., 1., 3.], [0., 1., 1., 4.]])  # IoU 0.5
    assert ops.backend() == 'torch'
    assert 'plain torch (GLUONTRAIN_TORCH_OPS unset, torchvision does not load' in ops.describe()
    kept = ops.nms(boxes, torch.tensor([.9, .8]), .5, suppress_equal=True, reference='seamseg')
    assert kept.tolist() == [0]
    monkeypatch.setenv(ENV, 'torchvision')
    for call in (ops.backend, ops.describe, lambda: ops.nms(
            boxes, torch.ones(2), .5, suppress_equal=True, reference='seamseg')):
        with pytest.raises(ImportError) as err:
            call()
        msg = str(err.value)
        assert isinstance(err.value, ValueError)  # the command line's one-line error
        assert '\n' not in msg and msg.startswith('GLUONTRAIN_TORCH_OPS=torchvision but '
                                                  'torchvision does not load here')
        assert 'pip install' in msg and msg.endswith('or set GLUONTRAIN_TORCH_OPS=torch')


def test_import_does_not_import_torchvision():
    code = ("import sys, torch\n"
            "from gluontrain.torch import ops\n"
            "print('torchvision' in sys.modules)\n"
            "b = torch.tensor([[0., 0., 2., 2.]])\n"
            "ops.nms(b, torch.ones(1), .5, suppress_equal=True, reference='seamseg')\n"
            "ops.multilevel_roi_align([torch.zeros(1, 1, 4, 4)], b, torch.zeros(1).long(), "
            "(1.0,))\n"
            "print(ops.backend(), 'torchvision' in sys.modules)\n")
    env = dict(os.environ, GLUONTRAIN_TORCH_OPS='torch', OMP_NUM_THREADS='1')
    out = subprocess.run([sys.executable, '-c', code], env=env, cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout
    assert out.split() == ['False', 'torch', 'False']


def test_routes_follow_the_variable(monkeypatch):
    x = torch.randn(1, 2, 8, 8, requires_grad=True)
    boxes = torch.tensor([[0., 0., 4., 4.], [1., 1., 5., 5.]])
    scores, idx = torch.tensor([.9, .8]), torch.tensor([0, 0])

    def calls(env):
        spy = _install(monkeypatch, WRITTEN_OUT, env)
        ops.nms(boxes, scores, .5, suppress_equal=True, reference='seamseg')   # frcnn
        ops.box_nms(torch.cat([torch.zeros(2, 1), scores[:, None], boxes], 1)[None])  # yolo3
        ops.nms(boxes, scores, .5, **ops.maskrcnn_nms_options('cpu'))          # sgg: +1
        ops.nms(boxes, scores, .5)                                             # ssd's rule
        ops.ssd_nms(boxes, scores, .5)
        ops.roi_sampling(x, boxes, idx)                                        # frcnn
        ops.multilevel_roi_align([x], boxes, idx, (1.0,))                      # sgg, training
        with torch.no_grad():
            ops.roi_align(x, boxes, idx)                                       # inference
            ops.roi_align(x, boxes, idx, aligned=True)
        return spy.calls, ops.backend()

    assert calls(None) == ({'nms': 2, 'roi_align': 2}, 'torchvision')
    assert calls('torchvision') == ({'nms': 2, 'roi_align': 3}, 'torchvision')
    assert calls('torch') == ({'nms': 0, 'roi_align': 0}, 'torch')
    # dtypes the kernel does not compare as we do stay plain torch
    spy = _install(monkeypatch, WRITTEN_OUT)
    ops.nms(boxes.double(), scores.double(), .5, suppress_equal=True, reference='seamseg')
    ops.roi_align(x.detach().half(), boxes, idx)
    assert spy.calls == {'nms': 0, 'roi_align': 0}


# ---------------------------------------------------------------------------- NMS
# pairs whose float32 IoU is exactly float32(t): 30/100, 50/150, 2/4, 70/100
TIES = [[0., 0., 10., 10.], [0., 0., 10., 3.], [20., 0., 30., 10.], [25., 0., 35., 10.],
        [40., 0., 41., 3.], [40., 1., 41., 4.], [50., 0., 60., 10.], [50., 0., 60., 7.]]
# an inverted box whose signed area cancels its partner's: torchvision's IoU 0 / 0, ours 0
CANCEL = [[70., 0., 71., 3.], [75., 0., 74., 3.]]


def nms_case(n, seed, grid):
    """Boxes (the tie pairs first), scores and 3 groups: integer boxes with many exact IoU
    and score ties plus inverted and empty ones (``grid``), or float boxes."""
    gen = torch.Generator().manual_seed(seed)
    if grid:
        xy = torch.randint(0, 10, (n, 2), generator=gen).float()
        boxes = torch.cat([xy, xy + torch.randint(-1, 5, (n, 2), generator=gen)], 1)
        scores = torch.randint(0, 6, (n,), generator=gen).float()
    else:
        xy = torch.rand(n, 2, generator=gen) * 60
        boxes = torch.cat([xy, xy + torch.rand(n, 2, generator=gen) * 30], 1)
        scores = torch.rand(n, generator=gen)
    boxes = torch.cat([torch.tensor(TIES + CANCEL), boxes])
    scores = torch.cat([torch.tensor([9., 8.] * 5), scores])
    return boxes, scores, torch.randint(0, 3, (boxes.shape[0],), generator=gen)


def _both(monkeypatch, kernels, fn):
    """``fn()`` on plain torch, then on the kernels (which must have been called)."""
    monkeypatch.setenv(ENV, 'torch')
    ours = fn()
    spy = _install(monkeypatch, kernels)
    theirs = fn()
    assert spy.calls['nms'] > 0
    return ours, theirs


@pytest.mark.parametrize('grid,n', [(True, 40), (False, 120)])
@pytest.mark.parametrize('thr', [0.0, 0.3, 1 / 3, 0.5, 0.7])
def test_nms_rules_keep_what_ours_keeps(monkeypatch, kernels, grid, n, thr):
    boxes, scores, groups = nms_case(n, int(thr * 100) + n, grid)
    for suppress_equal, reference in ((True, 'seamseg'), (False, 'mxnet')):
        def run(se=suppress_equal, ref=reference):
            return [ops.nms(boxes, scores, thr, suppress_equal=se, reference=ref).tolist(),
                    ops.nms(boxes, scores, thr, suppress_equal=se, reference=ref,
                            max_output=5).tolist(),  # torchvision's prefix 10, 20, ...
                    ops.batched_nms(boxes, scores, groups, thr, se, reference=ref,
                                    max_output=n // 4, top_k=n).tolist()]
        ours, theirs = _both(monkeypatch, kernels, run)
        assert theirs == ours
    # the call sites: seamseg's proposals and per-class detections, MXNet's box_nms
    ours, theirs = _both(monkeypatch, kernels, lambda: [
        [t.tolist() for t in ops.proposal_nms(boxes, scores, (40, 70), 2, thr, n, n // 3,
                                              suppress_equal=True, reference='seamseg')],
        ops.classwise_nms(boxes, scores, groups, thr, suppress_equal=True,
                          reference='seamseg').tolist(),
        ops.box_nms(torch.cat([groups[:, None].float(), scores[:, None] / 10, boxes], 1)[None],
                    thr, 0.01, n // 2, id_index=0).tolist()])
    assert theirs == ours


def test_plain_threshold_would_break_the_ties():
    """Why the threshold is adjusted: torchvision's ``IoU > thr`` with the threshold as given
    differs from seamseg's ``>=`` (0.5, 0.7) and from MXNet's float32 ``>`` (1/3: float32
    rounds it up) on the exact ties."""
    boxes, scores = torch.tensor(TIES), torch.tensor([9., 8.] * 4)
    assert torchvision_nms_cpu(boxes, scores, 0.5).tolist() != ops.nms(
        boxes, scores, 0.5, suppress_equal=True, reference='seamseg').tolist()
    assert torchvision_nms_cpu(boxes, scores, 0.7).tolist() != ops.nms(
        boxes, scores, 0.7, suppress_equal=True, reference='seamseg').tolist()
    assert torchvision_nms_cpu(boxes, scores, 1 / 3).tolist() != ops.nms(
        boxes, scores, 1 / 3, reference='mxnet').tolist()
    # ... and why inverted sides are made empty: at IoU >= 0 the pair of signed areas 3 and
    # -3 is 0 / 0 there (kept), 0 / 3 here (suppressed)
    pair, zero = torch.tensor(CANCEL), compiled._threshold(0.0, True)
    assert torchvision_nms_cpu(pair, scores[:2], zero).tolist() == [0, 1]
    assert ops.nms(pair, scores[:2], 0.0, suppress_equal=True, reference='seamseg').tolist() == [0]
    # pylint: disable=protected-access
    assert compiled._threshold(0.5, True) == np.nextafter(np.float32(.5), np.float32(0))
    assert compiled._threshold(1 / 3, False) == float(np.float32(1 / 3)) > 1 / 3


def test_plus_one_and_ssd_rules_stay_plain_torch(monkeypatch, kernels):
    boxes, scores, groups = nms_case(60, 5, True)
    ours = [ops.nms(boxes, scores, .5, **ops.maskrcnn_nms_options('cpu')).tolist(),
            ops.classwise_nms(boxes, scores, groups, .5, 3,
                              **ops.maskrcnn_nms_options('cuda')).tolist(),
            ops.nms(boxes, scores, .5).tolist(), ops.ssd_nms(boxes, scores, .5)[0].tolist()]
    spy = _install(monkeypatch, kernels)
    assert ours == [ops.nms(boxes, scores, .5, **ops.maskrcnn_nms_options('cpu')).tolist(),
                    ops.classwise_nms(boxes, scores, groups, .5, 3,
                                      **ops.maskrcnn_nms_options('cuda')).tolist(),
                    ops.nms(boxes, scores, .5).tolist(),
                    ops.ssd_nms(boxes, scores, .5)[0].tolist()]
    assert spy.calls['nms'] == 0


# ---------------------------------------------------------------------------- ROIAlign
def align_bound(x, grid_h, grid_w, terms, u=2.0 ** -24):
    """Largest |torchvision - ours| two evaluations of the same bilinear average may differ by
    (``u``: float32's 2**-24, float64's 2**-53; gamma_j = j u / (1 - j u)).

    An output is ``(1 / n) sum_s sum_c w_sc x_sc`` over ``n = grid_h * grid_w`` samples of 4
    bilinear reads, with ``w >= 0`` and ``sum_c w_sc <= 1``. Both compute the same sample
    coordinates (the same float32 operations; the scales are powers of two), so they differ
    only in how the ``4 n`` products are rounded and summed: torchvision forms ``hy * hx``,
    multiplies, accumulates in sample order and divides by ``n``; ours sums per-axis weights
    (at most ``grid`` terms each, times ``1 / grid``) and forms ``Wy @ crop @ Wx^T``. Each is
    within ``gamma_(terms + 2 (grid_h + grid_w) + 4) * sum |terms|`` of the exact value (a sum
    of ``terms`` products, each with at most ``2 (grid_h + grid_w) + 4`` roundings), and
    ``sum |terms| <= max |x|`` for the forward (``terms = 4 n``). Two evaluations: twice that.
    """
    j = terms + 2 * (grid_h + grid_w) + 4
    return 2 * j * u / (1 - j * u) * x


def _grid(boxes, scale, size, ratio, aligned):
    if ratio > 0:
        return ratio, ratio
    side = boxes[:, 2:] * scale - boxes[:, :2] * scale
    side = side if aligned else side.clamp(min=1.0)
    return tuple(int(math.ceil(v)) for v in (side[:, 1].max() / size[0],
                                             side[:, 0].max() / size[1]))


def _align_case(seed, k=24, shape=(40, 48), scale=0.25):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(2, 8, *shape, generator=gen)
    img = torch.tensor(shape[::-1], dtype=torch.float32) / scale
    lo = torch.rand(k, 2, generator=gen) * img * 1.1 - 8
    boxes = torch.cat([lo, lo + 2 + torch.rand(k, 2, generator=gen) * img * 0.4], 1)
    boxes[0] = torch.tensor([-20., -20., img[0] + 20, img[1] + 20])  # beyond every border
    boxes[1] = torch.tensor([30., 30., 30.5, 30.2])                  # under a pixel
    return x, boxes, torch.randint(0, 2, (k,), generator=gen), scale


@NEEDS_TV
@pytest.mark.parametrize('ratio,aligned', [(2, False), (0, False), (2, True), (0, True)])
@pytest.mark.parametrize('dtype,u', [(torch.float32, 2.0 ** -24), (torch.float64, 2.0 ** -53)])
def test_roi_align_within_the_rounding_bound(monkeypatch, ratio, aligned, dtype, u):
    """Forward and backward; float64 makes the (loose) backward bound tight enough that one
    misplaced sample, ``|w g| / n >~ 1e-3``, would show."""
    x, boxes, idx, scale = _align_case(ratio + 2 * aligned)
    x, boxes, size = x.to(dtype), boxes.to(dtype), (7, 7)
    g = torch.randn(boxes.shape[0], x.shape[1], *size, generator=torch.Generator().manual_seed(9),
                    dtype=dtype)
    out, grad = {}, {}
    for env in ('torch', 'torchvision'):
        monkeypatch.setenv(ENV, env)
        leaf = x.clone().requires_grad_(True)
        out[env] = ops.roi_align(leaf, boxes, idx, size, scale, ratio, aligned)
        out[env].backward(g)
        grad[env] = leaf.grad
    gh, gw = _grid(boxes, scale, size, ratio, aligned)
    assert gh * gw >= (4 if ratio else 9)
    diff = (out['torch'] - out['torchvision']).abs().max().item()
    assert 0 < diff <= align_bound(x.abs().max().item(), gh, gw, 4 * gh * gw, u)
    # The gradient of a pixel sums, over every (ROI, bin, sample, corner) that reads it, w g / n:
    # at most 4 n K h w terms, and sum |terms| is the backward of |g| (nonnegative weights).
    monkeypatch.setenv(ENV, 'torch')
    leaf = x.clone().requires_grad_(True)
    ops.roi_align(leaf, boxes, idx, size, scale, ratio, aligned).backward(g.abs())
    bound = align_bound(leaf.grad, gh, gw, 4 * gh * gw * boxes.shape[0] * size[0] * size[1], u)
    assert bool(((grad['torch'] - grad['torchvision']).abs() <= bound).all())
    assert (grad['torch'] - grad['torchvision']).abs().max().item() > 0


@NEEDS_TV
def test_multilevel_pooler_within_the_float32_bound(monkeypatch):
    gen = torch.Generator().manual_seed(3)
    feats = [torch.randn(2, 8, 640 // s, 768 // s, generator=gen) for s in (4, 8, 16, 32)]
    _, boxes, idx, _ = _align_case(7, k=40, shape=(160, 192))
    scales = (1 / 4, 1 / 8, 1 / 16, 1 / 32)
    out = {}
    for env in ('torch', 'torchvision'):
        monkeypatch.setenv(ENV, env)
        out[env] = ops.multilevel_roi_align(feats, boxes, idx, scales, (7, 7), 2)
    levels = ops.fpn_levels(boxes, 2, 5, plus_one=True)
    assert len(set(levels.tolist())) >= 3
    bound = align_bound(max(f.abs().max().item() for f in feats), 2, 2, 16)
    assert 0 < (out['torch'] - out['torchvision']).abs().max().item() <= bound


@NEEDS_TV
def test_roi_align_on_the_cpu_is_maskrcnn_benchmarks_kernel_bit_for_bit(monkeypatch):
    """The recorded outputs of maskrcnn-benchmark's compiled ``ROIAlign_cpu.cpp`` (the
    fixture of tests/torch/ops/test_ops_roi.py): torchvision's CPU forward is the same code,
    equal in every bit; ours sums in another order (within 1e-6 there)."""
    data = np.load(FIXTURE)
    monkeypatch.setenv(ENV, 'torchvision')
    for name in json.loads(str(data['meta']))['cases']:
        case = {key.split('/', 1)[1]: torch.from_numpy(data[key]) for key in data.files
                if key.startswith(name + '/')}
        got = ops.roi_align(case['features'], case['boxes'], case['batch_idx'],
                            tuple(case['output_size'].tolist()), case['spatial_scale'].item(),
                            int(case['sampling_ratio']))
        assert torch.equal(got, case['output']), name
