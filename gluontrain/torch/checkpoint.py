"""Full training checkpoints of PyTorch recipes in the core's format (docs/recipes.md,
"Checkpoints"; torch's CPU and CUDA generator states in ``extra['torch_rng']``), and
weights-only files. Two distinct operations read files back:

- :func:`restore_checkpoint` resumes training: weights, optimizer, scheduler, RNG, position;
- :func:`load_weights` starts a new run from trained weights (``state_dict`` only), as GluonCV's
  ``--resume x.params`` / ``net.load_parameters`` does."""
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

__all__ = ['save_checkpoint', 'restore_checkpoint',
           'save_weights', 'load_weights', 'get_torch_rng_states', 'set_torch_rng_states',
           'WeightsMismatchError', 'save_file', 'get_all_rng_states', 'set_all_rng_states']


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
    # torch.save into the checkpoint file as it is written (what torch.save gives, never
    # whole in memory: those copies were the peak memory of a whole run)
    return StreamedBlob(lambda f: torch.save(obj, f))


def _optimizer_states(optimizer, scheduler):
    return {'optimizer': optimizer.state_dict(),
            'scheduler': scheduler.state_dict() if scheduler is not None else None}


class WeightsMismatchError(WeightsLoadError, RuntimeError):
    """Weights that do not fit the model: a :class:`WeightsLoadError` (one CLI line naming the
    file) and, as ``load_state_dict`` raised before, a ``RuntimeError``."""


def _read_checkpoint(path):
    """:func:`gluontrain.core.checkpoint.load_checkpoint`, its refusal of a non-checkpoint
    pointing to ``--resume`` with weights (the PyTorch recipes have no ``--load-weights``)."""
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
    """``load_state_dict(strict=True)`` refusing in one line (every key checked before any is
    copied) and logging the report."""
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
    """``torch.save(data)`` to ``path`` atomically; returns ``path``. Every PyTorch file of a
    reference's layout (seamseg's, SGB's, ssd.pytorch's, GluonCV-style weights) goes through it."""
    core_checkpoint.atomic_save_file(path, lambda tmp: torch.save(data, tmp))
    return path


def save_checkpoint(path, model, optimizer, scheduler, epoch, iteration, best_score, args,
                    extra=None):
    """Write the full checkpoint of a finished epoch atomically; returns ``path``.

    Parameters
    ----------
    path : str
        Conventionally ``{prefix}_last.ckpt``.
    model : torch.nn.Module
        DDP/DataParallel wrappers are unwrapped.
    scheduler : lr scheduler or None
        E.g. :class:`gluontrain.torch.lr_scheduler.GluonLRScheduler`.
    epoch : int
        The last finished epoch; training resumes at ``epoch + 1``.
    iteration : int
        Finished steps (``state.iteration``).
    extra : dict, optional
        Anything else to restore (loss meters, ...); ``'torch_rng'`` is added.
    """
    extra = dict(extra or {})
    extra['torch_rng'] = get_torch_rng_states()
    return core_checkpoint.save_checkpoint(
        path, params=_streamed(_unwrap(model).state_dict()),
        trainer=_streamed(_optimizer_states(optimizer, scheduler)),
        epoch=epoch, iteration=iteration, best_score=best_score, args=args, extra=extra)


def restore_checkpoint(path, model, optimizer, scheduler=None, map_location='cpu',
                       weights_only=True, check=None, hyper=None):
    """Resume from a :func:`save_checkpoint` file: weights, optimizer, scheduler and every RNG
    state. Build ``model``, ``optimizer`` and ``scheduler`` as for a fresh run first.

    Parameters
    ----------
    model : torch.nn.Module
        Loaded with ``strict=True``.
    scheduler : lr scheduler, optional
        Given exactly when the checkpoint holds a scheduler state.
    map_location : str or torch.device, default 'cpu'
        Where the stored tensors are loaded before ``load_state_dict`` copies them.
    weights_only : bool, default True
        ``torch.load``'s safe mode; False only for a trusted file whose scheduler state holds
        other objects.
    check : callable, optional
        ``check(payload)`` before anything is loaded (e.g.
        :func:`gluontrain.core.checkpoint.resume_changes`).
    hyper : dict, optional
        Optimizer hyper-parameters of this run's arguments (``{'momentum': 0.9}``), written into
        every parameter group after the checkpoint's: the values typed now win.

    Returns
    -------
    payload : dict
        The checkpoint (``epoch``, ``best_score``, ``args``, ``extra``, ...); resume at
        ``payload['epoch'] + 1``.
    state : TrainState
        ``iteration`` restored, ``resumed_from`` / ``last_checkpoint`` set to ``path``.

    Raises
    ------
    FileNotFoundError, ValueError
        A missing file, or not a gluontrain checkpoint (weights: :func:`load_weights`).
    WeightsMismatchError
        The weights are not exactly the model's (one line; nothing is loaded).
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
    for group in optimizer.param_groups:
        group.update(hyper or {})
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

    ``path``: a ``state_dict`` file (:func:`save_weights`) or a full gluontrain checkpoint,
    whose weights alone are taken. Returns ``load_state_dict``'s ``missing_keys`` /
    ``unexpected_keys``.

    Raises
    ------
    FileNotFoundError
        ``path`` does not exist.
    WeightsMismatchError
        The weights do not fit ``model`` (the message names ``path`` and the first mismatch).
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
