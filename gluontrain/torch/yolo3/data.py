"""Datasets and loaders of the YOLOv3 recipe on PyTorch: GluonCV's, read in numpy.

The items, labels, mixup, transforms and batch order are those of :mod:`gluontrain.yolo3`
(GluonCV's, drawing the same ``random`` / ``np.random`` numbers in the same order), so with
``-j 0`` the batches equal the MXNet recipe's up to OpenCV's resize rounding
(:func:`gluontrain.yolo3.transform.cv2_imresize`). The loaders are
``torch.utils.data.DataLoader``s with GluonCV's batchify (:mod:`gluontrain.torch.batchify`).
"""

import multiprocessing.reduction

import numpy as np
import torch

from ...core.coco_eval import COCOEvaluator
from ...core.voc_eval import VOCEvaluator
from ...data.classes import VOC_CLASSES
from ...yolo3.coco import coco_datasets, coco_json_datasets
from ...yolo3.formats import FORMATS, record_datasets
from ...yolo3.data import (VOC_DEFAULT_ROOT, MixupDetection, RolloverBatchSampler, SharedBuffers,
                           VOCDetection, field_views, map_shared, voc_folders)
from ...yolo3.transform import TrainTransform, ValTransform
from ..batchify import Pad, Stack, Tuple
from ..distributed import ShardSampler, get_rank, get_world_size
from .model import eval_mode

__all__ = ['get_dataset', 'get_dataloader', 'get_val_loader', 'network_layout', 'VOC_DEFAULT_ROOT']


def voc_metric(class_names):
    """GluonCV's ``VOC07MApMetric(iou_thresh=0.5)``: 11-point AP, IoU with the ``+1``."""
    return VOCEvaluator(class_names, iou_thresh=0.5, use_07_metric=True, plus_one=True)


def get_dataset(dataset, args):
    """Training and validation datasets and the metric, as
    :func:`gluontrain.mx.yolo3.get_dataset`: ``voc``, ``custom``, ``synthetic`` (VOC07 mAP)
    or ``coco`` (GluonCV's splits, :func:`gluontrain.yolo3.coco.coco_datasets`, and its COCO
    AP at ``--data-shape``, :class:`gluontrain.core.coco_eval.COCOEvaluator`). Sets
    ``args.num_samples`` (and ``args.classes`` for custom / synthetic) as the reference does."""
    name = dataset.lower()
    if name in ('coco', 'coco-json'):
        train_dataset, val_dataset = (coco_datasets if name == 'coco' else
                                      coco_json_datasets)(args)
        metric = COCOEvaluator(val_dataset, data_shape=(args.data_shape, args.data_shape))
    elif name in FORMATS:
        train_dataset, val_dataset, classes = record_datasets(name, args)
        metric = voc_metric(classes)
    elif name in ('voc', 'custom', 'synthetic'):
        root, train_splits, val_splits, classes = voc_folders(name, args)
        custom = classes is not None
        train_dataset = VOCDetection(root, train_splits, classes if custom else VOC_CLASSES,
                                     custom)
        val_dataset = VOCDetection(root, val_splits, classes if custom else VOC_CLASSES, custom)
        metric = voc_metric(val_dataset.classes)
    else:
        raise ValueError('--dataset {!r} is not supported'.format(dataset))
    if args.num_samples < 0:
        args.num_samples = len(train_dataset)
    if args.mixup:
        train_dataset = MixupDetection(train_dataset)
    return train_dataset, val_dataset, metric


def network_layout(net, width, height):
    """What GluonCV's train transform reads from the network run on zeros: ``num_class``,
    ``anchors``, ``offsets`` and ``feat_maps`` sizes per head (deep first), as numpy."""
    # train_outputs does not depend on the mode; eval keeps BatchNorm's statistics
    with torch.no_grad(), eval_mode(net) as model:
        param = next(model.parameters())
        out = model.train_outputs(torch.zeros(1, 3, height, width, dtype=param.dtype,
                                              device=param.device))
    return {'num_class': model.num_class,
            'anchors': [a.cpu().numpy() for a in out.anchors],
            'offsets': [o.cpu().numpy() for o in out.offsets],
            'feat_maps': [tuple(s) for s in out.feat_sizes]}


class _ShapeDataset(torch.utils.data.Dataset):
    """Items ``(index, shape index)`` through the transform of that shape."""

    def __init__(self, dataset, transforms):
        self.views = [dataset.transform(t) for t in transforms]
        self.length = len(dataset)

    def __len__(self):
        return self.length

    def __getitem__(self, key):
        if isinstance(key, tuple):
            return self.views[key[1]][key[0]]
        return self.views[0][key]


def train_collate():
    """Stack the image and the five targets, pad the ground-truth boxes with -1 (GluonCV's
    ``Tuple(Stack() x 6, Pad(axis=0, pad_val=-1))``, as :class:`TrainCollate`)."""
    return TrainCollate()


def _reference_collate():
    return Tuple(*([Stack() for _ in range(6)] + [Pad(axis=0, pad_val=-1)]))


#: this process's batch buffers when it is a loader worker
_BUFFERS = SharedBuffers()



def _mapped(dup_fd, size, shapes):
    """The main process's side of a worker's batch: the same pages, as seven tensors (the
    buffer goes back to the worker when they are all gone)."""
    return tuple(torch.from_numpy(f) for f in field_views(map_shared(dup_fd.detach(), size), shapes))


class _SharedBatch(tuple):
    """A worker's seven tensors in one :class:`~gluontrain.yolo3.data.SharedBuffers` buffer;
    sent (once) to the main process as that buffer's descriptor."""

    def __reduce__(self):
        return _mapped, (multiprocessing.reduction.DupFd(self.shared.fd), self.size,
                         self.shapes)


class TrainCollate:
    """:func:`train_collate`'s arrays written once, into one float32 buffer: in a loader worker
    a shared-memory one that the main process maps (no copy on either side; reused once the
    main process has let go of the batch), else plain memory. The same tensors (values,
    shapes, float32) as GluonCV's ``Tuple(Stack() x 6, Pad(axis=0, pad_val=-1))``, where
    torch's worker path copied the batch three times (stack, ``float32`` cast, into shared
    memory); samples that are not seven float32 numpy arrays with some box go through those
    functions."""

    def __init__(self):
        self._reference = _reference_collate()

    def __call__(self, samples):
        if not all(len(s) == 7 and all(isinstance(a, np.ndarray) and a.dtype == np.float32
                                       for a in s) for s in samples) or \
                max(s[6].shape[0] for s in samples) == 0:
            return self._reference(samples)
        n = len(samples)
        shapes = [(n,) + a.shape for a in samples[0][:6]]
        shapes.append((n, max(s[6].shape[0] for s in samples)) + samples[0][6].shape[1:])
        size = sum(int(np.prod(s)) for s in shapes)
        worker = torch.utils.data.get_worker_info() is not None
        flat, shared = _BUFFERS.get(size) if worker else (np.empty(size, np.float32), None)
        fields = field_views(flat, shapes)
        for k in range(6):
            for i, sample in enumerate(samples):
                fields[k][i] = sample[k]  # a shape that differs raises, as Stack's
        fields[6].fill(-1)
        for i, sample in enumerate(samples):
            fields[6][i, :sample[6].shape[0]] = sample[6]
        tensors = tuple(torch.from_numpy(f) for f in fields)
        if shared is None:
            return tensors
        batch = _SharedBatch(tensors)
        batch.shared, batch.size, batch.shapes = shared, size, shapes
        return batch


def val_collate():
    """Stack images, pad labels with -1."""
    return Tuple(Stack(), Pad(pad_val=-1))


def get_val_loader(val_dataset, data_shape, batch_size, num_workers=0, rank=0, world=1):
    """The validation loader: GluonCV's validation transform at ``data_shape``, in order
    (under ``torchrun`` every ``world``-th image from ``rank``), labels padded with -1."""
    val_view = val_dataset.transform(ValTransform(data_shape, data_shape))
    return torch.utils.data.DataLoader(
        val_view, batch_size, shuffle=False, collate_fn=val_collate(), num_workers=num_workers,
        sampler=ShardSampler(len(val_dataset), rank, world) if world > 1 else None)


def get_dataloader(net, train_dataset, val_dataset, data_shape, batch_size, num_workers, args):
    """Training and validation loaders, as :func:`gluontrain.mx.yolo3.get_dataloader`.

    Training: shuffled, ``rollover`` batches; random shapes 320..608 drawn every 10 batches
    (or ``data_shape`` with ``--no-random-shape``), the GluonCV train transform with the
    targets of ``net``'s layout. Validation: the GluonCV validation transform, in order.

    Under ``torchrun`` ``batch_size`` is the global batch (each process loads
    ``batch_size // WORLD_SIZE``); every rank shuffles, each pass, its own fixed shard (the
    indices ``rank, rank + world, ...``) with its own numpy generator (seeded ``--seed +
    rank``), and validates every ``WORLD_SIZE``-th image (untested beyond one process here).

    Returns
    -------
    (train_loader, val_loader)
        With ``raw_dataset`` attributes (the datasets before the transforms).
    """
    rank, world = get_rank(), get_world_size()
    if world > 1:
        batch_size //= world
    if args.no_random_shape:
        shapes = [data_shape]
    else:
        shapes = [x * 32 for x in range(10, 20)]
    transforms = [TrainTransform(s, s, network_layout(net, s, s), mixup=args.mixup)
                  for s in shapes]
    indices = None if world == 1 else np.arange(rank, len(train_dataset), world)
    sampler = RolloverBatchSampler(len(train_dataset), batch_size, shapes=len(shapes),
                                   interval=10, indices=indices)
    train_loader = torch.utils.data.DataLoader(
        _ShapeDataset(train_dataset, transforms), batch_sampler=sampler,
        collate_fn=train_collate(), num_workers=num_workers)
    val_loader = get_val_loader(val_dataset, data_shape, batch_size, num_workers, rank, world)
    train_loader.raw_dataset, val_loader.raw_dataset = train_dataset, val_dataset
    return train_loader, val_loader
