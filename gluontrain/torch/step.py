"""One PyTorch training step for every recipe whose model (or model + criterion) returns a
dict of losses: torchvision / Scene-Graph-Benchmark ``model(images, targets)``, seamseg
``model(**batch, do_loss=True)``, SSD's ``criterion(net(x), targets)``.

The recipe supplies ``forward(batch) -> (loss_dict, batch_size)``; :class:`LossDictStep`
does the rest the same way for all of them: weighted sum, ``zero_grad``, backward, optional
gradient clipping, optimizer step, and the meters' output format with the losses averaged
over ranks for the log (every rank trains on its own value).

Mixed precision: pass ``autocast`` (a context-manager factory, e.g.
``lambda: torch.autocast('cuda', dtype=torch.float16)``) and ``scaler``
(``torch.amp.GradScaler``); the forward then runs under ``autocast()`` and the backward /
clipping / step go through the scaler. Both default to off (the references train in fp32);
:func:`mixed_precision` builds the pair a recipe's ``--amp`` asks for.
"""
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


def mixed_precision(device, enabled, cpu_bf16=False, argument='--amp'):
    """The ``(autocast, scaler)`` pair of :class:`LossDictStep` for a recipe's AMP switch.

    Parameters
    ----------
    device : torch.device
        The training device.
    enabled : bool
        The switch; False gives ``(None, None)`` (fp32, the references).
    cpu_bf16 : bool
        On the CPU, allow bfloat16 autocast (no scaler: bf16 has fp32's exponent range). Only
        for recipes where it was measured to hold the numbers; otherwise the CPU is refused.
    argument : str
        The switch's name, for the error message.

    Returns
    -------
    (autocast, scaler)
        CUDA: float16 autocast and ``torch.amp.GradScaler('cuda')``; CPU with ``cpu_bf16``:
        bfloat16 autocast and no scaler.

    Raises
    ------
    ValueError
        On a CPU without ``cpu_bf16``, or another device type.
    """
    if not enabled:
        return None, None
    device = torch.device(device)
    if device.type == 'cuda':
        return (lambda: torch.autocast('cuda', dtype=torch.float16),
                torch.amp.GradScaler('cuda'))
    if device.type == 'cpu' and cpu_bf16:
        return lambda: torch.autocast('cpu', dtype=torch.bfloat16), None
    raise ValueError('{} needs a CUDA device (float16 autocast + GradScaler); on {} it is not '
                     'supported by this recipe: drop {} or train on CUDA'.format(
                         argument, device.type, argument))


class LossDictStep:
    """A training step for a ``forward`` that returns named losses.

    Parameters
    ----------
    forward : callable
        ``forward(batch) -> (losses, batch_size)``: ``losses`` maps names to scalar tensors
        (everything the model computes, moved to its device by the recipe).
    optimizer : torch.optim.Optimizer
    loss_weights : dict, optional
        ``name -> weight`` in the summed loss (missing names weigh 1; detectron2's and
        seamseg's per-loss weights). The logged values are the unweighted losses.
    grad_clip : float, optional
        Clip the global gradient norm to this value before the update (None: no clipping).
    scaler : torch.amp.GradScaler, optional
        Mixed-precision loss scaling (see the module docstring).
    autocast : callable, optional
        ``autocast() -> context manager`` around the forward.

    Returns (when called)
    ---------------------
    dict
        ``{'losses': {name: [(value, 1)]}, 'lr': first param group's lr, 'batch_size': n}``:
        one value per step, the :class:`gluontrain.core.meters.LossMeter` format.
    """

    def __init__(self, forward, optimizer, loss_weights=None, grad_clip=None, scaler=None,
                 autocast=None):
        self.forward, self.optimizer = forward, optimizer
        self.loss_weights = dict(loss_weights or {})
        self.grad_clip, self.scaler = grad_clip, scaler
        self.autocast = autocast or contextlib.nullcontext

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

    def __call__(self, batch, state=None):
        with self.autocast():
            losses, batch_size = self.forward(batch)
        self.optimizer.zero_grad()
        total = self.total(losses)
        if self.scaler is not None:
            self.scaler.scale(total).backward()
            if self.grad_clip:
                self.scaler.unscale_(self.optimizer)
                torch.nn.utils.clip_grad_norm_(self._params(), self.grad_clip)
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            total.backward()
            if self.grad_clip:
                torch.nn.utils.clip_grad_norm_(self._params(), self.grad_clip)
            self.optimizer.step()
        logged = all_reduce_mean(losses)
        return {'losses': {name: [(value, 1)] for name, value in logged.items()},
                'lr': self.optimizer.param_groups[0]['lr'], 'batch_size': int(batch_size)}
