"""Detection losses of the two-stage flavours (seamseg's and maskrcnn-benchmark's)."""
import torch
import torch.nn.functional as F

__all__ = ['smooth_l1', 'fast_rcnn_loss']


def smooth_l1(x1, x2, sigma=1.):
    """seamseg's ``smooth_l1`` (``seamseg/modules/losses.py``), Detectron's sigma form.

    ``0.5 * sigma**2 * d**2`` where ``|d| < 1 / sigma**2``, else ``|d| - 0.5 / sigma**2``,
    with ``d = x1 - x2``; the branch is chosen on the detached ``|d|`` as the reference.
    ``sigma = 3`` in seamseg's RPN, 1 in its ROI head.

    Parameters
    ----------
    x1, x2 : torch.Tensor
        Predictions and targets (broadcastable).
    sigma : float, default 1.

    Returns
    -------
    torch.Tensor
        Element-wise loss (seamseg sums it itself and divides by its own normaliser).
    """
    sigma2 = sigma ** 2
    diff = x1 - x2
    abs_diff = diff.abs()
    mask = (abs_diff.detach() < (1. / sigma2)).to(diff.dtype)
    return mask * (sigma2 / 2.) * diff ** 2 + (1 - mask) * (abs_diff - 0.5 / sigma2)


def fast_rcnn_loss(cls_logits, bbx_logits, cls_lbl, bbx_lbl, sigma=1.):
    """The ROI box head's loss (seamseg's ``DetectionLoss``, maskrcnn-benchmark's
    ``FastRCNNLossComputation``): mean cross-entropy; smooth-L1 of the positives' deltas of
    their class, summed and divided by the number of ROIs.

    Parameters
    ----------
    cls_logits : torch.Tensor
        ``(S, thing + 1)``, background first.
    bbx_logits : torch.Tensor
        ``(S, thing, 4)``: class ``c >= 1`` in column ``c - 1`` (maskrcnn-benchmark's
        regression without its background column).
    cls_lbl : torch.Tensor
        ``(S,)`` int64, 0 for background.
    bbx_lbl : torch.Tensor
        ``(#positives, 4)`` targets of the positives, in ROI order.
    sigma : float, default 1.

    Returns
    -------
    cls_loss, bbx_loss : torch.Tensor
        0-d.
    """
    cls_loss = F.cross_entropy(cls_logits, cls_lbl)
    positives = cls_lbl > 0
    if positives.any():
        lbl = cls_lbl[positives]
        deltas = bbx_logits[positives][torch.arange(lbl.numel(), device=lbl.device), lbl - 1]
        bbx_loss = smooth_l1(deltas, bbx_lbl, sigma).sum() / cls_lbl.numel()
    else:  # a zero that keeps the graph connected
        bbx_loss = bbx_logits.sum() * 0
    return cls_loss, bbx_loss
