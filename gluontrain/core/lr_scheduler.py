"""Every recipe's learning-rate schedule, framework-free (standard library only): pure factors,
one schedule, one hook.

- :class:`LRScheduler` and :class:`LRSequential`: GluonCV 0.10.5's, update for update in the same
  floating-point arithmetic (a pure function of the update count: to resume, call it with the
  restored count).
- The other references' factors, pure functions of the iteration (or epoch), and
  :class:`PlateauDecay` (SGB's, the one schedule with state).
- :class:`Schedule` (detectron2's ``LRMultiplier``) stepped by a :class:`ScheduleHook`: every
  PyTorch recipe's schedule (docs/recipes.md, "The recipes").
"""
import warnings
from math import cos, pi

from .loop import Hook

__all__ = ['LRScheduler', 'LRSequential', 'step_factor', 'period_factor', 'linear_factor',
           'poly_factor', 'burn_in_factor', 'warmup_factor', 'PlateauDecay', 'Schedule',
           'ScheduleHook']

MODES = ('constant', 'step', 'linear', 'poly', 'cosine')


class LRScheduler:
    r"""One learning-rate schedule over ``niters`` updates, as GluonCV's ``LRScheduler``.

    With :math:`N = niters - 1` and :math:`T = \min(\max(num\_update - offset, 0), N)`:
    ``constant``: ``base_lr``; ``step``: ``base_lr * step_factor ** #{s <= T}``; ``linear`` /
    ``poly`` / ``cosine``: ``target_lr + (base_lr - target_lr) * f`` with ``f`` ``1 - T / N``,
    that to the ``power``, or ``(1 + cos(pi * T / N)) / 2``.

    Parameters
    ----------
    mode : str
        One of ``'constant'``, ``'step'``, ``'linear'``, ``'poly'``, ``'cosine'``.
    nepochs, iters_per_epoch : int, default 0
        When their product is positive it replaces ``niters`` and ``step_epoch`` is converted
        to updates (``step_epoch`` is ignored otherwise, as in GluonCV).
    offset : int, default 0
        Updates before this schedule starts (:class:`LRSequential` sets it).
    step_iter, step_epoch : list of int, optional
        Updates (from ``offset``) or epochs at which ``step`` multiplies by ``step_factor``.
    baselr, targetlr : float, optional
        GluonCV's deprecated spellings, with its warning and precedence (docs/from_gluoncv.md,
        "GluonCV's own APIs").

    Attributes
    ----------
    learning_rate : float
        The value of the last call (``base_lr`` before the first).
    step : list of int or None
        The decay updates after the epoch conversion (GluonCV's name).

    Notes
    -----
    With ``niters == 1``, ``linear``, ``poly`` and ``cosine`` raise ``ZeroDivisionError`` (as
    GluonCV, naming the cause); with ``niters == 0`` they return ``target_lr``.

    Examples
    --------
    >>> schedule = LRScheduler('cosine', base_lr=0.1, niters=101)
    >>> schedule(0), schedule(50), schedule(100)
    (0.1, 0.05, 0.0)
    """

    def __init__(self, mode, base_lr=0.1, target_lr=0, niters=0, nepochs=0, iters_per_epoch=0,
                 offset=0, power=2, step_iter=None, step_epoch=None, step_factor=0.1,
                 baselr=None, targetlr=None):
        if mode not in MODES:
            raise ValueError('unknown lr mode {!r}; use one of {}'.format(mode, ', '.join(MODES)))
        if mode == 'step' and step_iter is None and step_epoch is None:
            raise ValueError("lr mode 'step' needs step_iter or step_epoch")
        # GluonCV compares with the defaults, not with "was it passed": an explicit
        # base_lr=0.1 still loses to baselr. Same here, warnings included.
        if baselr is not None:
            warnings.warn('baselr is deprecated. Please use base_lr.')
            if base_lr == 0.1:
                base_lr = baselr
        if targetlr is not None:
            warnings.warn('targetlr is deprecated. Please use target_lr.')
            if target_lr == 0:
                target_lr = targetlr
        self.mode = mode
        self.base_lr = base_lr
        # constant is the linear formula with no distance to travel
        self.target_lr = base_lr if mode == 'constant' else target_lr
        self.niters = niters
        self.step = step_iter
        if nepochs * iters_per_epoch > 0:
            self.niters = nepochs * iters_per_epoch
            if step_epoch is not None:
                self.step = [epoch * iters_per_epoch for epoch in step_epoch]
        self.offset = offset
        self.power = power
        self.step_factor = step_factor
        self.learning_rate = base_lr

    def __call__(self, num_update):
        """Learning rate for update ``num_update`` (also stored in ``learning_rate``)."""
        self.update(num_update)
        return self.learning_rate

    def update(self, num_update):
        """Set ``learning_rate`` for update ``num_update`` (GluonCV's method name)."""
        last = self.niters - 1
        progress = min(max(0, num_update - self.offset), last)
        if self.mode == 'step':
            self.learning_rate = self.base_lr * step_factor(progress, self.step or (),
                                                            self.step_factor)
            return
        if self.mode == 'constant':
            factor = 0
        else:
            if last == 0:
                raise ZeroDivisionError(
                    "lr mode {!r} over niters=1 divides by niters - 1 = 0 (GluonCV fails the "
                    "same way); give the schedule at least 2 updates".format(self.mode))
            if self.mode == 'linear':
                factor = 1 - progress / last
            elif self.mode == 'poly':
                factor = pow(1 - progress / last, self.power)
            else:
                factor = (1 + cos(pi * progress / last)) / 2
        self.learning_rate = self.target_lr + (self.base_lr - self.target_lr) * factor

    def __repr__(self):
        return ('LRScheduler(mode={!r}, base_lr={}, target_lr={}, niters={}, offset={})'
                .format(self.mode, self.base_lr, self.target_lr, self.niters, self.offset))


class LRSequential:
    """Schedules one after the other, as GluonCV's ``LRSequential`` (e.g. warm-up, then decay).

    Each schedule's ``offset`` is overwritten with the sum of the ``niters`` before it. Update
    ``u``, clipped to ``count - 1``, goes to the first schedule whose end (``update_sep``) is
    greater than ``u``, else to the last. ``learning_rate`` is 0 before the first call.

    Examples
    --------
    >>> warmup = LRScheduler('linear', base_lr=0, target_lr=0.1, niters=10)
    >>> decay = LRScheduler('step', base_lr=0.1, niters=90, step_iter=[30, 60])
    >>> schedule = LRSequential([warmup, decay])
    >>> [round(schedule(u), 6) for u in (0, 5, 10, 40, 99)]
    [0.0, 0.055556, 0.1, 0.01, 0.001]
    """

    def __init__(self, schedulers):
        if not schedulers:
            raise ValueError('LRSequential needs at least one LRScheduler')
        self.update_sep = []
        self.count = 0
        self.learning_rate = 0
        self.schedulers = []
        for scheduler in schedulers:
            self.add(scheduler)

    def add(self, scheduler):
        """Append ``scheduler`` after the current ones (sets its ``offset``)."""
        if not isinstance(scheduler, LRScheduler):
            raise TypeError('LRSequential takes gluontrain.core.lr_scheduler.LRScheduler '
                            'objects, got {}'.format(type(scheduler).__name__))
        scheduler.offset = self.count
        self.count += scheduler.niters
        self.update_sep.append(self.count)
        self.schedulers.append(scheduler)

    def __call__(self, num_update):
        """Learning rate for update ``num_update`` (also stored in ``learning_rate``)."""
        self.update(num_update)
        return self.learning_rate

    def update(self, num_update):
        """Set ``learning_rate`` for update ``num_update`` (GluonCV's method name)."""
        num_update = min(num_update, self.count - 1)
        chosen = self.schedulers[-1]
        for end, scheduler in zip(self.update_sep, self.schedulers):
            # a zero-length schedule has end == its offset and so is never chosen
            if end > num_update:
                chosen = scheduler
                break
        chosen.update(num_update)
        self.learning_rate = chosen.learning_rate

    def __repr__(self):
        return 'LRSequential({!r})'.format(self.schedulers)


def step_factor(iteration, steps, gamma):
    """``gamma ** #{s in steps: s <= iteration}``: ssd.pytorch's ``lr_steps`` (counted, so
    that a resumed run needs no crossing count), seamseg's ``multistep`` and SGB's milestones
    (their ``bisect_right`` of the sorted steps)."""
    return gamma ** sum(1 for s in steps if s <= iteration)


def period_factor(iteration, step_size, gamma):
    """``gamma ** (iteration // step_size)``: seamseg's (PyTorch 1.0's) ``StepLR``."""
    return gamma ** (iteration // step_size)


def linear_factor(iteration, start, end, count):
    """``iteration * (end - start) / count + start``: seamseg's ``linear`` schedule."""
    return iteration * (float(end - start) / count) + start


def poly_factor(iteration, count, gamma):
    """``(1 - iteration / count) ** gamma``: seamseg's ``poly`` schedule."""
    return (1 - float(iteration) / count) ** gamma


def burn_in_factor(iteration, steps, start):
    """seamseg's burn-in, linear from ``start`` at 0 to 1 at ``steps`` (``None`` after it)."""
    if iteration > steps:
        return None
    return iteration * ((1. - start) / steps) + start


def warmup_factor(iteration, iters, factor, method):
    """SGB's warm-up: linear from ``factor`` to 1 over ``iters`` (``'linear'``) or ``factor``
    throughout (``'constant'``); 1 from ``iters`` on."""
    if iteration >= iters:
        return 1
    if method == "constant":
        return factor
    alpha = float(iteration) / iters
    return factor * (1 - alpha) + alpha


class PlateauDecay:
    """SGB's plateau decay: ``gamma ** stage_count``, ``stage_count`` raised when the validation
    score has not improved by more than ``threshold`` for ``patience`` validations (none counted
    during ``cooldown`` after a decay). Its attributes are its state."""

    def __init__(self, gamma=0.5, patience=2, threshold=1e-4, cooldown=1):
        self.gamma = gamma
        self.patience, self.threshold, self.cooldown = patience, threshold, cooldown
        self.stage_count = 0
        self.best = -1e12
        self.num_bad_epochs = 0
        self.under_cooldown = self.cooldown

    def record(self, metric):
        """Count one validation score (higher is better); True when it triggered a decay."""
        if float(metric) > self.best + self.threshold:
            self.best = float(metric)
            self.num_bad_epochs = 0
        else:
            self.num_bad_epochs += 1
        if self.under_cooldown > 0:
            self.under_cooldown -= 1
            self.num_bad_epochs = 0
        if self.num_bad_epochs < self.patience:
            return False
        self.stage_count += 1
        self.under_cooldown = self.cooldown
        self.num_bad_epochs = 0
        return True

    def decay(self):
        """The factor of the decays so far."""
        return self.gamma ** self.stage_count


def _scaled(base, factor):
    # a tuple of factors is applied left to right, as the reference writes the product
    # (base * warmup * decay rounds differently from base * (warmup * decay))
    for f in (factor if isinstance(factor, tuple) else (factor,)):
        base = base * f
    return base


class Schedule:
    """One rate per parameter group: ``base_lrs[g] * factor(last_epoch)`` (detectron2's
    ``LRMultiplier``), written through ``set_lrs(lrs)`` at every :meth:`step`.

    ``factor(index)`` returns a float or a tuple of floats (multiplied in order); subclasses
    override :meth:`factor` or pass it. ``last_epoch`` -1: no step yet. The state is every
    attribute but the setter, the factor and the names in ``_not_state``.
    """

    _not_state = ()

    def __init__(self, base_lrs, set_lrs, factor=None, last_epoch=-1):
        self.base_lrs = list(base_lrs)
        self.set_lrs = set_lrs
        if factor is not None:
            self.factor = factor
        self.last_epoch = last_epoch

    def factor(self, index):
        """The multiplier of the base rates at ``index``."""
        raise NotImplementedError

    def get_lr(self):
        """The rates at ``last_epoch``, one per parameter group."""
        factor = self.factor(self.last_epoch)
        return [_scaled(base, factor) for base in self.base_lrs]

    def step(self, epoch=None):
        """Set ``last_epoch`` (default: one more) and write its rates."""
        self.last_epoch = self.last_epoch + 1 if epoch is None else epoch
        self._apply()

    def _apply(self):
        self._last_lr = self.get_lr()
        self.set_lrs(self._last_lr)

    def get_last_lr(self):
        """The rates the last step set, one per parameter group."""
        return list(self._last_lr)

    def state_dict(self):
        """Every attribute but the setter and factor (plain numbers and lists)."""
        skip = ('set_lrs', 'factor') + self._not_state
        return {k: (list(v) if isinstance(v, tuple) else v)
                for k, v in self.__dict__.items() if k not in skip}

    def load_state_dict(self, state_dict):
        """Restore :meth:`state_dict` and write the rates again."""
        self.__dict__.update(state_dict)
        self._apply()


class ScheduleHook(Hook):
    """Steps a schedule (a :class:`Schedule`, or a PyTorch lr scheduler) at one event of
    :func:`gluontrain.core.loop.run_loop` (detectron2's ``LRScheduler`` hook).

    ``event``: ``'before_batch'`` (a step's rate set before it), ``'after_batch'`` (PyTorch's
    order) or ``'before_epoch'``; ``args(state) -> tuple`` is passed to ``schedule.step``
    (default ``()``: one more step).
    """

    def __init__(self, schedule, event='before_batch', args=None):
        if event not in ('before_batch', 'after_batch', 'before_epoch'):
            raise ValueError('ScheduleHook event must be before_batch, after_batch or '
                             'before_epoch, got {!r}'.format(event))
        self.schedule, self.event = schedule, event
        self.args = args or (lambda state: ())

    def step(self, state):
        """Step the schedule for ``state`` (at the hook's event)."""
        self.schedule.step(*self.args(state))

    def before_epoch(self, state):
        if self.event == 'before_epoch':
            self.step(state)

    def before_batch(self, state):
        if self.event == 'before_batch':
            self.step(state)

    def after_batch(self, state):
        if self.event == 'after_batch':
            self.step(state)
