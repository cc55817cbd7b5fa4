"""Launching the multi-process tests: a free port and ``torchrun`` on it; ``horovodrun``.

Every distributed test asks the kernel for its own port, so tests running at the same time
(pytest-xdist workers) never meet on one.
"""
import os
import re
import signal
import socket
import subprocess
import sys

#: The variables a parent torchrun or an outer job would leak into a nested launch.
DIST_VARIABLES = ('RANK', 'WORLD_SIZE', 'LOCAL_RANK', 'MASTER_ADDR', 'MASTER_PORT')


def default_sigint():
    """``preexec_fn`` for a child that a test interrupts with SIGINT: Ctrl-C's default action.

    A shell starts a background job (``pytest ... &``, ``nohup``) with SIGINT ignored, and an
    ignored signal stays ignored across ``exec``: Python then installs no KeyboardInterrupt
    handler, and the interrupted script trains on to its end with exit status 0 (measured:
    the six Ctrl-C tests failed that way under a background pytest, passed under tox, which
    handles SIGINT itself). A user's Ctrl-C reaches a foreground script with the default.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def free_port():
    """A TCP port on 127.0.0.1 that nothing listens on now (bound to port 0, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


def dist_env(**extra):
    """``os.environ`` with one OpenMP thread, no GPU, ``extra`` added and the distributed
    variables of any outer job removed.

    The multi-process tests are written for gloo on the CPU (what CI has): on a machine with
    one GPU, ``init_distributed`` would bind rank 1 to a ``cuda:1`` that does not exist and
    refuse it (measured on a lent H100), so the GPU is hidden unless ``extra`` says otherwise.
    """
    env = dict(os.environ, OMP_NUM_THREADS='1', CUDA_VISIBLE_DEVICES='')
    env.update(extra)
    for name in DIST_VARIABLES:
        env.pop(name, None)
    return env


def torchrun(program, args=(), nproc=2, timeout=300, env=None, launcher_args=()):
    """Run ``program args`` under ``torchrun --nproc_per_node nproc`` (static rendezvous on a
    free local port, no restarts).

    Parameters
    ----------
    program : str
        Script path.
    args : sequence of str, optional
        Its arguments.
    nproc : int, optional
        Processes (default 2).
    timeout : float, optional
        Seconds before ``subprocess.TimeoutExpired`` (default 300).
    env : dict, optional
        Environment (default :func:`dist_env`).
    launcher_args : sequence of str, optional
        More torchrun options (``--redirects 3 --log-dir DIR``).

    Returns
    -------
    subprocess.CompletedProcess
        With text ``stdout`` and ``stderr``.
    """
    cmd = [sys.executable, '-m', 'torch.distributed.run', '--nnodes', '1',
           '--nproc_per_node', str(nproc), '--rdzv-backend', 'static', '--master-addr',
           '127.0.0.1', '--master-port', str(free_port()), '--max-restarts', '0']
    cmd += list(launcher_args) + [program] + [str(a) for a in args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                          env=dist_env() if env is None else env, check=False)


#: Start method for the DataLoader workers of the tests. Not fork: an xdist worker that has
#: run MXNet tests has MXNet's fork handlers installed, and a fork from it can abort the whole
#: process (apache/mxnet#19420; seen here as "Fatal Python error: Aborted" in
#: popen_fork._launch). spawn also checks that the dataset pickles, as on macOS and Windows.
LOADER_CONTEXT = 'spawn'


def as_list(batch):
    """A ``collate_fn`` that keeps the batch a list (importable, so spawned workers can use it)."""
    return batch


#: Gloo's wait for the other ranks under ``horovodrun --gloo``, at the rendezvous in
#: ``hvd.init()`` and in its collectives (Horovod's default: 30 s, past which the waiting rank
#: aborts, exit status 134). On 2 cores shared with the other tests, the ranks' imports (the
#: first to compile a fresh environment's bytecode among them) can bring them to
#: ``hvd.init()`` far apart. Measured (docs/testing.md, "Horovod's rendezvous"): rank 1 made to
#: start 30.3 s late trained, 31 s late aborted both ranks at the rendezvous under the default,
#: 40 s late trained under 120 s; 45 s of one rank's work after ``hvd.init()`` never timed out.
#: 120 s stays under the tests' own timeouts.
HOROVOD_GLOO_TIMEOUT_S = 120


def horovodrun_command(argv, nproc=2):
    """``horovodrun -np nproc --gloo`` for the command ``argv`` (a list), given to ``sh -c`` as
    one quoted string: horovodrun's own parser would take the recipe's ``--network`` for an
    abbreviation of its ``--network-interface``. ``argv`` must hold no single quote."""
    assert not any("'" in str(a) for a in argv), argv
    return ['horovodrun', '-np', str(nproc), '--gloo', '--gloo-timeout-seconds',
            str(HOROVOD_GLOO_TIMEOUT_S), 'sh', '-c', ' '.join("'{}'".format(a) for a in argv)]


#: The first line of a rank's own report of what went wrong (Python, MXNet, the C++ runtime,
#: and Horovod's log at level E: ``[2026-11-30 04:21:07.123456: E <build dir>/horovod/...]``,
#: the source path as the build saw it, absolute under pip).
FIRST_ERROR = re.compile(r'Traceback|terminate called|what\(\)|Assertion|Error|error:|Fatal|'
                         r'Aborted|Segmentation|timeout|\d: E ', re.I)
#: ``[rank]<stdout|stderr>:`` with or without horovodrun's ``--prefix-timestamp``.
RANK_PREFIX = re.compile(r'(?:\w{3} \w{3} +\d+ [\d:]+ \d{4})?\[(\d+)\]<(?:stdout|stderr)>:(.*)')


def horovod_failure_report(output, lines_per_rank=40, tail=2000):
    """What a failed ``horovodrun`` printed, for an assertion message.

    For every rank, its lines from the first that reports an error (up to ``lines_per_rank``,
    each cut at 300 characters: faulthandler lists the extension modules on one line of
    thousands), then the last ``tail`` characters of the whole output. The tail alone (what
    the tests showed before) held only the rank shut down because another had failed: the
    cause, printed first by the failing rank, was thousands of characters earlier.
    """
    by_rank = {}
    for line in output.splitlines():
        match = RANK_PREFIX.match(line)
        if match:
            by_rank.setdefault(int(match.group(1)), []).append(match.group(2))
    parts = []
    for rank in sorted(by_rank):
        lines = by_rank[rank]
        first = next((i for i, text in enumerate(lines) if FIRST_ERROR.search(text)), None)
        if first is not None:
            shown = [text[:300] for text in lines[first:first + lines_per_rank]]
            parts.append('--- rank {}, from its first error line ({} of its {} lines):\n{}'.format(
                rank, first + 1, len(lines), '\n'.join(shown)))
    parts.append("--- the output's last {} characters:\n{}".format(tail, output[-tail:]))
    return '\n'.join(parts)


def horovod_env(**extra):
    """``os.environ`` for the ranks: one OpenMP thread and one MXNet engine worker (2 cores
    shared with the other tests), and ``PYTHONFAULTHANDLER`` so that a rank that aborts prints
    where its Python threads were; ``extra`` added."""
    env = dict(os.environ, OMP_NUM_THREADS='1', MXNET_CPU_WORKER_NTHREADS='1',
               PYTHONFAULTHANDLER='1')
    env.update(extra)
    return env
