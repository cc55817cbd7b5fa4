"""SSD300 for PyTorch, faithful to amdegroot/ssd.pytorch.

Numeric layers (plain torch, no torchvision):

- :mod:`.config` -- the ``voc`` / ``coco`` SSD300 configurations and ``MEANS``.
- :mod:`.prior_box` -- ``PriorBox``: the 8732 default boxes in (cx, cy, w, h).
- :mod:`.box_utils` -- box conversions, ``jaccard``, ``match`` / ``match_batch``,
  ``encode`` / ``decode`` and ``log_sum_exp``.
- :mod:`.nms` -- exact block-vectorised greedy NMS (``nms``) and ssd.pytorch's variant
  (``ssd_nms``, ``batched_ssd_nms``).
- :mod:`.multibox_loss` -- ``MultiBoxLoss`` with hard negative mining.
- :mod:`.detection` -- ``Detect``, the test-time decode + per-class NMS layer.

This package module is kept import-light on purpose: import from the submodules.
"""
