"""Which samples each of several training processes reads: disjoint shards, reshuffled per epoch.

Framework-neutral (numpy only): a sampler is an iterable of dataset indices with ``len``, what
``mxnet.gluon.data.BatchSampler`` / ``DataLoader(sampler=...)`` and ``torch.utils.data.DataLoader``
both accept.
"""
import numpy as np


class ShardedSampler:
    """The indices of one rank's shard of ``num_samples`` samples, a new shard every epoch.

    Every epoch ``e`` one permutation of ``range(num_samples)`` is drawn from
    ``np.random.RandomState(seed + e)`` (identical on every rank, so no communication is needed)
    and rank ``r`` takes its positions ``r, r + world_size, r + 2 * world_size, ...``. With a
    per-rank batch of ``B // world_size``, the ranks' ``k``-th batches together are then exactly
    the ``k``-th global batch of that permutation.

    All ranks must yield the same number of indices (a rank with one batch more would wait in the
    gradient all-reduce forever): when ``world_size`` does not divide ``num_samples``, the
    permutation is padded with its own first indices (``pad=True``, every sample is read at least
    once per epoch, ``torch.utils.data.DistributedSampler``'s default) or its tail is dropped
    (``pad=False``, the shards stay disjoint; which samples are dropped changes every epoch).

    Parameters
    ----------
    num_samples : int
        Length of the dataset.
    rank, world_size : int
        This process's rank and the number of processes.
    shuffle : bool
        Draw a permutation per epoch; False: the identity order (then the shards are strided).
    seed : int
        Base of the per-epoch seed; the same on every rank.
    pad : bool
        See above; only matters when ``world_size`` does not divide ``num_samples``.

    Call :meth:`set_epoch` before each epoch (the engine's ``SetEpochHook`` does).
    """

    def __init__(self, num_samples, rank=0, world_size=1, shuffle=True, seed=0, pad=True):
        if world_size < 1 or not 0 <= rank < world_size:
            raise ValueError('ShardedSampler: rank {} is not in [0, world_size={})'.format(
                rank, world_size))
        if num_samples < world_size:
            raise ValueError('ShardedSampler: {} samples cannot give each of {} processes a '
                             'sample; use fewer processes or more data'.format(
                                 num_samples, world_size))
        self.num_samples, self.rank, self.world_size = int(num_samples), rank, world_size
        self.shuffle, self.seed, self.pad = shuffle, int(seed), pad
        self.epoch = 0

    def set_epoch(self, epoch):
        """Select the permutation of ``epoch`` (call it before iterating each epoch)."""
        self.epoch = int(epoch)

    def __len__(self):
        per_rank, extra = divmod(self.num_samples, self.world_size)
        return per_rank + (1 if self.pad and extra else 0)

    def order(self):
        """The whole permutation of the current epoch (before padding and sharding)."""
        if not self.shuffle:
            return np.arange(self.num_samples)
        return np.random.RandomState(self.seed + self.epoch).permutation(self.num_samples)

    def __iter__(self):
        order = self.order()
        total = len(self) * self.world_size
        if total > len(order):
            order = np.concatenate([order, order[:total - len(order)]])
        return iter(order[self.rank:total:self.world_size].tolist())


def contiguous_shard(num_samples, rank, world_size):
    """Rank ``rank``'s contiguous block of ``range(num_samples)`` for evaluation.

    Blocks are disjoint, cover every sample exactly once (no padding: evaluation has no
    per-batch collective, so ranks may read different numbers of samples) and, concatenated in
    rank order, give back the original order, which order-sensitive metrics (COCO's image ids)
    rely on. The first ``num_samples % world_size`` ranks get one sample more.

    Returns
    -------
    range
    """
    if world_size < 1 or not 0 <= rank < world_size:
        raise ValueError('contiguous_shard: rank {} is not in [0, world_size={})'.format(
            rank, world_size))
    per_rank, extra = divmod(num_samples, world_size)
    start = rank * per_rank + min(rank, extra)
    return range(start, start + per_rank + (1 if rank < extra else 0))
