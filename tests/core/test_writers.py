"""core.writers: the text log, TensorBoard files and staged rows on a full disk, and a whole
run on a full disk: one ``error:`` line, nothing printed after it, no 0-byte or staging file."""
import errno
import logging
import os
import struct
import subprocess
import sys

import pytest

from gluontrain.core import checkpoint as ckpt
from gluontrain.core.hooks import LossMeterHook, MetricsJSONHook
from gluontrain.core.loop import TrainState, run_loop
from gluontrain.core.meters import LossMeter
from gluontrain.core.writers import (EventFile, LogFileHandler, TensorBoardHook, remove_if_empty,
                                     tensorboard_available)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FULL = '/dev/full'  # every write fails with ENOSPC


def _step(batch, state):
    return {'losses': {'Loss': [(1.0 + state.iteration, 1)]}, 'lr': 0.1}


def test_log_file_handler_raises_once_naming_the_file(capsys):
    if not os.path.exists(FULL):
        pytest.skip(FULL + ' is not available')
    logger = logging.getLogger('gluontrain.test_writers')
    logger.propagate = False
    handler = LogFileHandler(FULL)
    logger.addHandler(handler)
    try:
        with pytest.raises(OSError) as info:
            logger.warning('a line the disk cannot take')
        assert (info.value.errno, info.value.filename) == (errno.ENOSPC, FULL)
        logger.warning('later lines are dropped quietly')  # no second error, no traceback
    finally:
        logger.removeHandler(handler)
        handler.close()
    assert os.path.exists(FULL)  # a device is never removed
    assert 'Logging error' not in capsys.readouterr().err


def test_log_file_handler_is_created_at_the_first_line(tmp_path):
    path = tmp_path / 'x.log'
    handler = LogFileHandler(str(path), mode='w')
    assert not path.exists()  # nothing logged, nothing created
    handler.emit(logging.makeLogRecord({'msg': 'one'}))
    handler.close()
    assert path.read_text() == 'one\n'


def test_remove_if_empty(tmp_path):
    empty, full = tmp_path / 'e', tmp_path / 'f'
    empty.write_bytes(b'')
    full.write_bytes(b'x')
    remove_if_empty(str(empty))
    remove_if_empty(str(full))
    remove_if_empty(str(tmp_path))  # a folder: left alone
    assert not empty.exists() and full.exists() and tmp_path.exists()


def _events(folder):
    """(step, tag or 'START', value) of every event of the folder's files, in order."""
    from tensorboardX.proto import event_pb2
    out = []
    for name in sorted(os.listdir(folder)):
        data = open(os.path.join(folder, name), 'rb').read()
        pos = 0
        while pos < len(data):
            (length,) = struct.unpack('<Q', data[pos:pos + 8])
            event = event_pb2.Event.FromString(data[pos + 12:pos + 12 + length])
            pos += 12 + length + 4
            if event.HasField('session_log'):
                out.append((event.step, 'START', None))
            out += [(event.step, v.tag, v.simple_value) for v in event.summary.value]
    return out


def test_a_resumed_run_marks_its_first_step_for_tensorboard(tmp_path):
    pytest.importorskip('tensorboardX')
    meter = LossMeter()
    state = TrainState(iteration=4, resumed_from='x.ckpt')
    run_loop(_step, range(2), [LossMeterHook(meter), TensorBoardHook(str(tmp_path), meter, 1)],
             2, 3, state)
    events = _events(str(tmp_path))
    # TensorBoard hides the interrupted run's points from step 5 on (SummaryWriter's
    # purge_step); the resumed run's points follow
    assert events[0] == (5, 'START', None)
    assert [(s, t) for s, t, _ in events[1:]] == [(5, 'train/Loss'), (5, 'train/lr'),
                                                 (6, 'train/Loss'), (6, 'train/lr'),
                                                 (2, 'epoch/Loss')]


def test_event_file_on_a_full_disk_names_it_and_leaves_nothing(tmp_path, monkeypatch):
    pytest.importorskip('tensorboardX')
    writer = EventFile(str(tmp_path))
    writer.add_scalar('a', 1.0, 1)
    real = writer._writer._py_recordio_writer  # pylint: disable=protected-access
    stream = real._writer
    full = open(FULL, 'wb') if os.path.exists(FULL) else None
    if full is None:
        pytest.skip(FULL + ' is not available')
    real._writer = full  # what is still buffered cannot be written
    stream.close()
    os.truncate(writer.path, 0)  # nothing of it reached the disk
    with pytest.raises(OSError) as info:
        writer.close()
    assert info.value.filename == writer.path
    assert os.listdir(str(tmp_path)) == []  # no 0-byte events file


def test_metrics_row_on_a_full_disk_keeps_the_old_rows(tmp_path, monkeypatch):
    path = tmp_path / 'm.jsonl'
    path.write_text('{"epoch": 0, "iteration": 2}\n')

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, 'No space left on device')
    monkeypatch.setattr(ckpt.os, 'fsync', full)
    meter = LossMeter()
    with pytest.raises(OSError) as info:
        run_loop(_step, range(2), [LossMeterHook(meter), MetricsJSONHook(str(path), meter)], 1,
                 2, TrainState(iteration=2, resumed_from='x'))
    assert info.value.filename == str(path)
    assert path.read_text() == '{"epoch": 0, "iteration": 2}\n'
    assert sorted(os.listdir(str(tmp_path))) == ['m.jsonl']  # no staging file


TINY_FRCNN = """[general]
log_interval = 1
[body]
body = resnet18
body_params = {"width_mult": 0.125}
normalization_mode = bn
num_frozen = 0
bn_frozen = no
out_channels = {"mod1": 8, "mod2": 8, "mod3": 16, "mod4": 32, "mod5": 64}
[fpn]
out_channels = 16
[rpn]
hidden_channels = 16
num_pre_nms_train = 200
num_post_nms_train = 50
num_pre_nms_val = 100
num_post_nms_val = 20
[roi]
num_samples = 16
[scheduler]
epochs = 2
burn_in_steps = 1
[dataloader]
shortest_size = 64
longest_max_size = 96
train_batch_size = 2
val_batch_size = 2
num_workers = 0
train_set = train2017
val_set = val2017
"""


@pytest.mark.parametrize('size', ['12k', '300k'])
@pytest.mark.slow  # a subprocess, several processes or a live GluonCV run: over ~5 s
def test_full_disk_run_ends_with_one_error_line(tmp_path, tmpfs, size):
    """The two-stage recipe with TensorBoard on, writing to a tmpfs that fills during the
    first epoch: exit 1, one ``error:`` line and nothing after it (tensorboardX's exit handler
    and writer thread used to add two tracebacks), no 0-byte or staging file."""
    pytest.importorskip('torch')
    pytest.importorskip('tensorboardX')
    folder = tmpfs('full', 'size=' + size)
    data = tmp_path / 'data'
    subprocess.run([sys.executable, os.path.join(REPO, 'scripts', 'make_synthetic_data.py'),
                    'coco', '--root', str(data), '--num-train', '6', '--num-val', '2'],
                   check=True, capture_output=True)
    config = tmp_path / 'tiny.ini'
    config.write_text(TINY_FRCNN)
    out = subprocess.run([sys.executable, os.path.join(REPO, 'scripts', 'train_detection.py'),
                          '--log_dir', str(folder / 'run'), '--tensorboard', str(folder / 'tb'),
                          str(config), str(data)], capture_output=True, text=True,
                         cwd=str(tmp_path), timeout=120,
                         env=dict(os.environ, PYTHONPATH=REPO, OMP_NUM_THREADS='1'))
    text = out.stdout + out.stderr
    assert out.returncode == 1, text
    assert 'Traceback' not in text and 'Logging error' not in text, text
    errors = [line for line in out.stderr.splitlines() if line.startswith('error:')]
    assert len(errors) == 1 and 'No space left on device' in errors[0], text
    assert out.stderr.rstrip().splitlines()[-1] == errors[0], text  # nothing after it
    left = [os.path.join(d, n) for d, _, names in os.walk(str(folder)) for n in names]
    assert not [p for p in left if os.path.getsize(p) == 0], left
    assert not [p for p in left if p.endswith('.tmp')], left


def test_tensorboard_available_follows_the_import(monkeypatch):
    import types
    monkeypatch.setitem(sys.modules, 'tensorboardX', None)  # import raises ImportError
    assert tensorboard_available() is False
    monkeypatch.setitem(sys.modules, 'tensorboardX', types.ModuleType('tensorboardX'))
    assert tensorboard_available() is True
