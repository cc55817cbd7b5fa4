"""seamseg's aspect-ratio batch samplers (seamseg/data/sampler.py).

Images are split by aspect ratio ``H / W < 1`` (set 0) or ``>= 1`` (set 1) from the
dataset's ``img_sizes``. Each epoch: both sets are permuted with one ``torch.Generator``
seeded with the epoch (set 0 first), cut into batches within each set, the leftovers of both
sets joined and batched only when ``drop_last`` is false; every batch is sorted by aspect
ratio. The distributed sampler then permutes the batches with a second generator seeded by
the epoch, pads the list by wrapping around to ``num_batches * num_replicas``, and gives rank
``r`` the slice ``[r * num_batches, (r + 1) * num_batches)``. Every epoch permutes the
original order (seamseg's compounding in-place shuffle: ``reference_shuffle=True``) and the
padding wraps as often as needed: docs/faithfulness.md, "Two-stage detector", "Deliberate
differences"."""
import math

import torch
from torch.utils.data.sampler import Sampler

from ..distributed import get_rank, get_world_size

__all__ = ['ARBatchSampler', 'DistributedARBatchSampler']


class ARBatchSampler(Sampler):
    """Batches of similar aspect ratio, reshuffled per epoch by :meth:`set_epoch`.

    Parameters
    ----------
    data_source : Dataset
        With ``img_sizes`` (``(H, W)`` per image).
    batch_size : int
    drop_last : bool
    epoch : int
    reference_shuffle : bool
        seamseg's in-place shuffle that compounds across epochs.
    """

    def __init__(self, data_source, batch_size, drop_last=False, epoch=0,
                 reference_shuffle=False):
        super().__init__()
        if int(batch_size) < 1:
            raise ValueError('batch_size must be >= 1, got {!r}'.format(batch_size))
        self.data_source = data_source
        self.batch_size = int(batch_size)
        self.drop_last = drop_last
        self.reference_shuffle = reference_shuffle
        self._epoch = epoch
        self.img_sets = self._split_images(range(len(data_source)))

    def _split_images(self, indices):
        sizes = self.data_source.img_sizes
        sets = [[], []]
        for i in indices:
            ar = sizes[i][0] / sizes[i][1]
            sets[0 if ar < 1 else 1].append({'id': i, 'ar': ar})
        return sets

    def _generate_batches(self):
        g = torch.Generator()
        g.manual_seed(self._epoch)
        shuffled = [[s[i] for i in torch.randperm(len(s), generator=g)] for s in self.img_sets]
        if self.reference_shuffle:
            self.img_sets = shuffled
        batches, leftover = [], []
        for img_set in shuffled:
            for start in range(0, len(img_set), self.batch_size):
                chunk = img_set[start:start + self.batch_size]
                if len(chunk) == self.batch_size:
                    batches.append(chunk)
                else:
                    leftover += chunk
        if not self.drop_last:
            batches += [leftover[i:i + self.batch_size]
                        for i in range(0, len(leftover), self.batch_size)]
        return batches

    def set_epoch(self, epoch):
        """Seed of the next iteration's shuffle."""
        self._epoch = epoch

    def __len__(self):
        n0, n1 = len(self.img_sets[0]), len(self.img_sets[1])
        if self.drop_last:
            return n0 // self.batch_size + n1 // self.batch_size
        return (n0 + n1 + self.batch_size - 1) // self.batch_size

    @staticmethod
    def _ids(batch):
        return [i['id'] for i in sorted(batch, key=lambda i: i['ar'])]

    def __iter__(self):
        for batch in self._generate_batches():
            yield self._ids(batch)


class DistributedARBatchSampler(ARBatchSampler):
    """:class:`ARBatchSampler` split across ``num_replicas`` processes.

    Parameters
    ----------
    data_source : Dataset
    batch_size : int
    num_replicas, rank : int, optional
        Default: from ``torch.distributed`` (1 and 0 when it is not initialised).
    drop_last : bool
    epoch : int
    reference_shuffle : bool
    """

    def __init__(self, data_source, batch_size, num_replicas=None, rank=None, drop_last=False,
                 epoch=0, reference_shuffle=False):
        super().__init__(data_source, batch_size, drop_last, epoch, reference_shuffle)
        num_replicas = get_world_size() if num_replicas is None else num_replicas
        rank = get_rank() if rank is None else rank
        if not 0 <= rank < num_replicas:
            raise ValueError('rank {} is not in [0, {})'.format(rank, num_replicas))
        self.num_replicas, self.rank = num_replicas, rank
        self.num_batches = int(math.ceil(super().__len__() / self.num_replicas))

    def __len__(self):
        return self.num_batches

    def __iter__(self):
        batches = self._generate_batches()
        g = torch.Generator()
        g.manual_seed(self._epoch)
        indices = [int(i) for i in torch.randperm(len(batches), generator=g)]
        total = self.num_batches * self.num_replicas
        while indices and len(indices) < total:
            indices += indices[:total - len(indices)]
        offset = self.num_batches * self.rank
        for idx in indices[offset:offset + self.num_batches]:
            yield self._ids(batches[idx])
