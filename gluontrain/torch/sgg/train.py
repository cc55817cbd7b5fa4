"""Scene-Graph-Benchmark's ``tools/relation_train_net.py`` (seed 004) and
``tools/detector_pretrain_net.py`` training loops on gluontrain's loop and hooks.

:func:`do_train` is SGB's ``train()`` body for both tools: the step (:class:`SGGStep`: forward,
backward, SGB's ``clip_grad_norm`` with its per-parameter log, update), SGB's schedule calls
(:class:`ScheduleHook`), periodic ``model_{iter:07d}.pth`` / ``model_final.pth``
(:class:`PeriodicCheckpointHook`), SGB's iteration log line (:class:`SGBLogHook`) and
validation every ``VAL_PERIOD``; the engine adds progress, ``metrics.jsonl``, curves, the NaN
guard and TensorBoard. :func:`run_val` / :func:`run_test` are SGB's.

Reference order per iteration (relation_train_net.py:134-214): forward, backward, clip, step,
log, checkpoint, validation, ``scheduler.step``. Here validation and the schedule step run
before the checkpoint, so that the checkpoint holds the schedule after this iteration (SGB
never saves it; the weights written are the same). The detector tool steps its scheduler
before the forward (detector_pretrain_net.py, the pre-1.1 PyTorch order) and clips nothing;
``mode='detector'`` keeps both.

Fixes (docs/faithfulness.md): ``MAX_DECAY_STEP`` stops training and still writes
``model_final.pth`` (SGB ``break``s before it), the schedule is checkpointed, RNGs are seeded
and checkpointed, validation leaves every RNG where it was.
"""
import collections
import contextlib
import datetime
import logging
import os
import time

import torch

from ...core.hooks import hooks_state_dict
from ...core.loop import Hook
from ...core.lr_scheduler import ScheduleHook as CoreScheduleHook
from ..distributed import all_reduce_mean, get_rank, get_world_size, is_distributed
from .inference import inference, iou_types_of
from .modeling.model import fix_eval_modules
from .solver import clip_grad_norm

__all__ = ['fix_eval_modules', 'SGGStep', 'ScheduleHook',
           'PeriodicCheckpointHook', 'SGBLogHook', 'run_val', 'run_test', 'LOG_PERIOD']

#: SGB logs its iteration line every 200 iterations and at the last one.
LOG_PERIOD = 200

_LOG = logging.getLogger('gluontrain.sgg')


class SGGStep:
    """One SGB iteration: ``model(images, targets)`` -> loss dict, backward, optional
    ``clip_grad_norm`` at ``SOLVER.GRAD_NORM_CLIP`` (verbose at ``PRINT_GRAD_FREQ`` and the
    first iteration of the process, as SGB), ``optimizer.step()``.

    Parameters
    ----------
    model : torch.nn.Module
    optimizer : torch.optim.Optimizer
    cfg : yacs.config.CfgNode
    device : torch.device
    eval_modules : tuple of torch.nn.Module
        Frozen again after every ``model.train()`` (relation training); () for the detector.
    clip : bool
        Relation training clips; the detector tool does not.
    logger : logging.Logger, optional
    norm_eval : bool, default True
        Passed to :func:`fix_eval_modules` (``modeling.model.frozen_norm_eval(cfg)``: False
        when the frozen detector was never trained).
    autocast : callable, optional
        ``autocast() -> context manager`` around the forward (``DTYPE "float16"``: SGB's apex
        AMP O1 as torch's float16 autocast, :func:`gluontrain.torch.step.mixed_precision`).
    scaler : torch.amp.GradScaler, optional
        Dynamic loss scaling (apex O1's); gradients are unscaled before clipping.
    """

    def __init__(self, model, optimizer, cfg, device, eval_modules=(), clip=True, logger=None,
                 norm_eval=True, autocast=None, scaler=None):
        self.autocast, self.scaler = autocast, scaler
        self.model, self.optimizer, self.cfg, self.device = model, optimizer, cfg, device
        self.eval_modules, self.clip = tuple(eval_modules), clip
        self.norm_eval = norm_eval
        self.logger = logger or _LOG
        self.print_first_grad = True

    def __call__(self, batch, state):
        images, targets, image_ids = batch
        iteration = state.iteration + 1
        if any(len(t) < 1 for t in targets):
            self.logger.error("Iteration=%d || Image Ids used for training %s || targets "
                              "Length=%s", iteration, list(image_ids), [len(t) for t in targets])
        self.model.train()
        fix_eval_modules(self.eval_modules, self.norm_eval)
        images = images.to(self.device)
        targets = [t.to(self.device) for t in targets]
        with self.autocast() if self.autocast else contextlib.nullcontext():
            loss_dict = self.model(images, targets)
        losses = sum(loss.float() for loss in loss_dict.values())
        self.optimizer.zero_grad()
        if self.scaler is not None:
            self.scaler.scale(losses).backward()
            self.scaler.unscale_(self.optimizer)  # clip the true gradients, as apex does
        else:
            losses.backward()
        if self.clip:
            verbose = (iteration % self.cfg.SOLVER.PRINT_GRAD_FREQ) == 0 or \
                self.print_first_grad
            self.print_first_grad = False
            clip_grad_norm([(n, p) for n, p in self.model.named_parameters()
                            if p.requires_grad], max_norm=self.cfg.SOLVER.GRAD_NORM_CLIP,
                           logger=self.logger, verbose=verbose, clip=True)
        if self.scaler is not None:
            self.scaler.step(self.optimizer)  # skipped on inf/nan gradients, as apex O1
            self.scaler.update()
        else:
            self.optimizer.step()
        logged = all_reduce_mean(dict(loss_dict))
        logged = dict([('loss', sum(logged.values()))] + list(logged.items()))
        return {'losses': {k: [(v, 1)] for k, v in logged.items()},
                'lr': self.optimizer.param_groups[-1]['lr'], 'batch_size': len(targets)}


class ScheduleHook(CoreScheduleHook):
    """SGB's scheduler calls, on the core's
    :class:`~gluontrain.core.lr_scheduler.ScheduleHook`.

    ``WarmupMultiStepLR``: ``step()`` after every iteration (relation) or before it
    (detector, ``before=True``). ``WarmupReduceLROnPlateau``: ``step(val_result,
    epoch=iteration)`` after every iteration, ``val_result`` the validation of this iteration
    (None without one); once ``stage_count >= MAX_DECAY_STEP`` the run stops (SGB's ``break``).
    """

    def __init__(self, scheduler, cfg, before=False, logger=None):
        self.plateau = cfg.SOLVER.SCHEDULE.TYPE == "WarmupReduceLROnPlateau"
        if self.plateau:
            super().__init__(scheduler, 'after_batch', lambda state: (
                state.current if state.val_iteration == state.iteration else None,
                state.iteration))
        else:
            super().__init__(scheduler, 'before_batch' if before else 'after_batch')
        self.scheduler, self.cfg, self.before = scheduler, cfg, before
        self.logger = logger or _LOG
        self.decay_stopped = False

    def after_batch(self, state):
        super().after_batch(state)
        if self.plateau and \
                self.scheduler.stage_count >= self.cfg.SOLVER.SCHEDULE.MAX_DECAY_STEP:
            self.logger.info("Trigger MAX_DECAY_STEP at iteration %d.", state.iteration)
            self.decay_stopped = True
            state.stop('MAX_DECAY_STEP {} reached at iteration {}'.format(
                self.cfg.SOLVER.SCHEDULE.MAX_DECAY_STEP, state.iteration))


class PeriodicCheckpointHook(Hook):
    """``model_{iter:07d}.pth`` every ``CHECKPOINT_PERIOD`` iterations and ``model_final.pth``
    at ``MAX_ITER``, and also when the schedule stopped the run (fix: SGB writes none then).

    Parameters
    ----------
    checkpointer : .checkpoint.Checkpointer
    period : int
    max_iter : int
    schedule_hook : ScheduleHook, optional
    hooks : list of Hook
        The run's hooks, whose state goes into every checkpoint (set after the list is built).
    """

    def __init__(self, checkpointer, period, max_iter, schedule_hook=None):
        self.checkpointer, self.period, self.max_iter = checkpointer, period, max_iter
        self.schedule_hook = schedule_hook
        self.hooks = []

    def _save(self, name, state):
        path = self.checkpointer.save(name, hooks_state=hooks_state_dict(self.hooks),
                                      iteration=state.iteration)
        if path:
            state.last_checkpoint = path

    def after_batch(self, state):
        if state.nonfinite:
            return
        it = state.iteration
        if self.period and it % self.period == 0:
            self._save("model_{:07d}".format(it), state)
        decayed = self.schedule_hook is not None and self.schedule_hook.decay_stopped
        if it == self.max_iter or decayed:
            self._save("model_final", state)


class SGBLogHook(Hook):
    """SGB's line every :data:`LOG_PERIOD` iterations and at the last:
    ``eta: ..  iter: N  loss: median (global avg)  ...  lr: x  max mem: M`` (MetricLogger's
    20-iteration median and global average)."""

    def __init__(self, optimizer, max_iter, lr_group=-1, logger=None, period=LOG_PERIOD):
        self.optimizer, self.max_iter, self.lr_group = optimizer, max_iter, lr_group
        self.logger, self.period = logger or _LOG, period
        self.window = collections.defaultdict(lambda: collections.deque(maxlen=20))
        self.total = collections.defaultdict(lambda: [0.0, 0])
        self.end = None

    def before_batch(self, state):
        if self.end is None:
            self.end = time.time()

    def after_batch(self, state):
        now = time.time()
        values = {k: v[0][0] for k, v in state.outputs['losses'].items()}
        values['time'] = now - self.end
        self.end = now
        for k, v in values.items():
            self.window[k].append(v)
            self.total[k][0] += v
            self.total[k][1] += 1
        it = state.iteration
        if it % self.period == 0 or it == self.max_iter:
            meters = '  '.join('{}: {:.4f} ({:.4f})'.format(
                k, sorted(self.window[k])[(len(self.window[k]) - 1) // 2],
                self.total[k][0] / self.total[k][1]) for k in self.window)
            eta = self.total['time'][0] / self.total['time'][1] * (self.max_iter - it)
            mem = (torch.cuda.max_memory_allocated() / 1024.0 / 1024.0
                   if torch.cuda.is_available() else 0.0)
            self.logger.info('  '.join([
                'eta: {}'.format(datetime.timedelta(seconds=int(eta))), 'iter: {}'.format(it),
                meters, 'lr: {:.6f}'.format(self.optimizer.param_groups[self.lr_group]['lr']),
                'max mem: {:.0f}'.format(mem)]))


def _mean_over_ranks(score):
    """relation_train_net.py:264-268: gather each rank's result, mean of those >= 0."""
    if not is_distributed():
        return float(score)
    values = [None] * get_world_size()
    torch.distributed.all_gather_object(values, float(score))
    valid = [v for v in values if v >= 0]
    return float(sum(valid) / len(valid)) if valid else -1.0


def run_val(cfg, model, val_data_loaders, distributed=False, logger=None, zeroshot=None):
    """SGB's ``run_val``: evaluate every ``DATASETS.VAL`` loader, return the validation score
    (mean R@100 of the mode; box mAP for the detector), the same on every rank.

    zeroshot : list, optional
        Per dataset, the zero-shot triplets (array or file) for zR@K.

    Returns
    -------
    (float, dict)
        The score and rank 0's result dict of the last dataset.
    """
    model = model.module if hasattr(model, 'module') else model
    score, result = -1.0, {}
    zeroshot = zeroshot or [None] * len(val_data_loaders)
    for name, loader, zs in zip(cfg.DATASETS.VAL, val_data_loaders, zeroshot):
        score, result = inference(cfg, model, loader, dataset_name=name,
                                  iou_types=iou_types_of(cfg), device=cfg.MODEL.DEVICE,
                                  output_folder=None, logger=logger, zeroshot_triplet=zs)
    return _mean_over_ranks(score), result


def run_test(cfg, model, test_data_loaders, distributed=False, logger=None, zeroshot=None):
    """SGB's ``run_test``: evaluate every ``DATASETS.TEST`` loader, writing into
    ``OUTPUT_DIR/inference/<name>/`` (rank 0).

    Returns
    -------
    list of (float, dict)
        One ``(score, result_dict)`` per test dataset.
    """
    model = model.module if hasattr(model, 'module') else model
    out = []
    zeroshot = zeroshot or [None] * len(test_data_loaders)
    for name, loader, zs in zip(cfg.DATASETS.TEST, test_data_loaders, zeroshot):
        folder = None
        if cfg.OUTPUT_DIR:
            folder = os.path.join(cfg.OUTPUT_DIR, "inference", name)
            if get_rank() == 0:
                os.makedirs(folder, exist_ok=True)
        out.append(inference(cfg, model, loader, dataset_name=name,
                             iou_types=iou_types_of(cfg), device=cfg.MODEL.DEVICE,
                             output_folder=folder, logger=logger, zeroshot_triplet=zs))
    return out
