"""The YOLOv3 recipe's hooks on PyTorch: the backend-neutral ones of
:mod:`gluontrain.yolo3.hooks` (the mixup schedule, the batch sampler's rollover leftovers,
checkpointed for an exact resume) and the LR schedule's, in the order they run."""
from ...yolo3.hooks import GluonCVMixupHook, RolloverLeftoversHook
from ..lr_scheduler import LRSchedulerHook

__all__ = ['recipe_hooks']


def recipe_hooks(train_data, args, scheduler):
    """The recipe's own hooks: the mixup schedule of ``train_data.raw_dataset``, the
    leftovers of its :class:`~gluontrain.yolo3.data.RolloverBatchSampler`, and the
    :class:`~gluontrain.torch.lr_scheduler.LRSchedulerHook` of ``scheduler`` (GluonCV's
    schedule, stepped after every update).

    Returns
    -------
    list of Hook
    """
    return [GluonCVMixupHook(getattr(train_data, 'raw_dataset', None), args),
            RolloverLeftoversHook(train_data.batch_sampler, 'prev'),
            LRSchedulerHook(scheduler)]
