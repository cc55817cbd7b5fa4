"""Datasets and data loaders of the YOLOv3 recipe, as in GluonCV's ``train_yolo3.py``."""
import multiprocessing
import os
import xml.etree.ElementTree as ET

import numpy as np
from mxnet import gluon

# gluontrain.mx's __init__ has imported gluoncv through the shim, so these imports find it
from gluoncv import data as gdata
from gluoncv.data.batchify import Pad, Stack, Tuple
from gluoncv.data.dataloader import RandomTransformDataLoader
from gluoncv.data.mixup.detection import MixupDetection
from gluoncv.data.transforms.presets.yolo import YOLO3DefaultTrainTransform, YOLO3DefaultValTransform
from gluoncv.utils.metrics.coco_detection import COCODetectionMetric
from gluoncv.utils.metrics.voc_detection import VOC07MApMetric

from ...core.sharding import ShardedSampler, contiguous_shard
from ...data import checks
from ...yolo3.data import custom_root, custom_splits as _custom_splits, voc_class_names
from .fast_metric import FastVOC07MApMetric
from .fast_transform import FastYOLO3TrainTransform

VOC_DEFAULT_ROOT = os.path.join('~', '.mxnet', 'datasets', 'voc')
COCO_DEFAULT_ROOT = os.path.join('~', '.mxnet', 'datasets', 'coco')


class SharedMixupDetection(MixupDetection):
    """``MixupDetection`` whose on/off switch reaches DataLoader worker processes.

    GluonCV's loaders fork their worker pool when they are built, with the dataset captured, so
    ``set_mixup`` called later in the training loop only changes the parent's copy: with
    ``--num-workers > 0`` the reference never mixes. Here the switch and the Beta parameters
    live in shared memory created before the fork, and every ``__getitem__`` reads them.
    Only ``np.random.beta`` crosses processes (it is what the recipe uses); another sampler
    works in the main process and raises if workers would miss it.
    """

    def __init__(self, dataset, mixup=None, *args):
        super().__init__(dataset, mixup, *args)
        # [enabled, a, b]; a lock-free array: one writer (the training loop), readers in workers
        self._shared = multiprocessing.Array('d', 3, lock=False)
        self.set_mixup(mixup, *args)

    def set_mixup(self, mixup=None, *args):
        """Set the mixup ratio sampler (``np.random.beta, a, b``) or disable it with ``None``."""
        if mixup is None:
            self._shared[0] = 0.0
        elif mixup is np.random.beta and len(args) == 2:
            self._shared[0], self._shared[1], self._shared[2] = 1.0, float(args[0]), float(args[1])
        else:
            raise ValueError('SharedMixupDetection shares only np.random.beta(a, b) with worker '
                             'processes; got {!r}{}'.format(mixup, args))
        super().set_mixup(mixup, *args)

    def __getitem__(self, idx):
        if self._shared[0]:
            self._mixup, self._mixup_args = np.random.beta, (self._shared[1], self._shared[2])
        else:
            self._mixup, self._mixup_args = None, ()
        return super().__getitem__(idx)


def voc_metric(class_names, args):
    """VOC07 mAP at IoU 0.5: :class:`~.fast_metric.FastVOC07MApMetric`, or GluonCV's
    ``VOC07MApMetric`` with ``args.reference_metric`` (the same values)."""
    metric = VOC07MApMetric if getattr(args, 'reference_metric', False) else FastVOC07MApMetric
    return metric(iou_thresh=0.5, class_names=class_names)


def get_dataset(dataset, args):
    """Training and validation datasets and the validation metric.

    Parameters
    ----------
    dataset : str
        ``voc`` (07+12 trainval / 07 test, VOC07 mAP), ``coco`` (train2017 / val2017,
        COCO mAP), ``custom`` (a VOC-format folder with your classes, ``--classes``) or
        ``synthetic`` (the generated coloured-shapes set, VOC format, made on first use).
    args : argparse.Namespace
        Uses ``dataset_root``, ``classes``, ``save_prefix``, ``data_shape``, ``num_samples``,
        ``mixup``, ``reference_mixup``, ``reference_metric``; sets ``args.num_samples`` (and
        ``args.classes`` for custom/synthetic) as the reference does.

    Returns
    -------
    (train_dataset, val_dataset, val_metric)
    """
    name = dataset.lower()
    root = os.path.expanduser(args.dataset_root) if getattr(args, 'dataset_root', None) else None
    if name == 'voc':
        root = root or os.path.expanduser(VOC_DEFAULT_ROOT)
        train_splits, val_splits = [(2007, 'trainval'), (2012, 'trainval')], [(2007, 'test')]
        checks.check_voc(root, train_splits + val_splits)
        train_dataset = gdata.VOCDetection(root=root, splits=train_splits)
        val_dataset = gdata.VOCDetection(root=root, splits=val_splits)
        val_metric = voc_metric(val_dataset.classes, args)
    elif name == 'coco':
        root = root or os.path.expanduser(COCO_DEFAULT_ROOT)
        checks.check_coco(root, 'instances_train2017')
        checks.check_coco(root, 'instances_val2017')
        train_dataset = gdata.COCODetection(root=root, splits='instances_train2017',
                                            use_crowd=False)
        val_dataset = gdata.COCODetection(root=root, splits='instances_val2017', skip_empty=False)
        # the metric opens its json beside --save-prefix now (gluoncv raises a RuntimeError
        # for a missing folder); the other datasets' first file creates the folder later
        os.makedirs(os.path.dirname(os.path.abspath(args.save_prefix + '_eval')), exist_ok=True)
        val_metric = COCODetectionMetric(val_dataset, args.save_prefix + '_eval', cleanup=True,
                                         data_shape=(args.data_shape, args.data_shape))
    elif name in ('custom', 'synthetic'):
        root = custom_root(name, root)
        folders, train_splits, val_splits = _custom_splits(root)
        if getattr(args, 'classes', ''):
            classes = [c.strip() for c in args.classes.split(',') if c.strip()]
        else:
            try:
                classes = voc_class_names(folders)
            except (ET.ParseError, AttributeError):
                classes = None  # check_voc below reports the broken file
        checks.check_voc(root, train_splits + val_splits, classes=classes)
        args.classes = ','.join(classes)
        train_dataset = gdata.CustomVOCDetectionBase(classes=classes, root=root,
                                                     splits=train_splits)
        val_dataset = gdata.CustomVOCDetectionBase(classes=classes, root=root, splits=val_splits)
        val_metric = voc_metric(val_dataset.classes, args)
    else:
        raise NotImplementedError('Dataset: {} not implemented.'.format(dataset))
    if args.num_samples < 0:
        args.num_samples = len(train_dataset)
    if args.mixup:
        wrapper = MixupDetection if getattr(args, 'reference_mixup', False) \
            else SharedMixupDetection
        train_dataset = wrapper(train_dataset)
    return train_dataset, val_dataset, val_metric


def train_batchify_fn():
    """Stack image and the five target arrays, pad the ground-truth boxes with -1."""
    return Tuple(*([Stack() for _ in range(6)] + [Pad(axis=0, pad_val=-1) for _ in range(1)]))


def val_batchify_fn():
    """Stack images, pad labels with -1."""
    return Tuple(Stack(), Pad(pad_val=-1))


def get_dataloader(net, train_dataset, val_dataset, data_shape, batch_size, num_workers, args,
                   comm=None):
    """Training and validation loaders, as the reference builds them.

    Training uses random shapes 320..608 (every 10 batches) through
    ``RandomTransformDataLoader``, or ``data_shape`` with ``--no-random-shape``;
    ``last_batch='rollover'``. ``net`` (the ``async_net`` under SyncBN) is run once on zeros
    by each train transform to build the target generator. The transform is
    :class:`~.fast_transform.FastYOLO3TrainTransform` (the reference's arrays, computed in
    numpy) or, with ``args.reference_transform``, GluonCV's ``YOLO3DefaultTrainTransform``.

    With ``comm`` (``--horovod``; ``batch_size`` is then the per-rank batch) the training
    loader reads this rank's :class:`~gluontrain.core.sharding.ShardedSampler` shard (a new
    disjoint shard every epoch from ``args.seed``, still with rollover batches) and the
    validation loader this rank's :func:`~gluontrain.core.sharding.contiguous_shard`; the
    reference gives every rank the whole dataset (docs/faithfulness.md).

    Returns
    -------
    (train_loader, val_loader)
        Each with a ``raw_dataset`` attribute: the dataset before the transform (the
        ``MixupDetection`` wrapper for training), which the mixup schedule and the
        val-samples picture read. The sharded training loader also has ``shard_sampler``
        (for ``set_epoch``).
    """
    if comm is not None:
        return _sharded_dataloaders(net, train_dataset, val_dataset, data_shape, batch_size,
                                    num_workers, args, comm)
    width, height = data_shape, data_shape
    batchify_fn = train_batchify_fn()
    train_transform = YOLO3DefaultTrainTransform if getattr(args, 'reference_transform', False) \
        else FastYOLO3TrainTransform
    if args.no_random_shape:
        train_loader = gluon.data.DataLoader(
            train_dataset.transform(train_transform(width, height, net, mixup=args.mixup)),
            batch_size, True, batchify_fn=batchify_fn, last_batch='rollover',
            num_workers=num_workers)
    else:
        transform_fns = [train_transform(x * 32, x * 32, net, mixup=args.mixup)
                         for x in range(10, 20)]
        train_loader = RandomTransformDataLoader(
            transform_fns, train_dataset, batch_size=batch_size, interval=10,
            last_batch='rollover', shuffle=True, batchify_fn=batchify_fn,
            num_workers=num_workers)
    val_loader = gluon.data.DataLoader(
        val_dataset.transform(YOLO3DefaultValTransform(width, height)),
        batch_size, False, batchify_fn=val_batchify_fn(), last_batch='keep',
        num_workers=num_workers)
    # what train() needs from the loaders, public (gluon's loaders keep them private)
    train_loader.raw_dataset, val_loader.raw_dataset = train_dataset, val_dataset
    return train_loader, val_loader


def _train_transform(args):
    return YOLO3DefaultTrainTransform if getattr(args, 'reference_transform', False) \
        else FastYOLO3TrainTransform


def _sharded_dataloaders(net, train_dataset, val_dataset, data_shape, batch_size, num_workers,
                         args, comm):
    """:func:`get_dataloader` for one rank of several: the same transforms and batchify, the
    samples from this rank's shards."""
    shard = ShardedSampler(len(train_dataset), comm.rank, comm.world_size, shuffle=True,
                           seed=args.seed)
    batch_sampler = gluon.data.BatchSampler(shard, batch_size, 'rollover')
    transform = _train_transform(args)
    if args.no_random_shape:
        train_loader = gluon.data.DataLoader(
            train_dataset.transform(transform(data_shape, data_shape, net, mixup=args.mixup)),
            batch_sampler=batch_sampler, batchify_fn=train_batchify_fn(),
            num_workers=num_workers)
    else:
        transform_fns = [transform(x * 32, x * 32, net, mixup=args.mixup) for x in range(10, 20)]
        train_loader = RandomTransformDataLoader(
            transform_fns, train_dataset, interval=10, batch_sampler=batch_sampler,
            batchify_fn=train_batchify_fn(), num_workers=num_workers)
    val_loader = gluon.data.DataLoader(
        val_dataset.transform(YOLO3DefaultValTransform(data_shape, data_shape)), batch_size,
        sampler=contiguous_shard(len(val_dataset), comm.rank, comm.world_size),
        batchify_fn=val_batchify_fn(), last_batch='keep', num_workers=num_workers)
    train_loader.raw_dataset, val_loader.raw_dataset = train_dataset, val_dataset
    train_loader.shard_sampler = shard
    return train_loader, val_loader


def mixup_dataset(train_data):
    """The ``MixupDetection`` behind a training loader (its ``raw_dataset``, else found as
    the reference finds it)."""
    raw = getattr(train_data, 'raw_dataset', None)
    if raw is not None:
        return raw if hasattr(raw, 'set_mixup') else None
    try:
        return train_data._dataset if hasattr(train_data._dataset, 'set_mixup') \
            else train_data._dataset._data
    except AttributeError:
        return None
