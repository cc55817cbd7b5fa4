"""Hostile inputs to SSD300 (scripts/train_ssd.py, ``gluontrain train ssd``): each ends in
one ``error:`` line naming the file or argument (or one ``interrupted`` line), a non-zero
exit, no traceback and nothing half-written (issue 21)."""
import os
import shutil

import pytest
import torch

from hostile_support import (check_refused, check_reported, copy_tree, empty_file, garbage,
                             hostile_torch_file, interrupt_script, read_only_dir, run_main,
                             run_script, set_attr, truncate, voc_edit_xml, voc_image,
                             voc_list, voc_xml, zero_bytes)


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
    """A finished one-iteration run: VOC.pth (weights) and ssd300_VOC_last.ckpt (checkpoint)."""
    from gluontrain.torch.ssd import recipe
    folder = tmp_path_factory.mktemp('ssd_run')
    recipe.main(['--dataset_root', voc, '--basenet', '', '--cuda', 'false',
                 '--batch_size', '2', '--num_workers', '0', '--width_mult', '0.0625', '--seed',
                 '0', '--max_iter', '1', '--save_folder', str(folder) + '/'])
    return folder


class Case:
    """Per-test workspace; ``argv(*extra)`` a tiny CPU run (batch 2, 1/16 width, 2 iterations;
    was batch 4 at 1/8 width: a step now costs a quarter of the CPU)."""

    def __init__(self, tmp_path, data, trained):
        self.tmp, self.data, self.trained = tmp_path, data, trained
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
        return ['train', 'ssd', '--dataset_root', str(self.data), '--basenet', '', '--cuda',
                'false', '--batch_size', '2', '--num_workers', '0', '--width_mult', '0.0625',
                '--seed', '0', '--max_iter', '2', '--save_folder', self.out + '/'] + self.extra


@pytest.fixture
def case(tmp_path, voc, trained):
    return Case(tmp_path, voc, trained)


def _renamed(c):
    path = c.file('renamed.pth', 'VOC.pth')
    state = torch.load(path, weights_only=True)
    torch.save({'renamed.' + k: v for k, v in state.items()}, path)
    return path


def _frcnn_snapshot(c):
    from gluontrain.torch.frcnn.snapshot import save_snapshot
    path = c.file('model_last.pth.tar')
    save_snapshot(path, '[general]\n', 3, 0.1, 0.2, 100,
                  body={'mod1.conv1.weight': torch.zeros(4, 3, 3, 3)},
                  rpn_head={'conv_fc.weight': torch.zeros(4, 4, 3, 3)},
                  roi_head={'fc.fc6.weight': torch.zeros(8, 4)})
    return path


def _sgg_checkpoint(c):
    path = c.file('model_0000003.pth')
    torch.save({'model': {'backbone.body.stem.conv1.weight': torch.zeros(8, 3, 7, 7)},
                'iteration': 3}, path)
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
    'annotation xml missing': lambda c: [os.remove(voc_xml(c.copy_data(), 0)) or
                                         voc_xml(c.data, 0)],
    'nan box': lambda c: [voc_edit_xml(c.copy_data(), r'<xmin>\d+</xmin>', '<xmin>nan</xmin>')],
    'box not a number': lambda c: [voc_edit_xml(c.copy_data(), r'<ymax>\d+</ymax>',
                                                '<ymax>12px</ymax>')],
    'inverted box': lambda c: [voc_edit_xml(c.copy_data(), r'<xmin>\d+</xmin>',
                                            '<xmin>9000</xmin>')],
    'unknown class name': lambda c: [voc_edit_xml(c.copy_data(), r'<name>\w+</name>',
                                                  '<name>unicorn</name>')],
    'empty trainval list': lambda c: [empty_file(voc_list(c))],
    'empty test list': lambda c: [empty_file(voc_list(c, 'test'))],
    'trainval list missing': lambda c: [os.remove(voc_list(c)) or voc_list(c)],
    'dataset_root missing': lambda c: [set_attr(c, 'data', str(c.tmp / 'nowhere'))],
    'dataset_root is a file': lambda c: [set_attr(c, 'data', garbage(c.tmp / 'voc.txt'))],
    # arguments
    'batch_size 0': lambda c: [c.arg('--batch_size', 0)],
    'max_iter -1': lambda c: [c.arg('--max_iter', -1)],
    'lr not a number': lambda c: [c.arg('--lr', 'abc')],
    'width_mult 0': lambda c: [c.arg('--width_mult', 0)],
    'width_mult negative': lambda c: [c.arg('--width_mult', -0.5)],
    'log_interval negative': lambda c: [c.arg('--log_interval', -5)],
    'val_interval negative': lambda c: [c.arg('--val_interval', -1)],
    'num_workers negative': lambda c: [c.arg('--num_workers', -1)],
    'start_iter negative': lambda c: [c.arg('--start_iter', -3)],
    'gamma not a number': lambda c: [c.arg('--gamma', 'abc')],
    'momentum nan': lambda c: [c.arg('--momentum', 'nan')],
    'weight_decay negative': lambda c: [c.arg('--weight_decay', -1)],
    # weights and checkpoints (--resume, --basenet)
    'resume truncated checkpoint': lambda c: [c.arg('--resume', truncate(
        c.file('l.ckpt', 'ssd300_VOC_last.ckpt'))) and 'l.ckpt'],
    'resume truncated weights': lambda c: [c.arg('--resume', truncate(
        c.file('w.pth', 'VOC.pth'))) and 'w.pth'],
    'resume zero-byte file': lambda c: [c.arg('--resume', zero_bytes(c.file('z.pth'))) and
                                        'z.pth'],
    'resume hostile pickle': lambda c: [c.arg('--resume', hostile_torch_file(
        c.file('evil.pth'), c.marker)) and 'evil.pth'],
    'resume renamed keys': lambda c: [c.arg('--resume', _renamed(c)) and 'renamed.pth'],
    'resume frcnn snapshot': lambda c: [c.arg('--resume', _frcnn_snapshot(c)) and
                                        'model_last.pth.tar'],
    'resume sgg checkpoint': lambda c: [c.arg('--resume', _sgg_checkpoint(c)) and
                                        'model_0000003.pth'],
    'resume missing file': lambda c: [c.arg('--resume', c.file('gone.pth')) and 'gone.pth'],
    'resume a folder': lambda c: [c.arg('--resume', str(c.tmp)) and str(c.tmp)],
    'resume under another width': lambda c: [c.arg('--resume', c.file('v.pth', 'VOC.pth'))
                                             and c.arg('--width_mult', 0.25) and 'v.pth'],
    'basenet truncated': lambda c: [c.arg('--basenet', truncate(c.file('b.pth', 'VOC.pth')))
                                    and 'b.pth'],
    'basenet hostile pickle': lambda c: [c.arg('--basenet', hostile_torch_file(
        c.file('evil.pth'), c.marker)) and 'evil.pth'],
    'basenet frcnn snapshot': lambda c: [c.arg('--basenet', _frcnn_snapshot(c)) and
                                         'model_last.pth.tar'],
    'basenet missing': lambda c: [c.arg('--basenet', c.file('vgg16_reducedfc.pth')) and
                                  'vgg16_reducedfc.pth'],
    # outputs
    'save_folder is an existing file': lambda c: [set_attr(c, 'out', garbage(c.tmp / 'a_file'))],
    'save_folder below a file': lambda c: [set_attr(c, 'out', os.path.join(
        garbage(c.tmp / 'b_file'), 'sub'))],
    'tensorboard folder is a file': lambda c: [c.arg('--tensorboard', garbage(c.tmp / 'tb'))
                                               and str(c.tmp / 'tb')],
    # a reference argument gluontrain cannot honour: refused, not ignored
    'visdom true': lambda c: [c.arg('--visdom', 'true') and '--visdom'],
}


# values meaning "never" that the reference accepts: refused, or accepted and said
NEVER = {
    'log_interval 0': lambda c: [c.arg('--log_interval', 0)],
    'save_interval 0 (never)': lambda c: [c.arg('--save_interval', 0)],
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
    assert not os.path.exists(case.marker), 'the hostile pickle ran its code'


@pytest.mark.parametrize('name', ['every box of an image outside it', 'declared size wrong'])
def test_reported_in_process(name, case, capsys):
    if name.startswith('every'):
        xml = voc_edit_xml(case.copy_data(), r'<xmin>\d+</xmin>', '<xmin>5000</xmin>', count=0)
        xml = voc_edit_xml(case.data, r'<xmax>\d+</xmax>', '<xmax>5100</xmax>', count=0)
    else:
        xml = voc_edit_xml(case.copy_data(), r'<width>\d+</width>', '<width>999</width>')
    code, out, err = run_main(case.argv(), capsys)
    check_reported(code, out, err, [os.path.basename(xml)], case.out)


def test_ctrl_c_in_process_names_the_position(case, capsys, monkeypatch):
    from gluontrain.torch.ssd.step import SSDStep

    def interrupt(self, batch, state=None):
        raise KeyboardInterrupt
    monkeypatch.setattr(SSDStep, '__call__', interrupt)
    code, _, err = run_main(case.argv(), capsys)
    check_refused(code, err, ['interrupted at epoch 0, batch 0'], case.out, interrupted=True)


def test_truncated_image_is_refused_or_reported(case, capsys):
    """A JPEG cut short: refused naming it, or (OpenCV decodes the missing part blank, as
    the reference does) trained on with a warning naming it."""
    image = truncate(voc_image(case.copy_data(), 1), 0.3)
    code, out, err = run_main(case.argv(), capsys)
    check_reported(code, out, err, [os.path.basename(image)], case.out)


def test_full_disk_names_the_file_and_leaves_nothing_half_written(case, capsys):
    unmount = read_only_dir(case.out, 'size=64k')
    try:
        code, _, err = run_main(case.argv(), capsys)
        check_refused(code, err, [case.out, 'No space left on device', '--save_folder'], case.out)
    finally:
        unmount()


# ----------------------------------------------------- real processes: real stderr

@pytest.mark.slow  # a subprocess, several processes or a live GluonCV run: over ~5 s
def test_script_zero_byte_image(case):
    image = zero_bytes(voc_image(case.copy_data(), 0))
    res = run_script('train_ssd.py', case.argv()[2:])
    check_refused(res.returncode, res.stderr, [image], case.out)


@pytest.mark.slow  # a subprocess, several processes or a live GluonCV run: over ~5 s
def test_script_hostile_resume(case):
    evil = hostile_torch_file(case.file('evil.pth'), case.marker)
    case.arg('--resume', evil)
    res = run_script('train_ssd.py', case.argv()[2:])
    check_refused(res.returncode, res.stderr, [evil, '--resume'], case.out)
    assert not os.path.exists(case.marker)


@pytest.mark.slow  # a subprocess, several processes or a live GluonCV run: over ~5 s
def test_script_bad_argument_value(case):
    case.arg('--width_mult', 0)
    res = run_script('train_ssd.py', case.argv()[2:])
    check_refused(res.returncode, res.stderr, ['--width_mult'], case.out)


@pytest.mark.slow  # a subprocess, several processes or a live GluonCV run: over ~5 s
def test_script_read_only_save_folder(case):
    unmount = read_only_dir(case.out)
    try:
        res = run_script('train_ssd.py', case.argv()[2:])
    finally:
        unmount()
    check_refused(res.returncode, res.stderr, [case.out, '--save_folder'])


@pytest.mark.slow  # a subprocess, several processes or a live GluonCV run: over ~5 s
def test_script_ctrl_c_once_training_started(case):
    case.extra = ['--max_iter', '5000', '--log_interval', '1']
    code, _, err = interrupt_script('train_ssd.py', case.argv()[2:], case.out,
                                    r'^iter [1-9][0-9]* \|\|')
    check_refused(code, err, ['interrupted at epoch'], case.out, interrupted=True)
