"""scripts/eval_yolov3.py against GluonCV's own eval_yolo.py: the same mAP on the same file.

The weights are GluonCV's own models' (seeded, ``save_parameters``), the data the recipe's
default synthetic dataset; ``tests/fixtures/make_yolo3_fixtures.py`` recorded what
``eval_yolo.py`` prints for them. The recorded tests need no reference checkout; the live ones
run the reference again (GLUONTRAIN_REFERENCES).
"""
import json
import math
import os
import sys

import pytest

from gluontrain.mx.yolo3.infer import eval_main

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'fixtures')
sys.path.insert(0, FIXTURES)
# pylint: disable=wrong-import-position
import make_yolo3_fixtures as fx  # noqa: E402

with open(os.path.join(FIXTURES, fx.OUT_NAME)) as _f:
    RECORDED = json.load(_f)


@pytest.fixture(scope='module')
def data(tmp_path_factory):
    """``(dataset root, VOCdevkit)`` of the default synthetic dataset, written once."""
    root = str(tmp_path_factory.mktemp('synthetic'))
    return root, fx.write_dataset(root)


@pytest.fixture(scope='module')
def weights(tmp_path_factory):
    """``{case: (params file, SHA-1)}`` rebuilt from GluonCV's models as recorded."""
    folder = tmp_path_factory.mktemp('weights')
    out = {}
    for name, case in RECORDED['cases'].items():
        path = str(folder / (name + '.params'))
        classes = fx.dataset_classes() if case['dataset'] == 'synthetic' else None
        out[name] = path, fx.make_weights(case['model'], case['seed'], path, classes)
    return out


def _ours(case, data, params, batch_size=None):
    root, devkit = data
    names, values = eval_main([
        '--network', case['network'], '--dataset', case['dataset'],
        '--dataset-root', devkit if case['dataset'] == 'voc' else root, '--params', params,
        '--data-shape', str(case['data_shape']),
        '--batch-size', str(batch_size or case['batch_size'])])
    return list(names), [float(v) for v in values]


def _assert_same(got, want):
    names, values = got
    assert names == list(want[0])
    assert len(values) == len(want[1])
    for name, a, b in zip(names, values, want[1]):
        if b is None or (isinstance(b, float) and math.isnan(b)):
            assert math.isnan(a), name  # a class without ground truth
        else:
            assert a == pytest.approx(b, abs=1e-6), name


def test_recorded_inputs_are_rebuilt_bit_for_bit(data, weights):
    assert fx.split_sha1(data[1]) == RECORDED['dataset_sha1']
    for name, case in RECORDED['cases'].items():
        assert weights[name][1] == case['weights_sha1'], name


@pytest.mark.parametrize('name', sorted(RECORDED['cases']))
def test_eval_reproduces_gluoncvs_recorded_map(data, weights, name, capsys):
    case = RECORDED['cases'][name]
    assert case['values'][-1] > 0  # some detection hit: the mAP is not the trivial 0
    got = _ours(case, data, weights[name][0])
    _assert_same(got, (case['names'], case['values']))
    out = capsys.readouterr().out
    assert 'loaded 247 of 247 tensors from {} (0 missing, 0 unexpected, 0 wrong shape)'.format(
        weights[name][0]) in out.splitlines()[0]


def test_every_image_counts_whatever_the_batch_size(data, weights):
    # eval_yolo.py's loader (last_batch='rollover') leaves out a last partial batch: 50
    # images at batch 8 score 48; ours scores all 50 at any batch size
    case = RECORDED['cases']['synthetic']
    _assert_same(_ours(case, data, weights['synthetic'][0], batch_size=8),
                 (case['names'], case['values']))


def _refs():
    refs = os.environ.get('GLUONTRAIN_REFERENCES')
    if not refs:
        pytest.skip('GLUONTRAIN_REFERENCES not set: the live comparison runs gluon-cv\'s '
                    'scripts/detection/yolo/eval_yolo.py')
    if not os.path.isfile(os.path.join(refs, fx.SCRIPT)):
        pytest.skip('GLUONTRAIN_REFERENCES has no {}'.format(fx.SCRIPT))
    return refs


@pytest.mark.live_reference
def test_live_reference_command_line_equals_ours_on_voc(data, weights):
    refs = _refs()
    case = RECORDED['cases']['voc']
    theirs = fx.reference_cli(refs, case, weights['voc'][0], data[1])
    _assert_same(_ours(case, data, weights['voc'][0]), theirs)
    _assert_same(theirs, (case['names'], case['values']))  # the fixture is current


@pytest.mark.live_reference
def test_live_reference_validate_equals_ours_on_synthetic(data, weights):
    refs = _refs()
    case = RECORDED['cases']['synthetic']
    theirs = fx.reference_validate(refs, case, weights['synthetic'][0], data[1])
    _assert_same(_ours(case, data, weights['synthetic'][0]), theirs)
    _assert_same(theirs, (case['names'], case['values']))
    # the reference's rollover loader at batch 8 scores 48 of the 50 images: another number
    dropped = fx.reference_validate(refs, case, weights['synthetic'][0], data[1], batch_size=8)
    assert dropped[1][-1] != pytest.approx(theirs[1][-1], abs=1e-6)
