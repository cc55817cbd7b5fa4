"""Generic detection ops in plain PyTorch, shared by every recipe (no compiled extensions).

- :mod:`.boxes` -- IoU / IoA / areas (with or without the ``+1`` pixel), corner <-> centre
  conversions, the box coder (:func:`encode` / :func:`decode`: SSD variances or R-CNN
  weights, seamseg's ``log(1000/16)`` clamp). Layout-agnostic: ``(x1, y1, x2, y2)`` and
  seamseg's ``(y0, x0, y1, x1)`` both work.
- :mod:`.nms` -- exact greedy NMS (block-vectorised), per-group :func:`batched_nms`,
  ssd.pytorch's :func:`ssd_nms` / :func:`batched_ssd_nms`.
"""
from .boxes import (ENCODE_EPS, SCALE_CLIP, box_area, box_intersection, box_ioa, box_iou,
                    center_to_corners, corners_to_center, decode, encode)
from .nms import batched_nms, batched_ssd_nms, nms, ssd_nms

__all__ = ['ENCODE_EPS', 'SCALE_CLIP', 'box_area', 'box_intersection', 'box_ioa', 'box_iou',
           'center_to_corners', 'corners_to_center', 'decode', 'encode',
           'nms', 'batched_nms', 'ssd_nms', 'batched_ssd_nms']
