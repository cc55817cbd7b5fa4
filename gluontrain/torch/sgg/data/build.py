"""SGB's ``data/build.py``: datasets from the config, samplers and ``make_data_loader``.

Dataset names follow SGB's catalog (``VG_stanford_filtered_with_attribute_train`` etc.); the
files are looked up in ``DATASETS.DATA_DIR`` (the folder ``scripts/make_synthetic_data.py vg``
writes; SGB's ``datasets/vg``). Rank and world size are parameters (SGB asks
``torch.distributed``); shuffling is seeded (SGB seeds nothing).
"""
import bisect
import json
import logging
import os

import torch
import torch.utils.data

from ....core.checkpoint import atomic_write
from ...distributed import get_rank, get_world_size
from .collate import BatchCollator, BBoxAugCollator
from .samplers import DistributedSampler, GroupedBatchSampler, IterationBasedBatchSampler
from .transforms import build_transforms
from .vg_dataset import VGDataset

__all__ = ['VG_CATALOG', 'ConcatDataset', 'dataset_args', 'build_dataset', 'make_data_sampler',
           'make_batch_data_sampler', 'make_data_loader', 'make_loader', 'save_labels']

_LOG = logging.getLogger(__name__)

# SGB's paths_catalog entries, relative to DATASETS.DATA_DIR (SGB's "datasets/vg")
VG_CATALOG = {
    'VG_stanford_filtered': {
        'img_dir': 'VG_100K', 'roidb_file': 'VG-SGG.h5', 'dict_file': 'VG-SGG-dicts.json',
        'image_file': 'image_data.json'},
    'VG_stanford_filtered_with_attribute': {
        'img_dir': 'VG_100K', 'roidb_file': 'VG-SGG-with-attri.h5',
        'dict_file': 'VG-SGG-dicts-with-attri.json', 'image_file': 'image_data.json'},
}
DEFAULT_DATA_DIR = 'datasets/vg'
DEFAULT_NUM_VAL_IM = 5000


def _cfg(node, key, default):
    return node.get(key, default) if hasattr(node, 'get') else getattr(node, key, default)


class ConcatDataset(torch.utils.data.ConcatDataset):
    """``torch.utils.data.ConcatDataset`` with ``get_img_info`` (maskrcnn-benchmark's), which
    the aspect-ratio grouping reads."""

    def get_idxs(self, idx):
        """``(dataset index, sample index)`` of concatenated index ``idx``."""
        dataset_idx = bisect.bisect_right(self.cumulative_sizes, idx)
        sample_idx = idx if dataset_idx == 0 else idx - self.cumulative_sizes[dataset_idx - 1]
        return dataset_idx, sample_idx

    def get_img_info(self, idx):
        """The image info of concatenated index ``idx``."""
        dataset_idx, sample_idx = self.get_idxs(idx)
        return self.datasets[dataset_idx].get_img_info(sample_idx)


def dataset_args(cfg, name, data_dir=None):
    """``VGDataset`` keyword arguments for a catalog name (SGB's ``DatasetCatalog.get``).

    Parameters
    ----------
    cfg : yacs.config.CfgNode
        Reads ``MODEL.RELATION_ON``, ``MODEL.ROI_RELATION_HEAD.USE_GT_BOX`` and
        ``REQUIRE_BOX_OVERLAP``, ``MODEL.FLIP_AUG``, ``TEST.CUSTUM_EVAL``, ``TEST.CUSTUM_PATH``,
        and (keys SGB lacks) ``DATASETS.DATA_DIR`` (default ``datasets/vg``) and
        ``DATASETS.NUM_VAL_IM`` (default 5000, SGB's fixed value).
    name : str
        ``<catalog entry>_<train|val|test>``.
    data_dir : str, optional
        Overrides ``DATASETS.DATA_DIR``.

    Returns
    -------
    dict
    """
    p = name.rfind('_')
    base, split = name[:p], name[p + 1:]
    if base not in VG_CATALOG or split not in ('train', 'val', 'test'):
        raise ValueError('dataset {!r} is not available: use one of {} with _train, _val or '
                         '_test (DATASETS.TRAIN/VAL/TEST)'.format(name, sorted(VG_CATALOG)))
    root = data_dir or _cfg(cfg.DATASETS, 'DATA_DIR', DEFAULT_DATA_DIR)
    args = {k: os.path.join(root, v) for k, v in VG_CATALOG[base].items()}
    head = cfg.MODEL.ROI_RELATION_HEAD
    args.update(split=split, flip_aug=bool(cfg.MODEL.FLIP_AUG),
                custom_eval=bool(cfg.TEST.CUSTUM_EVAL), custom_path=cfg.TEST.CUSTUM_PATH,
                num_val_im=int(_cfg(cfg.DATASETS, 'NUM_VAL_IM', DEFAULT_NUM_VAL_IM)))
    # relation training filters; a detector pretraining (RELATION_ON False) keeps every image
    args['filter_non_overlap'] = bool((not head.USE_GT_BOX) and cfg.MODEL.RELATION_ON
                                      and head.REQUIRE_BOX_OVERLAP)
    args['filter_empty_rels'] = bool(cfg.MODEL.RELATION_ON)
    return args


def build_dataset(cfg, dataset_list, transforms, is_train=True, data_dir=None):
    """The datasets of ``dataset_list`` (SGB's ``build_dataset``).

    Returns
    -------
    list of VGDataset
        One per name when testing; training concatenates them into one
        (:class:`ConcatDataset`).
    """
    if not isinstance(dataset_list, (list, tuple)):
        raise ValueError('dataset_list should be a list of strings, got {}'.format(dataset_list))
    datasets = [VGDataset(transforms=transforms, **dataset_args(cfg, name, data_dir))
                for name in dataset_list]
    if not is_train:
        return datasets
    return [ConcatDataset(datasets) if len(datasets) > 1 else datasets[0]]


def make_data_sampler(dataset, shuffle, distributed, rank=0, world_size=1, seed=0):
    """Index sampler: a rank's shard when ``distributed``, else seeded random or sequential."""
    if distributed:
        return DistributedSampler(dataset, world_size, rank, shuffle=shuffle, seed=seed)
    if shuffle:
        return DistributedSampler(dataset, seed=seed)  # one replica: a seeded permutation
    return torch.utils.data.sampler.SequentialSampler(dataset)


def _aspect_groups(dataset, bins):
    """maskrcnn-benchmark's ``_quantize`` of each image's ``height / width`` into ``bins``."""
    bins = sorted(bins)
    infos = (dataset.get_img_info(i) for i in range(len(dataset)))
    return [bisect.bisect_right(bins, float(info['height']) / float(info['width']))
            for info in infos]


def make_batch_data_sampler(dataset, sampler, aspect_grouping, images_per_batch,
                            num_iters=None, start_iter=0, exact_resume=True):
    """Batches grouped by aspect ratio (height/width bins ``aspect_grouping``, e.g. ``[1]``),
    iteration-based when ``num_iters`` is given (SGB's ``make_batch_data_sampler``)."""
    if aspect_grouping:
        group_ids = _aspect_groups(dataset, aspect_grouping if isinstance(
            aspect_grouping, (list, tuple)) else [aspect_grouping])
        batch_sampler = GroupedBatchSampler(sampler, group_ids, images_per_batch,
                                            drop_uneven=False)
    else:
        batch_sampler = torch.utils.data.sampler.BatchSampler(sampler, images_per_batch,
                                                              drop_last=False)
    if num_iters is not None:
        batch_sampler = IterationBasedBatchSampler(batch_sampler, num_iters, start_iter,
                                                   exact_resume=exact_resume)
    return batch_sampler


def _loader(cfg, dataset, is_train, images_per_gpu, distributed, rank, world_size, seed,
            start_iter=0, num_workers=None, collator=None, exact_resume=True):
    """One dataset's loader: shuffled when training or sharded, aspect-ratio grouped
    (``DATALOADER.ASPECT_RATIO_GROUPING``), training iteration-based (``SOLVER.MAX_ITER``
    batches from ``start_iter``), evaluation one pass."""
    sampler = make_data_sampler(dataset, is_train or distributed, distributed, rank,
                                world_size, seed)
    batch_sampler = make_batch_data_sampler(
        dataset, sampler, [1] if cfg.DATALOADER.ASPECT_RATIO_GROUPING else [], images_per_gpu,
        cfg.SOLVER.MAX_ITER if is_train else None, start_iter if is_train else 0,
        exact_resume=exact_resume)
    # worker seeds from a seeded generator: the same run twice gets the same augmentation
    generator = torch.Generator()
    generator.manual_seed(seed + start_iter)
    return torch.utils.data.DataLoader(
        dataset, batch_sampler=batch_sampler, generator=generator,
        num_workers=cfg.DATALOADER.NUM_WORKERS if num_workers is None else num_workers,
        collate_fn=collator or BatchCollator(cfg.DATALOADER.SIZE_DIVISIBILITY))


def make_loader(cfg, dataset, is_train, start_iter=0, images_per_batch=None,
                num_workers=None):
    """The recipe's loader of one dataset (:func:`make_data_loader`'s, this process's rank
    and world size from ``torch.distributed``): aspect-ratio grouped batches; training
    iteration-based (``SOLVER.MAX_ITER`` batches, seeded shuffles, exact from
    ``start_iter``), evaluation one pass.

    Parameters
    ----------
    cfg : yacs.config.CfgNode
    dataset : VGDataset
    is_train : bool
    start_iter : int
    images_per_batch : int, optional
        All processes together (default ``SOLVER.IMS_PER_BATCH`` / ``TEST.IMS_PER_BATCH``).
    num_workers : int, optional
        Default ``DATALOADER.NUM_WORKERS``.

    Returns
    -------
    torch.utils.data.DataLoader
    """
    world = get_world_size()
    return _loader(cfg, dataset, is_train, _per_process(cfg, is_train, world, images_per_batch),
                   world > 1, get_rank(), world, max(cfg.SEED, 0), start_iter, num_workers)


def _per_process(cfg, is_train, world, images_per_batch=None):
    """Images per process of ``images_per_batch`` (default ``SOLVER.IMS_PER_BATCH`` /
    ``TEST.IMS_PER_BATCH``), which the ``world`` processes must divide."""
    key = 'SOLVER.IMS_PER_BATCH' if is_train else 'TEST.IMS_PER_BATCH'
    ims = images_per_batch or (cfg.SOLVER.IMS_PER_BATCH if is_train else cfg.TEST.IMS_PER_BATCH)
    if ims % world:
        raise ValueError('{} ({}) must be divisible by the number of processes ({}).'.format(
            key, ims, world))
    return ims // world


def save_labels(dataset_list, output_dir, rank=0):
    """Write ``output_dir/labels.json`` (class index -> name) from the main process."""
    if rank != 0:
        return
    ids_to_labels = {i: name for dataset in dataset_list
                     for i, name in getattr(dataset, 'categories', {}).items()}
    if ids_to_labels:
        os.makedirs(output_dir, exist_ok=True)
        atomic_write(os.path.join(output_dir, 'labels.json'),
                     lambda f: json.dump(ids_to_labels, f, indent=2), mode='w')


def make_data_loader(cfg, mode='train', is_distributed=False, start_iter=0, dataset_to_test=None,
                     rank=0, world_size=1, seed=0, data_dir=None, exact_resume=True):
    """SGB's ``make_data_loader``.

    Parameters
    ----------
    cfg : yacs.config.CfgNode
        Reads ``SOLVER.IMS_PER_BATCH``/``MAX_ITER`` (training), ``TEST.IMS_PER_BATCH``,
        ``TEST.BBOX_AUG.ENABLED``, ``TEST.CUSTUM_EVAL``, ``DATALOADER.*``, ``DATASETS.*``,
        ``INPUT.*``, ``OUTPUT_DIR``, ``DETECTED_SGG_DIR`` and what :func:`dataset_args` reads.
    mode : {'train', 'val', 'test'}
        Training gives one iteration-based loader of ``MAX_ITER`` batches per process; val
        and test a list of loaders (one per dataset), each one pass.
    is_distributed : bool
        Shard by ``rank``/``world_size`` (which must divide the batch sizes).
    start_iter : int
        Iterations already trained (resume).
    dataset_to_test : {'train', 'val', 'test', None}
        Which DATASETS list to load (default ``mode``).
    rank, world_size : int
        This process and the number of processes.
    seed : int
        Seed of the shuffle (each pass: ``seed +`` the iteration it starts at).
    data_dir : str, optional
        Overrides ``DATASETS.DATA_DIR``.
    exact_resume : bool
        See :class:`~.samplers.IterationBasedBatchSampler`.

    Returns
    -------
    torch.utils.data.DataLoader or list of DataLoader
        Batches ``(ImageList, targets, indices)``.
    """
    if mode not in ('train', 'val', 'test'):
        raise ValueError("mode must be 'train', 'val' or 'test', got {!r}".format(mode))
    if dataset_to_test not in ('train', 'val', 'test', None):
        raise ValueError('dataset_to_test must be train, val, test or None')
    dataset_to_test = dataset_to_test or mode
    is_train = mode == 'train'
    images_per_gpu = _per_process(cfg, is_train, world_size if is_distributed else 1)
    if not is_train:
        start_iter = 0
    dataset_list = {'train': cfg.DATASETS.TRAIN, 'val': cfg.DATASETS.VAL,
                    'test': cfg.DATASETS.TEST}[dataset_to_test]
    bbox_aug = (not is_train) and cfg.TEST.BBOX_AUG.ENABLED
    transforms = None if bbox_aug else build_transforms(cfg, is_train)
    datasets = build_dataset(cfg, dataset_list, transforms, is_train, data_dir=data_dir)
    if is_train:
        save_labels(datasets, cfg.OUTPUT_DIR, rank)
    data_loaders = []
    for dataset in datasets:
        collator = BBoxAugCollator() if bbox_aug else None
        data_loaders.append(_loader(cfg, dataset, is_train, images_per_gpu, is_distributed,
                                    rank, world_size, seed, start_iter, collator=collator,
                                    exact_resume=exact_resume))
        if cfg.TEST.CUSTUM_EVAL and rank == 0:
            info = {'idx_to_files': dataset.custom_files, 'ind_to_classes': dataset.ind_to_classes,
                    'ind_to_predicates': dataset.ind_to_predicates}
            os.makedirs(cfg.DETECTED_SGG_DIR, exist_ok=True)
            atomic_write(os.path.join(cfg.DETECTED_SGG_DIR, 'custom_data_info.json'),
                         lambda f, i=info: json.dump(i, f), mode='w')
    return data_loaders[0] if is_train else data_loaders
