"""Bytes from and to MXNet writers that only take a file name, without the system temp dir.

``net.save_parameters``, ``trainer.save_states`` and their ``load_*`` counterparts read and
write named files. A checkpoint wants their bytes, so they write to an anonymous in-memory
file (``memfd_create``, reached by its ``/proc/self/fd`` name): nothing lands on disk and a
killed process leaves nothing behind. Where there is no ``memfd_create`` (macOS), they use a
scratch file beside the output, named as :mod:`gluontrain.core.checkpoint` stages files, so
the next save of that output removes what a killed run left.
"""
import contextlib
import os

from ..core.checkpoint import scratch_file

__all__ = ['to_bytes', 'from_bytes']


def _memfd_available():
    return hasattr(os, 'memfd_create') and os.path.isdir('/proc/self/fd')


@contextlib.contextmanager
def _named_scratch(beside):
    """Yield a file name a C library can open (and Python too, at offset 0 each time)."""
    if _memfd_available():
        fd = os.memfd_create('gluontrain-blob')
        try:
            yield '/proc/self/fd/{}'.format(fd)
        finally:
            os.close(fd)
    else:
        with scratch_file(beside) as name:
            yield name


def to_bytes(save_fn, beside):
    """What ``save_fn(file_name)`` writes, as bytes.

    Parameters
    ----------
    save_fn : callable
        E.g. ``net.save_parameters`` or ``trainer.save_states``.
    beside : str
        The file the bytes are for (e.g. ``{prefix}_last.ckpt``); only used without
        ``memfd_create``, for the scratch file's folder and name.

    Returns
    -------
    bytes
    """
    with _named_scratch(beside) as name:
        save_fn(name)
        with open(name, 'rb') as f:
            return f.read()


def from_bytes(blob, load_fn, beside):
    """Call ``load_fn(file_name)`` on a file holding ``blob``.

    Parameters
    ----------
    blob : bytes
        What :func:`to_bytes` returned.
    load_fn : callable
        E.g. ``lambda f: net.load_parameters(f, ctx=ctx)`` or ``trainer.load_states``.
    beside : str
        As for :func:`to_bytes` (the checkpoint the blob came from).
    """
    with _named_scratch(beside) as name:
        with open(name, 'wb') as f:
            f.write(blob)
        return load_fn(name)
