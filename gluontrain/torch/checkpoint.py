"""Full training checkpoints of PyTorch recipes in the core's format, and weights-only files.

A checkpoint (``{prefix}_last.ckpt``) is :func:`gluontrain.core.checkpoint.save_checkpoint`'s
atomic pickle: the model's ``state_dict`` and the optimizer's plus lr scheduler's states as
``torch.save`` bytes, the loop position, best score, arguments, Python's and numpy's RNG states,
and (in ``extra['torch_rng']``) torch's CPU and CUDA generator states, so that a resumed run
draws the same dropout masks, augmentations and shuffles as an uninterrupted one.

Two distinct operations read files back:

- :func:`restore_checkpoint` resumes training: weights, optimizer, scheduler, RNG, position;
- :func:`load_weights` starts a new run from trained weights (``state_dict`` only), as GluonCV's
  ``--resume x.params`` / ``net.load_parameters`` does.
"""
import io
import logging
import os
import warnings

import numpy as np
import torch

from ..core import checkpoint as core_checkpoint
from ..core.load_report import WeightsLoadError
from ..core.loop import TrainState
from ..core.streamed_pickle import StreamedBlob
from .distributed import unwrap_model as _unwrap
from .weights import load_failure, load_state_dict_reported

__all__ = ['model_bytes', 'optimizer_bytes', 'save_checkpoint', 'restore_checkpoint',
           'save_weights', 'load_weights', 'get_torch_rng_states', 'set_torch_rng_states',
           'WeightsMismatchError', 'save_file', 'get_all_rng_states', 'set_all_rng_states']


def _to_bytes(obj):
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return buffer.getvalue()


def _from_bytes(blob, map_location, weights_only=True, path='<bytes>', part='params'):
    """``torch.load`` of a checkpoint's ``part`` blob; a refusal (a pickle that would run
    code, damaged bytes) is one ``ValueError`` naming the file and the part."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter('ignore', UserWarning)
            return torch.load(io.BytesIO(blob), map_location=map_location,
                              weights_only=weights_only)
    except Exception as e:  # torch raises UnpicklingError, RuntimeError, EOFError...
        raise ValueError('{} is not a checkpoint that can be resumed: its {} state {}'.format(
            path, part, load_failure(e, bytes(blob[:8]), len(blob)))) from None


def _streamed(obj):
    # torch.save into the checkpoint file as it is written (the bytes _to_bytes gives, never
    # whole in memory: those copies were the peak memory of a whole run)
    return StreamedBlob(lambda f: torch.save(obj, f))


def _optimizer_states(optimizer, scheduler):
    return {'optimizer': optimizer.state_dict(),
            'scheduler': scheduler.state_dict() if scheduler is not None else None}


def model_bytes(model):
    """``torch.save`` bytes of the model's ``state_dict`` (unwrapped from DDP/DataParallel,
    so the keys carry no ``module.`` prefix)."""
    return _to_bytes(_unwrap(model).state_dict())


def optimizer_bytes(optimizer, scheduler=None):
    """``torch.save`` bytes of ``{'optimizer': ..., 'scheduler': ... or None}`` state dicts."""
    return _to_bytes(_optimizer_states(optimizer, scheduler))


class WeightsMismatchError(WeightsLoadError, RuntimeError):
    """Weights that do not fit the model (other architecture or number of classes).

    A :class:`~gluontrain.core.load_report.WeightsLoadError` (a ``ValueError``: bad input,
    the CLI reports it in one line naming the file) and, as ``load_state_dict`` raised
    before, a ``RuntimeError``.
    """


def _read_checkpoint(path):
    """:func:`gluontrain.core.checkpoint.load_checkpoint` with a PyTorch hint: the core's
    refusal of a non-checkpoint points to MXNet's ``--load-weights``, which the PyTorch
    recipes do not have (they load weights from ``--resume`` with a file that is not *.ckpt).
    """
    try:
        return core_checkpoint.load_checkpoint(path)
    except ValueError as e:
        if e.__cause__ is None:
            raise
        raise ValueError('{} is not a gluontrain checkpoint ({}); resume from the '
                         '{{prefix}}_last.ckpt a run wrote, or start from weights saved with '
                         'torch.save(model.state_dict()) passed to --resume under a name not '
                         'ending in .ckpt'.format(path, ' '.join(str(e.__cause__).split()))
                         ) from e.__cause__


_RESUME_FIX = ('resume with the network and number of classes the checkpoint was written '
               'with, or start a new run without --resume')


def _load_exact(model, state_dict, path):
    """``load_state_dict(strict=True)`` that says what did not fit in one line (every key
    checked before any is copied) and logs the report of what loaded."""
    try:
        return load_state_dict_reported(model, state_dict, path, '--resume', _RESUME_FIX,
                                        ignore=(), logger=logging.getLogger(__name__),
                                        allow_unexpected=False)
    except WeightsLoadError as e:
        raise WeightsMismatchError(str(e)) from None


def get_torch_rng_states():
    """torch's CPU generator state and every CUDA device's, as numpy ``uint8`` arrays
    (picklable without torch)."""
    states = {'cpu': torch.get_rng_state().numpy().copy(), 'cuda': None}
    if torch.cuda.is_available():
        states['cuda'] = [s.numpy().copy() for s in torch.cuda.get_rng_state_all()]
    return states


def set_torch_rng_states(states):
    """Restore what :func:`get_torch_rng_states` returned (CUDA states only where CUDA is
    available and the device count matches)."""
    torch.set_rng_state(torch.from_numpy(np.asarray(states['cpu'], dtype=np.uint8)))
    cuda = states.get('cuda')
    if cuda is not None and torch.cuda.is_available():
        if len(cuda) != torch.cuda.device_count():
            raise ValueError('the checkpoint holds RNG states of {} GPU(s) but {} are visible; '
                             'resume with the same GPUs'.format(len(cuda),
                                                                torch.cuda.device_count()))
        torch.cuda.set_rng_state_all([torch.from_numpy(np.asarray(s, dtype=np.uint8))
                                      for s in cuda])


def get_all_rng_states():
    """``{'rng': Python's and numpy's, 'torch_rng': torch's}`` generator states."""
    return {'rng': core_checkpoint.get_rng_states(), 'torch_rng': get_torch_rng_states()}


def set_all_rng_states(states):
    """Restore what :func:`get_all_rng_states` returned."""
    core_checkpoint.set_rng_states(states['rng'])
    set_torch_rng_states(states['torch_rng'])


def save_file(path, data):
    """``torch.save(data)`` to ``path`` atomically: every PyTorch file of a reference's layout
    (seamseg's snapshot, SGB's ``.pth``, ssd.pytorch's and GluonCV-style weights) is written
    through it.

    Returns
    -------
    str
        ``path``.
    """
    core_checkpoint.atomic_save_file(path, lambda tmp: torch.save(data, tmp))
    return path


def save_checkpoint(path, model, optimizer, scheduler, epoch, iteration, best_score, args,
                    extra=None):
    """Write the full checkpoint of a finished epoch atomically.

    Parameters
    ----------
    path : str
        Conventionally ``{prefix}_last.ckpt``.
    model : torch.nn.Module
        DDP/DataParallel wrappers are unwrapped.
    optimizer : torch.optim.Optimizer
    scheduler : lr scheduler or None
        E.g. :class:`gluontrain.torch.lr_scheduler.GluonLRScheduler`.
    epoch : int
        The last finished epoch; training resumes at ``epoch + 1``.
    iteration : int
        Finished steps (``state.iteration``).
    best_score : float
    args : argparse.Namespace or dict
    extra : dict, optional
        Anything else to restore (loss meters, ...); ``'torch_rng'`` is added.

    Returns
    -------
    str
        ``path``.
    """
    extra = dict(extra or {})
    extra['torch_rng'] = get_torch_rng_states()
    return core_checkpoint.save_checkpoint(
        path, params=_streamed(_unwrap(model).state_dict()),
        trainer=_streamed(_optimizer_states(optimizer, scheduler)),
        epoch=epoch, iteration=iteration, best_score=best_score, args=args, extra=extra)


def restore_checkpoint(path, model, optimizer, scheduler=None, map_location='cpu',
                       weights_only=True, check=None):
    """Resume from a checkpoint of :func:`save_checkpoint`: weights, optimizer, scheduler and
    every RNG state.

    Build ``model``, ``optimizer`` and ``scheduler`` exactly as for a fresh run, then call this
    before training.

    Parameters
    ----------
    path : str
    model : torch.nn.Module
        Loaded with ``strict=True``.
    optimizer : torch.optim.Optimizer
    scheduler : lr scheduler, optional
        Given exactly when the checkpoint holds a scheduler state (it was saved with one).
    map_location : str or torch.device, default 'cpu'
        Where the stored tensors are loaded; ``load_state_dict`` then copies them onto the
        model's and optimizer's devices.
    weights_only : bool, default True
        ``torch.load``'s safe mode (tensors and plain containers only); set False for a
        scheduler whose state holds other objects, from a trusted file only.
    check : callable, optional
        ``check(payload)`` runs before anything is loaded (e.g. refusing a resume whose
        arguments do not fit the checkpoint's, with
        :func:`gluontrain.core.checkpoint.resume_changes`).

    Returns
    -------
    payload : dict
        The checkpoint (``epoch``, ``best_score``, ``args``, ``extra``, ...); resume at
        ``payload['epoch'] + 1``.
    state : TrainState
        A loop state with ``iteration`` restored and ``resumed_from`` / ``last_checkpoint``
        set to ``path``, for :func:`gluontrain.core.loop.run_loop`.

    Raises
    ------
    FileNotFoundError, ValueError
        For a missing file, or one that is not a gluontrain checkpoint (a weights file is
        read with :func:`load_weights`).
    WeightsMismatchError
        When the checkpoint's weights are not exactly the model's (one line naming the file,
        the counts and the first keys; nothing is loaded).
    """
    payload = _read_checkpoint(path)
    if check is not None:
        check(payload)
    _load_exact(model, _from_bytes(payload['params'], map_location, weights_only, path), path)
    states = _from_bytes(payload['trainer'], map_location, weights_only, path, 'optimizer')
    if not isinstance(states, dict) or 'optimizer' not in states:
        raise ValueError('{} holds no PyTorch optimizer state; was it written by another '
                         'backend?'.format(path))
    optimizer.load_state_dict(states['optimizer'])
    saved_scheduler = states.get('scheduler')
    if (saved_scheduler is None) != (scheduler is None):
        raise ValueError(
            '{} holds {} lr scheduler state but restore_checkpoint got {}: pass the scheduler '
            'exactly when the run that saved it had one, or the lr would not continue where it '
            'stopped'.format(path, 'an' if saved_scheduler is not None else 'no',
                             'none' if scheduler is None else 'one'))
    if scheduler is not None:
        scheduler.load_state_dict(saved_scheduler)
    core_checkpoint.set_rng_states(payload['rng'])
    if 'torch_rng' in payload.get('extra', {}):
        set_torch_rng_states(payload['extra']['torch_rng'])
    # resumed_from: the hooks drop what the interrupted run wrote past this checkpoint
    return payload, TrainState(iteration=payload['iteration'], resumed_from=path,
                               last_checkpoint=path)


def save_weights(path, model):
    """Write the model's ``state_dict`` alone with ``torch.save``, atomically (the PyTorch
    counterpart of ``net.save_parameters``)."""
    return save_file(path, _unwrap(model).state_dict())


def load_weights(path, model, strict=True, map_location='cpu'):
    """Start from trained weights only: no optimizer, scheduler, RNG or loop position.

    Parameters
    ----------
    path : str
        A ``state_dict`` file (:func:`save_weights`, ``torch.save(model.state_dict())``) or a
        full gluontrain checkpoint, whose weights alone are taken.
    model : torch.nn.Module
    strict : bool, default True
        Require exactly the model's keys (``load_state_dict``'s ``strict``).
    map_location : str or torch.device, default 'cpu'

    Returns
    -------
    NamedTuple
        ``load_state_dict``'s ``missing_keys`` / ``unexpected_keys`` (empty when strict).

    Raises
    ------
    FileNotFoundError
        When ``path`` does not exist.
    WeightsMismatchError
        When the weights do not fit ``model`` (the message names ``path`` and the first
        mismatch).
    """
    if not os.path.isfile(path):
        raise FileNotFoundError('weights file {} does not exist'.format(path))
    with open(path, 'rb') as f:
        # torch.save writes a zip archive; a gluontrain checkpoint is a pickle (zipfile's own
        # test would look for the archive's end record and also find the zips embedded there)
        is_torch_file = f.read(4) == b'PK\x03\x04'
    if is_torch_file:
        state_dict = torch.load(path, map_location=map_location, weights_only=True)
    else:
        state_dict = _from_bytes(_read_checkpoint(path)['params'], map_location, path=path)
    if not isinstance(state_dict, dict):
        raise ValueError('{} holds a {}, not a state_dict; save weights with '
                         'save_weights(path, model)'.format(path, type(state_dict).__name__))
    try:
        return _unwrap(model).load_state_dict(state_dict, strict=strict)
    except RuntimeError as e:
        # torch lists every mismatching key, one per line after a title; the first says enough
        problems = [' '.join(line.split()) for line in str(e).splitlines()[1:] if line.strip()]
        detail = problems[0][:300] if problems else ' '.join(str(e).split())[:300]
        raise WeightsMismatchError(
            '{} holds the weights of another network: they do not fit this model '
            '({}; {} problem(s) in all); pass weights saved from the same architecture and '
            'number of classes'.format(path, detail.rstrip('.'), max(len(problems), 1))) from e
