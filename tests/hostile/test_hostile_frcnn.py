"""Hostile inputs to the two-stage recipe (scripts/train_detection.py, ``gluontrain train
frcnn``): each ends in one ``error:`` line naming the file or key (or one ``interrupted``
line), a non-zero exit, no traceback and nothing half-written (issue 21)."""
import json
import os
import shutil

import pytest
import torch

from hostile_support import (check_refused, check_reported, copy_tree, garbage,
                             hostile_torch_file, interrupt_script, read_only_dir, run_main,
                             run_script, truncate, zero_bytes)

SECTIONS = {
    'general': {'log_interval': '1'},
    'body': {'body': 'resnet18', 'body_params': '{"width_mult": 0.125}',
             'normalization_mode': 'bn', 'num_frozen': '0', 'bn_frozen': 'no',
             'out_channels': '{"mod1": 8, "mod2": 8, "mod3": 16, "mod4": 32, "mod5": 64}'},
    'fpn': {'out_channels': '16'},
    'rpn': {'hidden_channels': '16', 'num_pre_nms_train': '300', 'num_post_nms_train': '50',
            'num_pre_nms_val': '200', 'num_post_nms_val': '30'},
    'roi': {'num_samples': '16'},
    'scheduler': {'epochs': '1', 'burn_in_steps': '1'},
    'dataloader': {'shortest_size': '64', 'longest_max_size': '96', 'train_batch_size': '4',
                   'val_batch_size': '4', 'num_workers': '0', 'train_set': 'train2017',
                   'val_set': 'val2017'},
}


def write_config(path, **overrides):
    """The tiny config with ``section__key=value`` overrides (value None drops the key)."""
    sections = {s: dict(keys) for s, keys in SECTIONS.items()}
    for name, value in overrides.items():
        section, key = name.split('__')
        sections.setdefault(section, {})
        if value is None:
            sections[section].pop(key, None)
        else:
            sections[section][key] = value
    text = ''.join('[{}]\n{}\n'.format(s, ''.join('{} = {}\n'.format(k, v)
                                                  for k, v in keys.items()))
                   for s, keys in sections.items())
    with open(str(path), 'w') as f:
        f.write(text)
    return str(path)


@pytest.fixture(scope='module')
def data(tmp_path_factory):
    """8 train + 4 val COCO images (shared: copy before spoiling)."""
    from gluontrain.data import synthetic
    root = str(tmp_path_factory.mktemp('frcnn_coco'))
    synthetic.write_coco(root, num_train=8, num_val=4, seed=0, image_size=(64, 96))
    return root


@pytest.fixture(scope='module')
def trained(tmp_path_factory, data):
    """A finished one-epoch run: its model_last.pth.tar and frcnn_last.ckpt are real files
    of this recipe."""
    folder = tmp_path_factory.mktemp('frcnn_run')
    config = write_config(folder / 'tiny.ini')
    from gluontrain.torch.frcnn import recipe
    recipe.main(['--seed', '0', '--tensorboard', '', '--log_dir', str(folder / 'run'), config,
                 data])
    return folder / 'run'


class Case:
    """Per-test workspace: a private output folder and config; ``argv(...)`` the command."""

    def __init__(self, tmp_path, data, trained):
        self.tmp, self.data, self.trained = tmp_path, data, trained
        self.out = str(tmp_path / 'out')
        self.config = write_config(tmp_path / 'tiny.ini')
        self.marker = str(tmp_path / 'PWNED')

    def copy_data(self):
        """Switch to a private copy of the shared data (once); returns its path."""
        if str(self.data) != str(self.tmp / 'data'):
            self.data = copy_tree(self.data, self.tmp / 'data')
        return self.data

    def ann(self, split='train2017'):
        """The annotation file of a private copy of the data (the case spoils it)."""
        return os.path.join(self.copy_data(), 'annotations', 'instances_{}.json'.format(split))

    def edit_ann(self, edit, split='train2017'):
        """Apply ``edit(dict)`` to a private copy's annotations; returns the file."""
        self.copy_data()
        path = self.ann(split)
        with open(path) as f:
            doc = json.load(f)
        edit(doc)
        with open(path, 'w') as f:
            json.dump(doc, f)
        return path

    def image(self, index=0, split='train2017'):
        """An image of a private copy of the data (the case spoils it)."""
        with open(self.ann(split)) as f:
            name = json.load(f)['images'][index]['file_name']
        return os.path.join(self.data, split, name)

    def file(self, name, source=None):
        """A private copy of a file of the trained run (``source``) or a new path."""
        path = str(self.tmp / name)
        if source:
            shutil.copy(str(self.trained / source), path)
        return path

    def config_with(self, **overrides):
        self.config = write_config(self.tmp / 'bad.ini', **overrides)
        return self.config

    def argv(self, *extra):
        # options after the positionals: --pre_train takes any number of files
        return ['train', 'frcnn', '--log_dir', self.out, self.config, str(self.data)] + list(
            extra)


@pytest.fixture
def case(tmp_path, data, trained):
    return Case(tmp_path, data, trained)


def _renamed_snapshot(c):
    path = c.file('renamed.pth.tar', 'model_last.pth.tar')
    snap = torch.load(path, weights_only=True)
    for module in ('body', 'rpn_head', 'roi_head'):
        snap['state_dict'][module] = {'renamed.' + k: v for k, v in
                                      snap['state_dict'][module].items()}
    torch.save(snap, path)
    return path


def _sgg_checkpoint(c):
    path = c.file('model_0000003.pth')
    torch.save({'model': {'backbone.body.stem.conv1.weight': torch.zeros(8, 3, 7, 7),
                          'roi_heads.box.predictor.cls_score.weight': torch.zeros(9, 64)},
                'optimizer': {}, 'iteration': 3}, path)
    return path


def _ssd_weights(c):
    path = c.file('ssd300_VOC_2.pth')
    torch.save({'vgg.0.weight': torch.zeros(8, 3, 3, 3), 'extras.0.weight': torch.zeros(4, 8, 1, 1),
                'loc.0.weight': torch.zeros(16, 8, 3, 3), 'conf.0.weight': torch.zeros(24, 8, 3, 3)},
               path)
    return path


def _resnet34_config_resume(c):
    snap = c.file('r18.pth.tar', 'model_last.pth.tar')
    c.config_with(body__body='resnet34')
    return ['--resume', snap], [snap]


def _all_boxes_outside(doc):
    for a in doc['annotations']:
        a['bbox'] = [5000.0, 5000.0, 10.0, 10.0]


def _nan_box(doc):
    doc['annotations'][0]['bbox'][0] = float('nan')


def _negative_box(doc):
    doc['annotations'][0]['bbox'][2] = -20.0


def _empty_split(doc):
    doc['images'], doc['annotations'] = [], []


def _unknown_category(doc):
    doc['annotations'][0]['category_id'] = 9999


# id -> case(c) returning (extra argv, names the error line must hold); the case may spoil
# c.data / c.config first
CASES = {
    # images
    'zero-byte train image': lambda c: ([], [zero_bytes(c.image(0))]),
    'garbage train image': lambda c: ([], [garbage(c.image(2))]),
    'zero-byte val image': lambda c: ([], [zero_bytes(c.image(0, 'val2017'))]),
    'missing train image': lambda c: ([], [_remove(c.image(0))]),
    # data sanity
    'nan box': lambda c: ([], [os.path.basename(c.edit_ann(_nan_box))]),
    'negative box width': lambda c: ([], [os.path.basename(c.edit_ann(_negative_box))]),
    'every box outside its image': lambda c: ([], [os.path.basename(c.edit_ann(
        _all_boxes_outside))]),
    'empty train split': lambda c: ([], [os.path.basename(c.edit_ann(_empty_split))]),
    'empty val split': lambda c: ([], [os.path.basename(c.edit_ann(_empty_split, 'val2017'))]),
    'unknown category id': lambda c: ([], [os.path.basename(c.edit_ann(_unknown_category))]),
    'annotations not json': lambda c: ([], [garbage(c.ann())]),
    'annotations missing': lambda c: ([], ['instances_train2017.json'] if _remove(
        c.ann()) else []),
    'train image folder missing': lambda c: ([], ['train2017'] if shutil.rmtree(
        os.path.join(c.copy_data(), 'train2017')) is None else []),
    'data root missing': lambda c: ([], [_set(c, 'data', str(c.tmp / 'nowhere'))]),
    'data root is a file': lambda c: ([], [_set(c, 'data', garbage(c.tmp / 'root.txt'))]),
    # config values
    'body_params does not parse': lambda c: ([], ['body_params', c.config_with(
        body__body_params='{"width_mult": 0.25')]),
    'log_interval 0': lambda c: ([], ['log_interval', c.config_with(general__log_interval='0')]),
    'log_interval negative': lambda c: ([], ['log_interval', c.config_with(
        general__log_interval='-3')]),
    'val_interval 0 (never)': lambda c: ([], ['val_interval', c.config_with(
        general__val_interval='0')]),
    'epochs -1': lambda c: ([], ['epochs', c.config_with(scheduler__epochs='-1')]),
    'epochs 0': lambda c: ([], ['epochs', c.config_with(scheduler__epochs='0')]),
    'epochs not a number': lambda c: ([], ['epochs', c.config_with(scheduler__epochs='ten')]),
    'train_batch_size 0': lambda c: ([], ['train_batch_size', c.config_with(
        dataloader__train_batch_size='0')]),
    'shortest_size 0': lambda c: ([], ['shortest_size', c.config_with(
        dataloader__shortest_size='0')]),
    'shortest_size huge': lambda c: ([], ['shortest_size', c.config_with(
        dataloader__shortest_size='200000', dataloader__longest_max_size='400000')]),
    'lr not a float': lambda c: ([], ['lr', c.config_with(optimizer__lr='abc')]),
    'lr negative': lambda c: ([], ['lr', c.config_with(optimizer__lr='-0.1')]),
    'bn_frozen not a boolean': lambda c: ([], ['bn_frozen', c.config_with(
        body__bn_frozen='maybe')]),
    'num_workers negative': lambda c: ([], ['num_workers', c.config_with(
        dataloader__num_workers='-1')]),
    'unknown key': lambda c: ([], ['widht_mult', c.config_with(body__widht_mult='0.5')]),
    'unknown body network': lambda c: ([], ['body', c.config_with(body__body='resnet7')]),
    'config file missing': lambda c: ([], [_set(c, 'config', str(c.tmp / 'nope.ini'))]),
    'config file is a folder': lambda c: ([], [_set(c, 'config', str(c.tmp))]),
    'config without sections': lambda c: ([], [_set(c, 'config', garbage(c.tmp / 'x.ini',
                                                                         b'lr = 0.1\n'))]),
    # weights and checkpoints (--resume, --pre_train, [body] weights)
    'resume truncated model_last': lambda c: (
        ['--resume', truncate(c.file('m.pth.tar', 'model_last.pth.tar'))], ['m.pth.tar']),
    'resume truncated frcnn_last.ckpt': lambda c: (
        ['--resume', truncate(c.file('f.ckpt', 'frcnn_last.ckpt'))], ['f.ckpt']),
    'resume zero-byte file': lambda c: (['--resume', zero_bytes(c.file('z.pth.tar'))],
                                        ['z.pth.tar']),
    'resume hostile pickle': lambda c: (['--resume', hostile_torch_file(
        c.file('evil.pth.tar'), c.marker, 'state_dict')], ['evil.pth.tar']),
    'resume missing file': lambda c: (['--resume', c.file('gone.pth.tar')], ['gone.pth.tar']),
    'resume a folder': lambda c: (['--resume', str(c.tmp)], [str(c.tmp)]),
    'resume renamed keys': lambda c: (['--resume', _renamed_snapshot(c)], ['renamed.pth.tar']),
    'resume sgg checkpoint': lambda c: (['--resume', _sgg_checkpoint(c)], ['model_0000003.pth']),
    'resume ssd weights': lambda c: (['--resume', _ssd_weights(c)], ['ssd300_VOC_2.pth']),
    'resume resnet18 under resnet34 config': _resnet34_config_resume,
    'pre_train truncated': lambda c: (
        ['--pre_train', truncate(c.file('p.pth.tar', 'model_last.pth.tar'))], ['p.pth.tar']),
    'pre_train hostile pickle': lambda c: (['--pre_train', hostile_torch_file(
        c.file('evil.pth.tar'), c.marker, 'state_dict')], ['evil.pth.tar']),
    'pre_train sgg checkpoint': lambda c: (['--pre_train', _sgg_checkpoint(c)],
                                           ['model_0000003.pth']),
    'pre_train body: renamed keys': lambda c: (['--pre_train', 'body:' + _renamed_snapshot(c)],
                                               ['renamed.pth.tar']),
    'body weights truncated': lambda c: ([], ['weights', c.config_with(body__weights=truncate(
        c.file('w.pth', 'model_last.pth.tar'))) and 'w.pth']),
    'body weights hostile pickle': lambda c: ([], ['weights', c.config_with(
        body__weights=hostile_torch_file(c.file('evil.pth'), c.marker)) and 'evil.pth']),
    'body weights ssd file': lambda c: ([], ['weights', c.config_with(
        body__weights=_ssd_weights(c)) and 'ssd300_VOC_2.pth']),
    # outputs
    'log_dir is an existing file': lambda c: ([], [_set(c, 'out', garbage(c.tmp / 'a_file'))]),
    'log_dir below a file': lambda c: ([], [_set(c, 'out', os.path.join(
        garbage(c.tmp / 'b_file'), 'sub'))]),
    'tensorboard folder is a file': lambda c: (['--tensorboard', garbage(c.tmp / 'tb')],
                                               [str(c.tmp / 'tb')]),
}


def _remove(path):
    os.remove(path)
    return path


def _set(c, attr, value):
    setattr(c, attr, value)
    return value


@pytest.mark.parametrize('name', sorted(CASES))
def test_refused_in_process(name, case, capsys):
    extra, names = CASES[name](case)
    code, _, err = run_main(case.argv(*extra), capsys)
    out_dir = case.out if os.path.isdir(case.out) else None
    check_refused(code, err, names, out_dir)
    assert not os.path.exists(case.marker), 'the hostile pickle ran its code'


@pytest.mark.parametrize('name', ['single box outside its image', 'declared size wrong'])
def test_reported_in_process(name, case, capsys):
    """Not fatal to training, but said: a box wholly outside its image, a COCO width/height
    that contradicts the file."""
    def outside(doc):
        doc['annotations'][0]['bbox'] = [5000.0, 5000.0, 10.0, 10.0]

    def wrong_size(doc):
        doc['images'][0]['width'] *= 3
    path = case.edit_ann(outside if name.startswith('single') else wrong_size)
    code, out, err = run_main(case.argv(), capsys)
    check_reported(code, out, err, [os.path.basename(path)], case.out)


def test_truncated_image_is_refused_or_reported(case, capsys):
    """A JPEG cut short: refused naming it, or (decoded with the missing part blank, as
    the references' readers do) trained on with a warning naming it."""
    image = truncate(case.image(1), 0.3)
    code, out, err = run_main(case.argv(), capsys)
    check_reported(code, out, err, [image], case.out)


def test_ctrl_c_in_process_names_the_position(case, capsys, monkeypatch):
    from gluontrain.torch.step import LossDictStep

    def interrupt(self, *args, **kwargs):
        raise KeyboardInterrupt
    monkeypatch.setattr(LossDictStep, '__call__', interrupt)
    code, _, err = run_main(case.argv(), capsys)
    line = check_refused(code, err, ['interrupted at epoch 0'], case.out, interrupted=True)
    assert 'no checkpoint written yet' in line


def test_full_disk_names_the_file_and_leaves_nothing_half_written(case, capsys):
    unmount = read_only_dir(case.out, 'size=64k')
    try:
        code, _, err = run_main(case.argv(), capsys)
        check_refused(code, err, [case.out, 'No space left on device', '--log_dir'], case.out)
    finally:
        unmount()


# ----------------------------------------------------- real processes: real stderr

@pytest.mark.slow  # a subprocess, several processes or a live GluonCV run: over ~5 s
def test_script_zero_byte_image(case):
    image = zero_bytes(case.image(0))
    res = run_script('train_detection.py', case.argv()[2:])
    check_refused(res.returncode, res.stderr, [image], case.out)


@pytest.mark.slow  # a subprocess, several processes or a live GluonCV run: over ~5 s
def test_script_truncated_resume(case):
    snap = truncate(case.file('m.pth.tar', 'model_last.pth.tar'))
    res = run_script('train_detection.py', case.argv('--resume', snap)[2:])
    check_refused(res.returncode, res.stderr, [snap], case.out)


@pytest.mark.slow  # a subprocess, several processes or a live GluonCV run: over ~5 s
def test_script_config_value_that_does_not_parse(case):
    config = case.config_with(body__body_params='{"width_mult": 0.25')
    res = run_script('train_detection.py', case.argv()[2:])
    check_refused(res.returncode, res.stderr, [config, 'body_params'], case.out)


@pytest.mark.slow  # a subprocess, several processes or a live GluonCV run: over ~5 s
def test_script_read_only_log_dir(case):
    unmount = read_only_dir(case.out)
    try:
        res = run_script('train_detection.py', case.argv()[2:])
    finally:
        unmount()
    check_refused(res.returncode, res.stderr, [case.out, '--log_dir'])


@pytest.mark.slow  # a subprocess, several processes or a live GluonCV run: over ~5 s
def test_script_ctrl_c_once_training_started(case):
    case.config_with(scheduler__epochs='50')
    code, _, err = interrupt_script('train_detection.py', case.argv()[2:], case.out,
                                    r'\[ *1/50\] \[1/')
    line = check_refused(code, err, ['interrupted at epoch'], case.out, interrupted=True)
    assert '--resume' not in line or os.path.isfile(line.rsplit('--resume ', 1)[1])
