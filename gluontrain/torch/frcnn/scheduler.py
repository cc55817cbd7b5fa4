"""seamseg's learning-rate schedules (seamseg/utils/scheduler.py, seamseg/utils/misc.py).

seamseg keeps its own copies of PyTorch 1.0's schedulers: ``step(epoch)`` sets
``last_epoch = epoch`` and writes ``base_lr * factor(epoch)`` into every parameter group.
Training calls ``global_step += 1; scheduler.step(global_step)`` *before* each forward
(``update_mode = batch``), or ``scheduler.step(epoch)`` at each epoch start (``epoch``).

``BurnInLR(base, steps, start)``: ``lr(it) = base_lr * (start + (1 - start) * it / steps)``
for ``it <= steps``, then the wrapped schedule at ``it`` (its counter is not shifted by the
burn-in). Construction applies ``lr(0)`` once and leaves ``last_epoch = -1``. The rate is a
function of ``global_step`` alone (seamseg's one-step lag, which a ``--resume`` turns into the
full base rate: ``reference_lag=True``; docs/faithfulness.md, "Two-stage detector",
"Deliberate differences")."""
from functools import partial

from ...core import lr_scheduler as factors
from ...core.lr_scheduler import Schedule
from ..lr_scheduler import base_lrs, optimizer_setter

__all__ = ['LambdaLR', 'StepLR', 'MultiStepLR', 'BurnInLR', 'scheduler_from_config']


class LambdaLR(Schedule):
    """seamseg's scheduler: ``lr = base_lr * lr_lambda(last_epoch)`` (the core's
    :class:`~gluontrain.core.lr_scheduler.Schedule` on the optimizer's ``initial_lr``).

    Construction writes the rates of ``last_epoch + 1`` and leaves ``last_epoch`` as given;
    a ``last_epoch`` other than -1 needs ``initial_lr`` in every group (a resumed optimizer).
    """

    _not_state = ('optimizer', 'base')

    def __init__(self, optimizer, lr_lambda=None, last_epoch=-1):
        self.optimizer = optimizer
        super().__init__(base_lrs(optimizer, resuming=last_epoch != -1),
                         optimizer_setter(optimizer), lr_lambda, last_epoch)
        self.step(last_epoch + 1)
        self.last_epoch = last_epoch


def StepLR(optimizer, step_size, gamma=0.1, last_epoch=-1):  # pylint: disable=invalid-name
    """``lr = base_lr * gamma ** (last_epoch // step_size)``."""
    return LambdaLR(optimizer, partial(factors.period_factor, step_size=step_size, gamma=gamma),
                    last_epoch)


def MultiStepLR(optimizer, milestones, gamma=0.1, last_epoch=-1):  # pylint: disable=invalid-name
    """``lr = base_lr * gamma ** bisect_right(milestones, last_epoch)``."""
    if list(milestones) != sorted(milestones):
        raise ValueError('Milestones should be a list of increasing integers. Got {}'
                         .format(milestones))
    return LambdaLR(optimizer, partial(factors.step_factor, steps=list(milestones), gamma=gamma),
                    last_epoch)


class BurnInLR(LambdaLR):
    """Linear burn-in from ``start * base_lr`` to ``base_lr`` over ``steps``, then ``base``.

    Parameters
    ----------
    base : LambdaLR
    steps : int
    start : float
    reference_lag : bool
        True: seamseg's order (the wrapped counter advanced after the rate is computed).
    """

    def __init__(self, base, steps, start, reference_lag=False):
        self.base, self.steps, self.start = base, steps, start
        self.reference_lag = reference_lag
        super().__init__(base.optimizer, last_epoch=base.last_epoch)

    def step(self, epoch=None):
        if self.reference_lag:
            super().step(epoch)
            self.base.last_epoch = self.base.last_epoch + 1 if epoch is None else epoch
            return
        if epoch is None:
            epoch = self.last_epoch + 1
        self.base.last_epoch = epoch
        super().step(epoch)

    def factor(self, index):
        burn = factors.burn_in_factor(index, self.steps, self.start)
        return self.base.factor(self.base.last_epoch) if burn is None else burn


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
        scheduler = LambdaLR(optimizer, partial(factors.linear_factor, start=float(params['from']),
                                                end=params['to'], count=count))
    elif kind == 'step':
        scheduler = StepLR(optimizer, params['step_size'], params['gamma'])
    elif kind == 'poly':
        scheduler = LambdaLR(optimizer, partial(factors.poly_factor, count=count,
                                                gamma=params['gamma']))
    else:
        scheduler = MultiStepLR(optimizer, params['milestones'], params['gamma'])
    if scheduler_config.getint('burn_in_steps') != 0:
        scheduler = BurnInLR(scheduler, scheduler_config.getint('burn_in_steps'),
                             scheduler_config.getfloat('burn_in_start'), reference_lag)
    return scheduler
