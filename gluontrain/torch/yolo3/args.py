"""The YOLOv3 recipe's arguments: the one parser both backends share
(:mod:`gluontrain.yolo3.args`; ``--backend torch`` selects this recipe)."""
from ...yolo3.args import OUTPUT_ARGUMENT, build_parser, parse_args

__all__ = ['OUTPUT_ARGUMENT', 'build_parser', 'parse_args']
