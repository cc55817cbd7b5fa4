"""Weights files into PyTorch modules, with a report of what loaded.

:func:`read_weights_file` reads a ``torch.save`` file safely (``weights_only=True``) and turns
every way it can fail into one line naming the file and the fix; :func:`load_state_dict_reported`
fills a module from a state dict by name and shape, refuses a file that fills nothing (or, for
strict loads, not everything) before touching the module, and logs detectron2's report of
what loaded (:mod:`gluontrain.core.load_report`).
"""
import logging
import os
import re
import warnings

import torch

from ..core import checkpoint as core_checkpoint
from ..core.file_kinds import MX_MAGIC
from ..core.load_report import WeightsLoadError, check, compare
from .distributed import unwrap_model

__all__ = ['load_failure', 'load_state_dict_reported', 'compare_state_dict', 'apply_report',
           'read_weights_file', 'tensor_shapes', 'strip_ddp_prefix', 'WeightsLoadError']

_LOGGER = logging.getLogger(__name__)
DDP_PREFIX = 'module.'


def strip_ddp_prefix(state_dict):
    """``state_dict`` without the ``module.`` prefix DDP / DataParallel save, when every key has
    it (a model that names a child ``module`` keeps its keys)."""
    keys = list(state_dict)
    if keys and all(isinstance(k, str) and k.startswith(DDP_PREFIX) for k in keys):
        return type(state_dict)((k[len(DDP_PREFIX):], v) for k, v in state_dict.items())
    return state_dict


def tensor_shapes(state_dict):
    """``{key: shape tuple}`` of a state dict; an entry that is no array gets ``None``."""
    return {str(k): tuple(v.shape) if hasattr(v, 'shape') else None
            for k, v in state_dict.items()}


def load_state_dict_reported(module, state_dict, source, what, fix, allow_partial=False,
                             mapping=None, ignore=('num_batches_tracked',), logger=None,
                             allow_unexpected=True):
    """Fill ``module`` from ``state_dict`` by name and shape, and report what loaded.

    Parameters
    ----------
    module : torch.nn.Module
        DDP / DataParallel wrappers are unwrapped.
    state_dict : dict
        ``{key: tensor}``; a ``module.`` prefix on every key is stripped.
    source : str
        The file, as the user gave it (named in the report and errors).
    what : str
        The argument the file came from (``'--resume'``), to start error messages.
    fix : str
        What to do instead, to end error messages.
    allow_partial : bool, default False
        Load what fits and report the rest (seamseg's ``--pre_train``); zero loaded tensors
        are refused anyway.
    mapping : dict, optional
        ``{module key: file key}`` where the names differ.
    ignore : callable or iterable of str, default ('num_batches_tracked',)
        Module keys a file may lack without being reported missing (InPlaceABN and old
        torch BatchNorm have no ``num_batches_tracked``); the module keeps its own value.
    logger : logging.Logger, optional
        Receives ``report.format()`` at INFO (default: this module's logger).
    allow_unexpected : bool, default True
        ``False`` refuses file tensors the module does not use (``strict=True``'s rule).

    Returns
    -------
    gluontrain.core.load_report.LoadReport

    Raises
    ------
    WeightsLoadError
        Before anything is copied, when nothing loads or (unless ``allow_partial``) some
        tensor of the module is missing or has another shape.
    """
    report, state_dict = compare_state_dict(module, state_dict, source, what, fix, mapping,
                                            ignore)
    check(report, what, fix, allow_partial, allow_unexpected)
    apply_report(module, state_dict, report)
    (logger or _LOGGER).info('%s', report.format())
    return report


def compare_state_dict(module, state_dict, source, what, fix, mapping=None,
                       ignore=('num_batches_tracked',)):
    """The report :func:`load_state_dict_reported` would act on, without loading anything
    (to check several modules before filling any).

    Parameters
    ----------
    module, state_dict, source, what, fix, mapping, ignore
        As :func:`load_state_dict_reported`.

    Returns
    -------
    report : gluontrain.core.load_report.LoadReport
    state_dict : dict
        ``state_dict`` with a DDP ``module.`` prefix stripped, for :func:`apply_report`.
    """
    if not isinstance(state_dict, dict):
        raise WeightsLoadError('{} {} holds a {}, not a state_dict; {}'.format(
            what, source, type(state_dict).__name__, fix))
    state_dict = strip_ddp_prefix(state_dict)
    own = unwrap_model(module).state_dict()
    return compare(tensor_shapes(own), tensor_shapes(state_dict), source, mapping,
                   ignore), state_dict


def apply_report(module, state_dict, report):
    """Copy the tensors ``report`` lists as loaded from ``state_dict`` into ``module``.

    Parameters
    ----------
    module : torch.nn.Module
    state_dict : dict
        The (prefix-stripped) state dict the report was computed from.
    report : gluontrain.core.load_report.LoadReport
    """
    mapping = report.mapping
    filled = {k: state_dict[mapping.get(k, k)] for k in report.loaded}
    # strict=False: missing keys were reported (and accepted) by the caller; load_state_dict
    # casts dtypes and moves tensors onto the module's device
    unwrap_model(module).load_state_dict(filled, strict=False)


def _first_line(error):
    text = ' '.join(str(error).split())
    return text[:200] if text else type(error).__name__


def read_weights_file(path, what, fix):
    """``torch.load(path, weights_only=True)`` onto the CPU, every failure one line.

    Parameters
    ----------
    path : str
    what : str
        The argument the file came from (``'--basenet'``), to start error messages.
    fix : str
        What to pass instead, to end error messages.

    Returns
    -------
    object
        What the file holds (tensors and plain containers only).

    Raises
    ------
    FileNotFoundError
        ``path`` does not exist.
    WeightsLoadError
        The file is empty, truncated, not a ``torch.save`` file (a gluontrain checkpoint,
        MXNet ``.params``, text), or holds objects other than tensors (a pickle that would
        run code is refused before anything of it runs).
    """
    path = str(path)
    if os.path.isdir(path):
        raise WeightsLoadError('{} {} is a folder, not a weights file; {}'.format(what, path, fix))
    if not os.path.isfile(path):
        raise FileNotFoundError('{} {} does not exist; {}'.format(what, path, fix))
    size = os.path.getsize(path)
    if size == 0:
        raise WeightsLoadError('{} {} is empty (0 bytes; an interrupted download or copy?); {}'
                               .format(what, path, fix))
    with open(path, 'rb') as f:
        head = f.read(8)
    if head == MX_MAGIC:
        raise WeightsLoadError('{} {} is an MXNet .params file, not PyTorch weights; {}'
                               .format(what, path, fix))
    try:
        with warnings.catch_warnings():
            # "Detected pickle protocol 4": a plain pickle, refused below in one line
            warnings.simplefilter('ignore', UserWarning)
            return torch.load(path, map_location='cpu', weights_only=True)
    except Exception as e:  # torch raises RuntimeError, UnpicklingError, EOFError, KeyError...
        if head[:1] != b'\x80' and head[:4] != b'PK\x03\x04':
            # neither a torch.save zip nor a pickle: text, an image, another format
            reason = 'is not a torch.save file (it starts with {!r})'.format(head)
        elif head[:1] == b'\x80' and _is_gluontrain_checkpoint(path):
            reason = ('is a gluontrain training checkpoint ({prefix}_last.ckpt), not a weights '
                      'file')
        else:
            reason = load_failure(e, head, size)
        raise WeightsLoadError('{} {} {}; {}'.format(what, path, reason, fix)) from None


def load_failure(error, head, size):
    """Why ``torch.load(weights_only=True)`` refused bytes starting with ``head`` (``size``
    bytes long), in words: objects other than tensors (a pickle that would run code, refused
    before any of it ran), a truncated or damaged archive, or no ``torch.save`` data.

    Returns
    -------
    str
        To follow the file's name, e.g. ``'holds objects other than tensors (posix.system)...'``.
    """
    message = str(error)
    if 'Weights only load failed' in message:
        found = re.search(r'GLOBAL ([\w.]+)', message)
        other = re.search(r'(Unsupported [^\n]*)', message)
        return ('holds objects other than tensors ({}), refused by torch.load('
                'weights_only=True); only load files you trust'.format(
                    found.group(1) if found else
                    ' '.join(other.group(1).split()) if other else 'an unsupported pickle'))
    if 'central directory' in message or 'zip archive' in message:
        return 'is truncated or corrupt ({} bytes; an interrupted save or download?)'.format(size)
    if head[:4] == b'PK\x03\x04':
        return 'is a damaged torch.save archive ({})'.format(_first_line(error))
    return 'is not a torch.save file ({}: {})'.format(type(error).__name__, _first_line(error))


def _is_gluontrain_checkpoint(path):
    try:
        core_checkpoint.load_checkpoint(path)
    except (ValueError, OSError):
        return False
    return True
