"""Detection losses shared by the two-stage recipes."""

__all__ = ['smooth_l1']


def smooth_l1(x1, x2, sigma=1., reduction='none'):
    """seamseg's ``smooth_l1`` (``seamseg/modules/losses.py``), Detectron's sigma form.

    ``0.5 * sigma**2 * d**2`` where ``|d| < 1 / sigma**2``, else ``|d| - 0.5 / sigma**2``,
    with ``d = x1 - x2``; the branch is chosen on the detached ``|d|`` as the reference.
    ``sigma = 3`` in seamseg's RPN, 1 in its ROI head.

    Parameters
    ----------
    x1, x2 : torch.Tensor
        Predictions and targets (broadcastable).
    sigma : float, default 1.
    reduction : {'none', 'sum', 'mean'}, default 'none'
        seamseg sums the element-wise loss itself and divides by its own normaliser, hence
        'none' by default.

    Returns
    -------
    torch.Tensor
        Element-wise loss, or its sum / mean.
    """
    if reduction not in ('none', 'sum', 'mean'):
        raise ValueError("reduction={!r}: choose 'none', 'sum' or 'mean'".format(reduction))
    sigma2 = sigma ** 2
    diff = x1 - x2
    abs_diff = diff.abs()
    mask = (abs_diff.detach() < (1. / sigma2)).to(diff.dtype)
    loss = mask * (sigma2 / 2.) * diff ** 2 + (1 - mask) * (abs_diff - 0.5 / sigma2)
    if reduction == 'sum':
        return loss.sum()
    return loss.mean() if reduction == 'mean' else loss
