"""Resuming inside a pass over a shuffled ``DataLoader``, and RNG-neutral side work
(docs/recipes.md, "Checkpoints", "Resuming inside a pass").

- :class:`SkippingBatchSampler` wraps the loader's batch sampler and drops the batches a
  resumed pass already trained on, by index (nothing is loaded or augmented for them);
- :class:`PassPositionHook` keeps torch's generator state at the start of the current pass
  (in the checkpoint through the hooks' state). On a mid-pass resume it lets the loader draw
  its shuffle (and worker seed) from that state, skips the done batches, and then gives the
  generator back the checkpoint's state;
- :func:`preserved_rng` runs validation and pictures without moving any global generator."""
import contextlib

import numpy as np
import torch

from ..core.loop import Hook
from .checkpoint import get_all_rng_states, set_all_rng_states

__all__ = ['SkippingBatchSampler', 'PassPositionHook', 'preserved_rng', 'shuffled_loader',
           'distributed_shuffled_loader']


class SkippingBatchSampler(torch.utils.data.Sampler):
    """A batch sampler that leaves out its first ``skip`` batches once, then behaves as the
    sampler it wraps (``skip`` is set by :class:`PassPositionHook` for a resumed pass).

    Parameters
    ----------
    batch_sampler : iterable of lists of int
        E.g. ``BatchSampler(RandomSampler(dataset), batch_size, drop_last=False)``, what
        ``DataLoader(shuffle=True)`` builds.
    """

    def __init__(self, batch_sampler):
        super().__init__()
        self.batch_sampler = batch_sampler
        self.skip = 0

    def __len__(self):
        return len(self.batch_sampler)

    @property
    def sampler(self):
        """The index sampler inside (a ``DistributedSampler`` in a distributed run)."""
        return getattr(self.batch_sampler, 'sampler', None)

    def set_epoch(self, epoch):
        """Pass ``epoch`` to the index sampler (``DistributedSampler.set_epoch``: its
        shuffle comes from ``seed + epoch``); nothing for a sampler without one."""
        if callable(getattr(self.sampler, 'set_epoch', None)):
            self.sampler.set_epoch(epoch)

    def __iter__(self):
        skip, self.skip = self.skip, 0
        for i, batch in enumerate(self.batch_sampler):
            if i >= skip:
                yield batch


def shuffled_loader(dataset, batch_size, **kwargs):
    """``DataLoader(dataset, batch_size, shuffle=True, **kwargs)`` (same draws, same batches)
    whose batch sampler is a :class:`SkippingBatchSampler`, so a run can resume inside a pass.
    """
    sampler = torch.utils.data.BatchSampler(torch.utils.data.RandomSampler(dataset),
                                            batch_size, drop_last=False)
    return torch.utils.data.DataLoader(dataset, batch_sampler=SkippingBatchSampler(sampler),
                                       **kwargs)


def distributed_shuffled_loader(dataset, batch_size, num_replicas, rank, seed=0, **kwargs):
    """Rank ``rank``'s loader of a data-parallel run: ``DistributedSampler(shuffle=True,
    seed=seed)`` batches of ``batch_size`` (per process) in a :class:`SkippingBatchSampler`.

    Each pass is a new permutation from ``seed + epoch`` (call ``loader.batch_sampler
    .set_epoch(epoch)``, e.g. with :class:`gluontrain.core.distributed.SetEpochHook`), dealt
    out as disjoint shards (``DistributedSampler`` repeats a few samples so that every rank has
    ``ceil(len / num_replicas)``: the ranks must take the same number of steps). The order
    depends on the seed and the epoch only, so a resumed pass has the same shards.
    """
    sampler = torch.utils.data.DistributedSampler(dataset, num_replicas=num_replicas, rank=rank,
                                                  shuffle=True, seed=seed, drop_last=False)
    batches = torch.utils.data.BatchSampler(sampler, batch_size, drop_last=False)
    return torch.utils.data.DataLoader(dataset, batch_sampler=SkippingBatchSampler(batches),
                                       **kwargs)


@contextlib.contextmanager
def preserved_rng():
    """Run the body and then put Python's, numpy's and torch's (CPU, CUDA) generators back
    where they were: creating a ``DataLoader`` iterator draws from torch's generator even
    without shuffling."""
    states = get_all_rng_states()
    try:
        yield
    finally:
        set_all_rng_states(states)


class PassPositionHook(Hook):
    """Keeps torch's generator state at the start of each pass, and resumes inside one.

    The run's ``state.resume_batch`` (batches of the first pass the checkpoint had done) is set
    by the recipe after restoring; this hook then needs the pass-start state the checkpoint
    holds (``state_dict``), else the pass is restarted from its first batch (older
    checkpoints).

    Parameters
    ----------
    batch_sampler : SkippingBatchSampler or None
        The training loader's batch sampler (``loader.batch_sampler``); None (a loader built
        otherwise) also restarts an interrupted pass.
    """

    def __init__(self, batch_sampler):
        self.batch_sampler = (batch_sampler if isinstance(batch_sampler, SkippingBatchSampler)
                              else None)
        self.pass_rng = None
        self._restored = None
        self._after_skip = None

    def state_dict(self):
        return {} if self.pass_rng is None else {'pass_rng': self.pass_rng}

    def load_state_dict(self, state_dict):
        self._restored = state_dict.get('pass_rng')

    def before_train(self, state):
        if state.resume_batch and (self._restored is None or self.batch_sampler is None):
            state.resume_batch = 0  # cannot replay the order: run the whole pass again

    def before_epoch(self, state):
        if state.resume_batch and state.epoch == state.start_epoch:
            # the loader draws this pass's shuffle from the pass-start state, skips the done
            # batches; before_batch hands back the checkpoint's state
            self._after_skip = torch.get_rng_state()
            torch.set_rng_state(torch.from_numpy(np.asarray(self._restored, dtype=np.uint8)))
            self.batch_sampler.skip = state.resume_batch
        self.pass_rng = torch.get_rng_state().numpy().copy()

    def before_batch(self, state):
        if self._after_skip is not None:
            torch.set_rng_state(self._after_skip)
            self._after_skip = None
