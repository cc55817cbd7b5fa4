"""Detectron's Caffe2 ImageNet bodies (``R-50.pkl``, ``R-101.pkl``, ``X-101-32x8d.pkl``,
``X-101-64x4d.pkl``) as the detector's ``MODEL.WEIGHT``, named as maskrcnn-benchmark names them.

maskrcnn-benchmark's ``Checkpointer`` hands a ``.pkl`` to ``load_c2_format``
(``utils/c2_model_loading.py``): the pickle's ``blobs`` (or the bare dict) are renamed by a
chain of string replacements (``_rename_weights_for_resnet``), ``*_momentum`` blobs skipped,
and ``align_and_update_state_dicts`` gives each model key the renamed blob that is its longest
suffix. For an ImageNet body file that amounts to the table below; :func:`c2_to_maskrcnn_names`
computes it directly from the blob name (tested equal, blob for blob, to the reference's own
functions run on the full blob lists: ``tests/fixtures/c2/c2_names_*.json``).

=====================================  ========================================================
Caffe2 blob                            body key (caller adds ``backbone.body.``)
=====================================  ========================================================
``conv1_w``                            ``stem.conv1.weight``
``res_conv1_bn_s`` / ``_b``            ``stem.bn1.weight`` / ``.bias``
``res{s}_{i}_branch2{a,b,c}_w``        ``layer{s-1}.{i}.conv{1,2,3}.weight``
``res{s}_{i}_branch2{a,b,c}_bn_s/_b``  ``layer{s-1}.{i}.bn{1,2,3}.weight`` / ``.bias``
``res{s}_0_branch1_w``                 ``layer{s-1}.0.downsample.0.weight``
``res{s}_0_branch1_bn_s`` / ``_b``     ``layer{s-1}.0.downsample.1.weight`` / ``.bias``
``*_momentum``                         skipped by the reference
``conv1_b``                            renamed ``conv1.bias``: no model key ends with it (the
                                       stem convolution has no bias), unused
``fc1000_{w,b}``, ``pred_{w,b}``       renamed ``fc1000.*``: the classifier, unused
=====================================  ========================================================

Not in the file: the ``running_mean`` / ``running_var`` buffers of the body's
``FrozenBatchNorm2d``s (Detectron folds batch-norm statistics into AffineChannel's scale and
bias). maskrcnn-benchmark leaves them at their initial 0 and 1 (its "NO-MATCHING" log lines), so
its frozen norm computes exactly ``x * weight + bias``; so does the detector's body
(:mod:`.detector`, ``FrozenBatchNorm2d`` of :mod:`gluontrain.torch.backbone`, eps 0) when its
statistics keep their initial values: load with ``running_mean`` / ``running_var`` ignored.

The file is read by a restricted unpickler that rebuilds numpy arrays and nothing else: a
pickle that names any other global is refused, unexecuted, with one line.
"""
import pickle
import re
from collections import OrderedDict

import numpy as np
import torch

from ....core.load_report import WeightsLoadError, group_keys

__all__ = ['C2_CONV_BODIES', 'C2Notes', 'load_c2_file', 'c2_to_maskrcnn_names',
           'c2_body_state_dict', 'is_c2_file', 'group_c2_names']

#: ``MODEL.BACKBONE.CONV_BODY`` values whose ``.pkl`` maskrcnn-benchmark converts (its
#: ``C2_FORMAT_LOADER`` FPN entries; the ``-C4``/``-C5`` ones put res5 in the box head, which
#: this detector does not have).
C2_CONV_BODIES = ('R-50-FPN', 'R-50-FPN-RETINANET', 'R-101-FPN', 'R-101-FPN-RETINANET',
                  'R-152-FPN')

_FIX = ('MODEL.WEIGHT must be a Detectron ImageNet body .pkl (R-50.pkl, R-101.pkl, '
        'X-101-32x8d.pkl from dl.fbaipublicfiles.com/detectron/ImageNetPretrained) or a '
        'maskrcnn-benchmark / gluontrain .pth')

# What a numpy array's pickle needs, under numpy 1's and 2's module names. Python 2 files
# reference numpy.core.*; Python 3 protocol-2 pickles of bytes add _codecs.encode.
_NUMPY_GLOBALS = {
    (mod, name) for mod in ('numpy.core.multiarray', 'numpy._core.multiarray')
    for name in ('_reconstruct', 'scalar')} | {
    (mod, '_frombuffer') for mod in ('numpy.core.numeric', 'numpy._core.numeric')} | {
    ('numpy', 'ndarray'), ('numpy', 'dtype')}


def _latin1_encode(text, encoding='utf-8', errors='strict'):
    # protocol-2 pickles rebuild bytes as _codecs.encode(str, 'latin1'); no other codec
    if encoding != 'latin1' or not isinstance(text, str):
        raise pickle.UnpicklingError('_codecs.encode with {!r}'.format(encoding))
    return text.encode('latin1', errors)


class _RefusedGlobal(pickle.UnpicklingError):
    """A pickle naming a global that is no part of a numpy array."""


class _C2Unpickler(pickle.Unpickler):
    """Resolves only the globals of numpy arrays, so a hostile file cannot make unpickling
    call anything else (``os.system`` through ``__reduce__``)."""

    def find_class(self, module, name):
        if (module, name) in _NUMPY_GLOBALS or (
                module.startswith('numpy') and name.endswith('DType') and name[:1].isupper()):
            return super().find_class(module, name)
        if (module, name) == ('_codecs', 'encode'):
            return _latin1_encode
        raise _RefusedGlobal('{}.{}'.format(module, name))


def is_c2_file(path):
    """Whether ``MODEL.WEIGHT`` names a Caffe2 pickle: maskrcnn-benchmark's test, the
    ``.pkl`` suffix (``Checkpointer._load_file``)."""
    return str(path).endswith('.pkl')


def _error(path, what):
    return WeightsLoadError('MODEL.WEIGHT {} {}; {}'.format(path, what, _FIX))


def _unpickle(path):
    try:
        f = open(path, 'rb')  # pylint: disable=consider-using-with
    except IsADirectoryError:
        raise _error(path, 'is a directory, not a file') from None
    except FileNotFoundError:
        raise FileNotFoundError('MODEL.WEIGHT {} does not exist; {}'.format(path, _FIX)) from None
    with f:
        head = f.read(4)
        if not head:
            raise _error(path, 'is empty (0 bytes)')
        if head == b'PK\x03\x04':
            raise _error(path, 'is a PyTorch zip archive, not a Caffe2 pickle (give it a .pth '
                         'name)')
        f.seek(0)
        try:
            # Detectron's files were written by Python 2: its str blobs decode as latin1 bytes
            return _C2Unpickler(f, encoding='latin1').load()
        except _RefusedGlobal as exc:
            raise _error(path, 'is refused: its pickle calls {}, which no Caffe2 weights file '
                         'holds (only numpy arrays are rebuilt; open files you trust)'.format(
                             exc)) from None
        except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError,
                IndexError, KeyError, ImportError, UnicodeError, MemoryError) as exc:
            reason = ' '.join(str(exc).split()) or type(exc).__name__
            raise _error(path, 'is not a readable Caffe2 pickle (truncated or another format: '
                         '{})'.format(reason[:200])) from None


def load_c2_file(path):
    """Read a Detectron ``.pkl`` into float32 tensors under their Caffe2 names.

    Parameters
    ----------
    path : str
        A pickle of ``{'blobs': {name: ndarray}, ...}`` (Detectron's detection models) or of a
        bare ``{name: ndarray}`` (its ImageNet models), as Python 2 wrote them.

    Returns
    -------
    OrderedDict
        ``{Caffe2 name: torch.Tensor}``, names sorted (the reference's order), float32.

    Raises
    ------
    FileNotFoundError
        When ``path`` does not exist.
    WeightsLoadError
        One line naming the file: a pickle that calls anything but numpy's array
        reconstruction (refused before it runs), a truncated file, not a pickle, a pickle of
        something else than a dict of arrays.
    """
    data = _unpickle(path)
    if isinstance(data, dict) and isinstance(data.get('blobs'), dict):
        data = data['blobs']
    if not isinstance(data, dict):
        raise _error(path, 'holds a {}, not a dict of Caffe2 blobs'.format(type(data).__name__))
    out = OrderedDict()
    for name in sorted(data, key=str):
        value = data[name]
        key = name.decode('latin1') if isinstance(name, bytes) else str(name)
        if not isinstance(value, np.ndarray) or value.dtype.kind not in 'fiub':
            raise _error(path, 'holds {!r} = {}, not a numeric array'.format(
                key, type(value).__name__ if not isinstance(value, np.ndarray) else value.dtype))
        arr = np.ascontiguousarray(value, dtype=np.float32)
        # arrays rebuilt from a pickle's bytes may be read-only views of them
        out[key] = torch.from_numpy(arr if arr.flags.writeable else arr.copy())
    return out


_STEM = {'conv1_w': 'stem.conv1.weight', 'res_conv1_bn_s': 'stem.bn1.weight',
         'res_conv1_bn_b': 'stem.bn1.bias'}
_BLOCK = re.compile(r'^res([2-5])_(\d+)_branch(2[abc]|1)_(w|bn_s|bn_b)$')
_CLASSIFIER = re.compile(r'^(fc1000|pred)_[wb]$')
_PARAM = {'w': 'weight', 'bn_s': 'weight', 'bn_b': 'bias'}
_MOMENTUM = 'optimizer state (maskrcnn-benchmark skips *_momentum blobs)'


def _block_key(stage, block, branch, kind):
    layer = 'layer{}.{}.'.format(int(stage) - 1, int(block))
    if branch == '1':  # the projection shortcut: torchvision's downsample = (conv, norm)
        return layer + 'downsample.{}.{}'.format(0 if kind == 'w' else 1, _PARAM[kind])
    index = 'abc'.index(branch[1]) + 1
    return layer + '{}{}.{}'.format('conv' if kind == 'w' else 'bn', index, _PARAM[kind])


def _check_conv_body(conv_body):
    if conv_body not in C2_CONV_BODIES:
        raise ValueError('MODEL.BACKBONE.CONV_BODY = {!r} has no Caffe2 (.pkl) loader: '
                         'maskrcnn-benchmark converts Detectron bodies for {}'.format(
                             conv_body, ', '.join(C2_CONV_BODIES)))


def c2_to_maskrcnn_names(names, conv_body='R-50-FPN'):
    """maskrcnn-benchmark's body key of each Caffe2 blob name, and why the others are unused.

    Parameters
    ----------
    names : iterable of str
        Caffe2 blob names.
    conv_body : str
        ``MODEL.BACKBONE.CONV_BODY`` (one of :data:`C2_CONV_BODIES`). The ImageNet blobs are
        named alike for every depth; the reference's depth-specific stage names only rename
        FPN blobs, which ImageNet files do not have.

    Returns
    -------
    mapping : OrderedDict
        ``{blob: body key}`` (``stem.conv1.weight``, ``layer1.0.bn1.weight`` ...; the
        detector's keys are these under ``backbone.body.``).
    dropped : OrderedDict
        ``{blob: reason}`` of the blobs no body key takes.

    Raises
    ------
    ValueError
        For a ``conv_body`` the reference has no Caffe2 loader for.
    """
    _check_conv_body(conv_body)
    mapping, dropped = OrderedDict(), OrderedDict()
    for name in names:
        match = _BLOCK.match(name)
        if '_momentum' in name:  # the reference's test: the substring, anywhere
            dropped[name] = _MOMENTUM
        elif name in _STEM:
            mapping[name] = _STEM[name]
        elif match:
            mapping[name] = _block_key(*match.groups())
        elif name == 'conv1_b':
            dropped[name] = ('the stem convolution\'s bias (maskrcnn-benchmark renames it '
                             'conv1.bias, which no model key ends with: its stem convolution '
                             'has no bias)')
        elif _CLASSIFIER.match(name):
            dropped[name] = ('the ImageNet classifier (maskrcnn-benchmark renames it '
                             'fc1000.*, which no model key ends with)')
        else:
            dropped[name] = 'not a ResNet body blob (only ImageNet bodies are converted)'
    return mapping, dropped


def _groups(state_dict):
    """The 3x3 convolutions' group count (ResNeXt cardinality) read off the shapes: the
    ``branch2b`` weight has ``in / groups`` input channels; ``None`` when shapes disagree."""
    found = set()
    for key, value in state_dict.items():
        if key.endswith('.conv2.weight') and value.dim() == 4:
            conv1 = state_dict.get(key[:-len('conv2.weight')] + 'conv1.weight')
            if conv1 is None or conv1.dim() != 4 or value.shape[1] == 0:
                return None
            groups, rest = divmod(conv1.shape[0], value.shape[1])
            if rest:
                return None
            found.add(groups)
    return found.pop() if len(found) == 1 else None


def group_c2_names(names):
    """Caffe2 names sharing all but their last ``_`` part in one string, as
    :func:`gluontrain.core.load_report.group_keys` groups dotted keys
    (``['fc1000_b', 'fc1000_w']`` -> ``['fc1000_{b, w}']``).

    Parameters
    ----------
    names : iterable of str

    Returns
    -------
    list of str
        Sorted.
    """
    # group_keys splits at the last '.': swap '.' and '_' there and back
    swap = str.maketrans('._', '_.')
    return sorted(g.translate(swap) for g in group_keys(n.translate(swap) for n in names))


class C2Notes:
    """What :func:`c2_body_state_dict` converted, for the load report.

    Attributes
    ----------
    source : str
        The file.
    conv_body : str
    blobs : int
        Blobs in the file.
    mapping : OrderedDict
        ``{blob: body key}`` converted.
    dropped : OrderedDict
        ``{blob: reason}`` not converted.
    groups : int or None
        Group count of the 3x3 convolutions read off the shapes (1: ResNet; 32 or 64:
        ResNeXt ``X-101-32x8d`` / ``-64x4d``), ``None`` when it cannot be read.
    not_in_file : str
        What the body has that no Caffe2 file carries, and the reference's values for it.
    """

    NOT_IN_FILE = ('running_mean / running_var of every frozen batch norm: not in a Caffe2 '
                   'file; maskrcnn-benchmark keeps FrozenBatchNorm2d\'s initial 0 / 1, so the '
                   'norm is exactly x * weight + bias')

    def __init__(self, source, conv_body, blobs, mapping, dropped, groups):
        self.source, self.conv_body, self.blobs = str(source), conv_body, int(blobs)
        self.mapping, self.dropped, self.groups = mapping, dropped, groups
        self.not_in_file = self.NOT_IN_FILE

    def summary(self):
        """One line: ``converted 159 of 324 Caffe2 blobs of FILE to R-50-FPN body keys
        (unused, as in maskrcnn-benchmark: 162 *_momentum, conv1_b, fc1000_{b, w})``."""
        line = 'converted {} of {} Caffe2 blobs of {} to {} body keys'.format(
            len(self.mapping), self.blobs, self.source, self.conv_body)
        momentum = [n for n in self.dropped if '_momentum' in n]
        others = group_c2_names([n for n in self.dropped if '_momentum' not in n])
        parts = (['{} *_momentum'.format(len(momentum))] if momentum else []) + others[:4] + (
            ['...'] if len(others) > 4 else [])
        if parts:
            line += ' (unused, as in maskrcnn-benchmark: {})'.format(', '.join(parts))
        if self.groups not in (None, 1):
            line += '; grouped 3x3 convolutions ({} groups: a ResNeXt body)'.format(self.groups)
        return line

    def format(self):
        """The summary, the unused blobs grouped by reason, and what the file lacks."""
        lines, by_reason = [self.summary()], OrderedDict()
        for name, reason in self.dropped.items():
            by_reason.setdefault(reason, []).append(name)
        for reason, names in by_reason.items():
            if reason == _MOMENTUM:  # one line, not one per parameter
                lines.append('{} *_momentum blobs not used: {}'.format(len(names), reason))
            else:
                lines.append('Caffe2 blobs not used: {}:'.format(reason))
                lines += ['  ' + g for g in group_c2_names(names)]
        lines.append('Not in the file: ' + self.not_in_file)
        return '\n'.join(lines)


def c2_body_state_dict(path, conv_body='R-50-FPN'):
    """A Detectron ImageNet ``.pkl`` as maskrcnn-benchmark's body state dict.

    What maskrcnn-benchmark's ``load_c2_format`` + ``load_state_dict`` put into
    ``backbone.body`` (see the module docstring), without the ``backbone.body.`` prefix.

    Parameters
    ----------
    path : str
    conv_body : str
        ``MODEL.BACKBONE.CONV_BODY`` (one of :data:`C2_CONV_BODIES`; ResNeXt files use
        ``R-101-FPN`` with ``MODEL.RESNETS.NUM_GROUPS`` > 1, as SGB's X-101 configs do).

    Returns
    -------
    state_dict : OrderedDict
        ``{body key: float32 tensor}``, e.g. ``stem.conv1.weight``, ``layer1.0.conv1.weight``.
    notes : C2Notes
        What was converted and not (``notes.format()`` for the log; ``notes.groups`` to check
        against ``MODEL.RESNETS.NUM_GROUPS``).

    Raises
    ------
    FileNotFoundError, WeightsLoadError
        As :func:`load_c2_file`; also when no blob of the file is a ResNet body blob.
    ValueError
        For an unsupported ``conv_body``.
    """
    _check_conv_body(conv_body)
    blobs = load_c2_file(path)
    mapping, dropped = c2_to_maskrcnn_names(blobs, conv_body)
    if not mapping:
        shown = ', '.join(group_c2_names(blobs)[:4]) or 'nothing'
        raise _error(path, 'has no Caffe2 ResNet body blob (conv1_w, res2_0_branch2a_w ...) '
                     'among its {} blobs ({})'.format(len(blobs), shown))
    state = OrderedDict((mapping[name], blobs[name]) for name in blobs if name in mapping)
    return state, C2Notes(path, conv_body, len(blobs), mapping, dropped, _groups(state))
