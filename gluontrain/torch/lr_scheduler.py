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

from ..core.lr_scheduler import Schedule, ScheduleHook

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


class GluonLRScheduler(Schedule):
    """A PyTorch lr scheduler (``step()``, ``state_dict()``) that follows a GluonCV-style
    schedule: the core's :class:`~gluontrain.core.lr_scheduler.Schedule` with factor
    ``schedule(num_update + 1)`` and base rate ``lr_mult``.

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

    ``state_dict()`` holds the update count (``last_epoch``) and the current rates;
    ``load_state_dict`` of a fresh scheduler built on the same schedule continues at the same
    update.

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

    _not_state = ('optimizer', 'schedule')

    def __init__(self, optimizer, schedule, begin_update=0):
        if not callable(schedule):
            raise TypeError('schedule must be callable as schedule(num_update), got {}'
                            .format(type(schedule).__name__))
        if begin_update < 0:
            raise ValueError('begin_update must be >= 0, got {}'.format(begin_update))
        self.optimizer, self.schedule = optimizer, schedule
        super().__init__([group.get('lr_mult', 1.0) for group in optimizer.param_groups],
                         optimizer_setter(optimizer), last_epoch=int(begin_update))
        self._apply()

    @property
    def num_update(self):
        """Number of updates done (``scheduler.step()`` calls plus ``begin_update``)."""
        return self.last_epoch

    def factor(self, index):
        """The rate of the next update, ``schedule(index + 1)``."""
        return self.schedule(index + 1)


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
        self.check_resume = check_resume

    def before_train(self, state):
        done = getattr(self.schedule, 'num_update', None)
        if self.check_resume and done is not None and done != state.iteration:
            raise ValueError(
                'the lr scheduler has done {} updates but the loop resumes at iteration {}; '
                'restore the scheduler state (gluontrain.torch.checkpoint.restore_checkpoint) '
                'or build it with begin_update={}'.format(done, state.iteration, state.iteration))
