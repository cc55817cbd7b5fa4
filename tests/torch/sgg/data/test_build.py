"""Batching, samplers and make_data_loader: padding, grouping, iterations, resume, shards.

The comparisons with SGB's samplers run against the recording ``sgb_data_build`` and, with
``GLUONTRAIN_REFERENCES`` set, live against SGB's source."""
import json
import os

import pytest
import torch
from torch.utils.data import SequentialSampler

from fixtures.recorded import SOURCES, Recorder, flatten, from_json_array, json_array
from gluontrain.torch.sgg.data import make_data_loader
from gluontrain.torch.sgg.data.build import dataset_args, make_batch_data_sampler
from gluontrain.torch.sgg.data.collate import BatchCollator
from gluontrain.torch.sgg.data.samplers import (DistributedSampler, GroupedBatchSampler,
                                                IterationBasedBatchSampler)
from gluontrain.torch.twostage.structures import BoxList

try:
    from . import sgb_reference
    from .conftest import data_cfg
except ImportError:  # imported outside the package by tests/fixtures/make_recorded_fixtures.py
    import sgb_reference  # pylint: disable=import-error
    from conftest import data_cfg  # pylint: disable=import-error

SGB = Recorder('sgb_data_build', sgb_reference.load, "SGB's data/samplers")


def test_batch_collator():
    t = BoxList(torch.zeros(1, 4), (7, 5))
    images, targets, ids = BatchCollator(32)([(torch.ones(3, 5, 7), t, 4),
                                              (torch.ones(3, 40, 2), t, 9)])
    assert images.tensors.shape == (2, 3, 64, 32) and targets == (t, t) and ids == (4, 9)


def test_grouped_batch_sampler_keeps_sampler_order():
    # maskrcnn-benchmark's own example: groups [0,1,0,1,0,1,0,0], batches of 3
    sampler = SequentialSampler(range(8))
    batches = list(GroupedBatchSampler(sampler, [0, 1, 0, 1, 0, 1, 0, 0], 3))
    assert batches == [[0, 2, 4], [1, 3, 5], [6, 7]]
    assert len(GroupedBatchSampler(sampler, [0, 1, 0, 1, 0, 1, 0, 0], 3, drop_uneven=True)) == 2
    with pytest.raises(ValueError, match='Sampler'):
        GroupedBatchSampler([0, 1], [0, 0], 2)


def test_seeded_samplers():
    s = DistributedSampler(range(10), 1, 0, seed=5)
    s.set_epoch(3)
    assert list(s) == torch.randperm(10, generator=torch.Generator().manual_seed(8)).tolist()
    # SGB's distributed order is seed 0 + epoch; shards cover the padded permutation
    shards = []
    for rank in range(3):
        d = DistributedSampler(range(10), 3, rank, shuffle=True, seed=0)
        d.set_epoch(2)
        shards.append(list(d))
    perm = torch.randperm(10, generator=torch.Generator().manual_seed(2)).tolist()
    assert sum(shards, []) == perm + perm[:2] and all(len(x) == 4 for x in shards)
    with pytest.raises(ValueError, match='rank 3'):
        DistributedSampler(range(10), 3, 3)


def _iteration_sampler(start_iter, exact_resume=True, num_iters=11):
    inner = make_batch_data_sampler(range(7), DistributedSampler(range(7), 1, 0, seed=1), [], 3)
    return IterationBasedBatchSampler(inner, num_iters, start_iter, exact_resume=exact_resume)


def test_iteration_based_sampler_and_exact_resume():
    full = list(_iteration_sampler(0))
    assert len(full) == 11 and len(_iteration_sampler(0)) == 11
    # passes of 3 batches (3+3+1 images); pass p starts at iteration 3p, seeded 1 + 3p
    perm = torch.randperm(7, generator=torch.Generator().manual_seed(1 + 3)).tolist()
    assert full[3:6] == [perm[:3], perm[3:6], perm[6:]]
    for start in (1, 3, 5, 10, 11):
        assert list(_iteration_sampler(start)) == full[start:]
    # SGB: a resumed run starts a new pass at start_iter (seeded with it here)
    sgb = list(_iteration_sampler(5, exact_resume=False))
    assert len(sgb) == 6
    perm5 = torch.randperm(7, generator=torch.Generator().manual_seed(1 + 5)).tolist()
    assert sgb[0] == perm5[:3] and sgb != full[5:]


def test_dataset_args_follow_sgb_catalog(tmp_path):
    cfg = data_cfg('/data/vg', str(tmp_path))
    args = dataset_args(cfg, 'VG_stanford_filtered_with_attribute_val')
    assert args['split'] == 'val' and args['roidb_file'] == '/data/vg/VG-SGG-with-attri.h5'
    assert args['img_dir'] == '/data/vg/VG_100K' and args['num_val_im'] == 2
    # PredCls (USE_GT_BOX): no overlap filter; SGDet with REQUIRE_BOX_OVERLAP: filtered
    assert args['filter_non_overlap'] is False and args['filter_empty_rels'] is True
    cfg.MODEL.ROI_RELATION_HEAD.USE_GT_BOX = False
    assert dataset_args(cfg, 'VG_stanford_filtered_with_attribute_train')['filter_non_overlap']
    cfg.MODEL.RELATION_ON = False  # detector pretraining: every image
    args = dataset_args(cfg, 'VG_stanford_filtered_with_attribute_train')
    assert not args['filter_non_overlap'] and not args['filter_empty_rels']
    with pytest.raises(ValueError, match='not available'):
        dataset_args(cfg, 'coco_2014_train')


def test_make_train_loader(gen_root, tmp_path):
    out = str(tmp_path / 'out')
    cfg = data_cfg(gen_root, out)
    loader = make_data_loader(cfg, 'train', seed=3)
    batches = list(loader)
    assert len(batches) == 7 == len(loader)
    dataset = loader.dataset
    for images, targets, ids in batches:
        assert images.tensors.shape[0] == len(targets) == len(ids) == 2
        assert images.tensors.shape[2] % 32 == 0 and images.tensors.shape[3] % 32 == 0
        # aspect-ratio grouping: both images on the same side of height/width = 1
        sides = {dataset.get_img_info(i)['height'] / dataset.get_img_info(i)['width'] > 1
                 for i in ids}
        assert len(sides) == 1
        for target, size in zip(targets, images.image_sizes):
            assert target.size == (size[1], size[0])
            assert min(size) == 64 or max(size) == 100  # INPUT.MIN/MAX_SIZE_TRAIN
            assert target.get_field('relation').shape == (len(target), len(target))
    with open(os.path.join(out, 'labels.json')) as f:
        assert json.load(f)['0'] == '__background__'
    # resume at iteration 3: the remaining batches hold the same images
    resumed = make_data_loader(cfg, 'train', start_iter=3, seed=3)
    assert [b[2] for b in resumed] == [b[2] for b in batches[3:]]
    assert [b[2] for b in make_data_loader(cfg, 'train', seed=4)] != [b[2] for b in batches]


def test_make_test_and_val_loaders(gen_root, tmp_path):
    cfg = data_cfg(gen_root, str(tmp_path))
    (loader,) = make_data_loader(cfg, 'test')
    ids = [i for b in loader for i in b[2]]
    # one pass in order, regrouped by aspect ratio (SGB groups test batches too)
    assert sorted(ids) == list(range(len(loader.dataset)))
    cfg.DATALOADER.ASPECT_RATIO_GROUPING = False
    (loader,) = make_data_loader(cfg, 'test')
    assert [i for b in loader for i in b[2]] == list(range(len(loader.dataset)))
    (val,) = make_data_loader(cfg, 'val')
    assert len(val.dataset) == 2
    (train_as_test,) = make_data_loader(cfg, 'test', dataset_to_test='train')
    assert train_as_test.dataset.split == 'train'


def test_distributed_loaders_shard_each_pass(gen_root, tmp_path):
    cfg = data_cfg(gen_root, str(tmp_path), **{'SOLVER.MAX_ITER': 3})
    per_rank = [[b[2] for b in make_data_loader(cfg, 'train', is_distributed=True, rank=r,
                                                world_size=2, seed=0)] for r in range(2)]
    assert all(len(r) == 3 and all(len(ids) == 1 for ids in r) for r in per_rank)
    (t0,), (t1,) = [make_data_loader(cfg, 'test', is_distributed=True, rank=r, world_size=2)
                    for r in range(2)]
    seen = [i for b in t0 for i in b[2]] + [i for b in t1 for i in b[2]]
    n = len(t0.dataset)
    assert sorted(set(seen)) == list(range(n)) and len(seen) == 2 * ((n + 1) // 2)
    cfg.SOLVER.IMS_PER_BATCH = 3
    with pytest.raises(ValueError, match=r'SOLVER.IMS_PER_BATCH \(3\) must be divisible'):
        make_data_loader(cfg, 'train', is_distributed=True, rank=0, world_size=2)


def test_same_seed_same_batches_with_workers(gen_root, tmp_path):
    """Worker processes draw flips from seeds the loader's seeded generator gives them."""
    cfg = data_cfg(gen_root, str(tmp_path), **{'DATALOADER.NUM_WORKERS': 2,
                                               'MODEL.FLIP_AUG': True, 'SOLVER.MAX_ITER': 4})
    runs = [[(b[0].tensors, [t.bbox for t in b[1]]) for b in make_data_loader(cfg, seed=1)]
            for _ in range(2)]
    for (ia, ta), (ib, tb) in zip(*runs):
        assert torch.equal(ia, ib) and all(torch.equal(a, b) for a, b in zip(ta, tb))


def test_two_training_datasets_are_concatenated(gen_root, tmp_path):
    cfg = data_cfg(gen_root, str(tmp_path))
    cfg.DATASETS.TRAIN = ('VG_stanford_filtered_with_attribute_train',
                          'VG_stanford_filtered_with_attribute_val')
    loader = make_data_loader(cfg, 'train')
    dataset = loader.dataset
    n_train = len(dataset.datasets[0])
    assert len(dataset) == n_train + 2
    assert dataset.get_img_info(n_train) == dataset.datasets[1].get_img_info(0)
    assert len(list(loader)) == 7


def _sampler_inputs():
    """``(n, batch, group_ids)`` of the sampler comparison: a random grouping (seed 0) with
    every group well filled (SGB fails when a rank's share misses a group, see
    test_grouped_sampler_with_a_group_missing_from_the_share)."""
    g = torch.Generator().manual_seed(0)
    return [(n, batch, [i % 3 for i in torch.randperm(n, generator=g).tolist()])
            for n, batch in ((23, 4), (50, 3), (31, 8))]


def _batches(make_sampler):
    """``{'n{n}/rank{r}/...': batches}`` of ``make_sampler(n, batch, group_ids, rank)``, which
    returns the ``(iteration_based, grouped_sequential)`` pair of batch samplers."""
    out = {}
    for n, batch, group_ids in _sampler_inputs():
        for rank in range(2):
            iterated, sequential = make_sampler(n, batch, group_ids, rank)
            out['n%d/rank%d' % (n, rank)] = {'iteration': json_array(list(iterated)),
                                              'sequential': json_array(list(sequential))}
    return out


@SGB.case
def samplers(sgb):
    """SGB's batches: its DistributedSampler (seed 0 + epoch) through its GroupedBatchSampler
    and IterationBasedBatchSampler (40 iterations from 5), and its GroupedBatchSampler with
    ``drop_uneven`` over the sequential order."""
    def make(n, batch, group_ids, rank):
        share = sgb.distributed.DistributedSampler(range(n), num_replicas=2, rank=rank)
        return (sgb.iteration.IterationBasedBatchSampler(
            sgb.grouped.GroupedBatchSampler(share, group_ids, batch), 40, start_iter=5),
                sgb.grouped.GroupedBatchSampler(SequentialSampler(range(n)), group_ids, batch,
                                                drop_uneven=True))
    return _batches(make)


@SGB.case
def missing_group(sgb):
    """What SGB's GroupedBatchSampler raises over a share without group 1 (the exception's
    class name; '' when none)."""
    share = DistributedSampler(range(4), 2, 0, shuffle=False)
    try:
        list(sgb.grouped.GroupedBatchSampler(share, [0, 0, 1, 1], 2))
    except Exception as err:  # pylint: disable=broad-except
        return {'raises': type(err).__name__}
    return {'raises': ''}


@pytest.mark.parametrize('source', SOURCES)
def test_samplers_same_as_sgb(source):
    """Our samplers against SGB's, batch for batch (recorded, and live from the mirror)."""
    ref = SGB.outputs('samplers', source)

    def make(n, batch, group_ids, rank):
        share = DistributedSampler(range(n), 2, rank, seed=0)
        return (IterationBasedBatchSampler(GroupedBatchSampler(share, group_ids, batch), 40,
                                           start_iter=5, exact_resume=False),
                GroupedBatchSampler(SequentialSampler(range(n)), group_ids, batch,
                                    drop_uneven=True))
    ours = flatten(_batches(make))
    assert sorted(ours) == sorted(ref) and len(ours) == 12
    for key, value in ours.items():
        assert from_json_array(value) == from_json_array(ref[key]), key


@pytest.mark.parametrize('source', SOURCES)
def test_grouped_sampler_with_a_group_missing_from_the_share(source):
    """maskrcnn-benchmark raises IndexError when a group has no sampled index (recorded, and
    live from the mirror); ours batches what the share holds."""
    share = DistributedSampler(range(4), 2, 0, shuffle=False)  # indices 0, 1: group 0 only
    assert list(GroupedBatchSampler(share, [0, 0, 1, 1], 2)) == [[0, 1]]
    assert str(SGB.outputs('missing_group', source)['raises']) == 'IndexError'
