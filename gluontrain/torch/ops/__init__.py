"""Detection ops in plain PyTorch, used by two or more recipes; NMS and ROIAlign run on
torchvision's compiled kernels where it loads and they give the reference's output.

Who uses what (``frcnn`` through the seamseg flavour of :mod:`gluontrain.torch.twostage`,
``sgg`` / ``sgg-detector`` through its maskrcnn-benchmark flavour); where the two-stage
references differ, one op carries a flag (``plus_one``, ``layout``, ``reference``,
``allow_low_quality``) or each reference's variant sits beside the other:

- :mod:`.boxes` -- :func:`box_iou`, :func:`box_area`, :func:`box_intersection` (ssd, frcnn,
  sgg); :func:`encode` / :func:`decode`, the box coder (ssd: variances; frcnn: weights and
  ``log(1000/16)`` clamp; sgg: ``plus_one``); :func:`clip_boxes` (frcnn, sgg);
  :func:`corners_to_center` / :func:`center_to_corners` (ssd, inside the coder);
  :func:`box_ioa` (frcnn's crowd regions). Layout-agnostic: ``(x1, y1, x2, y2)`` and
  seamseg's ``(y0, x0, y1, x1)`` both work.
- :mod:`.nms` -- exact greedy :func:`nms` (block-vectorised; ``>`` or ``>=``, each
  reference's IoU rounding) under every NMS below; :func:`proposal_nms` (the RPN's) and
  :func:`classwise_nms` (the detections') of frcnn and sgg; :func:`batched_nms` (yolo3-torch
  through :func:`box_nms`, MXNet's operator). Used by one recipe each, as front ends of the
  same greedy engine: ssd.pytorch's :func:`ssd_nms` / :func:`batched_ssd_nms` (ssd) and
  :func:`box_nms` (yolo3-torch).
- :mod:`.roi` -- :func:`fpn_levels` (frcnn, sgg); seamseg's :func:`roi_sampling` /
  :func:`multilevel_roi_sampling` (frcnn) and maskrcnn-benchmark's :func:`roi_align` /
  :func:`multilevel_roi_align` (sgg), one sampling core: on the CPU two matrix products per
  ROI (:mod:`.roi_cpu`), elsewhere ``grid_sample``.
- :mod:`.anchors` -- :func:`grid_anchors` (frcnn and sgg, ``layout``) over seamseg's cell
  anchors (:func:`base_anchors`, :func:`fpn_anchors`: frcnn) or maskrcnn-benchmark's
  (:func:`generate_anchors`: sgg).
- :mod:`.matching` -- :func:`match_by_iou` (sgg's ``Matcher``; frcnn's anchor IoU rule with
  ``allow_low_quality='seamseg'``), :func:`balanced_sample` (sgg); seamseg's void-aware
  :func:`match_anchors`, :func:`subsample_anchors`, :func:`match_proposals`,
  :func:`sample_proposals` (frcnn; their random draws are seamseg's, so they stay apart
  from :func:`balanced_sample`).
- :mod:`.losses` -- :func:`smooth_l1` (sigma form) and :func:`fast_rcnn_loss` (the box
  head's), frcnn and sgg.
- :mod:`.compiled` -- which NMS / ROIAlign calls go to torchvision (``ROUTES``, one row per
  call site), :func:`backend` (``'torchvision'`` or ``'torch'``), :func:`describe` (the
  recipes' log line); ``GLUONTRAIN_TORCH_OPS=torch|torchvision`` forces one.
"""
from .anchors import base_anchors, fpn_anchors, generate_anchors, grid_anchors
from .boxes import (ENCODE_EPS, SCALE_CLIP, box_area, box_intersection, box_ioa, box_iou,
                    center_to_corners, clip_boxes, corners_to_center, decode, encode)
from .compiled import backend, describe
from .losses import fast_rcnn_loss, smooth_l1
from .matching import (NEGATIVE, VOID, balanced_sample, match_anchors, match_by_iou,
                       match_proposals, sample_proposals, subsample_anchors)
from .nms import (batched_nms, batched_ssd_nms, box_nms, classwise_nms, maskrcnn_nms_options, nms,
                  proposal_nms, ssd_nms)
from .roi import (fpn_levels, multilevel_roi_align, multilevel_roi_sampling, roi_align,
                  roi_sampling)

__all__ = ['ENCODE_EPS', 'SCALE_CLIP', 'box_area', 'box_intersection', 'box_ioa', 'box_iou',
           'center_to_corners', 'corners_to_center', 'clip_boxes', 'decode', 'encode',
           'nms', 'batched_nms', 'classwise_nms', 'proposal_nms', 'ssd_nms', 'batched_ssd_nms',
           'box_nms', 'maskrcnn_nms_options', 'roi_sampling', 'roi_align', 'fpn_levels',
           'multilevel_roi_sampling', 'multilevel_roi_align',
           'base_anchors', 'generate_anchors', 'grid_anchors', 'fpn_anchors',
           'VOID', 'NEGATIVE', 'match_anchors', 'subsample_anchors', 'match_proposals',
           'sample_proposals', 'match_by_iou', 'balanced_sample', 'smooth_l1', 'fast_rcnn_loss',
           'backend', 'describe']
