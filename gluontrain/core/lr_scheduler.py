"""GluonCV's learning-rate schedules without MXNet: the same numbers, as plain Python.

:class:`LRScheduler` and :class:`LRSequential` reproduce ``gluoncv.utils.LRScheduler`` and
``gluoncv.utils.LRSequential`` (GluonCV 0.10.5) update for update, in the same floating-point
arithmetic, so a PyTorch recipe (see :mod:`gluontrain.torch.lr_scheduler`) follows exactly the
learning-rate curve of the GluonCV script it ports. Only the standard library is used.

A schedule is a pure function of the update count: ``schedule(num_update)`` depends on nothing
but its constructor arguments and ``num_update``. There is therefore no ``state_dict`` /
``load_state_dict``; to resume, call it with the restored update count.
"""
import warnings
from math import cos, pi

__all__ = ['LRScheduler', 'LRSequential']

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
            decays = 0 if self.step is None else sum(1 for s in self.step if s <= progress)
            self.learning_rate = self.base_lr * pow(self.step_factor, decays)
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
