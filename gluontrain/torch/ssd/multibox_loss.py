"""SSD's MultiBox loss with hard negative mining (``layers/modules/multibox_loss.py``).

Same arguments, defaults and numbers as amdegroot/ssd.pytorch; its fixes (reshape before
``loss_c[pos] = 0``, division by ``max(N, 1)``, all-background targets for an image without
ground truth, stable tie order): docs/faithfulness.md, "SSD300", "Deliberate differences".
``variance`` is an argument (the reference read the COCO config's, ``(0.1, 0.2)``, the
default) and ``use_gpu`` is accepted but unused: targets follow ``loc``'s device.

The targets of the whole batch are matched at once by
:func:`~gluontrain.torch.ssd.box_utils.match_batch` (bit-identical to per-image ``match``),
and the mining's double argsort is replaced by a partial selection with the same result
(see :func:`_first_ranked`)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

from .box_utils import log_sum_exp, match_batch

__all__ = ['MultiBoxLoss', 'pad_targets']


def pad_targets(targets, dtype=None, device=None):
    """Bring SSD targets to the padded form ``(B, M, 5)``.

    Parameters
    ----------
    targets : list of torch.Tensor or torch.Tensor
        Either a list of ``(n_i, 5)`` tensors ``(x1, y1, x2, y2, label)`` or a ``(B, M, 5)``
        tensor padded with rows of -1 (``Pad(pad_val=-1)``).
    dtype, device : optional
        Conversion of the result.

    Returns
    -------
    padded : torch.Tensor
        ``(B, M, 5)``, missing rows filled with -1.
    valid : torch.Tensor
        ``(B, M)`` bool: rows with a label ``>= 0`` (a negative label marks padding).
    """
    if isinstance(targets, torch.Tensor):
        padded = targets.to(dtype=dtype, device=device)
    else:
        width = max([t.shape[0] for t in targets] + [0])
        padded = torch.full((len(targets), width, 5), -1.0, dtype=dtype, device=device)
        for i, t in enumerate(targets):
            padded[i, :t.shape[0]] = t.to(dtype=padded.dtype, device=device)
    return padded, padded[..., 4] >= 0


def _first_ranked(loss, count):
    """``rank < count`` where ``rank`` is each entry's position in a stable descending sort.

    The reference computes ``rank`` with two full sorts per row. Only the first ``count``
    ranks matter: with ``v`` the ``count``-th largest value of a row, the stable sort puts
    every entry ``> v`` first (fewer than ``count`` of them), then the entries ``== v`` by
    index; so the selected set is the entries ``> v`` plus the lowest-index entries ``== v``
    up to ``count``. ``topk`` values (not indices, whose tie order is unspecified) give ``v``
    in linear time. Rows must hold no NaN (the loss would be NaN anyway).

    Parameters
    ----------
    loss : torch.Tensor
        ``(B, P)`` values to rank, largest first.
    count : torch.Tensor
        ``(B, 1)`` integer number of entries to select per row (``< P``).

    Returns
    -------
    torch.Tensor
        ``(B, P)`` bool selection.
    """
    k = int(count.max()) if count.numel() else 0
    if k <= 0:
        return torch.zeros_like(loss, dtype=torch.bool)
    kth = loss.topk(k, dim=1).values.gather(1, (count - 1).clamp(min=0))
    above = loss > kth
    tied = loss == kth
    room = count - above.sum(1, keepdim=True)
    return (above | (tied & (tied.cumsum(1) <= room))) & (count > 0)


class MultiBoxLoss(nn.Module):
    """SSD loss: ``(L_conf + L_loc) / N``, smooth L1 on positives, CE on mined priors.

    Parameters
    ----------
    num_classes : int
        Classes including background (21 for VOC).
    overlap_thresh : float
        IoU for a prior to be positive (0.5).
    prior_for_matching : bool
        Kept for compatibility; unused (as in the reference).
    bkg_label : int
        Kept for compatibility; background is class 0 (as in the reference).
    neg_mining : bool
        Kept for compatibility; mining always runs (as in the reference).
    neg_pos : int
        Negatives per positive (3).
    neg_overlap : float
        Kept for compatibility; unused (as in the reference).
    encode_target : bool
        Kept for compatibility; unused (as in the reference).
    use_gpu : bool, default False
        Ignored: targets are built on the predictions' device.
    variance : tuple of float, default (0.1, 0.2)
        Encoding variances.

    Examples
    --------
    >>> criterion = MultiBoxLoss(21, 0.5, True, 0, True, 3, 0.5, False)  # train.py's call
    """

    def __init__(self, num_classes, overlap_thresh, prior_for_matching, bkg_label,
                 neg_mining, neg_pos, neg_overlap, encode_target, use_gpu=False,
                 variance=(0.1, 0.2)):
        super().__init__()
        # train.py passes them; unused, as in the reference (see above)
        del prior_for_matching, bkg_label, neg_mining, neg_overlap, encode_target, use_gpu
        self.num_classes = num_classes
        self.threshold = overlap_thresh
        self.negpos_ratio = neg_pos
        self.variance = tuple(variance)

    def forward(self, predictions, targets):
        """Compute the localisation and confidence losses.

        Parameters
        ----------
        predictions : tuple
            ``(loc, conf, priors)``: ``(B, P, 4)`` offsets, ``(B, P, C)`` class logits and
            ``(P', 4)`` centre-size priors (the first ``P`` are used).
        targets : list of torch.Tensor or torch.Tensor
            Per image ``(n_i, 5)`` rows ``(x1, y1, x2, y2, label)`` in ``[0, 1]`` with
            0-based labels, or the same padded to ``(B, M, 5)`` with rows of -1.

        Returns
        -------
        loss_l : torch.Tensor
            Scalar, summed smooth L1 over positives divided by ``max(N, 1)``.
        loss_c : torch.Tensor
            Scalar, summed cross-entropy over positives and mined negatives, same divisor.
        """
        loc_data, conf_data, priors = predictions
        num = loc_data.size(0)
        priors = priors[:loc_data.size(1), :].detach()
        # Ground truth in the priors' dtype (the reference's float32 targets).
        padded, valid = pad_targets(targets, dtype=priors.dtype, device=loc_data.device)
        with torch.no_grad():
            loc_t, conf_t = match_batch(self.threshold, padded[..., :4], priors,
                                        self.variance, padded[..., 4], valid)
        pos = conf_t > 0

        # Localization loss (smooth L1) over positives, summed.
        loss_l = F.smooth_l1_loss(loc_data[pos], loc_t[pos], reduction='sum')

        # Hard negative mining: rank priors by their CE (global-max log-sum-exp, as the
        # reference), positives zeroed, and take the num_neg largest per image. Ranking
        # needs no gradient.
        with torch.no_grad():
            batch_conf = conf_data.detach().reshape(-1, self.num_classes)
            loss_c = log_sum_exp(batch_conf) - batch_conf.gather(1, conf_t.view(-1, 1))
            loss_c = loss_c.view(num, -1)
            loss_c[pos] = 0  # after the reshape (the reference's order raises today)
            num_pos = pos.long().sum(1, keepdim=True)
            num_neg = torch.clamp(self.negpos_ratio * num_pos, max=pos.size(1) - 1)
            # rank < num_neg; a fractional num_neg (float neg_pos) admits ceil(num_neg) ranks
            count = torch.ceil(num_neg).long() if num_neg.is_floating_point() else num_neg
            neg = _first_ranked(loss_c, count)

        # Confidence loss over positives and mined negatives, summed.
        chosen = pos | neg
        loss_c = F.cross_entropy(conf_data[chosen], conf_t[chosen], reduction='sum')

        # Reference divides by N = total positives (inf/nan when 0); max(N, 1) is our fix.
        n = num_pos.sum().clamp(min=1)
        return loss_l / n, loss_c / n
