"""Generic detection ops in plain PyTorch, shared by every recipe (no compiled extensions).

- :mod:`.boxes` -- IoU / IoA / areas (with or without the ``+1`` pixel), corner <-> centre
  conversions, the box coder (:func:`encode` / :func:`decode`: SSD variances or R-CNN
  weights, seamseg's ``log(1000/16)`` clamp). Layout-agnostic: ``(x1, y1, x2, y2)`` and
  seamseg's ``(y0, x0, y1, x1)`` both work.
- :mod:`.nms` -- exact greedy NMS (block-vectorised), per-group :func:`batched_nms`
  (``>`` or ``>=`` suppression, ssd.pytorch's or seamseg's IoU rounding), ssd.pytorch's
  :func:`ssd_nms` / :func:`batched_ssd_nms`, MXNet's :func:`box_nms`.
- :mod:`.roi` -- seamseg's :func:`roi_sampling`, maskrcnn-benchmark's :func:`roi_align`,
  :func:`fpn_levels` and their multi-level poolers.
- :mod:`.anchors` -- seamseg's anchors (:func:`base_anchors`, :func:`fpn_anchors`) and
  maskrcnn-benchmark's (:func:`generate_anchors`), :func:`grid_anchors` in either layout.
- :mod:`.matching` -- anchor / proposal matching with void labels and balanced sampling
  (seamseg's), maskrcnn-benchmark's :func:`match_by_iou` and :func:`balanced_sample`.
- :mod:`.losses` -- :func:`smooth_l1` with seamseg's sigma.
"""
from .anchors import base_anchors, fpn_anchors, generate_anchors, grid_anchors
from .boxes import (ENCODE_EPS, SCALE_CLIP, box_area, box_intersection, box_ioa, box_iou,
                    center_to_corners, clip_boxes, corners_to_center, decode, encode)
from .losses import fast_rcnn_loss, smooth_l1
from .matching import (NEGATIVE, VOID, balanced_sample, match_anchors, match_by_iou,
                       match_proposals, sample_proposals, subsample_anchors)
from .nms import (batched_nms, batched_ssd_nms, box_nms, classwise_nms, nms, proposal_nms,
                  ssd_nms)
from .roi import (fpn_levels, multilevel_roi_align, multilevel_roi_sampling, roi_align,
                  roi_sampling)

__all__ = ['ENCODE_EPS', 'SCALE_CLIP', 'box_area', 'box_intersection', 'box_ioa', 'box_iou',
           'center_to_corners', 'corners_to_center', 'clip_boxes', 'decode', 'encode',
           'nms', 'batched_nms', 'classwise_nms', 'proposal_nms', 'ssd_nms', 'batched_ssd_nms', 'box_nms',
           'roi_sampling', 'roi_align', 'fpn_levels', 'multilevel_roi_sampling',
           'multilevel_roi_align',
           'base_anchors', 'generate_anchors', 'grid_anchors', 'fpn_anchors',
           'VOID', 'NEGATIVE', 'match_anchors', 'subsample_anchors', 'match_proposals',
           'sample_proposals', 'match_by_iou', 'balanced_sample', 'smooth_l1', 'fast_rcnn_loss']
