"""Two-stage detector (FPN Faster R-CNN) faithful to mapillary/seamseg's
``scripts/train_detection.py``, in plain PyTorch (no torchvision, inplace_abn or compiled
extensions).

Modules (import the one you need):

- :mod:`.args` -- seamseg's command line (``parse_args``);
- :mod:`.config` -- seamseg's ``.ini`` configuration: shipped defaults, strict user override;
- :mod:`.data` -- ISS (seamseg's own format) and COCO-json datasets, format detection,
  seamseg's ``make_dataloader``;
- :mod:`.coco_eval` -- COCO box AP of the validation (pycocotools), seamseg's traps fixed;
- :mod:`.transform` -- ``ISSTransform``, boxes from instance masks, ``iss_collate_fn``;
- :mod:`.sampler` -- the aspect-ratio batch samplers, deterministic per epoch;
- :mod:`.body` -- the ResNet body with seamseg's module names, torchvision weight mapping;
- :mod:`.model` -- assembly from the config of the seamseg flavour of
  :mod:`gluontrain.torch.twostage` (FPN, RPN and ROI heads, seamseg's forward and algorithms,
  norm + activation layers for every ``normalization_mode``);
- :mod:`.seamseg_loops` -- seamseg's own ``train``/``validate`` loops with the seed's
  signature (``from gluontrain.torch.frcnn.seamseg_loops import train``), for users who drive
  it as seamseg (with :func:`.data.make_dataloaders`); the recipe validates with its
  ``validate``;
- :mod:`.recipe` -- the contract's functions (the package's ``train`` is the contract's) on
  the common loop, with :mod:`.step` (the backend step: forward, weighted losses, update),
  :mod:`.hooks` (``SeamsegScheduleHook``, ``SeamsegLogHook``, ``SeamsegCheckpointHook``) and
  :mod:`.plots`;
- :mod:`.meters`, :mod:`.scheduler`, :mod:`.optim`, :mod:`.log` -- seamseg's training
  utilities; :mod:`.snapshot` -- seamseg's snapshot format on gluontrain's atomic writes and
  reported loads.
"""
from .args import OUTPUT_ARGUMENT
from .recipe import (get_dataloader, get_dataset, get_net, main, parse_args, save_params,
                     train, validate)

__all__ = ['OUTPUT_ARGUMENT', 'parse_args', 'get_dataset', 'get_dataloader', 'get_net', 'train',
           'validate', 'save_params', 'main']
