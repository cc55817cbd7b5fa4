"""What every hostile case of tests/hostile/ asserts, and the ways the cases spoil good inputs.

A hostile input (a corrupt image, a truncated or hostile weights file, a config value that
does not parse, an output path that cannot be written, ...) must end the run with a non-zero
exit status, no ``Traceback``, exactly one ``error:`` line (or, for Ctrl-C, one
``interrupted`` line) naming the file or key given, and nothing half-written left in the
output folder (no 0-byte file, no staging ``.*.tmp`` file). :func:`check_refused` is that
assertion; the cases run in this process through ``gluontrain.__main__.main`` (fast) or, for a
representative few per recipe, as a real ``python scripts/...`` subprocess (real stderr).
"""
import os
import pickle
import re
import shutil
import signal
import subprocess
import sys
import time
import warnings

import pytest

from launch import default_sigint  # tests/launch.py

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPTS = os.path.join(ROOT, 'scripts')
ENV = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS='1', MXNET_CPU_WORKER_NTHREADS='1',
           MPLBACKEND='Agg', PYTHONHASHSEED='0', PYTHONUNBUFFERED='1')
for _name in ('RANK', 'WORLD_SIZE', 'LOCAL_RANK', 'MASTER_ADDR', 'MASTER_PORT'):
    ENV.pop(_name, None)

EXIT_INTERRUPTED = 130
_STAGING = re.compile(r'^\..+\.tmp$')


def run_main(argv, capsys):
    """Run ``gluontrain train ...`` in this process.

    Parameters
    ----------
    argv : list of str
        ``['train', recipe, ...]``.
    capsys : pytest.CaptureFixture

    Returns
    -------
    tuple
        ``(exit status, stdout, stderr)``; an argparse error (``SystemExit``) counts as its
        exit status.
    """
    from gluontrain.__main__ import main  # pylint: disable=import-outside-toplevel
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        try:
            code = main(list(argv))
        except SystemExit as e:  # argparse: "prog: error: ..." and status 2
            code = e.code
    captured = capsys.readouterr()
    # a script prints its warnings on stderr; under pytest they would only be recorded
    shown = ''.join(warnings.formatwarning(w.message, w.category, w.filename, w.lineno, '')
                    for w in caught if not issubclass(w.category, DeprecationWarning))
    return code, captured.out, captured.err + shown


def run_script(script, args, timeout=120):
    """Run ``python scripts/<script> args`` and return the ``CompletedProcess`` (text)."""
    return subprocess.run([sys.executable, os.path.join(SCRIPTS, script)] + [str(a) for a in args],
                          capture_output=True, text=True, env=ENV, cwd=ROOT, timeout=timeout)


def half_written(folder):
    """Files under ``folder`` a failed run must not leave: 0-byte files and staging files."""
    if folder is None or not os.path.isdir(str(folder)):
        return []
    bad = []
    for dirpath, _, names in os.walk(str(folder)):
        for name in names:
            path = os.path.join(dirpath, name)
            if _STAGING.match(name) or name.endswith('.tmp') or (
                    os.path.isfile(path) and os.path.getsize(path) == 0):
                bad.append(path)
    return bad


def check_refused(code, err, names, out_dir=None, allowed=(), interrupted=False):
    """The assertion every hostile case makes.

    Parameters
    ----------
    code : int
        The exit status: non-zero (130 for ``interrupted``).
    err : str
        stderr: no ``Traceback``; exactly one line with ``error:`` (or, for ``interrupted``,
        the last line starts with ``interrupted`` and no ``error:`` line).
    names : sequence of str
        Each must appear in that one line (the file, key or argument given).
    out_dir : str, optional
        The run's output folder: no 0-byte or staging file may be left in it.
    allowed : sequence of str
        Files under ``out_dir`` that were there before the run (e.g. a 0-byte input the case
        planted itself).
    interrupted : bool

    Returns
    -------
    str
        The line.
    """
    assert code not in (0, None), 'exit status 0 for a hostile input; stderr:\n' + err[-3000:]
    assert 'Traceback' not in err, err[-6000:]
    lines = err.strip().splitlines()
    errors = [line for line in lines if 'error:' in line]
    if interrupted:
        assert code == EXIT_INTERRUPTED, (code, err[-3000:])
        assert not errors, err[-3000:]
        last = lines[-1] if lines else ''
        assert last.startswith('interrupted'), err[-3000:]
        line = last
    else:
        assert len(errors) == 1, 'want exactly one error: line; stderr:\n' + err[-3000:]
        line = errors[0]
    # a dataset error lists its problems on the lines below its one error line
    start = lines.index(line)
    listed = '\n'.join([line] + [x for x in lines[start + 1:] if x[:1].isspace() or
                                 x.startswith('- ')])
    for name in names:
        assert str(name) in listed, 'the line does not name {!r}: {}'.format(str(name), listed)
    left = [p for p in half_written(out_dir) if p not in {str(a) for a in allowed}]
    assert not left, 'half-written files left behind: {}'.format(left)
    return line


def check_reported(code, out, err, names, out_dir=None):
    """A case the recipe may either refuse (:func:`check_refused`) or accept with a warning:
    then the run succeeds, no ``Traceback``, and one line of its output names ``names``."""
    if code not in (0, None):
        return check_refused(code, err, names, out_dir)
    assert 'Traceback' not in err, err[-6000:]
    lines = [line for line in (out + '\n' + err).splitlines()
             if all(str(n) in line for n in names)]
    assert lines, 'accepted without a word naming {}; output:\n{}'.format(
        names, (out + err)[-3000:])
    return lines[0]


# ---------------------------------------------------------------- spoiling good inputs

def copy_tree(src, dst):
    """A private copy of a shared dataset (module fixtures must never be corrupted)."""
    shutil.copytree(str(src), str(dst))
    return str(dst)


def zero_bytes(path):
    """Empty ``path`` (a 0-byte image / weights file)."""
    open(str(path), 'wb').close()
    return str(path)


def truncate(path, keep=0.5):
    """Cut ``path`` to ``keep`` of its size (a download or copy that stopped)."""
    path = str(path)
    size = os.path.getsize(path)
    with open(path, 'r+b') as f:
        f.truncate(max(1, int(size * keep)))
    return path


def garbage(path, text=b'this is not what you think it is\n' * 8):
    """Overwrite ``path`` with bytes of no known format."""
    with open(str(path), 'wb') as f:
        f.write(text)
    return str(path)


class _Payload:
    """Unpickling this runs ``os.mkdir(marker)``: a hostile pickle that leaves a trace."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return os.mkdir, (self.marker,)


def hostile_torch_file(path, marker, key='model'):
    """A ``torch.save`` zip file whose pickle calls ``os.mkdir(marker)`` when loaded without
    ``weights_only``; the case asserts that ``marker`` never appears."""
    import torch  # pylint: disable=import-outside-toplevel
    torch.save({key: _Payload(marker)}, str(path))
    return str(path)


def hostile_pickle(path, marker):
    """A plain pickle (``.pkl`` / ``.cache``) that calls ``os.mkdir(marker)`` when loaded."""
    with open(str(path), 'wb') as f:
        pickle.dump({'blobs': _Payload(marker)}, f, protocol=2)
    return str(path)


# ------------------------------------------------------------------------- Ctrl-C

def interrupt_script(script, args, out_dir, started, timeout=120):
    """Start ``python scripts/<script> args``, wait until ``started`` (a regex) appears in
    its stdout or stderr (training has begun), send SIGINT, and return
    ``(exit status, stdout, stderr)``."""
    out_dir = str(out_dir)
    os.makedirs(out_dir, exist_ok=True)
    out_path, err_path = out_dir + '.stdout', out_dir + '.stderr'
    pattern = re.compile(started, re.M)
    with open(out_path, 'w') as out, open(err_path, 'w') as err:
        proc = subprocess.Popen([sys.executable, os.path.join(SCRIPTS, script)]
                                + [str(a) for a in args], stdout=out, stderr=err, env=ENV,
                                cwd=ROOT, preexec_fn=default_sigint)
        try:
            deadline = time.time() + timeout
            while time.time() < deadline and proc.poll() is None:
                with open(out_path) as o, open(err_path) as e:
                    if pattern.search(o.read()) or pattern.search(e.read()):
                        break
                time.sleep(0.05)
            else:
                proc.kill()
                proc.wait()
                with open(out_path) as o, open(err_path) as e:
                    pytest.fail('training never started (or ended first): {}\n{}'.format(
                        o.read()[-2000:], e.read()[-3000:]))
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=timeout)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    with open(out_path) as o, open(err_path) as e:
        return proc.returncode, o.read(), e.read()


# ------------------------------------------------------------------- read-only folder

def read_only_dir(path, options='ro,size=64k'):
    """A read-only file system mounted at ``path`` (root only: permissions do not stop root);
    ``options='size=64k'`` gives a nearly full disk instead.

    Returns a callable that unmounts it; skips the test where no tmpfs can be mounted.
    """
    path = str(path)
    os.makedirs(path, exist_ok=True)
    if os.geteuid() != 0:
        pytest.skip('mounting a tmpfs needs root')
    res = subprocess.run(['mount', '-t', 'tmpfs', '-o', options, 'tmpfs', path],
                         capture_output=True, text=True, check=False)
    if res.returncode:
        pytest.skip('cannot mount a tmpfs here: ' + res.stderr.strip())
    # lazy: a log handler of an in-process run may still hold a file open there
    return lambda: subprocess.run(['umount', '-l', path], check=False)


# ------------------------------------------------------------- VOC (SSD and YOLOv3)

def set_attr(case, attr, value):
    """``setattr(case, attr, value)``, returning ``value`` (for the case tables)."""
    setattr(case, attr, value)
    return value


def empty_file(path):
    """Make ``path`` an empty file (an image list or annotation with nothing in it)."""
    open(path, 'w').close()
    return path


def voc_list(case, split='trainval', year=2007):
    """``ImageSets/Main/<split>.txt`` of the case's private copy of the VOCdevkit."""
    return os.path.join(case.copy_data(), 'VOC{}'.format(year), 'ImageSets', 'Main',
                        split + '.txt')


def voc_ids(root, split='trainval', year=2007):
    """The image ids of ``VOC{year}/ImageSets/Main/{split}.txt`` under the VOCdevkit
    ``root``."""
    with open(os.path.join(str(root), 'VOC{}'.format(year), 'ImageSets', 'Main',
                           split + '.txt')) as f:
        return f.read().split()


def voc_image(root, index=0, split='trainval', year=2007):
    """The JPEG of the ``index``-th image of a split."""
    return os.path.join(str(root), 'VOC{}'.format(year), 'JPEGImages',
                        voc_ids(root, split, year)[index] + '.jpg')


def voc_xml(root, index=0, split='trainval', year=2007):
    """The annotation XML of the ``index``-th image of a split."""
    return os.path.join(str(root), 'VOC{}'.format(year), 'Annotations',
                        voc_ids(root, split, year)[index] + '.xml')


def voc_edit_xml(root, pattern, replacement, index=0, count=1, split='trainval', year=2007):
    """``re.sub`` in one annotation XML (``count`` 0: every match); returns the file."""
    path = voc_xml(root, index, split, year)
    with open(path) as f:
        text = f.read()
    new = re.sub(pattern, replacement, text, count=count)
    assert new != text, (pattern, path)
    with open(path, 'w') as f:
        f.write(new)
    return path
