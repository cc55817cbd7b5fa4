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
- :mod:`.norm` -- norm + activation layers for every ``normalization_mode``;
- :mod:`.body` -- the ResNet body with seamseg's module names, torchvision weight mapping;
- :mod:`.heads` -- FPN, the shared RPN head and the FPN ROI head;
- :mod:`.model` -- assembly from the config, raw forward;
- :mod:`.train` -- seamseg's ``train``/``validate`` loops (the seed's signature);
- :mod:`.meters`, :mod:`.scheduler`, :mod:`.optim`, :mod:`.log`, :mod:`.snapshot` -- seamseg's
  training utilities.
"""
