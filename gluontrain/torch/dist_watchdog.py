"""A stopped rank ends the job in one line: the collective timeout and the rank watchdog.

One number, :func:`dist_timeout` (seconds, from the caller, else ``$GLUONTRAIN_DIST_TIMEOUT``,
else 600), bounds the process group's ``timeout`` (:func:`explain_collective_error` turns
gloo's failure into one line naming the rank(s) that stopped answering) and
:class:`RankWatchdog`, a heartbeat thread in every rank that watches the next rank and its own
main thread (docs/distributed.md, "A rank that stops: the collective timeout and the
watchdog")."""
import datetime
import os
import signal
import socket
import sys
import threading
import time
import traceback

import torch.distributed as dist

__all__ = ['TIMEOUT_ENV', 'DEFAULT_TIMEOUT_S', 'dist_timeout', 'CollectiveTimeoutError',
           'explain_join_error', 'explain_collective_error', 'report_collective_error',
           'RankWatchdog']

TIMEOUT_ENV = 'GLUONTRAIN_DIST_TIMEOUT'
DEFAULT_TIMEOUT_S = 600.0
_KEY = 'gluontrain/heartbeat/{}'
_WHERE = 'gluontrain/where/{}'
# one report per process: the watchdog and the failed collective may both notice
_REPORTED = threading.Lock()


class CollectiveTimeoutError(ValueError):
    """A collective waited longer than the timeout: another rank stopped answering."""


def dist_timeout(timeout_s=None):
    """The collective timeout in seconds: ``timeout_s``, else ``$GLUONTRAIN_DIST_TIMEOUT``,
    else 600.

    Parameters
    ----------
    timeout_s : float, optional

    Returns
    -------
    float

    Raises
    ------
    ValueError
        For a value that is not a positive number (naming the variable).
    """
    source = 'timeout_s'
    if timeout_s is None:
        value = os.environ.get(TIMEOUT_ENV, '')
        if value.strip() == '':
            return DEFAULT_TIMEOUT_S
        timeout_s, source = value, 'environment variable {}'.format(TIMEOUT_ENV)
    try:
        seconds = float(timeout_s)
    except (TypeError, ValueError):
        seconds = float('nan')
    if not seconds > 0 or seconds == float('inf'):
        raise ValueError('{}={!r}: the collective timeout must be a positive number of seconds '
                         '(default {:g})'.format(source, timeout_s, DEFAULT_TIMEOUT_S))
    return seconds


def explain_join_error(error, rank, world_size, timeout_s):
    """One line for a process group that could not be joined within the timeout (the other
    ranks did not arrive: one started late, imported slower or died at start-up), else None.

    Parameters
    ----------
    error : BaseException
        What ``torch.distributed.init_process_group`` raised (gloo: a ``DistStoreError``
        "wait timeout after 2000ms, keys: ...").
    rank, world_size : int
    timeout_s : float

    Returns
    -------
    str or None
    """
    text = str(error).strip()
    if not isinstance(error, RuntimeError) or not any(
            w in text.lower() for w in ('timeout', 'timed out')):
        return None
    return ('rank {}: the other {} rank(s) did not join the process group within {:g} s of this '
            'one (started late, slower to start or dead at start-up; torch: {}); the job ends '
            '(raise {}={:g} above the ranks\' start-up skew)'.format(
                rank, world_size - 1, timeout_s, text.splitlines()[0][:120] if text else '?',
                TIMEOUT_ENV, timeout_s))


def explain_collective_error(error):
    """One line for a collective that failed because another rank stopped, else None.

    Parameters
    ----------
    error : BaseException
        What the collective raised (gloo: a RuntimeError / DistBackendError saying "Timed out"
        or "Connection closed by peer").

    Returns
    -------
    str or None
        ``"rank 1 stopped answering (no heartbeat for 5 s: ...; seen from rank 0); ..."``, or
        None when ``error`` is not such a failure.
    """
    if isinstance(error, CollectiveTimeoutError):
        return str(error)
    words = ('timed out', 'timeout', 'connection closed by peer', 'connection reset by peer',
             'broken pipe')
    if not isinstance(error, RuntimeError) or not any(w in str(error).lower() for w in words):
        return None
    watchdog = RankWatchdog.current
    if watchdog is None:
        if not (dist.is_available() and dist.is_initialized()):
            return None
        rank, world = dist.get_rank(), dist.get_world_size()
        others = [r for r in range(world) if r != rank]
        return ('rank {}: a collective of the {} ranks failed ({}): rank(s) {} stopped '
                'answering; the job ends (timeout: {} seconds)'.format(
                    rank, world, str(error).splitlines()[0][:120],
                    ', '.join(map(str, others)), TIMEOUT_ENV))
    # the watchdog must not end the process (silently or with a second line) meanwhile
    watchdog.stop()
    _REPORTED.acquire(blocking=False)
    RankWatchdog.last = watchdog
    return watchdog.describe()


def report_collective_error(error):
    """Write :func:`explain_collective_error`'s line for ``error`` to stderr as one ``error:``
    line, then SIGKILL the stopped ranks on this host it named (torchrun would wait 30 s for
    them).

    Returns
    -------
    bool
        False (nothing written) when ``error`` is no such failure: the caller re-raises it.
    """
    reason = explain_collective_error(error)
    if reason is None:
        return False
    print('error: ' + reason, file=sys.stderr, flush=True)
    if RankWatchdog.last is not None:
        RankWatchdog.last.kill_stopped()
    return True


class RankWatchdog:
    """A heartbeat thread that ends this rank when another rank (or this one) stopped.

    Parameters
    ----------
    rank, world_size : int
    timeout_s : float
        A heartbeat unchanged this long means stopped.
    store : object with TCPStore's ``add``, ``set``, ``get`` and ``check``, optional
        Default: a client of the job's TCP store at ``MASTER_ADDR:MASTER_PORT``.
    exit_fn : callable, optional
        Called once the line is on stderr; default ``os._exit(1)`` (the main thread is blocked
        in the collective and cannot be unwound).
    main_thread : threading.Thread, optional
        The thread watched for being stuck in one place (default: the main thread).
    """

    current = None
    last = None

    def __init__(self, rank, world_size, timeout_s, store=None, exit_fn=None, main_thread=None):
        self.rank, self.world_size, self.timeout_s = rank, world_size, float(timeout_s)
        self.period = min(5.0, max(0.2, self.timeout_s / 10.0))
        self.store, self.exit_fn = store, exit_fn or _exit_with
        self.main_thread = main_thread or threading.main_thread()
        self.watched = (rank + 1) % world_size
        self.seen = {}      # rank -> (count, monotonic time it last changed)
        self._stop = threading.Event()
        self._thread = None
        self._place = (None, 0.0)    # (main thread's frame position, since when)
        self.to_kill = []

    def start(self):
        """Start the thread; False (and no watchdog) when the store cannot be reached."""
        try:
            if self.store is None:
                self.store = dist.TCPStore(
                    os.environ['MASTER_ADDR'], int(os.environ['MASTER_PORT']), is_master=False,
                    timeout=datetime.timedelta(seconds=self.timeout_s), wait_for_workers=False)
            self.store.set(_WHERE.format(self.rank),
                           '{} {}'.format(socket.gethostname(), os.getpid()))
            self.beat()
        except (KeyError, ValueError, RuntimeError, OSError):
            return False
        self._thread = threading.Thread(target=self._run, name='gluontrain-rank-watchdog',
                                        daemon=True)
        RankWatchdog.current = self
        self._thread.start()
        return True

    def stop(self):
        """Stop the thread (before the process group is destroyed)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2 * self.period + 1)
        if RankWatchdog.current is self:
            RankWatchdog.current = None

    def beat(self):
        """Count one heartbeat of this rank."""
        self.store.add(_KEY.format(self.rank), 1)

    def read(self, rank, now=None):
        """Seconds since ``rank``'s heartbeat last moved (0 the first time it is read)."""
        now = time.monotonic() if now is None else now
        count = self.store.add(_KEY.format(rank), 0)
        last = self.seen.get(rank)
        if last is None or last[0] != count:
            self.seen[rank] = (count, now)
            return 0.0
        return now - last[1]

    def stuck_place(self, now=None):
        """``'FILE:LINE (function)'`` where the main thread has stayed for the timeout, outside
        ``torch.distributed`` (there it waits for the others, which the heartbeats cover)."""
        now = time.monotonic() if now is None else now
        if self.main_thread is threading.current_thread():
            return None     # asked by the watched thread itself: it is moving
        frame = sys._current_frames().get(self.main_thread.ident)  # pylint: disable=protected-access
        if frame is None:
            return None
        place = (id(frame.f_code), frame.f_lineno, frame.f_lasti)
        if place != self._place[0]:
            self._place = (place, now)
            return None
        if now - self._place[1] < self.timeout_s:
            return None
        if any(os.sep.join(('torch', 'distributed')) in f.f_code.co_filename
               for f, _ in traceback.walk_stack(frame)):
            return None
        return '{}:{} ({})'.format(frame.f_code.co_filename, frame.f_lineno,
                                   frame.f_code.co_name)

    def check(self, now=None):
        """One round: beat, and the line to end with when a rank stopped (else None)."""
        try:
            self.beat()
            idle = self.read(self.watched, now)
        except (RuntimeError, OSError, ValueError):
            return ('rank {}: the job\'s store at {}:{} did not answer within {:g} s (rank 0 '
                    'or the torchrun agent that holds it stopped); the job ends'.format(
                        self.rank, os.environ.get('MASTER_ADDR'),
                        os.environ.get('MASTER_PORT'), self.timeout_s))
        if idle >= self.timeout_s:
            return self._line([self.watched], idle)
        place = self.stuck_place(now)
        if place is not None:
            return ('rank {} made no progress for {:g} s, stuck in {} (a data loader or a '
                    'read that never returns?); the job ends ({}={:g})'.format(
                        self.rank, self.timeout_s, place, TIMEOUT_ENV, self.timeout_s))
        return None

    def stopped_here(self, ranks):
        """``[(rank, pid)]`` of those of ``ranks`` that are stopped processes (state T) on this
        host: a stopped process runs no handler, and torchrun's SIGTERM would wait 30 s for it,
        so :meth:`kill_stopped` ends them once the line is written."""
        found = []
        for r in ranks:
            try:
                # check() does not wait for a missing key, get() would
                if not self.store.check([_WHERE.format(r)]):
                    continue
                host, pid = self.store.get(_WHERE.format(r)).decode().split()
                if host != socket.gethostname():
                    continue
                with open('/proc/{}/stat'.format(pid)) as f:
                    state = f.read().rsplit(')', 1)[1].split()[0]
                if state in ('T', 't'):
                    found.append((r, int(pid)))
            except (OSError, ValueError, RuntimeError, IndexError):
                continue
        return found

    def kill_stopped(self):
        """SIGKILL the stopped processes the last line named (see :meth:`stopped_here`)."""
        for _, pid in self.to_kill:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        self.to_kill = []

    def _line(self, ranks, idle):
        self.to_kill = self.stopped_here(ranks)
        return ('rank {} stopped answering (no heartbeat for {:.0f} s: stopped, hung or dead; '
                'seen from rank {}); the job ends ({}={:g}{})'.format(
                    ', '.join(map(str, ranks)), idle, self.rank, TIMEOUT_ENV, self.timeout_s,
                    '; stopped process killed' if self.to_kill else ''))

    def describe(self):
        """The line for a collective that timed out here: the ranks whose heartbeat stopped
        (read twice, a heartbeat apart)."""
        others = [r for r in range(self.world_size) if r != self.rank]
        try:
            for r in others:
                self.read(r)
            time.sleep(2 * self.period)
            stale = [r for r in others if self.read(r) > 0]
        except (RuntimeError, OSError, ValueError):
            stale = []
        if stale:
            return self._line(stale, self.timeout_s)
        return ('{} alive but stuck outside the collectives (a data loader or a read that never '
                'returns?): rank {} waited {:g} s for it in a collective; the job ends ({}={:g})'
                .format('rank {} is'.format(others[0]) if len(others) == 1 else
                        'one of ranks {} is'.format(', '.join(map(str, others))),
                        self.rank, self.timeout_s, TIMEOUT_ENV, self.timeout_s))

    def _run(self):
        while not self._stop.wait(self.period):
            line = self.check()
            if line is not None and not self._stop.is_set():
                if _REPORTED.acquire(blocking=False):
                    sys.stderr.write('error: {}\n'.format(line))
                    sys.stderr.flush()
                    # after the line: torchrun stops this rank once the killed one is gone
                    self.kill_stopped()
                    self.exit_fn()
                return


def _exit_with():
    sys.stderr.flush()
    sys.stdout.flush()
    os._exit(1)  # pylint: disable=protected-access
