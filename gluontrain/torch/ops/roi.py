"""ROI feature extraction in plain torch: seamseg's ``roi_sampling``, maskrcnn-benchmark's
(legacy) ``ROIAlign``, and FPN level assignment (docs/faithfulness.md, "Shared detection ops").

Both ops take ``x`` ``(N, C, H, W)``, ``boxes`` ``(K, 4)`` and ``batch_idx`` ``(K,)`` (image of
each box) and return ``(K, C, out_h, out_w)`` in ``x``'s dtype (empty for ``K = 0``). On the
CPU each ROI is two small matrix products over a channels-last copy of the map
(:mod:`.roi_cpu`, own backward); elsewhere one ``grid_sample`` per image. The boxes get no
gradient, as in the references' kernels. Where torchvision loads, :func:`roi_align` runs on its
kernel on CUDA, and on the CPU where no gradient is needed (:mod:`.compiled`;
``GLUONTRAIN_TORCH_OPS`` switches).
"""
import numbers

import torch
import torch.nn.functional as F

from . import compiled
from .boxes import box_area
from .roi_cpu import axis_weights, separable_sample

__all__ = ['roi_sampling', 'roi_align', 'fpn_levels', 'multilevel_roi_sampling',
           'multilevel_roi_align']


# maps on these devices take the separable path (.roi_cpu); others grid_sample
_SEPARABLE_DEVICES = ('cpu',)


def _separable(x):
    return x.device.type in _SEPARABLE_DEVICES


def _check_batch_idx(x, batch_idx):
    """A clear error for an image index beyond ``x`` (indexing would fail obscurely)."""
    if bool((batch_idx < 0).any()) or bool((batch_idx >= x.shape[0]).any()):
        raise ValueError('batch_idx must index the {} images of x (got values {}..{})'.format(
            x.shape[0], int(batch_idx.min()), int(batch_idx.max())))


def _sample(x, batch_idx, ys, xs, padding):
    """Bilinear samples ``out[k, :, a, b] = x[batch_idx[k], :, ys[k, a], xs[k, b]]``.

    ``ys`` / ``xs``: ``(K, S)`` coordinates, pixel ``i`` centred at ``i + 0.5`` (seamseg's
    convention = ``grid_sample``'s ``align_corners=False``; ``'border'`` reads the edge pixels
    seamseg's clamped indices read, and the backward scatters to the same pixels).
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
    _check_batch_idx(x, batch_idx)
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
    """seamseg's ``roi_sampling``: one bilinear sample per output cell, at
    ``(i + 0.5) / out_h * (y1 - y0) + y0`` (and likewise ``x``).

    Parameters
    ----------
    boxes : torch.Tensor
        ``(K, 4)`` ``(y0, x0, y1, x1)`` in ``x``'s pixels; coordinates computed in its dtype.
    roi_size : (int, int), default (14, 14)
        ``(out_h, out_w)``.
    padding : {'border', 'zero'}, default 'border'
        Out-of-image neighbours read the nearest edge pixel (seamseg's default) or 0.
    """
    return _roi_sampling(x, boxes, batch_idx, roi_size, padding).contiguous()


def _roi_sampling(x, boxes, batch_idx, roi_size, padding='border'):
    """:func:`roi_sampling` in whichever layout the path produces (channels-last on the CPU)."""
    if padding not in ('border', 'zero'):
        raise ValueError("padding={!r}: choose 'border' or 'zero'".format(padding))
    boxes = boxes.detach()
    if _separable(x):
        if boxes.shape[0] == 0:
            return x.new_zeros((0, x.shape[1]) + tuple(roi_size))
        _check_batch_idx(x, batch_idx)
        return separable_sample(x, batch_idx, *(
            _seamseg_axis(boxes[:, a], boxes[:, a + 2], roi_size[a], x.shape[2 + a], padding)
            for a in (0, 1)))
    return _sample(x, batch_idx, _cells(boxes[:, 0], boxes[:, 2], roi_size[0]),
                   _cells(boxes[:, 1], boxes[:, 3], roi_size[1]), 'zeros' if padding == 'zero'
                   else 'border')


def _seamseg_axis(p0, p1, cells, size, padding):
    """:func:`~.roi_cpu.axis_weights` of seamseg's samples along one axis: neighbours
    ``floor(s - 0.5)`` and the next, weights ``1 - delta`` and ``delta``
    (``include/roi_sampling.h``); clamped into the map ('border') or dropped ('zero')."""
    n_roi = p0.shape[0]
    coords = _cells(p0, p1, cells).reshape(-1)
    lo = torch.floor(coords - 0.5)
    delta = coords - (lo + 0.5)
    lo = lo.long()
    hi = lo + 1
    w_lo, w_hi = 1 - delta, delta
    if padding == 'zero':
        w_lo = w_lo * ((lo >= 0) & (lo < size)).to(w_lo.dtype)
        w_hi = w_hi * ((hi >= 0) & (hi < size)).to(w_hi.dtype)
    roi = torch.arange(n_roi, device=p0.device).repeat_interleave(cells)
    cell = torch.arange(cells, device=p0.device).repeat(n_roi)
    return axis_weights(roi, cell, lo.clamp(0, size - 1), hi.clamp(0, size - 1), w_lo, w_hi,
                        n_roi, cells)


def _align_axis(start, end, pooled, ratio, aligned, size):
    """:func:`~.roi_cpu.axis_weights` of maskrcnn-benchmark's samples along one axis
    (``pre_calc_for_bilinear_interpolate``): ``grid`` samples per bin, each worth ``1 / grid``;
    outside ``[-1, size]`` 0, else clamped into the map."""
    grid, bin_size = _adaptive_axis(start, end, pooled, aligned)
    if ratio > 0:
        grid = torch.full_like(grid, ratio)
    n_roi = start.shape[0]
    per_roi = pooled * grid
    roi = torch.repeat_interleave(torch.arange(n_roi, device=start.device), per_roi)
    j = torch.arange(roi.numel(), device=start.device) - (torch.cumsum(per_roi, 0) - per_roi)[roi]
    cell, sub = torch.div(j, grid[roi], rounding_mode='floor'), j % grid[roi]
    coords = _adaptive_coords(start, bin_size, grid, roi, cell, sub)
    valid = (coords >= -1) & (coords <= size)
    pos = torch.where(valid, coords.clamp(min=0), torch.zeros_like(coords))
    lo = pos.long()  # truncation: pos >= 0
    top = lo >= size - 1
    lo = lo.clamp(max=size - 1)
    pos = torch.where(top, lo.to(pos.dtype), pos)
    hi = torch.where(top, lo, lo + 1)
    frac = pos - lo.to(pos.dtype)
    share = valid.to(pos.dtype) / grid[roi].to(pos.dtype)
    return axis_weights(roi, cell, lo, hi, (1 - frac) * share, frac * share, n_roi, pooled)


def _align_points(start, end, pooled, grid, aligned):
    """maskrcnn-benchmark's sample points along one axis (K, pooled * grid), pixel centres at
    integers, and whether each is inside ``[-1, extent]`` is checked by the caller."""
    length = end - start if aligned else torch.clamp(end - start, min=1.0)
    bin_size = length / pooled
    ph = torch.arange(pooled, dtype=start.dtype, device=start.device).repeat_interleave(grid)
    it = (torch.arange(grid, dtype=start.dtype, device=start.device) + .5).repeat(pooled)
    return start[:, None] + ph * bin_size[:, None] + it * bin_size[:, None] / grid


def _check_ratio(sampling_ratio):
    """``sampling_ratio`` must be an integer (the C++ ``int``): 2.5 would sample another grid."""
    if isinstance(sampling_ratio, bool) or not isinstance(sampling_ratio, numbers.Integral):
        raise ValueError('sampling_ratio={!r}: must be an integer (> 0: that many samples per bin '
                         'side; <= 0: adaptive, ceil(roi size / output size) as '
                         'maskrcnn-benchmark)'.format(sampling_ratio))
    return int(sampling_ratio)


def _align_bins(x, boxes, batch_idx, output_size, grid_h, grid_w, aligned):
    """Average of ``grid_h x grid_w`` samples per bin for every box (boxes already scaled)."""
    out_h, out_w = output_size
    ys = _align_points(boxes[:, 1], boxes[:, 3], out_h, grid_h, aligned)
    xs = _align_points(boxes[:, 0], boxes[:, 2], out_w, grid_w, aligned)
    # The reference zeroes a sample outside [-1, H] x [-1, W] and clamps the others into the
    # image: the clamped bilinear read is grid_sample's border padding.
    valid = (((ys >= -1) & (ys <= x.shape[2]))[:, :, None]
             & ((xs >= -1) & (xs <= x.shape[3]))[:, None, :])
    samples = _sample(x, batch_idx, ys + 0.5, xs + 0.5, 'border')
    if samples.shape[0] == 0:
        return samples.new_zeros(0, x.shape[1], out_h, out_w)
    if not bool(valid.all()):  # proposals clipped to the image never need the mask
        samples = samples * valid[:, None].to(x.dtype)
    return F.avg_pool2d(samples, (grid_h, grid_w))


def _adaptive_axis(start, end, pooled, aligned):
    """Per box: the adaptive grid ``ceil(roi_size / pooled)`` along one axis (boxes' dtype;
    legacy boxes at least 1 pixel, an empty aligned box 0) and the bin size."""
    length = end - start if aligned else torch.clamp(end - start, min=1.0)
    return torch.ceil(length / pooled).clamp(min=0).long(), length / pooled


def _adaptive_coords(start, bin_size, grid, roi, cell, sub):
    """Sample coordinate of sample ``sub`` of bin ``cell`` along one axis of box ``roi``, in the
    reference's operation order: ``start + cell * bin + (sub + .5) * bin / grid``."""
    bin_size = bin_size[roi]
    return (start[roi] + cell.to(start.dtype) * bin_size
            + (sub + .5).to(start.dtype) * bin_size / grid[roi])


def _align_adaptive(x, boxes, batch_idx, output_size, aligned):
    """Adaptive ratio: every box's samples as one flat list, one ``grid_sample`` per image,
    summed into their bins in the reference's order and divided by ``grid_h * grid_w``."""
    _check_batch_idx(x, batch_idx)
    (out_h, out_w), (n_roi, chans) = output_size, (boxes.shape[0], x.shape[1])
    # boxes sorted by image (stable), so that each image's samples are contiguous
    order = torch.argsort(batch_idx, stable=True)
    boxes, batch_idx = boxes[order], batch_idx[order]
    grid_h, bin_h = _adaptive_axis(boxes[:, 1], boxes[:, 3], out_h, aligned)
    grid_w, bin_w = _adaptive_axis(boxes[:, 0], boxes[:, 2], out_w, aligned)
    # sample j of box k, row-major over its (out_h * grid_h) x (out_w * grid_w) points
    rows, cols = out_h * grid_h, out_w * grid_w
    per_roi = rows * cols
    roi = torch.repeat_interleave(torch.arange(n_roi, device=boxes.device), per_roi)
    first = torch.cumsum(per_roi, 0) - per_roi
    j = torch.arange(roi.numel(), device=boxes.device) - first[roi]
    row, col = torch.div(j, cols[roi], rounding_mode='floor'), j % cols[roi]
    ph, iy = torch.div(row, grid_h[roi], rounding_mode='floor'), row % grid_h[roi]
    pw, ix = torch.div(col, grid_w[roi], rounding_mode='floor'), col % grid_w[roi]
    py = _adaptive_coords(boxes[:, 1], bin_h, grid_h, roi, ph, iy)
    px = _adaptive_coords(boxes[:, 0], bin_w, grid_w, roi, pw, ix)
    # grid_sample's pixel-centre convention and border clamping as in _sample
    grid = torch.stack([(px + 0.5) * (2.0 / x.shape[3]) - 1,
                        (py + 0.5) * (2.0 / x.shape[2]) - 1], -1).to(x.dtype)
    pieces, start = [], 0
    for n, count in enumerate(torch.bincount(batch_idx[roi], minlength=x.shape[0]).tolist()):
        if count:
            pieces.append(F.grid_sample(x[n:n + 1], grid[start:start + count].view(1, count, 1, 2),
                                        'bilinear', 'border', align_corners=False)
                          .view(chans, count))
            start += count
    # (a (C, 0) view of x when no box has a sample keeps the result in x's graph)
    values = torch.cat(pieces, 1) if pieces else x[0, :, :0, 0]
    # The reference zeroes a sample outside [-1, H] x [-1, W] (see _align_bins)
    inside = (py >= -1) & (py <= x.shape[2]) & (px >= -1) & (px <= x.shape[3])
    if not bool(inside.all()):
        values = values * inside.to(x.dtype)
    cell = (roi * out_h + ph) * out_w + pw
    sums = x.new_zeros(chans, n_roi * out_h * out_w).index_add(1, cell, values)
    # torchvision: an empty grid (aligned, empty box) averages nothing -> 0
    count = (grid_h * grid_w).clamp(min=1).to(x.dtype)
    out = (sums.view(chans, n_roi, out_h, out_w) / count[:, None, None]).transpose(0, 1)
    if bool((order[1:] > order[:-1]).all()):
        return out.contiguous()
    return out[torch.argsort(order)]


def roi_align(x, boxes, batch_idx, output_size=(7, 7), spatial_scale=1.0, sampling_ratio=2,
              aligned=False):
    """ROIAlign as maskrcnn-benchmark's ``ROIAlign_cpu.cpp`` (``aligned=False``, legacy, SGB's)
    or torchvision's ``aligned=True`` (box shifted by -0.5, not forced to 1 pixel; an empty box
    pools to 0).

    Parameters
    ----------
    boxes : torch.Tensor
        ``(K, 4)`` ``(x1, y1, x2, y2)`` in image pixels.
    output_size : (int, int), default (7, 7)
        ``(out_h, out_w)``.
    spatial_scale : float, default 1.0
        Feature size / image size (1 / stride).
    sampling_ratio : int, default 2
        Samples per bin side; ``<= 0``: adaptive, ``ceil(roi / bins)`` per box.

    Raises
    ------
    ValueError
        ``sampling_ratio`` is not an integer, or ``batch_idx`` is out of range.
    """
    return _roi_align(x, boxes, batch_idx, output_size, spatial_scale, sampling_ratio,
                      aligned).contiguous()


def _roi_align(x, boxes, batch_idx, output_size, spatial_scale, sampling_ratio, aligned):
    """:func:`roi_align` in whichever layout the path produces (channels-last on the CPU)."""
    g = _check_ratio(sampling_ratio)
    output_size = tuple(output_size)
    if compiled.use_torchvision('roi_align', 'aligned' if aligned else 'legacy', x):
        if boxes.shape[0] == 0:
            return x.new_zeros((0, x.shape[1]) + output_size)
        _check_batch_idx(x, batch_idx)
        return compiled.roi_align(x, boxes, batch_idx, output_size, spatial_scale, g, aligned)
    boxes = boxes.detach() * spatial_scale
    if aligned:
        boxes = boxes - 0.5
    if _separable(x):
        if boxes.shape[0] == 0:
            return x.new_zeros((0, x.shape[1]) + output_size)
        _check_batch_idx(x, batch_idx)
        return separable_sample(x, batch_idx, *(
            _align_axis(boxes[:, a], boxes[:, a + 2], output_size[1 - a], g, aligned,
                        x.shape[3 - a]) for a in (1, 0)))
    if g > 0:
        return _align_bins(x, boxes, batch_idx, output_size, g, g, aligned)
    if boxes.shape[0] == 0:
        return x.new_zeros((0, x.shape[1]) + output_size)
    return _align_adaptive(x, boxes, batch_idx, output_size, aligned)


def fpn_levels(boxes, k_min, k_max, canonical_scale=224, canonical_level=4, eps=1e-6,
               plus_one=False):
    """FPN level of each box as an int64 index from ``k_min``:
    ``floor(canonical_level + log2(sqrt(area) / canonical_scale + eps))`` clamped to
    ``[k_min, k_max]``.

    maskrcnn-benchmark's ``LevelMapper``: ``fpn_levels(boxes, 2, 5, 224, 4, plus_one=True)``;
    seamseg's ``_target_level``: ``fpn_levels(boxes, 0, 3, 224, 2)`` (0 = stride 4).
    """
    area = box_area(boxes, plus_one)
    level = torch.floor(canonical_level + torch.log2(torch.sqrt(area) / canonical_scale + eps))
    return level.clamp(min=k_min, max=k_max).long() - k_min


def _per_level(feats, levels, boxes, out_shape, pool):
    counts = torch.bincount(levels, minlength=len(feats)).tolist() if levels.numel() else []
    shape = (boxes.shape[0], feats[0].shape[1]) + tuple(out_shape)
    # each row is written once, in place (a box on no level, if any, stays 0)
    out = (feats[0].new_empty(shape) if sum(counts[:len(feats)]) == boxes.shape[0]
           else feats[0].new_zeros(shape))
    for lvl, feat in enumerate(feats):
        if lvl < len(counts) and counts[lvl]:
            idx = torch.nonzero(levels == lvl).view(-1)
            # under autocast the pooled features come back in float32 while the levels are
            # half precision: cast as maskrcnn-benchmark's Pooler (``.to(dtype)``)
            out.index_put_((idx,), pool(lvl, feat, idx).to(out.dtype))
    return out


def multilevel_roi_sampling(feats, boxes, batch_idx, img_size, roi_size=(14, 14),
                            canonical_scale=224, canonical_level=2, min_level=0):
    """seamseg's FPN ROI features (``DetectionAlgoFPN._head`` / ``_rois``).

    Each box goes to its :func:`fpn_levels` level (seamseg's convention), is mapped to its pixels
    as ``(p - 0.5) * stride + 0.5`` (``stride = feat_size / img_size`` per axis, ``img_size`` the
    padded ``(H, W)``) and sampled by :func:`roi_sampling`. ``feats``: levels finest first;
    ``boxes`` ``(y0, x0, y1, x1)`` in image pixels; ``min_level``: the level number of
    ``feats[0]`` (seamseg's ``fpn_min_level``).
    """
    levels = fpn_levels(boxes, min_level, min_level + len(feats) - 1, canonical_scale,
                        canonical_level)

    def pool(lvl, feat, idx):
        stride = boxes.new_tensor([fs / s for fs, s in zip(feat.shape[-2:], img_size)])
        return _roi_sampling(feat, (boxes[idx] - 0.5) * stride.repeat(2) + 0.5, batch_idx[idx],
                             roi_size)
    return _per_level(feats, levels, boxes, roi_size, pool)


def multilevel_roi_align(feats, boxes, batch_idx, scales, output_size=(7, 7), sampling_ratio=2,
                         aligned=False):
    """maskrcnn-benchmark's ``Pooler``: :func:`roi_align` on each box's ``LevelMapper`` level.

    ``scales``: ``1 / stride`` per level, finest first (level ``k = -log2(scale)``, canonical
    level 4 at 224); ``boxes`` ``(x1, y1, x2, y2)`` in image pixels; other arguments as
    :func:`roi_align`.
    """
    _check_ratio(sampling_ratio)  # refused even when there are no boxes to pool
    k_min = int(round(-torch.log2(torch.tensor(scales[0], dtype=torch.float32)).item()))
    k_max = int(round(-torch.log2(torch.tensor(scales[-1], dtype=torch.float32)).item()))
    if len(feats) == 1:
        levels = boxes.new_zeros(boxes.shape[0], dtype=torch.long)
    else:
        levels = fpn_levels(boxes, k_min, k_max, 224, 4, plus_one=True)

    def pool(lvl, feat, idx):
        return _roi_align(feat, boxes[idx], batch_idx[idx], output_size, scales[lvl],
                          sampling_ratio, aligned)
    return _per_level(feats, levels, boxes, output_size, pool)
