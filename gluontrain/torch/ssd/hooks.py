"""The hooks of the SSD300 recipe, by role: ssd.pytorch's LR steps
(:class:`SSDScheduleHook`, the rate a pure function of the iteration), its
``iter N || Loss: x ||`` line (:class:`SSDLogHook`) and its periodic ``ssd300_*_N.pth``
weights (:class:`SSDCheckpointHook`)."""
from functools import partial

from ...core.hooks import get_logger
from ...core.loop import Hook
from ...core.lr_scheduler import Schedule, ScheduleHook, step_factor
from ..lr_scheduler import optimizer_setter

__all__ = ['SSDScheduleHook', 'SSDLogHook', 'SSDCheckpointHook']


class SSDScheduleHook(ScheduleHook):
    """ssd.pytorch's LR steps (every rank): before step ``state.iteration`` (0-based) every
    param group gets ``base_lr * gamma ** #{s in lr_steps: s <= iteration}``, which holds
    after a resume (docs/faithfulness.md, "SSD300", "Deliberate differences").

    Parameters
    ----------
    optimizer : torch.optim.Optimizer
    base_lr, gamma : float
        ``--lr`` and ``--gamma``.
    lr_steps : sequence of int
        Iterations at which the rate is multiplied by ``gamma``.
    """

    def __init__(self, optimizer, base_lr, gamma, lr_steps):
        schedule = Schedule([base_lr] * len(optimizer.param_groups), optimizer_setter(optimizer),
                            partial(step_factor, steps=list(lr_steps), gamma=gamma))
        super().__init__(schedule, 'before_batch', lambda state: (state.iteration,))


class SSDLogHook(Hook):
    """ssd.pytorch's ``iter N || Loss: x ||`` line every ``log_interval`` steps (rank 0's;
    0: never), ``N`` the reference's 0-based loop index of the finished step and ``x`` the
    step's summed losses."""
    main_process_only = True

    def __init__(self, log_interval):
        self.log_interval = log_interval
        self.logger = get_logger()

    def after_batch(self, state):
        i = state.iteration - 1  # the reference's 0-based loop index of the finished step
        if self.log_interval and i % self.log_interval == 0:
            loss = sum(t for parts in state.outputs['losses'].values() for t, _ in parts)
            self.logger.info('iter {} || Loss: {:.4f} ||'.format(i, loss))


class SSDCheckpointHook(Hook):
    """ssd.pytorch's weights file every ``save_interval`` steps (rank 0's: it writes; 0:
    never): ``save_fn(i)`` after the step of 0-based index ``i`` when ``i != 0`` and
    ``i % save_interval == 0``, as the reference's loop."""
    main_process_only = True

    def __init__(self, save_interval, save_fn):
        self.save_interval, self.save_fn = save_interval, save_fn

    def after_batch(self, state):
        i = state.iteration - 1  # the reference's 0-based loop index of the finished step
        if self.save_interval and i != 0 and i % self.save_interval == 0:
            self.save_fn(i)
