"""ResNet body key names between the references, and loading a body's weights with a report.

Three layouts name the same tensors (the first two are :data:`~.resnet.LAYOUTS`, from which
the key patterns here are made):

- seamseg (``mod1.conv1``, ``mod2.block1.convs.conv1``, ``mod2.block1.proj_conv``; what
  seamseg's ``scripts/utility/convert_pytorch_resnet.py`` writes),
- maskrcnn-benchmark (``stem.conv1``, ``layer1.0.conv1``, ``layer1.0.downsample.0``),
- torchvision (``conv1``, ``layer1.0.conv1``, ``layer1.0.downsample.0``, plus ``fc``).

:func:`rename_body_keys` turns any of them into the naming of a
:class:`~gluontrain.torch.backbone.resnet.ResNet`; :func:`load_body_weights` reads a file
in any of them (or a Detectron C2 ``.pkl``, through the scene-graph recipe's converter) and
fills the body, reporting what loaded.
"""
import re
from collections import OrderedDict

from ..weights import load_state_dict_reported, read_weights_file
from .resnet import LAYOUTS, body_layout

__all__ = ['body_key_scheme', 'rename_body_keys', 'load_body_weights']


def _template(text):
    """A layout name with ``'{}'`` -> its regular expression (the index captured)."""
    return re.escape(text).replace(re.escape('{}'), r'(\d+)')


def _layout_patterns(layout):
    """``(regex, parts)`` of every body key of a :class:`BodyLayout`: ``('stem', module,
    rest)`` or ``(stage 1..4, block 0.., part, rest)``, ``part`` in ``conv<i>``, ``bn<i>``,
    ``proj_conv``, ``proj_bn`` (the layout-free name of the tensor)."""
    stages = '({})'.format('|'.join(re.escape(s) for s in layout.stages[1:]))
    block = r'^{}\.{}\.'.format(stages, _template(layout.block))

    def where(m):
        return layout.stages.index(m[1]), int(m[2]) - layout.first_block

    patterns = [(re.compile(r'^{}\.(conv1|bn1)\.(.+)$'.format(re.escape(layout.stages[0]))),
                 lambda m: ('stem', m[1], m[2]))]
    for kind, name in (('conv', layout.conv), ('bn', layout.norm)):
        patterns.append((re.compile(block + _template(name) + r'\.(.+)$'),
                         lambda m, kind=kind: where(m) + (kind + m[3], m[4])))
    for part, name in zip(('proj_conv', 'proj_bn'), layout.proj):
        patterns.append((re.compile(block + re.escape(name) + r'\.(.+)$'),
                         lambda m, part=part: where(m) + (part, m[3])))
    return patterns


_PATTERNS = {naming: _layout_patterns(layout) for naming, layout in LAYOUTS.items()}
# torchvision: maskrcnn-benchmark's blocks under a stem at the top level (and an ``fc``)
_PATTERNS['torchvision'] = [
    (re.compile(r'^(conv1|bn1)\.(.+)$'), lambda m: ('stem', m[1], m[2]))
] + _PATTERNS['maskrcnn'][1:]
#: The key a layout's stem convolution has (the layout a state_dict is in).
_STEM_KEYS = dict([(naming, layout.stages[0] + '.conv1.') for naming, layout in LAYOUTS.items()]
                  + [('torchvision', 'conv1.weight')])


def _parse(key, scheme):
    for pattern, build in _PATTERNS[scheme]:
        m = pattern.match(key)
        if m:
            return build(m)
    return None


def _format(parts, naming):
    layout = body_layout(naming)
    if parts[0] == 'stem':
        return '{}.{}.{}'.format(layout.stages[0], parts[1], parts[2])
    stage, block, part, rest = parts
    if part.startswith('proj_'):
        inner = layout.proj[part == 'proj_bn']
    else:
        kind = 'conv' if part.startswith('conv') else 'bn'
        inner = (layout.conv if kind == 'conv' else layout.norm).format(part[len(kind):])
    return '{}.{}.{}.{}'.format(layout.stages[stage],
                                layout.block.format(block + layout.first_block), inner, rest)


def body_key_scheme(keys):
    """Which layout a body state_dict uses.

    Parameters
    ----------
    keys : iterable of str

    Returns
    -------
    str or None
        ``'seamseg'``, ``'maskrcnn'`` or ``'torchvision'`` (the one whose stem is present),
        None when no stem key of any layout is there.
    """
    keys = set(keys)
    for scheme, stem in _STEM_KEYS.items():
        if any(k.startswith(stem) for k in keys):
            return scheme
    return None


def rename_body_keys(state_dict, naming, source=None):
    """Rename a body state_dict of any layout to ``naming``.

    A torchvision classifier (``fc.*``) is dropped; other keys that are not body keys of the
    detected layout are kept unchanged (they show up as unexpected in the load report).

    Parameters
    ----------
    state_dict : dict
    naming : str
        A key of :data:`~.resnet.LAYOUTS`.
    source : str, optional
        The layout of ``state_dict``; detected by :func:`body_key_scheme` when None.

    Returns
    -------
    OrderedDict
    """
    source = source or body_key_scheme(state_dict)
    if source is None:
        return OrderedDict(state_dict)
    out = OrderedDict()
    for key, value in state_dict.items():
        if source == 'torchvision' and key.startswith('fc.'):
            continue
        parts = _parse(key, source)
        out[_format(parts, naming) if parts else key] = value
    return out


def _unwrap(state):
    # {'state_dict': ...} (seamseg, torchvision checkpoints), {'model': ...} (detectron)
    for key in ('state_dict', 'model'):
        if isinstance(state, dict) and isinstance(state.get(key), dict):
            state = state[key]
    return state


def load_body_weights(body, path, what='[body] weights', logger=None):
    """Fill a ResNet body from an ImageNet weights file, strictly, with a report.

    Accepts seamseg's, maskrcnn-benchmark's and torchvision's layouts (``{'state_dict':
    ...}`` or ``{'model': ...}`` wrappers, a ``backbone.body.`` prefix), renamed to the body's
    naming. ``num_batches_tracked`` may be absent (InPlaceABN and C2 weights have none).

    Parameters
    ----------
    body : gluontrain.torch.backbone.resnet.ResNet
    path : str
    what : str
        How errors name the file's origin (a config key or option).
    logger : logging.Logger, optional

    Returns
    -------
    gluontrain.core.load_report.LoadReport

    Raises
    ------
    FileNotFoundError, gluontrain.core.load_report.WeightsLoadError
        A missing or unreadable file; keys or shapes that do not fit the body (another
        depth, a ``width_mult``), with the report's first keys.
    """
    fix = ('give a ResNet state_dict of the same depth and width (seamseg, torchvision or '
           'maskrcnn-benchmark layout) or leave it empty')
    state = _unwrap(read_weights_file(path, what, fix))
    if isinstance(state, dict):
        prefix = 'backbone.body.'
        if state and all(k.startswith(prefix) for k in state):
            state = OrderedDict((k[len(prefix):], v) for k, v in state.items())
        state = rename_body_keys(state, body.naming)
    # seamseg loads a body strictly: tensors the body has no place for (a deeper network's
    # blocks) are refused too, not only missing ones
    return load_state_dict_reported(body, state, path, what, fix, logger=logger,
                                    allow_unexpected=False)
