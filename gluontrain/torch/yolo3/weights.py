"""GluonCV ``.params`` into and out of the PyTorch YOLOv3, without MXNet, with a report
(docs/checkpoints.md, "GluonCV YOLOv3").

The state_dict keys are gluoncv's ``save_parameters`` names except BatchNorm's ``gamma`` /
``beta`` (PyTorch's ``weight`` / ``bias``); ``num_batches_tracked`` is never expected in a file.
:func:`save_params` writes what ``net.save_parameters`` would, so gluoncv's ``load_parameters``
accepts it. Loaders return a :class:`~gluontrain.core.load_report.LoadReport` and raise
``FileNotFoundError`` or a one-line ``WeightsLoadError``; ``what`` / ``fix`` start and end
their error lines.
"""
import collections
import os

import torch
from torch import nn

from ...core import checkpoint as ckpt_io
from ...core import mxparams
from ...core.load_report import WeightsLoadError, check, compare, group_keys, warn_nonfinite
from ...yolo3.anchors import check_anchors, file_anchors
from ...yolo3.layout import (base_mapping, check_same_network, find_pretrained_base,
                                  pretrained_base_lines)
from ..distributed import unwrap_model
from ..weights import apply_report, compare_state_dict

__all__ = ['gluon_names', 'to_gluon_key', 'to_torch_key', 'gluon_arrays', 'load_params',
           'load_arrays', 'save_params', 'load_base', 'load_pretrained_base', 'NOT_IN_FILE']

#: torch buffers a Gluon file never has
NOT_IN_FILE = ('num_batches_tracked',)
_TO_GLUON = {'weight': 'gamma', 'bias': 'beta'}
_TO_TORCH = {v: k for k, v in _TO_GLUON.items()}
_DEFAULT_FIX = ('pass a .params file written by GluonCV (net.save_parameters) or by '
                'gluontrain for this --network and class list')
_BASE_FIX = ("pass GluonCV's ImageNet classifier of this --network (get_model(network)"
             '.save_parameters, as the model store holds it)')


def _split(key):
    head, _, leaf = key.rpartition('.')
    return head + '.' if head else '', leaf


def to_gluon_key(key, norm_prefixes):
    """The ``save_parameters`` name of state_dict key ``key`` (None: not in a Gluon file);
    ``norm_prefixes``: ``'<module path>.'`` of every BatchNorm (:func:`gluon_names`)."""
    head, leaf = _split(key)
    if head in norm_prefixes:
        if leaf in NOT_IN_FILE:
            return None
        return head + _TO_GLUON.get(leaf, leaf)
    return key


def to_torch_key(key, norm_prefixes):
    """The state_dict key of the ``save_parameters`` name ``key`` (inverse of
    :func:`to_gluon_key`)."""
    head, leaf = _split(key)
    if head in norm_prefixes:
        return head + _TO_TORCH.get(leaf, leaf)
    return key


def gluon_names(model):
    """``{state_dict key: save_parameters name or None}`` of ``model``, in state_dict order
    (which is Gluon's order of the same network)."""
    norms = {name + '.' for name, mod in unwrap_model(model).named_modules()
             if isinstance(mod, nn.modules.batchnorm._BatchNorm)}
    return collections.OrderedDict((k, to_gluon_key(k, norms))
                                   for k in unwrap_model(model).state_dict())


def gluon_arrays(model):
    """``{save_parameters name: numpy array}`` of ``model``'s weights (CPU copies)."""
    state = unwrap_model(model).state_dict()
    return collections.OrderedDict(
        (name, state[key].detach().cpu().numpy()) for key, name in gluon_names(model).items()
        if name is not None)


def _read(path, what, fix):
    path = os.fspath(path)
    if os.path.isdir(path):
        raise WeightsLoadError('{} {} is a folder, not a .params file; {}'.format(what, path,
                                                                                 fix))
    if not os.path.isfile(path):
        raise FileNotFoundError('{} {} does not exist; {}'.format(what, path, fix))
    if os.path.getsize(path) == 0:
        raise WeightsLoadError('{} {} is empty (0 bytes; an interrupted copy or save?); {}'
                               .format(what, path, fix))
    with open(path, 'rb') as f:
        head = f.read(8)
    if head[:4] == b'PK\x03\x04':
        raise WeightsLoadError('{} {} is a PyTorch (torch.save) file, not GluonCV .params; {}'
                               .format(what, path, fix))
    if head[:1] == b'\x80':
        try:
            # a gluontrain MXNet checkpoint's weights are the bytes save_parameters wrote
            return mxparams.read_params_bytes(ckpt_io.load_checkpoint(path)['params'], path)
        except (ValueError, KeyError, TypeError):
            raise WeightsLoadError('{} {} is a pickle, not GluonCV .params (and no gluontrain '
                                   'MXNet checkpoint); {}'.format(what, path, fix)) from None
    try:
        return mxparams.read_params(path)
    except mxparams.ParamsFormatError as e:
        raise WeightsLoadError('{} {}; {}'.format(what, e, fix)) from None


def load_arrays(model, arrays, source, what='--params', fix=_DEFAULT_FIX, allow_missing=False,
                ignore_extra=False, logger=None, anchors='file'):
    """Fill ``model`` from ``arrays`` ``{save_parameters name: array}`` read from ``source``.

    Parameters
    ----------
    allow_missing, ignore_extra : bool
        Gluon's ``load_parameters`` flags: accept tensors the file lacks / file tensors the
        model lacks (both reported). A wrong shape is refused either way.
    anchors : {'file', 'same', 'network'}
        A file whose ``yolo_outputs.N.anchors`` are not the model's: ``'file'`` loads them
        (Gluon's ``load_parameters``), ``'same'`` refuses it (training), ``'network'`` keeps the
        model's (``--transfer`` with ``--anchors``); :func:`gluontrain.yolo3.anchors.check_anchors`.
    """
    if not isinstance(arrays, dict):
        raise WeightsLoadError('{} {} holds an unnamed list of {} arrays (nd.save of a list), '
                               'not named parameters; {}'.format(what, source, len(arrays), fix))
    if any(k.startswith(('arg:', 'aux:')) for k in arrays):
        raise WeightsLoadError('{} {} is the parameter file of an exported model (arg:/aux: '
                               'keys, net.export), not save_parameters weights; {}'.format(
                                   what, source, fix))
    names = gluon_names(model)
    mapping = {k: v for k, v in names.items() if v is not None and v != k}
    state = collections.OrderedDict((k, torch.from_numpy(v)) for k, v in arrays.items()
                                    if v is not None)
    report, state = compare_state_dict(model, state, source, what, fix, mapping, NOT_IN_FILE)
    check_same_network(
        report, what, fix, {k: tuple(v.shape) for k, v in arrays.items() if v is not None},
        lambda: {names[k]: tuple(v.shape) for k, v in unwrap_model(model).state_dict().items()
                 if names[k] is not None},
        'loaded {} of {} tensors'.format(len(report.loaded), report.total), ignore_extra)
    check(report, what, fix, allow_partial=allow_missing, allow_unexpected=ignore_extra)
    if report.mismatched:
        check(report, what, fix)  # missing may be allowed, a wrong shape never
    current = unwrap_model(model).state_dict()
    report.anchors = file_anchors(arrays)  # the file's, as --anchors text (None: none)
    if not check_anchors(report.anchors, file_anchors(current), anchors, what, source):
        state = collections.OrderedDict(
            (k, current[k].detach().cpu() if k.endswith('.anchors') and k in current else v)
            for k, v in state.items())
    warn_nonfinite({k: v.numpy() for k, v in state.items()}, report.loaded, what, source)
    apply_report(model, state, report)
    if logger is not None:
        logger.info('%s', report.format())
    return report


def load_params(model, path, what='--params', fix=_DEFAULT_FIX, allow_missing=False,
                ignore_extra=False, logger=None, anchors='file'):
    """Load a GluonCV ``.params`` file (or a gluontrain MXNet checkpoint's weights) into the
    PyTorch YOLOv3 ``model``; arguments as :func:`load_arrays`."""
    return load_arrays(model, _read(path, what, fix), os.fspath(path), what, fix,
                       allow_missing, ignore_extra, logger, anchors)


def save_params(model, path):
    """Write ``model``'s weights as ``net.save_parameters`` does (Gluon names and order,
    float32 as held), atomically."""
    mxparams.write_params(path, gluon_arrays(model))


def load_base(model, path, what='the pretrained base', fix=_BASE_FIX, logger=None):
    """Load GluonCV's ImageNet classifier (``darknet53-*.params``...) into the stages of
    ``model``, as ``get_model(name, pretrained_base=True)`` does.

    Every stage tensor must be in the file under its ``features.N`` name
    (:func:`gluontrain.yolo3.layout.base_mapping`) with its shape; the classifier
    (``output.*``) is reported as unused, any other extra key refused. The report's ``total``
    counts the stage tensors.
    """
    path = os.fspath(path)
    arrays = _read(path, what, fix)
    if not isinstance(arrays, dict):
        raise WeightsLoadError('{} {} holds an unnamed list of {} arrays (nd.save of a list), '
                               'not named parameters; {}'.format(what, path, len(arrays), fix))
    net = unwrap_model(model)
    names = gluon_names(net)
    to_base = base_mapping([n for n in names.values() if n], [len(s) for s in net.stages])
    state = net.state_dict()
    target = {k: tuple(v.shape) for k, v in state.items() if k.startswith('stages.')}
    mapping = {k: to_base[names[k]] for k in target if names[k] in to_base}
    file_shapes = {k: tuple(v.shape) for k, v in arrays.items() if v is not None}
    report = compare(target, file_shapes, path, mapping=mapping, ignore=NOT_IN_FILE)
    check(report, what, fix)
    extra = [k for k in report.unexpected if not k.startswith('output.')]
    if extra:
        groups = group_keys(extra)
        raise WeightsLoadError('{} {}: loaded {} of {} tensors ({}); the base network has no {}; '
                               '{}'.format(what, path, len(report.loaded), report.total,
                                           report._counts(),  # pylint: disable=protected-access
                                           ', '.join(groups[:4] + ['...'] * (len(groups) > 4)),
                                           fix))
    used = {mapping.get(k, k): arrays[mapping.get(k, k)] for k in report.loaded}
    warn_nonfinite(used, used, what, path)
    apply_report(net, {k: torch.from_numpy(v) for k, v in used.items()}, report)
    if logger is not None:
        logger.info('%s', report.format())
    return report


def load_pretrained_base(model, network, path=''):
    """The MXNet backend's ``load_pretrained_base``: the model store's ImageNet ``network``
    file (under ``$MXNET_HOME/models`` or downloaded, as gluoncv) into ``model``'s stages.

    Returns the training log's lines: ``pretrained base: `` and the report (a note when the file
    is not the store's release). Raises ``ValueError`` in one line: no file and no download, or
    a file that does not fit (naming where the store expects it and ``--no-pretrained-base``).
    """
    given = bool(path)
    path, what, fix = find_pretrained_base(network, path)
    return pretrained_base_lines(load_base(model, path, what, fix), path, network, given)
