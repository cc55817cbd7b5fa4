"""``train``, ``validate`` and ``save_params`` of the SSD300 recipe (ssd.pytorch's train.py and
eval.py), on gluontrain's loop and hooks.

ssd.pytorch trains by iterations: ``max_iter`` steps over a batch iterator, the LR divided by
10 (``gamma``) when the iteration index reaches each of ``lr_steps``, weights saved every 5000
iterations. Here the loop runs passes over the DataLoader (re-created each pass: the
reference never re-creates its iterator and dies with StopIteration after one epoch) with
the loop's own iteration budget (``run_loop(max_iter=...)``); :func:`ssd_schedule_hook` does
the LR steps, :class:`SSDIterationLogHook` the reference's log line and its periodic saves.
"""
import os
from functools import partial

import torch

from ...core import checkpoint as ckpt_io
from ...core.defaults import RunPaths, build_hooks
from ...core.hooks import get_logger, hooks_state_dict, restore_hooks_state
from ...core.distributed import RankStateHook, SetEpochHook
from ...core.loop import Hook, Period, TrainState, run_loop
from ...core.lr_scheduler import Schedule, ScheduleHook, step_factor
from ...core.meters import LossMeter
from ...core.writers import save_best_and_interval
from ..checkpoint import (get_torch_rng_states, restore_checkpoint, save_checkpoint,
                          save_weights, set_torch_rng_states)
from ..distributed import TorchComm, convert_sync_batchnorm, wrap_ddp
from ..lr_scheduler import optimizer_setter
from ..passes import PassPositionHook, preserved_rng
from ..step import LossDictStep, mixed_precision, to_device
from .detection import detections_in_pixels
from .model import load_ssd_weights, test_phase

LOSS_NAMES = ('loc_loss', 'conf_loss')

# what fixes the network or the meaning of the restored iteration count: a resume that
# changes one is refused; anything else (max_iter, lr, lr_steps, gamma, momentum,
# weight_decay, intervals) is honoured and logged
RESUME_MUST_MATCH = ('dataset', 'width_mult', 'batch_norm', 'batch_size')
# each rank has its own --local_rank; rank 0's is in the checkpoint
RESUME_IGNORED = ckpt_io.RESUME_IGNORED + ('local_rank',)


class SSDStep:
    """One SSD step: forward, MultiBoxLoss, backward, SGD update (ssd.pytorch's loop body),
    through :class:`gluontrain.torch.step.LossDictStep`.

    Returns ``{'losses': {'loc_loss': [(l, 1)], 'conf_loss': [(c, 1)]}, 'lr', 'batch_size'}``:
    one value per step, so the meters average per-iteration losses as ssd.pytorch's
    ``loc_loss += loss_l`` counters do. ``amp`` (``--amp``): float16 autocast + GradScaler
    on CUDA; on the CPU refused unless ``cpu_bf16`` (see :func:`..step.mixed_precision`).
    """

    def __init__(self, net, criterion, optimizer, device, amp=False, cpu_bf16=False):
        self.net, self.criterion, self.optimizer, self.device = net, criterion, optimizer, device
        autocast, scaler = mixed_precision(device, amp, cpu_bf16)
        self.step = LossDictStep(self.forward, optimizer, scaler=scaler, autocast=autocast)

    def forward(self, batch):
        """``({'loc_loss', 'conf_loss'}, batch size)`` of one batch."""
        # pinned host batches copy asynchronously to the GPU
        images, targets = to_device(batch, self.device,
                                    non_blocking=torch.device(self.device).type == 'cuda')
        loss_l, loss_c = self.criterion(self.net(images), targets)
        return dict(zip(LOSS_NAMES, (loss_l, loss_c))), images.shape[0]

    def __call__(self, batch, state=None):
        return self.step(batch, state)


def lr_at(iteration, base_lr, gamma, lr_steps):
    """ssd.pytorch's rate for the step with 0-based index ``iteration``.

    The reference increments ``step_index`` when ``iteration in lr_steps`` *before* that
    step, so the rate is ``base_lr * gamma ** #{s in lr_steps: s <= iteration}``
    (:func:`~gluontrain.core.lr_scheduler.step_factor`). Computing it from the iteration
    (instead of counting crossings) keeps it right after a resume, where the reference
    restarts ``step_index`` at 0.
    """
    return base_lr * step_factor(iteration, lr_steps, gamma)


def ssd_schedule_hook(optimizer, base_lr, gamma, lr_steps):
    """ssd.pytorch's LR steps (every rank): before step ``state.iteration`` every param group
    gets :func:`lr_at` (the core's :class:`~gluontrain.core.lr_scheduler.ScheduleHook` over a
    :class:`~gluontrain.core.lr_scheduler.Schedule` of base ``base_lr``)."""
    schedule = Schedule([base_lr] * len(optimizer.param_groups), optimizer_setter(optimizer),
                        partial(step_factor, steps=list(lr_steps), gamma=gamma))
    return ScheduleHook(schedule, 'before_batch', lambda state: (state.iteration,))


class SSDIterationLogHook(Hook):
    """ssd.pytorch's ``iter N || Loss: x ||`` line every ``log_interval`` steps and its
    weights file every ``save_interval`` steps (rank 0's: it writes)."""
    main_process_only = True

    def __init__(self, log_interval, save_interval, save_fn):
        self.log_interval, self.save_interval, self.save_fn = log_interval, save_interval, save_fn
        self.logger = get_logger()

    def after_batch(self, state):
        i = state.iteration - 1  # the reference's 0-based loop index of the finished step
        if self.log_interval and i % self.log_interval == 0:
            loss = sum(t for parts in state.outputs['losses'].values() for t, _ in parts)
            self.logger.info('iter {} || Loss: {:.4f} ||'.format(i, loss))
        if self.save_interval and i != 0 and i % self.save_interval == 0:
            self.save_fn(i)


def save_params(net, best_map, current_map, epoch, save_interval, prefix):
    """GluonCV-style weights files for the common interface: ``{prefix}_best.pth`` when the
    score beats ``best_map[0]`` (appending to ``{prefix}_best_map.log``) and
    ``{prefix}_{epoch:04d}_{map:.4f}.pth`` every ``save_interval`` (here: iterations)."""
    save_best_and_interval(lambda path: save_weights(path, net), best_map, current_map,
                           epoch, save_interval, prefix, '.pth')


def validate(net, val_data, ctx, eval_metric, comm=None):
    """VOC07 11-point mAP as ssd.pytorch's eval.py computes it.

    The net runs in test phase (softmax + Detect: conf 0.01, NMS 0.45, top 200); every
    detection with a positive score is scaled to its image's pixel size and shifted by +1
    (eval.py writes VOC's 1-based coordinates), and matched against the annotation's boxes.

    Parameters
    ----------
    val_data : iterable
        Batches ``(images, gts, sizes)`` from :class:`.recipe.VOCEvalDataset` via the loader:
        ``gts`` padded ``[B, M, 6]`` (x1, y1, x2, y2 as in the XML, label, difficult; -1 rows
        are padding), ``sizes`` ``[B, 2]`` (height, width).
    ctx : list of torch.device
    eval_metric : gluontrain.core.voc_eval.VOCEvaluator
    comm : gluontrain.core.distributed.Comm, optional
        In a distributed run each rank scores its share of the split (``val_data``'s sampler
        lists the dataset indices, a :class:`~gluontrain.torch.distributed.ShardSampler`);
        the per-image detections are gathered, put back in dataset order and scored on rank
        0, and every rank returns rank 0's result: the whole split's mAP, as one process.

    Returns
    -------
    (names, values)
        Class names + ['mAP'] and their APs.
    """
    eval_metric.reset()
    records = []
    with test_phase(net) as model:
        for images, gts, sizes in val_data:
            dets = model(images.to(ctx[0])).cpu().numpy()
            for b in range(dets.shape[0]):
                h, w = (float(v) for v in sizes[b])
                labels, scores, boxes = detections_in_pixels(dets[b], w, h)
                gt = gts[b].numpy()
                gt = gt[gt[:, 4] >= 0]
                # +1: eval.py writes VOC's 1-based pixel coordinates
                records.append((boxes + 1, scores, labels, gt[:, :4], gt[:, 4], gt[:, 5]))
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


def _validate_keeping_rng(net, val_data, ctx, eval_metric, comm=None):
    """:func:`validate` without moving any global generator (the validation loader's
    iterator draws from torch's), so the training after it, and a resume from a checkpoint
    written after it, continue as if it had not run."""
    with preserved_rng():
        return validate(net, val_data, ctx, eval_metric, comm)


def train(net, train_data, val_data, eval_metric, ctx, args):
    """ssd.pytorch's training loop on gluontrain's loop and hooks.

    Parameters
    ----------
    net : SSD
        From :func:`.model.build_ssd` in 'train' phase (weights initialised or loaded).
    train_data : DataLoader
        Batches ``(images [B,3,300,300], targets [B,M,5] padded with -1)``.
    val_data : DataLoader or None
        See :func:`validate`; ``None`` skips validation (COCO: ssd.pytorch has no COCO eval).
    eval_metric : VOCEvaluator or None
    ctx : list of torch.device
        Training runs on ``ctx[0]``: one device per process (alone on CUDA with several
        visible GPUs: ``DataParallel`` over all of them, as ssd.pytorch). Under ``torchrun``
        the net is wrapped in ``DistributedDataParallel`` (``--syncbn``: SyncBatchNorm
        first); rank 0 logs and writes every file, every rank validates its share of the
        split.
    args : argparse.Namespace
        From :func:`.args.parse_args`; ``args.cfg`` holds the config dict.

    Returns
    -------
    TrainState
    """
    from .multibox_loss import MultiBoxLoss  # pylint: disable=import-outside-toplevel
    from .plots import val_samples_hook  # pylint: disable=import-outside-toplevel
    cfg, device = args.cfg, ctx[0]
    comm = TorchComm()
    net.to(device)
    net.train()
    if getattr(args, 'syncbn', False):
        net = convert_sync_batchnorm(net, device=device)
    # the step trains the DDP wrapper (gradients averaged over ranks); validation, pictures
    # and files use the bare net
    train_net = wrap_ddp(net, device)
    if comm.world_size == 1 and device.type == 'cuda' and torch.cuda.device_count() > 1:
        # ssd.pytorch's train.py: one process, DataParallel over every visible GPU (the
        # loss keeps the first P of the priors DataParallel concatenates)
        train_net = torch.nn.DataParallel(net)
    optimizer = torch.optim.SGD(net.parameters(), lr=args.lr, momentum=args.momentum,
                                weight_decay=args.weight_decay)
    criterion = MultiBoxLoss(cfg['num_classes'], 0.5, True, 0, True, 3, 0.5, False,
                             device.type == 'cuda')
    if comm.is_main:
        os.makedirs(args.save_folder, exist_ok=True)
    paths = RunPaths(os.path.join(args.save_folder, 'ssd300_{}'.format(args.dataset)))
    meter = LossMeter(LOSS_NAMES)
    max_iter = args.max_iter or cfg['max_iter']
    lr_steps = [int(s) for s in args.lr_steps.split(',')] if args.lr_steps else cfg['lr_steps']

    def save_full(st, hooks_state):
        # at the end of a pass, or of the run (possibly inside a pass: PassPositionHook's
        # state holds how that pass was shuffled), so a resume replays the uninterrupted run
        return save_checkpoint(paths.last_checkpoint, net, optimizer, None, st.epoch,
                               st.iteration, st.best, args,
                               extra={'hooks': hooks_state, 'world_size': comm.world_size})

    batch_sampler = getattr(train_data, 'batch_sampler', None)
    recipe_hooks = [PassPositionHook(batch_sampler)]
    if comm.world_size > 1:
        recipe_hooks.append(SetEpochHook(batch_sampler))
    recipe_hooks += [
        ssd_schedule_hook(optimizer, args.lr, args.gamma, lr_steps),
        # the reference's periodic file (it names every dataset 'COCO'; here its own name)
        SSDIterationLogHook(args.log_interval, args.save_interval, lambda index: save_weights(
            '{}_{}.pth'.format(paths.prefix, index), net))]
    # what the weights files filled, at the top of the log: --basenet (get_net) and a
    # weights-only --resume, loaded here before the hooks copy the header (it draws no
    # random numbers; a checkpoint is restored after the hooks are built, as before)
    header = [str(args)] + [r.format() for r in getattr(net, 'load_reports', ())]
    resume_kind = ckpt_io.file_kind(args.resume) if args.resume else None
    if resume_kind == ckpt_io.TORCH_WEIGHTS:
        header.append(load_ssd_weights(net, args.resume).format())
    hooks = build_hooks(
        paths, meter, header=header, batch_size=args.batch_size, log_interval=0,
        num_batches=len(train_data), recipe_hooks=recipe_hooks,
        validate_fn=None if val_data is None else (
            lambda: _validate_keeping_rng(net, val_data, ctx, eval_metric, comm)),
        val_period=Period(iterations=args.val_interval, at_max_iter=True),
        save_params_fn=lambda best, current, index, interval: save_params(
            net, best, current, index, interval, paths.prefix),
        best_after='validation', checkpoint_fn=save_full,
        samples_hook=val_samples_hook(net, getattr(val_data, 'dataset', None),
                                      paths.val_samples, device),
        curves_title='ssd300 {} (x = passes over the data)'.format(args.dataset),
        tensorboard=args.tensorboard, tensorboard_interval=args.log_interval,
        comm=comm, rank_state=(get_torch_rng_states, set_torch_rng_states))
    state = TrainState(iteration=args.start_iter)
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

    if args.resume and resume_kind != ckpt_io.TORCH_WEIGHTS:
        kind, restored = ckpt_io.resume_or_load(
            args.resume, lambda p: restore_checkpoint(
                p, net, optimizer, check=lambda payload: check(payload, p)),
            lambda p: load_ssd_weights(net, p), ckpt_io.TORCH_WEIGHTS)
        if kind == ckpt_io.CHECKPOINT:
            payload, state = restored
            # every rank takes its own generators and data position (RankStateHook)
            restore_hooks_state(hooks, payload)
            # optimizer.load_state_dict brought back the checkpoint's hyper-parameters: the
            # ones typed now win (the LR is set per step from the arguments anyway)
            for group in optimizer.param_groups:
                group['momentum'], group['weight_decay'] = args.momentum, args.weight_decay
            # until this run writes its own, the resumed checkpoint is the last good one
            state.resumed_from = state.last_checkpoint = args.resume
            state.resume_changes = changes
    # a resumed run continues the pass it stopped in (its epoch index counts passes), from
    # the batch it stopped at (PassPositionHook replays the pass's order)
    start = state.iteration // max(len(train_data), 1)
    if state.resumed_from:
        state.resume_batch = state.iteration - start * len(train_data)
    state = run_loop(SSDStep(train_net, criterion, optimizer, device,
                             getattr(args, 'amp', False)),
                     train_data, hooks, start, None, state, max_iter=max_iter, comm=comm)
    if state.nonfinite:
        raise FloatingPointError(state.stop_reason)
    for hook in hooks:
        if isinstance(hook, RankStateHook):
            hook.collect()  # every rank's state at the end, for rank 0's last checkpoint
    if comm.is_main:
        # the reference's final file: save_folder + dataset + '.pth'
        save_weights(os.path.join(args.save_folder, args.dataset + '.pth'), net)
        state.last_checkpoint = save_full(state, hooks_state_dict(hooks))
    comm.barrier()
    return state
