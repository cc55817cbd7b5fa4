"""An advisory file lock between processes (dataset generation, model-store downloads)."""
import contextlib
import os

__all__ = ['file_lock']


@contextlib.contextmanager
def file_lock(path):
    """Exclusive advisory lock on ``path`` (no-op where ``fcntl`` is unavailable)."""
    try:
        import fcntl  # pylint: disable=import-outside-toplevel
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, 'a') as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
