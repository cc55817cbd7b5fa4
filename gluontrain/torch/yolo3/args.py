"""The YOLOv3 recipe's arguments: the one parser both backends share
(:mod:`gluontrain.yolo3.args`; ``--backend torch`` selects this recipe)."""
from ...yolo3.args import (BACKENDS, DATASETS, NETWORKS, OUTPUT_ARGUMENT, PRESETS,
                           build_parser, check_common, parse_args)

__all__ = ['BACKENDS', 'DATASETS', 'NETWORKS', 'OUTPUT_ARGUMENT', 'PRESETS', 'build_parser',
           'check_common', 'parse_args']
