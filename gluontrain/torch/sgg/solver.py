"""Scene-Graph-Benchmark's optimizer, LR schedules and gradient clipping.

- :func:`make_optimizer`: SGB ``solver/build.py:7-26`` (one SGD param group per parameter,
  ``BIAS_LR_FACTOR`` / ``WEIGHT_DECAY_BIAS`` for names containing ``"bias"``, slow heads at
  ``lr / slow_ratio``, every rate times ``rl_factor``; relation_train_net passes
  ``rl_factor=float(IMS_PER_BATCH)`` and ``slow_ratio=10.0``, tools/relation_train_net.py:74).
- :class:`WarmupMultiStepLR`, :class:`WarmupReduceLROnPlateau`: SGB ``solver/lr_scheduler.py``
  with the same arithmetic (the plateau scheduler's construction-time ``step(0)`` included).
- :func:`clip_grad_norm`: SGB ``utils/checkpoint.py:152-191`` (global norm, clip coefficient
  ``max_norm / (total + 1e-6)``, per-parameter norms logged largest first when ``verbose``).

Both schedulers have a picklable ``state_dict`` that the recipe checkpoints (SGB saves
neither): docs/faithfulness.md, "Scene-graph training", "Deliberate differences"."""
import logging

from ...core.lr_scheduler import PlateauDecay, Schedule, step_factor, warmup_factor
from ..lr_scheduler import base_lrs, optimizer_setter
from ..optim import SGD

__all__ = ['make_optimizer', 'make_lr_scheduler', 'WarmupMultiStepLR',
           'WarmupReduceLROnPlateau', 'clip_grad_norm', 'SCHEDULES']

SCHEDULES = ('WarmupMultiStepLR', 'WarmupReduceLROnPlateau')


def _logger(logger):
    return logger if logger is not None else logging.getLogger(__name__)


def make_optimizer(cfg, model, logger=None, slow_heads=None, slow_ratio=5.0, rl_factor=1.0):
    """SGD with one param group per trainable parameter (group ``i`` the ``i``-th of
    ``named_parameters()``; frozen ones left out), as SGB's ``make_optimizer``.

    ``cfg``: reads ``SOLVER.BASE_LR``, ``WEIGHT_DECAY``, ``BIAS_LR_FACTOR``,
    ``WEIGHT_DECAY_BIAS``, ``MOMENTUM``; ``slow_heads``: name parts whose rate is divided by
    ``slow_ratio`` (IMP's feature extractors); ``rl_factor`` multiplies every rate.
    """
    log = _logger(logger)
    solver = cfg.SOLVER
    params = []
    for key, value in model.named_parameters():
        if not value.requires_grad:
            continue
        lr, weight_decay = solver.BASE_LR, solver.WEIGHT_DECAY
        if "bias" in key:
            lr, weight_decay = solver.BASE_LR * solver.BIAS_LR_FACTOR, solver.WEIGHT_DECAY_BIAS
        if any(item in key for item in slow_heads or ()):
            log.info("SLOW HEADS: %s is slow down by ratio of %s.", key, str(slow_ratio))
            lr = lr / slow_ratio
        params.append({"params": [value], "lr": lr * rl_factor, "weight_decay": weight_decay})
    if not params:
        raise ValueError('the model has no trainable parameter (all frozen): nothing to train')
    return SGD(params, lr=solver.BASE_LR, momentum=solver.MOMENTUM)


def _check_method(warmup_method):
    if warmup_method not in ("constant", "linear"):
        raise ValueError("SOLVER.WARMUP_METHOD must be 'constant' or 'linear', got {!r}"
                         .format(warmup_method))


class WarmupMultiStepLR(Schedule):
    """SGB's ``WarmupMultiStepLR``: ``base_lr * warmup * gamma ** bisect_right(milestones,
    last_epoch)``, ``warmup`` linear from ``warmup_factor`` to 1 over ``warmup_iters`` (or
    constant).

    Construction applies ``last_epoch = 0``; each :meth:`step` (once per iteration, after
    ``optimizer.step()``) advances it by one, so iteration ``i`` (1-based) trains at the rate
    of ``last_epoch = i - 1``. Its state is every attribute but the optimizer.
    """

    _not_state = ('optimizer', 'logger')

    def __init__(self, optimizer, milestones, gamma=0.1, warmup_factor=1.0 / 3,
                 warmup_iters=500, warmup_method="linear"):
        if list(milestones) != sorted(milestones):
            raise ValueError('SOLVER.STEPS must be increasing, got {}'.format(milestones))
        _check_method(warmup_method)
        self.milestones = list(milestones)
        self.gamma, self.warmup_factor = gamma, warmup_factor
        self.warmup_iters, self.warmup_method = warmup_iters, warmup_method
        self.optimizer = optimizer
        super().__init__(base_lrs(optimizer), optimizer_setter(optimizer))
        self.step()

    def factor(self, index):
        """``(warmup, decay)`` at ``index``, multiplied in SGB's order."""
        return (warmup_factor(index, self.warmup_iters, self.warmup_factor, self.warmup_method),
                step_factor(index, self.milestones, self.gamma))


class WarmupReduceLROnPlateau(Schedule, PlateauDecay):
    """SGB's ``WarmupReduceLROnPlateau``: the warmup of :class:`WarmupMultiStepLR` times
    ``gamma ** stage_count`` (:class:`~gluontrain.core.lr_scheduler.PlateauDecay`;
    ``SOLVER.SCHEDULE.*``).

    relation_train_net calls ``step(val_result, epoch=iteration)`` after every iteration
    (``val_result`` None except after a validation) and stops once
    ``stage_count >= MAX_DECAY_STEP``. ``last_epoch`` -1: a new run (SGB then calls
    ``step(0)``).
    """

    _not_state = ('optimizer', 'logger')

    def __init__(self, optimizer, gamma=0.5, warmup_factor=1.0 / 3, warmup_iters=500,
                 warmup_method="linear", last_epoch=-1, patience=2, threshold=1e-4,
                 cooldown=1, logger=None):
        _check_method(warmup_method)
        self.gamma, self.warmup_factor = gamma, warmup_factor  # SGB's attribute order
        self.warmup_iters, self.warmup_method = warmup_iters, warmup_method
        PlateauDecay.__init__(self, gamma, patience, threshold, cooldown)
        self.logger, self.optimizer = logger, optimizer
        Schedule.__init__(self, base_lrs(optimizer), optimizer_setter(optimizer),
                          last_epoch=0 if last_epoch == -1 else last_epoch)
        # SGB: self.step(last_epoch), i.e. metrics=0 and epoch=None (lr_scheduler.py:106)
        self.step(self.last_epoch)

    def factor(self, index):
        """``(warmup, decay)`` at ``index`` and ``stage_count``, multiplied in SGB's order."""
        return (warmup_factor(index, self.warmup_iters, self.warmup_factor, self.warmup_method),
                self.decay())

    def step(self, metrics, epoch=None):  # pylint: disable=arguments-renamed
        """Record one iteration ``epoch`` (default ``last_epoch + 1``) and, unless None, the
        validation score ``metrics`` (higher is better)."""
        self.last_epoch = self.last_epoch + 1 if epoch is None else epoch
        if metrics is not None and self.record(metrics):
            _logger(self.logger).info(
                "Trigger Schedule Decay, RL has been reduced by factor %s", self.gamma)
        self._apply()


def make_lr_scheduler(cfg, optimizer, logger=None):
    """SGB's ``make_lr_scheduler``: ``SOLVER.SCHEDULE.TYPE`` picks the schedule
    (``ValueError`` listing the valid ones for another)."""
    s = cfg.SOLVER
    if s.SCHEDULE.TYPE == "WarmupMultiStepLR":
        return WarmupMultiStepLR(optimizer, s.STEPS, s.GAMMA, warmup_factor=s.WARMUP_FACTOR,
                                 warmup_iters=s.WARMUP_ITERS, warmup_method=s.WARMUP_METHOD)
    if s.SCHEDULE.TYPE == "WarmupReduceLROnPlateau":
        return WarmupReduceLROnPlateau(
            optimizer, s.SCHEDULE.FACTOR, warmup_factor=s.WARMUP_FACTOR,
            warmup_iters=s.WARMUP_ITERS, warmup_method=s.WARMUP_METHOD,
            patience=s.SCHEDULE.PATIENCE, threshold=s.SCHEDULE.THRESHOLD,
            cooldown=s.SCHEDULE.COOLDOWN, logger=logger)
    raise ValueError('SOLVER.SCHEDULE.TYPE {!r} is not a schedule; use one of {}'.format(
        s.SCHEDULE.TYPE, ', '.join(SCHEDULES)))


def clip_grad_norm(named_parameters, max_norm, logger=None, clip=False, verbose=False):
    """SGB's ``clip_grad_norm`` (from neural-motifs): scale every gradient by
    ``max_norm / (total_norm + 1e-6)`` when that is below 1 and ``clip``; with ``verbose`` log
    the total norm, the coefficient and each gradient norm, largest first. Returns the total
    norm before clipping (0 when no parameter has a gradient)."""
    named_parameters = [(n, p) for n, p in named_parameters if p.grad is not None]
    norms = [p.grad.norm(2) for _, p in named_parameters]
    total_norm = sum(norm ** 2 for norm in norms) ** (1. / 2)
    clip_coef = float(max_norm) / (total_norm + 1e-6)
    if clip_coef < 1 and clip:
        for _, p in named_parameters:
            p.grad.mul_(clip_coef)
    if verbose:
        log = _logger(logger)
        log.info('---Total norm {:.5f} clip coef {:.5f}-----------------'.format(
            float(total_norm), float(clip_coef)))
        for (name, p), norm in sorted(zip(named_parameters, norms), key=lambda x: -x[1]):
            log.info("{:<50s}: {:.5f}, ({})".format(name, float(norm), p.size()))
        log.info('-------------------------------')
    return total_norm
