"""The feature pyramid of both two-stage flavours, and the body + FPN wrapper.

One network; its behaviour is given by arguments, its module names by the flavour
(:data:`.flavours.FPN_NAMES`, as :mod:`gluontrain.torch.backbone` names the body):

=========== ============================================ =====================================
reference   modules (``naming``) / arguments             reference
=========== ============================================ =====================================
seamseg     ``lateral.i`` / ``output.i`` / ``extra.i``,  seamseg/modules/fpn.py: conv + norm-act,
            each ``conv`` + ``bn`` (``norm_act``),       Xavier-normal with the activation's gain
            ``init='xavier'``
maskrcnn    ``fpn_inner{i}`` / ``fpn_layer{i}``,         maskrcnn-benchmark's ``FPN``: convs with
            ``norm_act=None``,                           bias, no norm, ``kaiming_uniform_(a=1)``
            ``init='kaiming_uniform'``
=========== ============================================ =====================================

The ``top_block`` adds the coarser levels: ``'convs'`` (seamseg's ``extra_scales`` stride-2
3x3 conv + norm-act, starting from the *last input*, not the last output) or ``'max_pool'``
(maskrcnn-benchmark's ``LastLevelMaxPool``: P6 = stride-2 max-pool of P5).
"""
from collections import OrderedDict

import torch.nn as nn
import torch.nn.functional as F

from .flavours import FPN_BODY_NAMES, FPN_NAMES, add_module_at, flavour_names
from .norm import NORM_LAYERS, BatchNormAct

__all__ = ['FPN', 'FPNBody', 'TOP_BLOCKS', 'INITS', 'norm_act_gain']

TOP_BLOCKS = (None, 'convs', 'max_pool')
#: ``'xavier'``: seamseg's, after building (Xavier-normal with the norm's gain, norm scale 1,
#: zero biases); ``'kaiming_uniform'``: maskrcnn-benchmark's, on each convolution as it is
#: created (``kaiming_uniform_(a=1)``, zero bias).
INITS = ('xavier', 'kaiming_uniform')


def norm_act_gain(norm):
    """Xavier gain of a seamseg norm-act layer's activation (seamseg's initialisations)."""
    return nn.init.calculate_gain(norm.activation, norm.activation_param)


class FPN(nn.Module):
    """Feature pyramid: 1x1 lateral per input, top-down sums (upsampled to the lateral's
    size), 3x3 output per level, then the ``top_block`` levels.

    Parameters
    ----------
    in_channels : sequence of int
    out_channels : int
    extra_scales : int
        Number of ``'convs'`` top levels (seamseg's ``[fpn] extra_scales``).
    norm_act : callable or None
        Norm-act factory after each convolution (seamseg's); None: convolutions with bias
        and no norm (maskrcnn-benchmark's).
    interpolation : str
        ``F.interpolate`` mode (``bilinear`` uses ``align_corners=False``).
    naming : str
        A key of :data:`.flavours.FPN_NAMES` (module names only).
    top_block : {'convs', 'max_pool', None}
    init : {'xavier', 'kaiming_uniform'}
        See :data:`INITS`.
    """

    def __init__(self, in_channels, out_channels=256, extra_scales=0, norm_act=BatchNormAct,
                 interpolation='nearest', naming='seamseg', top_block='convs', init='xavier'):
        super().__init__()
        names = flavour_names(FPN_NAMES, naming, 'FPN')
        if top_block not in TOP_BLOCKS or init not in INITS:
            raise ValueError('FPN: top_block {!r} / init {!r}: choose one of {} / {}'.format(
                top_block, init, TOP_BLOCKS, INITS))
        self.naming, self.top_block, self.interpolation = naming, top_block, interpolation
        self.init = init

        def block(cin, cout, k, stride=1):
            conv = nn.Conv2d(cin, cout, k, stride=stride, padding=k // 2, bias=norm_act is None)
            if init == 'kaiming_uniform':
                nn.init.kaiming_uniform_(conv.weight, a=1)
                if conv.bias is not None:
                    nn.init.constant_(conv.bias, 0)
            if norm_act is None:
                return conv
            return nn.Sequential(OrderedDict([('conv', conv), ('bn', norm_act(cout))]))

        levels = range(len(in_channels))
        self.inner_blocks = [names['inner'].format(i + names['first']) for i in levels]
        self.layer_blocks = [names['layer'].format(i + names['first']) for i in levels]
        inner = [(self.inner_blocks[i], in_channels[i], 1) for i in levels]
        layer = [(self.layer_blocks[i], out_channels, 3) for i in levels]
        # created (and registered) in the reference's order: that of the random draws
        order = ([b for pair in zip(inner, layer) for b in pair] if names['interleaved']
                 else inner + layer)
        for name, cin, k in order:
            add_module_at(self, name, block(cin, out_channels, k), nn.ModuleList)
        self.extra_blocks = []
        if top_block == 'convs':
            for i in range(extra_scales):
                self.extra_blocks.append(names['extra'].format(i))
                add_module_at(self, self.extra_blocks[-1], block(
                    in_channels[-1] if i == 0 else out_channels, out_channels, 3, 2),
                    nn.ModuleList)
        self.reset_parameters()

    def reset_parameters(self):
        """The ``'xavier'`` initialisation (``'kaiming_uniform'`` is done as each convolution
        is created)."""
        if self.init != 'xavier':
            return
        norms = [m for m in self.modules() if isinstance(m, NORM_LAYERS)]
        gain = norm_act_gain(norms[0]) if norms else 1.
        for mod in self.modules():
            if isinstance(mod, nn.Conv2d):
                nn.init.xavier_normal_(mod.weight, gain)
            elif isinstance(mod, NORM_LAYERS) and mod.weight is not None:
                nn.init.constant_(mod.weight, 1.)
            if getattr(mod, 'bias', None) is not None:
                nn.init.constant_(mod.bias, 0.)

    def forward(self, xs):
        """List of inputs (finest first) -> list of outputs (finest first)."""
        kw = {'mode': self.interpolation}
        if self.interpolation == 'bilinear':
            kw['align_corners'] = False
        ys = []
        for x_i, name in zip(xs[::-1], self.inner_blocks[::-1]):
            x_i = self.get_submodule(name)(x_i)
            if ys:
                x_i = x_i + F.interpolate(ys[0], size=x_i.shape[-2:], **kw)
            ys.insert(0, x_i)
        ys = [self.get_submodule(name)(y) for y, name in zip(ys, self.layer_blocks)]
        if self.top_block == 'max_pool':
            ys.append(F.max_pool2d(ys[-1], 1, 2, 0))
        y = xs[-1]
        for name in self.extra_blocks:
            y = self.get_submodule(name)(y)
            ys.append(y)
        return ys


class FPNBody(nn.Module):
    """A body (returning a dict of features) + :class:`FPN` over its named outputs.

    State-dict keys: the body under :data:`.flavours.FPN_BODY_NAMES` (``backbone.*``,
    seamseg's snapshots; ``body.*``, maskrcnn-benchmark's ``backbone`` module) + ``fpn.*``.

    Parameters
    ----------
    body : nn.Module
    fpn : FPN
    fpn_inputs : sequence of str
    naming : str
        A key of :data:`.flavours.FPN_BODY_NAMES`.
    out_channels : int, optional
        The FPN width (maskrcnn-benchmark's ``backbone.out_channels``).
    """

    def __init__(self, body, fpn, fpn_inputs=(), naming='seamseg', out_channels=None):
        super().__init__()
        self.fpn_inputs = list(fpn_inputs)
        self.body_name = flavour_names(FPN_BODY_NAMES, naming, 'FPNBody')
        self.add_module(self.body_name, body)
        self.fpn = fpn
        self.out_channels = out_channels

    def forward(self, x):
        feats = getattr(self, self.body_name)(x)
        return self.fpn([feats[name] for name in self.fpn_inputs])
