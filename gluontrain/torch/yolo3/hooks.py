"""The YOLOv3 recipe's own hooks on PyTorch: the per-epoch mixup switch and the batch
sampler's rollover leftovers (checkpointed for an exact resume)."""
import numpy as np

from ...core.loop import Hook

__all__ = ['EpochStart', 'SamplerPosition']


class EpochStart(Hook):
    """GluonCV's per-epoch preamble: with ``--mixup``, Beta(1.5, 1.5) mixing, switched off
    for the last ``--no-mixup-epochs`` epochs."""

    def __init__(self, train_data, args):
        self.train_data, self.args = train_data, args

    def before_epoch(self, state):
        args = self.args
        dataset = getattr(self.train_data, 'raw_dataset', None)
        if args.mixup and dataset is not None and hasattr(dataset, 'set_mixup'):
            dataset.set_mixup(np.random.beta, 1.5, 1.5)
            if state.epoch >= args.epochs - args.no_mixup_epochs:
                dataset.set_mixup(None)


class SamplerPosition(Hook):
    """The rollover leftovers of the batch sampler (``RolloverBatchSampler.prev``) as hook
    state: the first batch of the next epoch starts with them, as Gluon's ``rollover``."""

    def __init__(self, sampler):
        self.sampler = sampler

    def state_dict(self):
        """``{'prev': [...]}``."""
        return {'prev': [int(i) for i in self.sampler.prev]}

    def load_state_dict(self, state_dict):
        """Put the leftovers back."""
        self.sampler.prev = [int(i) for i in state_dict.get('prev', [])]
