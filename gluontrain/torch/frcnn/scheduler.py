"""seamseg's learning-rate schedules (seamseg/utils/scheduler.py, seamseg/utils/misc.py).

seamseg keeps its own copies of PyTorch 1.0's schedulers: ``step(epoch)`` sets
``last_epoch = epoch`` and writes ``base_lr * factor(epoch)`` into every parameter group.
Training calls ``global_step += 1; scheduler.step(global_step)`` *before* each forward
(``update_mode = batch``), or ``scheduler.step(epoch)`` at each epoch start (``epoch``).

``BurnInLR(base, steps, start)``: ``lr(it) = base_lr * (start + (1 - start) * it / steps)``
for ``it <= steps``, then the wrapped schedule at ``it`` (its counter is not shifted by the
burn-in). Construction applies ``lr(0)`` once and leaves ``last_epoch = -1``.

seamseg's ``BurnInLR.step`` computes the learning rate *before* it advances the wrapped
schedule's counter, so after the burn-in step ``g`` runs at ``base(g - 1)``: one step late in
an uninterrupted run, and at ``base(0)`` (the full base rate) on the first step after a
``--resume``, where the schedulers are rebuilt with the counter at 0. Here the counter is
advanced first, so the rate is a function of ``global_step`` alone; ``reference_lag=True``
restores seamseg's order (docs/faithfulness.md).
"""
from bisect import bisect_right

__all__ = ['LambdaLR', 'StepLR', 'MultiStepLR', 'BurnInLR', 'scheduler_from_config',
           'poly_factor']


class _Scheduler:
    def __init__(self, optimizer, last_epoch=-1):
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault('initial_lr', group['lr'])
        else:
            for i, group in enumerate(optimizer.param_groups):
                if 'initial_lr' not in group:
                    raise KeyError("param 'initial_lr' is not specified in param_groups[{}] "
                                   "when resuming an optimizer".format(i))
        self.base_lrs = [group['initial_lr'] for group in optimizer.param_groups]
        self.step(last_epoch + 1)
        self.last_epoch = last_epoch

    def get_lr(self):
        """Learning rate of every parameter group at ``last_epoch``."""
        raise NotImplementedError

    def step(self, epoch=None):
        """Set ``last_epoch`` (default: +1) and write the learning rates."""
        if epoch is None:
            epoch = self.last_epoch + 1
        self.last_epoch = epoch
        for group, lr in zip(self.optimizer.param_groups, self.get_lr()):
            group['lr'] = lr

    def state_dict(self):
        """Plain attributes (seamseg does not snapshot the scheduler: it is a function of
        ``global_step``)."""
        return {k: v for k, v in self.__dict__.items()
                if k not in ('optimizer', 'lr_lambdas', 'base')}

    def load_state_dict(self, state_dict):
        """Restore :meth:`state_dict`."""
        self.__dict__.update(state_dict)


class LambdaLR(_Scheduler):
    """``lr = base_lr * lr_lambda(last_epoch)``."""

    def __init__(self, optimizer, lr_lambda, last_epoch=-1):
        if isinstance(lr_lambda, (list, tuple)):
            if len(lr_lambda) != len(optimizer.param_groups):
                raise ValueError('Expected {} lr_lambdas, but got {}'.format(
                    len(optimizer.param_groups), len(lr_lambda)))
            self.lr_lambdas = list(lr_lambda)
        else:
            self.lr_lambdas = [lr_lambda] * len(optimizer.param_groups)
        self.last_epoch = last_epoch
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        return [base * fn(self.last_epoch) for fn, base in zip(self.lr_lambdas, self.base_lrs)]


class StepLR(_Scheduler):
    """``lr = base_lr * gamma ** (last_epoch // step_size)``."""

    def __init__(self, optimizer, step_size, gamma=0.1, last_epoch=-1):
        self.step_size, self.gamma = step_size, gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        return [b * self.gamma ** (self.last_epoch // self.step_size) for b in self.base_lrs]


class MultiStepLR(_Scheduler):
    """``lr = base_lr * gamma ** bisect_right(milestones, last_epoch)``."""

    def __init__(self, optimizer, milestones, gamma=0.1, last_epoch=-1):
        if list(milestones) != sorted(milestones):
            raise ValueError('Milestones should be a list of increasing integers. Got {}'
                             .format(milestones))
        self.milestones, self.gamma = list(milestones), gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        return [b * self.gamma ** bisect_right(self.milestones, self.last_epoch)
                for b in self.base_lrs]


class BurnInLR(_Scheduler):
    """Linear burn-in from ``start * base_lr`` to ``base_lr`` over ``steps``, then ``base``.

    Parameters
    ----------
    base : scheduler
    steps : int
    start : float
    reference_lag : bool
        True: seamseg's order (the wrapped counter advanced after the rate is computed).
    """

    def __init__(self, base, steps, start, reference_lag=False):
        self.base, self.steps, self.start = base, steps, start
        self.reference_lag = reference_lag
        super().__init__(base.optimizer, base.last_epoch)

    def step(self, epoch=None):
        if self.reference_lag:
            super().step(epoch)
            self.base.last_epoch = self.base.last_epoch + 1 if epoch is None else epoch
            return
        if epoch is None:
            epoch = self.last_epoch + 1
        self.base.last_epoch = epoch
        super().step(epoch)

    def get_lr(self):
        beta = self.start
        alpha = (1. - beta) / self.steps
        if self.last_epoch <= self.steps:
            return [b * (self.last_epoch * alpha + beta) for b in self.base_lrs]
        return self.base.get_lr()


def poly_factor(count, gamma):
    """seamseg's poly factor ``it -> (1 - it / count) ** gamma``.

    Parameters
    ----------
    count : int
        Total steps (``epochs * batches per epoch`` in batch mode).
    gamma : float

    Returns
    -------
    callable
    """
    def factor(it):
        return (1 - float(it) / count) ** gamma
    return factor


def scheduler_from_config(scheduler_config, optimizer, epoch_length, reference_lag=False):
    """seamseg's ``scheduler_from_config``.

    Parameters
    ----------
    scheduler_config : configparser.SectionProxy
        ``[scheduler]``.
    optimizer : torch.optim.Optimizer
    epoch_length : int
        Batches per epoch of this process (``len(train_loader)``).
    reference_lag : bool
        seamseg's one-step lag of the schedule after the burn-in (see :class:`BurnInLR`).

    Returns
    -------
    object
        A scheduler with ``step(epoch)`` and ``get_lr()``.
    """
    kind = scheduler_config['type']
    mode = scheduler_config['update_mode']
    if kind not in ('linear', 'step', 'poly', 'multistep'):
        raise ValueError("Unrecognized scheduler type {!r}, valid options: 'linear', 'step', "
                         "'poly', 'multistep'".format(kind))
    if mode not in ('batch', 'epoch'):
        raise ValueError("[scheduler] update_mode must be 'batch' or 'epoch', got {!r}"
                         .format(mode))
    params = scheduler_config.getstruct('params')
    count = epoch_length * scheduler_config.getint('epochs') if mode == 'batch' \
        else scheduler_config.getint('epochs')
    if kind == 'linear':
        beta = float(params['from'])
        alpha = float(params['to'] - beta) / count
        scheduler = LambdaLR(optimizer, lambda it: it * alpha + beta)
    elif kind == 'step':
        scheduler = StepLR(optimizer, params['step_size'], params['gamma'])
    elif kind == 'poly':
        scheduler = LambdaLR(optimizer, poly_factor(count, params['gamma']))
    else:
        scheduler = MultiStepLR(optimizer, params['milestones'], params['gamma'])
    if scheduler_config.getint('burn_in_steps') != 0:
        scheduler = BurnInLR(scheduler, scheduler_config.getint('burn_in_steps'),
                             scheduler_config.getfloat('burn_in_start'), reference_lag)
    return scheduler
