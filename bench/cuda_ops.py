"""gluontrain.torch.ops against torchvision's compiled ops on one device, at the sizes a
two-stage detector runs them: 2000 proposals per FPN level, 5 levels, 512 ROIs pooled from
256-channel features of an 800x1216 image pair.

Each pair is first compared (kept indices equal, or the largest absolute difference and why),
then timed: median of ``repeats`` calls, ``torch.cuda.synchronize`` around each on CUDA.
"Ours" is the plain-torch path (``GLUONTRAIN_TORCH_OPS=torch`` while the rows run; the
torchvision side calls ``torchvision.ops`` directly), except the rows marked "dispatch", which
call ``gluontrain.torch.ops`` under ``GLUONTRAIN_TORCH_OPS=torchvision`` (what the recipes run
on its kernels: seamseg's ``>=`` NMS, SGB's pooler). Used by ``bench/cuda_recipes.py`` (section
``ops``); alone: ``python bench/cuda_ops.py [--device cuda] [--quick]``.
"""
import argparse
import contextlib
import json
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))

from gluontrain.torch import ops  # noqa: E402
from gluontrain.torch.ops.compiled import ENV  # noqa: E402

IMAGE = (800, 1216)
STRIDES = (4, 8, 16, 32, 64)


@contextlib.contextmanager
def ops_backend(name):
    """``GLUONTRAIN_TORCH_OPS=name`` inside the block (read by every op call), restored after."""
    previous = os.environ.get(ENV)
    os.environ[ENV] = name
    try:
        yield
    finally:
        if previous is None:
            del os.environ[ENV]
        else:
            os.environ[ENV] = previous


def _sync(device):
    if device.type == 'cuda':
        torch.cuda.synchronize(device)


def timed(fn, device, repeats, warmup=2, seconds=2.0):
    """Median seconds of ``fn()`` over ``repeats`` calls (fewer, at least 3, when they would
    take over ``seconds``), after ``warmup`` untimed ones."""
    for _ in range(warmup):
        _sync(device)
        tic = time.perf_counter()
        fn()
        _sync(device)
        first = time.perf_counter() - tic
    repeats = max(3, min(repeats, int(seconds / max(first, 1e-6))))
    times = []
    for _ in range(repeats):
        _sync(device)
        tic = time.perf_counter()
        fn()
        _sync(device)
        times.append(time.perf_counter() - tic)
    return statistics.median(times)


def random_boxes(n, size, gen, device, min_side=8., max_side=480.):
    """``(n, 4)`` float32 ``(x1, y1, x2, y2)`` boxes inside ``size = (h, w)``, sides
    log-uniform in ``[min_side, max_side]`` (proposal-like: many small, some large)."""
    h, w = size
    side = torch.exp(torch.empty(n, 2).uniform_(
        torch.log(torch.tensor(min_side)).item(), torch.log(torch.tensor(max_side)).item(),
        generator=gen))
    ctr = torch.rand(n, 2, generator=gen) * torch.tensor([w, h])
    x1y1 = (ctr - side / 2).clamp(min=0)
    x2y2 = torch.min(ctr + side / 2, torch.tensor([w - 1., h - 1.]))
    return torch.cat([x1y1, x2y2], 1).to(device)


def _kept(ours, theirs):
    a, b = ours.cpu().tolist(), theirs.cpu().tolist()
    return {'equal': a == b, 'kept_ours': len(a), 'kept_torchvision': len(b),
            'same_set': sorted(a) == sorted(b)}


def _close(ours, theirs):
    diff = (ours.float() - theirs.float()).abs()
    scale = theirs.float().abs().max().item() if theirs.numel() else 0.
    return {'max_abs_diff': diff.max().item() if diff.numel() else 0., 'max_abs': scale,
            'equal': bool(torch.equal(ours, theirs))}


def _row(name, check, t_ours, t_tv, note=''):
    return {'op': name, 'check': check, 'ours_ms': t_ours * 1e3, 'torchvision_ms': t_tv * 1e3,
            'speed_ratio_tv_over_ours': t_tv / t_ours if t_ours else None, 'note': note}


def _roi_inputs(device, gen, channels, num_rois):
    h, w = IMAGE
    feats = [torch.randn(2, channels, -(-h // s), -(-w // s), generator=gen).to(device)
             for s in STRIDES]
    boxes = random_boxes(num_rois, IMAGE, gen, device, 16., 600.)
    idx = (torch.arange(num_rois) % 2).to(device)
    return feats, boxes, idx


class _StandIn:
    """torchvision.ops' call conventions over our ops: lets ``--quick`` check this file's
    plumbing where no torchvision is installed (the figures then compare ours with ours)."""
    nms = staticmethod(ops.nms)
    batched_nms = staticmethod(ops.batched_nms)
    box_iou = staticmethod(ops.box_iou)

    @staticmethod
    def roi_align(x, rois, output_size, spatial_scale, sampling_ratio, aligned):
        return ops.roi_align(x, rois[:, 1:], rois[:, 0].long(), output_size, spatial_scale,
                             sampling_ratio, aligned)


def run(device='cuda', quick=False, log=print):
    """All comparisons on ``device``; returns a list of result rows (dicts)."""
    with ops_backend('torch'):
        return _run(device, quick, log)


def _run(device, quick, log):
    try:
        import torchvision  # pylint: disable=import-outside-toplevel
        from torchvision import ops as tv  # pylint: disable=import-outside-toplevel
        tv_version = torchvision.__version__
    except (ImportError, RuntimeError) as e:
        if not quick:  # the comparison is the point: say what is missing instead
            raise RuntimeError('torchvision is not importable ({}): install the torchvision '
                               'built for torch {}'.format(e, torch.__version__)) from e
        tv, tv_version = _StandIn, 'missing: ours in its call convention (--quick check only)'
    device = torch.device(device)
    repeats = 3 if quick else 30
    channels, num_rois, props = (32, 128, 500) if quick else (256, 512, 2000)
    gen = torch.Generator().manual_seed(0)
    rows = []
    log('  torchvision {} on {}'.format(tv_version, device))

    # RPN: NMS of 2000 proposals of one level, then 5 levels x 2 images in one batched call
    boxes = random_boxes(props, IMAGE, gen, device)
    scores = torch.rand(props, generator=gen).to(device)
    check = _kept(ops.nms(boxes, scores, 0.7), tv.nms(boxes, scores, 0.7))
    rows.append(_row('nms {} boxes, IoU 0.7'.format(props), check,
                     timed(lambda: ops.nms(boxes, scores, 0.7), device, repeats),
                     timed(lambda: tv.nms(boxes, scores, 0.7), device, repeats)))
    log('  {}'.format(rows[-1]))

    if tv is not _StandIn:  # frcnn's rule through the dispatch (threshold and boxes adjusted)
        def seamseg():
            return ops.nms(boxes, scores, 0.7, suppress_equal=True, reference='seamseg')

        def dispatched():
            with ops_backend('torchvision'):
                return seamseg()
        rows.append(_row('nms {} boxes, IoU >= 0.7 (seamseg), dispatch'.format(props),
                         _kept(seamseg(), dispatched()), timed(seamseg, device, repeats),
                         timed(dispatched, device, repeats),
                         'torchvision side: gluontrain.torch.ops.nms on its kernel'))
        log('  {}'.format(rows[-1]))

    n = props * len(STRIDES) * 2
    bb = random_boxes(n, IMAGE, gen, device)
    sc = torch.rand(n, generator=gen).to(device)
    groups = (torch.arange(n) // props).to(device)  # (image, level) pairs
    check = _kept(ops.batched_nms(bb, sc, groups, 0.7), tv.batched_nms(bb, sc, groups, 0.7))
    rows.append(_row('batched_nms {} levels x 2 images x {} boxes, IoU 0.7'.format(
        len(STRIDES), props), check,
        timed(lambda: ops.batched_nms(bb, sc, groups, 0.7), device, repeats),
        timed(lambda: tv.batched_nms(bb, sc, groups, 0.7), device, repeats),
        'torchvision offsets the boxes per group; ours computes the IoUs as given'))
    log('  {}'.format(rows[-1]))

    # detection output: 1000 boxes x 80 classes, class-wise NMS 0.5
    nd = 1000 * (8 if quick else 80)
    bd = random_boxes(nd, IMAGE, gen, device)
    sd = torch.rand(nd, generator=gen).to(device)
    cd = (torch.arange(nd) % (8 if quick else 80)).to(device)
    check = _kept(ops.batched_nms(bd, sd, cd, 0.5), tv.batched_nms(bd, sd, cd, 0.5))
    rows.append(_row('batched_nms {} boxes, {} classes, IoU 0.5'.format(
        nd, 8 if quick else 80), check,
        timed(lambda: ops.batched_nms(bd, sd, cd, 0.5), device, repeats),
        timed(lambda: tv.batched_nms(bd, sd, cd, 0.5), device, repeats)))
    log('  {}'.format(rows[-1]))

    # matching: IoU of the proposals with 100 ground-truth boxes, and all proposals pairwise
    gt = random_boxes(100, IMAGE, gen, device, 16., 600.)
    check = _close(ops.box_iou(boxes, gt), tv.box_iou(boxes, gt))
    rows.append(_row('box_iou {} x 100'.format(props), check,
                     timed(lambda: ops.box_iou(boxes, gt), device, repeats),
                     timed(lambda: tv.box_iou(boxes, gt), device, repeats)))
    log('  {}'.format(rows[-1]))
    check = _close(ops.box_iou(boxes, boxes), tv.box_iou(boxes, boxes))
    rows.append(_row('box_iou {0} x {0}'.format(props), check,
                     timed(lambda: ops.box_iou(boxes, boxes), device, repeats),
                     timed(lambda: tv.box_iou(boxes, boxes), device, repeats)))
    log('  {}'.format(rows[-1]))

    # ROIAlign: 512 ROIs of 2 images, 7x7, on the stride-4 level (the largest) ...
    feats, rois, idx = _roi_inputs(device, gen, channels, num_rois)
    tv_rois = torch.cat([idx[:, None].to(rois.dtype), rois], 1)
    for ratio in (2, 0):
        for aligned in (False, True):
            def ours(r=ratio, a=aligned):
                return ops.roi_align(feats[0], rois, idx, (7, 7), 0.25, r, a)

            def theirs(r=ratio, a=aligned):
                return tv.roi_align(feats[0], tv_rois, (7, 7), 0.25, r, a)
            rows.append(_row('roi_align {} ROIs {}ch stride 4, sampling_ratio {}, aligned {}'
                             .format(num_rois, channels, ratio, aligned),
                             _close(ours(), theirs()), timed(ours, device, repeats),
                             timed(theirs, device, repeats)))
            log('  {}'.format(rows[-1]))

    # ... forward + backward (training) with the legacy settings SGB uses
    x = feats[0].detach().requires_grad_(True)

    def fb(fn):
        def go():
            x.grad = None
            fn().sum().backward()
            return x.grad.clone()
        return go
    g_ours = fb(lambda: ops.roi_align(x, rois, idx, (7, 7), 0.25, 2, False))
    g_tv = fb(lambda: tv.roi_align(x, tv_rois, (7, 7), 0.25, 2, False))
    rows.append(_row('roi_align forward+backward, sampling_ratio 2, aligned False',
                     _close(g_ours(), g_tv()), timed(g_ours, device, repeats),
                     timed(g_tv, device, repeats), 'check: input gradients'))
    log('  {}'.format(rows[-1]))

    # multi-level pooler: 4 pooling levels (strides 4-32), maskrcnn-benchmark's level mapper
    scales = [1. / s for s in STRIDES[:4]]
    levels = ops.fpn_levels(rois, 2, 5, 224, 4, plus_one=True)  # index from stride 4

    def tv_pooler():
        out = feats[0].new_zeros((num_rois, channels, 7, 7))
        for lvl, scale in enumerate(scales):
            sel = torch.nonzero(levels == lvl).view(-1)
            out[sel] = tv.roi_align(feats[lvl], tv_rois[sel], (7, 7), scale, 2, False)
        return out

    def ours_pooler():
        return ops.multilevel_roi_align(feats[:4], rois, idx, scales, (7, 7), 2, False)
    rows.append(_row('multilevel_roi_align 4 levels, {} ROIs, sampling_ratio 2'.format(
        num_rois), _close(ours_pooler(), tv_pooler()), timed(ours_pooler, device, repeats),
        timed(tv_pooler, device, repeats),
        'torchvision side: its roi_align per level with the same level assignment'))
    log('  {}'.format(rows[-1]))

    if tv is not _StandIn:  # SGB's pooler in training through the dispatch (forced: on the CPU
        # the default keeps ours where the maps need a gradient)
        def dispatched_fb():
            with ops_backend('torchvision'):
                return fb(lambda: ops.multilevel_roi_align(
                    [x] + feats[1:4], rois, idx, scales, (7, 7), 2, False))()
        ours_fb = fb(lambda: ops.multilevel_roi_align([x] + feats[1:4], rois, idx, scales,
                                                      (7, 7), 2, False))
        rows.append(_row('multilevel_roi_align forward+backward, dispatch', _close(
            ours_fb(), dispatched_fb()), timed(ours_fb, device, repeats),
            timed(dispatched_fb, device, repeats),
            'check: stride-4 map gradients; torchvision side: gluontrain.torch.ops on its kernel'))
        log('  {}'.format(rows[-1]))
    if tv is _StandIn:
        for row in rows:
            row['note'] = 'torchvision ' + tv_version
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--device', default='cuda' if torch.cuda.is_available() else 'cpu')
    p.add_argument('--quick', action='store_true')
    a = p.parse_args()
    print(json.dumps(run(a.device, a.quick), indent=1))


if __name__ == '__main__':
    main()
