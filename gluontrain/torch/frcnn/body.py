"""seamseg's ResNet body (seamseg/models/resnet.py, seamseg/modules/residual.py).

Module names are seamseg's, so its snapshots load unchanged: ``mod1`` (``conv1``, ``bn1``,
``pool1``), ``mod2`` .. ``mod5`` made of ``block1`` .. ``blockN``, each block a ``convs``
sequence (``conv1``, ``bn1``, ``conv2``, ``bn2`` [, ``conv3``, ``bn3``]) plus ``proj_conv``
/ ``proj_bn`` when the shape changes. The last norm of a block and ``proj_bn`` have the
``identity`` activation; the block applies its activation after the sum. Stride 2 sits on
the first block of mod3..mod5, on the 3x3 convolution. seamseg leaves the body at PyTorch's
default initialisation.

gluontrain adds ``width_mult`` (a ``body_params`` entry): every channel count is multiplied
by it, so that a CPU run fits in minutes; 1.0 is seamseg's network.
"""
import re
from collections import OrderedDict
from functools import partial

import torch
import torch.nn as nn
import torch.nn.functional as F

from .norm import BatchNormAct

__all__ = ['ResidualBlock', 'ResNet', 'NETS', 'make_body', 'body_out_channels',
           'torchvision_to_seamseg', 'load_body_weights']

NETS = {
    'resnet18': {'structure': (2, 2, 2, 2), 'bottleneck': False},
    'resnet34': {'structure': (3, 4, 6, 3), 'bottleneck': False},
    'resnet50': {'structure': (3, 4, 6, 3), 'bottleneck': True},
    'resnet101': {'structure': (3, 4, 23, 3), 'bottleneck': True},
    'resnet152': {'structure': (3, 8, 36, 3), 'bottleneck': True},
}


class ResidualBlock(nn.Module):
    """seamseg's residual block (basic: two 3x3; bottleneck: 1x1, 3x3, 1x1).

    Parameters
    ----------
    in_channels : int
    channels : sequence of int
        Two values (basic block) or three (bottleneck).
    stride : int
        Stride of the first 3x3 convolution.
    dilation : int
    norm_act : callable
        ``norm_act(num_features)`` factory.
    """

    def __init__(self, in_channels, channels, stride=1, dilation=1, norm_act=BatchNormAct):
        super().__init__()
        if len(channels) not in (2, 3):
            raise ValueError('channels must contain either two or three values')
        if len(channels) == 2:
            last = norm_act(channels[1])
            layers = [('conv1', nn.Conv2d(in_channels, channels[0], 3, stride=stride,
                                          padding=dilation, bias=False, dilation=dilation)),
                      ('bn1', norm_act(channels[0])),
                      ('conv2', nn.Conv2d(channels[0], channels[1], 3, stride=1,
                                          padding=dilation, bias=False, dilation=dilation)),
                      ('bn2', last)]
        else:
            last = norm_act(channels[2])
            layers = [('conv1', nn.Conv2d(in_channels, channels[0], 1, bias=False)),
                      ('bn1', norm_act(channels[0])),
                      ('conv2', nn.Conv2d(channels[0], channels[1], 3, stride=stride,
                                          padding=dilation, bias=False, dilation=dilation)),
                      ('bn2', norm_act(channels[1])),
                      ('conv3', nn.Conv2d(channels[1], channels[2], 1, bias=False)),
                      ('bn3', last)]
        last.activation = 'identity'
        self.convs = nn.Sequential(OrderedDict(layers))
        if stride != 1 or in_channels != channels[-1]:
            self.proj_conv = nn.Conv2d(in_channels, channels[-1], 1, stride=stride, bias=False)
            self.proj_bn = norm_act(channels[-1])
            self.proj_bn.activation = 'identity'

    def forward(self, x):
        residual = self.proj_bn(self.proj_conv(x)) if hasattr(self, 'proj_conv') else x
        x = self.convs(x) + residual
        bn1 = self.convs.bn1
        if bn1.activation == 'leaky_relu':
            return F.leaky_relu(x, negative_slope=bn1.activation_param)
        if bn1.activation == 'relu':
            return F.relu(x)
        if bn1.activation == 'elu':
            return F.elu(x, alpha=bn1.activation_param)
        return x


class ResNet(nn.Module):
    """seamseg's ResNet body: ``forward`` returns an ``OrderedDict`` ``mod1`` .. ``mod5``
    (strides 4, 4, 8, 16, 32).

    Parameters
    ----------
    structure : sequence of 4 int
        Blocks in mod2..mod5.
    bottleneck : bool
    norm_act : callable
    dilation : int or sequence of 4 int
        seamseg's dilation (1: none; where > 1 the module keeps stride 1, and mod1 loses
        its max-pool when the first value is not 1).
    width_mult : float
        gluontrain: multiplies every channel count (1.0 = seamseg).
    """

    def __init__(self, structure, bottleneck, norm_act=BatchNormAct, dilation=1,
                 width_mult=1.0):
        super().__init__()
        if len(structure) != 4:
            raise ValueError('Expected a structure with four values')
        if dilation != 1 and len(dilation) != 4:
            raise ValueError('If dilation is not 1 it must contain four values')
        if not width_mult > 0:
            raise ValueError('width_mult must be > 0, got {!r}'.format(width_mult))
        self.structure, self.bottleneck, self.dilation = tuple(structure), bottleneck, dilation

        def width(c):
            return max(1, int(round(c * width_mult)))

        stem = width(64)
        layers = [('conv1', nn.Conv2d(3, stem, 7, stride=2, padding=3, bias=False)),
                  ('bn1', norm_act(stem))]
        if _at(dilation, 0) == 1:
            layers.append(('pool1', nn.MaxPool2d(3, stride=2, padding=1)))
        self.mod1 = nn.Sequential(OrderedDict(layers))

        in_channels = stem
        base = (64, 64, 256) if bottleneck else (64, 64)
        self.out_channels = OrderedDict(mod1=stem)
        for mod_id, num in enumerate(structure):
            channels = [width(c * 2 ** mod_id) for c in base]
            blocks = []
            for block_id in range(num):
                d = _at(dilation, mod_id)
                stride = 2 if d == 1 and block_id == 0 and mod_id > 0 else 1
                blocks.append(('block%d' % (block_id + 1),
                               ResidualBlock(in_channels, channels, stride, d, norm_act)))
                in_channels = channels[-1]
            self.add_module('mod%d' % (mod_id + 2), nn.Sequential(OrderedDict(blocks)))
            self.out_channels['mod%d' % (mod_id + 2)] = in_channels

    def forward(self, x):
        outs = OrderedDict()
        outs['mod1'] = self.mod1(x)
        outs['mod2'] = self.mod2(outs['mod1'])
        outs['mod3'] = self.mod3(outs['mod2'])
        outs['mod4'] = self.mod4(outs['mod3'])
        outs['mod5'] = self.mod5(outs['mod4'])
        return outs


def _at(value, i):
    try:
        return value[i]
    except TypeError:
        return value


def make_body(name, norm_act=BatchNormAct, **body_params):
    """seamseg's ``models.net_<name>(norm_act=..., **body_params)``.

    Parameters
    ----------
    name : str
        A key of :data:`NETS`.
    norm_act : callable
    **body_params
        ``dilation``, ``width_mult``.

    Returns
    -------
    ResNet
    """
    if name not in NETS:
        raise ValueError('[body] body = {!r} is not a known body; choose one of {}'.format(
            name, ', '.join(NETS)))
    unknown = set(body_params) - {'dilation', 'width_mult'}
    if unknown:
        raise ValueError('[body] body_params has unknown entries {}; allowed: dilation, '
                         'width_mult'.format(sorted(unknown)))
    return partial(ResNet, **NETS[name])(norm_act=norm_act, **body_params)


def body_out_channels(name, width_mult=1.0):
    """Output channels per module (the ``[body] out_channels`` meta-info to write).

    Parameters
    ----------
    name : str
    width_mult : float

    Returns
    -------
    dict
    """
    return dict(make_body(name, width_mult=width_mult).out_channels)


_TV_BLOCK = re.compile(r'^layer(\d)\.(\d+)\.(conv|bn)(\d)\.(.+)$')
_TV_PROJ = re.compile(r'^layer(\d)\.(\d+)\.downsample\.([01])\.(.+)$')


def torchvision_to_seamseg(state_dict):
    """Rename a torchvision ``resnet*`` state_dict to seamseg's body keys (what seamseg's
    ``scripts/utility/convert_pytorch_resnet.py`` does), dropping the classifier ``fc``.

    ``conv1``/``bn1`` -> ``mod1.conv1``/``mod1.bn1``; ``layer{L}.{b}.conv{k}`` ->
    ``mod{L+1}.block{b+1}.convs.conv{k}`` (``bn`` alike); ``layer{L}.{b}.downsample.0/1`` ->
    ``mod{L+1}.block{b+1}.proj_conv/proj_bn``. ``num_batches_tracked`` buffers are kept.

    Parameters
    ----------
    state_dict : dict

    Returns
    -------
    OrderedDict

    Raises
    ------
    ValueError
        On a key that is neither torchvision's nor ``fc.*``.
    """
    out = OrderedDict()
    for key, value in state_dict.items():
        if key.startswith('fc.'):
            continue
        m = _TV_BLOCK.match(key)
        p = _TV_PROJ.match(key)
        if key.startswith(('conv1.', 'bn1.')):
            new = 'mod1.' + key
        elif m:
            layer, block, kind, k, rest = m.groups()
            new = 'mod{}.block{}.convs.{}{}.{}'.format(int(layer) + 1, int(block) + 1, kind, k,
                                                      rest)
        elif p:
            layer, block, idx, rest = p.groups()
            new = 'mod{}.block{}.{}.{}'.format(int(layer) + 1, int(block) + 1,
                                               'proj_conv' if idx == '0' else 'proj_bn', rest)
        else:
            raise ValueError('unexpected key {!r} in a torchvision resnet state_dict'.format(key))
        out[new] = value
    return out


def load_body_weights(body, path):
    """Load ``[body] weights`` into ``body``, strictly, as seamseg does.

    Accepts seamseg's layout (the output of ``convert_pytorch_resnet.py``) or torchvision's
    (``layer1.0.conv1.weight`` ...), renamed by :func:`torchvision_to_seamseg`.

    Parameters
    ----------
    body : ResNet
    path : str

    Raises
    ------
    FileNotFoundError, ValueError
        Missing file; keys or shapes that do not fit the body (a ``width_mult`` or a
        different depth), with the first offending keys named.
    """
    import os  # pylint: disable=import-outside-toplevel
    if not os.path.isfile(path):
        raise FileNotFoundError('[body] weights = {} does not exist: give a resnet state_dict '
                                '(torchvision or seamseg layout) or leave it empty'.format(path))
    state = torch.load(path, map_location='cpu', weights_only=True)
    if isinstance(state, dict) and 'state_dict' in state and isinstance(state['state_dict'], dict):
        state = state['state_dict']
    if any(k.startswith('layer1.') for k in state):
        state = torchvision_to_seamseg(state)
    own = body.state_dict()
    missing = [k for k in own if k not in state and not k.endswith('num_batches_tracked')]
    unexpected = [k for k in state if k not in own]
    shapes = [k for k in own if k in state and tuple(state[k].shape) != tuple(own[k].shape)]
    if missing or unexpected or shapes:
        raise ValueError('[body] weights = {} does not fit the body: missing {}, unexpected {}, '
                         'wrong shape {} (first 3 of each; width_mult must be 1 and the depth '
                         'must match [body] body)'.format(path, missing[:3], unexpected[:3],
                                                          shapes[:3]))
    body.load_state_dict(state, strict=False)
