"""Bilinear ROI sampling on the CPU as two small matrix products per ROI (the CPU path of
:mod:`.roi`).

A bilinear sample at ``(y, x)`` weighs rows ``lo_y, hi_y`` and columns ``lo_x, hi_x`` with
``w_y * w_x``: the weight factors into a row part and a column part. So do the references'
sample grids (seamseg's one sample per cell, maskrcnn-benchmark's ``g_h x g_w`` samples per
bin: a product of a row list and a column list), and with them every output of one ROI::

    out[c] = Wy @ x[c, y0:y0 + h, x0:x0 + w] @ Wx^T

``Wy`` (``out_h x h``) holds each output row's summed sample weights over the rows the ROI
reads (at most four non-zeros per sample pair), ``Wx`` likewise. The feature map is read
channels-last (one copy per map) so that each row of a crop is a contiguous ``w x C`` block:
``Wx @`` is a batched product over the crop's rows and ``Wy @`` one product over
``(h, out_w * C)``. The backward is the transposed products (on the channels-first upstream
gradient), added into the channels-first gradient of the map.

Why not ``grid_sample`` on the CPU (the CUDA path): it gathers four pixels per sample from
``C`` planes a map apart (memory-latency bound), and its backward scatters the same way; with
512 ROIs, 256 channels and 14 x 14 samples this path is ~3x faster forward and backward
(``bench/compiled_ops.py``). The weights follow the references' kernels (which row, clamp and
validity rules) exactly; the products only sum in another order (float rounding).
"""
import torch

__all__ = ['axis_weights', 'separable_sample']


def axis_weights(roi, cell, lo, hi, w_lo, w_hi, n_roi, cells):
    """Per-ROI interpolation weights along one axis from a flat list of samples.

    Parameters
    ----------
    roi, cell : torch.Tensor
        ``(S,)`` int64: the ROI and the output cell (row or column) of each sample.
    lo, hi : torch.Tensor
        ``(S,)`` int64 pixel indices the sample reads, inside the map.
    w_lo, w_hi : torch.Tensor
        ``(S,)`` their weights (already scaled by the sample's share of its cell, and 0 for a
        sample that counts as nothing).
    n_roi, cells : int
        Number of ROIs and of output cells along the axis.

    Returns
    -------
    weights : torch.Tensor
        ``(n_roi, cells, span_max)``: ``weights[k, i, p]`` is the weight of pixel
        ``first[k] + p`` in cell ``i`` of ROI ``k`` (0 beyond ``span[k]``).
    first, span : torch.Tensor
        ``(n_roi,)`` int64: first pixel and number of pixels each ROI reads (0 and 1 for an
        ROI without samples).
    """
    first = lo.new_zeros(n_roi).scatter_reduce_(0, roi, lo, 'amin', include_self=False)
    last = hi.new_zeros(n_roi).scatter_reduce_(0, roi, hi, 'amax', include_self=False)
    span = last - first + 1
    weights = w_lo.new_zeros(n_roi, cells, int(span.max()) if n_roi else 1)
    weights.index_put_((roi, cell, lo - first[roi]), w_lo, accumulate=True)
    weights.index_put_((roi, cell, hi - first[roi]), w_hi, accumulate=True)
    return weights, first, span


class _SeparableSample(torch.autograd.Function):
    """``out[k] = Wy[k] @ x[n_k, :, rows_k, cols_k] @ Wx[k]^T``; gradient for ``x`` only."""

    @staticmethod
    def forward(ctx, x, wy, wx, bounds):  # pylint: disable=arguments-differ
        chans, rows, cols = x.shape[1], wy.shape[1], wx.shape[1]
        xl = x.permute(0, 2, 3, 1).contiguous()  # a no-op for a channels-last map
        out = x.new_empty(wy.shape[0], rows, cols * chans)
        for k, (n, y0, h, x0, w) in enumerate(bounds):
            # columns first, a batch over the crop's rows (each a contiguous w x C block),
            # then the rows in one product that writes the ROI's (out_h, out_w x C) output
            mid = torch.matmul(wx[k, :, :w], xl[n, y0:y0 + h, x0:x0 + w])
            torch.mm(wy[k, :, :h], mid.view(h, cols * chans), out=out[k])
        ctx.save_for_backward(wy, wx)
        ctx.bounds, ctx.x_shape = bounds, x.shape
        # channels-last layout, not copied here: the caller copies it once
        return out.view(-1, rows, cols, chans).permute(0, 3, 1, 2)

    @staticmethod
    def backward(ctx, grad):  # pylint: disable=arguments-differ
        wy, wx = ctx.saved_tensors
        chans, rows, cols = ctx.x_shape[1], wy.shape[1], wx.shape[1]
        # added into the channels-first gradient directly: transposing a channels-last one
        # back costs more than these strided additions
        grad_x = grad.new_zeros(ctx.x_shape)
        grad = grad.contiguous()
        for k, (n, y0, h, x0, w) in enumerate(ctx.bounds):
            mid = torch.mm(grad[k].view(chans * rows, cols), wx[k, :, :w])  # (C x out_h, w)
            mid = mid.view(chans, rows, w).transpose(0, 1).reshape(rows, chans * w)
            crop = torch.mm(wy[k, :, :h].t(), mid).view(h, chans, w)
            grad_x[n, :, y0:y0 + h, x0:x0 + w] += crop.transpose(0, 1)
        return grad_x, None, None, None


def separable_sample(x, batch_idx, y_weights, x_weights):
    """Every ROI's outputs as ``Wy @ crop @ Wx^T`` (module docstring), differentiable in ``x``.

    Parameters
    ----------
    x : torch.Tensor
        ``(N, C, H, W)`` features (CPU).
    batch_idx : torch.Tensor
        ``(K,)`` image of each ROI (checked by the caller).
    y_weights, x_weights : tuple
        :func:`axis_weights` results along the rows and the columns.

    Returns
    -------
    torch.Tensor
        ``(K, C, out_h, out_w)`` in the channels-last layout (not contiguous).
    """
    wy, first_y, span_y = y_weights
    wx, first_x, span_x = x_weights
    bounds = torch.stack([batch_idx.long(), first_y, span_y, first_x, span_x], 1).tolist()
    with torch.autocast('cpu', enabled=False):
        return _SeparableSample.apply(x, wy.to(x.dtype), wx.to(x.dtype), bounds)
