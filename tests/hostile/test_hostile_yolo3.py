"""Hostile inputs to YOLOv3 (scripts/train_yolov3.py, ``gluontrain train yolo3``, MXNet):
each ends in one ``error:`` line naming the file or argument (or one ``interrupted`` line), a
non-zero exit, no traceback and nothing half-written (issue 21)."""
import os
import shutil

import pytest

from hostile_support import (check_refused, check_reported, copy_tree, empty_file, garbage,
                             hostile_torch_file, interrupt_script, read_only_dir, run_main,
                             run_script, set_attr, truncate, voc_edit_xml, voc_image,
                             voc_list, voc_xml, zero_bytes)

PREFIX = 'yolo3_mobilenet0.25_voc'


@pytest.fixture(scope='module')
def voc(tmp_path_factory):
    """A tiny VOCdevkit (VOC2007 and VOC2012: 4 trainval images each, 2 test; 64-80 px) shared
    by the module: copy before spoiling."""
    from gluontrain.data import synthetic
    return synthetic.write_voc(str(tmp_path_factory.mktemp('voc')), num_train=4, num_val=2,
                               seed=0, years=(2007, 2012), classes=synthetic.DEFAULT_VOC_CLASSES,
                               image_size=(64, 80), max_objects=3)


@pytest.fixture(scope='module')
def trained(tmp_path_factory, voc):
    """A finished one-epoch run: {prefix}_last.ckpt and the final .params."""
    from gluontrain.mx.yolo3 import main as yolo_main
    folder = tmp_path_factory.mktemp('yolo3_run')
    yolo_main(['--network', 'mobilenet0.25', '--dataset', 'voc', '--dataset-root', voc,
               '--no-pretrained-base', '--gpus', '', '--batch-size', '8', '-j', '0',
               '--data-shape', '96', '--no-random-shape', '--epochs', '1',
               '--save-prefix', str(folder) + '/'])
    params = sorted(n for n in os.listdir(str(folder)) if n.endswith('.params'))
    assert params, os.listdir(str(folder))
    return folder, params[0]


class Case:
    """Per-test workspace; ``argv()`` a tiny CPU run (mobilenet0.25, 96 px, batch 8)."""

    def __init__(self, tmp_path, data, trained):
        self.tmp, self.data = tmp_path, data
        self.trained, self.params = trained
        self.out = str(tmp_path / 'out')
        self.marker = str(tmp_path / 'PWNED')
        self.extra = []

    def copy_data(self):
        if str(self.data) != str(self.tmp / 'VOCdevkit'):
            self.data = copy_tree(self.data, self.tmp / 'VOCdevkit')
        return self.data

    def file(self, name, source=None):
        path = str(self.tmp / name)
        if source:
            shutil.copy(str(self.trained / source), path)
        return path

    def arg(self, flag, value):
        self.extra += [flag, str(value)]
        return flag

    def argv(self):
        return ['train', 'yolo3', '--network', 'mobilenet0.25', '--dataset', 'voc',
                '--dataset-root', str(self.data), '--no-pretrained-base', '--gpus', '',
                '--batch-size', '8', '-j', '0', '--data-shape', '96', '--no-random-shape',
                '--epochs', '1', '--save-prefix', self.out + '/'] + self.extra


@pytest.fixture
def case(tmp_path, voc, trained):
    return Case(tmp_path, voc, trained)


def _renamed_params(c):
    import mxnet as mx
    path = c.file('renamed.params')
    loaded = mx.nd.load(str(c.trained / c.params))
    mx.nd.save(path, {'renamed.' + k: v for k, v in loaded.items()})
    return path


def _torch_weights(c):
    import numpy as np
    path = c.file('ssd300_VOC.pth')
    # a torch.save zip written without importing torch next to MXNet: the layout is what
    # matters (an archive with data.pkl), not the tensors
    import zipfile
    with zipfile.ZipFile(path, 'w') as z:
        z.writestr('archive/data.pkl', np.zeros(4).tobytes())
        z.writestr('archive/version', '3\n')
    return path


CASES = {
    # images
    'zero-byte train image': lambda c: [zero_bytes(voc_image(c.copy_data(), 0))],
    'garbage train image': lambda c: [garbage(voc_image(c.copy_data(), 2))],
    'missing train image': lambda c: [os.remove(voc_image(c.copy_data(), 0)) or
                                      voc_image(c.data, 0)],
    'zero-byte test image': lambda c: [zero_bytes(voc_image(c.copy_data(), 0, 'test'))],
    # annotations and lists
    'annotation xml garbage': lambda c: [garbage(voc_xml(c.copy_data(), 0))],
    'nan box': lambda c: [voc_edit_xml(c.copy_data(), r'<xmin>\d+</xmin>', '<xmin>nan</xmin>')],
    'inverted box': lambda c: [voc_edit_xml(c.copy_data(), r'<xmin>\d+</xmin>',
                                            '<xmin>9000</xmin>')],
    'empty trainval list': lambda c: [empty_file(voc_list(c))],
    'empty test list': lambda c: [empty_file(voc_list(c, 'test'))],
    'dataset-root missing': lambda c: [set_attr(c, 'data', str(c.tmp / 'nowhere'))],
    'dataset-root is a file': lambda c: [set_attr(c, 'data', garbage(c.tmp / 'voc.txt'))],
    # arguments
    'batch-size 0': lambda c: [c.arg('--batch-size', 0)],
    'epochs -1': lambda c: [c.arg('--epochs', -1)],
    'lr nan': lambda c: [c.arg('--lr', 'nan')],
    'data-shape not a multiple of 32': lambda c: [c.arg('--data-shape', 100)],
    'val-interval 0 (never)': lambda c: [c.arg('--val-interval', 0)],
    'num-workers negative': lambda c: [c.arg('--num-workers', -1)],
    'lr-mode unknown': lambda c: [c.arg('--lr-mode', 'sideways')],
    'network unknown': lambda c: [c.arg('--network', 'resnet7')],
    'dataset unknown': lambda c: [c.arg('--dataset', 'imagenet21k')],
    'warmup-epochs negative': lambda c: [c.arg('--warmup-epochs', -1)],
    'classes twice': lambda c: [c.arg('--dataset', 'custom'), c.arg('--classes', 'bus,car,bus')]
    and ['--classes', 'bus'],
    # weights and checkpoints (--resume, --load-weights)
    'resume truncated checkpoint': lambda c: [c.arg('--resume', truncate(
        c.file('l.ckpt', PREFIX + '_last.ckpt'))) and 'l.ckpt'],
    'resume truncated params': lambda c: [c.arg('--resume', truncate(
        c.file('p.params', c.params))) and 'p.params'],
    'resume zero-byte file': lambda c: [c.arg('--resume', zero_bytes(c.file('z.params'))) and
                                        'z.params'],
    'resume renamed keys': lambda c: [c.arg('--resume', _renamed_params(c)) and 'renamed.params'],
    'resume a torch file': lambda c: [c.arg('--resume', _torch_weights(c)) and 'ssd300_VOC.pth'],
    'resume missing file': lambda c: [c.arg('--resume', c.file('gone.params')) and 'gone.params'],
    'resume a folder': lambda c: [c.arg('--resume', str(c.tmp)) and str(c.tmp)],
    'load-weights truncated': lambda c: [c.arg('--load-weights', truncate(
        c.file('w.params', c.params))) and 'w.params'],
    'load-weights renamed keys': lambda c: [c.arg('--load-weights', _renamed_params(c)) and
                                            'renamed.params'],
    'load-weights a torch pickle': lambda c: [c.arg('--load-weights', _torch_weights(c)) and
                                              'ssd300_VOC.pth'],
    # outputs
    'save-prefix folder is a file': lambda c: [set_attr(c, 'out', garbage(c.tmp / 'a_file'))],
    'tensorboard folder is a file': lambda c: [c.arg('--tensorboard', garbage(c.tmp / 'tb'))
                                               and str(c.tmp / 'tb')],
}


# values meaning "never" that the reference accepts: refused, or accepted and said
NEVER = {
    'log-interval 0': lambda c: [c.arg('--log-interval', 0)],
    'save-interval 0 (never)': lambda c: [c.arg('--save-interval', 0)],
}


@pytest.mark.parametrize('name', sorted(NEVER))
def test_never_value_is_refused_or_logged(name, case, capsys):
    names = NEVER[name](case)
    code, out, err = run_main(case.argv(), capsys)
    check_reported(code, out, err, names, case.out)


@pytest.mark.parametrize('name', sorted(CASES))
def test_refused_in_process(name, case, capsys):
    names = CASES[name](case)
    code, _, err = run_main(case.argv(), capsys)
    out_dir = case.out if os.path.isdir(case.out) else None
    check_refused(code, err, names, out_dir)


def test_declared_size_wrong_is_reported(case, capsys):
    xml = voc_edit_xml(case.copy_data(), r'<width>\d+</width>', '<width>999</width>')
    code, out, err = run_main(case.argv(), capsys)
    check_reported(code, out, err, [os.path.basename(xml)], case.out)


def test_truncated_image_is_refused_or_reported(case, capsys):
    """A JPEG cut short: refused naming it, or (OpenCV decodes the missing part blank, as
    the reference does) trained on with a warning naming it."""
    image = truncate(voc_image(case.copy_data(), 1), 0.3)
    code, out, err = run_main(case.argv(), capsys)
    check_reported(code, out, err, [os.path.basename(image)], case.out)


# ----------------------------------------------------- real processes: real stderr

@pytest.mark.slow  # a subprocess, several processes or a live GluonCV run: over ~5 s
def test_script_zero_byte_image(case):
    image = zero_bytes(voc_image(case.copy_data(), 0))
    res = run_script('train_yolov3.py', case.argv()[2:])
    check_refused(res.returncode, res.stderr, [image], case.out)


@pytest.mark.slow  # a subprocess, several processes or a live GluonCV run: over ~5 s
def test_script_hostile_pickle_as_weights(case):
    # a torch.save file whose pickle would run code: MXNet never unpickles it
    try:
        evil = hostile_torch_file(case.file('evil.params'), case.marker)
    except ImportError:
        pytest.skip('torch is needed to write the file')
    case.arg('--load-weights', evil)
    res = run_script('train_yolov3.py', case.argv()[2:])
    check_refused(res.returncode, res.stderr, [evil, '--load-weights'], case.out)
    assert not os.path.exists(case.marker)


def test_resume_with_hostile_trainer_states_runs_nothing(case, capsys):
    """Issue 40: the checkpoint's outer dict is read with the restricted unpickler, but its
    trainer states went to MXNet's ``Trainer.load_states`` (plain ``pickle.loads``), which ran
    the payload. Now the states are read with the restricted unpickler first."""
    import pickle  # pylint: disable=import-outside-toplevel
    from gluontrain.core.checkpoint import load_checkpoint
    from hostile_support import _Payload
    path = case.file('evil_last.ckpt', PREFIX + '_last.ckpt')
    payload = load_checkpoint(path)
    payload['trainer'] = pickle.dumps(_Payload(case.marker), protocol=2)
    with open(path, 'wb') as f:
        pickle.dump(payload, f)
    case.arg('--resume', path)
    code, _, err = run_main(case.argv(), capsys)
    check_refused(code, err, [path, 'os'], case.out if os.path.isdir(case.out) else None)
    assert not os.path.exists(case.marker)


def test_resume_keeps_working_with_its_own_trainer_states(case, capsys):
    """The same checkpoint unspoilt resumes (the restricted reading admits what
    ``trainer_states_blob`` writes: optimizer, LR schedule, arrays)."""
    case.arg('--resume', case.file('own_last.ckpt', PREFIX + '_last.ckpt'))
    case.arg('--epochs', 2)
    code, out, err = run_main(case.argv(), capsys)
    assert code in (0, None), err[-3000:]
    assert 'Traceback' not in err and 'error:' not in err


@pytest.mark.slow  # a subprocess, several processes or a live GluonCV run: over ~5 s
def test_script_bad_argument_value(case):
    case.arg('--epochs', -1)
    res = run_script('train_yolov3.py', case.argv()[2:])
    check_refused(res.returncode, res.stderr, ['--epochs'], case.out)


@pytest.mark.slow  # a subprocess, several processes or a live GluonCV run: over ~5 s
def test_script_read_only_save_prefix(case):
    unmount = read_only_dir(case.out)
    try:
        res = run_script('train_yolov3.py', case.argv()[2:])
    finally:
        unmount()
    check_refused(res.returncode, res.stderr, [case.out, '--save-prefix'])


@pytest.mark.slow  # a subprocess, several processes or a live GluonCV run: over ~5 s
def test_script_ctrl_c_once_training_started(case):
    case.extra = ['--epochs', '50', '--log-interval', '1', '--batch-size', '2']
    code, _, err = interrupt_script('train_yolov3.py', case.argv()[2:], case.out,
                                    r'\[Epoch 0\]\[Batch [1-9]')
    check_refused(code, err, ['interrupted at epoch 0'], case.out, interrupted=True)
