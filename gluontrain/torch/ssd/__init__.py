"""SSD300 for PyTorch, faithful to amdegroot/ssd.pytorch (the recipe ``gluontrain.get_recipe('ssd')``).

Recipe functions (the common contract, see docs/recipes.md): ``parse_args``, ``get_dataset``,
``get_dataloader``, ``get_net``, ``train``, ``validate``, ``save_params``, ``main``.

Numeric layers (plain torch, no torchvision):

- :mod:`.config` -- the ``voc`` / ``coco`` SSD300 configurations and ``MEANS``.
- :mod:`.prior_box` -- ``PriorBox``: the 8732 default boxes in (cx, cy, w, h).
- :mod:`.box_utils` -- ``match`` / ``match_batch``, ``log_sum_exp`` and ssd.pytorch's names
  (``point_form``, ``jaccard``, ``encode`` / ``decode``...) for the shared box ops of
  :mod:`gluontrain.torch.ops` (NMS: ``ops.ssd_nms``, ``ops.batched_ssd_nms``).
- :mod:`.multibox_loss` -- ``MultiBoxLoss`` with hard negative mining.
- :mod:`.detection` -- ``Detect``, the test-time decode + per-class NMS layer, and
  ``detections_in_pixels``.

Network and data: :mod:`.model` (``build_ssd``), :mod:`.augmentations`
(``SSDAugmentation``, ``BaseTransform``), :mod:`.data` (collation; the VOC/COCO datasets are
in :mod:`gluontrain.torch.data`).
Recipe: :mod:`.args`, :mod:`.recipe` (the contract), :mod:`.step` (``SSDStep``, the loop body),
:mod:`.hooks` (``SSDScheduleHook``, ``SSDLogHook``, ``SSDCheckpointHook``); pictures:
:mod:`.plots` (detections on raw images, the validation samples picture).
"""
from .args import OUTPUT_ARGUMENT, build_parser, parse_args
from .recipe import get_dataloader, get_dataset, get_net, main, save_params, train, validate

__all__ = ['build_parser', 'parse_args', 'get_dataset', 'get_dataloader', 'get_net', 'train',
           'validate', 'save_params', 'main']
