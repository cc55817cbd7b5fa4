"""The SSD300 recipe (ssd.pytorch's train.py and eval.py) on gluontrain's loop and hooks
(docs/recipes.md, "The recipes"; docs/faithfulness.md, "SSD300 (amdegroot/ssd.pytorch, ...)").
"""
import os
import warnings

import torch

from ...core import checkpoint as ckpt_io
from ...core.argtypes import check_input_file, check_output_dir
from ...core.defaults import HookSpec, Restored, RunPaths, build_hooks, fit
from ...core.distributed import RankStateHook, SetEpochHook
from ...core.hooks import hooks_state_dict
from ...core.loop import Period, TrainState
from ...core.meters import LossMeter
from ...core.voc_eval import VOCEvaluator
from ...core.writers import save_best_and_interval
from ...data import checks
from ..batchify import Pad, Stack, Tuple
from ..checkpoint import (get_torch_rng_states, restore_checkpoint, save_checkpoint,
                          save_weights, set_torch_rng_states)
from ..distributed import (process_group, ShardSampler, TorchComm, convert_sync_batchnorm,
                           get_rank, get_world_size, wrap_ddp)
from ..optim import SGD
from ..parallel import get_devices
from ..passes import PassPositionHook, distributed_shuffled_loader, preserved_rng, shuffled_loader
from ..step import mixed_precision, seed_all
from .args import parse_args
from .config import MEANS, coco, voc
from .detection import detections_in_pixels, results_file_values
from .hooks import SSDCheckpointHook, SSDLogHook, SSDScheduleHook
from .model import load_ssd_weights, test_phase
from .step import LOSS_NAMES, SSDStep

# what fixes the network or the meaning of the restored iteration count: a resume that
# changes one is refused; anything else (max_iter, lr, lr_steps, gamma, momentum,
# weight_decay, intervals) is honoured and logged
RESUME_MUST_MATCH = ('dataset', 'width_mult', 'batch_norm', 'batch_size')
# each rank has its own --local_rank; rank 0's is in the checkpoint
RESUME_IGNORED = ckpt_io.RESUME_IGNORED + ('local_rank',)

VOC_DEFAULT_ROOT = os.path.join('~', 'data', 'VOCdevkit')
COCO_DEFAULT_ROOT = os.path.join('~', 'data', 'coco')


def get_dataset(dataset, args):
    """Training dataset (SSDAugmentation), validation dataset and metric: VOC2007+2012
    trainval and VOC2007 test (VOC07 mAP); COCO train2017 without validation."""
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
        metric = VOCEvaluator(val_dataset.classes, iou_thresh=0.5, use_07_metric=True,
                              score_sort='numpy')
        return train_dataset, val_dataset, metric
    if dataset == 'COCO':
        root = os.path.expanduser(args.dataset_root or COCO_DEFAULT_ROOT)
        checks.check_coco(root, 'instances_train2017')
        return COCODetection(root, 'train2017',
                             transform=SSDAugmentation(coco['min_dim'], MEANS)), None, None
    raise ValueError('--dataset {!r}: choose VOC or COCO'.format(dataset))


def get_dataloader(net, train_dataset, val_dataset, data_shape, batch_size, num_workers, args):
    """The shuffled training loader (resumable inside a pass; sharded under ``torchrun``,
    ``batch_size`` the global batch) and the eval loader; ``net`` and ``data_shape`` are
    ignored (docs/recipes.md; docs/distributed.md, "SSD300 (ssd.pytorch) with torchrun")."""
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
    if val_dataset is None:
        return train_loader, None
    # in dataset order; a distributed run gives each rank every WORLD_SIZE-th image
    sampler = ShardSampler(len(val_dataset), rank, world) if world > 1 else None
    return train_loader, torch.utils.data.DataLoader(
        val_dataset, batch_size, shuffle=False, sampler=sampler,
        collate_fn=Tuple(Stack(), Pad(pad_val=-1), Stack()), **options)


def loader_pins(args):
    """Whether the loaders pin memory: when training on CUDA (``--cuda`` with a device)."""
    return bool(getattr(args, 'cuda', False)) and torch.cuda.is_available()


def get_net(args, ctx):
    """SSD300 in train phase, the VGG base from ``--save_folder``/``--basenet`` (``''``: from
    scratch, docs/faithfulness.md "SSD300"); returns ``(net, net)``."""
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
    """``[cuda:LOCAL_RANK]`` when ``--cuda`` (with ``cudnn.benchmark``, as the reference), else
    CPU."""
    if args.cuda:
        if not torch.cuda.is_available():
            raise ValueError('--cuda true but torch sees no CUDA device; pass --cuda false to '
                             'train on the CPU')
        torch.backends.cudnn.benchmark = True
        return get_devices(str(getattr(args, 'local_rank', 0) or 0))
    return [torch.device('cpu')]


def check_syncbn(args, device):
    """Refuse ``--syncbn`` without ``--batch_norm true`` or on the CPU, before any data is read.
    """
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
    """Refuse (``ValueError``), before anything is read or built, an output folder that cannot
    be made and a ``--start_iter`` past the iteration budget."""
    if args.visdom:
        # an argument is honoured or refused, never ignored (docs/faithfulness.md, "SSD300")
        raise ValueError('--visdom true: gluontrain draws no visdom plots; drop --visdom (or '
                         'give --visdom false) and use --tensorboard DIR or the '
                         '{prefix}_curves.png picture the run writes')
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


def save_params(net, best_map, current_map, epoch, save_interval, prefix):
    """GluonCV's ``save_params`` with ``.pth`` files, indexed by iteration (docs/recipes.md)."""
    save_best_and_interval(lambda path: save_weights(path, net), best_map, current_map,
                           epoch, save_interval, prefix, '.pth')


def validate(net, val_data, ctx, eval_metric, comm=None, detections_of=None):
    """VOC07 11-point mAP as ssd.pytorch's eval.py computes it (docs/faithfulness.md, "SSD300":
    evaluation as ``eval.py``).

    Parameters
    ----------
    val_data : iterable
        Batches ``(images, gts [B, M, 6] padded with -1, sizes [B, 2] (height, width))``.
    ctx : list of torch.device
    eval_metric : gluontrain.core.voc_eval.VOCEvaluator
    comm : gluontrain.core.distributed.Comm, optional
        Each rank scores its ``ShardSampler`` share; rank 0 scores all in dataset order.
    detections_of : dict, optional
        ``{dataset index: None}``, filled with those images' pixel ``(labels, scores, boxes)``
        where this process scored them (the samples picture draws them).

    Returns
    -------
    (names, values)
        Class names + ['mAP'] and their APs.
    """
    eval_metric.reset()
    records = []
    if detections_of is not None:
        detections_of.update(dict.fromkeys(detections_of))  # nothing stale from a former call
        order = list(getattr(val_data, 'sampler', None) or range(len(val_data.dataset)))
    with test_phase(net) as model:
        for images, gts, sizes in val_data:
            dets = model(images.to(ctx[0])).cpu().numpy()
            for b in range(dets.shape[0]):
                h, w = (float(v) for v in sizes[b])
                labels, scores, boxes = detections_in_pixels(dets[b], w, h)
                if detections_of is not None:
                    index = order[len(records)]
                    if index in detections_of:
                        detections_of[index] = (labels, scores, boxes)
                gt = gts[b].numpy()
                gt = gt[gt[:, 4] >= 0]
                # what eval.py reads back from its results file: 1-based, rounded
                scores, boxes = results_file_values(scores, boxes)
                records.append((boxes, scores, labels, gt[:, :4], gt[:, 4], gt[:, 5]))
    if comm is None or comm.world_size == 1:
        for record in records:
            eval_metric.update(*record)
        return eval_metric.get()
    indices = list(val_data.sampler)
    if len(indices) != len(records):
        raise ValueError('validate: the evaluation loader gave {} images for {} sampled '
                         'indices; a distributed validation needs its sampler to list them'
                         .format(len(records), len(indices)))
    gathered = comm.allgather_object(list(zip(indices, records)))
    result = None
    if comm.is_main:
        # dataset order, as one process scores them (the metric breaks score ties by order)
        for _, record in sorted((pair for part in gathered for pair in part),
                                key=lambda pair: pair[0]):
            eval_metric.update(*record)
        result = eval_metric.get()
    return comm.broadcast_object(result)


def _validate_keeping_rng(net, val_data, ctx, eval_metric, comm=None, detections_of=None):
    """:func:`validate` without moving any global generator (the validation loader's
    iterator draws from torch's), so the training after it, and a resume from a checkpoint
    written after it, continue as if it had not run."""
    with preserved_rng():
        return validate(net, val_data, ctx, eval_metric, comm, detections_of)


def train(net, train_data, val_data, eval_metric, ctx, args):
    """ssd.pytorch's training loop on gluontrain's loop and hooks.

    Parameters
    ----------
    net : SSD
        In 'train' phase (weights initialised or loaded).
    train_data : DataLoader
        Batches ``(images [B,3,300,300], targets [B,M,5] padded with -1)``.
    val_data : DataLoader or None
        See :func:`validate`; ``None`` skips validation (COCO).
    eval_metric : VOCEvaluator or None
    ctx : list of torch.device
        Training runs on ``ctx[0]`` (DDP under ``torchrun``, else ``DataParallel`` over
        several visible GPUs).
    args : argparse.Namespace
        ``args.cfg`` holds the config dict.

    Returns
    -------
    TrainState
    """
    from .multibox_loss import MultiBoxLoss  # pylint: disable=import-outside-toplevel
    cfg, device = args.cfg, ctx[0]
    comm = TorchComm()
    net, train_net = _train_net(net, device, args, comm)
    optimizer = SGD(net.parameters(), lr=args.lr, momentum=args.momentum,
                    weight_decay=args.weight_decay)
    criterion = MultiBoxLoss(cfg['num_classes'], 0.5, True, 0, True, 3, 0.5, False,
                             device.type == 'cuda')
    if comm.is_main:
        os.makedirs(args.save_folder, exist_ok=True)
    paths = RunPaths(os.path.join(args.save_folder, 'ssd300_{}'.format(args.dataset)))

    def save_full(st, hooks_state):
        # at the end of a pass, or of the run (possibly inside a pass: PassPositionHook's
        # state holds how that pass was shuffled), so a resume replays the uninterrupted run
        return save_checkpoint(paths.last_checkpoint, net, optimizer, None, st.epoch,
                               st.iteration, st.best, args,
                               extra={'hooks': hooks_state, 'world_size': comm.world_size})

    # a weights-only --resume is loaded by _hooks, a checkpoint restored by _restore
    weights_only = bool(args.resume) and ckpt_io.file_kind(args.resume) == ckpt_io.TORCH_WEIGHTS
    hooks = _hooks(net, optimizer, train_data, val_data, eval_metric, ctx, args, paths,
                   save_full, comm, weights_only)
    restored = None if weights_only else _restore(args, net, optimizer, comm)
    state = fit(SSDStep(train_net, criterion, optimizer, device, getattr(args, 'amp', False)),
                train_data, hooks, args.start_iter // max(len(train_data), 1), None,
                TrainState(iteration=args.start_iter), max_iter=args.max_iter or cfg['max_iter'],
                comm=comm, restored=restored)
    for hook in hooks:
        if isinstance(hook, RankStateHook):
            hook.collect()  # every rank's state at the end, for rank 0's last checkpoint
    if comm.is_main:
        # the reference's final file: save_folder + dataset + '.pth'
        save_weights(os.path.join(args.save_folder, args.dataset + '.pth'), net)
        state.last_checkpoint = save_full(state, hooks_state_dict(hooks))
    comm.barrier()
    return state


def _train_net(net, device, args, comm):
    """``(net, train_net)``: the bare net (validation, pictures, files) and what the step
    trains: DDP, or alone on several GPUs ``DataParallel`` (the loss keeps the first P of the
    priors it concatenates)."""
    net.to(device)
    net.train()
    if getattr(args, 'syncbn', False):
        net = convert_sync_batchnorm(net, device=device)
    train_net = wrap_ddp(net, device)
    if comm.world_size == 1 and device.type == 'cuda' and torch.cuda.device_count() > 1:
        train_net = torch.nn.DataParallel(net)
    return net, train_net


def _hooks(net, optimizer, train_data, val_data, eval_metric, ctx, args, paths, save_full,
           comm, weights_only):
    """SSD's hooks (pass position, schedule, log line, periodic file) and the default ones."""
    from .plots import SAMPLE_IMAGES, val_samples_hook  # pylint: disable=import-outside-toplevel
    batch_sampler = getattr(train_data, 'batch_sampler', None)
    lr_steps = [int(s) for s in args.lr_steps.split(',')] if args.lr_steps \
        else args.cfg['lr_steps']
    recipe_hooks = [PassPositionHook(batch_sampler)]
    if comm.world_size > 1:
        recipe_hooks.append(SetEpochHook(batch_sampler))
    recipe_hooks += [
        SSDScheduleHook(optimizer, args.lr, args.gamma, lr_steps),
        SSDLogHook(args.log_interval),
        # the reference's periodic file (it names every dataset 'COCO'; here its own name)
        SSDCheckpointHook(args.save_interval, lambda index: save_weights(
            '{}_{}.pth'.format(paths.prefix, index), net))]
    # what the weights files filled, at the top of the log: --basenet (get_net) and a
    # weights-only --resume, loaded here before the hooks copy the header (it draws no
    # random numbers; a checkpoint is restored after the hooks are built)
    header = [str(args)] + [r.format() for r in getattr(net, 'load_reports', ())]
    if weights_only:
        header.append(load_ssd_weights(net, args.resume).format())
    # the samples picture's images: validation keeps their detections for it (an args
    # namespace built by hand, without --plots, draws them as the default does)
    plots = getattr(args, 'plots', True)
    pictured = dict.fromkeys(range(SAMPLE_IMAGES)) if plots else None
    spec = HookSpec(
        paths, LossMeter(LOSS_NAMES), header=header, batch_size=args.batch_size,
        log_interval=0, num_batches=len(train_data),
        validate=None if val_data is None else (
            lambda: _validate_keeping_rng(net, val_data, ctx, eval_metric, comm, pictured)),
        period=Period(iterations=args.val_interval, at_max_iter=True),
        save_params=lambda best, current, index, interval: save_params(
            net, best, current, index, interval, paths.prefix),
        best_after='validation', checkpoint=save_full,
        samples_hook=val_samples_hook(net, getattr(val_data, 'dataset', None),
                                      paths.val_samples, ctx[0], SAMPLE_IMAGES,
                                      detections=pictured) if plots else None,
        plots=plots,
        curves_title='ssd300 {} (x = passes over the data)'.format(args.dataset),
        tensorboard=args.tensorboard, tensorboard_interval=args.log_interval)
    return build_hooks(spec, recipe_hooks, comm=comm,
                       rank_state=(get_torch_rng_states, set_torch_rng_states))


def _restore(args, net, optimizer, comm):
    """``--resume``'s checkpoint restored after its checks (the same number of processes,
    :data:`RESUME_MUST_MATCH`); None without one (a weights file is :func:`_hooks`' to load).
    """
    if not args.resume:
        return None
    changes = []

    def check(payload, path):
        saved_world = (payload.get('extra') or {}).get('world_size', 1)
        if saved_world != comm.world_size:
            raise ValueError('{} was written by {} process(es) and this run has {}: resume it '
                             'with torchrun --nproc_per_node {} (the passes and every rank\'s '
                             'data position depend on it)'.format(
                                 path, saved_world, comm.world_size, saved_world))
        changes.extend(ckpt_io.resume_changes(payload['args'], args, RESUME_MUST_MATCH, path,
                                              ignored=RESUME_IGNORED))

    _, (payload, state) = ckpt_io.resume_or_load(
        args.resume, lambda p: restore_checkpoint(
            p, net, optimizer, check=lambda payload: check(payload, p),
            hyper={'momentum': args.momentum, 'weight_decay': args.weight_decay}),
        None, ckpt_io.TORCH_WEIGHTS)
    state.resume_changes = changes
    return Restored(args.resume, payload, state)


def main(argv=None):
    """ssd.pytorch's ``train.py`` as a function: parse, build, train; returns the TrainState
    (under ``torchrun``: docs/distributed.md, "SSD300 (ssd.pytorch) with torchrun")."""
    args = parse_args(argv)
    check_args(args)
    ctx = get_contexts(args)
    mixed_precision(ctx[0], args.amp)  # refuses --amp on the CPU before any data is read
    check_syncbn(args, ctx[0])
    with process_group(use_cuda=ctx[0].type == 'cuda', final_barrier=False):
        if args.seed is not None:
            seed_all(args.seed + get_rank())
        train_dataset, val_dataset, metric = get_dataset(args.dataset, args)
        net, async_net = get_net(args, ctx)
        train_data, val_data = get_dataloader(async_net, train_dataset, val_dataset,
                                              args.cfg['min_dim'], args.batch_size,
                                              args.num_workers, args)
        return train(net, train_data, val_data, metric, ctx, args)
