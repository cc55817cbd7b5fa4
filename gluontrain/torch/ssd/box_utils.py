"""Box utilities of SSD300, as ``layers/box_utils.py`` of amdegroot/ssd.pytorch.

Boxes are ``(x1, y1, x2, y2)`` ("point form") or ``(cx, cy, w, h)`` ("centre-size form"),
relative to the image size; areas have no ``+1``. Every function accepts extra leading
(batch) dimensions and then computes, element by element, exactly the operations of the
reference in the same order, so the results are bit-identical to a per-image call.

Differences from the reference (all fixes; valid inputs give the reference's numbers):

- ``center_size`` is broken in the reference (misplaced parenthesis: ``torch.cat`` gets a
  tensor as its first argument and raises); here it returns what its docstring promises.
- ``encode`` takes ``log`` of the width/height ratio, which is ``-inf`` (and the loss
  ``inf``) for a zero-width or zero-height ground truth, ``nan`` for an inverted one. We clamp
  the ratio to at least ``eps`` (1e-6): a ratio that small means a box a millionth of its
  prior's width, so valid boxes are untouched (the clamp returns its input bit for bit) and a
  degenerate box yields a large but finite target (smooth L1 has bounded gradients).
- ``match`` raises in the reference for an image without ground truth (``max`` over an empty
  dimension); here such an image gets all-background targets.
"""
import torch

from ..ops.boxes import ENCODE_EPS, box_intersection, box_iou, center_to_corners, \
    corners_to_center
from ..ops import boxes as _boxes

__all__ = ['point_form', 'center_size', 'intersect', 'jaccard', 'match', 'match_batch',
           'encode', 'decode', 'log_sum_exp', 'ENCODE_EPS']

# ssd.pytorch's names for the shared box ops (its layer API, used by the notebook and users)
point_form = center_to_corners
center_size = corners_to_center
intersect = box_intersection
jaccard = box_iou


def _forced_truth(best_prior_idx, num_priors):
    """For every prior, the largest gt index whose best prior it is, else -1.

    The reference runs ``for j: best_truth_idx[best_prior_idx[j]] = j``: when several gts
    share a best prior, the last assignment (the largest ``j``) survives. ``amax`` over the
    scattered gt indices gives exactly that value, deterministically (a plain ``index_put``
    with repeated indices has no defined winner). ``best_prior_idx`` may hold ``num_priors``
    as a sink for gts to be ignored; that column is dropped.
    """
    lead = best_prior_idx.shape[:-1]
    gt_index = torch.arange(best_prior_idx.shape[-1], device=best_prior_idx.device)
    forced = torch.full(lead + (num_priors + 1,), -1, dtype=torch.long,
                        device=best_prior_idx.device)
    forced.scatter_reduce_(-1, best_prior_idx, gt_index.expand_as(best_prior_idx), 'amax')
    return forced[..., :num_priors]


def match(threshold, truths, priors, variances, labels, loc_t, conf_t, idx):
    """Match the priors of one image to its ground truth and write the targets in place.

    Each prior takes the gt of highest IoU; then every gt's best prior is forced to that
    gt with overlap 2 (a prior that is the best of several gts goes to the last of them).
    ``conf = label + 1`` (0 is background) and 0 where the overlap is below ``threshold``.

    Parameters
    ----------
    threshold : float
        IoU below which a prior is background (0.5 in SSD300).
    truths : torch.Tensor
        ``(G, 4)`` point-form ground-truth boxes.
    priors : torch.Tensor
        ``(P, 4)`` centre-size priors.
    variances : sequence of float
        ``(center_variance, size_variance)``, ``(0.1, 0.2)`` in SSD300.
    labels : torch.Tensor
        ``(G,)`` class indices (0-based, without background).
    loc_t : torch.Tensor
        ``(B, P, 4)`` output: ``loc_t[idx]`` receives the encoded offsets.
    conf_t : torch.Tensor
        ``(B, P)`` integer output: ``conf_t[idx]`` receives the class targets.
    idx : int
        The image's index in the batch.
    """
    # the batch of one: no padding, so the same overlaps, ties and targets as the reference's
    # per-image loop (an image without objects is all background, where the reference raises)
    loc, conf = match_batch(threshold, truths[None], priors, variances, labels[None])
    loc_t[idx] = loc[0]
    conf_t[idx] = conf[0]  # cast to conf_t's integer dtype, as the reference does


def match_batch(threshold, truths, priors, variances, labels, valid=None):
    """The targets of :func:`match` for a whole padded batch at once (:func:`match` is its
    batch of one; the same targets, bit for bit, as the reference's per-image loop).

    Padding gts (``valid`` False) take part in nothing: their overlaps are set to -1, below
    any real IoU, so they never become a prior's best gt, and their best prior is sent to a
    discarded column, so they force nothing. Real gts keep their order, hence the same
    tie-breaking (first maximum; last gt wins a shared best prior) as the per-image call.

    Parameters
    ----------
    threshold : float
        IoU below which a prior is background.
    truths : torch.Tensor
        ``(B, M, 4)`` point-form ground-truth boxes, padded.
    priors : torch.Tensor
        ``(P, 4)`` centre-size priors.
    variances : sequence of float
        ``(center_variance, size_variance)``.
    labels : torch.Tensor
        ``(B, M)`` class indices (0-based, without background).
    valid : torch.Tensor, optional
        ``(B, M)`` bool, True for real gts; default all True.

    Returns
    -------
    loc_t : torch.Tensor
        ``(B, P, 4)`` encoded offsets (of the best gt, for every prior).
    conf_t : torch.Tensor
        ``(B, P)`` int64 class targets, 0 for background.
    """
    batch, num_gt = truths.shape[:2]
    num_priors = priors.shape[0]
    if valid is None:
        valid = torch.ones(batch, num_gt, dtype=torch.bool, device=truths.device)
    if num_gt == 0:
        return (truths.new_zeros(batch, num_priors, 4),
                torch.zeros(batch, num_priors, dtype=torch.long, device=truths.device))
    overlaps = jaccard(truths, point_form(priors)).masked_fill(~valid[..., None], -1)
    _, best_prior_idx = overlaps.max(2)  # [B, M]
    best_truth_overlap, best_truth_idx = overlaps.max(1)  # [B, P]
    sink = torch.full_like(best_prior_idx, num_priors)
    forced = _forced_truth(torch.where(valid, best_prior_idx, sink), num_priors)
    best_truth_overlap = best_truth_overlap.masked_fill(forced >= 0, 2)
    best_truth_idx = torch.where(forced >= 0, forced, best_truth_idx)
    matches = truths.gather(1, best_truth_idx[..., None].expand(batch, num_priors, 4))
    conf = labels.gather(1, best_truth_idx) + 1
    conf[best_truth_overlap < threshold] = 0
    return encode(matches, priors, variances), conf.long()


def encode(matched, priors, variances, eps=ENCODE_EPS):
    """Encode point-form boxes as offsets from their priors (SSD's regression targets).

    ``((c_gt - c_p) / (v0 * wh_p), log(max(wh_gt / wh_p, eps)) / v1)``, i.e.
    :func:`gluontrain.torch.ops.encode` with ``variances``; the ``eps`` clamp is our fix for
    degenerate boxes (see the module docstring) and changes no valid value.

    Parameters
    ----------
    matched : torch.Tensor
        ``(..., P, 4)`` point-form boxes, one per prior.
    priors : torch.Tensor
        ``(P, 4)`` centre-size priors.
    variances : sequence of float
        ``(center_variance, size_variance)``.
    eps : float, default ENCODE_EPS
        Lower bound of the size ratio inside the ``log``.

    Returns
    -------
    torch.Tensor
        ``(..., P, 4)`` offsets.
    """
    return _boxes.encode(matched, priors, variances=variances, anchors_center=True, log_eps=eps)


def decode(loc, priors, variances):
    """Decode predicted offsets into point-form boxes (the inverse of :func:`encode`).

    Parameters
    ----------
    loc : torch.Tensor
        ``(..., P, 4)`` predicted offsets.
    priors : torch.Tensor
        ``(P, 4)`` centre-size priors.
    variances : sequence of float
        ``(center_variance, size_variance)``.

    Returns
    -------
    torch.Tensor
        ``(..., P, 4)`` boxes ``(x1, y1, x2, y2)``; ``x2`` is computed as ``x1 + w`` as in
        the reference (not ``cx + w / 2``, which can round differently).
    """
    return _boxes.decode(loc, priors, variances=variances, anchors_center=True)


def log_sum_exp(x):
    """Row-wise ``log(sum(exp(x)))`` stabilised by the **global** maximum, as the reference.

    Used only to rank negatives in hard negative mining; the global (not per-row) shift is
    the reference's and can underflow rows far below the maximum, which we keep.

    Parameters
    ----------
    x : torch.Tensor
        ``(N, C)`` class scores.

    Returns
    -------
    torch.Tensor
        ``(N, 1)``.
    """
    x_max = x.detach().max()
    return torch.log(torch.sum(torch.exp(x - x_max), 1, keepdim=True)) + x_max
