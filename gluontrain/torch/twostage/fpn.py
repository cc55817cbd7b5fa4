"""The feature pyramid of both two-stage flavours, and the body + FPN wrapper.

One network under either reference's parameter names (as :mod:`gluontrain.torch.backbone`):

=========== ============================================ =====================================
naming      modules                                      reference
=========== ============================================ =====================================
'seamseg'   ``lateral.i`` / ``output.i`` / ``extra.i``,  seamseg/modules/fpn.py: conv + norm-act,
            each ``conv`` + ``bn`` (norm-act)            Xavier-normal with the activation's gain
'maskrcnn'  ``fpn_inner{i}`` / ``fpn_layer{i}``          maskrcnn-benchmark's ``FPN``: convs with
                                                         bias, no norm, ``kaiming_uniform_(a=1)``
=========== ============================================ =====================================

The ``top_block`` adds the coarser levels: ``'convs'`` (seamseg's ``extra_scales`` stride-2
3x3 conv + norm-act, starting from the *last input*, not the last output) or ``'max_pool'``
(maskrcnn-benchmark's ``LastLevelMaxPool``: P6 = stride-2 max-pool of P5).
"""
from collections import OrderedDict

import torch.nn as nn
import torch.nn.functional as F

from .norm import NORM_LAYERS, BatchNormAct

__all__ = ['FPN', 'FPNBody', 'TOP_BLOCKS', 'norm_act_gain']

TOP_BLOCKS = (None, 'convs', 'max_pool')


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
    norm_act : callable
        seamseg's norm-act factory (``'seamseg'`` naming only).
    interpolation : str
        ``F.interpolate`` mode (``bilinear`` uses ``align_corners=False``).
    naming : {'seamseg', 'maskrcnn'}
    top_block : {'convs', 'max_pool', None}
    """

    def __init__(self, in_channels, out_channels=256, extra_scales=0, norm_act=BatchNormAct,
                 interpolation='nearest', naming='seamseg', top_block='convs'):
        super().__init__()
        if naming not in ('seamseg', 'maskrcnn') or top_block not in TOP_BLOCKS:
            raise ValueError('FPN: naming {!r} / top_block {!r}: choose seamseg or maskrcnn / '
                             'one of {}'.format(naming, top_block, TOP_BLOCKS))
        self.naming, self.top_block, self.interpolation = naming, top_block, interpolation

        def block(cin, cout, k, stride=1):
            if naming == 'maskrcnn':
                conv = nn.Conv2d(cin, cout, k, padding=k // 2)
                nn.init.kaiming_uniform_(conv.weight, a=1)
                nn.init.constant_(conv.bias, 0)
                return conv
            return nn.Sequential(OrderedDict([
                ('conv', nn.Conv2d(cin, cout, k, stride=stride, padding=k // 2, bias=False)),
                ('bn', norm_act(cout))]))

        levels = range(len(in_channels))
        if naming == 'maskrcnn':
            # created interleaved, as maskrcnn-benchmark (the order of the random draws)
            self.inner_blocks = ['fpn_inner%d' % (i + 1) for i in levels]
            self.layer_blocks = ['fpn_layer%d' % (i + 1) for i in levels]
            for cin, inner, layer in zip(in_channels, self.inner_blocks, self.layer_blocks):
                self.add_module(inner, block(cin, out_channels, 1))
                self.add_module(layer, block(out_channels, out_channels, 3))
            return
        self.inner_blocks = ['lateral.%d' % i for i in levels]
        self.layer_blocks = ['output.%d' % i for i in levels]
        self.lateral = nn.ModuleList([block(c, out_channels, 1) for c in in_channels])
        self.output = nn.ModuleList([block(out_channels, out_channels, 3) for _ in in_channels])
        if top_block == 'convs' and extra_scales > 0:
            self.extra = nn.ModuleList([
                block(in_channels[-1] if i == 0 else out_channels, out_channels, 3, 2)
                for i in range(extra_scales)])
        self.reset_parameters()

    def reset_parameters(self):
        """seamseg's FPN initialisation (maskrcnn-benchmark's convs are initialised when
        created)."""
        if self.naming != 'seamseg':
            return
        gain = norm_act_gain(self.lateral[0].bn)
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
        elif hasattr(self, 'extra'):
            y = xs[-1]
            for extra_i in self.extra:
                y = extra_i(y)
                ys.append(y)
        return ys


class FPNBody(nn.Module):
    """A body (returning a dict of features) + :class:`FPN` over its named outputs.

    State-dict keys: ``backbone.*`` + ``fpn.*`` (``'seamseg'``, seamseg's snapshots) or
    ``body.*`` + ``fpn.*`` (``'maskrcnn'``, maskrcnn-benchmark's ``backbone`` module).

    Parameters
    ----------
    body : nn.Module
    fpn : FPN
    fpn_inputs : sequence of str
    naming : {'seamseg', 'maskrcnn'}
    out_channels : int, optional
        The FPN width (maskrcnn-benchmark's ``backbone.out_channels``).
    """

    def __init__(self, body, fpn, fpn_inputs=(), naming='seamseg', out_channels=None):
        super().__init__()
        self.fpn_inputs = list(fpn_inputs)
        self.body_name = 'backbone' if naming == 'seamseg' else 'body'
        self.add_module(self.body_name, body)
        self.fpn = fpn
        self.out_channels = out_channels

    def forward(self, x):
        feats = getattr(self, self.body_name)(x)
        return self.fpn([feats[name] for name in self.fpn_inputs])
