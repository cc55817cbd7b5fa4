"""Box utilities of SSD300, as ``layers/box_utils.py`` of amdegroot/ssd.pytorch.

Boxes are ``(x1, y1, x2, y2)`` ("point form") or ``(cx, cy, w, h)`` ("centre-size form"),
relative to the image size, areas without ``+1``; ``variances`` is ``(center, size)``,
``(0.1, 0.2)`` in SSD300. Extra leading (batch) dimensions compute the reference's operations
element by element, bit-identical to a per-image call. The fixes: docs/faithfulness.md,
"SSD300", "Deliberate differences"; valid inputs give the reference's numbers."""
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
    """For every prior, the largest gt index whose best prior it is, else -1 (the
    reference's loop lets the last gt win; ``amax`` makes that deterministic). Column
    ``num_priors`` of ``best_prior_idx`` is a sink for ignored gts, dropped."""
    lead = best_prior_idx.shape[:-1]
    gt_index = torch.arange(best_prior_idx.shape[-1], device=best_prior_idx.device)
    forced = torch.full(lead + (num_priors + 1,), -1, dtype=torch.long,
                        device=best_prior_idx.device)
    forced.scatter_reduce_(-1, best_prior_idx, gt_index.expand_as(best_prior_idx), 'amax')
    return forced[..., :num_priors]


def match(threshold, truths, priors, variances, labels, loc_t, conf_t, idx):
    """Match the priors of one image to its ground truth; write ``loc_t[idx]`` (encoded
    offsets) and ``conf_t[idx]`` (class targets) in place.

    Each prior takes the gt of highest IoU; every gt's best prior is forced to that gt with
    overlap 2 (the last gt wins a shared prior). ``conf = label + 1`` (``labels`` 0-based), 0
    where the overlap is below ``threshold``. ``truths`` ``(G, 4)`` point form, ``priors``
    ``(P, 4)`` centre-size.
    """
    # the batch of one: no padding, so the same overlaps, ties and targets as the reference's
    # per-image loop (an image without objects is all background, where the reference raises)
    loc, conf = match_batch(threshold, truths[None], priors, variances, labels[None])
    loc_t[idx] = loc[0]
    conf_t[idx] = conf[0]  # cast to conf_t's integer dtype, as the reference does


def match_batch(threshold, truths, priors, variances, labels, valid=None):
    """The targets of :func:`match` for a whole padded batch at once, bit for bit.

    Padding gts (``valid`` False, default all True) take part in nothing: overlaps -1, best
    prior sent to a discarded column. Real gts keep their order, hence the same tie-breaking.
    ``truths`` ``(B, M, 4)``, ``labels`` ``(B, M)``.

    Returns
    -------
    loc_t, conf_t : torch.Tensor
        ``(B, P, 4)`` encoded offsets, ``(B, P)`` int64 class targets (0 background).
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
    """SSD's regression targets of ``(..., P, 4)`` point-form boxes:
    ``((c_gt - c_p) / (v0 * wh_p), log(max(wh_gt / wh_p, eps)) / v1)`` (the ``eps`` clamp is
    our fix and changes no valid value)."""
    return _boxes.encode(matched, priors, variances=variances, anchors_center=True, log_eps=eps)


def decode(loc, priors, variances):
    """Point-form boxes from offsets (the inverse of :func:`encode`); ``x2 = x1 + w`` as the
    reference (not ``cx + w / 2``, which can round differently)."""
    return _boxes.decode(loc, priors, variances=variances, anchors_center=True)


def log_sum_exp(x):
    """Row-wise ``log(sum(exp(x)))`` ``(N, 1)`` stabilised by the **global** maximum, as the
    reference (for ranking hard negatives; rows far below the maximum can underflow, kept)."""
    x_max = x.detach().max()
    return torch.log(torch.sum(torch.exp(x - x_max), 1, keepdim=True)) + x_max
