"""Data-parallel training with one process per device, launched by ``torchrun``.

GluonCV trains on several GPUs from one process (``split_and_load`` + kvstore); the PyTorch
way is one process per GPU with ``DistributedDataParallel``::

    torchrun --nproc_per_node 4 scripts/train.py ...

    info = init_distributed()                     # reads RANK, WORLD_SIZE, LOCAL_RANK
    model = convert_sync_batchnorm(model)         # optional; CUDA only
    model = wrap_ddp(model, info.device)
    sampler = DistributedSampler(dataset)          # a different shard per rank
    ...
    losses = all_reduce_mean({'loss': loss.item()})
    if is_main_process():
        save_checkpoint(...)
    barrier()

Every helper also works without ``torchrun`` (one process, world size 1), so the same script
runs unchanged on a laptop.

A rank that stops (SIGSTOP, a hung data loader, a dead mount) would leave the others waiting
forever: the process group gets a timeout (:func:`dist_timeout`: ``GLUONTRAIN_DIST_TIMEOUT``
seconds, default 600), and :class:`RankWatchdog` names the rank in one line and ends the job
within it (see :mod:`gluontrain.torch.dist_watchdog`). :func:`teardown` ends a job without the
end-of-run SIGABRT of gloo's threads.

:class:`TorchComm` is the engine's :class:`gluontrain.core.distributed.Comm` over
``torch.distributed``: recipes pass it to ``build_hooks`` and ``run_loop``, which then leave
logging and saving to rank 0 and keep the ranks together.
"""
import datetime
import logging
import os
import sys
import time
from collections import namedtuple

import torch
import torch.distributed as dist

from ..core.distributed import LocalComm
from .dist_watchdog import (TIMEOUT_ENV, CollectiveTimeoutError, RankWatchdog, dist_timeout,
                            explain_collective_error, report_collective_error)

__all__ = ['DistInfo', 'init_distributed', 'init_process_group', 'dist_timeout', 'teardown',
           'run_job', 'launch_local', 'CollectiveTimeoutError', 'explain_collective_error', 'TIMEOUT_ENV', 'is_distributed', 'get_rank', 'get_world_size',
           'is_main_process', 'barrier', 'all_reduce_mean', 'convert_sync_batchnorm',
           'wrap_ddp', 'unwrap_model', 'cleanup', 'TorchComm', 'ShardSampler']

DistInfo = namedtuple('DistInfo', ['rank', 'world_size', 'local_rank', 'device', 'backend'])
DistInfo.__doc__ = """This process's place in the job: ranks, its device and the backend
(``None`` when not distributed)."""


def _env_int(name, default):
    value = os.environ.get(name)
    if value is None or value == '':
        return default
    try:
        return int(value)
    except ValueError:
        raise ValueError('environment variable {}={!r} is not an integer (torchrun sets it)'
                         .format(name, value)) from None


def init_distributed(backend=None, use_cuda=None, timeout_s=None, local_rank=None):
    """Join the process group that ``torchrun`` set up, or run alone.

    Reads ``RANK``, ``WORLD_SIZE`` and ``LOCAL_RANK`` (and ``MASTER_ADDR``/``MASTER_PORT``
    through ``init_method='env://'``). With ``WORLD_SIZE`` unset or 1 nothing is initialised.

    Parameters
    ----------
    backend : str, optional
        ``'nccl'`` on CUDA (the process is then bound to GPU ``LOCAL_RANK``), ``'gloo'`` on
        the CPU.
    use_cuda : bool, optional
        Train on GPU ``LOCAL_RANK``; default: when CUDA is available. ``False`` keeps every
        rank on the CPU (``--gpus ''``).
    timeout_s : float, optional
        How long a collective waits for the other ranks, and how long a rank may stop before
        the watchdog ends the job (:func:`dist_timeout`: default ``$GLUONTRAIN_DIST_TIMEOUT``,
        else 600 s).
    local_rank : int, optional
        The GPU of this process; default ``LOCAL_RANK`` (seamseg's and SGB's tools pass their
        ``--local_rank``, as ``torch.distributed.launch`` sets it).

    Returns
    -------
    DistInfo
        ``rank``, ``world_size``, ``local_rank``, ``device`` (``cuda:LOCAL_RANK`` or cpu) and
        ``backend``.
    """
    rank, world_size = _env_int('RANK', 0), _env_int('WORLD_SIZE', 1)
    local_rank = _env_int('LOCAL_RANK', 0) if local_rank is None else local_rank
    use_cuda = torch.cuda.is_available() if use_cuda is None else use_cuda
    if use_cuda:
        if local_rank >= torch.cuda.device_count():
            raise ValueError('LOCAL_RANK={} but only {} GPU(s) are visible; start torchrun with '
                             '--nproc_per_node <= the number of GPUs'
                             .format(local_rank, torch.cuda.device_count()))
        device = torch.device('cuda', local_rank)
        torch.cuda.set_device(device)
    else:
        device = torch.device('cpu')
    if world_size <= 1:
        return DistInfo(0, 1, local_rank, device, None)
    backend = backend or ('nccl' if use_cuda else 'gloo')
    if not dist.is_initialized():
        init_process_group(backend, timeout_s, rank=rank, world_size=world_size)
    return DistInfo(dist.get_rank(), dist.get_world_size(), local_rank, device,
                    dist.get_backend())


_WATCHDOG = []


def init_process_group(backend, timeout_s=None, rank=None, world_size=None):
    """``torch.distributed.init_process_group(backend, init_method='env://')`` with a
    timeout, and a :class:`RankWatchdog` started on it.

    Parameters
    ----------
    backend : str
        ``'gloo'`` or ``'nccl'``.
    timeout_s : float, optional
        :func:`dist_timeout` (``$GLUONTRAIN_DIST_TIMEOUT``, else 600 s).
    rank, world_size : int, optional
        Default: ``RANK`` and ``WORLD_SIZE`` from torchrun's environment.

    Returns
    -------
    float
        The timeout in seconds.
    """
    timeout_s = dist_timeout(timeout_s)
    rank = _env_int('RANK', 0) if rank is None else rank
    world_size = _env_int('WORLD_SIZE', 1) if world_size is None else world_size
    dist.init_process_group(backend=backend, init_method='env://', rank=rank,
                            world_size=world_size,
                            timeout=datetime.timedelta(seconds=timeout_s))
    if world_size > 1:
        watchdog = RankWatchdog(rank, world_size, timeout_s)
        if watchdog.start():
            _WATCHDOG.append(watchdog)
    return timeout_s


def teardown(ok=True):
    """End a ``torchrun`` job: a barrier (``ok`` only), then leave the process group.

    Why the barrier and the pause: a rank that leaves while another still communicates (rank 0
    saving ``model_final.pth``) is one problem; the other is gloo's worker threads. They free
    each finished collective themselves, which takes Python's lock (the work holds Python
    objects); a rank that exits right after its last collective reaches interpreter shutdown
    while such a thread still waits for that lock, and the thread is then killed inside a C++
    destructor: ``terminate called without an active exception``, SIGABRT (measured: 3 of 20
    scene-graph runs, 3 of 30 of a bare DDP script). ``destroy_process_group`` does not join
    those threads while ``DistributedDataParallel`` still holds the group, so this releases the
    lock for a moment after the last collective, and they finish first (0 of 30, and 20 of 20
    clean scene-graph runs).

    Parameters
    ----------
    ok : bool, default True
        False after a failure: no barrier (the other ranks may never come; torchrun stops
        them), just leave.
    """
    try:
        if ok and is_distributed():
            dist.barrier()
    finally:
        while _WATCHDOG:
            _WATCHDOG.pop().stop()
        if dist.is_available() and dist.is_initialized():
            dist.destroy_process_group()
            # the GIL released: gloo's threads free their last work now, not at interpreter exit
            time.sleep(0.1)


def run_job(fn, backend=None, use_cuda=None, timeout_s=None):
    """Run ``fn()`` (a CLI's ``main``, returning an exit status) as one rank of a ``torchrun``
    job: the process group is started here (with its timeout and watchdog) when
    ``WORLD_SIZE > 1``, and :func:`teardown` ends it; a collective that timed out becomes one
    ``error:`` line naming the rank (exit 1).

    Parameters
    ----------
    fn : callable
        ``() -> int``.
    backend : str, optional
        Default ``'nccl'`` when ``use_cuda`` (default: CUDA available), else ``'gloo'``.
    use_cuda : bool, optional
    timeout_s : float, optional
        :func:`dist_timeout`.

    Returns
    -------
    int
        ``fn``'s status (1 after a collective timeout).
    """
    started = False
    if _env_int('WORLD_SIZE', 1) > 1 and not dist.is_initialized():
        try:
            init_distributed(backend, use_cuda, timeout_s)
        except ValueError as error:
            print('error: {}'.format(error), file=sys.stderr)
            return 1
        started = True
    code = 1
    try:
        code = fn()
    except RuntimeError as error:
        if not report_collective_error(error):
            raise
        return 1
    finally:
        if started:
            teardown(ok=code == 0)
    return code


def launch_local(nproc, argv, module='gluontrain', timeout_s=None):
    """Start ``python -m module argv`` as ``nproc`` ranks of one job on this machine, as
    ``torchrun --nproc_per_node nproc`` starts them (torch's elastic launcher in this
    process: static rendezvous on a free local port, no restarts), and wait for them.

    What GluonCV's user types, ``--gpus 0,1,2,3``, needs one process per GPU on PyTorch:
    the recipe calls this instead of asking for torchrun. Each rank sees ``RANK``,
    ``LOCAL_RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``/``MASTER_PORT`` as under torchrun and
    prints to this process's stdout and stderr.

    Parameters
    ----------
    nproc : int
    argv : list of str
        The ranks' arguments after ``-m module``.
    module : str
    timeout_s : float, optional
        Rendezvous timeout (default :func:`dist_timeout`).

    Returns
    -------
    int
        0 when every rank succeeded, else the first failed rank's exit status (130 when
        interrupted).
    """
    # pylint: disable=import-outside-toplevel
    import socket
    import uuid
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        port = sock.getsockname()[1]
    config = LaunchConfig(
        min_nodes=1, max_nodes=1, nproc_per_node=nproc, run_id='gluontrain-' + uuid.uuid4().hex,
        rdzv_backend='static', rdzv_endpoint='127.0.0.1:{}'.format(port),
        rdzv_configs={'rank': 0, 'timeout': int(dist_timeout(timeout_s))}, max_restarts=0,
        monitor_interval=0.1)
    # the ranks say what went wrong; the agent's own log lines would repeat it with a pid
    quiet = [logging.getLogger(name) for name in list(logging.root.manager.loggerDict)
             if name.startswith('torch.distributed')]
    levels = [log.level for log in quiet]
    for log in quiet:
        log.setLevel(logging.CRITICAL)
    try:
        elastic_launch(config, sys.executable)('-m', module, *argv)
    except ChildFailedError as error:
        codes = [f.exitcode for f in error.failures.values()]
        # the ranks printed their own error lines; a signal is a negative status
        first = next((c for c in codes if c), 1)
        return 128 - first if first < 0 else first
    except (KeyboardInterrupt, SignalException):
        # a Ctrl-C reaches the ranks too (one process group): each says where it stopped
        return 130
    finally:
        for log, level in zip(quiet, levels):
            log.setLevel(level)
    return 0


def is_distributed():
    """True inside an initialised process group of more than one process."""
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def get_rank():
    """This process's rank (0 when not distributed)."""
    return dist.get_rank() if is_distributed() else 0


def get_world_size():
    """Number of processes (1 when not distributed)."""
    return dist.get_world_size() if is_distributed() else 1


def is_main_process():
    """True on rank 0 (and when not distributed): the one that logs and saves."""
    return get_rank() == 0


def barrier():
    """Wait for every rank (nothing to wait for when not distributed)."""
    if is_distributed():
        dist.barrier()


def all_reduce_mean(values):
    """Average named numbers over all ranks, e.g. losses for the log line.

    Parameters
    ----------
    values : dict
        name -> float or scalar tensor.

    Returns
    -------
    dict
        name -> float, the mean over ranks (the values themselves when not distributed).
        Every rank must pass the same names.
    """
    # packed in sorted order, so that ranks agree whatever order their dicts were built in
    names = sorted(values)
    numbers = [float(values[n].detach()) if isinstance(values[n], torch.Tensor)
               else float(values[n]) for n in names]
    if is_distributed() and names:
        # nccl reduces CUDA tensors only
        device = torch.device('cuda', torch.cuda.current_device()) \
            if dist.get_backend() == 'nccl' else torch.device('cpu')
        packed = torch.tensor(numbers, dtype=torch.float64, device=device)
        dist.all_reduce(packed, op=dist.ReduceOp.SUM)
        numbers = (packed / dist.get_world_size()).cpu().tolist()
    means = dict(zip(names, numbers))
    return {name: means[name] for name in values}


def convert_sync_batchnorm(model, process_group=None, device=None):
    """Replace every BatchNorm layer by ``torch.nn.SyncBatchNorm`` (batch statistics over
    all ranks, as GluonCV's ``--syncbn``).

    Parameters
    ----------
    model : torch.nn.Module
    process_group : ProcessGroup, optional
        Synchronise within this group only (default: all ranks).
    device : torch.device, optional
        Where the model will train; a CPU device is refused.

    Returns
    -------
    torch.nn.Module

    Raises
    ------
    RuntimeError
        On a machine without CUDA or for a CPU ``device``: PyTorch's SyncBatchNorm only runs on
        GPUs and would otherwise fail at the first forward pass, mid-run.
    """
    if not torch.cuda.is_available() or (device is not None and
                                          torch.device(device).type != 'cuda'):
        raise RuntimeError(
            'SyncBatchNorm needs CUDA: torch.nn.SyncBatchNorm only runs on GPUs, and this run '
            'is on the CPU ({}). Train without --syncbn on the CPU (each rank then normalises '
            'with its own batch statistics).'.format(
                'no CUDA device available' if not torch.cuda.is_available()
                else 'device={}'.format(device)))
    return torch.nn.SyncBatchNorm.convert_sync_batchnorm(model, process_group)


def wrap_ddp(model, device, **ddp_kwargs):
    """Move ``model`` to ``device`` and wrap it in ``DistributedDataParallel``.

    Parameters
    ----------
    model : torch.nn.Module
    device : torch.device
        This rank's device (``DistInfo.device``).
    **ddp_kwargs
        Passed to ``DistributedDataParallel`` (e.g. ``find_unused_parameters=True``).

    Returns
    -------
    torch.nn.Module
        The DDP-wrapped model, or ``model`` itself (moved) when not distributed.
    """
    device = torch.device(device)
    model = model.to(device)
    if not is_distributed():
        return model
    if device.type == 'cuda':
        ddp_kwargs.setdefault('device_ids', [device.index])
        ddp_kwargs.setdefault('output_device', device.index)
    return torch.nn.parallel.DistributedDataParallel(model, **ddp_kwargs)


def unwrap_model(model):
    """The module inside a ``DistributedDataParallel``/``DataParallel`` wrapper (for saving)."""
    wrappers = (torch.nn.parallel.DistributedDataParallel, torch.nn.DataParallel)
    return model.module if isinstance(model, wrappers) else model


def cleanup():
    """Leave the process group, without a barrier (call at the end of a ``torchrun`` script,
    after the run's own last barrier): :func:`teardown` ``(ok=False)``."""
    teardown(ok=False)


class TorchComm(LocalComm):
    """:class:`gluontrain.core.distributed.Comm` over ``torch.distributed`` (gloo or nccl).

    Outside an initialised process group (no ``torchrun``) it is a world of one
    (:class:`~gluontrain.core.distributed.LocalComm`), as every helper of this module.
    ``rank`` and ``world_size`` are read once, when it is made (after
    :func:`init_distributed`).
    """

    def __init__(self):
        self.rank, self.world_size = get_rank(), get_world_size()

    def barrier(self):
        """``torch.distributed.barrier()`` in a distributed run."""
        barrier()

    def allreduce_mean(self, values):
        """:func:`all_reduce_mean` (one float64 all-reduce for all the names)."""
        return all_reduce_mean(values)

    def allgather_object(self, obj):
        """``torch.distributed.all_gather_object``: every rank's ``obj`` in rank order."""
        if self.world_size == 1:
            return super().allgather_object(obj)
        gathered = [None] * self.world_size
        dist.all_gather_object(gathered, obj)
        return gathered

    def broadcast_object(self, obj, root=0):
        """``torch.distributed.broadcast_object_list`` of ``[obj]`` from ``root``."""
        if self.world_size == 1:
            return super().broadcast_object(obj, root)
        box = [obj if self.rank == root else None]
        dist.broadcast_object_list(box, src=root)
        return box[0]


class ShardSampler(torch.utils.data.Sampler):
    """Rank ``rank``'s share of ``range(size)`` for evaluation: ``rank, rank + world, ...``
    in order, nothing padded or repeated (``DistributedSampler`` pads the shards to equal
    length, which would count images twice in a gathered metric).

    Parameters
    ----------
    size : int
        Length of the dataset.
    rank, world_size : int
    """

    def __init__(self, size, rank=0, world_size=1):
        super().__init__()
        if not 0 <= rank < world_size:
            raise ValueError('rank {} is not in [0, {})'.format(rank, world_size))
        self.indices = list(range(rank, size, world_size))

    def __len__(self):
        return len(self.indices)

    def __iter__(self):
        return iter(self.indices)
