"""Checkpoint files in one format for every backend, written atomically (staged, flushed,
renamed) and read with a restricted unpickler (docs/recipes.md, "Checkpoints";
docs/checkpoints.md, "What a file may contain, and why nothing in it runs")."""
import contextlib
import errno
import io
import os
import pickle
import random
import re
import secrets
import shutil

import numpy as np

from . import streamed_pickle
# what a file is: re-exported here, where the loaders have always found it
from .file_kinds import (CHECKPOINT, MX_PARAMS, TORCH_WEIGHTS,  # noqa: F401
                         checkpoint_writer, file_kind, refuse_other_writer)
from .signals import sigint_held

CHECKPOINT_VERSION = 1
REQUIRED_KEYS = ('version', 'params', 'trainer', 'epoch', 'iteration', 'best_score', 'rng',
                 'args')


# A file this close to a full disk cannot hold another chunk: a library writer that failed
# with its own error type (MXNet's "FileStream.Write incomplete") ran out of space.
_NEARLY_FULL_BYTES = 64 * 1024
# errors that mean "this place cannot be written" rather than a bug; re-raised naming the file
_WRITE_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.EFBIG)
# files staged by this process right now (never swept, even when nested)
_IN_FLIGHT = set()


# a staging name of any file, as _new_staging_file makes them (the pid tells whose it is)
_ANY_STAGED = re.compile(r'^\..+\.(\d+)-[0-9a-f]{8}\.tmp$')


def _pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_staged(path):
    """Remove the staging files (``.{name}.{pid}-{random}.tmp``, any ``name``) that killed runs
    left in ``path``'s folder, and the older ``.{basename}.{random}.tmp`` of ``path``; keep
    those staged by this process now or by another live one. Returns the removed files."""
    folder = os.path.dirname(os.path.abspath(path))
    # .{basename}.{pid}-{random}.tmp; names of gluontrain < 0.2 lack the {pid}-
    own = re.compile(r'^\.' + re.escape(os.path.basename(path))
                     + r'\.(?:(\d+)-)?[A-Za-z0-9_]+\.tmp$')
    removed = []
    try:
        names = os.listdir(folder)
    except OSError:
        return removed
    for name in names:
        match = _ANY_STAGED.match(name) or own.match(name)
        full = os.path.join(folder, name)
        if not match or full in _IN_FLIGHT:
            continue
        pid = int(match.group(1)) if match.group(1) else None
        if pid is not None and pid != os.getpid() and _pid_alive(pid):
            continue
        try:
            os.remove(full)
            removed.append(full)
        except OSError:
            pass
    return removed


def _new_staging_file(path):
    """Create ``.{basename}.{pid}-{random}.tmp`` beside ``path`` with the process umask (as
    ``open`` would create ``path`` itself; ``mkstemp`` forces 0600)."""
    folder = os.path.dirname(os.path.abspath(path))
    for _ in range(100):
        tmp = os.path.join(folder, '.{}.{}-{}.tmp'.format(os.path.basename(path), os.getpid(),
                                                          secrets.token_hex(4)))
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            continue
        os.close(fd)
        return tmp
    raise FileExistsError(errno.EEXIST, 'no free staging name', path)


def _write_error(error, path, folder):
    """The exception to raise for a failed write of ``path``: an ``OSError`` naming ``path``
    when the place cannot be written (read-only, no space, no permission), else ``None``."""
    if isinstance(error, OSError):
        if error.errno in _WRITE_ERRNOS:
            return OSError(error.errno, error.strerror or os.strerror(error.errno), path)
        return None
    if isinstance(error, Exception):
        try:
            free = shutil.disk_usage(folder).free
        except OSError:
            return None
        if free < _NEARLY_FULL_BYTES:
            return OSError(errno.ENOSPC, '{} ({} bytes left; the writer said: {})'.format(
                os.strerror(errno.ENOSPC), free, str(error).strip().splitlines()[-1]
                if str(error).strip() else type(error).__name__), path)
    return None


@contextlib.contextmanager
def scratch_file(beside):
    """Yield a temporary file name beside ``beside`` (a staging name, so a killed run's
    leftover is swept) and remove it afterwards: for writers that only take a file name."""
    tmp = _new_staging_file(beside)
    _IN_FLIGHT.add(tmp)
    try:
        yield tmp
    finally:
        _IN_FLIGHT.discard(tmp)
        if os.path.exists(tmp):
            os.remove(tmp)


@contextlib.contextmanager
def _staged(path):
    """Yield a temporary name beside ``path``; on success fsync and rename it over ``path``, on
    any exception remove it. A place that cannot be written raises ``OSError`` naming ``path``.
    """
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    sweep_staged(path)
    try:
        tmp = _new_staging_file(path)
    except OSError as e:
        raise (_write_error(e, path, folder) or e) from e
    _IN_FLIGHT.add(tmp)
    try:
        with sigint_held():
            yield tmp
            with open(tmp, 'rb') as f:
                os.fsync(f.fileno())
            os.replace(tmp, path)
    except BaseException as e:
        # before the partial file is removed, which frees the space that ran out
        named = _write_error(e, path, folder)
        if os.path.exists(tmp):
            os.remove(tmp)
        if named is not None:
            raise named from e
        raise
    finally:
        _IN_FLIGHT.discard(tmp)


def atomic_write(path, write_fn, mode='wb'):
    """Write ``path`` through ``write_fn(fileobj)`` (``mode`` ``'wb'`` or ``'w'``) so that it is
    replaced all at once."""
    with _staged(path) as tmp:
        with open(tmp, mode) as f:
            write_fn(f)


def atomic_save_file(path, save_fn):
    """Let a library writer that only takes a file name (``save_fn(tmp_name)``) write atomically.
    """
    with _staged(path) as tmp:
        save_fn(tmp)


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
        Conventionally ``{prefix}_last.ckpt``.
    params, trainer : bytes or StreamedBlob
        The backend's serialised parameters and optimizer/trainer state.
    epoch : int
        The last *finished* epoch; training resumes at ``epoch + 1``.
    iteration : int
        Number of finished steps.
    best_score : float
        Best validation score so far.
    args : dict or argparse.Namespace
    extra : dict, optional
        Anything else the recipe must restore (hooks' state, sampler leftovers, ...).
    """
    payload = {
        'version': CHECKPOINT_VERSION, 'params': params, 'trainer': trainer,
        'epoch': int(epoch), 'iteration': int(iteration), 'best_score': float(best_score),
        'rng': get_rng_states(), 'args': dict(vars(args)) if hasattr(args, '__dict__') else args,
        'extra': extra or {},
    }
    atomic_write(path, lambda f: streamed_pickle.dump(payload, f))
    return path


# What save_checkpoint's payload may hold besides pickle's own plain types (dict, list, tuple,
# str, bytes, numbers, bool, None, set): numpy arrays and scalars (RNG states, meters, metric
# values). Both numpy 1 (numpy.core) and numpy 2 (numpy._core) module names.
_ALLOWED_GLOBALS = {
    (mod, name) for mod in ('numpy.core.multiarray', 'numpy._core.multiarray')
    for name in ('_reconstruct', 'scalar')} | {
    (mod, '_frombuffer') for mod in ('numpy.core.numeric', 'numpy._core.numeric')} | {
    ('numpy', 'ndarray'), ('numpy', 'dtype'), ('builtins', 'set'), ('builtins', 'frozenset'),
    ('builtins', 'complex'), ('builtins', 'slice'), ('collections', 'OrderedDict')}


class RefusedPickle(ValueError):
    """A file whose unpickling would resolve a global a checkpoint never holds."""


class _RestrictedUnpickler(pickle.Unpickler):
    """Resolves only :data:`_ALLOWED_GLOBALS` (and what ``allow(module, name)`` accepts), so a
    hostile file cannot make unpickling call arbitrary functions (``os.system`` through
    ``__reduce__``)."""

    def __init__(self, f, path, allow=None):
        super().__init__(f)
        self.path, self.allow = path, allow

    def find_class(self, module, name):
        if (self.allow is not None and self.allow(module, name)) or (
                module, name) in _ALLOWED_GLOBALS or (
                module == 'numpy' and name.endswith('DType') and name[0].isupper()) or (
                module.startswith('numpy.dtypes') and name.endswith('DType')):
            return super().find_class(module, name)
        raise RefusedPickle('{} is not a gluontrain checkpoint: it references {}.{}, which a '
                         'checkpoint never holds; refusing to load it (only open checkpoints '
                         'you wrote)'.format(self.path, module, name))


def dumps_state(obj):
    """Plain data (RNG states, hooks' state) as pickle bytes, for a reference's file that
    carries gluontrain's state in one entry (SGB's ``.pth``); read back by :func:`loads_state`."""
    return pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)


def loads_state(blob, path, allow=None):
    """Read :func:`dumps_state`'s bytes with the checkpoint's restricted unpickler;
    ``allow(module, name) -> bool`` admits a backend's own classes (:mod:`gluontrain.mx.blobs`).
    Raises :class:`RefusedPickle` (naming ``path``) for any other global."""
    return _RestrictedUnpickler(io.BytesIO(bytes(blob)), path, allow).load()


RESUME_IGNORED = ('resume', 'start_epoch', 'start_iter')
"""Arguments a resume always changes or replaces (the checkpoint decides the position)."""


def resume_changes(saved_args, args, must_match, path, ignored=RESUME_IGNORED, flag=None):
    """Compare the arguments a checkpoint was written with to this run's (docs/recipes.md,
    "Checkpoints": resume that extends or changes a run).

    Parameters
    ----------
    saved_args : dict
        The checkpoint's ``args``.
    args : argparse.Namespace or dict
        This run's arguments.
    must_match : sequence of str
        Argument names that must equal the checkpoint's.
    path : str
        The checkpoint, named in the error.
    ignored : sequence of str
        Names never reported (``--resume`` itself, the start position it replaces).
    flag : callable, optional
        ``flag(name) -> '--option'`` for the message (default ``'--' + name``).

    Returns
    -------
    list of str
        ``'--name: old -> new'`` for every other argument that differs.

    Raises
    ------
    ValueError
        When a ``must_match`` argument differs (names it, both values and the file).
    """
    flag = flag or (lambda name: '--' + name)
    current = dict(vars(args)) if hasattr(args, '__dict__') else dict(args)
    saved = dict(saved_args or {})
    for name in must_match:
        if name in saved and name in current and saved[name] != current[name]:
            raise ValueError(
                '--resume {}: the checkpoint was trained with {} {!r} but this run has {!r}; '
                'a resumed run must keep it (pass {} {!r}, or start a new run without '
                '--resume)'.format(path, flag(name), saved[name], current[name], flag(name),
                                   saved[name]))
    return ['{}: {!r} -> {!r}'.format(flag(name), saved[name], current[name])
            for name in sorted(current)
            if name in saved and name not in ignored and name not in must_match
            and saved[name] != current[name]]


def resume_or_load(path, restore_fn, load_weights_fn, weights_kind):
    """Resume from a checkpoint (``restore_fn(path)``) or load weights
    (``load_weights_fn(path)``), deciding by the file's content; the other backend's weights
    (not ``weights_kind``) are refused. Returns ``(kind, result)`` (docs/recipes.md, "The
    engine API", ``resume_or_load``)."""
    kind = file_kind(path)
    if kind == CHECKPOINT:
        return kind, restore_fn(path)
    if kind != weights_kind:
        raise ValueError('{} holds {} weights but this recipe loads {}; convert them or pass '
                         'a file written by this backend'.format(path, kind, weights_kind))
    return kind, load_weights_fn(path)


def load_checkpoint(path):
    """Read a checkpoint written by :func:`save_checkpoint`.

    Raises
    ------
    FileNotFoundError
        When ``path`` does not exist.
    ValueError
        Not a gluontrain checkpoint, or it holds anything a checkpoint never does.
    """
    if not os.path.isfile(path):
        raise FileNotFoundError('checkpoint {} does not exist; pass the {{prefix}}_last.ckpt file '
                                'a previous run wrote'.format(path))
    try:
        with open(path, 'rb') as f:
            payload = _RestrictedUnpickler(f, path).load()
    except RefusedPickle:
        raise
    except (pickle.UnpicklingError, EOFError, AttributeError, ValueError, IndexError,
            TypeError, UnicodeDecodeError) as e:
        raise ValueError('{} is not a gluontrain checkpoint ({}). A weights-only file such as '
                         '*.params is loaded with --load-weights, not --resume.'
                         .format(path, e)) from e
    missing = [k for k in REQUIRED_KEYS if not isinstance(payload, dict) or k not in payload]
    if missing:
        raise ValueError('{} is not a gluontrain checkpoint: missing {}'.format(path, missing))
    return payload
