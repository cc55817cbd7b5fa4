"""GluonCV's YOLOv3 training recipe (``scripts/detection/yolo/train_yolo3.py``) as functions.

>>> from gluontrain.mx.yolo3 import parse_args, get_dataset, get_net, get_dataloader, train
>>> args = parse_args(['--network', 'mobilenet0.25', '--dataset', 'synthetic', '--gpus', '',
...                    '--no-pretrained-base', '--epochs', '2', '--batch-size', '8'])
"""
from .args import OUTPUT_ARGUMENT, build_parser, check_args, parse_args
from .data import get_dataloader, get_dataset
from .model import get_net, net_name
from .recipe import get_lr_scheduler, main, save_params, train, validate

__all__ = ['build_parser', 'check_args', 'parse_args', 'get_dataset', 'get_dataloader',
           'get_net', 'net_name', 'train', 'validate', 'save_params', 'get_lr_scheduler', 'main']
