"""Launching the multi-process tests: a free port and ``torchrun`` on it.

Every distributed test asks the kernel for its own port, so tests running at the same time
(pytest-xdist workers) never meet on one.
"""
import os
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
