"""Hostile and contradictory starts of YOLOv3 training on both backends (issue 40): a checkpoint
of the other backend, code hidden in a checkpoint's optimizer state or a 4 KB ``.params`` that
made MXNet allocate gigabytes, ``--resume`` with ``--load-weights``, ``--resume`` of a finished
run, ``--tensorboard`` without tensorboardX, ``--gpus`` on a machine without GPUs. Each ends
in one ``error:`` line naming the argument or file, a non-zero exit, no traceback, and no code
of the file runs (the marker file is never created)."""
import io
import os
import pickle
import struct

import pytest

from hostile_support import check_refused, run_main

BACKENDS = ('mxnet', 'torch')
PREFIX = 'yolo3_mobilenet0.25_voc'


@pytest.fixture(scope='module')
def voc(tmp_path_factory):
    from gluontrain.data import synthetic
    return synthetic.write_voc(str(tmp_path_factory.mktemp('voc')), num_train=4, num_val=2,
                               seed=0, years=(2007, 2012), classes=synthetic.DEFAULT_VOC_CLASSES,
                               image_size=(64, 80), max_objects=2)


def _argv(backend, voc, out, *extra):
    return ['train', 'yolo3', '--backend', backend, '--network', 'mobilenet0.25', '--dataset',
            'voc', '--dataset-root', voc, '--no-pretrained-base', '--gpus', '', '--batch-size',
            '8', '-j', '0', '--data-shape', '64', '--no-random-shape', '--epochs', '1',
            '--save-prefix', str(out) + '/'] + list(extra)


@pytest.fixture(scope='module')
def runs(tmp_path_factory, voc):
    """A finished one-epoch run per backend: ``{backend: folder}``."""
    from gluontrain.__main__ import main
    folders = {}
    for backend in BACKENDS:
        folder = tmp_path_factory.mktemp('run_' + backend)
        assert main(_argv(backend, voc, folder)) == 0
        folders[backend] = folder
    return folders


def _last(runs, backend):
    return str(runs[backend] / (PREFIX + '_last.ckpt'))


def _params(runs, backend):
    return str(next(p for p in sorted(runs[backend].iterdir()) if p.suffix == '.params'
                    and p.name.startswith(PREFIX)))


class _Marker:
    """Unpickling it would create ``path``."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, 'w'))


def _spoiled(path, dst, **blobs):
    """A copy of the checkpoint ``path`` at ``dst`` with some of its blobs replaced."""
    from gluontrain.core import checkpoint, streamed_pickle
    payload = checkpoint.load_checkpoint(path)
    payload.update(blobs)
    with open(dst, 'wb') as f:
        streamed_pickle.dump(payload, f)
    return dst


def _hostile_params_bytes():
    return struct.pack('<QQ', 0x112, 0) + os.urandom(4096 - 16)


def _torch_saved(obj):
    import torch
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return buffer.getvalue()


@pytest.mark.parametrize('backend', BACKENDS)
def test_checkpoint_of_the_other_backend_is_named(backend, runs, voc, tmp_path, capsys):
    other = 'torch' if backend == 'mxnet' else 'mxnet'
    ckpt = _last(runs, other)
    code, _, err = run_main(_argv(backend, voc, tmp_path / 'o', '--epochs', '2', '--resume',
                                  ckpt), capsys)
    line = check_refused(code, err, ['--resume', ckpt, '--backend ' + other], tmp_path / 'o')
    assert ('PyTorch' if other == 'torch' else 'MXNet') in line


# MXNet's trainer states are a plain pickle, PyTorch's optimizer state a torch.save archive
def test_mxnet_load_weights_of_a_torch_checkpoint_names_the_backend(runs, voc, tmp_path, capsys):
    # (the PyTorch backend reads an MXNet checkpoint's weights: they are .params)
    ckpt = _last(runs, 'torch')
    code, _, err = run_main(_argv('mxnet', voc, tmp_path / 'o', '--load-weights', ckpt), capsys)
    check_refused(code, err, ['--load-weights', ckpt, 'PyTorch backend', '--backend torch'],
                  tmp_path / 'o')


@pytest.mark.parametrize('backend,how', [('mxnet', 'plain pickle'), ('torch', 'plain pickle'),
                                         ('torch', 'torch.save')])
def test_code_in_the_optimizer_state_never_runs(backend, how, runs, voc, tmp_path, capsys):
    marker = str(tmp_path / 'PWNED')
    evil = _Marker(marker)
    blob = pickle.dumps(evil) if how == 'plain pickle' else _torch_saved({'optimizer': evil})
    ckpt = _spoiled(_last(runs, backend), str(tmp_path / 'evil.ckpt'), trainer=blob)
    code, _, err = run_main(_argv(backend, voc, tmp_path / 'o', '--epochs', '2', '--resume',
                                  ckpt), capsys)
    check_refused(code, err, [ckpt], tmp_path / 'o')
    assert not os.path.exists(marker)


def test_mxnet_checkpoint_with_4kb_of_random_weights_is_refused_at_once(runs, voc, tmp_path,
                                                                         capsys):
    ckpt = _spoiled(_last(runs, 'mxnet'), str(tmp_path / 'h.ckpt'),
                    params=_hostile_params_bytes())
    code, _, err = run_main(_argv('mxnet', voc, tmp_path / 'o', '--epochs', '2', '--resume',
                                  ckpt), capsys)
    check_refused(code, err, ['--resume', ckpt, 'corrupt'], tmp_path / 'o')


@pytest.mark.parametrize('backend', BACKENDS)
def test_4kb_of_random_bytes_after_the_list_magic_as_weights(backend, voc, tmp_path, capsys):
    path = str(tmp_path / 'h.params')
    with open(path, 'wb') as f:
        f.write(_hostile_params_bytes())
    code, _, err = run_main(_argv(backend, voc, tmp_path / 'o', '--load-weights', path), capsys)
    check_refused(code, err, ['--load-weights', path, 'corrupt'], tmp_path / 'o')


@pytest.mark.parametrize('backend', BACKENDS)
def test_resume_and_load_weights_together_are_refused(backend, runs, voc, tmp_path, capsys):
    ckpt, params = _last(runs, backend), _params(runs, backend)
    code, _, err = run_main(_argv(backend, voc, tmp_path / 'o', '--epochs', '2', '--resume',
                                  ckpt, '--load-weights', params), capsys)
    check_refused(code, err, ['--resume', '--load-weights', ckpt, params], tmp_path / 'o')


@pytest.mark.parametrize('backend', BACKENDS)
def test_resume_of_a_finished_run_says_to_raise_epochs(backend, runs, voc, tmp_path, capsys):
    ckpt = _last(runs, backend)
    code, _, err = run_main(_argv(backend, voc, tmp_path / 'o', '--resume', ckpt), capsys)
    check_refused(code, err, ['--resume', ckpt, '--epochs'], tmp_path / 'o')


@pytest.mark.parametrize('backend', BACKENDS)
def test_tensorboard_without_tensorboardx_is_one_line(backend, voc, tmp_path, capsys,
                                                      monkeypatch):
    from gluontrain.yolo3 import args as yolo_args
    monkeypatch.setattr(yolo_args, 'tensorboard_available', lambda: False)
    code, _, err = run_main(_argv(backend, voc, tmp_path / 'o', '--tensorboard',
                                  str(tmp_path / 'tb')), capsys)
    check_refused(code, err, ['--tensorboard', 'pip install tensorboardX'], tmp_path / 'o')


@pytest.mark.parametrize('gpus', ('0', 'x', '99'))
def test_torch_on_a_cpu_machine_names_gpus_and_the_cpu_fix(gpus, voc, tmp_path, capsys):
    import torch
    if torch.cuda.is_available():
        pytest.skip('this machine has GPUs')
    argv = _argv('torch', voc, tmp_path / 'o')
    argv[argv.index('--gpus') + 1] = gpus
    code, _, err = run_main(argv, capsys)
    check_refused(code, err, ['--gpus', "--gpus ''"], tmp_path / 'o')


@pytest.mark.parametrize('backend', BACKENDS)
def test_nan_weights_load_with_a_warning_naming_them(backend, runs, voc, tmp_path, capsys):
    from gluontrain.core.mxparams import read_params, write_params
    arrays = read_params(_params(runs, backend))
    key = sorted(arrays)[0]
    arrays[key][...] = float('nan')
    path = str(tmp_path / 'nan.params')
    write_params(path, arrays)
    code, out, err = run_main(_argv(backend, voc, tmp_path / 'o', '--load-weights', path),
                              capsys)
    warned = [line for line in err.splitlines() if 'NaN or inf' in line]
    assert len(warned) == 1 and path in warned[0] and '1 of the loaded tensors' in warned[0], err
    assert 'Traceback' not in err
