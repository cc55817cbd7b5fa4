"""The YOLOv3 recipe's arguments: one parser for both backends, in :mod:`gluontrain.yolo3.args`
(re-exported here so that existing imports keep working)."""
from ...yolo3.args import (BACKENDS, DATASETS, MAX_DATA_SHAPE, NETWORKS, OUTPUT_ARGUMENT,
                           PRESETS, STRIDE, build_parser, check_args, check_common, parse_args)

__all__ = ['BACKENDS', 'DATASETS', 'MAX_DATA_SHAPE', 'NETWORKS', 'OUTPUT_ARGUMENT', 'PRESETS',
           'STRIDE', 'build_parser', 'check_args', 'check_common', 'parse_args']
