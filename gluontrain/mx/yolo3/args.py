"""The YOLOv3 recipe's arguments: one parser for both backends, in :mod:`gluontrain.yolo3.args`
(re-exported here so that existing imports keep working)."""
from ...yolo3.args import OUTPUT_ARGUMENT, PRESETS, build_parser, check_args, parse_args

__all__ = ['OUTPUT_ARGUMENT', 'PRESETS', 'build_parser', 'check_args', 'parse_args']
