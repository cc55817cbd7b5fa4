"""The YOLOv3 recipe's arguments: one parser for both backends, in :mod:`gluontrain.yolo3.args`
(re-exported here so that existing imports keep working), and its check for MXNet contexts."""
from ...yolo3.args import OUTPUT_ARGUMENT, PRESETS, build_parser, check_common, parse_args
from ..context import is_cpu

__all__ = ['OUTPUT_ARGUMENT', 'PRESETS', 'build_parser', 'check_args', 'parse_args']


def check_args(args, ctx, comm=None):
    """:func:`gluontrain.yolo3.args.check_common` for MXNet contexts ``ctx`` (a list of
    ``mx.Context``)."""
    check_common(args, is_cpu(ctx), len(ctx), comm.world_size if comm is not None else 1,
                 'MXNet')
