"""The reference script's ``__main__`` as a function: ``main(argv)`` runs a whole training."""
import warnings

from gluoncv import utils as gutils

from ...core import checkpoint as ckpt_io
from ...core.argtypes import check_input_file
from ..context import get_contexts
from ..distributed import HorovodComm, horovod_contexts, import_horovod, quiet_other_ranks
from .args import check_args, parse_args
from .data import get_dataloader, get_dataset
from .model import get_net
from .train import train
from .weights import load_params, read_params


WEIGHTS_FIX = ('pass a .params file written by a run with the same --network and --dataset '
               '(its {prefix}_best.params or {prefix}_EPOCH_MAP.params, or a GluonCV model-zoo '
               'yolo3 .params), or its {prefix}_last.ckpt checkpoint to --resume')


def load_weights(path, net, async_net, ctx, argument='--load-weights'):
    """Load a weights file into both networks (``--load-weights`` / ``--resume x.params``).

    Strict, as the reference's ``net.load_parameters``: every parameter must be in the file
    with its shape and the file may hold nothing else. A gluontrain checkpoint's weights load
    too. The parameters stay on the contexts ``get_net`` initialised them on (``ctx`` is not
    used: :func:`.train.train` moves them), as the reference's ``load_parameters(file)``.

    Returns
    -------
    LoadReport
        "loaded N of M tensors from FILE", for the training log.

    Raises
    ------
    FileNotFoundError
        When ``path`` does not exist.
    ValueError
        (:class:`~gluontrain.core.load_report.WeightsLoadError`) One line naming the file and
        ``argument``: not an MXNet ``.params`` file (a PyTorch file, a truncated one), the
        weights of another network (another ``--network`` or other classes: what the file
        looks like and the arguments it fits), or tensors missing / unexpected / of another
        shape.
    """
    del ctx  # kept for the callers; see below
    arrays = read_params(path, argument, WEIGHTS_FIX)
    # on the contexts get_net initialised them on, as the reference loads (train moves them
    # to the training contexts): a GPU list here would fail Gluon's "initialized on" check
    report = load_params(net, path, argument, WEIGHTS_FIX, arrays=arrays)
    if async_net is not net:
        load_params(async_net, path, argument, WEIGHTS_FIX, arrays=arrays)
    return report


def main(argv=None):
    """Parse ``argv``, build everything and train, in the reference ``__main__``'s order.

    Returns
    -------
    TrainState
        As :func:`.train.train` returns it.
    """
    args = parse_args(argv)
    if args.backend != 'mxnet':
        raise ValueError('--backend {} is the PyTorch recipe: run it through scripts/'
                         'train_yolov3.py or gluontrain.torch.yolo3.main'.format(args.backend))
    comm = None
    if args.horovod:
        if args.cpus:
            raise ValueError('--horovod trains one context per process; drop --cpus (start '
                             'more processes with horovodrun -np instead)')
        hvd = import_horovod()
        hvd.init()
        comm = HorovodComm(hvd)
        quiet_other_ranks(comm)
        ctx = horovod_contexts(hvd, args.gpus)
    else:
        ctx = get_contexts(args.gpus, args.cpus)
    check_args(args, ctx, comm)
    # a missing or folder --resume / --load-weights fails before the data is read
    for argument, path in (('--resume', args.resume.strip()),
                           ('--load-weights', args.load_weights.strip())):
        if path:
            check_input_file(path, argument, WEIGHTS_FIX)
    # fix seed for mxnet, numpy and python builtin random generator.
    gutils.random.seed(args.seed)
    args.save_prefix += '_'.join(('yolo3', args.network, args.dataset))
    # custom classes come from the data, so the dataset is read before the net is built;
    # neither step draws random numbers, so the order changes no result
    train_dataset, val_dataset, eval_metric = get_dataset(args.dataset, args)
    reports = []
    net, async_net = get_net(args, ctx, reports)
    # --resume is decided by content (train() resumes a checkpoint): anything else is read as
    # weights here, into both networks, before the loaders build their target generators
    resume = args.resume.strip()
    resume_weights = bool(resume) and _resume_kind(resume) != ckpt_io.CHECKPOINT
    weights = args.load_weights.strip() or (resume if resume_weights else '')
    if weights:
        if resume_weights:
            warnings.warn('--resume {} loads weights only; a full resume needs the '
                          '{{prefix}}_last.ckpt checkpoint'.format(weights))
        report = load_weights(weights, net, async_net, ctx,
                              '--load-weights' if args.load_weights.strip() else '--resume')
        reports.append(report.format())
    # the reference's per-rank batch under Horovod; the loaders then shard the data
    batch_size = args.batch_size // comm.world_size if comm is not None else args.batch_size
    train_data, val_data = get_dataloader(async_net, train_dataset, val_dataset, args.data_shape,
                                          batch_size, args.num_workers, args, comm)
    return train(net, train_data, val_data, eval_metric, ctx, args, comm, reports=reports)


def _resume_kind(path):
    """:func:`gluontrain.core.checkpoint.file_kind`, or ``None`` for a file it cannot name
    (which :func:`load_weights` then describes, as it does a PyTorch file)."""
    check_input_file(path, '--resume', WEIGHTS_FIX)  # a folder is not "does not exist"
    try:
        return ckpt_io.file_kind(path)
    except FileNotFoundError:
        raise FileNotFoundError('--resume {} does not exist; {}'.format(
            path, WEIGHTS_FIX)) from None
    except ValueError:
        return None
