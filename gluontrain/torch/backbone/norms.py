"""The plain normalisation layers of maskrcnn-benchmark's ResNet bodies (Scene-Graph-Benchmark).

maskrcnn-benchmark builds its body from ``FrozenBatchNorm2d`` (``StemWithFixedBatchNorm`` /
``BottleneckWithFixedBatchNorm``, the default) or ``GroupNorm`` (``StemWithGN`` /
``BottleneckWithGN``, sized by ``MODEL.GROUP_NORM``), each followed by a separate ReLU. The
seamseg norms that carry their own activation live in :mod:`gluontrain.torch.twostage.norm`.
"""
import torch
import torch.nn as nn

__all__ = ['FrozenBatchNorm2d', 'group_norm_channels', 'make_group_norm']


class FrozenBatchNorm2d(nn.Module):
    """Batch norm with fixed statistics and affine terms, all four of them buffers
    (``weight``, ``bias``, ``running_mean``, ``running_var``; no ``num_batches_tracked``),
    so a detector checkpoint of maskrcnn-benchmark loads key for key and an optimizer never
    sees them.

    ``y = x * weight / sqrt(running_var + eps) + (bias - running_mean * weight /
    sqrt(running_var + eps))``; maskrcnn-benchmark has no ``eps`` (``eps=0``, the default
    here); the released C2 weights fold it into ``running_var``.

    Parameters
    ----------
    num_features : int
    eps : float, default 0.0
    """

    def __init__(self, num_features, eps=0.0):
        super().__init__()
        self.eps = eps
        self.register_buffer('weight', torch.ones(num_features))
        self.register_buffer('bias', torch.zeros(num_features))
        self.register_buffer('running_mean', torch.zeros(num_features))
        self.register_buffer('running_var', torch.ones(num_features))

    def forward(self, x):
        scale = self.weight * torch.rsqrt(self.running_var + self.eps)
        shift = self.bias - self.running_mean * scale
        shape = [1, -1] + [1] * (x.dim() - 2)
        return x * scale.to(x.dtype).view(shape) + shift.to(x.dtype).view(shape)

    def extra_repr(self):
        return '{}, eps={}'.format(self.weight.shape[0], self.eps)


def group_norm_channels(dim, dim_per_gp, num_groups):
    """maskrcnn-benchmark's ``get_group_gn``: the number of groups for ``dim`` channels.

    Parameters
    ----------
    dim : int
    dim_per_gp : int
        ``MODEL.GROUP_NORM.DIM_PER_GP`` (-1: use ``num_groups``).
    num_groups : int
        ``MODEL.GROUP_NORM.NUM_GROUPS`` (-1: use ``dim_per_gp``).

    Returns
    -------
    int

    Raises
    ------
    ValueError
        Both or neither set, or ``dim`` not divisible (maskrcnn-benchmark asserts).
    """
    if not (dim_per_gp == -1 or num_groups == -1):
        raise ValueError('MODEL.GROUP_NORM: set either DIM_PER_GP or NUM_GROUPS, the other -1 '
                         '(got {} and {})'.format(dim_per_gp, num_groups))
    if dim_per_gp > 0:
        if dim % dim_per_gp:
            raise ValueError('MODEL.GROUP_NORM.DIM_PER_GP = {} does not divide {} channels'
                             .format(dim_per_gp, dim))
        return dim // dim_per_gp
    if num_groups <= 0 or dim % num_groups:
        raise ValueError('MODEL.GROUP_NORM.NUM_GROUPS = {} does not divide {} channels; choose '
                         'a divisor of every channel count'.format(num_groups, dim))
    return num_groups


def make_group_norm(dim_per_gp=-1, num_groups=32, eps=1e-5):
    """maskrcnn-benchmark's ``group_norm`` as a factory ``norm(channels)``.

    Parameters
    ----------
    dim_per_gp, num_groups : int
        ``MODEL.GROUP_NORM.DIM_PER_GP``, ``NUM_GROUPS``.
    eps : float
        ``MODEL.GROUP_NORM.EPSILON``.

    Returns
    -------
    callable
    """
    def norm(channels):
        return nn.GroupNorm(group_norm_channels(channels, dim_per_gp, num_groups), channels, eps)
    return norm
