"""seamseg's ``scripts/train_detection.py`` command line.

Same arguments and defaults. PyTorch >= 2.0's ``torch.distributed.launch`` passes
``--local-rank`` (hyphen) where seamseg's parser only knew ``--local_rank``, and ``torchrun``
passes neither but sets ``LOCAL_RANK``: all three are accepted here.
"""
import argparse

from ...core.argtypes import non_negative_int, resolve_local_rank

__all__ = ['build_parser', 'parse_args', 'OUTPUT_ARGUMENT']

#: The argument naming where the run writes (the CLI names it when a write fails).
OUTPUT_ARGUMENT = '--log_dir'


def build_parser():
    """The argparse parser (seamseg's arguments, plus the ``--local-rank`` spelling).

    Returns
    -------
    argparse.ArgumentParser
    """
    parser = argparse.ArgumentParser(description='Detection training script')
    parser.add_argument('--local_rank', '--local-rank', dest='local_rank', type=int,
                        default=None,
                        help='Device index of this process (default: $LOCAL_RANK, else 0)')
    parser.add_argument('--log_dir', type=str, default='.',
                        help='Write logs to the given directory')
    parser.add_argument('--resume', metavar='FILE', type=str,
                        help='Resume training from given file')
    parser.add_argument('--eval', action='store_true', help='Do a single validation run')
    parser.add_argument('--pre_train', metavar='FILE', type=str, nargs='*',
                        help="Start from the given pre-trained snapshots, overwriting each with "
                             "the next one in the list. Snapshots can be given in the format "
                             "'{module_name}:{path}', where '{module_name}' is one of 'body', "
                             "'rpn_head' or 'roi_head'. In that case only that part of the "
                             "network will be loaded from the snapshot")
    # gluontrain additions
    parser.add_argument('--seed', type=non_negative_int, default=None,
                        help='Seed Python, NumPy and torch (default: unseeded, as seamseg)')
    parser.add_argument('--tensorboard', type=str, default=None, metavar='DIR',
                        help="TensorBoard folder (needs tensorboardX; default: the log dir "
                             "when tensorboardX is installed, as seamseg; '' for none)")
    parser.add_argument('--no-plots', '--no_plots', dest='plots', action='store_false',
                        help='No curves or validation samples picture (ours; matplotlib is '
                             'then never imported)')
    parser.add_argument('config', metavar='FILE', type=str, help='Path to configuration file')
    parser.add_argument('data', metavar='DIR', type=str, help='Path to dataset')
    return parser


def parse_args(argv=None):
    """Parse the command line.

    ``local_rank`` comes from ``--local_rank``/``--local-rank``, else ``$LOCAL_RANK``, else 0.
    seamseg's ``main`` asserts that ``--resume`` and ``--pre_train`` exclude each other and
    that ``--eval`` has weights to evaluate (``--resume``, or ``--pre_train``, which passes its
    assert); those are argument errors here (exit 2 with a usage message, no traceback).

    Parameters
    ----------
    argv : list of str, optional
        Default ``sys.argv[1:]``.

    Returns
    -------
    argparse.Namespace
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    resolve_local_rank(args, parser)
    if args.resume and args.pre_train:
        parser.error('--resume and --pre_train are mutually exclusive')
    if args.eval and not (args.resume or args.pre_train):
        parser.error('--eval needs --resume FILE or --pre_train FILE (the weights to validate)')
    return args
