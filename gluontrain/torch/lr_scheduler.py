"""GluonCV's learning-rate schedules driving a ``torch.optim`` optimizer.

Index convention
----------------
A Gluon ``Trainer`` counts updates from 1: its optimizer increments ``num_update`` *before*
it asks the schedule, so the k-th ``trainer.step`` uses ``schedule(k)``. :class:`GluonLRScheduler`
keeps that: after ``n`` calls of ``scheduler.step()`` (``num_update == n`` updates done) the
optimizer's lr is ``schedule(n + 1)``, the rate of the next update. So the k-th
``optimizer.step()`` of the usual PyTorch loop ::

    for batch in loader:
        loss = ...; loss.backward()
        optimizer.step()        # the k-th update uses schedule(k), as Gluon's k-th trainer.step
        scheduler.step()        # move to schedule(k + 1)

uses exactly the lr that GluonCV's script uses at its k-th update, and ``schedule(0)`` (the
first value of a linear warm-up from 0) is never used, as in GluonCV.

:func:`optimizer_setter` and :func:`base_lrs` are the PyTorch side of the core's
:class:`~gluontrain.core.lr_scheduler.Schedule` (every recipe's schedule).
"""
import torch

from ..core.lr_scheduler import ScheduleHook

__all__ = ['GluonLRScheduler', 'LRSchedulerHook', 'optimizer_setter', 'base_lrs']


def optimizer_setter(optimizer):
    """``set_lrs(lrs)`` writing one rate per param group of ``optimizer`` (a tensor lr, as
    capturable optimizers hold, is filled in place)."""
    def set_lrs(lrs):
        for group, lr in zip(optimizer.param_groups, lrs):
            if isinstance(group['lr'], torch.Tensor):
                group['lr'].fill_(lr)
            else:
                group['lr'] = lr
    return set_lrs


def base_lrs(optimizer, resuming=False):
    """The base rate of every param group, PyTorch's ``initial_lr`` (set from ``lr`` on a new
    run; a resumed optimizer must already hold it).

    Raises
    ------
    TypeError
        ``optimizer`` is not a ``torch.optim.Optimizer``.
    KeyError
        ``resuming`` and a group lacks ``initial_lr``.
    """
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError('{} is not an Optimizer'.format(type(optimizer).__name__))
    for i, group in enumerate(optimizer.param_groups):
        if resuming and 'initial_lr' not in group:
            raise KeyError("param 'initial_lr' is not specified in param_groups[{}] when "
                           "resuming an optimizer".format(i))
        group.setdefault('initial_lr', group['lr'])
    return [group['initial_lr'] for group in optimizer.param_groups]


class GluonLRScheduler(torch.optim.lr_scheduler.LRScheduler):
    """A ``torch.optim.lr_scheduler.LRScheduler`` that follows a GluonCV-style schedule.

    Parameters
    ----------
    optimizer : torch.optim.Optimizer
    schedule : callable
        ``schedule(num_update) -> lr``; normally a :class:`gluontrain.core.lr_scheduler.LRScheduler`
        or :class:`~gluontrain.core.lr_scheduler.LRSequential`. It must be a pure function of
        ``num_update`` (those are); it is not part of the ``state_dict``.
    begin_update : int, default 0
        Updates already done, as Gluon's ``begin_num_update``: a weights-only start at epoch
        ``e`` passes ``e * iters_per_epoch`` so that the schedule does not restart its warm-up.

    Notes
    -----
    Every param group gets ``schedule(num_update + 1) * group.get('lr_mult', 1.0)``: a group
    with an ``'lr_mult'`` entry scales the rate as Gluon's ``Parameter.lr_mult`` does. The lr
    the optimizer was built with is ignored, as Gluon ignores it when a schedule is given.

    ``state_dict()`` holds the update count (``last_epoch``, named so by PyTorch) and the
    current rates; ``load_state_dict`` of a fresh scheduler built on the same schedule
    continues at the same update.

    Examples
    --------
    >>> from gluontrain.core.lr_scheduler import LRScheduler, LRSequential
    >>> model = torch.nn.Linear(2, 1)
    >>> optimizer = torch.optim.SGD(model.parameters(), lr=0.0, momentum=0.9)
    >>> schedule = LRSequential([LRScheduler('linear', base_lr=0, target_lr=0.1, niters=5),
    ...                          LRScheduler('cosine', base_lr=0.1, niters=20)])
    >>> scheduler = GluonLRScheduler(optimizer, schedule)
    >>> optimizer.param_groups[0]['lr'] == schedule(1)
    True
    """

    def __init__(self, optimizer, schedule, begin_update=0):
        if not callable(schedule):
            raise TypeError('schedule must be callable as schedule(num_update), got {}'
                            .format(type(schedule).__name__))
        if begin_update < 0:
            raise ValueError('begin_update must be >= 0, got {}'.format(begin_update))
        self.schedule = schedule
        # the base class steps once, from last_epoch -1 to 0 updates done
        super().__init__(optimizer, last_epoch=-1)
        if begin_update:
            self.last_epoch = int(begin_update)
            self._apply_lrs()

    @property
    def num_update(self):
        """Number of updates done (``scheduler.step()`` calls plus ``begin_update``)."""
        return self.last_epoch

    def get_lr(self):
        """Rates for the next update, ``num_update + 1``, one per param group."""
        lr = self.schedule(self.last_epoch + 1)
        return [lr * group.get('lr_mult', 1.0) for group in self.optimizer.param_groups]

    def _apply_lrs(self):
        optimizer_setter(self.optimizer)(self.get_lr())
        self._last_lr = [group['lr'].clone() if isinstance(group['lr'], torch.Tensor)
                         else group['lr'] for group in self.optimizer.param_groups]

    def state_dict(self):
        """The scheduler's state without the optimizer and the schedule (configuration)."""
        return {key: value for key, value in self.__dict__.items()
                if key not in ('optimizer', 'schedule')}

    def load_state_dict(self, state_dict):
        """Continue at the update count in ``state_dict`` and set the optimizer's rates.

        The rates are recomputed from this scheduler's schedule, so a resumed optimizer
        always gets the schedule's lr for its next update.
        """
        state = {key: value for key, value in state_dict.items()
                 if key not in ('optimizer', 'schedule')}
        self.__dict__.update(state)
        self._apply_lrs()


class LRSchedulerHook(ScheduleHook):
    """Steps a PyTorch lr scheduler after every batch of :func:`gluontrain.core.loop.run_loop`
    (the core's :class:`~gluontrain.core.lr_scheduler.ScheduleHook` at ``'after_batch'``).

    Parameters
    ----------
    scheduler : GluonLRScheduler or torch.optim.lr_scheduler.LRScheduler
        Stepped once per finished step (after the step called ``optimizer.step()``).
    check_resume : bool, default True
        Before training, require that a :class:`GluonLRScheduler` has done as many updates as
        the loop state (``state.iteration``), so that a resumed run whose scheduler was not
        restored fails at once instead of replaying the warm-up.
    """

    def __init__(self, scheduler, check_resume=True):
        super().__init__(scheduler, 'after_batch')
        self.scheduler = scheduler
        self.check_resume = check_resume

    def before_train(self, state):
        done = getattr(self.scheduler, 'num_update', None)
        if self.check_resume and done is not None and done != state.iteration:
            raise ValueError(
                'the lr scheduler has done {} updates but the loop resumes at iteration {}; '
                'restore the scheduler state (gluontrain.torch.checkpoint.restore_checkpoint) '
                'or build it with begin_update={}'.format(done, state.iteration, state.iteration))
