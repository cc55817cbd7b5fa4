"""The YOLOv3 recipe's hooks on PyTorch: the backend-neutral ones of
:mod:`gluontrain.yolo3.hooks` (the mixup schedule, the batch sampler's rollover leftovers,
checkpointed for an exact resume), the LR schedule's, and those that read what the step leaves
on the device at the log interval (docs/performance.md, "The step on the GPU"), in the order
they run."""
import numbers

from ...core.hooks import DeviceNaNGuardHook, read_due
from ...core.loop import Hook
from ...core.meters import LossMeter
from ...yolo3.hooks import GluonCVMixupHook, RolloverLeftoversHook
from ..lr_scheduler import LRSchedulerHook

__all__ = ['recipe_hooks', 'DeviceLossMeter', 'StepFlushHook']


class DeviceLossMeter(LossMeter):
    """A :class:`~gluontrain.core.meters.LossMeter` fed sums that stay on the device (0-d
    float64 tensors, :func:`gluontrain.torch.yolo3.step.loss_sums`): they are added there in
    the order of the steps and read as Python floats when the meter is read (the log line,
    the epoch's records, the checkpoint). float64 additions in the same order: the means are
    those of a meter fed floats, bit for bit."""

    @property
    def pending(self):
        """True while a sum holds a value not yet read from its device."""
        return any(not isinstance(acc[0], numbers.Real)
                   for accs in (self._run, self._epoch) for acc in accs.values())

    def settle(self):
        """Read every sum left on the device as a Python float."""
        for accs in (self._run, self._epoch):
            for acc in accs.values():
                if not isinstance(acc[0], numbers.Real):
                    acc[0] = float(acc[0])

    def running(self):
        self.settle()
        return super().running()

    def epoch(self):
        self.settle()
        return super().epoch()

    def state_dict(self):
        self.settle()
        return super().state_dict()


class StepFlushHook(Hook):
    """Calls ``step.flush()`` (the AMP loss-scale lines) at the steps the log reads the losses
    (:func:`~gluontrain.core.hooks.read_due`), at the end of each epoch and of the run: before
    the log's own line, so each line stands where it did when the step logged it."""

    def __init__(self, step, log_interval, num_batches=None):
        self.step, self.log_interval, self.num_batches = step, log_interval, num_batches

    def after_batch(self, state):
        if read_due(state, self.log_interval, self.num_batches):
            self.step.flush()

    def after_epoch(self, state):
        self.step.flush()

    def after_train(self, state):
        self.step.flush()


def recipe_hooks(train_data, args, scheduler, step=None):
    """The recipe's own hooks: the mixup schedule of ``train_data.raw_dataset``, the
    leftovers of its :class:`~gluontrain.yolo3.data.RolloverBatchSampler`, the
    :class:`~gluontrain.torch.lr_scheduler.LRSchedulerHook` of ``scheduler`` (GluonCV's
    schedule, stepped after every update), then the readers of what the step left on the
    device, every ``--log-interval`` batches and at each pass's end: the
    :class:`~gluontrain.core.hooks.DeviceNaNGuardHook` and, for ``step``, the
    :class:`StepFlushHook`.

    Returns
    -------
    list of Hook
    """
    num_batches = len(train_data)
    hooks = [GluonCVMixupHook(getattr(train_data, 'raw_dataset', None), args),
             RolloverLeftoversHook(train_data.batch_sampler, 'prev'),
             LRSchedulerHook(scheduler),
             DeviceNaNGuardHook(args.log_interval, num_batches)]
    if step is not None:
        hooks.append(StepFlushHook(step, args.log_interval, num_batches))
    return hooks
