"""Datasets and data loaders of the YOLOv3 recipe, as in GluonCV's ``train_yolo3.py``."""
import os

import mxnet as mx
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

from ...core.coco_eval import COCOEvaluator
from ...core.sharding import ShardedSampler, contiguous_shard
from ...yolo3.coco import COCO_DEFAULT_ROOT, coco_datasets, coco_json_datasets
from ...yolo3.formats import FORMATS, record_datasets
from ...yolo3.data import MixupDetection as NumpyMixupDetection
from ...yolo3.data import VOC_DEFAULT_ROOT, mixup_switch, set_mixup_switch, voc_folders
from ..image import imread_rgb
from .batchify import TrainBatchify, reference_train_batchify
from .fast_metric import FastVOC07MApMetric
from .fast_transform import FastYOLO3TrainTransform

__all__ = ['SharedMixupDetection', 'OpenCVDecoded', 'opencv_decoded', 'voc_metric',
           'NDArrayImages', 'COCOMetric', 'coco_metric', 'get_dataset', 'train_batchify_fn', 'val_batchify_fn', 'get_dataloader',
           'mixup_dataset', 'VOC_DEFAULT_ROOT', 'COCO_DEFAULT_ROOT']


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
        self._shared = mixup_switch()
        self.set_mixup(mixup, *args)

    def set_mixup(self, mixup=None, *args):
        """Set the mixup ratio sampler (``np.random.beta, a, b``) or disable it with ``None``."""
        set_mixup_switch(self._shared, mixup, args, 'SharedMixupDetection')
        super().set_mixup(mixup, *args)

    def __getitem__(self, idx):
        if self._shared[0]:
            self._mixup, self._mixup_args = np.random.beta, (self._shared[1], self._shared[2])
        else:
            self._mixup, self._mixup_args = None, ()
        return super().__getitem__(idx)


class OpenCVDecoded(gluon.data.Dataset):
    """A GluonCV VOC detection dataset (no transform set) whose images come as numpy arrays
    decoded by :func:`gluontrain.mx.image.imread_rgb`: the pixels of its ``mx.image.imread``,
    without the NDArray and its copy back to numpy. Items are ``(image [H, W, 3] uint8,
    label)`` as the dataset's own (the label copied, as it does).

    Parameters
    ----------
    dataset : gluoncv.data.VOCDetection or CustomVOCDetectionBase
    """

    def __init__(self, dataset):
        self._dataset = dataset

    def __len__(self):
        return len(self._dataset)

    def __getitem__(self, idx):
        d = self._dataset  # GluonCV's own fields, read as its __getitem__ reads them
        label = d._label_cache[idx] if d._label_cache else d._load_label(idx)
        return imread_rgb(d._image_path.format(*d._items[idx])), label.copy()


class NDArrayImages(gluon.data.Dataset):
    """A numpy detection dataset (:class:`gluontrain.yolo3.coco.COCODetection`) whose images
    come as ``mx.nd`` uint8 arrays, as GluonCV's readers give them to its transforms and
    ``MixupDetection``; other attributes (``coco``, ``classes``...) are the dataset's."""

    def __init__(self, dataset):
        self.dataset = dataset

    def __len__(self):
        return len(self.dataset)

    def __getitem__(self, idx):
        img, label = self.dataset[idx]
        return mx.nd.array(img, dtype='uint8'), label

    def __getattr__(self, name):
        if name == 'dataset':  # not set yet (unpickling): no recursion
            raise AttributeError(name)
        return getattr(self.dataset, name)


def opencv_decoded(dataset):
    """The numpy-image view of ``dataset`` for the fast transform: a GluonCV VOC dataset
    without a transform as :class:`OpenCVDecoded`, :class:`NDArrayImages` as the numpy
    dataset it wraps, a :class:`SharedMixupDetection` of either as the same blend of their
    numpy images (:class:`gluontrain.yolo3.data.MixupDetection`, reading the same switch:
    the same draws and bytes); else unchanged (GluonCV's own mixup blends NDArrays)."""
    if isinstance(dataset, NDArrayImages):
        return dataset.dataset
    if type(dataset) is SharedMixupDetection:  # pylint: disable=unidiomatic-typecheck
        images = opencv_decoded(dataset._dataset)
        if images is dataset._dataset:
            return dataset
        mixed = NumpyMixupDetection(images)
        mixed._shared = dataset._shared  # the recipe's set_mixup switches this one
        return mixed
    plain = type(dataset) is gdata.VOCDetection or \
        isinstance(dataset, gdata.CustomVOCDetectionBase)
    return OpenCVDecoded(dataset) if plain and dataset._transform is None else dataset


def voc_metric(class_names, args):
    """VOC07 mAP at IoU 0.5: :class:`~.fast_metric.FastVOC07MApMetric`, or GluonCV's
    ``VOC07MApMetric`` with ``args.reference_metric`` (the same values)."""
    metric = VOC07MApMetric if getattr(args, 'reference_metric', False) else FastVOC07MApMetric
    return metric(iou_thresh=0.5, class_names=class_names)


class COCOMetric(COCOEvaluator):
    """:class:`gluontrain.core.coco_eval.COCOEvaluator` with GluonCV's batched ``update``
    (``pred_bboxes, pred_labels, pred_scores``: arrays or lists of arrays, NDArray or numpy,
    one row per image; the ground truth that follows is unused)."""

    def update(self, pred_bboxes, pred_labels, pred_scores, *args):  # pylint: disable=arguments-differ
        def as_numpy(a):
            parts = a if isinstance(a, (list, tuple)) else [a]
            return np.concatenate([p.asnumpy() if hasattr(p, 'asnumpy') else np.asarray(p)
                                   for p in parts], axis=0)
        for boxes, labels, scores in zip(*(as_numpy(a) for a in (pred_bboxes, pred_labels,
                                                                 pred_scores))):
            super().update(boxes, scores, labels)


def coco_metric(val_dataset, args):
    """COCO AP at ``--data-shape``: :class:`COCOMetric`, or GluonCV's
    ``COCODetectionMetric`` with ``args.reference_metric`` (the same numbers; it writes and
    removes a JSON file beside ``--save-prefix``)."""
    data_shape = (args.data_shape, args.data_shape)
    if not getattr(args, 'reference_metric', False):
        return COCOMetric(val_dataset, data_shape=data_shape)
    # gluoncv opens its json at once (a RuntimeError for a missing folder)
    os.makedirs(os.path.dirname(os.path.abspath(args.save_prefix + '_eval')), exist_ok=True)
    return COCODetectionMetric(val_dataset, args.save_prefix + '_eval', cleanup=True,
                               data_shape=data_shape)


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
    if name in ('voc', 'custom', 'synthetic'):
        root, train_splits, val_splits, classes = voc_folders(name, args)
        reader, kwargs = (gdata.VOCDetection, {}) if classes is None else \
            (gdata.CustomVOCDetectionBase, {'classes': classes})
        train_dataset = reader(root=root, splits=train_splits, **kwargs)
        val_dataset = reader(root=root, splits=val_splits, **kwargs)
        val_metric = voc_metric(val_dataset.classes, args)
    elif name in FORMATS:
        train, val, classes = record_datasets(name, args)
        train_dataset, val_dataset = NDArrayImages(train), NDArrayImages(val)
        val_metric = voc_metric(classes, args)
    elif name in ('coco', 'coco-json'):
        train_dataset, val_dataset = (NDArrayImages(d) for d in (
            coco_datasets if name == 'coco' else coco_json_datasets)(args))
        val_metric = coco_metric(val_dataset.dataset, args)
    else:
        raise NotImplementedError('Dataset: {} not implemented.'.format(dataset))
    if args.num_samples < 0:
        args.num_samples = len(train_dataset)
    if args.mixup:
        wrapper = MixupDetection if getattr(args, 'reference_mixup', False) \
            else SharedMixupDetection
        train_dataset = wrapper(train_dataset)
    return train_dataset, val_dataset, val_metric


def train_batchify_fn(reference=True):
    """Stack image and the five target arrays, pad the ground-truth boxes with -1: GluonCV's
    ``Tuple(Stack() x 6, Pad)``, or with ``reference=False`` the same arrays in one buffer
    (:class:`~.batchify.TrainBatchify`, for the fast transform's numpy samples)."""
    return reference_train_batchify() if reference else TrainBatchify()


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
    The fast transform reads its images through :func:`opencv_decoded` and its batches are
    made by :class:`~.batchify.TrainBatchify` (the same arrays, one buffer per batch); the
    reference transform gets GluonCV's dataset and batchify as they are.

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
    reference = getattr(args, 'reference_transform', False)
    transform = YOLO3DefaultTrainTransform if reference else FastYOLO3TrainTransform
    batchify = train_batchify_fn(reference)
    # the fast transform takes numpy images: decode them to numpy (the same pixels)
    images = train_dataset if reference else opencv_decoded(train_dataset)
    shard = None
    if comm is None:
        sampling = {'batch_size': batch_size, 'shuffle': True, 'last_batch': 'rollover'}
        val_sampling = {'shuffle': False}
    else:
        shard = ShardedSampler(len(train_dataset), comm.rank, comm.world_size, shuffle=True,
                               seed=args.seed)
        sampling = {'batch_sampler': gluon.data.BatchSampler(shard, batch_size, 'rollover')}
        val_sampling = {'sampler': contiguous_shard(len(val_dataset), comm.rank,
                                                    comm.world_size)}
    if args.no_random_shape:
        train_loader = gluon.data.DataLoader(
            images.transform(transform(data_shape, data_shape, net, mixup=args.mixup)),
            batchify_fn=batchify, num_workers=num_workers, **sampling)
    else:
        transform_fns = [transform(x * 32, x * 32, net, mixup=args.mixup) for x in range(10, 20)]
        train_loader = RandomTransformDataLoader(
            transform_fns, images, interval=10, batchify_fn=batchify,
            num_workers=num_workers, **sampling)
    val_loader = gluon.data.DataLoader(
        val_dataset.transform(YOLO3DefaultValTransform(data_shape, data_shape)), batch_size,
        batchify_fn=val_batchify_fn(), last_batch='keep', num_workers=num_workers,
        **val_sampling)
    # what train() needs from the loaders, public (gluon's loaders keep them private)
    train_loader.raw_dataset, val_loader.raw_dataset = train_dataset, val_dataset
    if shard is not None:
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
