"""GluonCV ``.params`` into and out of the PyTorch YOLOv3, without MXNet, with a report.

Names: the torch model's state_dict keys are gluoncv's ``save_parameters`` names except for
BatchNorm, whose ``gamma`` / ``beta`` are PyTorch's ``weight`` / ``bias`` (``running_mean``,
``running_var`` are the same; ``num_batches_tracked`` has no Gluon counterpart and is never
expected in a file). :func:`gluon_names` gives the mapping of a model, :func:`to_gluon_key` /
:func:`to_torch_key` map one key.

:func:`load_params` reads the file with :mod:`gluontrain.core.mxparams` and fills the model
through :func:`gluontrain.torch.weights.load_state_dict_reported` ("loaded N of M tensors",
missing / unexpected keys by prefix, wrong shapes named); a file that does not fit is one
:class:`~gluontrain.core.load_report.WeightsLoadError` line saying what it looks like.
:func:`save_params` writes what ``net.save_parameters`` would, so that
``gluoncv.model_zoo.get_model(name, pretrained=False, pretrained_base=False).load_parameters``
accepts it. :func:`load_base` fills the stages from GluonCV's ImageNet classifier
(``darknet53-*.params``...: ``features.N.*``), as ``pretrained_base=True`` does, with a report.
"""
import collections
import os

import torch
from torch import nn

from ...core import checkpoint as ckpt_io
from ...core import mxparams
from ...core.load_report import WeightsLoadError, check, compare, group_keys, warn_nonfinite
from ...yolo3.anchors import check_anchors, file_anchors
from ...core.yolo3_layout import (base_mapping, check_same_network, find_pretrained_base,
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
    """The ``save_parameters`` name of state_dict key ``key`` (None: not in a Gluon file).

    Parameters
    ----------
    key : str
    norm_prefixes : set of str
        ``'<module path>.'`` of every BatchNorm of the model (:func:`gluon_names` finds them).
    """
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
    """Fill ``model`` from ``{save_parameters name: array}`` and report what loaded.

    Parameters
    ----------
    model : YOLOV3
    arrays : dict
        Gluon names to numpy arrays (:func:`gluontrain.core.mxparams.read_params`).
    source : str
        Where they came from, for the report.
    what, fix : str
        Start and end of error lines.
    allow_missing, ignore_extra : bool
        Gluon's ``load_parameters`` flags: accept tensors the file lacks / file tensors the
        model lacks (both reported). A wrong shape is refused either way.
    logger : logging.Logger, optional
    anchors : {'file', 'same', 'network'}
        A file whose ``yolo_outputs.N.anchors`` are not the model's: ``'file'`` loads them
        (Gluon's ``load_parameters``; inference takes the anchors from the file), ``'same'``
        refuses it in one line naming both (training: the targets use the model's),
        ``'network'`` keeps the model's (``--transfer`` with ``--anchors``);
        :func:`gluontrain.yolo3.anchors.check_anchors`.

    Returns
    -------
    gluontrain.core.load_report.LoadReport
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
    PyTorch YOLOv3 ``model``, with a report.

    Parameters
    ----------
    model : YOLOV3
    path : str
    what, fix, allow_missing, ignore_extra, logger, anchors
        As :func:`load_arrays`.

    Returns
    -------
    gluontrain.core.load_report.LoadReport

    Raises
    ------
    FileNotFoundError
    WeightsLoadError
        One line: not a ``.params`` file (a PyTorch file, truncated, ...), another network,
        missing / unexpected / wrong-shape tensors the flags do not allow.
    """
    return load_arrays(model, _read(path, what, fix), os.fspath(path), what, fix,
                       allow_missing, ignore_extra, logger, anchors)


def save_params(model, path):
    """Write ``model``'s weights as ``net.save_parameters`` does (Gluon names and order,
    float32 as held), atomically.

    Parameters
    ----------
    model : YOLOV3 (DDP-wrapped or not)
    path : str
    """
    mxparams.write_params(path, gluon_arrays(model))


def load_base(model, path, what='the pretrained base', fix=_BASE_FIX, logger=None):
    """Load GluonCV's ImageNet classifier weights (``darknet53-*.params``...) into the stages
    of the PyTorch YOLOv3 ``model``, with a report.

    What ``get_model(name, pretrained_base=True)`` does through its base network: every stage
    tensor must be in the file under its ``features.N`` name
    (:func:`gluontrain.core.yolo3_layout.base_mapping`) with its shape, as Gluon's strict load;
    the classifier (``output.*``) is reported as not used by the detector; any other extra
    key is refused. The rest of the model is left as it is.

    Parameters
    ----------
    model : YOLOV3 (DDP-wrapped or not)
    path : str
    what, fix : str
        Start and end of error lines.
    logger : logging.Logger, optional

    Returns
    -------
    gluontrain.core.load_report.LoadReport
        Its ``total`` counts the stage tensors (``num_batches_tracked`` aside).

    Raises
    ------
    FileNotFoundError
    WeightsLoadError
        One line naming the file: not a ``.params`` file, nothing of it fits (a YOLOv3
        detector, another base), stage tensors missing or of another shape, extra keys.
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


def load_pretrained_base(model, network):
    """The MXNet backend's ``load_pretrained_base``: the model store's ImageNet ``network``
    file (found under ``$MXNET_HOME/models`` or downloaded, as gluoncv does) into ``model``'s
    stages.

    Returns
    -------
    list of str
        ``pretrained base: `` and the report (and a note when the file is not the store's
        release), for the training log.

    Raises
    ------
    ValueError
        One line: no file and no download, or a file that does not fit (naming it, where the
        store expects it and ``--no-pretrained-base``).
    """
    path, what, fix = find_pretrained_base(network)
    return pretrained_base_lines(load_base(model, path, what, fix), path, network)
