"""Anchor generation of both two-stage flavours.

- seamseg's ``RPNAlgo._base_anchors`` / ``_shifted_anchors`` (``seamseg/algos/rpn.py``) and
  ``RPNAlgoFPN`` (``seamseg/algos/fpn.py``): :func:`base_anchors`, :func:`fpn_anchors`,
  ``(y0, x0, y1, x1)`` layout;
- maskrcnn-benchmark's ``generate_anchors`` (one size per level, ``np.round`` of the ratio
  sides, ``+1`` pixel convention): :func:`generate_anchors`, ``(x0, y0, x1, y1)`` layout;
- :func:`grid_anchors` shifts either over a feature map (``layout``).
"""
import math

import numpy as np
import torch

__all__ = ['base_anchors', 'generate_anchors', 'grid_anchors', 'fpn_anchors']


def base_anchors(stride, scales=(8.,), ratios=(1., .5, 2.)):
    """The anchors of one cell at the origin, seamseg's ``_base_anchors``.

    For each scale, then each ratio ``r``: ``h = stride * scale * sqrt(r)``,
    ``w = stride * scale * sqrt(1 / r)``, centred on ``stride / 2``.

    Parameters
    ----------
    stride : float
        The level's stride in input pixels.
    scales : sequence of float, default (8.,)
        seamseg's ``anchor_scale`` (size = scale x stride: 32..256 on P2..P5).
    ratios : sequence of float, default (1., .5, 2.)
        Height / width ratios.

    Returns
    -------
    list of tuple
        ``(y0, x0, y1, x1)`` per anchor (Python floats, as the reference builds them).
    """
    center = stride / 2.
    out = []
    for scale in scales:
        for ratio in ratios:
            h = stride * scale * math.sqrt(ratio)
            w = stride * scale * math.sqrt(1. / ratio)
            out.append((center - h / 2., center - w / 2., center + h / 2., center + w / 2.))
    return out


def generate_anchors(stride, sizes, aspect_ratios):
    """maskrcnn-benchmark's ``generate_anchors``: the cell anchors of one level.

    Its ``_ratio_enum`` then ``_scale_enum`` about the centre ``(stride - 1) / 2`` of the
    ``+1``-convention cell: sides ``w = round(sqrt(stride^2 / r))``, ``h = round(w * r)``,
    each times ``size / stride`` (the reference's re-derived widths and centres are these
    numbers exactly: half-integers in float64).

    Parameters
    ----------
    stride : int
    sizes : sequence of float
    aspect_ratios : sequence of float
        Height / width.

    Returns
    -------
    torch.Tensor
        ``(len(ratios) * len(sizes), 4)`` float32 ``xyxy`` anchors of the cell at the origin
        (``+1`` convention), ratio-major.
    """
    ratios = np.asarray(aspect_ratios, dtype=np.float64)
    ws = np.round(np.sqrt(float(stride) * float(stride) / ratios))
    hs = np.round(ws * ratios)
    scales = np.asarray(sizes, dtype=np.float64) / stride
    ws, hs = np.outer(ws, scales).reshape(-1, 1), np.outer(hs, scales).reshape(-1, 1)
    ctr = (stride - 1) / 2.
    anchors = np.hstack((ctr - 0.5 * (ws - 1), ctr - 0.5 * (hs - 1),
                         ctr + 0.5 * (ws - 1), ctr + 0.5 * (hs - 1)))
    return torch.from_numpy(anchors).float()


def grid_anchors(base, stride, height, width, dtype=torch.float32, device='cpu', layout='yx'):
    """All anchors of a ``height x width`` feature map, seamseg's ``_shifted_anchors``.

    The order is row-major over cells (y, then x), then the cell's anchors in ``base``
    order: the order of RPN logits ``permute(0, 2, 3, 1).reshape(N, -1)``.

    Parameters
    ----------
    base : sequence of 4-tuples or torch.Tensor
        :func:`base_anchors` (or :func:`generate_anchors`) of this level.
    stride : float
        Offset between cells (cell ``(i, j)`` adds ``(i * stride, j * stride)``).
    height, width : int
        Feature map size.
    dtype : torch.dtype, default float32
    device : torch.device or str, default 'cpu'
    layout : {'yx', 'xy'}
        Corner order of ``base`` and of the result: seamseg's ``(y0, x0, y1, x1)`` or
        maskrcnn-benchmark's ``(x0, y0, x1, y1)``.

    Returns
    -------
    torch.Tensor
        ``(height * width * len(base), 4)`` anchors; empty for an empty map.
    """
    grid_y = torch.arange(0, stride * height, stride, dtype=dtype, device=device)[:height]
    grid_x = torch.arange(0, stride * width, stride, dtype=dtype, device=device)[:width]
    grid = [grid_y.view(-1, 1).expand(height, width), grid_x.view(1, -1).expand(height, width)]
    grid = torch.stack(grid if layout == 'yx' else grid[::-1], -1)
    cell = torch.as_tensor(base, dtype=dtype, device=device).view(1, 1, -1, 4)
    return (cell + grid.repeat(1, 1, 2).unsqueeze(2)).view(-1, 4)


def fpn_anchors(sizes, strides=(4, 8, 16, 32), scale=8., ratios=(1., .5, 2.),
                dtype=torch.float32, device='cpu'):
    """The anchors of every FPN level, concatenated finest first (seamseg's RPN order).

    Parameters
    ----------
    sizes : sequence of (int, int)
        ``(H_l, W_l)`` of each level's RPN output.
    strides : sequence of float, default (4, 8, 16, 32)
        Stride of each level.
    scale : float, default 8.
    ratios : sequence of float, default (1., .5, 2.)
    dtype, device
        Of the result.

    Returns
    -------
    torch.Tensor
        ``(sum_l H_l * W_l * len(ratios), 4)`` anchors ``(y0, x0, y1, x1)``.
    """
    if len(sizes) != len(strides):
        raise ValueError('fpn_anchors: {} level sizes for {} strides'.format(len(sizes),
                                                                           len(strides)))
    return torch.cat([grid_anchors(base_anchors(s, (scale,), ratios), s, h, w, dtype, device)
                      for (h, w), s in zip(sizes, strides)])
