"""Horovod for the MXNet recipes: the engine's :class:`~gluontrain.core.distributed.Comm` over
``horovod.mxnet``, and the per-rank context (docs/distributed.md, "YOLOv3 with Horovod").

Horovod is optional; it is built from source against the installed MXNet
(:data:`HOROVOD_BUILD`). ``horovod.mxnet`` is imported only by :func:`import_horovod`
(importing torch after it crashes the process), so nothing imports it as a side effect."""
import logging
import pickle

import mxnet as mx
import numpy as np

from ..core.distributed import Comm
from ..core.hooks import get_logger

__all__ = ['HOROVOD_BUILD', 'HorovodMissingError', 'import_horovod', 'HorovodComm',
           'horovod_contexts', 'quiet_other_ranks']

# the exact command that builds horovod 0.28.1 for this stack (docs/distributed.md)
HOROVOD_BUILD = ('HOROVOD_WITH_MXNET=1 HOROVOD_WITH_GLOO=1 HOROVOD_WITHOUT_MPI=1 '
                 'HOROVOD_WITHOUT_PYTORCH=1 HOROVOD_WITHOUT_TENSORFLOW=1 '
                 'pip install --no-build-isolation horovod==0.28.1')


class HorovodMissingError(ValueError):
    """``--horovod`` without a usable ``horovod.mxnet`` (a ValueError: the CLI prints one
    line)."""


def import_horovod():
    """``horovod.mxnet``, or :class:`HorovodMissingError` naming the build command.

    Raises
    ------
    HorovodMissingError
        When horovod is not installed, or was built without MXNet support.
    """
    try:
        import horovod.mxnet as hvd  # pylint: disable=import-outside-toplevel
    except ImportError as e:
        raise HorovodMissingError(
            '--horovod needs horovod built with MXNet and Gloo ({}: {}); build it with: {}'
            .format(type(e).__name__, e, HOROVOD_BUILD)) from None
    return hvd


def horovod_contexts(hvd, gpus):
    """One context per process, as GluonCV: ``gpu(hvd.local_rank())``, or the CPU when
    ``--gpus ''`` (the reference ignores ``--gpus`` and always takes a GPU).

    Parameters
    ----------
    hvd : module
        ``horovod.mxnet``, initialised.
    gpus : str
        ``--gpus``; empty (or only spaces) for the CPU.

    Returns
    -------
    list of mx.Context
        One element.
    """
    if not gpus.strip():
        return [mx.cpu()]
    available = mx.context.num_gpus()
    local = hvd.local_rank()
    if local >= available:
        raise ValueError('--horovod: local rank {} has no GPU (this machine has {}); start at '
                         'most {} processes per host (horovodrun -np/-H) or pass --gpus \'\' '
                         'for the CPU'.format(local, available, available))
    return [mx.gpu(local)]


class HorovodComm(Comm):
    """:class:`~gluontrain.core.distributed.Comm` over ``horovod.mxnet`` (initialised).

    Every collective gets a name from a counter that advances identically on every rank
    (collectives are called in the same order everywhere), which is how Horovod matches the
    ranks' requests.

    Parameters
    ----------
    hvd : module, optional
        ``horovod.mxnet``; imported (and ``hvd.init()`` called) when not given.
    """

    def __init__(self, hvd=None):
        if hvd is None:
            hvd = import_horovod()
            hvd.init()
        self.hvd = hvd
        self.rank, self.world_size = hvd.rank(), hvd.size()
        self.local_rank = hvd.local_rank()
        self._count = 0

    def _name(self, kind):
        self._count += 1
        return 'gluontrain.{}.{}'.format(kind, self._count)

    def barrier(self):
        """An all-reduce of one number, waited for (horovod.mxnet 0.28.1 has no barrier)."""
        self.hvd.allreduce(mx.nd.zeros((1,)), average=False,
                           name=self._name('barrier')).wait_to_read()

    def allreduce_mean(self, values):
        """Mean over ranks of named numbers, in one float64 all-reduce in sorted-name order."""
        names = sorted(values)
        local = mx.nd.array([float(values[n]) for n in names], dtype='float64')
        mean = self.hvd.allreduce(local, average=True, name=self._name('mean')).asnumpy()
        by_name = dict(zip(names, mean.tolist()))
        return {name: by_name[name] for name in values}

    def allgather_object(self, obj):
        """Pickled bytes gathered as uint8 arrays, with their lengths gathered first."""
        payload = np.frombuffer(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL),
                                dtype=np.uint8)
        name = self._name('gather')
        sizes = self.hvd.allgather(mx.nd.array([payload.size], dtype='int64'),
                                   name=name + '.size').asnumpy().tolist()
        data = self.hvd.allgather(mx.nd.array(payload, dtype='uint8'),
                                  name=name + '.data').asnumpy()
        out, start = [], 0
        for size in sizes:
            out.append(pickle.loads(data[start:start + size].tobytes()))
            start += size
        return out

    def broadcast_object(self, obj, root=0):
        """``root``'s pickled ``obj``, its length broadcast first."""
        name = self._name('bcast')
        if self.rank == root:
            payload = np.frombuffer(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL),
                                    dtype=np.uint8)
            size = mx.nd.array([payload.size], dtype='int64')
        else:
            size = mx.nd.zeros((1,), dtype='int64')
        size = int(self.hvd.broadcast(size, root, name=name + '.size').asscalar())
        data = mx.nd.array(payload, dtype='uint8') if self.rank == root \
            else mx.nd.zeros((size,), dtype='uint8')
        data = self.hvd.broadcast(data, root, name=name + '.data').asnumpy()
        return obj if self.rank == root else pickle.loads(data.tobytes())


class _WarningsOnly(logging.Filter):
    def filter(self, record):
        return record.levelno >= logging.WARNING


def quiet_other_ranks(comm):
    """Keep the info lines of the ``gluontrain`` logger to rank 0.

    The hooks that run on every rank (validation) log their results too; off rank 0 nothing
    attaches a handler, but a library's bare ``logging.info`` gives the root logger one, and
    every rank would print the validation block. Warnings and errors still show on every rank.
    """
    if comm.rank != 0:
        logger = get_logger()
        if not any(isinstance(f, _WarningsOnly) for f in logger.filters):
            logger.addFilter(_WarningsOnly())
