"""GluonCV's YOLOv3 on PyTorch: the networks (:mod:`.model`), GluonCV ``.params`` weights in
and out without MXNet (:mod:`.weights`), and the training recipe (``get_recipe('yolo3-torch')``,
``python scripts/train_yolov3.py --backend torch``) with the MXNet recipe's command line:
:mod:`.args` (the shared parser), :mod:`.data`, :mod:`.step` (loss, targets, SGD),
:mod:`.hooks`, :mod:`.recipe`, :mod:`.plots`.
"""
from .args import OUTPUT_ARGUMENT, build_parser, parse_args
from .data import get_dataloader, get_dataset
from .model import YOLOV3, build_yolov3, get_yolov3
from .recipe import get_lr_scheduler, get_net, main, net_name, save_params, train, validate
from .weights import load_params, to_gluon_key, to_torch_key

__all__ = ['YOLOV3', 'build_yolov3', 'get_yolov3', 'load_params', 'save_params',
           'to_gluon_key', 'to_torch_key', 'build_parser', 'parse_args', 'get_dataset',
           'get_dataloader', 'get_net', 'net_name', 'train', 'validate', 'main',
           'get_lr_scheduler', 'OUTPUT_ARGUMENT']
