"""ROI feature extraction in plain torch (autograd gives the backward): seamseg's
``roi_sampling``, maskrcnn-benchmark's (legacy) ``ROIAlign``, and FPN level assignment.

Both ops take ``x`` ``(N, C, H, W)``, ``boxes`` ``(K, 4)`` in feature-map coordinates and
``batch_idx`` ``(K,)`` (image of each box), and return ``(K, C, out_h, out_w)`` in ``x``'s
dtype. The boxes get no gradient (the references' kernels return none for them either).
With ``K = 0`` the result is an empty ``(0, C, out_h, out_w)`` tensor.
"""
import torch

__all__ = ['roi_sampling', 'roi_align', 'fpn_levels', 'multilevel_roi_sampling',
           'multilevel_roi_align']


def _bilinear(x, batch_idx, rows, cols):
    """``sum_{a, b} wy_a * wx_b * x[n, :, i_a, j_b]`` over the two neighbours of every sample.

    ``rows`` / ``cols`` are ``(i_lo, i_hi, w_lo, w_hi)`` with ``(K, S)`` index and weight
    tensors; the sum is ``w_lo_y * (w_lo_x * v_ll + w_hi_x * v_lh) + w_hi_y * (...)``, the
    order of seamseg's interpolator.
    """
    n, c, h, w = x.shape
    flat = x.permute(0, 2, 3, 1).reshape(n * h * w, c)
    base = batch_idx.long()[:, None, None] * h

    def pick(i, j):  # (K, Sy), (K, Sx) -> (K, Sy, Sx, C)
        return flat[((base + i[:, :, None]) * w + j[:, None, :])]

    i_lo, i_hi, wy_lo, wy_hi = rows
    j_lo, j_hi, wx_lo, wx_hi = cols
    wx_lo, wx_hi = wx_lo[:, None, :, None].to(x.dtype), wx_hi[:, None, :, None].to(x.dtype)
    low = wx_lo * pick(i_lo, j_lo) + wx_hi * pick(i_lo, j_hi)
    high = wx_lo * pick(i_hi, j_lo) + wx_hi * pick(i_hi, j_hi)
    out = wy_lo[:, :, None, None].to(x.dtype) * low + wy_hi[:, :, None, None].to(x.dtype) * high
    return out.permute(0, 3, 1, 2)


def _seamseg_axis(p0, p1, size, extent, padding):
    """Neighbours and weights along one axis for seamseg's sample points (K, size)."""
    k = torch.arange(size, dtype=p0.dtype, device=p0.device) + 0.5
    s = k / size * (p1 - p0)[:, None] + p0[:, None]      # roi_to_img
    lo = torch.floor(s - 0.5)
    delta = s - (lo + 0.5)
    lo = lo.long()
    hi = lo + 1
    w_lo, w_hi = 1 - delta, delta
    if padding == 'zero':
        w_lo = w_lo * ((lo >= 0) & (lo < extent))
        w_hi = w_hi * ((hi >= 0) & (hi < extent))
    return lo.clamp(0, extent - 1), hi.clamp(0, extent - 1), w_lo, w_hi


def roi_sampling(x, boxes, batch_idx, roi_size=(14, 14), padding='border'):
    """seamseg's ``roi_sampling`` (bilinear, one sample per output cell).

    Output cell ``(i, j)`` samples ``y = (i + 0.5) / out_h * (y1 - y0) + y0`` and likewise
    ``x``; the sample is bilinear between pixel centres at integer + 0.5 (neighbours
    ``floor(s - 0.5)`` and the next), as seamseg's ``include/roi_sampling.h``.

    Parameters
    ----------
    x : torch.Tensor
        ``(N, C, H, W)`` features.
    boxes : torch.Tensor
        ``(K, 4)`` boxes ``(y0, x0, y1, x1)`` (seamseg's layout) in ``x``'s pixel units;
        coordinates are computed in ``boxes``' dtype (seamseg: float32).
    batch_idx : torch.Tensor
        ``(K,)`` integer image index of each box.
    roi_size : (int, int), default (14, 14)
        ``(out_h, out_w)``.
    padding : {'border', 'zero'}, default 'border'
        Out-of-image neighbours read the nearest edge pixel (seamseg's default) or 0.

    Returns
    -------
    torch.Tensor
        ``(K, C, out_h, out_w)``.
    """
    if padding not in ('border', 'zero'):
        raise ValueError("padding={!r}: choose 'border' or 'zero'".format(padding))
    boxes = boxes.detach()
    rows = _seamseg_axis(boxes[:, 0], boxes[:, 2], roi_size[0], x.shape[2], padding)
    cols = _seamseg_axis(boxes[:, 1], boxes[:, 3], roi_size[1], x.shape[3], padding)
    return _bilinear(x, batch_idx, rows, cols)


def _align_axis(start, end, pooled, grid, extent, aligned):
    """maskrcnn-benchmark's sample points along one axis: neighbours, weights (K, pooled*grid)."""
    length = end - start if aligned else torch.clamp(end - start, min=1.0)
    bin_size = length / pooled
    ph = torch.arange(pooled, dtype=start.dtype, device=start.device).repeat_interleave(grid)
    it = (torch.arange(grid, dtype=start.dtype, device=start.device) + .5).repeat(pooled)
    s = start[:, None] + ph * bin_size[:, None] + it * bin_size[:, None] / grid
    valid = (s >= -1.0) & (s <= extent)
    s = s.clamp(min=0)
    lo = s.floor().long()
    edge = lo >= extent - 1
    lo = torch.where(edge, torch.full_like(lo, extent - 1), lo)
    hi = torch.where(edge, lo, lo + 1)
    s = torch.where(edge, lo.to(s.dtype), s)
    frac = s - lo
    return lo, hi, (1. - frac) * valid, frac * valid


def roi_align(x, boxes, batch_idx, output_size=(7, 7), spatial_scale=1.0, sampling_ratio=2,
              aligned=False):
    """ROIAlign as maskrcnn-benchmark's ``ROIAlign_cpu.cpp`` (``aligned=False``, the legacy
    one Scene-Graph-Benchmark uses) or torchvision's ``aligned=True``.

    Each bin of a box ``(x1, y1, x2, y2) * spatial_scale`` (size ``max(x2 - x1, 1) / out_w``;
    with ``aligned`` the box is shifted by -0.5 and not forced to 1 pixel) averages
    ``sampling_ratio**2`` bilinear samples; a sample beyond ``[-1, H] x [-1, W]`` counts as 0,
    others are clamped into the image as the reference does.

    Parameters
    ----------
    x : torch.Tensor
        ``(N, C, H, W)`` features.
    boxes : torch.Tensor
        ``(K, 4)`` boxes ``(x1, y1, x2, y2)`` in image pixels.
    batch_idx : torch.Tensor
        ``(K,)`` integer image index of each box.
    output_size : (int, int), default (7, 7)
        ``(out_h, out_w)``.
    spatial_scale : float, default 1.0
        Feature size / image size (1 / stride).
    sampling_ratio : int, default 2
        Samples per bin along each axis (the adaptive ``<= 0`` mode is not supported).
    aligned : bool, default False
        torchvision's half-pixel correction.

    Returns
    -------
    torch.Tensor
        ``(K, C, out_h, out_w)``.
    """
    if sampling_ratio <= 0:
        raise ValueError('sampling_ratio={}: only a fixed positive ratio is supported (the '
                         'scene-graph configs use 2)'.format(sampling_ratio))
    boxes = boxes.detach() * spatial_scale
    if aligned:
        boxes = boxes - 0.5
    (out_h, out_w), g = output_size, sampling_ratio
    rows = _align_axis(boxes[:, 1], boxes[:, 3], out_h, g, x.shape[2], aligned)
    cols = _align_axis(boxes[:, 0], boxes[:, 2], out_w, g, x.shape[3], aligned)
    samples = _bilinear(x, batch_idx, rows, cols)
    k, c = samples.shape[:2]
    return samples.view(k, c, out_h, g, out_w, g).sum((3, 5)) / (g * g)


def fpn_levels(boxes, k_min, k_max, canonical_scale=224, canonical_level=4, eps=1e-6,
               plus_one=False):
    """FPN level of each box, ``floor(canonical_level + log2(sqrt(area) / canonical_scale + eps))``
    clamped to ``[k_min, k_max]``, returned as an index from ``k_min``.

    - maskrcnn-benchmark's ``LevelMapper`` (scene-graph recipe):
      ``fpn_levels(boxes, 2, 5, 224, 4, plus_one=True)`` (its ``BoxList.area`` adds 1);
    - seamseg's ``DetectionAlgoFPN._target_level``: ``fpn_levels(boxes, 0, 3, 224, 2)``
      (levels counted from its ``fpn_min_level`` 0 = stride 4).

    Parameters
    ----------
    boxes : torch.Tensor
        ``(K, 4)`` corner boxes (either layout).
    k_min, k_max : int
        Lowest and highest level.
    canonical_scale : float, default 224
    canonical_level : int, default 4
    eps : float, default 1e-6
    plus_one : bool, default False
        Pixel-inclusive areas.

    Returns
    -------
    torch.Tensor
        ``(K,)`` int64 in ``[0, k_max - k_min]``.
    """
    one = 1.0 if plus_one else 0.0
    area = (boxes[:, 2] - boxes[:, 0] + one) * (boxes[:, 3] - boxes[:, 1] + one)
    level = torch.floor(canonical_level + torch.log2(torch.sqrt(area) / canonical_scale + eps))
    return level.clamp(min=k_min, max=k_max).long() - k_min


def _per_level(feats, levels, boxes, out_shape, pool):
    out = feats[0].new_zeros((boxes.shape[0], feats[0].shape[1]) + tuple(out_shape))
    for lvl, feat in enumerate(feats):
        idx = torch.nonzero(levels == lvl).view(-1)
        if idx.numel():
            out = out.index_put((idx,), pool(lvl, feat, idx))
    return out


def multilevel_roi_sampling(feats, boxes, batch_idx, img_size, roi_size=(14, 14),
                            canonical_scale=224, canonical_level=2, min_level=0):
    """seamseg's FPN ROI features (``DetectionAlgoFPN._head`` / ``_rois``).

    Each box goes to its level (:func:`fpn_levels` with seamseg's convention), is mapped to
    that level's pixels as ``(p - 0.5) * stride + 0.5`` with ``stride = feat_size / img_size``
    per axis, and sampled by :func:`roi_sampling`.

    Parameters
    ----------
    feats : sequence of torch.Tensor
        Levels ``(N, C, H_l, W_l)``, finest first (seamseg's P2..P5).
    boxes : torch.Tensor
        ``(K, 4)`` ``(y0, x0, y1, x1)`` in input-image pixels.
    batch_idx : torch.Tensor
        ``(K,)`` image index of each box.
    img_size : (int, int)
        Padded input size ``(H, W)``.
    roi_size : (int, int), default (14, 14)
    canonical_scale : float, default 224
    canonical_level : int, default 2
    min_level : int, default 0
        seamseg's ``fpn_min_level``: the level number of ``feats[0]``.

    Returns
    -------
    torch.Tensor
        ``(K, C, out_h, out_w)``.
    """
    levels = fpn_levels(boxes, min_level, min_level + len(feats) - 1, canonical_scale,
                        canonical_level)

    def pool(lvl, feat, idx):
        stride = boxes.new_tensor([fs / s for fs, s in zip(feat.shape[-2:], img_size)])
        return roi_sampling(feat, (boxes[idx] - 0.5) * stride.repeat(2) + 0.5, batch_idx[idx],
                            roi_size)
    return _per_level(feats, levels, boxes, roi_size, pool)


def multilevel_roi_align(feats, boxes, batch_idx, scales, output_size=(7, 7), sampling_ratio=2,
                         aligned=False):
    """maskrcnn-benchmark's ``Pooler``: :func:`roi_align` on each box's ``LevelMapper`` level.

    Parameters
    ----------
    feats : sequence of torch.Tensor
        Levels ``(N, C, H_l, W_l)``, finest first.
    boxes : torch.Tensor
        ``(K, 4)`` ``(x1, y1, x2, y2)`` in image pixels.
    batch_idx : torch.Tensor
        ``(K,)`` image index of each box.
    scales : sequence of float
        ``1 / stride`` of each level (e.g. ``(1/4, 1/8, 1/16, 1/32)``); levels
        ``k = -log2(scale)``, canonical level 4 at scale 224, as the reference.
    output_size, sampling_ratio, aligned
        As :func:`roi_align`.

    Returns
    -------
    torch.Tensor
        ``(K, C, out_h, out_w)``.
    """
    k_min = int(round(-torch.log2(torch.tensor(scales[0], dtype=torch.float32)).item()))
    k_max = int(round(-torch.log2(torch.tensor(scales[-1], dtype=torch.float32)).item()))
    if len(feats) == 1:
        levels = boxes.new_zeros(boxes.shape[0], dtype=torch.long)
    else:
        levels = fpn_levels(boxes, k_min, k_max, 224, 4, plus_one=True)

    def pool(lvl, feat, idx):
        return roi_align(feat, boxes[idx], batch_idx[idx], output_size, scales[lvl],
                         sampling_ratio, aligned)
    return _per_level(feats, levels, boxes, output_size, pool)
