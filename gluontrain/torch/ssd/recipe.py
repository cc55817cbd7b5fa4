"""``get_dataset / get_dataloader / get_net / main`` of the SSD300 recipe (ssd.pytorch)."""
import os
import warnings

import numpy as np
import torch

from ...core.argtypes import check_input_file, check_output_dir
from ...core.voc_eval import VOCEvaluator
from ...data import checks
from ..batchify import Pad, Stack, Tuple
from ..distributed import (ShardSampler, cleanup, convert_sync_batchnorm, get_rank,
                           get_world_size, init_distributed)
from ..parallel import get_devices
from ..passes import distributed_shuffled_loader, shuffled_loader
from ..step import mixed_precision, seed_all
from .args import parse_args
from .config import MEANS, coco, voc

VOC_DEFAULT_ROOT = os.path.join('~', 'data', 'VOCdevkit')
COCO_DEFAULT_ROOT = os.path.join('~', 'data', 'coco')


def get_dataset(dataset, args):
    """Training dataset (SSDAugmentation), validation dataset and metric.

    VOC: VOC2007+2012 trainval for training, VOC2007 test with VOC07 11-point mAP (eval.py's
    protocol); COCO: train2017, and no validation (ssd.pytorch has no COCO evaluation).
    Writes nothing into ``args`` (the config dict is ``args.cfg``, derived from
    ``--dataset``).
    """
    from .augmentations import BaseTransform, SSDAugmentation  # noqa: E501  pylint: disable=import-outside-toplevel
    from ..data import COCODetection, VOCDetection, VOCEvalDataset  # noqa: E501  pylint: disable=import-outside-toplevel
    if dataset == 'VOC':
        root = os.path.expanduser(args.dataset_root or VOC_DEFAULT_ROOT)
        sets = [(2007, 'trainval'), (2012, 'trainval')]
        sets = [s for s in sets if os.path.isdir(os.path.join(root, 'VOC{}'.format(s[0])))] \
            or sets
        checks.check_voc(root, sets + [(2007, 'test')])
        train_dataset = VOCDetection(root, [(str(y), n) for y, n in sets],
                                     transform=SSDAugmentation(voc['min_dim'], MEANS))
        val_dataset = VOCEvalDataset(root, transform=BaseTransform(voc['min_dim'], MEANS))
        metric = VOCEvaluator(val_dataset.classes, iou_thresh=0.5, use_07_metric=True)
        return train_dataset, val_dataset, metric
    if dataset == 'COCO':
        root = os.path.expanduser(args.dataset_root or COCO_DEFAULT_ROOT)
        checks.check_coco(root, 'instances_train2017')
        return COCODetection(root, 'train2017',
                             transform=SSDAugmentation(coco['min_dim'], MEANS)), None, None
    raise ValueError('--dataset {!r}: choose VOC or COCO'.format(dataset))


def get_dataloader(net, train_dataset, val_dataset, data_shape, batch_size, num_workers, args):
    """Shuffled training loader (:func:`gluontrain.torch.passes.shuffled_loader`: the same
    draws and batches as ``shuffle=True``, resumable inside a pass) with gluontrain's ``Tuple(Stack(), Pad(pad_val=-1))``
    collation (ssd.pytorch's ``detection_collate`` is in :mod:`.data`), and the eval loader.

    ``net`` and ``data_shape`` are ignored (the contract allows it): the transforms were
    fixed to 300 x 300 by :func:`get_dataset` and need no network. The loaders' public
    ``dataset`` attributes are what :func:`.train.train` reads. Batches go to pinned memory
    when training on CUDA (``pin_memory=True`` as the reference; the step copies them with
    ``non_blocking``), and with ``--persistent_workers true`` and ``num_workers > 0`` the
    worker processes live across passes.

    Under ``torchrun`` (more than one process) ``batch_size`` stays the global batch, as
    ssd.pytorch's ``DataParallel`` splits ``--batch_size`` over its GPUs (and GluonCV's
    ``--horovod`` over its ranks): each process loads ``batch_size / WORLD_SIZE`` images a
    step (a batch size that does not divide is refused). The training loader deals each pass
    out in disjoint shards (:func:`~gluontrain.torch.passes.distributed_shuffled_loader`,
    seeded by ``--seed``, default 0) and the evaluation loader gives each rank every
    ``WORLD_SIZE``-th image (:class:`~gluontrain.torch.distributed.ShardSampler`; the
    detections are gathered for the mAP).
    """
    options = dict(num_workers=num_workers, pin_memory=loader_pins(args),
                   persistent_workers=bool(getattr(args, 'persistent_workers', False)) and
                   num_workers > 0)
    rank, world = get_rank(), get_world_size()
    train_collate = Tuple(Stack(), Pad(pad_val=-1))
    if world > 1:
        if batch_size % world:
            raise ValueError('--batch_size {} is the global batch and must be a multiple of the '
                             '{} processes (each loads batch_size / processes images a step)'
                             .format(batch_size, world))
        batch_size //= world
        seed = args.seed if getattr(args, 'seed', None) is not None else 0
        train_loader = distributed_shuffled_loader(train_dataset, batch_size, world, rank, seed,
                                                   collate_fn=train_collate, **options)
    else:
        # shuffle=True's sampler, wrapped so that a run can resume inside a pass
        train_loader = shuffled_loader(train_dataset, batch_size, collate_fn=train_collate,
                                       **options)
    val_options = dict(collate_fn=Tuple(Stack(), Pad(pad_val=-1), Stack()), **options)
    if val_dataset is None:
        val_loader = None
    elif world > 1:
        val_loader = torch.utils.data.DataLoader(
            val_dataset, batch_size, sampler=ShardSampler(len(val_dataset), rank, world),
            **val_options)
    else:
        val_loader = torch.utils.data.DataLoader(val_dataset, batch_size, shuffle=False,
                                                 **val_options)
    return train_loader, val_loader


def loader_pins(args):
    """Whether the loaders pin memory: when training on CUDA (``--cuda`` with a device)."""
    return bool(getattr(args, 'cuda', False)) and torch.cuda.is_available()


def get_net(args, ctx):
    """SSD300 in train phase: the VGG base from ``--basenet`` (in ``--save_folder``, as the
    reference looks for it), or with ``--basenet ''`` a VGG base initialised Kaiming-normal
    (fan_out, zero bias, as torchvision's VGG); Xavier-uniform extras and heads.
    ``--batch_norm true`` (from scratch only) puts a BatchNorm after every VGG16 conv.

    Returns ``(net, net)``: the contract's ``(net, async_net)`` pair (no SyncBN split here).
    """
    from .model import build_ssd, init_weights, load_base_weights  # noqa: E501  pylint: disable=import-outside-toplevel
    net = build_ssd('train', args.cfg['min_dim'], args.cfg['num_classes'],
                    width_mult=args.width_mult, batch_norm=args.batch_norm)
    init_weights(net)
    if not args.basenet:
        # The reference always loads an ImageNet base. From scratch, a 15-conv VGG without
        # BatchNorm barely moves from torch's default init; torchvision's VGG init
        # (Kaiming-normal, fan_out, zero bias) is the usual from-scratch choice.
        for m in net.vgg.modules():
            if isinstance(m, torch.nn.Conv2d):
                torch.nn.init.kaiming_normal_(m.weight, mode='fan_out', nonlinearity='relu')
                torch.nn.init.zeros_(m.bias)
    if args.basenet and args.batch_norm:
        raise ValueError("--batch_norm true needs --basenet '' (vgg16_reducedfc.pth is a VGG "
                         'without BatchNorm)')
    if args.basenet and not args.resume:
        load_base_weights(net, os.path.join(args.save_folder, args.basenet))
    return net.to(ctx[0]), net


def get_contexts(args):
    """``[cuda:LOCAL_RANK]`` when ``--cuda`` (``cuda:0`` alone; refusing clearly when there is
    no CUDA device), else CPU.

    On CUDA sets ``torch.backends.cudnn.benchmark = True`` as ssd.pytorch's train.py does
    (fixed 300 x 300 inputs: cuDNN's autotuned kernels pay off).
    """
    if args.cuda:
        if not torch.cuda.is_available():
            raise ValueError('--cuda true but torch sees no CUDA device; pass --cuda false to '
                             'train on the CPU')
        torch.backends.cudnn.benchmark = True
        return get_devices(str(getattr(args, 'local_rank', 0) or 0))
    return [torch.device('cpu')]


def check_syncbn(args, device):
    """Refuse ``--syncbn`` where it cannot work, before any data is read: without
    ``--batch_norm true`` there is no BatchNorm to synchronise, and on the CPU torch's
    SyncBatchNorm does not run."""
    if not getattr(args, 'syncbn', False):
        return
    if not args.batch_norm:
        raise ValueError('--syncbn needs --batch_norm true: the reference SSD (VGG16 without '
                         'BatchNorm) has no BatchNorm layer to synchronise')
    try:
        convert_sync_batchnorm(torch.nn.BatchNorm2d(1), device=device)
    except RuntimeError as e:
        raise ValueError('--syncbn: {}'.format(e)) from None


def check_args(args):
    """Refuse, before anything is read or built, an output folder that cannot be made and a
    ``--start_iter`` past the iteration budget (the reference trains nothing and exits 0).

    Raises
    ------
    ValueError
    """
    check_output_dir(args.save_folder, '--save_folder')
    if args.resume:
        check_input_file(args.resume, '--resume', 'pass the ssd300_{}_last.ckpt a run wrote in '
                         'its --save_folder, or a .pth state_dict'.format(args.dataset))
    max_iter = args.max_iter or args.cfg['max_iter']
    if args.start_iter >= max_iter:
        raise ValueError('--start_iter {} is not below the {} iterations to train ({}), so '
                         'nothing would be trained; lower --start_iter or raise --max_iter'
                         .format(args.start_iter, max_iter,
                                 '--max_iter' if args.max_iter else "the config's max_iter"))
    # 0 means "never" for these two (documented); said once, so a typo is never silent
    for flag, value, meaning in (('--save_interval', args.save_interval,
                                  'no ssd300_*_N.pth weights during training (the *_last.ckpt '
                                  'is still written at the end of every pass)'),
                                 ('--log_interval', args.log_interval, 'no log lines')):
        if value == 0:
            warnings.warn('{} 0: {}'.format(flag, meaning), stacklevel=2)


def main(argv=None):
    """ssd.pytorch's ``train.py`` as a function: parse, build, train; returns the TrainState.

    Under ``torchrun`` (``WORLD_SIZE > 1``) every process joins the process group (gloo on the
    CPU, nccl with ``--cuda true``, one GPU per process: ``LOCAL_RANK``), seeds its generators
    with ``--seed + rank`` (each rank draws its own augmentations; the weights are rank 0's,
    broadcast by DistributedDataParallel) and leaves the group at the end.
    """
    from .train import train  # pylint: disable=import-outside-toplevel
    args = parse_args(argv)
    check_args(args)
    if args.visdom:
        # reference command lines keep working; the curves come from --tensorboard and
        # {prefix}_curves.png instead (docs/faithfulness.md)
        warnings.warn('--visdom true is ignored: gluontrain has no visdom plots; use '
                      '--tensorboard DIR or the {prefix}_curves.png picture')
    ctx = get_contexts(args)
    mixed_precision(ctx[0], args.amp)  # refuses --amp on the CPU before any data is read
    check_syncbn(args, ctx[0])
    started = get_world_size() == 1 and init_distributed(
        use_cuda=ctx[0].type == 'cuda').world_size > 1
    try:
        if args.seed is not None:
            seed_all(args.seed + get_rank())
        train_dataset, val_dataset, metric = get_dataset(args.dataset, args)
        net, async_net = get_net(args, ctx)
        train_data, val_data = get_dataloader(async_net, train_dataset, val_dataset,
                                              args.cfg['min_dim'], args.batch_size,
                                              args.num_workers, args)
        return train(net, train_data, val_data, metric, ctx, args)
    finally:
        if started:
            cleanup()
