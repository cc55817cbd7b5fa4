"""torchvision's compiled NMS and ROIAlign under :mod:`gluontrain.torch.ops`, where they give
the reference's output (docs/performance.md, "Compiled ops (torchvision)").

:data:`ROUTES` says, per op variant (one per call site), whether a call may go to torchvision
and on which devices the default sends it there; a variant it does not list stays plain torch.
``GLUONTRAIN_TORCH_OPS`` chooses, read on every call:

- unset: torchvision's kernel where it loads and :data:`ROUTES` names the device;
- ``torchvision``: every variant :data:`ROUTES` allows, on every device (for comparisons);
  an error in one line where torchvision does not load;
- ``torch``: plain torch everywhere; torchvision is never imported.

torchvision is imported at the first call that could use it (never by ``import
gluontrain.torch.ops``), once per process.

Why the NMS variants are exact: torchvision's kernels compute seamseg's and MXNet's IoU,
``inter / ((area_i + area_j) - inter)`` in the boxes' float32, and suppress at ``IoU > t``.
Three differences are removed before the call: its areas are signed where ours are clamped
(an inverted side is made empty: ``hi = max(lo, hi)``, the same IoU), it sorts the scores
(the candidates are passed in our stable order with their rank as score), and its threshold
(a double on the CPU, a float on CUDA) is given as the float32 that makes ``IoU > t`` our
float32 comparison: ``float32(thr)`` for ``>``, the float32 just below it for ``>=``.
"""
import math
import os

import torch

__all__ = ['ENV', 'ROUTES', 'TorchvisionUnavailable', 'backend', 'describe', 'torchvision_version',
           'use_torchvision', 'nms', 'roi_align']

#: The environment variable that forces a backend (``torch`` or ``torchvision``).
ENV = 'GLUONTRAIN_TORCH_OPS'
_CHOICES = ('torch', 'torchvision')

#: ``(op, variant) -> (call sites, devices the default sends to torchvision or None for never,
#: why)``. NMS variants are the ``reference`` of :func:`~.nms.nms`, ``+1`` with ``plus_one``;
#: ``'cpu-inference'``: on the CPU when no gradient is needed.
ROUTES = {
    ('nms', 'seamseg'): (
        "frcnn's RPN proposals and per-class detections", ('cpu', 'cuda'),
        "seamseg's IoU is torchvision's; its IoU >= t is IoU > (the float32 below t)"),
    ('nms', 'mxnet'): (
        "yolo3-torch's box_nms", ('cpu', 'cuda'),
        "MXNet's IoU is torchvision's; IoU > float32(t)"),
    ('nms', 'maskrcnn+1'): (
        "sgg / sgg-detector RPN and box head", None,
        "+1 (legacy TO_REMOVE=1) sides: torchvision has none, and x2 + 1 rounds apart"),
    ('nms', 'ssd'): (
        "ssd's detection (ssd_nms, batched_ssd_nms)", None,
        "ssd.pytorch's IoU rounds as inter / ((a_j - inter) + a_i) and a NaN IoU suppresses"),
    ('roi_align', 'legacy'): (
        "sgg / sgg-detector Pooler (aligned=False)", ('cuda', 'cpu-inference'),
        "torchvision's aligned=False is maskrcnn-benchmark's ROIAlign (on the CPU bit for bit); "
        "where the features need a gradient on the CPU ours is faster"),
    ('roi_align', 'aligned'): (
        "roi_align(aligned=True)", ('cuda', 'cpu-inference'), "torchvision's own ROIAlign"),
    ('roi_sampling', 'seamseg'): (
        "frcnn's ROI head", None,
        "one sample per cell reading the edge pixels beyond the border; torchvision's "
        "ROIAlign zeroes samples beyond [-1, H] and rounds the coordinates apart"),
}

# dtypes torchvision's kernels take per device (NMS: float32 only, so that its threshold
# comparison is ours; ROIAlign computes half features in float32, as its autocast does)
_DTYPES = {
    'nms': {'cpu': (torch.float32,), 'cuda': (torch.float32,)},
    'roi_align': {'cpu': (torch.float32, torch.float64),
                  'cuda': (torch.float16, torch.bfloat16, torch.float32, torch.float64)},
}
# candidate ranks are passed as float32 scores: exact below 2**24
_EXACT_RANKS = 2 ** 24


class TorchvisionUnavailable(ImportError, ValueError):
    """``GLUONTRAIN_TORCH_OPS=torchvision`` where torchvision does not load (a ValueError too:
    the command line reports it in one ``error:`` line)."""


# the import, tried once: {'torchvision': (torchvision.ops or None, version or reason)}
_STATE = {}


def _choice():
    value = os.environ.get(ENV, '').strip()
    if value and value not in _CHOICES:
        raise ValueError('{}={!r}: choose torch or torchvision (unset: torchvision where it '
                         'loads)'.format(ENV, value))
    return value or 'auto'


def _torchvision(required):
    """``torchvision.ops`` or None (not loadable); raises :class:`TorchvisionUnavailable` when
    ``required``."""
    if 'torchvision' not in _STATE:
        try:
            import torchvision  # pylint: disable=import-outside-toplevel
            from torchvision import ops as tv_ops  # pylint: disable=import-outside-toplevel
            for name in ('nms', 'roi_align'):  # a stand-in module has no registered kernels
                getattr(torch.ops.torchvision, name)
            _STATE['torchvision'] = (tv_ops, torchvision.__version__)
        except Exception as e:  # pylint: disable=broad-except
            # ImportError, or RuntimeError / OSError / AttributeError from a build for
            # another torch: all mean the same here
            reason = '{}: {}'.format(type(e).__name__, str(e).splitlines()[0] if str(e) else '')
            _STATE['torchvision'] = (None, reason)
    ops, text = _STATE['torchvision']
    if ops is None and required:
        raise TorchvisionUnavailable(
            '{}=torchvision but torchvision does not load here ({}); install the torchvision '
            'built for torch {} (pip install -e ".[torchvision]"), or set {}=torch'.format(
                ENV, text, torch.__version__.split('+')[0], ENV))
    return ops


def torchvision_version():
    """torchvision's version where it loads here (whatever ``GLUONTRAIN_TORCH_OPS`` says),
    else None."""
    return None if _torchvision(False) is None else _STATE['torchvision'][1]


def backend():
    """``'torchvision'`` when :data:`ROUTES`' variants use torchvision's kernels (it loads
    and is not switched off), else ``'torch'``.

    Raises
    ------
    ValueError
        ``GLUONTRAIN_TORCH_OPS`` is neither ``torch`` nor ``torchvision``.
    TorchvisionUnavailable
        ``GLUONTRAIN_TORCH_OPS=torchvision`` and torchvision does not load (an ImportError and
        a ValueError).
    """
    choice = _choice()
    if choice == 'torch':
        return 'torch'
    return 'torchvision' if _torchvision(choice == 'torchvision') is not None else 'torch'


def describe():
    """One line for a recipe's log: which ops run on torchvision's kernels, where, and why
    (raises as :func:`backend`)."""
    choice, name = _choice(), backend()
    switch = '{}={}'.format(ENV, choice) if choice != 'auto' else '{} unset'.format(ENV)
    if name == 'torch':
        why = '' if choice == 'torch' else ', torchvision does not load: {}'.format(
            _STATE['torchvision'][1])
        return 'detection ops: plain torch ({}{})'.format(switch, why)
    used = ['{} ({}) on {}'.format(op, variant, '+'.join(
        ('cpu', 'cuda') if choice == 'torchvision' else devices))
        for (op, variant), (_, devices, _) in ROUTES.items() if devices]
    return ('detection ops: torchvision {} kernels for {}; plain torch for the rest ({}; '
            'torch or torchvision forces one)'.format(_STATE['torchvision'][1], ', '.join(used),
                                                      switch))


def use_torchvision(op, variant, tensor):
    """Whether this call of ``op`` (``variant``: the call site's rule, a key of
    :data:`ROUTES`) on ``tensor``'s device and dtype goes to torchvision's kernel."""
    route = ROUTES.get((op, variant))
    if route is None or route[1] is None:
        return False
    choice = _choice()
    if choice == 'torch' or _torchvision(choice == 'torchvision') is None:
        return False
    device = tensor.device.type
    if tensor.dtype not in _DTYPES[op].get(device, ()):
        return False
    inference = not (tensor.requires_grad and torch.is_grad_enabled())
    return (choice == 'torchvision' or device in route[1]
            or (inference and device + '-inference' in route[1]))


def _threshold(iou_threshold, suppress_equal):
    """The ``t`` of torchvision's ``IoU > t`` that is our float32 comparison (module
    docstring); a float32 value, so the CPU kernel's double and the CUDA kernel's float agree."""
    t = torch.tensor(iou_threshold, dtype=torch.float32)
    if suppress_equal:
        t = torch.nextafter(t, torch.tensor(-math.inf, dtype=torch.float32))
    return t.item()


def nms(boxes, order, groups, iou_threshold, suppress_equal, max_output=None):
    """Greedy NMS of the candidates ``order`` (indices, decreasing priority) through
    torchvision's kernel, one call per group; kept indices in ``order``'s order.

    With ``max_output`` the kernel first sees the ``2 * max_output`` best candidates, then
    twice as many until enough are kept (it cannot stop early): whether a candidate is kept
    depends only on the ones before it, so a prefix keeps what the whole keeps within it.

    Parameters
    ----------
    boxes : torch.Tensor
        ``(N, 4)`` float32 corner boxes.
    order : torch.Tensor
        ``(K,)`` int64 candidates, ``K < 2**24``.
    groups : torch.Tensor or None
        ``(N,)`` group of each box (only boxes of one group suppress each other).
    iou_threshold : float
    suppress_equal : bool
        ``IoU >= t`` suppresses (seamseg); else ``IoU > t``.
    max_output : int, optional
        At most this many kept (the best).
    """
    if order.numel() >= _EXACT_RANKS:
        raise ValueError('{} NMS candidates: at most 2**24 - 1 through torchvision'.format(
            order.numel()))
    cand = boxes[order]
    cand = torch.cat([cand[:, :2], torch.max(cand[:, :2], cand[:, 2:])], 1)
    rank = torch.arange(order.numel(), 0, -1, dtype=torch.float32, device=boxes.device)
    thr = _threshold(iou_threshold, suppress_equal)
    group = None if groups is None else groups[order]
    count = order.numel() if max_output is None else min(order.numel(), 2 * max_output)
    while True:
        kept = _kept(cand[:count], rank[:count], None if group is None else group[:count], thr)
        if count == order.numel() or kept.numel() >= max_output:
            return order[kept[:max_output]]
        count = min(order.numel(), 2 * count)


def _kept(cand, rank, group, thr):
    """Positions torchvision's NMS keeps, in candidate order (per group, merged)."""
    tv_nms = _torchvision(True).nms
    if group is None:
        return tv_nms(cand, rank, thr)
    kept = [sel[tv_nms(cand[sel], rank[sel], thr)]
            for sel in (torch.nonzero(group == g).view(-1) for g in group.unique())]
    if not kept:
        return rank.new_zeros(0, dtype=torch.long)
    return torch.sort(torch.cat(kept))[0]


def roi_align(x, boxes, batch_idx, output_size, spatial_scale, sampling_ratio, aligned):
    """torchvision's ``roi_align`` in :func:`~.roi.roi_align`'s convention (``boxes`` in image
    pixels, ``batch_idx`` checked by the caller); half features are pooled in float32 (as
    torchvision's autocast and maskrcnn-benchmark's apex ``float_function``) and returned in
    their dtype. The boxes get no gradient, as in the references' kernels."""
    dtype = torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype
    rois = torch.cat([batch_idx.to(dtype)[:, None], boxes.detach().to(dtype)], 1)
    out = _torchvision(True).roi_align(x.to(dtype), rois, tuple(output_size), spatial_scale,
                                       sampling_ratio, aligned)
    return out.to(x.dtype)
