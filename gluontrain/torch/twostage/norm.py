"""Normalisation + activation layers for seamseg's ``normalization_mode`` in plain PyTorch.

seamseg builds every norm layer from ``inplace_abn`` (``InPlaceABN``, ``InPlaceABNSync``,
``ActivatedGroupNorm``, ``ActivatedAffine``): a normalisation fused with an activation whose
name and parameter are attributes (``activation``, ``activation_param``), so that a residual
block can switch the last one to ``"identity"`` and apply the activation after the sum.
The classes here keep that interface on top of torch's own layers:

=============  =====================================================================
seamseg        here
=============  =====================================================================
InPlaceABN     :class:`BatchNormAct` (``BatchNorm`` + activation, 2-D to 5-D input)
InPlaceABNSync :class:`SyncBatchNormAct` (``SyncBatchNorm``; on CPU with several
               processes, statistics all-reduced with autograd through gloo)
ActivatedGroupNorm  :class:`GroupNormAct`
ActivatedAffine     :class:`FrozenAffineAct` (running statistics only, scale and bias kept)
=============  =====================================================================
"""
from functools import partial

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.modules.batchnorm import _BatchNorm

__all__ = ['BatchNormAct', 'SyncBatchNormAct', 'GroupNormAct', 'FrozenAffineAct',
           'NORM_LAYERS', 'OTHER_LAYERS', 'NORMALIZATION_MODES', 'activate',
           'norm_act_from_config', 'make_norm_act']

NORMALIZATION_MODES = ('bn', 'syncbn', 'syncbn+bn', 'gn', 'syncbn+gn', 'off')
_ACTIVATIONS = {'leaky_relu': lambda x, p: F.leaky_relu(x, negative_slope=p),
                'relu': lambda x, p: F.relu(x), 'elu': lambda x, p: F.elu(x, alpha=p),
                'identity': lambda x, p: x}


def activate(x, activation, param):
    """Apply seamseg's ABN activation by name.

    Parameters
    ----------
    x : torch.Tensor
    activation : {'relu', 'leaky_relu', 'elu', 'identity'}
    param : float
        LeakyReLU slope or ELU alpha.

    Returns
    -------
    torch.Tensor
    """
    if activation not in _ACTIVATIONS:
        raise ValueError('Unknown activation {!r}: use leaky_relu, relu, elu or identity'
                         .format(activation))
    return _ACTIVATIONS[activation](x, param)


class _ActMixin:
    """The activation attributes, and batch norm's constructor (``eps=1e-5``,
    ``momentum=0.1``, LeakyReLU 0.01: InPlaceABN's defaults)."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 activation='leaky_relu', activation_param=0.01):
        super().__init__(num_features, eps, momentum, affine, track_running_stats=True)
        self._set_act(activation, activation_param)

    def forward(self, x):
        return activate(super().forward(x), self.activation, self.activation_param)
    def _set_act(self, activation, activation_param):
        activate(torch.zeros(1), activation, activation_param)  # validate the name now
        self.activation = activation
        self.activation_param = activation_param

    def extra_repr(self):
        return '{}, activation={}, activation_param={}'.format(
            super().extra_repr(), self.activation, self.activation_param)


class BatchNormAct(_ActMixin, _BatchNorm):
    """Batch norm + activation over ``(N, C)``, ``(N, C, L)``, ``(N, C, H, W)`` ... input
    (InPlaceABN's defaults: ``eps=1e-5``, ``momentum=0.1``, LeakyReLU 0.01)."""

    def _check_input_dim(self, input):
        if input.dim() < 2:
            raise ValueError('expected at least 2-D input, got {}-D'.format(input.dim()))


class _AllReduceSum(torch.autograd.Function):
    """Sum over processes; the gradient of a sum seen by every rank is the summed gradient."""

    @staticmethod
    def forward(ctx, x):  # pylint: disable=arguments-differ
        x = x.clone()
        torch.distributed.all_reduce(x)
        return x

    @staticmethod
    def backward(ctx, grad):  # pylint: disable=arguments-differ
        grad = grad.clone()
        torch.distributed.all_reduce(grad)
        return grad


def _cpu_sync_batch_norm(bn, x):
    """Batch norm with statistics summed over every process (gloo), differentiable."""
    dims = [0] + list(range(2, x.dim()))
    count = torch.tensor([float(x.numel() // x.size(1))], dtype=x.dtype)
    stats = torch.cat([x.sum(dims), (x * x).sum(dims), count])
    stats = _AllReduceSum.apply(stats)
    c = x.size(1)
    n = stats[-1]
    mean = stats[:c] / n
    var = stats[c:2 * c] / n - mean * mean
    with torch.no_grad():
        bn.num_batches_tracked += 1
        momentum = bn.momentum if bn.momentum is not None else \
            1.0 / float(bn.num_batches_tracked)
        bn.running_mean.mul_(1 - momentum).add_(momentum * mean.detach())
        unbiased = var.detach() * n / max(float(n) - 1, 1.0)
        bn.running_var.mul_(1 - momentum).add_(momentum * unbiased)
    shape = [1, c] + [1] * (x.dim() - 2)
    y = (x - mean.view(shape)) * torch.rsqrt(var.view(shape) + bn.eps)
    if bn.affine:
        y = y * bn.weight.view(shape) + bn.bias.view(shape)
    return y


class SyncBatchNormAct(_ActMixin, nn.SyncBatchNorm):
    """Synchronised batch norm + activation (InPlaceABNSync). One process: plain batch norm.
    Several processes: torch's SyncBatchNorm on GPUs; on CPU (where torch's refuses) the
    per-channel sums are all-reduced with autograd."""

    def forward(self, x):
        dist = torch.distributed
        if (self.training and x.device.type == 'cpu' and dist.is_available()
                and dist.is_initialized() and dist.get_world_size() > 1):
            return activate(_cpu_sync_batch_norm(self, x), self.activation,
                            self.activation_param)
        return super().forward(x)


class GroupNormAct(_ActMixin, nn.GroupNorm):
    """Group norm + activation (seamseg's ActivatedGroupNorm; argument order as there)."""

    def __init__(self, num_channels, num_groups, eps=1e-5, affine=True,
                 activation='leaky_relu', activation_param=0.01):
        if num_channels % num_groups:
            raise ValueError('group norm: {} channels are not divisible by gn_groups={}; '
                             'choose gn_groups dividing every channel count'
                             .format(num_channels, num_groups))
        nn.GroupNorm.__init__(self, num_groups, num_channels, eps, affine)
        self._set_act(activation, activation_param)


class FrozenAffineAct(BatchNormAct):
    """Inference-mode batch norm + activation in train mode too (seamseg's ActivatedAffine,
    ``normalization_mode = off``): running statistics never update; scale and bias remain
    parameters (frozen by ``bn_frozen`` through a zero learning rate)."""

    def forward(self, x):
        shape = [1, x.size(1)] + [1] * (x.dim() - 2)
        inv_std = torch.rsqrt(self.running_var + self.eps)
        alpha = self.weight * inv_std if self.affine else inv_std
        beta = (self.bias if self.affine else 0) - self.running_mean * alpha
        y = x * alpha.view(shape) + beta.view(shape)
        return activate(y, self.activation, self.activation_param)


# What seamseg's make_optimizer treats as "norm" and as "other" (seamseg/utils/misc.py).
NORM_LAYERS = (_BatchNorm, nn.GroupNorm)
OTHER_LAYERS = (nn.Linear, nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.ConvTranspose1d,
                nn.ConvTranspose2d, nn.ConvTranspose3d)


def make_norm_act(mode, activation='leaky_relu', slope=0.01, groups=16):
    """The ``(static, dynamic)`` norm-act factories of a ``normalization_mode``.

    "Static" is the body and the FPN, "dynamic" the RPN and ROI heads, as in seamseg.

    Parameters
    ----------
    mode : str
        One of :data:`NORMALIZATION_MODES`.
    activation : str
        ``leaky_relu`` or ``elu`` (``relu``, ``identity`` also accepted).
    slope : float
        ``activation_slope``.
    groups : int
        ``gn_groups``.

    Returns
    -------
    tuple of callable
        Each ``factory(num_features) -> nn.Module``.
    """
    kw = {'activation': activation, 'activation_param': slope}
    bn, sync = partial(BatchNormAct, **kw), partial(SyncBatchNormAct, **kw)
    gn, off = partial(GroupNormAct, num_groups=groups, **kw), partial(FrozenAffineAct, **kw)
    table = {'bn': (bn, bn), 'syncbn': (sync, sync), 'syncbn+bn': (sync, bn),
             'gn': (gn, gn), 'syncbn+gn': (sync, gn), 'off': (off, off)}
    if mode not in table:
        raise ValueError('Unrecognized normalization_mode {!r}, valid options: {}'.format(
            mode, ', '.join(NORMALIZATION_MODES)))
    activate(torch.zeros(1), activation, slope)
    return table[mode]


def norm_act_from_config(body_config):
    """:func:`make_norm_act` from the ``[body]`` section (seamseg's ``norm_act_from_config``).

    Parameters
    ----------
    body_config : configparser.SectionProxy

    Returns
    -------
    tuple of callable
    """
    return make_norm_act(body_config['normalization_mode'], body_config['activation'],
                         body_config.getfloat('activation_slope'),
                         body_config.getint('gn_groups'))
