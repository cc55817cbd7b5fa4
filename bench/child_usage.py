"""What one child process cost, for the whole-run benches (``e2e_yolo3.py``, ``e2e_ssd.py``)."""
import os
import subprocess
import time


def timed(cmd, cwd, env):
    """Run ``cmd`` in ``cwd`` with ``env``, its stdout and stderr in files there.

    Returns
    -------
    (cpu, wall, rss), stdout
        The child's user + system CPU seconds, wall seconds and peak resident memory in MiB
        (``ru_maxrss`` of that child alone, through ``os.wait4``), and what it printed.

    Raises
    ------
    SystemExit
        When the child fails, with the end of its stderr.
    """
    start = time.perf_counter()
    with open(os.path.join(cwd, 'stdout.txt'), 'w+') as out, \
            open(os.path.join(cwd, 'stderr.txt'), 'w+') as err:
        child = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=err)
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - start
        if os.waitstatus_to_exitcode(status):
            err.seek(0)
            raise SystemExit('{} failed: {}'.format(' '.join(cmd[:4]), err.read()[-3000:]))
        out.seek(0)
        return (usage.ru_utime + usage.ru_stime, wall, usage.ru_maxrss / 1024.0), out.read()
