"""Scene-Graph-Benchmark's command line (``tools/relation_train_net.py:312-332``,
``tools/detector_pretrain_net.py``): ``--config-file FILE``, ``--local_rank``, ``--skip-test``
and the yacs ``opts`` (``KEY VALUE`` pairs merged after the file).

Additions: ``--local-rank`` (what ``torch.distributed.launch`` passes since PyTorch 2.0; SGB's
parser rejects it), ``$LOCAL_RANK`` (torchrun) when neither is given, and ``--data-dir DIR``
(``DATASETS.DATA_DIR``: the folder with the VG files).
"""
import argparse

from ...core.argtypes import resolve_local_rank
from .config import load_cfg

__all__ = ['build_parser', 'parse_args', 'config_from_args', 'OUTPUT_ARGUMENT', 'RESUME_ADVICE']

#: Where the run writes (the CLI names it when a write fails).
OUTPUT_ARGUMENT = 'OUTPUT_DIR'

#: How an interrupted run continues, for the CLI's Ctrl-C line (``{path}``: the last
#: checkpoint). SGB's tools have no ``--resume``: the same command reads
#: ``OUTPUT_DIR/last_checkpoint`` and continues from the file it names.
RESUME_ADVICE = ('resume by rerunning the same command (it continues from the checkpoint '
                 'named in last_checkpoint beside {path})')


def build_parser(description="PyTorch Relation Detection Training"):
    """SGB's parser plus ``--local-rank`` and ``--data-dir``.

    Parameters
    ----------
    description : str

    Returns
    -------
    argparse.ArgumentParser
    """
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--config-file", default="", metavar="FILE", type=str,
                        help="path to config file (the shipped ones: gluontrain/torch/sgg/"
                             "configs/*.yaml)")
    parser.add_argument("--local_rank", "--local-rank", dest="local_rank", type=int,
                        default=None, help="device index of this process (default: "
                                           "$LOCAL_RANK, else 0)")
    parser.add_argument("--skip-test", dest="skip_test", action="store_true",
                        help="Do not test the final model")
    parser.add_argument("--no-plots", dest="plots", action="store_false",
                        help="no curves or validation samples picture (ours; matplotlib is then "
                             "never imported)")
    parser.add_argument("--data-dir", dest="data_dir", default=None, metavar="DIR",
                        help="folder with VG-SGG-with-attri.h5, VG-SGG-dicts-with-attri.json, "
                             "image_data.json and VG_100K/ (sets DATASETS.DATA_DIR)")
    parser.add_argument("opts", help="Modify config options using the command-line",
                        default=None, nargs=argparse.REMAINDER)
    return parser


def parse_args(argv=None, description="PyTorch Relation Detection Training"):
    """Parse the command line; ``local_rank`` falls back to ``$LOCAL_RANK``, then 0.

    Parameters
    ----------
    argv : list of str, optional
        Default ``sys.argv[1:]``.
    description : str

    Returns
    -------
    argparse.Namespace
        ``config_file``, ``local_rank``, ``skip_test``, ``data_dir``, ``opts``.
    """
    parser = build_parser(description)
    args = parser.parse_args(argv)
    resolve_local_rank(args, parser)
    args.opts = list(args.opts or [])
    # argparse.REMAINDER swallows options written after the first opt; take ours back
    if '--skip-test' in args.opts:
        args.opts.remove('--skip-test')
        args.skip_test = True
    if '--data-dir' in args.opts:
        i = args.opts.index('--data-dir')
        if i + 1 >= len(args.opts):
            parser.error('--data-dir needs a folder')
        args.data_dir = args.opts[i + 1]
        del args.opts[i:i + 2]
    if not args.config_file:
        parser.error('--config-file is required (e.g. gluontrain/torch/sgg/configs/'
                     'predcls_motifs_cpu.yaml)')
    return args


def config_from_args(args):
    """The frozen config of ``args``: defaults, ``--config-file``, ``opts``, ``--data-dir``.

    Raises
    ------
    gluontrain.torch.sgg.config.ConfigError
        A missing file or unknown key, named.
    """
    return load_cfg(args.config_file, args.opts, data_dir=args.data_dir)
