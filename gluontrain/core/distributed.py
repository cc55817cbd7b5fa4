"""Several processes, one loop: the backend-neutral side of data-parallel training
(docs/recipes.md, "Several processes: one mechanism for torch.distributed and Horovod").

:class:`Comm` is what the engine needs from the backend's communication library;
:class:`LocalComm` is the world of one (``gluontrain.torch.distributed.TorchComm`` and
``gluontrain.mx.distributed.HorovodComm`` are the real ones, and the engine never imports a
framework). :class:`BarrierHook`, :class:`RankStateHook` and :class:`SetEpochHook` are the
hooks a run of several processes adds."""
from .checkpoint import get_rng_states, set_rng_states
from .hooks import get_logger, hooks_state_dict, load_hooks_state_dict
from .loop import Hook

__all__ = ['Comm', 'LocalComm', 'SetEpochHook', 'BarrierHook', 'RankStateHook']


class Comm:
    """The communication a distributed run needs, whatever the backend (a protocol class).

    Attributes
    ----------
    rank : int
        This process's rank, 0 .. ``world_size - 1``.
    world_size : int
        Number of processes.

    Every method is collective: all ranks call it, in the same order, or the job hangs.
    """
    rank = 0
    world_size = 1

    @property
    def is_main(self):
        """True on rank 0, the rank that logs and writes files."""
        return self.rank == 0

    def barrier(self):
        """Return once every rank has called it."""
        raise NotImplementedError

    def allreduce_mean(self, values):
        """The mean over ranks of named numbers.

        Parameters
        ----------
        values : dict
            name -> float; every rank passes the same names (in any order).

        Returns
        -------
        dict
            name -> float mean over ranks, in ``values``' order.
        """
        raise NotImplementedError

    def allgather_object(self, obj):
        """Every rank's ``obj`` (picklable), as a list in rank order, on every rank."""
        raise NotImplementedError

    def broadcast_object(self, obj, root=0):
        """``root``'s ``obj`` on every rank (the others' ``obj`` is ignored)."""
        raise NotImplementedError


class LocalComm(Comm):
    """The world of one process: every collective is the identity."""

    def __init__(self):
        self.rank, self.world_size = 0, 1

    def barrier(self):
        """Nothing to wait for."""

    def allreduce_mean(self, values):
        """``values`` as floats."""
        return {name: float(value) for name, value in values.items()}

    def allgather_object(self, obj):
        """``[obj]``."""
        return [obj]

    def broadcast_object(self, obj, root=0):
        """``obj`` (only ``root=0`` exists)."""
        if root != 0:
            raise ValueError('broadcast_object(root={}): a world of one has rank 0 only'
                             .format(root))
        return obj


class SetEpochHook(Hook):
    """Calls ``sampler.set_epoch(state.epoch)`` before every epoch.

    ``torch.utils.data.DistributedSampler`` (and samplers built like it) draws its shuffle
    from ``seed + epoch``: without this call every epoch repeats the first one's order.

    Parameters
    ----------
    sampler : object with ``set_epoch(int)``
        The training data's (batch) sampler.
    """

    def __init__(self, sampler):
        if not callable(getattr(sampler, 'set_epoch', None)):
            raise ValueError('SetEpochHook needs a sampler with set_epoch(epoch) (as '
                             'DistributedSampler); got {}'.format(type(sampler).__name__))
        self.sampler = sampler

    def before_epoch(self, state):
        self.sampler.set_epoch(state.epoch)


class BarrierHook(Hook):
    """Waits for every rank after each epoch and after each validation step, so that no
    rank runs ahead of the files rank 0 is writing (put it after the saving hooks).

    Parameters
    ----------
    comm : Comm
    """

    def __init__(self, comm):
        self.comm = comm

    def after_batch(self, state):
        # iteration-based recipes validate and save after a step; every rank agrees on
        # val_iteration because validation runs on all of them
        if state.val_iteration == state.iteration:
            self.comm.barrier()

    def after_epoch(self, state):
        self.comm.barrier()


class RankStateHook(Hook):
    """Gathers each rank's own state into the checkpoint rank 0 writes, and gives every rank
    its part back on resume.

    Rank 0's checkpoint already holds rank 0's hooks and generators. What the other ranks
    alone hold (Python's and numpy's generators, which draw their data augmentation, the
    backend's generators through ``collect_fn``, and the state of the hooks every rank runs,
    such as a data position) is collected here at the end of every epoch, just before
    :class:`~gluontrain.core.hooks.CheckpointHook` (``build_hooks`` places it), and saved as
    this hook's state.

    Parameters
    ----------
    comm : Comm
    hooks : list of Hook
        The run's complete hook list (the hooks with ``main_process_only`` are rank 0's and
        not collected).
    collect_fn : callable, optional
        ``() -> picklable``: backend state of this rank (torch's generators).
    restore_fn : callable, optional
        ``(what collect_fn returned) -> None``.
    """

    def __init__(self, comm, hooks, collect_fn=None, restore_fn=None):
        self.comm, self.hooks = comm, hooks
        self.collect_fn, self.restore_fn = collect_fn, restore_fn
        self.ranks = []

    def _own_hooks(self):
        return [h for h in self.hooks if h is not self
                and not getattr(h, 'main_process_only', False)]

    def collect(self):
        """Gather every rank's state now (collective); returns the list, in rank order."""
        mine = {'rng': get_rng_states(), 'hooks': hooks_state_dict(self._own_hooks()),
                'backend': self.collect_fn() if self.collect_fn is not None else None}
        self.ranks = self.comm.allgather_object(mine)
        return self.ranks

    def after_epoch(self, state):
        self.collect()

    def state_dict(self):
        return {'ranks': self.ranks} if self.ranks else {}

    def load_state_dict(self, state_dict):
        ranks = state_dict.get('ranks') or []
        if not ranks:
            return
        if len(ranks) != self.comm.world_size:
            raise ValueError(
                'the checkpoint was written by {} process(es) and this run has {}: resume it '
                'with the same number of processes (torchrun --nproc_per_node / horovodrun '
                '-np {}) to continue exactly'.format(len(ranks), self.comm.world_size,
                                                     len(ranks)))
        mine = ranks[self.comm.rank]
        load_hooks_state_dict(self._own_hooks(), mine['hooks'])
        set_rng_states(mine['rng'])
        if self.restore_fn is not None and mine.get('backend') is not None:
            self.restore_fn(mine['backend'])
        self.ranks = ranks
        if self.comm.world_size > 1:
            get_logger().debug('rank %d: own generators and data position restored',
                               self.comm.rank)
