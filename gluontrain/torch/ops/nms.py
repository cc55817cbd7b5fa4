"""Exact greedy non-maximum suppression in plain torch, vectorised by blocks.

The sorted candidates are taken a block at a time: a block is resolved internally by the
fixed-point iteration of Cluster-NMS (Zheng et al., 2020), then its kept boxes remove the later
candidates they suppress::

    keep <- init & ~any_i(keep[i] & S[i, j])      with S[i, j] = (i < j) & suppresses(i, j)

``keep[j]`` depends only on ``keep[i]`` for ``i < j``, so greedy NMS is the only fixed point,
reached after at most ``block`` updates (entry 0 is never suppressed; induction on ``j``).

``reference`` selects the IoU rounding and NaN rule of that reference's loop, so threshold ties
resolve as there (docs/faithfulness.md, "Shared detection ops", "YOLOv3 network on PyTorch",
"Scene-graph model"):

- ``'ssd'`` (ssd.pytorch): ``inter / ((area_j - inter) + area_i)``, ``i`` the higher-scoring
  box; a NaN IoU (two zero-area boxes) suppresses.
- ``'seamseg'`` (``nms_cpu.cpp``), ``'mxnet'`` (``contrib.box_nms``), ``'maskrcnn'``
  (``layers.nms``, ``+1`` areas, unclamped: the same on clipped boxes): areas
  ``max(w, 0) * max(h, 0)``, ``inter / ((area_i + area_j) - inter)``; a NaN IoU does not
  suppress. seamseg suppresses at ``IoU >= thr`` (``suppress_equal=True``), MXNet at ``>``,
  maskrcnn per device (:func:`maskrcnn_nms_options`).

:func:`batched_nms` equals a per-group loop of :func:`nms` (pairs of different groups never
suppress each other; stable sort) without the rounding risk of the offset trick.

Where torchvision loads, the ``'seamseg'`` and ``'mxnet'`` rules without ``plus_one`` run on its
kernel with the same kept indices (:mod:`.compiled`; ``GLUONTRAIN_TORCH_OPS`` switches).
"""
import torch

from . import compiled
from .boxes import box_area, box_intersection, clip_boxes

__all__ = ['nms', 'batched_nms', 'classwise_nms', 'proposal_nms', 'ssd_nms', 'batched_ssd_nms',
           'box_nms', 'maskrcnn_nms_options']

_REFERENCES = ('ssd', 'seamseg', 'mxnet', 'maskrcnn')
# references whose IoU is seamseg's rounding (union first, NaN never suppresses)
_UNION_FIRST = ('seamseg', 'mxnet', 'maskrcnn')


def _pairwise_iou(box_a, box_b, plus_one=False, reference='ssd'):
    """IoU of ``box_a[..., i]`` (the higher-scoring box) with ``box_b[..., j]``: ``(..., A, B)``."""
    inter = box_intersection(box_a, box_b, plus_one)
    if reference in _UNION_FIRST:
        union = torch.add(_clamped_area(box_a, plus_one)[..., :, None],
                          _clamped_area(box_b, plus_one)[..., None, :])
        return inter.div_(union.sub_(inter))
    union = torch.sub(box_area(box_b, plus_one)[..., None, :], inter)
    return inter.div_(union.add_(box_area(box_a, plus_one)[..., :, None]))


def _clamped_area(boxes, plus_one):
    one = 1.0 if plus_one else 0.0
    return ((boxes[..., 2] - boxes[..., 0] + one).clamp(min=0)
            * (boxes[..., 3] - boxes[..., 1] + one).clamp(min=0))


def _suppresses(iou, threshold, suppress_equal, reference='ssd'):
    if reference in _UNION_FIRST:  # a NaN IoU compares false: no suppression, as the C++ loop
        return torch.ge(iou, threshold) if suppress_equal else torch.gt(iou, threshold)
    # Written as "not below" so that a NaN IoU (two zero-area boxes: 0 / 0) suppresses, as in
    # ssd.pytorch, which keeps only candidates with ``IoU.le(overlap)``.
    below = torch.lt(iou, threshold) if suppress_equal else torch.le(iou, threshold)
    return below.logical_not_()


def _greedy_resolve(suppress, init):
    """Greedy keep mask ``(..., K)`` of candidates in score order: ``suppress`` ``(..., K, K)``
    bool (``i`` removes ``j``, only ``i < j`` used), ``init`` ``(..., K)`` bool alive."""
    # float matmul counts suppressors exactly (integers below 2**24) and is fast on any device
    sup = suppress.to(torch.float32).triu_(1)
    keep = init
    for _ in range(init.shape[-1] + 1):
        hit = torch.matmul(keep.to(torch.float32)[..., None, :], sup)[..., 0, :] > 0
        new = init & ~hit
        if torch.equal(new, keep):
            break
        keep = new
    return keep


def _greedy_ordered(boxes, order, threshold, suppress_equal, plus_one, block_size,
                    reference='ssd', groups=None, max_output=None):
    """Greedy NMS over ``boxes[order]`` (decreasing priority); kept indices.

    A block of ``block_size`` live candidates is resolved, then its kept boxes remove every later
    candidate they suppress (maskrcnn-benchmark's loop, a block at a time). With ``groups`` only
    boxes of one group suppress each other; stops once ``max_output`` boxes are kept.
    """
    def suppress(idx_a, idx_b):
        sup = _suppresses(_pairwise_iou(boxes[idx_a], boxes[idx_b], plus_one, reference),
                          threshold, suppress_equal, reference)
        if groups is not None:
            sup &= groups[idx_a][:, None] == groups[idx_b][None, :]
        return sup

    kept, count, alive = [], 0, order
    while alive.numel() and (max_output is None or count < max_output):
        idx, alive = alive[:block_size], alive[block_size:]
        # every candidate of the block is alive: no earlier kept box suppresses it
        idx = idx[_greedy_resolve(suppress(idx, idx), torch.ones_like(idx, dtype=torch.bool))]
        kept.append(idx)
        count += idx.numel()
        if alive.numel():
            # any over the kept rows, as bytes: bool any(0) takes a slow loop (~6x)
            alive = alive[suppress(idx, alive).view(torch.uint8).amax(0) == 0]
    if not kept:
        return order.new_zeros(0)
    return torch.cat(kept)


def maskrcnn_nms_options(device):
    """``plus_one``, ``suppress_equal``, ``reference`` that make :func:`nms`
    maskrcnn-benchmark's ``layers.nms`` on ``device`` (the CPU loop removes IoU == threshold,
    the CUDA kernel keeps it)."""
    return {'plus_one': True, 'suppress_equal': torch.device(device).type == 'cpu',
            'reference': 'maskrcnn'}


def nms(boxes, scores, iou_threshold, top_k=None, suppress_equal=False, plus_one=False,
        block_size=256, max_output=None, reference='ssd'):
    """Exact greedy NMS; int64 indices of the kept boxes by descending score.

    Parameters
    ----------
    boxes : torch.Tensor
        ``(N, 4)`` corner boxes, ``(x1, y1, x2, y2)`` or ``(y0, x0, y1, x1)``.
    scores : torch.Tensor
        ``(N,)`` scores; ties are visited by increasing index (stable sort).
    iou_threshold : float
        Overlap above which the lower-scoring box is removed.
    top_k : int, optional
        Only the ``top_k`` highest-scoring boxes are candidates (all when None).
    suppress_equal : bool, default False
        Also remove a box whose IoU equals the threshold (seamseg: True; ssd.pytorch: False).
    plus_one : bool, default False
        Pixel-inclusive widths ``x2 - x1 + 1`` (VOC / GluonCV convention).
    block_size : int, default 256
        Candidates resolved together; only speed and memory depend on it.
    max_output : int, optional
        Keep at most this many boxes (seamseg's ``n_max``).
    reference : {'ssd', 'seamseg', 'mxnet', 'maskrcnn'}, default 'ssd'
        IoU rounding and NaN rule (module docstring).
    """
    return batched_nms(boxes, scores, None, iou_threshold, suppress_equal, plus_one, block_size,
                       max_output, reference, top_k)


def batched_nms(boxes, scores, groups, iou_threshold, suppress_equal=False, plus_one=False,
                block_size=256, max_output=None, reference='ssd', top_k=None):
    """Exact greedy NMS within each group (class, or image x class) in one pass.

    Equal to :func:`nms` per group, merged by descending score (module docstring).

    Parameters
    ----------
    groups : torch.Tensor or None
        ``(N,)`` integer group of each box; None: one group (:func:`nms`).
    max_output : int, optional
        Keep at most this many boxes over all groups (seamseg's "top 100").
    top_k : int, optional
        Candidates over all groups (MXNet ``box_nms``'s ``topk``).
    boxes, scores, iou_threshold, suppress_equal, plus_one, block_size, reference
        As in :func:`nms`.
    """
    if reference not in _REFERENCES:
        raise ValueError('reference={!r}: choose one of {}'.format(reference, _REFERENCES))
    if scores.numel() == 0:
        return torch.zeros(0, dtype=torch.long, device=scores.device)
    order = torch.sort(scores, descending=True, stable=True)[1][:top_k]
    groups = None if groups is None else groups.long()
    if compiled.use_torchvision('nms', reference + ('+1' if plus_one else ''), boxes):
        kept = compiled.nms(boxes, order, groups, iou_threshold, suppress_equal, max_output)
    else:
        kept = _greedy_ordered(boxes, order, iou_threshold, suppress_equal, plus_one,
                               block_size, reference, groups, max_output)
    return kept[:max_output]


def classwise_nms(boxes, scores, classes, iou_threshold, max_per_class=None,
                  suppress_equal=False, plus_one=False, reference='ssd'):
    """:func:`nms` class by class, at most ``max_per_class`` each (seamseg's
    ``PredictionGenerator``, maskrcnn-benchmark's box ``PostProcessor``); int64 kept indices by
    increasing class, each by descending score. Faster than :func:`batched_nms` on the CPU for
    many classes with few boxes each (bench/frcnn_bench.py).
    """
    kept = [idx[nms(boxes[idx], scores[idx], iou_threshold, suppress_equal=suppress_equal,
                    plus_one=plus_one, max_output=max_per_class, reference=reference)]
            for idx in (torch.nonzero(classes == c).view(-1) for c in classes.unique())]
    if not kept:
        return torch.zeros(0, dtype=torch.long, device=classes.device)
    return torch.cat(kept)


def proposal_nms(boxes, scores, size, min_size, iou_threshold, pre_nms=None, post_nms=None,
                 plus_one=False, suppress_equal=False, reference='ssd'):
    """RPN proposals of one image: clip to ``size`` (the boxes' axis order), drop sides below
    ``min_size`` (``<= 0``: none), keep the ``pre_nms`` best, NMS keeping at most ``post_nms``.

    seamseg's ``ProposalGenerator``: ``suppress_equal=True, reference='seamseg'``;
    maskrcnn-benchmark's ``RPNPostProcessor``: ``pre_nms=None`` (top-k before decoding), the
    flags of :func:`maskrcnn_nms_options`. Returns ``(P, 4)`` boxes, ``(P,)`` scores by
    descending score.
    """
    boxes = clip_boxes(boxes, size, plus_one)
    if min_size > 0:
        side = boxes[:, 2:] - boxes[:, :2] + (1 if plus_one else 0)
        keep = (side[:, 0] >= min_size) & (side[:, 1] >= min_size)
        boxes, scores = boxes[keep], scores[keep]
    if pre_nms is not None:
        scores, idx = scores.topk(min(scores.numel(), pre_nms))
        boxes = boxes[idx]
    keep = nms(boxes, scores, iou_threshold, suppress_equal=suppress_equal, plus_one=plus_one,
               max_output=post_nms, reference=reference)
    return boxes[keep], scores[keep]


def ssd_nms(boxes, scores, overlap=0.5, top_k=200):
    """ssd.pytorch's ``nms``: greedy NMS of the ``top_k`` best boxes, keeping IoU <= overlap.

    Equal scores: the larger index first (the reference visits an ascending sort from the end;
    its unstable sort leaves ties undefined, our stable one reproduces it where defined).
    ``top_k`` slices ``[-top_k:]`` (0: all). Returns ``(keep, count)``: ``(N,)`` int64 kept
    indices by descending score in ``keep[:count]``, zeros after.
    """
    keep = torch.zeros(scores.shape[0], dtype=torch.long, device=scores.device)
    if boxes.numel() == 0:  # the reference returns a bare tensor here; we keep the pair
        return keep, 0
    idx = torch.sort(scores, stable=True)[1][-top_k:].flip(0)
    kept = _greedy_ordered(boxes, idx, overlap, False, False, 256)
    keep[:kept.numel()] = kept
    return keep, int(kept.numel())


def batched_ssd_nms(boxes, scores, valid, overlap=0.5, top_k=200, chunk=256):
    """:func:`ssd_nms` on many independent groups at once (e.g. every image x class).

    Group ``g`` keeps what ``ssd_nms(boxes[g][valid[g]], scores[g][valid[g]], overlap, top_k)``
    keeps, in the same order (valid scores must be ``> -inf``).

    Parameters
    ----------
    boxes : torch.Tensor
        ``(..., N, 4)``; leading dimensions broadcast to ``scores``' without a copy.
    scores, valid : torch.Tensor
        ``(..., N)`` scores and bool, which entries take part.
    chunk : int, default 256
        Groups resolved together (memory ``chunk * top_k**2`` floats).

    Returns
    -------
    order, keep, cand_boxes : torch.Tensor
        ``(..., K)`` int64 candidate indices by descending score (``K = min(top_k, N)``),
        ``(..., K)`` bool survivors, ``(..., K, 4)`` the candidates' boxes.
    """
    masked = scores.masked_fill(~valid, float('-inf'))
    order = torch.sort(masked, dim=-1, stable=True)[1][..., -top_k:].flip(-1)
    alive = valid.gather(-1, order)
    lead = order.shape[:-1]
    cand = boxes.expand(*lead, boxes.shape[-2], 4).gather(
        -2, order[..., None].expand(*order.shape, 4))
    flat_cand, flat_alive = cand.reshape(-1, *cand.shape[-2:]), alive.reshape(-1, order.shape[-1])
    keep = torch.zeros_like(flat_alive)
    for start in range(0, flat_alive.shape[0], chunk):
        sl = slice(start, start + chunk)
        iou = _pairwise_iou(flat_cand[sl], flat_cand[sl])
        keep[sl] = _greedy_resolve(_suppresses(iou, overlap, False), flat_alive[sl])
    return order, keep.view(alive.shape), cand


def box_nms(data, overlap_thresh=0.5, valid_thresh=0.0, topk=-1, coord_start=2, score_index=1,
            id_index=-1, force_suppress=False, background_id=-1):
    """MXNet's ``contrib.box_nms`` (corner boxes, CPU semantics of MXNet 1.x; docs/faithfulness.md,
    "YOLOv3 network on PyTorch"): same shape and dtype as ``data`` ``(..., N, K)``, survivors
    first and ``-1`` rows after; ``topk == 0`` returns the input unchanged.

    ``coord_start``, ``score_index``, ``id_index`` are the columns of ``x1`` (then ``y1, x2,
    y2``), the score and the class id (-1: none); rows of ``background_id`` are dropped;
    ``force_suppress`` suppresses across classes.
    """
    num_elem = data.shape[-2]
    k = num_elem if topk < 0 else min(num_elem, topk)
    if k < 1:
        return data.clone()
    rows = data.reshape(-1, num_elem, data.shape[-1])
    out = torch.full_like(rows, -1)
    for b in range(rows.shape[0]):
        scores = rows[b, :, score_index]
        valid = scores > valid_thresh
        if id_index >= 0:
            valid &= rows[b, :, id_index] != background_id
        idx = valid.nonzero()[:, 0]
        boxes = rows[b, idx, coord_start:coord_start + 4]
        if id_index >= 0 and not force_suppress:
            kept = batched_nms(boxes, scores[idx], rows[b, idx, id_index].long(),
                               overlap_thresh, reference='mxnet', top_k=k)
        else:
            kept = nms(boxes, scores[idx], overlap_thresh, top_k=k, reference='mxnet')
        out[b, :kept.numel()] = rows[b, idx[kept]]
    return out.reshape(data.shape)
