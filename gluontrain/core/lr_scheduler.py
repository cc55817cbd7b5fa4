"""Every recipe's learning-rate schedule, framework-free: pure factors, one schedule, one hook.

- :class:`LRScheduler` and :class:`LRSequential` reproduce ``gluoncv.utils.LRScheduler`` and
  ``gluoncv.utils.LRSequential`` (GluonCV 0.10.5) update for update, in the same floating-point
  arithmetic (a pure function of the update count: to resume, call it with the restored count).
- The factors of the other references, pure functions of the iteration (or epoch):
  :func:`step_factor` (ssd.pytorch's ``lr_steps``, seamseg's ``multistep``, SGB's
  milestones), :func:`period_factor`, :func:`linear_factor`, :func:`poly_factor`,
  :func:`burn_in_factor` (seamseg), :func:`warmup_factor` (SGB), and :class:`PlateauDecay`
  (SGB's plateau decay, the one schedule with state).
- :class:`Schedule` (detectron2's ``LRMultiplier``): every parameter group's rate is its base
  rate times ``factor(index)``, written through a backend setter; :class:`ScheduleHook`
  (detectron2's ``LRScheduler`` hook) steps it at one event of the loop. Every recipe's
  schedule is a :class:`Schedule` driven by a :class:`ScheduleHook`.

Only the standard library is used.
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

    - ``constant``: ``base_lr``;
    - ``step``: ``base_lr * step_factor ** k`` with ``k`` the number of steps ``s <= T``;
    - ``linear``: ``target_lr + (base_lr - target_lr) * (1 - T / N)``;
    - ``poly``: ``target_lr + (base_lr - target_lr) * (1 - T / N) ** power``;
    - ``cosine``: ``target_lr + (base_lr - target_lr) * (1 + cos(pi * T / N)) / 2``.

    Parameters
    ----------
    mode : str
        One of ``'constant'``, ``'step'``, ``'linear'``, ``'poly'``, ``'cosine'``.
    base_lr : float, default 0.1
        Learning rate at the start of the schedule.
    target_lr : float, default 0
        Learning rate at its end (ignored by ``constant`` and ``step``).
    niters : int, default 0
        Number of updates the schedule spans.
    nepochs, iters_per_epoch : int, default 0
        When their product is positive it replaces ``niters``, and ``step_epoch`` is converted
        to updates (``step_epoch`` is ignored otherwise, as in GluonCV).
    offset : int, default 0
        Updates before this schedule starts (:class:`LRSequential` sets it).
    power : float, default 2
        Exponent of ``poly``.
    step_iter : list of int, optional
        Updates (counted from ``offset``) at which ``step`` multiplies by ``step_factor``.
    step_epoch : list of int, optional
        The same in epochs; needs ``nepochs`` and ``iters_per_epoch``.
    step_factor : float, default 0.1
        Decay factor of ``step``.
    baselr, targetlr : float, optional
        GluonCV's deprecated spellings of ``base_lr`` and ``target_lr``, accepted with
        GluonCV's ``UserWarning`` ("baselr is deprecated. Please use base_lr.") and its
        precedence: the old name wins only while the new one still holds its default
        (``base_lr == 0.1``, ``target_lr == 0``), so passing both keeps the new one unless it
        equals that default.

    Attributes
    ----------
    learning_rate : float
        The value of the last call (``base_lr`` before the first).
    niters, offset : int
        As above, after the epoch conversion.
    step : list of int or None
        The decay updates (``step_iter``, or ``step_epoch`` converted), GluonCV's name.

    Notes
    -----
    ``linear``, ``poly`` and ``cosine`` divide by ``niters - 1``; with ``niters == 1`` GluonCV
    raises ``ZeroDivisionError`` at the first call and so does this class, naming the cause.
    With ``niters == 0`` (a zero-epoch warm-up) they return ``target_lr``, as GluonCV does;
    :class:`LRSequential` never dispatches to such a schedule unless all are empty.

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

    Each schedule's ``offset`` is set to the sum of the ``niters`` before it. Update ``u`` is
    first clipped to ``count - 1`` (``count`` = total ``niters``), then goes to the first
    schedule whose end (its offset plus niters) is greater than ``u``, or to the last one.

    Parameters
    ----------
    schedulers : list of LRScheduler
        In order; their ``offset`` is overwritten.

    Attributes
    ----------
    learning_rate : float
        The value of the last call (0 before the first, as GluonCV).
    count : int
        Total number of updates.
    schedulers : list of LRScheduler
    update_sep : list of int
        The cumulative ends of the schedules.

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
    during ``cooldown`` after a decay). Its attributes are its state.

    Parameters
    ----------
    gamma : float
    patience, cooldown : int
    threshold : float
    """

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
    ``LRMultiplier``), written through ``set_lrs`` at every :meth:`step`.

    Subclasses override :meth:`factor`, or pass it. The state (:meth:`state_dict`) is every
    attribute but the setter, the factor and the names in ``_not_state``.

    Parameters
    ----------
    base_lrs : list of float
        One base rate per parameter group.
    set_lrs : callable
        ``set_lrs(lrs)`` writes the rates into the backend's optimizer (e.g.
        :func:`gluontrain.torch.lr_scheduler.optimizer_setter`).
    factor : callable, optional
        ``factor(index) -> float`` (or a tuple of floats, multiplied in order).
    last_epoch : int, default -1
        The index of the last :meth:`step` (-1: none yet).
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
    """Steps a schedule at one event of :func:`gluontrain.core.loop.run_loop` (detectron2's
    ``LRScheduler`` hook); every recipe's learning rate is set by one.

    Parameters
    ----------
    schedule : object
        Anything with ``step(*args)``: a :class:`Schedule`, or a PyTorch lr scheduler.
    event : str, default 'before_batch'
        ``'before_batch'`` (the rate of a step is set before it), ``'after_batch'``
        (``optimizer.step()`` then ``scheduler.step()``, PyTorch's order) or ``'before_epoch'``.
    args : callable, optional
        ``args(state) -> tuple`` given to ``schedule.step``; default ``()`` (one more step).
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
