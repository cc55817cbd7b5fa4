"""Anchor and proposal matching with void labels, and balanced sampling: seamseg's
``AnchorMatcher`` and ``ProposalMatcher``, maskrcnn-benchmark's ``Matcher``
(:func:`match_by_iou`) and ``BalancedPositiveNegativeSampler`` (:func:`balanced_sample`).

Match codes: ``k >= 0`` ground truth ``k``, :data:`NEGATIVE` (-1), :data:`VOID` (-2). Boxes
are corners in one layout throughout; ``valid_size`` in the same axis order. "No ground truth"
/ "no crowd" may be ``None`` or a ``(0, 4)`` tensor; crowd overlap is intersection over the
box's own area, ``void_threshold`` 0 turns it off. A best anchor shared by several ground truths
goes to the last (docs/faithfulness.md, "Shared detection ops"); seamseg's chunks of 16 ground
truths are computed at once (the result does not depend on them)."""
import numpy as np
import torch

from .boxes import box_ioa, box_iou

__all__ = ['VOID', 'NEGATIVE', 'match_anchors', 'subsample_anchors', 'match_proposals',
           'sample_proposals', 'match_by_iou', 'balanced_sample']

VOID = -2
NEGATIVE = -1


def _has(boxes):
    return boxes is not None and boxes.shape[0] > 0


def _crowd_overlap_ok(boxes, crowd_boxes, void_threshold):
    """True for boxes whose largest intersection-over-own-area with a crowd box is below
    ``void_threshold`` (all True when the check is off)."""
    if void_threshold == 0 or not _has(crowd_boxes):
        return torch.ones(boxes.shape[0], dtype=torch.bool, device=boxes.device)
    return box_ioa(boxes, crowd_boxes).max(dim=1)[0] < void_threshold


def match_anchors(anchors, gt_boxes, crowd_boxes, valid_size, pos_threshold=.7,
                  neg_threshold=.3, void_threshold=.7):
    """``(M,)`` int64 match codes of ``anchors`` (seamseg's ``AnchorMatcher`` before subsampling).

    Void: not inside ``valid_size`` (the unpadded input size) or on a crowd. Else best IoU
    ``>= pos_threshold`` positive, ``< neg_threshold`` negative, void between; then every ground
    truth with a positive best IoU claims its best anchor. Without ground truth every valid
    anchor is negative.
    """
    match = torch.full((anchors.shape[0],), VOID, dtype=torch.long, device=anchors.device)
    valid = ((anchors[:, 0] >= 0) & (anchors[:, 1] >= 0)
             & (anchors[:, 2] <= valid_size[0]) & (anchors[:, 3] <= valid_size[1]))
    valid &= _crowd_overlap_ok(anchors, crowd_boxes, void_threshold)
    if not valid.any():
        return match
    if not _has(gt_boxes):
        match[valid] = NEGATIVE
        return match
    match[valid] = match_by_iou(box_iou(gt_boxes, anchors[valid]), pos_threshold,
                                neg_threshold, allow_low_quality='seamseg')
    return match


def _randperm(n, generator, device):
    # seamseg draws on the match's device; an explicit generator draws on its own
    if generator is None:
        return torch.randperm(n, dtype=torch.long, device=device)
    return torch.randperm(n, generator=generator, device=generator.device).to(device)


def subsample_anchors(match, num_samples=256, pos_ratio=.5, generator=None):
    """seamseg's ``AnchorMatcher._subsample``: at most ``int(num_samples * pos_ratio)``
    positives and ``num_samples - kept positives`` negatives, the rest void; a new ``(M,)``.

    seamseg's ``torch.randperm`` draws (positives only when too many, then negatives), from
    ``generator`` or torch's global RNG, so a seeded run picks the same anchors.
    """
    match = match.clone()
    num_pos = int(num_samples * pos_ratio)
    pos_idx = torch.nonzero(match >= 0).view(-1)
    if pos_idx.numel() > num_pos:
        drop = _randperm(pos_idx.numel(), generator, match.device)[num_pos:]
        match[pos_idx[drop]] = VOID
    else:
        num_pos = pos_idx.numel()
    num_neg = num_samples - num_pos
    neg_idx = torch.nonzero(match == NEGATIVE).view(-1)
    if neg_idx.numel() > num_neg:
        drop = _randperm(neg_idx.numel(), generator, match.device)[num_neg:]
        match[neg_idx[drop]] = VOID
    return match


def sample_proposals(pos_mask, neg_mask, num_samples=128, pos_ratio=.25, rng=None):
    """seamseg's ``ProposalMatcher._subsample``: random ``min(int(num_samples * pos_ratio),
    #pos)`` positives and ``min(num_samples - that, #neg)`` negatives of the ``(P,)`` bool masks.

    Draws ``rng.permutation`` (NumPy's global RNG when None, as seamseg); returns int64
    ``pos_idx, neg_idx`` in random order, as the reference.
    """
    rng = np.random if rng is None else rng

    def pick(mask, limit):
        idx = torch.nonzero(mask).view(-1)
        if idx.numel() == 0:
            return idx
        perm = torch.from_numpy(rng.permutation(idx.numel()).astype(np.int64)).to(idx.device)
        return idx[perm[:min(limit, idx.numel())]]

    pos_idx = pick(pos_mask, int(num_samples * pos_ratio))
    neg_idx = pick(neg_mask, num_samples - pos_idx.numel())
    return pos_idx, neg_idx


def match_proposals(proposals, gt_boxes, crowd_boxes, pos_threshold=.5, neg_threshold_hi=.5,
                    neg_threshold_lo=0., void_threshold=.7, num_samples=128, pos_ratio=.25,
                    rng=None):
    """Sample and label the ROIs of one image (seamseg's ``ProposalMatcher.__call__``).

    Ground truth prepended to the proposals, crowd overlaps dropped, best IoU
    ``>= pos_threshold`` positive, ``[neg_threshold_lo, neg_threshold_hi)`` negative, then
    :func:`sample_proposals`.

    Returns
    -------
    rois : torch.Tensor
        ``(S, 4)`` sampled ROIs, positives first; ``(0, 4)`` where seamseg returns None.
    match : torch.Tensor
        ``(S,)`` int64: ground-truth index for positives, -1 for negatives.
    """
    ref = proposals if proposals is not None else gt_boxes
    empty = (ref.new_zeros(0, 4) if ref is not None else torch.zeros(0, 4),
             torch.zeros(0, dtype=torch.long, device=None if ref is None else ref.device))
    if not _has(gt_boxes):
        if not _has(proposals):
            return empty
        rois = proposals
    else:
        rois = gt_boxes if not _has(proposals) else torch.cat([gt_boxes, proposals])
    rois = rois[_crowd_overlap_ok(rois, crowd_boxes, void_threshold)]
    if rois.shape[0] == 0:
        return empty
    if _has(gt_boxes):
        best_iou, best_gt = box_iou(rois, gt_boxes).max(dim=1)
        pos = best_iou >= pos_threshold
        neg = (best_iou >= neg_threshold_lo) & (best_iou < neg_threshold_hi)
    else:
        best_gt = None
        pos = torch.zeros(rois.shape[0], dtype=torch.bool, device=rois.device)
        neg = ~pos
    if not (pos.any() or neg.any()):
        return empty
    pos_idx, neg_idx = sample_proposals(pos, neg, num_samples, pos_ratio, rng)
    match = torch.full((pos_idx.numel() + neg_idx.numel(),), NEGATIVE, dtype=torch.long,
                       device=rois.device)
    if pos_idx.numel():
        match[:pos_idx.numel()] = best_gt[pos_idx]
    return rois[torch.cat([pos_idx, neg_idx])], match


def match_by_iou(iou, high, low, allow_low_quality=False):
    """maskrcnn-benchmark's ``Matcher`` (and seamseg's IoU rule): ``(P,)`` int64, per column of
    ``iou`` ``(G, P)`` the best row (first on ties), :data:`NEGATIVE` below ``low``,
    :data:`VOID` in ``[low, high)``.

    ``allow_low_quality``: True (maskrcnn-benchmark) every column tied for a row's best IoU takes
    its own pre-threshold best match; ``'seamseg'`` every row with a positive best IoU claims its
    best column (first on ties; the last row wins a shared column).
    """
    if iou.numel() == 0:
        return iou.new_full((iou.shape[1],), NEGATIVE, dtype=torch.long)
    vals, all_matches = iou.max(dim=0)
    matches = all_matches.clone()
    matches[vals < low] = NEGATIVE
    matches[(vals >= low) & (vals < high)] = VOID
    if allow_low_quality == 'seamseg':
        row_best, row_best_col = iou.max(dim=1)
        claims = torch.nonzero(row_best > 0).view(-1)
        if claims.numel():
            winner = torch.full_like(matches, -1)
            winner.scatter_reduce_(0, row_best_col[claims], claims, 'amax')
            matches = torch.where(winner >= 0, winner, matches)
    elif allow_low_quality:
        highest = iou.max(dim=1)[0]
        preds = torch.nonzero(iou == highest[:, None])[:, 1]
        matches[preds] = all_matches[preds]
    return matches


def balanced_sample(labels, batch_size, pos_fraction, generator=None):
    """maskrcnn-benchmark's ``BalancedPositiveNegativeSampler`` for one image: bool masks
    ``pos_mask, neg_mask`` of ``labels`` (``>= 1`` positive, 0 negative, other ignored), drawn
    from ``generator`` (torch's global RNG when None), positives first."""
    pos = torch.nonzero(labels >= 1).squeeze(1)
    neg = torch.nonzero(labels == 0).squeeze(1)
    num_pos = min(int(batch_size * pos_fraction), pos.numel())
    num_neg = min(batch_size - num_pos, neg.numel())
    pos = pos[torch.randperm(pos.numel(), generator=generator)[:num_pos].to(pos.device)]
    neg = neg[torch.randperm(neg.numel(), generator=generator)[:num_neg].to(neg.device)]
    return tuple(torch.zeros_like(labels, dtype=torch.bool).index_fill_(0, idx, True)
                 for idx in (pos, neg))
