"""ShardedSampler / contiguous_shard: disjoint, covering, reshuffled per epoch, deterministic."""
import numpy as np
import pytest

from gluontrain.core.sharding import ShardedSampler, contiguous_shard


def _shards(n, world, epoch, **kw):
    out = []
    for rank in range(world):
        s = ShardedSampler(n, rank, world, **kw)
        s.set_epoch(epoch)
        out.append(list(s))
    return out


@pytest.mark.parametrize('n,world', [(32, 2), (30, 3), (7, 1), (64, 4)])
def test_divisible_shards_are_disjoint_equal_and_cover_the_dataset(n, world):
    for epoch in range(3):
        shards = _shards(n, world, epoch, seed=233)
        assert all(len(s) == n // world for s in shards)
        flat = [i for s in shards for i in s]
        assert sorted(flat) == list(range(n))


def test_reshuffled_every_epoch_and_deterministic_from_the_seed():
    e0, e1 = _shards(32, 2, 0, seed=5), _shards(32, 2, 1, seed=5)
    assert e0 != e1
    assert set(e0[0]) != set(e1[0])  # a rank gets other images, not only another order
    assert _shards(32, 2, 1, seed=5) == e1  # same seed and epoch: same shards, new objects
    assert _shards(32, 2, 1, seed=6) != e1
    # the permutation of epoch e is RandomState(seed + e)'s, rank r takes positions r::world
    perm = np.random.RandomState(5 + 1).permutation(32)
    assert e1[0] == perm[0::2].tolist() and e1[1] == perm[1::2].tolist()


def test_rank_batches_together_are_the_global_batch():
    n, world, global_batch = 32, 2, 8
    per_rank = global_batch // world
    shards = _shards(n, world, 3, seed=1)
    order = ShardedSampler(n, 0, 1, seed=1)
    order.set_epoch(3)
    single = list(order)
    for k in range(n // global_batch):
        union = set()
        for s in shards:
            union |= set(s[k * per_rank:(k + 1) * per_rank])
        assert union == set(single[k * global_batch:(k + 1) * global_batch])


def test_uneven_length_pads_or_drops_with_equal_lengths():
    padded = _shards(11, 3, 0, seed=0)
    assert [len(s) for s in padded] == [4, 4, 4]
    flat = [i for s in padded for i in s]
    assert set(flat) == set(range(11)) and len(flat) - len(set(flat)) == 1
    dropped = _shards(11, 3, 0, seed=0, pad=False)
    assert [len(s) for s in dropped] == [3, 3, 3]
    flat = [i for s in dropped for i in s]
    assert len(set(flat)) == 9


def test_no_shuffle_is_strided_identity():
    assert _shards(6, 2, 4, shuffle=False) == [[0, 2, 4], [1, 3, 5]]


def test_bad_rank_and_too_few_samples_are_refused():
    with pytest.raises(ValueError, match='rank 2'):
        ShardedSampler(10, 2, 2)
    with pytest.raises(ValueError, match='3 samples'):
        ShardedSampler(3, 0, 4)


@pytest.mark.parametrize('n,world', [(8, 2), (9, 2), (5, 4), (3, 4)])
def test_contiguous_shard_covers_in_order(n, world):
    blocks = [contiguous_shard(n, r, world) for r in range(world)]
    assert [i for b in blocks for i in b] == list(range(n))
    assert max(map(len, blocks)) - min(map(len, blocks)) <= 1


def test_usable_as_gluon_batch_sampler_with_rollover():
    from mxnet import gluon
    sampler = ShardedSampler(10, 1, 2, seed=0)
    batches = gluon.data.BatchSampler(sampler, 2, 'rollover')
    first = list(batches)  # 5 indices: two batches, one index rolls over
    assert [len(b) for b in first] == [2, 2]
    sampler.set_epoch(1)
    second = list(batches)
    assert [len(b) for b in second] == [2, 2, 2]
    assert second[0][0] == list(ShardedSampler(10, 1, 2, seed=0))[4]
