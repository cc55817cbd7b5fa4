"""Exact greedy non-maximum suppression in plain torch, vectorised by blocks.

Greedy NMS visits boxes by descending score and keeps a box unless it overlaps an already
kept box by more than the threshold. Here the sorted candidates are taken a block at a time:
a block (candidates no earlier kept box suppresses) is resolved internally by the
fixed-point iteration of Cluster-NMS (Zheng et al., 2020), then its kept boxes remove the
later candidates they suppress (one IoU matrix against what is still alive)::

    keep <- init & ~any_i(keep[i] & S[i, j])      with S[i, j] = (i < j) & suppresses(i, j)

Why this is exactly greedy NMS: ``keep[j]`` of the update depends only on ``keep[i]`` for
``i < j``, so the greedy result is the only fixed point, and after ``t`` updates the first
``t`` entries already equal it (induction on ``j``; entry 0 is never suppressed). The loop
stops at the fixed point, after at most ``block`` updates and usually after a handful.

Two IoU roundings, selected by ``reference`` so that threshold ties resolve as in the
reference's own loop:

- ``'ssd'`` (ssd.pytorch's ``nms``): ``inter / ((area_j - inter) + area_i)`` with ``i`` the
  higher-scoring box; a NaN IoU (two zero-area boxes) counts as overlapping.
- ``'seamseg'`` (seamseg's ``src/nms/nms_cpu.cpp``): areas ``max(w, 0) * max(h, 0)``,
  ``inter / ((area_i + area_j) - inter)``; a NaN IoU does not suppress (``nan >= thr`` is
  false). seamseg suppresses at ``IoU >= thr``: pass ``suppress_equal=True``.
- ``'mxnet'`` (MXNet's ``contrib.box_nms``, ``nms_impl`` of ``bounding_box-common.h``): the
  same arithmetic as ``'seamseg'`` (areas ``0`` when a side is negative, ``inter / ((area_ref
  + area_pos) - inter)``, a NaN IoU does not suppress), suppression at ``IoU > thr``.
  :func:`box_nms` is the whole operator on top of it.
- ``'maskrcnn'`` (maskrcnn-benchmark's ``layers.nms``, Scene-Graph-Benchmark's: ``+1`` areas
  ``(x2 - x1 + 1) * (y2 - y1 + 1)``, ``inter / ((area_i + area_j) - inter)`` in both its
  ``nms_cpu.cpp`` and its CUDA ``devIoU``): the union-first rounding of ``'seamseg'`` (its
  areas are not clamped, which changes nothing on clipped boxes, whose ``+1`` sides are
  positive). Its CPU loop suppresses at ``IoU >= thr``, its CUDA kernel at ``IoU > thr``:
  :func:`maskrcnn_nms_options` gives the flags of the device the boxes are on.

:func:`batched_nms` runs NMS per class (or per image x class) in one pass: pairs of
different groups never suppress each other, which is exactly a loop of per-group NMS (the
greedy decision of box ``j`` depends only on earlier kept boxes of its own group, visited in
the same relative order since the sort is stable) without the rounding risk of the offset
trick. :func:`classwise_nms` (the loop) and :func:`proposal_nms` serve both two-stage flavours.
"""
import torch

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
    """Greedy keep mask of candidates already in score order.

    Parameters
    ----------
    suppress : torch.Tensor
        ``(..., K, K)`` bool, ``suppress[i, j]``: candidate ``i`` would remove ``j`` (only
        ``i < j`` is used).
    init : torch.Tensor
        ``(..., K)`` bool, candidates still alive before this block.

    Returns
    -------
    torch.Tensor
        ``(..., K)`` bool keep mask, equal to a sequential greedy pass.
    """
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
    """Greedy NMS over ``boxes[order]`` (``order`` by decreasing priority); kept indices.

    Block by block: the next ``block_size`` live candidates are resolved among themselves,
    then the block's kept boxes remove every later candidate they suppress, so that a removed
    candidate is never compared again (maskrcnn-benchmark's loop, a block at a time: far
    fewer pairs than comparing each block with everything kept before it when most boxes are
    suppressed). With ``groups`` (int64 per box) only boxes of the same group suppress each
    other. Stops once ``max_output`` boxes are kept (the greedy order makes them the first).
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
    """The flags that make :func:`nms` maskrcnn-benchmark's ``layers.nms`` on ``device``.

    Its ``nms_cpu.cpp`` removes a box whose IoU equals the threshold (``ovr >= threshold``),
    its CUDA kernel keeps it (``devIoU(...) > nms_overlap_thresh``); both use ``+1`` areas and
    the union-first rounding (``reference='maskrcnn'``).

    Parameters
    ----------
    device : torch.device
        Where the boxes are.

    Returns
    -------
    dict
        ``plus_one``, ``suppress_equal`` and ``reference`` for :func:`nms`,
        :func:`classwise_nms` and :func:`proposal_nms`.
    """
    return {'plus_one': True, 'suppress_equal': torch.device(device).type == 'cpu',
            'reference': 'maskrcnn'}


def nms(boxes, scores, iou_threshold, top_k=None, suppress_equal=False, plus_one=False,
        block_size=256, max_output=None, reference='ssd'):
    """Exact greedy NMS.

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
        Also remove a box whose IoU *equals* the threshold. False keeps it (ssd.pytorch keeps
        IoU <= threshold); seamseg removes it (True).
    plus_one : bool, default False
        Pixel-inclusive widths ``x2 - x1 + 1`` (VOC / GluonCV convention).
    block_size : int, default 256
        Candidates resolved together; only speed and memory depend on it.
    max_output : int, optional
        Keep at most this many boxes (seamseg's ``n_max``; the greedy pass stops there).
    reference : {'ssd', 'seamseg', 'mxnet', 'maskrcnn'}, default 'ssd'
        IoU rounding and NaN rule of that reference's loop (module docstring).

    Returns
    -------
    torch.Tensor
        int64 indices of the kept boxes, by descending score (empty for empty input).
    """
    return batched_nms(boxes, scores, None, iou_threshold, suppress_equal, plus_one, block_size,
                       max_output, reference, top_k)


def batched_nms(boxes, scores, groups, iou_threshold, suppress_equal=False, plus_one=False,
                block_size=256, max_output=None, reference='ssd', top_k=None):
    """Exact greedy NMS within each group (class, or image x class) in one pass.

    Equal to running :func:`nms` on every group and merging the kept boxes by descending
    score (stable: equal scores by increasing index); boxes of different groups never
    suppress each other (module docstring). Unlike the coordinate-offset trick, the IoUs
    are computed on the boxes as given, so threshold ties round as in the per-group loop.

    Parameters
    ----------
    boxes : torch.Tensor
        ``(N, 4)`` corner boxes.
    scores : torch.Tensor
        ``(N,)`` scores.
    groups : torch.Tensor or None
        ``(N,)`` integer group of each box (e.g. its class); None: one group (:func:`nms`).
    iou_threshold : float
        Overlap above which the lower-scoring box of a group is removed.
    suppress_equal, plus_one, block_size, reference
        As in :func:`nms`.
    max_output : int, optional
        Keep at most this many boxes over all groups, the highest-scoring ones (seamseg's
        "top 100" after class-wise NMS).
    top_k : int, optional
        Only the ``top_k`` highest-scoring boxes over all groups are candidates (MXNet's
        ``box_nms`` ``topk``: one sort of every class's boxes, then per-class suppression).

    Returns
    -------
    torch.Tensor
        int64 indices of the kept boxes, by descending score (empty for empty input).
    """
    if reference not in _REFERENCES:
        raise ValueError('reference={!r}: choose one of {}'.format(reference, _REFERENCES))
    if scores.numel() == 0:
        return torch.zeros(0, dtype=torch.long, device=scores.device)
    order = torch.sort(scores, descending=True, stable=True)[1][:top_k]
    kept = _greedy_ordered(boxes, order, iou_threshold, suppress_equal, plus_one, block_size,
                           reference, None if groups is None else groups.long(), max_output)
    return kept[:max_output]


def classwise_nms(boxes, scores, classes, iou_threshold, max_per_class=None,
                  suppress_equal=False, plus_one=False, reference='ssd'):
    """:func:`nms` class by class, each keeping at most ``max_per_class`` (maskrcnn-benchmark's
    ``POST_NMS_PER_CLS_TOPN``): the detections of seamseg's ``PredictionGenerator`` and
    maskrcnn-benchmark's box ``PostProcessor``. A class's kept boxes are those of its
    :func:`batched_nms` group; the references' loop is faster on the CPU for many classes
    with few boxes each (bench/frcnn_bench.py).

    Parameters
    ----------
    boxes, scores, classes : torch.Tensor
        ``(N, 4)``, ``(N,)`` and ``(N,)`` integer classes.
    iou_threshold : float
    max_per_class : int, optional
    suppress_equal, plus_one, reference
        As in :func:`nms`.

    Returns
    -------
    torch.Tensor
        int64 kept indices by increasing class, each class's by descending score.
    """
    kept = [idx[nms(boxes[idx], scores[idx], iou_threshold, suppress_equal=suppress_equal,
                    plus_one=plus_one, max_output=max_per_class, reference=reference)]
            for idx in (torch.nonzero(classes == c).view(-1) for c in classes.unique())]
    if not kept:
        return torch.zeros(0, dtype=torch.long, device=classes.device)
    return torch.cat(kept)


def proposal_nms(boxes, scores, size, min_size, iou_threshold, pre_nms=None, post_nms=None,
                 plus_one=False, suppress_equal=False, reference='ssd'):
    """The RPN proposals of one image: decoded boxes clipped to the image
    (:func:`~.boxes.clip_boxes`), sides below ``min_size`` dropped, the ``pre_nms`` best
    kept, NMS keeping at most ``post_nms``. seamseg's ``ProposalGenerator``: ``pre_nms``,
    ``suppress_equal=True, reference='seamseg'``; maskrcnn-benchmark's per-level
    ``RPNPostProcessor``: top-k before decoding (``pre_nms=None``), the flags of
    :func:`maskrcnn_nms_options`.

    Parameters
    ----------
    boxes, scores : torch.Tensor
        ``(N, 4)`` decoded boxes, ``(N,)`` objectness.
    size : (int, int)
        Image size in the boxes' axis order (:func:`~.boxes.clip_boxes`).
    min_size : float
        Smallest side kept (``<= 0``: all).
    iou_threshold : float
    pre_nms, post_nms : int, optional
        Candidates before, boxes kept after NMS (all when None).
    plus_one, suppress_equal, reference
        As in :func:`nms`.

    Returns
    -------
    boxes, scores : torch.Tensor
        ``(P, 4)``, ``(P,)`` by descending score (``P = 0`` when nothing is left).
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

    Ties in score: the reference sorts ascending and visits the candidates from the end, so
    among equal scores the box with the **larger index** comes first. The reference's
    ``sort`` is not stable (on CPU it is stable only for short inputs), so its tie order is
    implementation-defined; we use a stable sort, which reproduces it wherever it is defined.

    Parameters
    ----------
    boxes : torch.Tensor
        ``(N, 4)`` boxes ``(x1, y1, x2, y2)``, areas without ``+1``.
    scores : torch.Tensor
        ``(N,)`` scores.
    overlap : float, default 0.5
        A box overlapping a kept box by more than this is removed.
    top_k : int, default 200
        Number of highest-scoring candidates (Python slice ``[-top_k:]``, so 0 means all).

    Returns
    -------
    keep : torch.Tensor
        ``(N,)`` int64, the kept indices by descending score in ``keep[:count]``, zeros after.
    count : int
        Number of kept boxes.
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

    Group ``g`` gives the same boxes, in the same order, as ``ssd_nms(boxes[g][valid[g]],
    scores[g][valid[g]], overlap, top_k)``: invalid entries are sorted below every valid
    one (valid scores must be ``> -inf``) and a stable sort keeps the valid ones' order.

    Parameters
    ----------
    boxes : torch.Tensor
        ``(..., N, 4)`` boxes ``(x1, y1, x2, y2)``; leading dimensions broadcast to
        ``scores``' (e.g. ``(B, 1, N, 4)`` decoded boxes shared by every class), without a
        copy.
    scores : torch.Tensor
        ``(..., N)`` scores.
    valid : torch.Tensor
        ``(..., N)`` bool, which entries take part.
    overlap : float, default 0.5
        IoU above which a box is removed.
    top_k : int, default 200
        Candidates per group (Python slice ``[-top_k:]``: 0 means all).
    chunk : int, default 256
        Groups resolved together (memory ``chunk * top_k**2`` floats).

    Returns
    -------
    order : torch.Tensor
        ``(..., K)`` int64 candidate indices into ``N`` by descending score,
        ``K = min(top_k, N)``.
    keep : torch.Tensor
        ``(..., K)`` bool, which candidates survive.
    cand_boxes : torch.Tensor
        ``(..., K, 4)`` the candidates' boxes.
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
    """MXNet's ``contrib.box_nms`` (corner boxes, CPU semantics of MXNet 1.x).

    Per batch entry: rows with ``score > valid_thresh`` (and, with ``id_index >= 0``, an id
    other than ``background_id``) are sorted by descending score (stable: equal scores keep
    their row order, as MXNet's ``std::stable_sort``); the first ``topk`` of them go through
    greedy NMS (``IoU > overlap_thresh`` suppresses, only within a class unless
    ``force_suppress`` or ``id_index < 0``; class ids compared as ``int``); the survivors are
    written first, in that order, and every other row is ``-1``. ``topk == 0`` returns the
    input unchanged, as MXNet does.

    Parameters
    ----------
    data : torch.Tensor
        ``(..., N, K)`` rows; leading dimensions are batch entries.
    overlap_thresh, valid_thresh : float
    topk : int, default -1
        Candidates per batch entry (-1: all).
    coord_start, score_index, id_index : int
        Columns of ``x1`` (then ``y1, x2, y2``), of the score and of the class id (-1: none).
    force_suppress : bool
        Suppress across classes.
    background_id : int, default -1
        Rows of this id are dropped before NMS (with ``id_index >= 0``).

    Returns
    -------
    torch.Tensor
        Same shape and dtype as ``data``.
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
