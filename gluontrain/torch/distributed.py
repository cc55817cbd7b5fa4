"""Data-parallel training with one process per device, launched by ``torchrun``; every helper
also works alone (world size 1). Usage: docs/torch_idioms.md, "DDP with torchrun"; the timeout,
watchdog and teardown: docs/distributed.md, "A rank that stops". :class:`TorchComm` is the
engine's :class:`gluontrain.core.distributed.Comm` over ``torch.distributed``.
"""
import contextlib
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
                            explain_collective_error, explain_join_error,
                            report_collective_error)

__all__ = ['DistInfo', 'init_distributed', 'init_process_group', 'dist_timeout', 'teardown',
           'run_job', 'process_group', 'launch_local', 'CollectiveTimeoutError', 'explain_collective_error', 'TIMEOUT_ENV', 'is_distributed', 'get_rank', 'get_world_size',
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
    """Join the process group that ``torchrun`` set up (``RANK``, ``WORLD_SIZE``,
    ``LOCAL_RANK``, ``env://``), or run alone when ``WORLD_SIZE`` is unset or 1.

    Parameters
    ----------
    backend : str, optional
        Default ``'nccl'`` on CUDA, ``'gloo'`` on the CPU.
    use_cuda : bool, optional
        Train on GPU ``local_rank``; default: when CUDA is available.
    timeout_s : float, optional
        Collective timeout and watchdog limit (:func:`dist_timeout`).
    local_rank : int, optional
        Default ``LOCAL_RANK`` (seamseg's and SGB's tools pass their ``--local_rank``).

    Returns
    -------
    DistInfo
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
    timeout (:func:`dist_timeout` of ``timeout_s``) and a :class:`RankWatchdog`; ``rank`` and
    ``world_size`` default to torchrun's environment. Returns the timeout in seconds.

    Raises
    ------
    CollectiveTimeoutError
        (a ValueError: the CLI's one ``error:`` line) when the other ranks did not join within
        the timeout (:func:`explain_join_error`).
    """
    timeout_s = dist_timeout(timeout_s)
    rank = _env_int('RANK', 0) if rank is None else rank
    world_size = _env_int('WORLD_SIZE', 1) if world_size is None else world_size
    try:
        dist.init_process_group(backend=backend, init_method='env://', rank=rank,
                                world_size=world_size,
                                timeout=datetime.timedelta(seconds=timeout_s))
    except RuntimeError as error:
        line = explain_join_error(error, rank, world_size, timeout_s)
        if line is None:
            raise
        raise CollectiveTimeoutError(line) from None
    if world_size > 1:
        watchdog = RankWatchdog(rank, world_size, timeout_s)
        if watchdog.start():
            _WATCHDOG.append(watchdog)
    return timeout_s


def teardown(ok=True):
    """End a ``torchrun`` job: a barrier (``ok`` only: after a failure the other ranks may
    never come), leave the process group, then a short pause for gloo's threads
    (docs/distributed.md, "A rank that stops": end of the job). The pause is needed because
    ``destroy_process_group`` does not join those threads while DDP still holds the group."""
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


@contextlib.contextmanager
def process_group(use_cuda=None, local_rank=None, final_barrier=True):
    """Every recipe ``main``'s process group: joined on entry under ``torchrun`` when none
    exists (:func:`init_distributed`), left on exit (:func:`teardown`, its barrier only after a
    success and with ``final_barrier``). A run alone, or a caller's group, is left as it is."""
    started = get_world_size() == 1 and init_distributed(
        use_cuda=use_cuda, local_rank=local_rank).world_size > 1
    ok = False
    try:
        yield
        ok = True
    finally:
        if started:
            teardown(ok=ok and final_barrier)


def run_job(fn, backend=None, use_cuda=None, timeout_s=None):
    """Run ``fn() -> int`` (a CLI's ``main``) as one rank of a ``torchrun`` job: the process
    group is started (:func:`init_distributed` arguments) and torn down here, and a collective
    that timed out becomes one ``error:`` line naming the rank. Returns ``fn``'s status (1 then).
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
    """Start ``python -m module argv`` as ``nproc`` ranks on this machine, as ``torchrun
    --nproc_per_node nproc`` would (static rendezvous on a free local port, no restarts), and
    wait; ``--gpus 0,1,2,3`` of YOLOv3 on PyTorch (docs/distributed.md, "YOLOv3 on PyTorch").
    Returns 0, or the first failed rank's exit status (130 when interrupted)."""
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
    """Average named numbers (name -> float or scalar tensor) over all ranks, e.g. losses for
    the log line; every rank must pass the same names. Returns name -> float."""
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
    """Replace every BatchNorm layer by ``torch.nn.SyncBatchNorm`` (GluonCV's ``--syncbn``),
    within ``process_group`` (default: all ranks).

    Raises
    ------
    RuntimeError
        Without CUDA or for a CPU ``device`` (docs/torch_idioms.md, "SyncBatchNorm needs CUDA").
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
    """Move ``model`` to ``device`` (``DistInfo.device``) and wrap it in
    ``DistributedDataParallel(**ddp_kwargs)``; only moved when not distributed."""
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
    """:class:`gluontrain.core.distributed.Comm` over ``torch.distributed``; a world of one
    outside a process group. ``rank`` and ``world_size`` are read once, when it is made."""

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
    """Rank ``rank``'s share of ``range(size)`` for evaluation: ``rank, rank + world, ...``,
    nothing padded (``DistributedSampler``'s padding would count images twice in a metric)."""

    def __init__(self, size, rank=0, world_size=1):
        super().__init__()
        if not 0 <= rank < world_size:
            raise ValueError('rank {} is not in [0, {})'.format(rank, world_size))
        self.indices = list(range(rank, size, world_size))

    def __len__(self):
        return len(self.indices)

    def __iter__(self):
        return iter(self.indices)
