"""Handing a step's freed memory back to the system (glibc's ``malloc_trim``): why and what it
saved on the README main job, docs/performance.md, "On the README main job's settings".
Only glibc has the call; elsewhere (macOS, Windows, musl) :func:`release_free_memory` does
nothing and says so."""
import ctypes
import ctypes.util
import time

from .loop import Hook

__all__ = ['release_free_memory', 'ReleaseMemoryHook']

_TRIM = []  # [malloc_trim or None], looked up once


def _malloc_trim():
    if not _TRIM:
        trim = None
        name = ctypes.util.find_library('c')
        if name:
            try:
                trim = ctypes.CDLL(name).malloc_trim
            except (OSError, AttributeError):  # not glibc: no such symbol
                trim = None
        if trim is not None:
            trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
        _TRIM.append(trim)
    return _TRIM[0]


def release_free_memory():
    """Return the C allocator's free heap pages to the system (glibc's ``malloc_trim(0)``).

    Returns
    -------
    bool or None
        None where the C library has no ``malloc_trim`` (not glibc); otherwise whether any
        memory was released.
    """
    trim = _malloc_trim()
    if trim is None:
        return None
    return bool(trim(0))


class ReleaseMemoryHook(Hook):
    """:func:`release_free_memory` after the steps, as often as costs at most ``max_fraction``
    of the run, and after every epoch's hooks (validation, checkpoint, pictures), on every rank.

    The last hook of :func:`gluontrain.core.defaults.build_hooks`' list (before a distributed
    barrier), so that what the other hooks freed goes back too. A trim costs ~2 ms on the
    README main job's heap, under 1 % of its 236 ms step, so it runs after every step there;
    after a trim that took ``t`` seconds the next waits ``t / max_fraction`` seconds, so that
    fast steps (a GPU's tens per second) trim every few steps instead of paying it each time
    (measured on that job: a trim at most every second instead of every step gave back only a
    third of the saving). ``release`` is the function called and ``clock`` the time source (a
    test's stand-ins).
    """

    def __init__(self, max_fraction=0.01, release=release_free_memory, clock=time.perf_counter):
        self.max_fraction, self.release, self.clock = max_fraction, release, clock
        self._due = None

    def _trim(self):
        start = self.clock()
        self.release()
        end = self.clock()
        self._due = end + (end - start) / self.max_fraction

    def after_batch(self, state):
        """Trim after the step and the per-step hooks, when the trim's budget allows."""
        if self._due is None or self.clock() >= self._due:
            self._trim()

    def after_epoch(self, state):
        """Trim after validation, checkpoint and pictures."""
        self._trim()
