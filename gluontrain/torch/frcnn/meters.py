"""seamseg's ``AverageMeter`` (seamseg/utils/meters.py): an exponentially weighted mean.

``update(v)``: ``last = v``; ``sum = sum * momentum + v``; ``count = count * momentum + 1``.
``mean = sum / max(count, 1)`` (0 before the first update). With ``momentum = 1`` it is the
plain mean; seamseg's training meters use ``1 - 1 / len(train_loader)``.
"""
import torch

__all__ = ['AverageMeter']


class AverageMeter:
    """Momentum-weighted running mean with float32 tensor state ``last``, ``sum``, ``count``.

    Parameters
    ----------
    shape : tuple
        Shape of the values (``()`` for scalars).
    momentum : float
    """

    def __init__(self, shape=(), momentum=1.):
        self.momentum = momentum
        self.last = torch.zeros(shape, dtype=torch.float32)
        self.sum = torch.zeros(shape, dtype=torch.float32)
        self.count = torch.tensor(0, dtype=torch.float32)

    def update(self, value):
        """Add one value (a tensor or a number)."""
        value = torch.as_tensor(value, dtype=torch.float32).detach().cpu()
        self.last.copy_(value)
        self.sum.mul_(self.momentum).add_(value)
        self.count.mul_(self.momentum).add_(1.)

    @property
    def value(self):
        """The last value."""
        return self.last

    @property
    def mean(self):
        """The weighted mean (a 0-d tensor 0 before any update)."""
        if self.count.item() == 0:
            return torch.tensor(0.)
        return self.sum / self.count.clamp(min=1)

    def reset(self):
        """Zero the state."""
        for t in (self.last, self.sum, self.count):
            t.zero_()

    def state_dict(self):
        """``{'last', 'sum', 'count'}`` tensors (seamseg's ``*_meter`` snapshot entries)."""
        return {'last': self.last, 'sum': self.sum, 'count': self.count}

    def load_state_dict(self, state_dict):
        """Copy the state in; an unknown key raises ``KeyError`` as seamseg's."""
        for k, v in state_dict.items():
            if k not in ('last', 'sum', 'count'):
                raise KeyError('Unexpected key {} in state dict when loading AverageMeter'
                               .format(k))
            getattr(self, k).copy_(v)
