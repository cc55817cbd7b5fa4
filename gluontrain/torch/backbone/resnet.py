"""One ResNet / ResNeXt body for the torch recipes, under either reference's parameter names.

The same network is built in each reference's layout (:data:`LAYOUTS`, data chosen once at
construction), so that each reference's checkpoints load key for key:

=========== ================================== ==========================================
naming      modules                            used by
=========== ================================== ==========================================
'seamseg'   ``mod1`` (``conv1``, ``bn1``,      the two-stage recipe (seamseg's
            ``pool1``), ``mod2..5`` of         ``models/resnet.py`` and
            ``block1..N``, each ``convs``      ``modules/residual.py``)
            (``conv1``, ``bn1`` ...) +
            ``proj_conv`` / ``proj_bn``
'maskrcnn'  ``stem`` (``conv1``, ``bn1``),     the scene-graph recipe (maskrcnn-benchmark's
            ``layer1..4`` of ``0..N-1``, each  ``modeling/backbone/resnet.py`` in
            ``conv1``, ``bn1`` ... +           Scene-Graph-Benchmark)
            ``downsample.0`` / ``.1``
=========== ================================== ==========================================

Depths 18 and 34 use basic blocks (two 3x3), 50/101/152 bottlenecks (1x1, 3x3, 1x1). ResNeXt
is ``groups`` x ``width_per_group`` in the 3x3 convolution (maskrcnn-benchmark's
``NUM_GROUPS`` / ``WIDTH_PER_GROUP``: X-101-32x8d is depth 101, 32 x 8); ``stride_in_1x1``
puts a stage's stride on the first 1x1 convolution (maskrcnn-benchmark's ``STRIDE_IN_1X1``,
the MSRA C2 weights) instead of the 3x3 (seamseg, torchvision, the FAIR ResNeXt weights).

The norm layer is a factory ``norm(channels)``. A norm that carries its own activation
(seamseg's ``BatchNormAct`` family: an ``activation`` attribute) is used as seamseg does: the
block's last norm and the projection norm get the identity, and the block applies the first
norm's activation after the sum. A plain norm (``FrozenBatchNorm2d``, ``nn.BatchNorm2d``,
``nn.GroupNorm``) is followed by ReLU as in maskrcnn-benchmark.

gluontrain adds ``width_mult``: every channel count multiplied (rounded; a ResNeXt's middle
width kept a multiple of ``groups``), so that a CPU run fits in minutes; 1.0 is the
reference network.
"""
from collections import OrderedDict, namedtuple

import torch.nn as nn
import torch.nn.functional as F

from ..twostage.norm import activate

__all__ = ['ARCHITECTURES', 'NAMINGS', 'LAYOUTS', 'BodyLayout', 'body_layout', 'add_module_at',
           'ResidualBlock', 'Stem', 'ResNet', 'make_resnet', 'freeze_stages']

#: depth -> (blocks per stage, bottleneck)
ARCHITECTURES = {
    18: ((2, 2, 2, 2), False),
    34: ((3, 4, 6, 3), False),
    50: ((3, 4, 6, 3), True),
    101: ((3, 4, 23, 3), True),
    152: ((3, 8, 36, 3), True),
}

BodyLayout = namedtuple('BodyLayout', 'stages block first_block conv norm proj '
                        'proj_registered_first shortcut_first')
BodyLayout.__doc__ = """A reference's names of the body (``'{}'`` takes the block's index from
``first_block``, or the 1-based convolution): ``stages`` (stem first), ``block``, ``conv`` /
``norm`` (within a block), ``proj`` (shortcut convolution and norm); ``proj_registered_first`` (its
``state_dict`` order) and ``shortcut_first`` (computed before the convolutions: the order
autograd sums the gradients reaching the input in)."""

#: Each reference's body layout; a new flavour is one more entry.
LAYOUTS = {
    'seamseg': BodyLayout(('mod1', 'mod2', 'mod3', 'mod4', 'mod5'), 'block{}', 1,
                          'convs.conv{}', 'convs.bn{}', ('proj_conv', 'proj_bn'), False, True),
    'maskrcnn': BodyLayout(('stem', 'layer1', 'layer2', 'layer3', 'layer4'), '{}', 0,
                           'conv{}', 'bn{}', ('downsample.0', 'downsample.1'), True, False),
}
NAMINGS = tuple(LAYOUTS)


def body_layout(naming):
    """The :class:`BodyLayout` of ``naming``, or ``ValueError`` naming the known ones."""
    if naming not in LAYOUTS:
        raise ValueError('naming must be one of {}, got {!r}'.format(tuple(LAYOUTS), naming))
    return LAYOUTS[naming]


def add_module_at(parent, dotted, child, container=nn.Sequential):
    """Register ``child`` at the dotted name ``dotted`` under ``parent``, creating the missing
    intermediate modules as empty ``container`` (``convs.conv1``, ``downsample.0``)."""
    *path, name = dotted.split('.')
    for part in path:
        if part not in parent._modules:  # pylint: disable=protected-access
            parent.add_module(part, container())
        parent = parent._modules[part]  # pylint: disable=protected-access
    parent.add_module(name, child)
    return child


def _activation(norm):
    """The activation a seamseg norm-act layer applies, or None for a plain norm."""
    return getattr(norm, 'activation', None)


def _apply(x, norm):
    """The activation after ``norm``: seamseg's by name, ReLU after a plain norm."""
    act = _activation(norm)
    return F.relu(x) if act is None else activate(x, act, norm.activation_param)


def _no_activation(norm):
    if _activation(norm) is not None:
        norm.activation = 'identity'
    return norm


class ResidualBlock(nn.Module):
    """A residual block (basic or bottleneck) under a reference's names.

    Parameters
    ----------
    in_channels, mid_channels, out_channels : int
        ``mid`` is the bottleneck width (basic blocks: ``mid == out``).
    bottleneck : bool
    stride : int
    dilation : int
    groups : int
        Groups of the 3x3 convolution (bottlenecks only).
    stride_in_1x1 : bool
        Bottlenecks: the stride on ``conv1`` (1x1) instead of ``conv2`` (3x3).
    norm : callable
        ``norm(channels) -> nn.Module``.
    naming : str
        A key of :data:`LAYOUTS` (the module names).
    """

    def __init__(self, in_channels, mid_channels, out_channels, bottleneck, stride=1,
                 dilation=1, groups=1, stride_in_1x1=False, norm=nn.BatchNorm2d,
                 naming='seamseg'):
        super().__init__()
        layout = body_layout(naming)
        if not bottleneck and groups != 1:
            raise ValueError('grouped convolutions need bottleneck blocks (depth 50 or more); '
                             'depth 18/34 have basic blocks')
        self.naming, self.bottleneck = naming, bottleneck
        self.shortcut_first = layout.shortcut_first
        if bottleneck:
            s1, s3 = (stride, 1) if stride_in_1x1 else (1, stride)
            specs = [(in_channels, mid_channels, 1, s1, 0, 1, 1),
                     (mid_channels, mid_channels, 3, s3, dilation, dilation, groups),
                     (mid_channels, out_channels, 1, 1, 0, 1, 1)]
        else:
            specs = [(in_channels, mid_channels, 3, stride, dilation, dilation, 1),
                     (mid_channels, out_channels, 3, 1, dilation, dilation, 1)]
        self.layer_names = [(layout.conv.format(i), layout.norm.format(i))
                            for i in range(1, len(specs) + 1)]
        project = stride != 1 or in_channels != out_channels
        self.proj_names = layout.proj if project else None

        def add_projection():
            add_module_at(self, layout.proj[0], nn.Conv2d(in_channels, out_channels, 1,
                                                          stride=stride, bias=False))
            add_module_at(self, layout.proj[1], _no_activation(norm(out_channels)))

        # created (and registered: the state_dict order) where the reference does
        if project and layout.proj_registered_first:
            add_projection()
        last = None
        for (conv, bn), (cin, cout, k, s, pad, dil, grp) in zip(self.layer_names, specs):
            add_module_at(self, conv, nn.Conv2d(cin, cout, k, stride=s, padding=pad,
                                                dilation=dil, groups=grp, bias=False))
            last = add_module_at(self, bn, norm(cout))
        _no_activation(last)
        if project and not layout.proj_registered_first:
            add_projection()

    def _layers(self):
        return [(self.get_submodule(conv), self.get_submodule(bn))
                for conv, bn in self.layer_names]

    def _shortcut(self, x):
        if self.proj_names is None:
            return x
        conv, bn = (self.get_submodule(name) for name in self.proj_names)
        return bn(conv(x))

    def forward(self, x):
        layers = self._layers()
        # each reference's order of the two branches (seamseg: shortcut first, maskrcnn-
        # benchmark: after conv3): autograd sums the gradients reaching x in that order, and
        # a different float summation order drifts a training run apart within a few steps
        residual = self._shortcut(x) if self.shortcut_first else None
        out = x
        for i, (conv, norm) in enumerate(layers):
            out = norm(conv(out))
            if i < len(layers) - 1 and _activation(norm) is None:
                out = F.relu(out)
        if residual is None:
            residual = self._shortcut(x)
        return _apply(out + residual, layers[0][1])


class Stem(nn.Module):
    """7x7/2 convolution, norm, activation, 3x3/2 max-pool (``pool1`` in seamseg's naming;
    no pool when seamseg's first dilation is not 1)."""

    def __init__(self, out_channels, norm, pool=True):
        super().__init__()
        self.conv1 = nn.Conv2d(3, out_channels, 7, stride=2, padding=3, bias=False)
        self.bn1 = norm(out_channels)
        if pool:
            self.pool1 = nn.MaxPool2d(3, stride=2, padding=1)

    def forward(self, x):
        x = self.bn1(self.conv1(x))
        if _activation(self.bn1) is None:
            x = F.relu(x)
        return self.pool1(x) if hasattr(self, 'pool1') else x


def _at(value, i):
    try:
        return value[i]
    except TypeError:
        return value


class ResNet(nn.Module):
    """A ResNet / ResNeXt body; ``forward`` returns an ``OrderedDict`` of every stage's output
    (strides 4, 4, 8, 16, 32) under the naming's stage names (``mod1..mod5`` or ``stem``,
    ``layer1..layer4``); ``out_channels`` the same keys -> channels.

    Parameters
    ----------
    structure : sequence of 4 int
        Blocks per stage.
    bottleneck : bool
    norm : callable
        ``norm(channels)`` (the stem's too unless ``stem_norm``).
    naming : str
        A key of :data:`LAYOUTS` (the module names).
    groups, width_per_group : int
        ResNeXt cardinality and width (1, 64: ResNet).
    stride_in_1x1 : bool
    stem_channels : int
        maskrcnn-benchmark's ``STEM_OUT_CHANNELS``.
    res2_channels : int or None
        Output channels of the first stage (``RES2_OUT_CHANNELS``; None: 256 for
        bottlenecks, 64 for basic blocks).
    dilation : int or sequence of 4 int
        seamseg's dilation (stages with dilation > 1 keep stride 1; the stem loses its pool
        when the first value is not 1).
    width_mult : float
    stem_norm : callable, optional
    conv_init : {'torch', 'maskrcnn'}
        PyTorch's default initialisation (seamseg leaves it) or maskrcnn-benchmark's
        ``kaiming_uniform_(a=1)`` on every convolution.
    """

    def __init__(self, structure, bottleneck, norm=nn.BatchNorm2d, naming='seamseg', groups=1,
                 width_per_group=64, stride_in_1x1=False, stem_channels=64,
                 res2_channels=None, dilation=1, width_mult=1.0, stem_norm=None,
                 conv_init='torch'):
        super().__init__()
        if len(structure) != 4:
            raise ValueError('Expected a structure with four values')
        if dilation != 1 and len(dilation) != 4:
            raise ValueError('If dilation is not 1 it must contain four values')
        if not width_mult > 0:
            raise ValueError('width_mult must be > 0, got {!r}'.format(width_mult))
        if conv_init not in ('torch', 'maskrcnn'):
            raise ValueError("conv_init must be 'torch' or 'maskrcnn', got {!r}".format(conv_init))
        layout = body_layout(naming)
        self.structure, self.bottleneck, self.dilation = tuple(structure), bottleneck, dilation
        self.naming = naming

        def width(c):
            return max(1, int(round(c * width_mult)))

        stem = width(stem_channels)
        names = list(layout.stages)
        self.stage_names = tuple(names)
        self.add_module(names[0], Stem(stem, stem_norm or norm, pool=_at(dilation, 0) == 1))
        self.out_channels = OrderedDict([(names[0], stem)])
        if res2_channels is None:
            res2_channels = 256 if bottleneck else 64
        in_channels = stem
        for stage, num in enumerate(structure):
            out = width(res2_channels * 2 ** stage)
            if bottleneck:
                mid = width(groups * width_per_group * 2 ** stage)
                mid = max(groups, mid // groups * groups)
            else:
                mid = out
            d = _at(dilation, stage)
            blocks = []
            for b in range(num):
                stride = 2 if d == 1 and b == 0 and stage > 0 else 1
                name = layout.block.format(b + layout.first_block)
                blocks.append((name, ResidualBlock(in_channels, mid, out, bottleneck, stride, d,
                                                   groups, stride_in_1x1, norm, naming)))
                in_channels = out
            self.add_module(names[stage + 1], nn.Sequential(OrderedDict(blocks)))
            self.out_channels[names[stage + 1]] = out
        if conv_init == 'maskrcnn':
            for m in self.modules():
                if isinstance(m, nn.Conv2d):
                    nn.init.kaiming_uniform_(m.weight, a=1)

    def forward(self, x):
        outs = OrderedDict()
        for name in self.stage_names:
            x = getattr(self, name)(x)
            outs[name] = x
        return outs


def make_resnet(depth, norm=nn.BatchNorm2d, naming='seamseg', **kwargs):
    """A :class:`ResNet` of a standard depth.

    Parameters
    ----------
    depth : {18, 34, 50, 101, 152}
    norm : callable
    naming : str
        A key of :data:`LAYOUTS` (the module names).
    **kwargs
        The other :class:`ResNet` arguments (``groups``, ``width_per_group``,
        ``stride_in_1x1``, ``dilation``, ``width_mult`` ...).

    Returns
    -------
    ResNet
    """
    if depth not in ARCHITECTURES:
        raise ValueError('ResNet depth {!r} is not one of {}'.format(
            depth, ', '.join(str(d) for d in ARCHITECTURES)))
    structure, bottleneck = ARCHITECTURES[depth]
    return ResNet(structure, bottleneck, norm=norm, naming=naming, **kwargs)


def freeze_stages(body, num_frozen):
    """``requires_grad=False`` on the parameters of the first ``num_frozen`` stages (stem
    first): seamseg's ``num_frozen`` (``mod1..mod<n>``) and maskrcnn-benchmark's
    ``FREEZE_CONV_BODY_AT`` (stem, ``layer1`` ..); 0 or less freezes nothing.

    Only parameters are frozen: norm layers keep their mode (as both references).

    Parameters
    ----------
    body : ResNet
    num_frozen : int
    """
    for name in body.stage_names[:max(0, num_frozen)]:
        for p in getattr(body, name).parameters():
            p.requires_grad_(False)
