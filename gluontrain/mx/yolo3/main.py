"""The reference script's ``__main__`` as a function: ``main(argv)`` runs a whole training."""
import os
import warnings

import mxnet as mx
from gluoncv import utils as gutils

from ...core import checkpoint as ckpt_io
from ..context import get_contexts
from ..distributed import HorovodComm, horovod_contexts, import_horovod, quiet_other_ranks
from .args import check_args, parse_args
from .data import get_dataloader, get_dataset
from .model import get_net
from .train import train


def load_weights(path, net, async_net, ctx, argument='--load-weights'):
    """Load a ``.params`` file into both networks (``--load-weights`` / ``--resume x.params``).

    Raises
    ------
    FileNotFoundError
        When ``path`` does not exist.
    ValueError
        When it is not a ``.params`` file, or holds the weights of another network (other
        ``--network`` or other classes): the message names the file and ``argument``.
    """
    if not os.path.isfile(path):
        raise FileNotFoundError('{} {} does not exist; pass a .params file a previous run '
                                'wrote'.format(argument, path))
    try:
        net.load_parameters(path, ctx=ctx)
        if async_net is not net:
            async_net.load_parameters(path)
    except AssertionError as e:
        # gluon's shape/name checks are asserts: "shape incompatible", "is missing in file"
        detail = ' '.join(str(e).split())
        raise ValueError('{} {} holds the weights of another network: it does not fit this '
                         '--network with these classes ({}); pass a .params file written by a '
                         'run with the same --network and --dataset'.format(
                             argument, path, detail[:300])) from e
    except mx.base.MXNetError as e:
        raise ValueError('{} {} is not an MXNet .params file ({}); pass a {{prefix}}_best.params '
                         'or {{prefix}}_EPOCH_MAP.params file a run wrote'.format(
                             argument, path, str(e).strip().splitlines()[-1][:200])) from e

def main(argv=None):
    """Parse ``argv``, build everything and train, in the reference ``__main__``'s order.

    Returns
    -------
    TrainState
        As :func:`.train.train` returns it.
    """
    args = parse_args(argv)
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
    # fix seed for mxnet, numpy and python builtin random generator.
    gutils.random.seed(args.seed)
    args.save_prefix += '_'.join(('yolo3', args.network, args.dataset))
    # custom classes come from the data, so the dataset is read before the net is built;
    # neither step draws random numbers, so the order changes no result
    train_dataset, val_dataset, eval_metric = get_dataset(args.dataset, args)
    net, async_net = get_net(args, ctx)
    # --resume is decided by content (train() resumes a checkpoint): MXNet weights are loaded
    # here, into both networks, before the loaders build their target generators
    resume = args.resume.strip()
    resume_weights = bool(resume) and ckpt_io.file_kind(resume) == ckpt_io.MX_PARAMS
    weights = args.load_weights.strip() or (resume if resume_weights else '')
    if weights:
        if resume_weights:
            warnings.warn('--resume {} loads weights only; a full resume needs the '
                          '{{prefix}}_last.ckpt checkpoint'.format(weights))
        load_weights(weights, net, async_net, ctx,
                     '--load-weights' if args.load_weights.strip() else '--resume')
    # the reference's per-rank batch under Horovod; the loaders then shard the data
    batch_size = args.batch_size // comm.world_size if comm is not None else args.batch_size
    train_data, val_data = get_dataloader(async_net, train_dataset, val_dataset, args.data_shape,
                                          batch_size, args.num_workers, args, comm)
    return train(net, train_data, val_data, eval_metric, ctx, args, comm)
