"""One PyTorch training step for every recipe whose model returns a dict of losses, with
optional mixed precision (docs/recipes.md, "The engine API", ``LossDictStep``)."""
import contextlib
import random

import numpy as np
import torch

from .distributed import all_reduce_mean

__all__ = ['LossDictStep', 'mixed_precision', 'seed_all', 'to_device']


def seed_all(seed):
    """Seed Python's, numpy's and torch's generators (CPU and every CUDA device): the
    one seeding helper of the PyTorch recipes."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def to_device(obj, device, non_blocking=False):
    """Move a tensor, or the tensors inside lists / tuples / dicts, to ``device``."""
    if torch.is_tensor(obj):
        return obj.to(device, non_blocking=non_blocking)
    if isinstance(obj, dict):
        return {k: to_device(v, device, non_blocking) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_device(v, device, non_blocking) for v in obj)
    return obj


def mixed_precision(device, enabled, cpu_bf16=False, argument='--amp', dtype='float16'):
    """The ``(autocast, scaler)`` pair of :class:`LossDictStep` for a recipe's AMP switch
    ``argument``: ``(None, None)`` when not ``enabled``; CUDA: float16 + ``GradScaler('cuda')``;
    CPU with ``cpu_bf16``: bfloat16, no scaler (bf16 has fp32's exponent range).
    ``dtype='bfloat16'`` (YOLOv3's ``--amp-dtype``): bfloat16 autocast on CUDA or the CPU, no
    scaler: with float32's exponent range a loss or gradient that fits float32 does not
    overflow, so there is nothing to scale (and no update to skip).

    Raises
    ------
    ValueError
        On a CPU without ``cpu_bf16`` (float16), another device type, a GPU without
        bfloat16, or a ``dtype`` other than ``'float16'`` and ``'bfloat16'``.
    """
    if not enabled:
        return None, None
    device = torch.device(device)
    if dtype not in ('float16', 'bfloat16'):
        raise ValueError('{} dtype {!r}: choose float16 or bfloat16'.format(argument, dtype))
    if dtype == 'bfloat16':
        if device.type == 'cuda' and not torch.cuda.is_bf16_supported():
            raise ValueError('{} with bfloat16 needs a GPU with bfloat16 arithmetic (compute '
                             'capability 8.0 or later); use float16'.format(argument))
        if device.type in ('cuda', 'cpu'):
            return lambda: torch.autocast(device.type, dtype=torch.bfloat16), None
    if device.type == 'cuda':
        return (lambda: torch.autocast('cuda', dtype=torch.float16),
                torch.amp.GradScaler('cuda'))
    if device.type == 'cpu' and cpu_bf16:
        return lambda: torch.autocast('cpu', dtype=torch.bfloat16), None
    raise ValueError('{} needs a CUDA device (float16 autocast + GradScaler); on {} it is not '
                     'supported by this recipe: drop {} or train on CUDA'.format(
                         argument, device.type, argument))


class LossDictStep:
    """A training step for a ``forward`` that returns named losses (docs/recipes.md, "The
    engine API", ``LossDictStep``).

    Parameters
    ----------
    forward : callable
        ``forward(batch) -> (losses, batch_size)``, ``losses`` name -> scalar tensor.
    optimizer : torch.optim.Optimizer
    loss_weights : dict, optional
        ``name -> weight`` in the summed loss (missing: 1); the log shows unweighted losses.
    grad_clip : float or callable, optional
        Global gradient norm limit, or the recipe's own ``grad_clip()``; sees unscaled grads.
    scaler : torch.amp.GradScaler, optional
    autocast : callable, optional
        ``autocast() -> context manager`` around the forward.
    lr_group : int, default 0
        The parameter group whose learning rate is reported.
    total : str, optional
        Also log the sum of the (averaged) losses under this name, first.

    Returns (when called)
    ---------------------
    dict
        ``{'losses': {name: [(value, 1)]}, 'lr', 'batch_size'}``, losses averaged over ranks.
    """

    def __init__(self, forward, optimizer, loss_weights=None, grad_clip=None, scaler=None,
                 autocast=None, lr_group=0, total=None):
        self.forward, self.optimizer = forward, optimizer
        self.loss_weights = dict(loss_weights or {})
        self.grad_clip, self.scaler = grad_clip, scaler
        self.autocast = autocast or contextlib.nullcontext
        self.lr_group, self.total_name = lr_group, total

    def total(self, losses):
        """The weighted sum that is back-propagated."""
        terms = [value if self.loss_weights.get(name, 1.0) == 1.0
                 else self.loss_weights[name] * value for name, value in losses.items()]
        if not terms:
            raise ValueError('the forward returned no losses')
        return sum(terms[1:], terms[0])  # left to right, as the reference adds them

    def _params(self):
        return [p for group in self.optimizer.param_groups for p in group['params']
                if p.grad is not None]

    def _clip(self):
        if callable(self.grad_clip):
            self.grad_clip()
        elif self.grad_clip:
            torch.nn.utils.clip_grad_norm_(self._params(), self.grad_clip)

    def __call__(self, batch, state=None):
        with self.autocast():
            losses, batch_size = self.forward(batch)
        self.optimizer.zero_grad()
        total = self.total(losses)
        if self.scaler is not None:
            self.scaler.scale(total).backward()
            if self.grad_clip:
                self.scaler.unscale_(self.optimizer)
                self._clip()
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            total.backward()
            self._clip()
            self.optimizer.step()
        logged = all_reduce_mean(losses)
        if self.total_name:
            logged = dict([(self.total_name, sum(logged.values()))] + list(logged.items()))
        return {'losses': {name: [(value, 1)] for name, value in logged.items()},
                'lr': self.optimizer.param_groups[self.lr_group]['lr'],
                'batch_size': int(batch_size)}
