"""YOLOv3 weights files in, with a report of what loaded (GluonCV ``.params`` unchanged;
docs/checkpoints.md, "GluonCV YOLOv3").

Where Gluon's ``net.load_parameters`` fills everything or stops at the first problem with an
``AssertionError`` or a traceback, the file is matched key for key with the network's
``save_parameters`` names (:func:`gluontrain.core.load_report.compare`), and a file that does
not fit is one ``WeightsLoadError`` line saying what it looks like and what to pass instead.
Gluon's ``allow_missing`` / ``ignore_extra`` keep their meaning; a wrong shape is always refused.
``what`` (the argument, ``'--resume'``) starts and ``fix`` (what to pass instead) ends every
error line.
"""
import collections
import hashlib
import os
import pickle
import zipfile

import mxnet as mx

from ...core import checkpoint as ckpt_io
from ...core.mxparams import ParamsFormatError, read_params_bytes
from ...core.load_report import (WeightsLoadError, check, compare, group_keys, guess_origin,
                                 warn_nonfinite)
from ...yolo3.layout import base_mapping as layout_base_mapping
from ...yolo3.layout import check_same_network, describe  # noqa: F401 (re-exported)
from ...yolo3.anchors import check_anchors, file_anchors

__all__ = ['read_params', 'check_params_bytes', 'check_params_file', 'target_shapes',
           'describe', 'compare_params', 'load_params', 'load_base', 'sha1_of', 'net_anchors']

# ------------------------------------------------------------------ reading a file
class _Stub:
    """Whatever a foreign pickle references: built from anything, doing nothing."""

    def __new__(cls, *_args, **_kwargs):
        return super().__new__(cls)

    def __init__(self, *_args, **_kwargs):
        pass

    def __setstate__(self, _state):
        pass


class _KeysOnly(pickle.Unpickler):
    """Reads a ``torch.save`` pickle for its dict keys only: no class of the file is ever
    resolved (every global is :class:`_Stub`), no tensor data is read."""

    def find_class(self, module, name):
        if (module, name) in (('collections', 'OrderedDict'), ('builtins', 'dict')):
            return collections.OrderedDict
        return _Stub

    def persistent_load(self, pid):
        return None


def _torch_keys(path):
    """The tensor names of a ``torch.save`` zip (a state_dict, or one under 'state_dict' /
    'model'), or ``[]`` when they cannot be read."""
    try:
        with zipfile.ZipFile(path) as archive:
            name = next(n for n in archive.namelist() if n.endswith('/data.pkl'))
            obj = _KeysOnly(archive.open(name)).load()
    except Exception:  # pylint: disable=broad-except
        # only for the error message: an unreadable file is described without its keys
        return []
    if isinstance(obj, dict):
        for inner in ('state_dict', 'model'):
            if isinstance(obj.get(inner), dict):
                obj = obj[inner]
                break
        return [k for k in obj if isinstance(k, str)]
    return []


def read_params(path, what, fix):
    """``{name: NDArray}`` of an MXNet ``.params`` file (``save_parameters`` / ``nd.save``) or of
    a gluontrain ``{prefix}_last.ckpt``'s weights.

    Raises
    ------
    FileNotFoundError
        ``path`` does not exist.
    WeightsLoadError
        One line for an empty, truncated or foreign file (a PyTorch file says what its keys
        look like), or an ``nd.save`` list without names.
    """
    if not os.path.isfile(path):
        raise FileNotFoundError('{} {} does not exist; {}'.format(what, path, fix))
    if os.path.getsize(path) == 0:
        raise WeightsLoadError('{} {} is not an MXNet .params file: it is empty (0 bytes, an '
                               'interrupted copy or save?); {}'.format(what, path, fix))
    try:
        kind = ckpt_io.file_kind(path)
    except ValueError:
        with open(path, 'rb') as f:
            head = f.read(8)
        raise WeightsLoadError('{} {} is not an MXNet .params file (it starts with {!r}, not '
                               "MXNet's NDArray magic); {}".format(what, path, head, fix)) \
            from None
    if kind == ckpt_io.TORCH_WEIGHTS:
        origin = guess_origin(_torch_keys(path))
        raise WeightsLoadError('{} {} is not an MXNet .params file: it is a PyTorch (torch.save) '
                               'file{}, which a GluonCV YOLOv3 cannot load; {}'.format(
                                   what, path, ', ' + origin if origin else '', fix))
    blob = path
    if kind == ckpt_io.CHECKPOINT:
        # a full checkpoint's weights are the bytes save_parameters wrote
        try:
            payload = ckpt_io.load_checkpoint(path)
        except ValueError:
            # another pickle, refused before any of it runs (load_checkpoint's unpickler)
            raise WeightsLoadError('{} {} is not an MXNet .params file: it is a pickle that is '
                                   'no gluontrain checkpoint (a legacy torch.save file, or '
                                   "another program's); {}".format(what, path, fix)) from None
        if ckpt_io.checkpoint_writer(payload) == 'torch':
            raise WeightsLoadError(
                "{} {} is a checkpoint of the PyTorch backend (its weights are a torch.save "
                "archive, which MXNet cannot read); pass that run's {{prefix}}_best.params "
                "(MXNet .params, which both backends read), or train with --backend torch"
                .format(what, path))
        blob = payload['params']
    if blob is path:
        with open(path, 'rb') as f:
            blob = f.read()
    check_params_bytes(blob, path, what, fix)
    try:
        arrays = mx.nd.load_frombuffer(bytes(blob))
    except mx.base.MXNetError as e:
        detail = str(e).strip().splitlines()[-1].replace('MXNetError: ', '')
        raise WeightsLoadError('{} {} is not an MXNet .params file that can be read: it is '
                               'truncated or corrupt ({}); {}'.format(what, path, detail[:160],
                                                                      fix)) from None
    if not isinstance(arrays, dict):
        raise WeightsLoadError('{} {} holds an unnamed list of {} arrays (nd.save of a list), not '
                               'named parameters; {}'.format(what, path, len(arrays), fix))
    return arrays


def check_params_bytes(data, path, what, fix=''):
    """Refuse in one ``WeightsLoadError`` line bytes that are not a well-formed ``.params``
    file, before MXNet's loader allocates whatever a corrupt header claims (gigabytes for a few
    random bytes); :func:`gluontrain.core.mxparams.read_params_bytes` walks it without copying.
    """
    try:
        read_params_bytes(data, path, copy=False)
    except ParamsFormatError as e:
        detail = str(e)[len(path):].strip(' :') if str(e).startswith(path) else str(e)
        raise WeightsLoadError('{} {} is not an MXNet .params file that can be read: it is '
                               'truncated or corrupt ({}){}'.format(
                                   what, path, detail[:200], '; ' + fix if fix else '')) from None


def check_params_file(path, what):
    """:func:`check_params_bytes` of the file ``path``."""
    with open(path, 'rb') as f:
        check_params_bytes(f.read(), path, what)


# ------------------------------------------------------------------ the network's side
def target_shapes(net, data_shape=64):
    """``{name: shape}`` of every parameter, as ``save_parameters`` names them.

    Shapes Gluon has not inferred yet (0 in ``param.shape``) come from the symbolic graph at a
    square ``data_shape`` input, so a file's shapes are checked before anything runs; where the
    graph cannot be built, the declared shapes stay.
    """
    params = net._collect_params_with_prefix()
    shapes = {k: tuple(p.shape or ()) for k, p in params.items()}
    if all(s and 0 not in s for s in shapes.values()):
        return shapes
    try:
        out = net(mx.sym.var('data'))
        sym = mx.sym.Group(list(out)) if isinstance(out, (list, tuple)) else out
        arg, _, aux = sym.infer_shape(data=(1, 3, data_shape, data_shape))
        inferred = dict(zip(sym.list_arguments(), arg))
        inferred.update(zip(sym.list_auxiliary_states(), aux))
    except Exception:  # pylint: disable=broad-except
        # not a network of image input: unknown dimensions stay 0 (matched as wildcards)
        return shapes
    return {k: tuple(inferred.get(p.name) or shapes[k]) for k, p in params.items()}


def _counts(report):
    """``loaded N of M tensors (a missing, b unexpected, c wrong shape)``, without the file."""
    return 'loaded {} of {} tensors ({} missing, {} unexpected, {} wrong shape)'.format(
        len(report.loaded), report.total, len(report.missing), len(report.unexpected),
        len(report.mismatched))


def _wildcards(target, file_shapes, mapping):
    """Declared shapes with unknown (0) dimensions take the file's shape where they agree."""
    out = {}
    for key, shape in target.items():
        other = file_shapes.get(mapping.get(key, key))
        if 0 in shape and other is not None and len(other) == len(shape) and all(
                a in (0, b) for a, b in zip(shape, other)):
            shape = tuple(other)
        out[key] = shape
    return out


def compare_params(net, arrays, source, data_shape=64):
    """``(LoadReport, {target key: file key})`` of loading ``arrays`` into ``net``, by
    ``save_parameters`` names; a shared parameter loads from any of its names (the mapping)."""
    params = net._collect_params_with_prefix()
    file_shapes = {k: tuple(v.shape) for k, v in arrays.items()}
    mapping, aliases = {}, collections.defaultdict(list)
    for key, param in params.items():
        aliases[id(param)].append(key)
    for key, param in params.items():
        if key not in file_shapes:
            found = [k for k in aliases[id(param)] if k in file_shapes]
            if found:
                mapping[key] = found[0]
    target = _wildcards(target_shapes(net, data_shape), file_shapes, mapping)
    return compare(target, file_shapes, source, mapping=mapping), mapping


def net_anchors(net):
    """The ``--anchors`` text of ``net``'s ``yolo_outputs.N.anchors`` constants (their value
    when not initialised yet), or None for a network without them."""
    values = {}
    for key, param in net._collect_params_with_prefix().items():
        if key.endswith('.anchors'):
            # pylint: disable=protected-access
            values[key] = param.data() if param._data is not None else getattr(param, 'value',
                                                                                None)
    return file_anchors(values)


def _fill(net, arrays, report, mapping, ctx, skip=()):
    params = net._collect_params_with_prefix()
    for key in report.loaded:
        if key in skip:
            # the network keeps its own value (a Constant not initialised yet takes it now)
            if params[key]._data is None:  # pylint: disable=protected-access
                params[key]._load_init(params[key].value, ctx)
            continue
        # what Gluon's load_parameters does per parameter (also finishes a deferred init)
        params[key]._load_init(arrays[mapping.get(key, key)], ctx)


def load_params(net, path, what, fix, ctx=None, allow_missing=False, ignore_extra=False,
                arrays=None, data_shape=64, anchors='file'):
    """Load a weights file into ``net`` and return the ``LoadReport``.

    Parameters
    ----------
    net : gluon.HybridBlock
        Built (e.g. ``get_model(name, pretrained=False, pretrained_base=False)``); its
        parameters may be uninitialised.
    path : str
        The file, as the user gave it (the report's source).
    ctx : mx.Context or list, optional
        As Gluon's ``load_parameters``.
    allow_missing, ignore_extra : bool
        Gluon's: accept parameters the file lacks / file keys the network lacks (reported).
    arrays : dict, optional
        The file's arrays when already read (:func:`read_params`).
    data_shape : int
        Input side for :func:`target_shapes`.
    anchors : {'file', 'same', 'network'}
        As :func:`gluontrain.torch.yolo3.weights.load_arrays` (docs/checkpoints.md, "Anchors").

    Raises
    ------
    WeightsLoadError
        Another YOLOv3 (other base or classes), an ImageNet base, a file that fills nothing,
        or tensors the flags do not allow; ``FileNotFoundError`` for no file.
    """
    if arrays is None:
        arrays = read_params(path, what, fix)
    if any(k.startswith(('arg:', 'aux:')) for k in arrays):
        raise WeightsLoadError(
            '{} {} is the parameter file of an exported model (arg:/aux: keys, written by '
            'net.export), not save_parameters weights; give it as --exported-params with its '
            'model-symbol.json as --symbol, or {}'.format(what, path, fix))
    report, mapping = compare_params(net, arrays, path, data_shape)
    if arrays and not report.loaded and not any('.' in k for k in arrays):
        # Gluon's "legacy" load adds the network's prefix; a YOLOv3's stages keep their base
        # network's prefix (mobilenet0_...), numbered per process: no file of this kind fits
        raise WeightsLoadError(
            '{} {} holds parameters under their global names ({}...: collect_params().save), '
            'which depend on how many networks the writing process built; save the network '
            'with net.save_parameters, or {}'.format(what, path, sorted(arrays)[0], fix))
    check_same_network(report, what, fix, {k: tuple(v.shape) for k, v in arrays.items()},
                       lambda: target_shapes(net, data_shape), _counts(report), ignore_extra)
    check(report, what, fix, allow_partial=allow_missing)
    if report.mismatched:
        # allow_missing accepts what is absent, never what does not fit (Gluon asserts)
        check(report, what, fix, allow_partial=False)
    if report.unexpected and not ignore_extra:
        raise WeightsLoadError('{} {}: {}; the network has no {}; {}'.format(
            what, path, _counts(report), ', '.join(_groups(report.unexpected)), fix))
    report.anchors = file_anchors(arrays)  # the file's, as --anchors text (None: none)
    keep_own = not check_anchors(report.anchors, net_anchors(net), anchors, what, path)
    warn_nonfinite({k: arrays[mapping.get(k, k)].asnumpy() for k in report.loaded},
                   report.loaded, what, path)
    _fill(net, arrays, report, mapping, ctx,
          skip=[k for k in report.loaded if k.endswith('.anchors')] if keep_own else ())
    return report


def _groups(keys, limit=4):
    groups = group_keys(keys)
    return groups[:limit] + (['...'] if len(groups) > limit else [])


def sha1_of(path, chunk=1 << 22):
    """Hex SHA-1 of a file (what GluonCV's model store checks)."""
    digest = hashlib.sha1()
    with open(path, 'rb') as f:
        for block in iter(lambda: f.read(chunk), b''):
            digest.update(block)
    return digest.hexdigest()


def base_mapping(net):
    """``{yolo3 key: base key}`` of the base network's layers inside ``net.stages``: layer
    ``k`` of stage ``i`` is ``features.{k + len(earlier stages)}``."""
    return layout_base_mapping(net._collect_params_with_prefix(),
                               [len(stage) for stage in net.stages])


def load_base(net, path, what, fix, data_shape=64):
    """Load GluonCV's ImageNet base weights (``darknet53-*.params``...) into ``net.stages``,
    as ``get_model(name, pretrained_base=True)``, with a report (``total``: the stage tensors).

    Every stage parameter must be in the file with its shape; the classifier (``output.*``) is
    reported as unused; any other extra key is refused, as Gluon refuses it.
    """
    arrays = read_params(path, what, fix)
    mapping = base_mapping(net)
    shapes = target_shapes(net, data_shape)
    file_shapes = {k: tuple(v.shape) for k, v in arrays.items()}
    target = _wildcards({k: shapes[k] for k in mapping}, file_shapes, mapping)
    report = compare(target, file_shapes, path, mapping=mapping)
    check(report, what, fix)
    extra = [k for k in report.unexpected if not k.startswith('output.')]
    if extra:
        raise WeightsLoadError('{} {}: {}; the base network has no {}; {}'.format(
            what, path, _counts(report), ', '.join(_groups(extra)), fix))
    _fill(net, arrays, report, mapping, None)
    return report
