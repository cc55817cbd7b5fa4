"""GluonCV's ``train_yolo3.py`` on PyTorch: ``get_net / train / validate / save_params / main``
(docs/faithfulness.md, "YOLOv3 on PyTorch: the training recipe")."""
import copy
import os
import random
import sys

import numpy as np
import torch

from ...core import checkpoint as ckpt_io, writers
from ...core.defaults import Restored, RunPaths, fit
from ...core.loop import TrainState
from ...core.lr_scheduler import LRScheduler, LRSequential
from ...yolo3.layout import find_pretrained_base
from ...yolo3.anchors import anchors_line, file_anchors
from ...yolo3.args import (RESUME_MUST_MATCH, check_common, check_resume_position,
                           check_weight_files, lr_schedule, net_name, parse_args, saved_args,
                           weights_to_load)
from ...yolo3.data import voc_folders
from ...yolo3.hooks import gluoncv_hooks
from ...yolo3.transfer import (ZOO_CLASSES, reuse_spec, reuse_summary, transfer_fix,
                                transfer_source)
from ..checkpoint import (get_torch_rng_states, restore_checkpoint, save_checkpoint,
                          set_torch_rng_states)
from ..distributed import (process_group, TorchComm, convert_sync_batchnorm, get_rank,
                           get_world_size, launch_local, unwrap_model, wrap_ddp)
from ..lr_scheduler import GluonLRScheduler
from ..parallel import get_devices
from ..step import mixed_precision
from .data import get_dataloader, get_dataset
from .hooks import DeviceLossMeter, recipe_hooks
from .model import eval_mode, get_yolov3
from .step import LOSS_NAMES, GluonSGD, YOLOv3Step, gluon_batchnorm, to_channels_last
from .weights import load_params, load_pretrained_base, save_params as write_params

__all__ = ['get_net', 'train', 'validate', 'save_params', 'main', 'get_lr_scheduler',
           'gluon_init', 'net_name']

WEIGHTS_FIX = ('pass a .params file written by a run with the same --network and --dataset '
               '(either backend, or a GluonCV model-zoo yolo3 .params), or a {prefix}_last.ckpt '
               'written by --backend torch to --resume')
# arguments of the MXNet recipe with no PyTorch meaning yet: refused, never ignored
_REFUSED = (('horovod', '--horovod is MXNet Horovod; on PyTorch start one process per GPU '
                        'with torchrun --nproc_per_node N'),
            ('reference_transform', '--reference-transform runs GluonCV\'s own transform '
                                    '(MXNet); drop it with --backend torch'),
            ('reference_metric', '--reference-metric runs GluonCV\'s own metric (MXNet); drop '
                                 'it with --backend torch'),
            ('reference_mixup', '--reference-mixup reproduces a GluonCV loader bug (MXNet); '
                                'drop it with --backend torch'),
            ('model_dir', '--model-dir is where MXNet exports its symbol; on PyTorch export '
                          'with torch.onnx (docs/faithfulness.md)'))


def gluon_init(net):
    """Gluon's default initialisation as GluonCV's ``net.initialize()`` draws it (from torch's
    generator): weights ``Uniform(-0.07, 0.07)``, biases and BatchNorm beta 0, gamma 1,
    running mean 0 and variance 1."""
    with torch.no_grad():
        for mod in net.modules():
            if isinstance(mod, torch.nn.Conv2d):
                mod.weight.uniform_(-0.07, 0.07)
                if mod.bias is not None:
                    mod.bias.zero_()
            elif isinstance(mod, torch.nn.modules.batchnorm._BatchNorm):
                mod.reset_parameters()
    return net


def get_net(args, ctx, reports=None):
    """The PyTorch YOLOv3 of ``--network`` / ``--dataset``, initialised as Gluon does, with the
    ImageNet base unless weights are given (its report lines into ``reports``), on ``ctx[0]``;
    returns ``(net, net)`` (docs/faithfulness.md, "YOLOv3 on PyTorch: the training recipe")."""
    resume = getattr(args, 'resume', '').strip()
    transfer = getattr(args, 'transfer', '').strip() and not resume
    weights_given = getattr(args, 'load_weights', '').strip() or resume or transfer
    pretrained_base = not getattr(args, 'no_pretrained_base', False) and not weights_given
    base_file = getattr(args, 'pretrained_base', '').strip()  # '': the model store's
    if pretrained_base:
        # no file and no download: fail before building
        find_pretrained_base(args.network, base_file)
    classes = [c for c in args.classes.split(',') if c] if net_name(args).endswith('_custom') \
        else None
    lines = []
    if transfer:
        net, lines = transferred_net(args, classes)
    else:
        net = gluon_init(get_yolov3(net_name(args), classes,
                                    anchors=getattr(args, 'anchors', None)))
    if pretrained_base:
        lines = load_pretrained_base(net, args.network, base_file)
    if reports is not None:
        reports.extend(lines)
    return net.to(ctx[0]), net.to(ctx[0])


def transferred_net(args, classes=None):
    """``--transfer``: the network the weights were trained for (its classes), loaded with a
    report, then GluonCV's ``reset_class`` to this run's classes (``classes``, else
    ``--dataset``'s); returns ``(net, report lines)``."""
    path, old_classes, source = transfer_source(args)
    new_classes = list(classes or ZOO_CLASSES[args.dataset.lower()])
    net = gluon_init(get_yolov3('yolo3_{}_custom'.format(args.network), old_classes,
                                anchors=getattr(args, 'anchors', None)))
    # the network keeps --anchors (the file's are reported when they differ)
    report = load_params(net, path, '--transfer', transfer_fix(args.network),
                         anchors='network')
    mapping = net.reset_class(new_classes, reuse_spec(args.reuse_classes, old_classes,
                                                      new_classes),
                              keep_box_rows=args.keep_box_rows)
    line = anchors_line(report.anchors, file_anchors(net.state_dict()))
    return net, [report.format(), reuse_summary(old_classes, new_classes, mapping, source,
                                                args.keep_box_rows)] + ([line] if line else [])


def save_params(net, best_map, current_map, epoch, save_interval, prefix):
    """GluonCV's ``save_params``, in MXNet's ``.params`` format (docs/recipes.md, the contract).
    """
    writers.save_best_and_interval(lambda path: write_params(net, path), best_map, current_map,
                                   epoch, save_interval, prefix, '.params')


@torch.no_grad()
def validate(net, val_data, ctx, eval_metric, comm=None):
    """GluonCV's ``validate`` (NMS 0.45 / top 400, boxes clipped): ``(names, values)``; under
    torchrun each rank runs its share and rank 0 scores them in dataset order."""
    records = []
    with eval_mode(unwrap_model(net)) as model:
        model.set_nms(nms_thresh=0.45, nms_topk=400)
        for data, label in val_data:
            ids, scores, boxes = model(data.to(ctx[0], next(model.parameters()).dtype))
            boxes = boxes.clamp(0, data.shape[2])
            ids, scores, boxes = (t.float().cpu().numpy() for t in (ids, scores, boxes))
            label = label.numpy()
            for b in range(ids.shape[0]):
                gt = label[b]
                keep = gt[:, 4] >= 0
                records.append((boxes[b], scores[b].ravel(), ids[b].ravel(), gt[keep, :4],
                                gt[keep, 4], gt[keep, 5] if gt.shape[1] > 5 else None))
    eval_metric.reset()
    if comm is None or comm.world_size == 1:
        for record in records:
            eval_metric.update(*record)
        return eval_metric.get()
    indices = list(val_data.sampler)
    gathered = comm.allgather_object(list(zip(indices, records)))
    result = None
    if comm.is_main:
        for _, record in sorted((p for part in gathered for p in part), key=lambda p: p[0]):
            eval_metric.update(*record)
        result = eval_metric.get()
    return comm.broadcast_object(result)


def get_lr_scheduler(args, num_batches):
    """GluonCV's schedule: linear warm-up from 0, then ``--lr-mode`` with its decays, over
    ``num_batches`` updates per epoch (:mod:`gluontrain.core.lr_scheduler`)."""
    return lr_schedule(args, num_batches, LRScheduler, LRSequential)


def param_groups(net, no_wd):
    """One group, or with ``--no-wd`` a second one of biases and BatchNorm gamma / beta
    (GluonCV's ``'.*beta|.*gamma|.*bias'``) with ``wd_mult`` 0."""
    if not no_wd:
        return [{'params': [p for p in net.parameters() if p.requires_grad]}]
    decay, free = [], []
    for mod in net.modules():
        for name, p in mod.named_parameters(recurse=False):
            bn = isinstance(mod, torch.nn.modules.batchnorm._BatchNorm)
            (free if bn or name == 'bias' else decay).append(p)
    return [{'params': decay}, {'params': free, 'wd_mult': 0.0}]


def train(net, train_data, val_data, eval_metric, ctx, args, comm=None, reports=()):
    """:func:`gluontrain.mx.yolo3.recipe.train` on PyTorch (same arguments, files and log; the
    checkpoint is a PyTorch one). Returns the final :class:`TrainState`."""
    comm = comm or TorchComm()
    device = ctx[0]
    net.to(device).train()
    channels_last = getattr(args, 'channels_last', False)
    if channels_last:
        to_channels_last(net)  # in place, before SGD holds the parameters
    if args.syncbn and comm.world_size > 1:
        net = convert_sync_batchnorm(net, device=device)
    gluon_batchnorm(net)
    train_net = wrap_ddp(net, device)
    batch_size = args.batch_size // comm.world_size
    sampler = train_data.batch_sampler
    num_batches = len(sampler.indices) // batch_size if sampler.indices is not None \
        else args.num_samples // args.batch_size
    optimizer = GluonSGD(param_groups(net, args.no_wd), lr=0.0, momentum=args.momentum,
                         weight_decay=args.wd, rescale_grad=1.0 / batch_size)
    resume = args.resume.strip()
    resuming = bool(resume) and ckpt_io.file_kind(resume) == ckpt_io.CHECKPOINT
    begin = 0 if resuming else args.start_epoch * num_batches
    scheduler = GluonLRScheduler(optimizer, get_lr_scheduler(args, num_batches),
                                 begin_update=begin)
    restored = _restore(resume, net, optimizer, scheduler, args) if resuming else None
    header = [str(args)] + list(reports) + ['resumed from {}'.format(resume)] * resuming
    autocast, scaler = mixed_precision(device, args.amp,
                                       dtype=getattr(args, 'amp_dtype', 'float16'))
    # one process without AMP: each weight updated as soon as its gradient is ready (the same
    # numbers; at most one gradient alive, 40 MiB less at the README job's peak)
    step = YOLOv3Step(train_net, optimizer, device, unwrap_model(net).num_class,
                      args.label_smooth, autocast, scaler,
                      update_in_backward=scaler is None and train_net is net,
                      channels_last=channels_last)
    hooks = _hooks(net, optimizer, scheduler, train_data, val_data, eval_metric, ctx, args,
                   header, comm, step)
    benchmark = torch.backends.cudnn.benchmark
    # --cudnn-benchmark: cuDNN times its algorithms once per input shape (docs/performance.md)
    torch.backends.cudnn.benchmark = benchmark or getattr(args, 'cudnn_benchmark', False)
    try:
        return fit(step, train_data, hooks, args.start_epoch, args.epochs,
                   TrainState(iteration=begin), comm=comm, restored=restored)
    finally:
        torch.backends.cudnn.benchmark = benchmark
        step.close()


def _restore(resume, net, optimizer, scheduler, args):
    """The checkpoint ``resume`` restored into the run, after the checks every YOLOv3 resume
    makes (this backend's file, the position, the arguments that must match)."""
    changes = []
    payload, state = restore_checkpoint(
        resume, net, optimizer, scheduler, hyper={'momentum': args.momentum,
                                                  'weight_decay': args.wd},
        check=lambda p: (ckpt_io.refuse_other_writer(p, resume, 'torch'),
                         check_resume_position(p['epoch'] + 1, args, resume),
                         changes.extend(ckpt_io.resume_changes(
                             saved_args(p['args']), args, RESUME_MUST_MATCH, resume))))
    state.resume_changes = changes
    return Restored(resume, payload, state)


def _hooks(net, optimizer, scheduler, train_data, val_data, eval_metric, ctx, args, header,
           comm, step=None):
    paths = RunPaths(args.save_prefix)
    return gluoncv_hooks(
        args, paths, DeviceLossMeter(LOSS_NAMES), header, len(train_data),
        recipe_hooks(train_data, args, scheduler, step),
        lambda: validate(net, val_data, ctx, eval_metric, comm),
        lambda *a: save_params(net, *a),
        lambda st, hooks_state: save_checkpoint(
            paths.last_checkpoint, net, optimizer, scheduler, st.epoch, st.iteration, st.best,
            args, extra={'hooks': hooks_state}),
        _samples_hook(net, val_data, ctx[0], args, paths),
        comm=comm, rank_state=(get_torch_rng_states, set_torch_rng_states))


def _samples_hook(net, val_data, device, args, paths):
    if not getattr(args, 'plots', True):
        return None
    from .plots import val_samples_hook  # pylint: disable=import-outside-toplevel
    return val_samples_hook(net, getattr(val_data, 'raw_dataset', None), paths.val_samples,
                            device, args.data_shape)


def get_contexts(args):
    """``[cuda:LOCAL_RANK]`` for ``--gpus`` ids, ``[cpu]`` for ``--gpus ''`` or ``--cpus N``:
    one device per process (:func:`main` starts them)."""
    devices = [torch.device('cpu')] if args.cpus else get_devices(args.gpus)
    world = get_world_size()
    if len(devices) > 1 and world == 1:
        raise ValueError('--gpus {} with --backend torch trains one process per GPU: run the '
                         'script itself (it starts them) or torchrun --nproc_per_node {}'
                         .format(args.gpus, len(devices)))
    if devices[0].type == 'cuda' and world > 1:
        local = int(os.environ.get('LOCAL_RANK', get_rank()))
        return [devices[local % len(devices)]]
    return devices[:1]


def processes_to_start(args):
    """How many processes a plain run of ``args`` starts: one per GPU of ``--gpus``, or
    ``--cpus N``; 1 (it trains itself) alone or under torchrun."""
    if os.environ.get('WORLD_SIZE'):
        world = int(os.environ['WORLD_SIZE'])
        if args.cpus > 1 and args.cpus != world:
            raise ValueError('--cpus {} under a launcher of {} processes: give --cpus {} or drop '
                             'it'.format(args.cpus, world, world))
        return 1
    if args.cpus:
        return args.cpus
    devices = get_devices(args.gpus)  # checks the ids, and names --gpus '' for the CPU
    return len(devices) if devices[0].type == 'cuda' else 1


def main(argv=None):
    """``train_yolo3.py``'s ``__main__`` on PyTorch: parse, check, seed, build, train."""
    args = parse_args(argv)
    args.backend = 'torch'  # this recipe is the torch backend, whatever the default says
    for name, why in _REFUSED:
        if getattr(args, name, None):
            raise ValueError(why)
    use_cuda = bool(args.gpus.strip()) and not args.cpus
    # a plain run: --gpus is checked (and named, with the CPU's '') before any start-up
    nproc = processes_to_start(args)
    if nproc > 1:
        # GluonCV's --gpus 0,1,2,3 (or --cpus N): one process per device, started here, after
        # what every rank would refuse alike is refused once
        check_common(args, not use_cuda, 1, nproc, 'PyTorch')
        check_weight_files(args, WEIGHTS_FIX)
        if args.dataset.lower() in ('voc', 'custom', 'synthetic'):
            voc_folders(args.dataset.lower(), copy.copy(args))
        argv = list(sys.argv[1:] if argv is None else argv)
        code = launch_local(nproc, ['train', 'yolo3', '--backend', 'torch'] + argv)
        if code:
            raise SystemExit(code)  # the ranks said why (rank 0 where a Ctrl-C stopped them)
        return TrainState()
    with process_group(use_cuda=use_cuda, final_barrier=False):
        ctx = get_contexts(args)
        comm = TorchComm()
        check_common(args, ctx[0].type == 'cpu', 1, comm.world_size, 'PyTorch')
        check_weight_files(args, WEIGHTS_FIX)
        random.seed(args.seed)
        np.random.seed(args.seed + comm.rank)
        torch.manual_seed(args.seed)
        args.save_prefix += '_'.join(('yolo3', args.network, args.dataset))
        train_dataset, val_dataset, eval_metric = get_dataset(args.dataset, args)
        reports = []
        net, async_net = get_net(args, ctx, reports)
        weights, argument = weights_to_load(args, ckpt_io.file_kind)
        if weights:
            reports.append(load_params(net, weights, argument, WEIGHTS_FIX,
                                       anchors='same').format())
        train_data, val_data = get_dataloader(async_net, train_dataset, val_dataset,
                                              args.data_shape, args.batch_size,
                                              args.num_workers, args)
        return train(net, train_data, val_data, eval_metric, ctx, args, comm, reports)
