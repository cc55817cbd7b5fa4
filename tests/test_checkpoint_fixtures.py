"""Checkpoints written before the refactor of issue 43 resume on this code.

``tests/fixtures/checkpoints/<recipe>/`` holds one resumable checkpoint of every recipe
(YOLOv3 on MXNet and on PyTorch, SSD, seamseg's two-stage detector, SGB's relation and
detector training), written by gluontrain at commit 3b8bb40 with
``tests/fixtures/make_checkpoint_fixtures.py`` and gzipped, beside ``record.json`` (the argv,
the data writer's arguments, the saved position, a few tensors). Each test writes the same
data into ``tmp_path`` with ``gluontrain.data.synthetic``, resumes the checkpoint through
``gluontrain.get_recipe(name).main(argv)`` (``--resume FILE``; SGB's recipes: the same command
with ``last_checkpoint`` in ``OUTPUT_DIR``) for one more epoch or iteration, and asserts:

- the file as this code reads it holds the recorded tensors (``record.json`` ``probes``);
- the run says it resumed (``resumed from FILE at epoch E, iteration I`` in its train log, the
  recorded position) and ``TrainState.resumed_from`` names the file;
- the weights it resumed with are the file's: every tensor of the model at its first forward
  (torch), or, for the MXNet YOLOv3 (recorded at learning rate 0), every trained tensor of the
  new checkpoint; seamseg's momentum buffers went on from the file's (x 1.81 after two more
  steps, where a fresh optimizer would leave them as they were);
- the resumed epoch's losses in the metrics file are finite, and the new checkpoint is at the
  next position.
"""
import gzip
import io
import json
import math
import os
import re

import numpy as np
import pytest
import torch
from torch.nn.modules.module import register_module_forward_pre_hook

import gluontrain
from gluontrain.core.checkpoint import load_checkpoint
from gluontrain.core.mxparams import read_params_bytes
from gluontrain.data import synthetic
from gluontrain.registry import RecipeUnavailable, route

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'fixtures', 'checkpoints')
COMMIT = '3b8bb40'

#: recipe -> (the budget its resume extends: (argument or 'config', old, new), the arguments
#: of the recorded run that the resume drops (the starting weights), the recorded position,
#: the position the log says it resumed at (epoch, iteration), the new checkpoint's position,
#: the prefix of its files)
PLANS = {
    'yolo3': (('--epochs', '1', '2'), ('--load-weights',), {'epoch': 0, 'iteration': 1},
              (1, 1), {'epoch': 1, 'iteration': 2}, 'yolo3_mobilenet0.25_voc'),
    'yolo3-torch': (('--epochs', '1', '2'), ('--load-weights',), {'epoch': 0, 'iteration': 1},
                    (1, 1), {'epoch': 1, 'iteration': 2}, 'yolo3_mobilenet0.25_voc'),
    # recorded inside its second pass (2 batches a pass, --max_iter 3)
    'ssd': (('--max_iter', '3', '4'), (), {'epoch': 1, 'iteration': 3}, (1, 3),
            {'epoch': 1, 'iteration': 4}, 'ssd300_VOC'),
    'frcnn': (('config', 'epochs = 1', 'epochs = 2'), ('--pre_train',),
              {'epoch': 0, 'iteration': 2}, (1, 2), {'epoch': 1, 'iteration': 4}, 'frcnn'),
    'sgg': (('SOLVER.MAX_ITER', '1', '2'), (), {'iteration': 1}, (0, 1), {'iteration': 2},
            'sgg'),
    'sgg-detector': (('SOLVER.MAX_ITER', '1', '2'), (), {'iteration': 1}, (0, 1),
                     {'iteration': 2}, 'sgg_detector'),
}
SGB = ('sgg', 'sgg-detector')
BN_STATISTICS = ('running_mean', 'running_var', 'num_batches_tracked')


def _record(name):
    with open(os.path.join(FIXTURES, name, 'record.json'), encoding='utf-8') as f:
        return json.load(f)


def _recipe(name, argv):
    routed = route('yolo3' if name.startswith('yolo3') else name, argv)
    assert routed == name
    try:
        return gluontrain.get_recipe(routed)
    except RecipeUnavailable as e:
        pytest.skip(str(e))
    return None


def _write_data(spec, root):
    """``record.json``'s ``data``: the writer of ``gluontrain.data.synthetic`` and its
    arguments (JSON lists as tuples; ``'DEFAULT_VOC_CLASSES'`` the module's constant)."""
    kwargs = {k: (tuple(v) if isinstance(v, list) else v) for k, v in spec['kwargs'].items()}
    if kwargs.get('classes') == 'DEFAULT_VOC_CLASSES':
        kwargs['classes'] = synthetic.DEFAULT_VOC_CLASSES
    return getattr(synthetic, spec['writer'])(str(root), **kwargs)


def _setup(name, rec, tmp_path):
    """Data, config and the checkpoint in ``tmp_path``: ``(argv of the resume, checkpoint
    path, output folder)``."""
    budget, drop, _, _, _, _ = PLANS[name]
    out = tmp_path / 'out'
    out.mkdir()
    places = {'{data}': _write_data(rec['data'], tmp_path / 'data'), '{out}': str(out)}
    if rec['last_checkpoint']:  # SGB: rerunning the command resumes what last_checkpoint names
        assert rec['last_checkpoint'] == rec['checkpoint']['name']
        ckpt = out / rec['checkpoint']['name']
        (out / 'last_checkpoint').write_text(rec['last_checkpoint'])
    else:
        ckpt = tmp_path / rec['checkpoint']['name']
    with open(os.path.join(FIXTURES, name, rec['checkpoint']['file']), 'rb') as f:
        data = gzip.decompress(f.read())
    assert len(data) == rec['checkpoint']['bytes']
    ckpt.write_bytes(data)
    if rec['config_text'] is not None:
        text = rec['config_text']
        if budget[0] == 'config':
            assert text.count(budget[1]) == 1
            text = text.replace(budget[1], budget[2])
        places['{config}'] = str(tmp_path / (rec['config_file'] or 'config.ini'))
        (tmp_path / (rec['config_file'] or 'config.ini')).write_text(text)
    argv = list(rec['argv'])
    for flag in drop:  # the starting weights: the checkpoint has them (and refuses both)
        i = argv.index(flag)
        del argv[i:i + 2]
    if budget[0] != 'config':
        i = argv.index(budget[0])
        assert argv[i + 1] == budget[1]
        argv[i + 1] = budget[2]
    argv = [places.get(a, a.replace('{out}', str(out))) for a in argv]
    assert not [a for a in argv if '{' in a and '}' in a], argv
    if name not in SGB:
        argv += ['--resume', str(ckpt)]
    return argv, str(ckpt), out


def _weights(name, path):
    """``{name: numpy array}`` of the weights in a checkpoint file, read with this code."""
    if name in SGB:
        state = torch.load(path, map_location='cpu', weights_only=True)['model']
        return {k: v.numpy() for k, v in state.items()}
    params = load_checkpoint(path)['params']
    if name == 'yolo3':
        return {k: np.asarray(v) for k, v in read_params_bytes(params).items()}
    state = torch.load(io.BytesIO(params), map_location='cpu', weights_only=True)
    return {k: v.numpy() for k, v in state.items()}


def _position(name, path):
    if name in SGB:
        return {'iteration': int(torch.load(path, map_location='cpu',
                                            weights_only=True)['iteration'])}
    payload = load_checkpoint(path)
    return {'epoch': payload['epoch'], 'iteration': payload['iteration']}


class _FirstForward:
    """Every torch module's forward pre-hook (``torch.nn.modules.module``'s global one): the
    state_dict of the first module called whose keys are ``keys`` (a ``module.`` prefix
    dropped), before its forward, i.e. the model the resumed run starts its first step with."""

    def __init__(self, keys):
        self.keys, self.state, self.seen, self.handle = set(keys), None, set(), None

    def __enter__(self):
        self.handle = register_module_forward_pre_hook(self._hook)
        return self

    def __exit__(self, *exc):
        self.handle.remove()

    def _hook(self, module, _inputs):
        if self.state is not None or id(module) in self.seen:
            return
        self.seen.add(id(module))
        state = module.state_dict()
        state = {(k[len('module.'):] if k.startswith('module.') else k): v
                 for k, v in state.items()}
        if set(state) == self.keys:
            self.state = {k: v.detach().cpu().clone().numpy() for k, v in state.items()}


def _check_probes(rec, arrays):
    assert len([a for a in arrays.values() if np.issubdtype(a.dtype, np.floating)]) == \
        rec['num_float_tensors']
    for key, probe in rec['probes'].items():
        a = arrays[key].astype(np.float64)
        assert list(a.shape) == probe['shape'], key
        assert a.ravel()[:4].tolist() == probe['head'], key
        # float64 sums of stored values: only the summation order (numpy's SIMD width) can
        # move them, by about 1e-16 relative; 1e-9 leaves a wide margin on any processor
        assert a.sum() == pytest.approx(probe['sum'], rel=1e-9, abs=1e-9), key


def _metrics_rows(path):
    with open(path, encoding='utf-8') as f:
        return [json.loads(line) for line in f if line.strip()]


@pytest.mark.parametrize('name', [pytest.param(n, marks=pytest.mark.slow) if n == 'yolo3' else n
                                  for n in sorted(PLANS)])  # MXNet's: 12 s with its import
def test_checkpoint_of_3b8bb40_resumes(name, tmp_path):
    rec = _record(name)
    _, _, position, resumed_at, after, prefix = PLANS[name]
    assert rec['recipe'] == name and rec['commit'] == COMMIT and rec['position'] == position
    argv, ckpt, out = _setup(name, rec, tmp_path)
    module = _recipe(name, argv)
    recorded = _weights(name, ckpt)
    _check_probes(rec, recorded)

    if name == 'yolo3':
        state = module.main(argv)
    else:
        with _FirstForward(recorded) as first:
            state = module.main(argv)
        assert first.state is not None, 'no module with the checkpoint\'s tensors ran'
        for key, value in recorded.items():  # the model it resumed with is the file's
            assert np.array_equal(first.state[key], value), key

    assert state.resumed_from == ckpt
    log = (out / '{}_train.log'.format(prefix)).read_text()
    assert 'resumed from {} at epoch {}, iteration {}'.format(ckpt, *resumed_at) in \
        log.splitlines()
    budget = PLANS[name][0]
    if budget[0].startswith('--'):
        assert 'changed on resume: {}: {} -> {}'.format(*budget) in log.splitlines()

    # the resumed epoch's losses, finite
    rows = [r for r in _metrics_rows(out / '{}_metrics.jsonl'.format(prefix))
            if r['iteration'] > position['iteration']]
    assert rows and rows[-1]['iteration'] == after['iteration']
    for row in rows:
        losses = row['loss_epoch']
        assert losses and all(math.isfinite(v) for v in losses.values()), row

    # the new checkpoint, at the next position
    if name in SGB:
        new = out / (out / 'last_checkpoint').read_text().strip()
    else:
        new = out / os.path.basename(ckpt)
        assert str(new) != ckpt
    assert new.is_file() and _position(name, str(new)) == after
    assert state.iteration == after['iteration']

    if name in ('yolo3', 'yolo3-torch', 'frcnn'):
        # recorded at learning rate 0: every trained tensor is still the file's
        saved = _weights(name, str(new))
        assert set(saved) == set(recorded)
        trained = [k for k in recorded if not k.endswith(BN_STATISTICS)]
        assert len(trained) > 100
        for key in trained:
            assert np.array_equal(saved[key], recorded[key]), key
    if name == 'frcnn':
        _check_momentum_went_on(ckpt, str(new))


def _check_momentum_went_on(old, new):
    """seamseg's run: lr 0, loss weights 0, so each SGD step sets ``b = 0.9 b + wd w`` with
    ``w`` fixed; the file has ``b2 = 1.9 wd w`` after two steps, and two more steps from it
    give ``b4 = 1.81 b2``. A resume that dropped the optimizer state would give ``1.9 wd w``
    again, ``b4 = b2``."""

    def buffers(path):
        trainer = torch.load(io.BytesIO(load_checkpoint(path)['trainer']), map_location='cpu',
                             weights_only=True)
        return {k: v['momentum_buffer'] for k, v in trainer['optimizer']['state'].items()}
    before, after = buffers(old), buffers(new)
    assert set(before) == set(after) and len(before) > 100
    moved = 0
    for key, b2 in before.items():
        # two float32 multiply-adds: a few ulp (~1e-7 relative) on any kernel; 1e-5 is 100x that
        torch.testing.assert_close(after[key], 1.81 * b2, rtol=1e-5, atol=1e-12)
        moved += int(b2.abs().max() > 0)
    assert moved > 100


def test_fixtures_are_small_and_complete():
    """One folder per recipe, each a gzipped checkpoint and its record; at most 2 MB each."""
    assert sorted(os.listdir(FIXTURES)) == sorted(PLANS)
    total = 0
    for name in PLANS:
        rec = _record(name)
        files = sorted(os.listdir(os.path.join(FIXTURES, name)))
        assert files == sorted(['record.json', rec['checkpoint']['file']])
        size = os.path.getsize(os.path.join(FIXTURES, name, rec['checkpoint']['file']))
        assert size <= 2 * 2 ** 20, (name, size)
        total += size
        assert rec['processor'] and rec['tree_modified'] is False
        assert not re.search(r'/(tmp|home|root|work)/', json.dumps(rec)), name
    assert total <= 10 * 2 ** 20


def test_the_first_forward_check_sees_a_model_that_is_not_the_file_s(tmp_path):
    """What the resume tests compare is not vacuous: SSD's recorded command run without
    ``--resume`` (one step from the seeded fresh network) starts from other tensors, and its
    log says nothing of a resume."""
    name = 'ssd'
    rec = _record(name)
    argv, ckpt, out = _setup(name, rec, tmp_path)
    argv = argv[:-2]  # no --resume
    argv[argv.index('--max_iter') + 1] = '1'
    module = _recipe(name, argv)
    recorded = _weights(name, ckpt)
    with _FirstForward(recorded) as first:
        state = module.main(argv)
    assert first.state is not None and state.resumed_from is None
    differ = [k for k in recorded if not np.array_equal(first.state[k], recorded[k])]
    # every weight (some biases of the deepest layers get no gradient in 3 steps and are the
    # initial zeros in both)
    assert [k for k in recorded if recorded[k].ndim > 1 and k not in differ] == []
    assert len(differ) > 50
    assert 'resumed from' not in (out / 'ssd300_VOC_train.log').read_text()
