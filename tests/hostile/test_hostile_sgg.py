"""Hostile inputs to the scene-graph recipes (scripts/train_relation.py, ``gluontrain train
sgg``; scripts/pretrain_detector.py, ``sgg-detector``): each ends in one ``error:`` line
naming the file or key (or one ``interrupted`` line), a non-zero exit, no traceback and
nothing half-written (issue 21)."""
import json
import os
import shutil

import pytest
import torch

from hostile_support import (ROOT, check_refused, check_reported, copy_tree, garbage,
                             hostile_pickle, hostile_torch_file, interrupt_script,
                             read_only_dir, run_main, run_script, truncate, zero_bytes)

CONFIGS = os.path.join(ROOT, 'gluontrain', 'torch', 'sgg', 'configs')
PREDCLS = os.path.join(CONFIGS, 'predcls_motifs_cpu.yaml')
DETECTOR = os.path.join(CONFIGS, 'detector_cpu.yaml')
TINY = ['SOLVER.IMS_PER_BATCH', '2', 'TEST.IMS_PER_BATCH', '2', 'DATASETS.NUM_VAL_IM', '2',
        'INPUT.MIN_SIZE_TRAIN', '(96,)', 'INPUT.MAX_SIZE_TRAIN', '128',
        'INPUT.MIN_SIZE_TEST', '96', 'INPUT.MAX_SIZE_TEST', '128', 'SOLVER.MAX_ITER', '2',
        'SOLVER.VAL_PERIOD', '2', 'SOLVER.CHECKPOINT_PERIOD', '2']
STATS = 'VG_stanford_filtered_with_attribute_train_statistics.cache'
H5 = 'VG-SGG-with-attri.h5'


@pytest.fixture(scope='module')
def data(tmp_path_factory):
    """8 train + 4 test VG images (shared: copy before spoiling)."""
    from gluontrain.data.vg import write_vg
    root = str(tmp_path_factory.mktemp('sgg_vg'))
    write_vg(root, num_train=8, num_val=4, seed=1, image_size=(96, 128))
    return root


@pytest.fixture(scope='module')
def trained(tmp_path_factory, data):
    """Finished 2-iteration runs of both tools: real model_final.pth files and a real
    statistics cache."""
    from gluontrain.torch.sgg import detector_recipe, recipe
    folder = tmp_path_factory.mktemp('sgg_runs')
    recipe.main(['--config-file', PREDCLS, '--data-dir', data, '--skip-test', 'OUTPUT_DIR',
                 str(folder / 'rel')] + TINY)
    detector_recipe.main(['--config-file', DETECTOR, '--data-dir', data, '--skip-test',
                          'OUTPUT_DIR', str(folder / 'det')] + TINY)
    return folder


class Case:
    """Per-test workspace; ``argv()`` the command of ``self.tool`` ('sgg' / 'sgg-detector')."""

    def __init__(self, tmp_path, data, trained):
        self.tmp, self.data, self.trained = tmp_path, data, trained
        self.out = str(tmp_path / 'out')
        self.tool, self.config, self.opts = 'sgg', PREDCLS, []
        self.marker = str(tmp_path / 'PWNED')
        self.planted = []

    def detector(self):
        self.tool, self.config = 'sgg-detector', DETECTOR
        return self

    def copy_data(self):
        if str(self.data) != str(self.tmp / 'data'):
            self.data = copy_tree(self.data, self.tmp / 'data')
        return self.data

    def image(self, index=0):
        with open(os.path.join(self.copy_data(), 'image_data.json')) as f:
            row = json.load(f)[index]
        return os.path.join(self.data, 'VG_100K', '{}.jpg'.format(row['image_id']))

    def edit_h5(self, edit):
        import h5py
        path = os.path.join(self.copy_data(), H5)
        with h5py.File(path, 'r+') as f:
            edit(f)
        return path

    def file(self, name, source=None):
        path = str(self.tmp / name)
        if source:
            shutil.copy(str(self.trained / source), path)
        return path

    def opt(self, key, value):
        self.opts += [key, str(value)]
        return key

    def plant(self, name, source=None):
        """A file in the output folder before the run (a resume / cache the tool reads)."""
        os.makedirs(self.out, exist_ok=True)
        path = os.path.join(self.out, name)
        if source:
            shutil.copy(str(self.trained / source), path)
        self.planted.append(path)
        return path

    def last_checkpoint(self, name, spoil):
        path = spoil(self.plant(name, 'rel/model_final.pth'))
        with open(os.path.join(self.out, 'last_checkpoint'), 'w') as f:
            f.write(name)
        return path

    def argv(self):
        return (['train', self.tool, '--config-file', self.config, '--data-dir', str(self.data),
                 '--skip-test', 'OUTPUT_DIR', self.out] + TINY + self.opts)


@pytest.fixture
def case(tmp_path, data, trained):
    return Case(tmp_path, data, trained)


def _frcnn_snapshot(c):
    from gluontrain.torch.frcnn.snapshot import save_snapshot
    path = c.file('model_last.pth.tar')
    save_snapshot(path, '[general]\n', 3, 0.1, 0.2, 100,
                  body={'mod1.conv1.weight': torch.zeros(4, 3, 3, 3)},
                  rpn_head={'conv_fc.weight': torch.zeros(4, 4, 3, 3)},
                  roi_head={'fc.fc6.weight': torch.zeros(8, 4)})
    return path


def _ssd_weights(c):
    path = c.file('ssd300_VOC_2.pth')
    torch.save({'vgg.0.weight': torch.zeros(8, 3, 3, 3), 'loc.0.weight': torch.zeros(16, 8, 3, 3),
                'conf.0.weight': torch.zeros(24, 8, 3, 3)}, path)
    return path


def _renamed(path):
    ckpt = torch.load(path, weights_only=True)
    ckpt['model'] = {'renamed.' + k: v for k, v in ckpt['model'].items()}
    torch.save(ckpt, path)
    return path


def _boxes_outside(f):
    f['boxes_1024'][...] = [5000, 5000, 10, 10]


def _no_train_split(f):
    f['split'][...] = 2


def _rm(path):
    if os.path.isdir(path):
        shutil.rmtree(path)
    else:
        os.remove(path)
    return path


def _set(c, attr, value):
    setattr(c, attr, value)
    return value


def _det(c):
    return c.detector()


# id -> case(c) returning the names the error line must hold; it spoils c's inputs first
CASES = {
    # images
    'zero-byte image': lambda c: [zero_bytes(c.image(0))],
    'garbage image': lambda c: [garbage(c.image(2))],
    'missing image': lambda c: [_rm(c.image(0))],
    'detector: zero-byte image': lambda c: [zero_bytes(_det(c).image(0))],
    # data files and sanity
    'h5 truncated': lambda c: [truncate(os.path.join(c.copy_data(), H5))],
    'h5 zero-byte': lambda c: [zero_bytes(os.path.join(c.copy_data(), H5))],
    'dicts json garbage': lambda c: [garbage(os.path.join(c.copy_data(),
                                                          'VG-SGG-dicts-with-attri.json'))],
    'image_data.json garbage': lambda c: [garbage(os.path.join(c.copy_data(),
                                                               'image_data.json'))],
    'image folder missing': lambda c: [_rm(os.path.join(c.copy_data(), 'VG_100K'))],
    'every box outside its image': lambda c: [os.path.basename(c.edit_h5(_boxes_outside))],
    'empty train split': lambda c: [os.path.basename(c.edit_h5(_no_train_split))],
    'data dir missing': lambda c: [_set(c, 'data', str(c.tmp / 'nowhere'))],
    'data dir is a file': lambda c: [_set(c, 'data', garbage(c.tmp / 'vg.txt'))],
    'detector: NUM_CLASSES 151 on 8-class data': lambda c: [
        _det(c).opt('MODEL.ROI_BOX_HEAD.NUM_CLASSES', 151)],
    'detector: every box outside its image': lambda c: [
        os.path.basename(_det(c).edit_h5(_boxes_outside))],
    # config values
    'IMS_PER_BATCH 0': lambda c: [c.opt('SOLVER.IMS_PER_BATCH', 0)],
    'IMS_PER_BATCH negative': lambda c: [c.opt('SOLVER.IMS_PER_BATCH', -2)],
    'TEST.IMS_PER_BATCH 0': lambda c: [c.opt('TEST.IMS_PER_BATCH', 0)],
    'MAX_ITER -5': lambda c: [c.opt('SOLVER.MAX_ITER', -5)],
    'VAL_PERIOD 0 (never)': lambda c: [c.opt('SOLVER.VAL_PERIOD', 0)],
    'CHECKPOINT_PERIOD 0 (never)': lambda c: [c.opt('SOLVER.CHECKPOINT_PERIOD', 0)],
    'BASE_LR not a number': lambda c: [c.opt('SOLVER.BASE_LR', 'abc')],
    'BASE_LR negative': lambda c: [c.opt('SOLVER.BASE_LR', -1.0)],
    'MIN_SIZE_TRAIN 0': lambda c: [c.opt('INPUT.MIN_SIZE_TRAIN', '(0,)')],
    'MAX_SIZE_TRAIN huge': lambda c: [c.opt('INPUT.MAX_SIZE_TRAIN', 1000000)],
    'NUM_WORKERS negative': lambda c: [c.opt('DATALOADER.NUM_WORKERS', -1)],
    'unknown key': lambda c: [c.opt('SOLVER.MAX_ITERS', 3)],
    'unknown predictor': lambda c: [c.opt('MODEL.ROI_RELATION_HEAD.PREDICTOR', 'NoSuchPredictor')],
    'config file missing': lambda c: [_set(c, 'config', str(c.tmp / 'nope.yaml'))],
    'config yaml does not parse': lambda c: [_set(c, 'config', garbage(
        c.tmp / 'bad.yaml', b'SOLVER: {MAX_ITER: [1,\n'))],
    'config yaml unknown key': lambda c: [_set(c, 'config', garbage(
        c.tmp / 'unknown.yaml', b'SOLVER:\n  MAX_ITERS: 3\n')) and 'MAX_ITERS'],
    'detector: IMS_PER_BATCH 0': lambda c: [_det(c).opt('SOLVER.IMS_PER_BATCH', 0)],
    'detector: MAX_ITER -5': lambda c: [_det(c).opt('SOLVER.MAX_ITER', -5)],
    'detector: VAL_PERIOD 0 (never)': lambda c: [_det(c).opt('SOLVER.VAL_PERIOD', 0)],
    # weights, checkpoints, caches
    'detector ckpt truncated': lambda c: [c.opt('MODEL.PRETRAINED_DETECTOR_CKPT', truncate(
        c.file('d.pth', 'det/model_final.pth'))) and 'd.pth'],
    'detector ckpt zero-byte': lambda c: [c.opt('MODEL.PRETRAINED_DETECTOR_CKPT', zero_bytes(
        c.file('z.pth'))) and 'z.pth'],
    'detector ckpt hostile pickle': lambda c: [c.opt('MODEL.PRETRAINED_DETECTOR_CKPT',
                                                     hostile_torch_file(c.file('evil.pth'),
                                                                        c.marker)) and 'evil.pth'],
    'detector ckpt frcnn snapshot': lambda c: [c.opt('MODEL.PRETRAINED_DETECTOR_CKPT',
                                                     _frcnn_snapshot(c)) and 'model_last.pth.tar'],
    'detector ckpt ssd weights': lambda c: [c.opt('MODEL.PRETRAINED_DETECTOR_CKPT',
                                                  _ssd_weights(c)) and 'ssd300_VOC_2.pth'],
    'detector ckpt missing': lambda c: [c.opt('MODEL.PRETRAINED_DETECTOR_CKPT',
                                              c.file('gone.pth')) and 'gone.pth'],
    'last_checkpoint truncated': lambda c: [c.last_checkpoint('model_0000002.pth', truncate)],
    'last_checkpoint zero-byte': lambda c: [c.last_checkpoint('model_0000002.pth', zero_bytes)],
    'last_checkpoint hostile pickle': lambda c: [c.last_checkpoint(
        'model_0000002.pth', lambda p: hostile_torch_file(p, c.marker))],
    'last_checkpoint renamed keys': lambda c: [c.last_checkpoint('model_0000002.pth', _renamed)],
    'last_checkpoint names a missing file': lambda c: [
        c.last_checkpoint('model_0000002.pth', _rm)],
    'detector: MODEL.WEIGHT truncated': lambda c: [_det(c).opt('MODEL.WEIGHT', truncate(
        c.file('w.pth', 'det/model_final.pth'))) and 'w.pth'],
    'detector: MODEL.WEIGHT hostile pickle': lambda c: [_det(c).opt(
        'MODEL.WEIGHT', hostile_torch_file(c.file('evil.pth'), c.marker)) and 'evil.pth'],
    'detector: MODEL.WEIGHT hostile .pkl': lambda c: [_det(c).opt(
        'MODEL.WEIGHT', hostile_pickle(c.file('R-50.pkl'), c.marker)) and 'R-50.pkl'],
    'detector: MODEL.WEIGHT frcnn snapshot': lambda c: [_det(c).opt(
        'MODEL.WEIGHT', _frcnn_snapshot(c)) and 'model_last.pth.tar'],
    'detector: MODEL.WEIGHT ssd weights': lambda c: [_det(c).opt(
        'MODEL.WEIGHT', _ssd_weights(c)) and 'ssd300_VOC_2.pth'],
    'detector: last_checkpoint truncated': lambda c: [
        _det(c).last_checkpoint('model_0000002.pth', truncate)],
    # outputs
    'OUTPUT_DIR is an existing file': lambda c: [_set(c, 'out', garbage(c.tmp / 'a_file'))],
    'OUTPUT_DIR below a file': lambda c: [_set(c, 'out', os.path.join(
        garbage(c.tmp / 'b_file'), 'sub'))],
    'detector: OUTPUT_DIR is an existing file': lambda c: [
        _set(_det(c), 'out', garbage(c.tmp / 'a_file'))],
}


@pytest.mark.parametrize('name', sorted(CASES))
def test_refused_in_process(name, case, capsys):
    names = CASES[name](case)
    code, _, err = run_main(case.argv(), capsys)
    out_dir = case.out if os.path.isdir(case.out) else None
    check_refused(code, err, names, out_dir, allowed=case.planted)
    assert not os.path.exists(case.marker), 'the hostile pickle ran its code'


def test_max_iter_0_runs_the_test_only_and_says_so(case, capsys):
    """SOLVER.MAX_ITER 0 is allowed (the test of the initial weights; SGB divides by it at
    the end), never silently: the log says nothing is trained."""
    case.opt('SOLVER.MAX_ITER', 0)
    code, out, err = run_main(case.argv(), capsys)
    assert code == 0
    check_reported(code, out, err, ['SOLVER.MAX_ITER is 0: nothing is trained'], case.out)


# a cache can be refused or rebuilt, but not silently: the file is named either way
CACHES = {
    'statistics cache truncated': lambda c: [truncate(c.plant(STATS, 'rel/' + STATS))],
    'statistics cache hostile pickle': lambda c: [hostile_pickle(c.plant(STATS), c.marker)],
    'statistics cache garbage': lambda c: [garbage(c.plant(STATS))],
}


@pytest.mark.parametrize('name', sorted(CACHES))
def test_bad_cache_is_refused_or_rebuilt_with_a_word(name, case, capsys):
    names = CACHES[name](case)
    code, out, err = run_main(case.argv(), capsys)
    check_reported(code, out, err, names, case.out)
    assert not os.path.exists(case.marker), 'the hostile pickle ran its code'


def test_declared_size_wrong_is_reported(case, capsys):
    path = os.path.join(case.copy_data(), 'image_data.json')
    with open(path) as f:
        rows = json.load(f)
    rows[0]['width'] *= 3
    with open(path, 'w') as f:
        json.dump(rows, f)
    code, out, err = run_main(case.argv(), capsys)
    check_reported(code, out, err, ['image_data.json'], case.out)


@pytest.mark.parametrize('tool', ['sgg', 'sgg-detector'])
def test_truncated_image_is_refused_or_reported(tool, case, capsys):
    """A JPEG cut short: refused naming it, or trained on with a warning naming it."""
    if tool == 'sgg-detector':
        case.detector()
    # image_id 4: a train image of both tools (image_id 2 has no relation the relation
    # split keeps, so the relation tool never reads it and rightly says nothing)
    image = truncate(case.image(3), 0.3)
    code, out, err = run_main(case.argv(), capsys)
    check_reported(code, out, err, [image], case.out)


@pytest.mark.parametrize('tool', ['sgg', 'sgg-detector'])
def test_ctrl_c_in_process_advises_rerunning(tool, case, capsys, monkeypatch):
    from gluontrain.torch.sgg import step as sgg_step
    if tool == 'sgg-detector':
        case.detector()
    real = sgg_step.SGGStep.__call__

    def interrupt(self, batch, state):
        if state.iteration >= 2:
            raise KeyboardInterrupt
        return real(self, batch, state)
    monkeypatch.setattr(sgg_step.SGGStep, '__call__', interrupt)
    case.opts = ['SOLVER.MAX_ITER', '6', 'SOLVER.CHECKPOINT_PERIOD', '2']
    code, _, err = run_main(case.argv(), capsys)
    line = check_refused(code, err, ['interrupted at', 'model_0000002.pth'], case.out,
                         interrupted=True)
    assert '--resume' not in line  # SGB's tools have none: rerunning the command resumes


def test_full_disk_names_the_file_and_leaves_nothing_half_written(case, capsys):
    unmount = read_only_dir(case.out, 'size=64k')
    try:
        code, _, err = run_main(case.argv(), capsys)
        check_refused(code, err, [case.out, 'No space left on device', 'OUTPUT_DIR'], case.out)
    finally:
        unmount()


# ----------------------------------------------------- real processes: real stderr

@pytest.mark.slow  # a subprocess, several processes or a live GluonCV run: over ~5 s
def test_script_zero_byte_image(case):
    image = zero_bytes(case.image(0))
    res = run_script('train_relation.py', case.argv()[2:])
    check_refused(res.returncode, res.stderr, [image], case.out)


@pytest.mark.slow  # a subprocess, several processes or a live GluonCV run: over ~5 s
def test_script_truncated_detector_ckpt(case):
    ckpt = truncate(case.file('d.pth', 'det/model_final.pth'))
    case.opt('MODEL.PRETRAINED_DETECTOR_CKPT', ckpt)
    res = run_script('train_relation.py', case.argv()[2:])
    check_refused(res.returncode, res.stderr, [ckpt, 'MODEL.PRETRAINED_DETECTOR_CKPT'], case.out)


@pytest.mark.slow  # a subprocess, several processes or a live GluonCV run: over ~5 s
def test_script_bad_config_value(case):
    case.opt('SOLVER.IMS_PER_BATCH', 0)
    res = run_script('train_relation.py', case.argv()[2:])
    check_refused(res.returncode, res.stderr, ['SOLVER.IMS_PER_BATCH'], case.out)


@pytest.mark.slow  # a subprocess, several processes or a live GluonCV run: over ~5 s
def test_script_detector_hostile_weight(case):
    case.detector().opt('MODEL.WEIGHT', hostile_torch_file(case.file('evil.pth'), case.marker))
    res = run_script('pretrain_detector.py', case.argv()[2:])
    check_refused(res.returncode, res.stderr, [case.file('evil.pth')], case.out)
    assert not os.path.exists(case.marker)


@pytest.mark.slow  # a subprocess, several processes or a live GluonCV run: over ~5 s
def test_script_read_only_output_dir(case):
    unmount = read_only_dir(case.out)
    try:
        res = run_script('train_relation.py', case.argv()[2:])
    finally:
        unmount()
    check_refused(res.returncode, res.stderr, [case.out])


@pytest.mark.parametrize('script', ['train_relation.py', 'pretrain_detector.py'])
@pytest.mark.slow  # a subprocess, several processes or a live GluonCV run: over ~5 s
def test_script_ctrl_c_once_training_started(script, case):
    if script == 'pretrain_detector.py':
        case.detector()
    case.opts = ['SOLVER.MAX_ITER', '400', 'SOLVER.CHECKPOINT_PERIOD', '1',
                 'SOLVER.VAL_PERIOD', '1000', 'SOLVER.PRINT_GRAD_FREQ', '1000']
    code, _, err = interrupt_script(script, case.argv()[2:], case.out,
                                    r'model_0000001\.pth|iter: ?[1-9]')
    line = check_refused(code, err, ['interrupted'], case.out, interrupted=True)
    assert '--resume' not in line
