"""Box geometry shared by every PyTorch recipe: IoU, conversions, the box coder.

Boxes are corners ``(lo_0, lo_1, hi_0, hi_1)`` in either axis order (``(x1, y1, x2, y2)``, or
seamseg's ``(y0, x0, y1, x1)``): nothing mixes the two axes, and the coder's deltas and weights
follow the boxes' order. Every function accepts extra leading (batch) dimensions. ``plus_one``:
pixel-inclusive sides ``hi - lo + 1`` (VOC, GluonCV, maskrcnn-benchmark). The references'
operations in their order, so results are bit-identical (docs/faithfulness.md, "Shared
detection ops").
"""
import math

import torch

__all__ = ['box_area', 'box_intersection', 'box_iou', 'box_ioa', 'corners_to_center',
           'center_to_corners', 'clip_boxes', 'encode', 'decode', 'ENCODE_EPS', 'SCALE_CLIP']

#: Lower bound of the size ratio inside SSD's ``encode`` ``log`` (gluontrain's fix).
ENCODE_EPS = 1e-6
#: seamseg's / Detectron's clamp of the size deltas before ``exp``: ``log(1000 / 16)``.
SCALE_CLIP = math.log(1000. / 16.)


def box_area(boxes, plus_one=False):
    """``(...)`` areas of ``(..., 4)`` corner boxes (negative for inverted boxes, as in the
    references)."""
    one = 1.0 if plus_one else 0.0
    return (boxes[..., 2] - boxes[..., 0] + one) * (boxes[..., 3] - boxes[..., 1] + one)


def box_intersection(boxes_a, boxes_b, plus_one=False):
    """``(..., A, B)`` pairwise intersection areas of ``(..., A, 4)`` and ``(..., B, 4)`` boxes
    (leading dimensions broadcast; 0 for disjoint boxes)."""
    # one (A, B) temporary per side, updated in place; coordinates as contiguous vectors (a
    # strided column of (N, 4) takes broadcast min / max off their vectorised loop: ~5x)
    a, b = boxes_a.movedim(-1, 0).contiguous(), boxes_b.movedim(-1, 0).contiguous()
    side = []
    for lo, hi in ((0, 2), (1, 3)):
        s = torch.min(a[hi][..., :, None], b[hi][..., None, :])
        s.sub_(torch.max(a[lo][..., :, None], b[lo][..., None, :]))
        if plus_one:
            s.add_(1.0)
        side.append(s.clamp_(min=0.0))
    return side[0].mul_(side[1])


def box_iou(boxes_a, boxes_b, plus_one=False):
    """Pairwise IoU ``(..., A, B)``, ``inter / (area_a + area_b - inter)``; ``0 / 0 = nan`` for
    two empty boxes, as in the references."""
    inter = box_intersection(boxes_a, boxes_b, plus_one)
    union = box_area(boxes_a, plus_one)[..., :, None] + box_area(boxes_b, plus_one)[..., None, :]
    return inter / union.sub_(inter)


def box_ioa(boxes_a, boxes_b, plus_one=False):
    """Pairwise ``inter / area_a`` ``(..., A, B)`` (seamseg's ``bbx_overlap``: anchors and
    proposals in crowd regions)."""
    return box_intersection(boxes_a, boxes_b, plus_one) / box_area(boxes_a, plus_one)[..., :, None]


def corners_to_center(boxes):
    """``(..., 4)`` corner boxes to centre-size ``((lo + hi) / 2, hi - lo)``."""
    return torch.cat(((boxes[..., 2:] + boxes[..., :2]) / 2, boxes[..., 2:] - boxes[..., :2]), -1)


def center_to_corners(boxes):
    """Centre-size boxes to corner boxes (the inverse of :func:`corners_to_center`)."""
    return torch.cat((boxes[..., :2] - boxes[..., 2:] / 2, boxes[..., :2] + boxes[..., 2:] / 2), -1)


def clip_boxes(boxes, size, plus_one=False):
    """Corner boxes clamped into an image of ``size`` (the boxes' axis order: ``(H, W)`` for
    ``(y0, x0, y1, x1)``) to ``[0, size]``, or ``[0, size - 1]`` with ``plus_one`` (seamseg's
    clipping, maskrcnn-benchmark's ``BoxList.clip_to_image``)."""
    hi_0, hi_1 = (size[0] - 1, size[1] - 1) if plus_one else tuple(size)
    return torch.stack([boxes[..., 0].clamp(0, hi_0), boxes[..., 1].clamp(0, hi_1),
                        boxes[..., 2].clamp(0, hi_0), boxes[..., 3].clamp(0, hi_1)], -1)


def _far_plus_one(boxes, sign=1):
    """The far corner moved by ``sign`` pixel: a ``+1`` (pixel-inclusive) box as the
    ``x2 - x1`` box of the same centre and size (and back with ``sign=-1``)."""
    return torch.cat((boxes[..., :2], boxes[..., 2:] + sign), -1)


def _check_coder(weights, variances):
    if (weights is None) == (variances is None):
        raise ValueError('give exactly one of weights= (Faster R-CNN, e.g. (10, 10, 5, 5)) '
                         'or variances= (SSD, e.g. (0.1, 0.2))')


def encode(boxes, anchors, weights=None, variances=None, anchors_center=False, log_eps=None,
           size_eps=None, plus_one=False):
    """``(..., N, 4)`` regression targets of ``boxes`` relative to ``anchors`` (the box coder).

    Two parametrisations, each with its reference's arithmetic (bit-identical):
    ``weights=(w0, w1, w2, w3)`` (Faster R-CNN, seamseg's ``calculate_shift`` x
    ``bbx_reg_weights``): ``w0 * (c_box - c_anc) / s_anc``, ``w2 * log(s_box / s_anc)``;
    ``variances=(v_c, v_s)`` (SSD): ``(c_box - c_anc) / (v_c * s_anc)``,
    ``log(s_box / s_anc) / v_s``.

    Parameters
    ----------
    boxes : torch.Tensor
        ``(..., N, 4)`` corner boxes, one per anchor.
    anchors : torch.Tensor
        ``(N, 4)`` (or broadcastable) anchors, corners or (``anchors_center``) centre-size.
    weights, variances : sequence of float, optional
        Exactly one: 4 multiplicative weights, or SSD's 2 divisive variances.
    anchors_center : bool, default False
        ``anchors`` are already centre-size (SSD's priors).
    log_eps : float, optional
        Lower clamp of the size ratio before ``log`` (:data:`ENCODE_EPS`: finite targets).
    size_eps : float, optional
        Lower clamp of the anchor sizes (seamseg: ``1e-5``).
    plus_one : bool, default False
        Pixel-inclusive boxes and anchors (maskrcnn-benchmark's ``BoxCoder``).
    """
    _check_coder(weights, variances)
    if plus_one:
        boxes = _far_plus_one(boxes)
        anchors = anchors if anchors_center else _far_plus_one(anchors)
    anc = anchors if anchors_center else corners_to_center(anchors)
    a_c, a_s = anc[..., :2], anc[..., 2:]
    if size_eps is not None:
        a_s = a_s.clamp(min=size_eps)
    if variances is not None:
        d_c = (boxes[..., :2] + boxes[..., 2:]) / 2 - a_c
        d_c /= (variances[0] * a_s)
        ratio = (boxes[..., 2:] - boxes[..., :2]) / a_s
        if log_eps is not None:
            ratio = torch.clamp(ratio, min=log_eps)
        return torch.cat([d_c, torch.log(ratio) / variances[1]], -1)
    box = corners_to_center(boxes)
    ratio = box[..., 2:] / a_s
    if log_eps is not None:
        ratio = torch.clamp(ratio, min=log_eps)
    deltas = torch.cat([(box[..., :2] - a_c) / a_s, ratio.log()], -1)
    if any(w != 1 for w in weights):
        deltas = deltas * deltas.new_tensor(weights)
    return deltas


def decode(deltas, anchors, weights=None, variances=None, anchors_center=False,
           scale_clip=None, plus_one=False):
    """``(..., N, 4)`` corner boxes from ``deltas`` (the inverse of :func:`encode`, same arguments).

    ``weights`` (seamseg's ``shift_boxes(anchors, deltas / weights)``): centre ``c + s * d``,
    size ``s * exp(min(d_s, scale_clip))``, corners ``c -/+ 0.5 * size``; ``variances``
    (ssd.pytorch's ``decode``): ``lo = c - size / 2``, ``hi = lo + size``. ``scale_clip``: upper
    clamp of the size deltas before ``exp`` (:data:`SCALE_CLIP`, seamseg's and Detectron's).
    """
    _check_coder(weights, variances)
    if plus_one:
        anchors = anchors if anchors_center else _far_plus_one(anchors)
        return _far_plus_one(decode(deltas, anchors, weights, variances, anchors_center,
                                    scale_clip), -1)
    anc = anchors if anchors_center else corners_to_center(anchors)
    a_c, a_s = anc[..., :2], anc[..., 2:]
    if variances is not None:
        d_s = deltas[..., 2:] * variances[1]
        if scale_clip is not None:
            d_s = d_s.clamp(max=scale_clip)
        boxes = torch.cat((a_c + deltas[..., :2] * variances[0] * a_s, a_s * torch.exp(d_s)), -1)
        boxes[..., :2] -= boxes[..., 2:] / 2
        boxes[..., 2:] += boxes[..., :2]
        return boxes
    if any(w != 1 for w in weights):
        deltas = deltas / deltas.new_tensor(weights)
    d_s = deltas[..., 2:]
    if scale_clip is not None:
        d_s = d_s.clamp(max=scale_clip)
    c = a_c + a_s * deltas[..., :2]
    s = a_s * d_s.exp()
    half = 0.5 * s
    return torch.cat((c - half, c + half), -1)
