"""maskrcnn-benchmark's samplers: seeded shuffling, per-rank shards, aspect-ratio groups and
iteration-based batching with an exact mid-pass resume.

SGB shuffles with torch's unseeded global generator and, on resume, starts a fresh pass at
``start_iter``. Here every pass's order is a function of ``(seed, iteration at the pass's
start)`` (SGB's ``DistributedSampler`` already seeds with that iteration) and
:class:`IterationBasedBatchSampler` replays the index bookkeeping of the passes before
``start_iter`` (no image is read), so a resumed run sees the batches the uninterrupted one saw.
"""
import collections

import torch
from torch.utils.data.sampler import BatchSampler, Sampler

__all__ = ['DistributedSampler', 'GroupedBatchSampler', 'IterationBasedBatchSampler']


class DistributedSampler(torch.utils.data.DistributedSampler):
    """Rank ``rank``'s share of the (shuffled) indices, padded by wrapping to equal shares:
    maskrcnn-benchmark's copy of torch's sampler, whose shares are contiguous blocks of the
    padded permutation (torch's are strided), the generator seeded with ``seed + epoch``
    (``seed=0`` is SGB's order; ``set_epoch`` is called by
    :class:`IterationBasedBatchSampler`). With one replica it is the recipe's seeded random
    sampler: ``randperm(n)`` per pass.

    Parameters
    ----------
    dataset : sized
    num_replicas, rank : int
        World size and this process's rank.
    shuffle : bool
    seed : int
    """

    def __init__(self, dataset, num_replicas=1, rank=0, shuffle=True, seed=0):
        super().__init__(dataset, num_replicas, rank, shuffle=shuffle, seed=int(seed))

    def __iter__(self):
        if self.shuffle:
            g = torch.Generator()
            g.manual_seed(self.seed + self.epoch)
            indices = torch.randperm(len(self.dataset), generator=g).tolist()
        else:
            indices = list(range(len(self.dataset)))
        indices += indices[: (self.total_size - len(indices))]
        offset = self.num_samples * self.rank
        return iter(indices[offset: offset + self.num_samples])


class GroupedBatchSampler(BatchSampler):
    """Batches whose images share a group (aspect-ratio bin), ordered as close as possible to
    the wrapped sampler's order (maskrcnn-benchmark's ``GroupedBatchSampler``).

    Parameters
    ----------
    sampler : torch.utils.data.Sampler
    group_ids : sequence of int
        Group of each dataset index.
    batch_size : int
    drop_uneven : bool
        Drop batches smaller than ``batch_size``.
    """

    def __init__(self, sampler, group_ids, batch_size, drop_uneven=False):
        # pylint: disable=super-init-not-called
        if not isinstance(sampler, Sampler):
            raise ValueError('sampler should be an instance of torch.utils.data.Sampler, but '
                             'got sampler={}'.format(sampler))
        self.sampler = sampler
        self.group_ids = torch.as_tensor(group_ids)
        if self.group_ids.dim() != 1:
            raise ValueError('group_ids must be one-dimensional')
        self.batch_size, self.drop_uneven = batch_size, drop_uneven
        self._can_reuse_batches = False

    def _prepare_batches(self):
        # where each dataset index comes in the sampler; a repeated one (a padded share) is
        # batched once, at its last place, as maskrcnn-benchmark's scatter of positions does
        place = {int(i): k for k, i in enumerate(self.sampler)}
        by_group, group_ids = collections.defaultdict(list), self.group_ids.tolist()
        for i in sorted(place, key=place.get):
            by_group[group_ids[i]].append(i)
        # a group absent from the sampled indices (another rank's share) gives no batch; on
        # its empty chunk maskrcnn-benchmark's code fails (IndexError)
        chunks = [members[k:k + self.batch_size] for members in by_group.values()
                  for k in range(0, len(members), self.batch_size)]
        # the batches in the order their first element came in the sampler
        batches = sorted(chunks, key=lambda batch: place[batch[0]])
        if self.drop_uneven:
            batches = [b for b in batches if len(b) == self.batch_size]
        return batches

    def __iter__(self):
        if not self._can_reuse_batches:
            self._batches = self._prepare_batches()
        self._can_reuse_batches = False
        return iter(self._batches)

    def __len__(self):
        if not hasattr(self, '_batches'):
            self._batches = self._prepare_batches()
            self._can_reuse_batches = True
        return len(self._batches)


class IterationBasedBatchSampler(BatchSampler):
    """Re-iterate ``batch_sampler`` until ``num_iterations`` batches were given, counting
    from ``start_iter``; a sampler with ``set_epoch`` gets the iteration each pass starts at.

    Parameters
    ----------
    batch_sampler : BatchSampler
    num_iterations : int
        ``SOLVER.MAX_ITER``.
    start_iter : int
        Iterations already done (resume).
    exact_resume : bool
        Replay the passes before ``start_iter`` (indices only) so the batches from
        ``start_iter`` on are those of an uninterrupted run. False is SGB: a new pass starts
        at ``start_iter`` (with ``set_epoch(start_iter)``).
    """

    def __init__(self, batch_sampler, num_iterations, start_iter=0, exact_resume=True):
        # pylint: disable=super-init-not-called
        self.batch_sampler, self.num_iterations = batch_sampler, num_iterations
        self.start_iter, self.exact_resume = start_iter, exact_resume

    def __iter__(self):
        iteration = 0 if self.exact_resume else self.start_iter
        while iteration <= self.num_iterations:
            if hasattr(self.batch_sampler.sampler, 'set_epoch'):
                self.batch_sampler.sampler.set_epoch(iteration)
            batches = list(self.batch_sampler)
            if not batches:
                raise ValueError('the batch sampler gives no batch (empty dataset, or '
                                 'drop_uneven with fewer images than a batch)')
            if iteration + len(batches) <= self.start_iter:
                iteration += len(batches)  # a pass done before the resume point
                continue
            for batch in batches:
                iteration += 1
                if iteration > self.num_iterations:
                    break
                if iteration > self.start_iter:
                    yield batch

    def __len__(self):
        return self.num_iterations
