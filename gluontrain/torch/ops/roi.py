"""ROI feature extraction in plain torch (autograd gives the backward): seamseg's
``roi_sampling``, maskrcnn-benchmark's (legacy) ``ROIAlign``, and FPN level assignment.

Both ops take ``x`` ``(N, C, H, W)``, ``boxes`` ``(K, 4)`` and ``batch_idx`` ``(K,)`` (image
of each box), and return ``(K, C, out_h, out_w)`` in ``x``'s dtype, computed with one
``grid_sample`` per image (sampling points as the references' kernels; see ``_sample``). The
boxes get no gradient (the references' kernels return none for them either); the features'
gradient is the adjoint of the forward, as the references' CUDA backward (maskrcnn-benchmark
has no CPU backward). With ``K = 0`` the result is an empty ``(0, C, out_h, out_w)`` tensor.
"""
import torch
import torch.nn.functional as F

__all__ = ['roi_sampling', 'roi_align', 'fpn_levels', 'multilevel_roi_sampling',
           'multilevel_roi_align']


def _sample(x, batch_idx, ys, xs, padding):
    """Bilinear samples ``out[k, :, a, b] = x[batch_idx[k], :, ys[k, a], xs[k, b]]``.

    ``ys`` / ``xs`` are ``(K, S)`` continuous coordinates with pixel ``i`` covering
    ``[i, i + 1)`` (centre at ``i + 0.5``), seamseg's convention. One ``grid_sample`` per image
    (``align_corners=False``: the same pixel-centre convention): its bilinear weights are
    seamseg's, ``'border'`` clamping the coordinate reads exactly the edge pixels seamseg's
    clamped indices read, and its backward scatters to the same pixels.
    """
    n_roi, sy, sx = ys.shape[0], ys.shape[1], xs.shape[1]
    if n_roi == 0:
        return x.new_zeros(0, x.shape[1], sy, sx)
    gy = (ys * (2.0 / x.shape[2]) - 1).to(x.dtype)
    gx = (xs * (2.0 / x.shape[3]) - 1).to(x.dtype)
    grid = torch.stack([gx[:, None, :].expand(n_roi, sy, sx),
                        gy[:, :, None].expand(n_roi, sy, sx)], -1)
    # ROIs grouped by image (stable), sampled image by image, then put back in input order
    order = torch.argsort(batch_idx, stable=True)
    if bool((batch_idx < 0).any()) or bool((batch_idx >= x.shape[0]).any()):
        raise ValueError('batch_idx must index the {} images of x (got values {}..{})'.format(
            x.shape[0], int(batch_idx.min()), int(batch_idx.max())))
    counts = torch.bincount(batch_idx, minlength=x.shape[0]).tolist()
    pieces, start = [], 0
    for n, count in enumerate(counts):
        if count:
            cell = grid[order[start:start + count]].reshape(1, -1, sx, 2)
            pieces.append(F.grid_sample(x[n:n + 1], cell, 'bilinear', padding,
                                        align_corners=False).view(x.shape[1], count, sy, sx))
            start += count
    out = torch.cat(pieces, 1).transpose(0, 1)
    if bool((order[1:] > order[:-1]).all()):
        return out.contiguous()
    return out[torch.argsort(order)]


def _cells(p0, p1, size):
    """seamseg's ``roi_to_img``: centre of each of ``size`` output cells, (K, size)."""
    k = torch.arange(size, dtype=p0.dtype, device=p0.device) + 0.5
    return k / size * (p1 - p0)[:, None] + p0[:, None]


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
    return _sample(x, batch_idx, _cells(boxes[:, 0], boxes[:, 2], roi_size[0]),
                   _cells(boxes[:, 1], boxes[:, 3], roi_size[1]), 'zeros' if padding == 'zero'
                   else 'border')


def _align_points(start, end, pooled, grid, aligned):
    """maskrcnn-benchmark's sample points along one axis (K, pooled * grid), pixel centres at
    integers, and whether each is inside ``[-1, extent]`` is checked by the caller."""
    length = end - start if aligned else torch.clamp(end - start, min=1.0)
    bin_size = length / pooled
    ph = torch.arange(pooled, dtype=start.dtype, device=start.device).repeat_interleave(grid)
    it = (torch.arange(grid, dtype=start.dtype, device=start.device) + .5).repeat(pooled)
    return start[:, None] + ph * bin_size[:, None] + it * bin_size[:, None] / grid


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
    ys = _align_points(boxes[:, 1], boxes[:, 3], out_h, g, aligned)
    xs = _align_points(boxes[:, 0], boxes[:, 2], out_w, g, aligned)
    # The reference zeroes a sample outside [-1, H] x [-1, W] and clamps the others into the
    # image: the clamped bilinear read is grid_sample's border padding.
    valid = (((ys >= -1) & (ys <= x.shape[2]))[:, :, None]
             & ((xs >= -1) & (xs <= x.shape[3]))[:, None, :])
    samples = _sample(x, batch_idx, ys + 0.5, xs + 0.5, 'border')
    if samples.shape[0] == 0:
        return samples.new_zeros(0, x.shape[1], out_h, out_w)
    if not bool(valid.all()):  # proposals clipped to the image never need the mask
        samples = samples * valid[:, None].to(x.dtype)
    return F.avg_pool2d(samples, g)


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
