"""Checkpoint files that survive a crash or Ctrl-C mid-write, in one format for every backend.

A checkpoint is a pickled dict; the backend serialises its own pieces (parameters, optimizer or
trainer state) to bytes and the core writes them with the loop position, best score, RNG
states and arguments. Every file is written to a temporary name in the same folder, flushed
to disk, then renamed over the target, so a reader sees either the old file or the new one.
"""
import contextlib
import os
import pickle
import random
import tempfile

import numpy as np

CHECKPOINT_VERSION = 1
REQUIRED_KEYS = ('version', 'params', 'trainer', 'epoch', 'iteration', 'best_score', 'rng',
                 'args')


@contextlib.contextmanager
def _staged(path):
    """Yield a temporary name beside ``path``; on success flush it to disk and rename it over
    ``path``, on any exception (KeyboardInterrupt included) remove it."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix='.' + os.path.basename(path) + '.', suffix='.tmp',
                               dir=folder)
    os.close(fd)
    try:
        yield tmp
        with open(tmp, 'rb') as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def atomic_write(path, write_fn, mode='wb'):
    """Write ``path`` through ``write_fn(fileobj)`` so that it is replaced all at once.

    Parameters
    ----------
    path : str
        The final file name.
    write_fn : callable
        Receives an open file object and writes the content.
    mode : str
        ``'wb'`` or ``'w'``.
    """
    with _staged(path) as tmp:
        with open(tmp, mode) as f:
            write_fn(f)


def atomic_save_file(path, save_fn):
    """Let a library writer that only takes a file name (``save_fn(tmp_name)``) write atomically.

    Used for ``net.save_parameters`` / ``torch.save`` style APIs.
    """
    with _staged(path) as tmp:
        save_fn(tmp)


def save_best_and_interval(write_weights, best_map, current_map, epoch, save_interval, prefix,
                           ext):
    """GluonCV's ``save_params`` policy, for any backend.

    ``{prefix}_best{ext}`` is written when ``current_map`` beats ``best_map[0]`` (a one-element
    list updated in place, starting at 0, so a score of 0 never saves a best) and a line
    ``'{epoch:04d}:\\t{map:.4f}'`` is appended to ``{prefix}_best_map.log``;
    ``{prefix}_{epoch:04d}_{map:.4f}{ext}`` is written every ``save_interval`` (0 included).

    Parameters
    ----------
    write_weights : callable
        ``write_weights(path)`` writes the weights to ``path`` atomically.
    ext : str
        ``'.params'`` (MXNet) or ``'.pth'`` (PyTorch).
    """
    current_map = float(current_map)
    if current_map > best_map[0]:
        best_map[0] = current_map
        write_weights('{}_best{}'.format(prefix, ext))
        with open(prefix + '_best_map.log', 'a') as f:
            f.write('{:04d}:\t{:.4f}\n'.format(epoch, current_map))
    if save_interval and epoch % save_interval == 0:
        write_weights('{}_{:04d}_{:.4f}{}'.format(prefix, epoch, current_map, ext))


def get_rng_states():
    """Python's and numpy's global RNG states (the ones data augmentation draws from)."""
    return {'python': random.getstate(), 'numpy': np.random.get_state()}


def set_rng_states(states):
    """Restore what :func:`get_rng_states` returned."""
    random.setstate(states['python'])
    np.random.set_state(states['numpy'])


def save_checkpoint(path, params, trainer, epoch, iteration, best_score, args, extra=None):
    """Write a full training checkpoint atomically.

    Parameters
    ----------
    path : str
        File to write, conventionally ``{prefix}_last.ckpt``.
    params, trainer : bytes
        The backend's serialised model parameters and optimizer/trainer state.
    epoch : int
        The last *finished* epoch; training resumes at ``epoch + 1``.
    iteration : int
        Number of finished steps, so the LR schedule resumes at the right update.
    best_score : float
        Best validation score so far (what ``save_params`` compares against).
    args : dict or argparse.Namespace
        The run's arguments.
    extra : dict, optional
        Anything else the recipe must restore (loss meters, sampler leftovers, ...).
    """
    payload = {
        'version': CHECKPOINT_VERSION, 'params': params, 'trainer': trainer,
        'epoch': int(epoch), 'iteration': int(iteration), 'best_score': float(best_score),
        'rng': get_rng_states(), 'args': dict(vars(args)) if hasattr(args, '__dict__') else args,
        'extra': extra or {},
    }
    atomic_write(path, lambda f: pickle.dump(payload, f, protocol=pickle.HIGHEST_PROTOCOL))
    return path


def load_checkpoint(path):
    """Read a checkpoint written by :func:`save_checkpoint`.

    Raises
    ------
    FileNotFoundError
        When ``path`` does not exist.
    ValueError
        When the file is not a gluontrain checkpoint (e.g. a ``.params`` weights file).
    """
    if not os.path.isfile(path):
        raise FileNotFoundError('checkpoint {} does not exist; pass the {{prefix}}_last.ckpt file '
                                'a previous run wrote'.format(path))
    try:
        with open(path, 'rb') as f:
            payload = pickle.load(f)
    except (pickle.UnpicklingError, EOFError, AttributeError, ValueError) as e:
        raise ValueError('{} is not a gluontrain checkpoint ({}). A weights-only file such as '
                         '*.params is loaded with --load-weights, not --resume.'
                         .format(path, e)) from e
    missing = [k for k in REQUIRED_KEYS if not isinstance(payload, dict) or k not in payload]
    if missing:
        raise ValueError('{} is not a gluontrain checkpoint: missing {}'.format(path, missing))
    return payload
