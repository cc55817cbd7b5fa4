"""Atomic checkpoint files: a crash or kill -9 mid-write leaves the previous file loadable."""
import argparse
import collections
import errno
import os
import random
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from gluontrain.core import checkpoint as ck
from launch import default_sigint  # tests/launch.py


def _save(path, blob=b'p', epoch=1):
    return ck.save_checkpoint(path, params=blob, trainer=b't', epoch=epoch, iteration=7,
                              best_score=0.5, args=argparse.Namespace(lr=0.1), extra={'x': 1})


def test_round_trip_restores_fields_and_rng(tmp_path):
    path = str(tmp_path / 'run_last.ckpt')
    random.seed(1)
    np.random.seed(1)
    _save(path)
    expected = (random.random(), np.random.rand())
    random.seed(99)
    np.random.seed(99)
    payload = ck.load_checkpoint(path)
    assert (payload['params'], payload['trainer'], payload['epoch'], payload['iteration'],
            payload['best_score'], payload['args'], payload['extra']) == (
        b'p', b't', 1, 7, 0.5, {'lr': 0.1}, {'x': 1})
    ck.set_rng_states(payload['rng'])
    assert (random.random(), np.random.rand()) == expected


def test_exception_during_write_keeps_old_file_and_leaves_no_temp(tmp_path):
    path = str(tmp_path / 'f.bin')
    ck.atomic_write(path, lambda f: f.write(b'old'))

    def broken(f):
        f.write(b'half')
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        ck.atomic_write(path, broken)
    assert open(path, 'rb').read() == b'old'
    assert os.listdir(tmp_path) == ['f.bin']


def test_atomic_save_file_for_name_based_writers(tmp_path):
    path = str(tmp_path / 'w.params')

    def writer(name):
        assert name != path
        with open(name, 'w') as f:
            f.write('ok')

    ck.atomic_save_file(path, writer)
    assert open(path).read() == 'ok'
    with pytest.raises(OSError):
        ck.atomic_save_file(path, lambda name: (_ for _ in ()).throw(OSError('disk full')))
    assert open(path).read() == 'ok' and os.listdir(tmp_path) == ['w.params']


def test_kill_9_during_save_leaves_previous_checkpoint_loadable(tmp_path):
    path = str(tmp_path / 'run_last.ckpt')
    _save(path, blob=b'first', epoch=0)
    # a child process rewrites the checkpoint with 64 MB payloads until it is killed
    code = textwrap.dedent('''
        import argparse, sys
        from gluontrain.core import checkpoint as ck
        path = sys.argv[1]
        blob = bytes(64 * 1024 * 1024)
        print('ready', flush=True)
        epoch = 1
        while True:
            ck.save_checkpoint(path, params=blob, trainer=b't', epoch=epoch, iteration=epoch,
                               best_score=0.0, args=argparse.Namespace())
            epoch += 1
    ''')
    proc = subprocess.Popen([sys.executable, '-c', code, path], stdout=subprocess.PIPE)
    assert proc.stdout.readline().strip() == b'ready'
    # wait until a temp file exists, i.e. the child is in the middle of a write
    deadline = time.time() + 20
    while time.time() < deadline and not any(n.endswith('.tmp') for n in os.listdir(tmp_path)):
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    payload = ck.load_checkpoint(path)
    assert payload['params'] in (b'first', bytes(64 * 1024 * 1024))
    assert payload['epoch'] >= 0


def test_weights_file_is_refused_with_a_pointer_to_load_weights(tmp_path):
    bad = tmp_path / 'yolo3_best.params'
    bad.write_bytes(b'\x12\x01\x00\x00not a pickle')
    with pytest.raises(ValueError, match='--load-weights'):
        ck.load_checkpoint(str(bad))
    with pytest.raises(FileNotFoundError, match='missing.ckpt'):
        ck.load_checkpoint(str(tmp_path / 'missing.ckpt'))


class _Hostile:
    """Unpickling this runs ``os.system``-style code: here it would create a marker file."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, 'w'))


def test_hostile_checkpoint_is_refused_before_its_code_runs(tmp_path):
    import pickle
    marker = tmp_path / 'pwned'
    path = str(tmp_path / 'run_last.ckpt')
    payload = {'version': 1, 'params': b'', 'trainer': b'', 'epoch': 0, 'iteration': 0,
               'best_score': 0.0, 'rng': {}, 'args': {}, 'extra': {'x': _Hostile(str(marker))}}
    with open(path, 'wb') as f:
        pickle.dump(payload, f)
    assert ck.file_kind(path) == ck.CHECKPOINT  # a pickle: only loading tells it apart
    with pytest.raises(ValueError, match=r'run_last\.ckpt is not a gluontrain checkpoint: it '
                                         r'references (io|builtins)\.open'):
        ck.load_checkpoint(path)
    assert not marker.exists()
    with pytest.raises(ValueError, match=r'\.open, which a checkpoint never holds'):
        ck.resume_or_load(path, ck.load_checkpoint, lambda p: None, ck.MX_PARAMS)
    assert not marker.exists()


def test_file_kind_reads_content_not_suffix(tmp_path):
    ckpt = str(tmp_path / 'weights.params')  # a checkpoint under a weights name
    _save(ckpt)
    mx_file = tmp_path / 'model.ckpt'
    mx_file.write_bytes((0x112).to_bytes(8, 'little') + b'\0' * 16)
    zip_file = tmp_path / 'model.params'
    zip_file.write_bytes(b'PK\x03\x04rest')
    text = tmp_path / 'notes.pth'
    text.write_text('hello')
    assert [ck.file_kind(p) for p in (ckpt, str(mx_file), str(zip_file))] == [
        ck.CHECKPOINT, ck.MX_PARAMS, ck.TORCH_WEIGHTS]
    with pytest.raises(ValueError, match='notes.pth is neither'):
        ck.file_kind(str(text))
    with pytest.raises(FileNotFoundError, match='missing.ckpt'):
        ck.file_kind(str(tmp_path / 'missing.ckpt'))


def test_resume_or_load_dispatches_by_kind(tmp_path):
    ckpt = str(tmp_path / 'a.bin')
    _save(ckpt, epoch=4)
    mx_file = str(tmp_path / 'b.bin')
    with open(mx_file, 'wb') as f:
        f.write((0x112).to_bytes(8, 'little'))
    calls = []

    def restore(path):
        return ck.load_checkpoint(path)['epoch']
    assert ck.resume_or_load(ckpt, restore, calls.append, ck.MX_PARAMS) == (ck.CHECKPOINT, 4)
    assert ck.resume_or_load(mx_file, restore, calls.append, ck.MX_PARAMS) == (ck.MX_PARAMS,
                                                                                None)
    assert calls == [mx_file]
    with pytest.raises(ValueError, match='b.bin holds mxnet-params weights but this recipe '
                                         'loads torch-weights'):
        ck.resume_or_load(mx_file, restore, calls.append, ck.TORCH_WEIGHTS)


@pytest.mark.parametrize('umask', [0o022, 0o027, 0o002])
def test_staged_files_get_the_process_umask_not_0600(tmp_path, umask):
    path = str(tmp_path / 'run_last.ckpt')
    old = os.umask(umask)
    try:
        _save(path)
        ck.atomic_save_file(str(tmp_path / 'w.params'), lambda name: open(name, 'wb').close())
    finally:
        os.umask(old)
    for name in ('run_last.ckpt', 'w.params'):
        assert os.stat(tmp_path / name).st_mode & 0o777 == 0o666 & ~umask, name


def _dead_pid():
    pid = 4_000_000  # above Linux's pid_max default (4194304 is the hard limit)
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return pid
        except PermissionError:
            pass
        pid += 1


def test_next_save_removes_leftovers_of_killed_writes_only(tmp_path):
    path = tmp_path / 'run_last.ckpt'
    dead = '.run_last.ckpt.{}-0a1b2c3d.tmp'.format(_dead_pid())
    legacy = '.run_last.ckpt.k2j4_x9q.tmp'  # mkstemp's name before the pid was added
    ours = '.run_last.ckpt.{}-00ff00ff.tmp'.format(os.getpid())  # pid 1 in containers: reused
    live = '.run_last.ckpt.{}-1111aaaa.tmp'.format(os.getppid())  # another run writing now
    # another file's, e.g. the interval weights a killed run was writing: no later save has
    # its name, so every save sweeps the folder's dead staging files
    other = '.run_0001_0.5000.params.{}-2222aaaa.tmp'.format(_dead_pid())
    other_legacy = '.run_0001_0.5000.params.k2j4_x9q.tmp'  # not provably ours: kept
    foreign = '.cache.tmp'  # not a staging name
    for name in (dead, legacy, ours, live, other, other_legacy, foreign):
        (tmp_path / name).write_bytes(b'x' * 10)
    _save(str(path))
    assert sorted(os.listdir(tmp_path)) == sorted(['run_last.ckpt', live, other_legacy, foreign])
    assert ck.sweep_staged(str(path)) == []


def test_unwritable_place_raises_oserror_naming_the_final_file(tmp_path, monkeypatch):
    path = str(tmp_path / 'w.params')

    def no_space(name):
        raise OSError(errno.ENOSPC, 'No space left on device')  # as f.write raises it: no name

    with pytest.raises(OSError) as info:
        ck.atomic_save_file(path, no_space)
    assert (info.value.errno, info.value.filename) == (errno.ENOSPC, path)

    def library_error(name):
        with open(name, 'wb') as f:
            f.write(b'part')
        raise RuntimeError('FileStream.Write incomplete')  # MXNet names neither file nor errno

    # a full disk: the library's own error becomes ENOSPC naming the file
    monkeypatch.setattr(ck.shutil, 'disk_usage', lambda folder: shutil_usage(0))
    with pytest.raises(OSError) as info:
        ck.atomic_save_file(path, library_error)
    assert (info.value.errno, info.value.filename) == (errno.ENOSPC, path)
    assert 'FileStream.Write incomplete' in info.value.strerror
    # space left: the same error is a bug and stays what it is
    monkeypatch.setattr(ck.shutil, 'disk_usage', lambda folder: shutil_usage(10 ** 9))
    with pytest.raises(RuntimeError):
        ck.atomic_save_file(path, library_error)
    assert os.listdir(tmp_path) == []


def shutil_usage(free):
    return collections.namedtuple('usage', 'total used free')(10 ** 9, 10 ** 9 - free, free)


def test_scratch_file_is_removed_and_swept_like_a_staged_write(tmp_path):
    target = str(tmp_path / 'run_last.ckpt')
    with ck.scratch_file(target) as name:
        assert os.path.dirname(name) == str(tmp_path)
        assert os.path.basename(name).startswith('.run_last.ckpt.{}-'.format(os.getpid()))
        # a save of the target while the scratch file is in use leaves it alone
        _save(target)
        assert os.path.exists(name)
    assert os.listdir(tmp_path) == ['run_last.ckpt']


def test_resume_changes_refuses_what_must_match_and_lists_the_rest():
    from argparse import Namespace
    from gluontrain.core.checkpoint import resume_changes
    saved = {'network': 'a', 'epochs': 2, 'lr': 0.1, 'resume': '', 'start_epoch': 0}
    now = Namespace(network='a', epochs=4, lr=0.1, resume='r.ckpt', start_epoch=3, new_arg=1)
    assert resume_changes(saved, now, ('network',), 'r.ckpt') == ['--epochs: 2 -> 4']
    now.network = 'b'
    with pytest.raises(ValueError, match=r"--resume r.ckpt: the checkpoint was trained with "
                                         r"--network 'a' but this run has 'b'"):
        resume_changes(saved, now, ('network',), 'r.ckpt')


def test_ctrl_c_inside_a_write_completes_the_file_then_interrupts(tmp_path):
    # SIGINT sent from inside the writer (where a Ctrl-C lands during a checkpoint write):
    # held until the file is whole and renamed, then the KeyboardInterrupt; 20 of 20 tries
    # Python's own Ctrl-C handler, as in a foreground script (an xdist worker or a background
    # job may run with SIGINT ignored, which the hold leaves alone)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        _interrupt_20_writes(tmp_path)
    finally:
        signal.signal(signal.SIGINT, previous)


def _interrupt_20_writes(tmp_path):
    path = str(tmp_path / 'x.ckpt')
    for attempt in range(20):
        def write(f, at=attempt):
            for i in range(20):
                if i == at:
                    os.kill(os.getpid(), signal.SIGINT)
                f.write(bytes([i]) * 1000)
        with pytest.raises(KeyboardInterrupt):
            ck.atomic_write(path, write)
        with open(path, 'rb') as f:
            assert f.read() == b''.join(bytes([i]) * 1000 for i in range(20))
        assert sorted(os.listdir(str(tmp_path))) == ['x.ckpt']
    # the handler is Python's again afterwards
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_ctrl_c_inside_torch_save_streaming_into_a_checkpoint_is_not_an_abort(tmp_path):
    # torch.save's C++ writer calls back into f.write: a KeyboardInterrupt raised there
    # aborted the process (exit 134); held, the run ends with the interrupt (exit 130)
    torch = pytest.importorskip('torch')
    code = textwrap.dedent('''
        import os, signal, sys
        import torch
        from gluontrain.core import checkpoint as ck
        from gluontrain.core.streamed_pickle import StreamedBlob

        class Interrupting:
            def __init__(self, f):
                self.f, self.n = f, 0
            def write(self, data):
                self.n += 1
                if self.n == 3:
                    os.kill(os.getpid(), signal.SIGINT)
                self.f.write(data)
                return len(data)
            def flush(self):
                pass

        # the blob is written twice: counted when it is made, then into the file
        first = sys.argv[2] == 'counting'
        try:
            blob = StreamedBlob(lambda f: torch.save({'w': torch.zeros(4096)},
                                                     Interrupting(f) if first else f))
            first = not first
            ck.save_checkpoint(sys.argv[1], blob, b'', 0, 1, 0.0, None)
        except KeyboardInterrupt:
            if os.path.exists(sys.argv[1]):
                payload = ck.load_checkpoint(sys.argv[1])
                state = torch.load(__import__('io').BytesIO(payload['params']),
                                   weights_only=True)
                assert state['w'].shape == (4096,)
            sys.exit(130)
        sys.exit(1)
    ''')
    del torch
    for where in ('counting', 'writing'):
        res = subprocess.run([sys.executable, '-c', code, str(tmp_path / (where + '.ckpt')),
                              where], capture_output=True, text=True, timeout=120,
                             preexec_fn=default_sigint)
        assert res.returncode == 130, (where, res.returncode, res.stderr[-2000:])
        assert os.path.exists(str(tmp_path / (where + '.ckpt'))) == (where == 'writing')
