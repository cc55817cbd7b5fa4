"""Aspect-ratio batch samplers: batches of two epochs, per-epoch determinism, distribution."""
import torch

from gluontrain.torch.frcnn.sampler import ARBatchSampler, DistributedARBatchSampler


class _Sizes:
    def __init__(self, sizes):
        self.img_sizes = sizes

    def __len__(self):
        return len(self.img_sizes)


# (H, W): ids 0, 2, 3, 5, 6 landscape (set 0), ids 1, 4, 7 portrait or square (set 1)
SIZES = [(10, 20), (20, 10), (10, 15), (12, 16), (10, 10), (5, 20), (9, 10), (30, 10)]
SET0, SET1 = [0, 2, 3, 5, 6], [1, 4, 7]
AR = [h / w for h, w in SIZES]


def _expected(epoch, batch_size, drop_last, sets):
    """The batches written out from seamseg's algorithm for given set orders."""
    g = torch.Generator()
    g.manual_seed(epoch)
    shuffled = [[s[int(i)] for i in torch.randperm(len(s), generator=g)] for s in sets]
    batches, leftover = [], []
    for s in shuffled:
        full = len(s) // batch_size * batch_size
        batches += [s[i:i + batch_size] for i in range(0, full, batch_size)]
        leftover += s[full:]
    if not drop_last:
        batches += [leftover[i:i + batch_size] for i in range(0, len(leftover), batch_size)]
    return [sorted(b, key=lambda i: AR[i]) for b in batches], shuffled


def test_two_epochs_fixed_and_reference():
    ds = _Sizes(SIZES)
    fixed = ARBatchSampler(ds, 2, drop_last=True)
    ref = ARBatchSampler(ds, 2, drop_last=True, reference_shuffle=True)
    assert len(fixed) == 5 // 2 + 3 // 2 == 3
    sets = [SET0, SET1]
    for epoch in (0, 1):
        fixed.set_epoch(epoch)
        ref.set_epoch(epoch)
        want_fixed, _ = _expected(epoch, 2, True, [SET0, SET1])
        want_ref, sets = _expected(epoch, 2, True, sets)  # seamseg: permute last epoch's order
        assert list(fixed) == want_fixed
        assert list(ref) == want_ref
        for b in want_fixed:
            assert len(b) == 2 and ({*b} <= {*SET0} or {*b} <= {*SET1})
    # epoch 1 of the fixed sampler does not depend on epoch 0 having run
    fresh = ARBatchSampler(ds, 2, drop_last=True, epoch=1)
    fixed.set_epoch(1)
    assert list(fresh) == list(fixed)
    assert list(fixed) == list(fixed)  # iterating twice gives the same batches
    ref_fresh = ARBatchSampler(ds, 2, drop_last=True, epoch=1, reference_shuffle=True)
    assert list(ref_fresh) != want_ref  # seamseg's order depends on the epochs before


def test_keep_last_leftovers_and_length():
    s = ARBatchSampler(_Sizes(SIZES), 3, drop_last=False)
    batches = list(s)
    assert len(s) == len(batches) == 3  # ceil(8 / 3)
    assert sorted(i for b in batches for i in b) == list(range(8))
    assert batches == _expected(0, 3, False, [SET0, SET1])[0]


def test_distributed_slices_cover_padded_permutation():
    ds = _Sizes(SIZES)
    base = ARBatchSampler(ds, 2, drop_last=False, epoch=3)
    batches = list(base)  # 4 batches
    g = torch.Generator()
    g.manual_seed(3)
    perm = [int(i) for i in torch.randperm(4, generator=g)]
    for replicas in (3, 9):  # 9 > 2 x 4: padding wraps more than once
        n = -(-4 // replicas)
        padded = (perm * replicas)[:n * replicas]
        for rank in range(replicas):
            d = DistributedARBatchSampler(ds, 2, replicas, rank, drop_last=False, epoch=3)
            assert len(d) == n
            assert list(d) == [batches[i] for i in padded[rank * n:(rank + 1) * n]]
    single = DistributedARBatchSampler(ds, 2, drop_last=False, epoch=3)
    assert (single.num_replicas, single.rank) == (1, 0)
