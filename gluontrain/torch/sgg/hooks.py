"""The hooks of Scene-Graph-Benchmark's training loops (``tools/relation_train_net.py``,
``tools/detector_pretrain_net.py``) on gluontrain's loop: SGB's schedule calls
(:class:`SGBScheduleHook`), periodic ``model_{iter:07d}.pth`` / ``model_final.pth``
(:class:`SGBCheckpointHook`) and SGB's iteration log line (:class:`SGBLogHook`).

Reference order per iteration (relation_train_net.py:134-214): forward, backward, clip, step,
log, checkpoint, validation, ``scheduler.step``. Here validation and the schedule step run
before the checkpoint, so that the checkpoint holds the schedule after this iteration (SGB
never saves it; the weights written are the same). The detector tool steps its scheduler
before the forward (detector_pretrain_net.py, the pre-1.1 PyTorch order).

Fixes (docs/faithfulness.md): ``MAX_DECAY_STEP`` stops training and still writes
``model_final.pth`` (SGB ``break``s before it), the schedule is checkpointed.
"""
import collections
import datetime
import logging
import time

import torch

from ...core.hooks import hooks_state_dict
from ...core.loop import Hook
from ...core.lr_scheduler import ScheduleHook

__all__ = ['SGBScheduleHook', 'SGBCheckpointHook', 'SGBLogHook', 'LOG_PERIOD']

#: SGB logs its iteration line every 200 iterations and at the last one.
LOG_PERIOD = 200

_LOG = logging.getLogger('gluontrain.sgg')


class SGBScheduleHook(ScheduleHook):
    """SGB's scheduler calls, on the core's
    :class:`~gluontrain.core.lr_scheduler.ScheduleHook`.

    ``WarmupMultiStepLR``: ``step()`` after every iteration (relation) or before it
    (detector, ``before=True``). ``WarmupReduceLROnPlateau``: ``step(val_result,
    epoch=iteration)`` after every iteration, ``val_result`` the validation of this iteration
    (None without one); once ``stage_count >= MAX_DECAY_STEP`` the run stops (SGB's ``break``).
    Sits after the validation (``slot``), whose score the plateau schedule reads.
    """
    slot = 'after_validation'

    def __init__(self, scheduler, cfg, before=False, logger=None):
        self.plateau = cfg.SOLVER.SCHEDULE.TYPE == "WarmupReduceLROnPlateau"
        event = 'before_batch' if before and not self.plateau else 'after_batch'
        super().__init__(scheduler, event, (lambda state: (
            state.current if state.val_iteration == state.iteration else None,
            state.iteration)) if self.plateau else None)
        self.cfg, self.logger = cfg, logger or _LOG
        self.decay_stopped = False

    def after_batch(self, state):
        super().after_batch(state)
        if self.plateau and \
                self.schedule.stage_count >= self.cfg.SOLVER.SCHEDULE.MAX_DECAY_STEP:
            self.logger.info("Trigger MAX_DECAY_STEP at iteration %d.", state.iteration)
            self.decay_stopped = True
            state.stop('MAX_DECAY_STEP {} reached at iteration {}'.format(
                self.cfg.SOLVER.SCHEDULE.MAX_DECAY_STEP, state.iteration))


class SGBCheckpointHook(Hook):
    """``model_{iter:07d}.pth`` every ``CHECKPOINT_PERIOD`` iterations and ``model_final.pth``
    at ``MAX_ITER``, and also when the schedule stopped the run (fix: SGB writes none then).

    Parameters
    ----------
    checkpointer : .checkpoint.Checkpointer
    period : int
    max_iter : int
    schedule_hook : SGBScheduleHook, optional
    hooks : list of Hook
        The run's hooks, whose state goes into every checkpoint (set after the list is built).

    Sits after the schedule (``slot``), so a checkpoint holds the schedule's step.
    """
    slot = 'after_validation'

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
        if it == self.max_iter or getattr(self.schedule_hook, 'decay_stopped', False):
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
