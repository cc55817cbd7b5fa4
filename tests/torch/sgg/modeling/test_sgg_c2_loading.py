"""Detectron Caffe2 ImageNet bodies (.pkl) as MODEL.WEIGHT: maskrcnn-benchmark's names, safely.

The names are checked against the reference's own ``c2_model_loading`` / ``align_and_update_
state_dicts`` run on the full blob lists (``tests/fixtures/c2/``, made by
``tests/fixtures/make_c2_fixtures.py``) and against SGB's detector keys recorded in
``tests/fixtures/references/sgb_detector_*.json``; the loader on small files written here as
Python 2 wrote Detectron's pickles.
"""
import importlib.util
import json
import os
import pickle
import struct
import zipfile

import numpy as np
import pytest
import torch

from gluontrain.core.load_report import WeightsLoadError, compare
from gluontrain.torch.sgg.config import get_cfg
from gluontrain.torch.sgg.modeling.c2_loading import (C2_CONV_BODIES, c2_body_state_dict,
                                                      c2_to_maskrcnn_names, group_c2_names,
                                                      is_c2_file, load_c2_file)
from gluontrain.torch.sgg.modeling.detector import build_body
from gluontrain.torch.weights import load_state_dict_reported

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..', 'fixtures')
BODIES = ('R-50-FPN', 'R-101-FPN', 'X-101-32x8d-FPN')
# what no Caffe2 file carries (the reference keeps FrozenBatchNorm2d's initial 0 / 1)
STATS = ('num_batches_tracked', 'running_mean', 'running_var')


def _fixture(body):
    with open(os.path.join(FIXTURES, 'c2', 'c2_names_{}.json'.format(body))) as f:
        return json.load(f)


def _sgb_detector(body):
    path = os.path.join(FIXTURES, 'references', 'sgb_detector_{}.json'.format(body))
    if not os.path.isfile(path):
        pytest.skip('{} not recorded (tests/fixtures/references)'.format(os.path.basename(path)))
    with open(path) as f:
        return json.load(f)


# ------------------------------------------------------------------ writing Caffe2-like files
def _binstring(raw):
    # Python 2's str: SHORT_BINSTRING / BINSTRING (read back through encoding='latin1')
    if len(raw) < 256:
        return b'U' + bytes([len(raw)]) + raw
    return b'T' + struct.pack('<i', len(raw)) + raw


def _int(n):
    return b'K' + bytes([n]) if n < 256 else b'J' + struct.pack('<i', n)


def py2_pickle(arrays):
    """``{name: float32 array}`` as Python 2's ``pickle.dump(..., 2)`` of NumPy 1 arrays writes
    it: ``numpy.core.multiarray._reconstruct``, dtype state version 3, data as a str."""
    out = [b'\x80\x02}(']
    dtype = (b'cnumpy\ndtype\n' + _binstring(b'f4') + b'K\x00K\x01\x87R(K\x03' +
             _binstring(b'<') + b'NNN' + b'J\xff\xff\xff\xff' * 2 + b'K\x00tb')
    for name, arr in arrays.items():
        arr = np.ascontiguousarray(arr, dtype='<f4')
        shape = b'(' + b''.join(_int(n) for n in arr.shape) + b't'
        out.append(_binstring(name.encode()) +
                   b'cnumpy.core.multiarray\n_reconstruct\ncnumpy\nndarray\nK\x00\x85' +
                   _binstring(b'b') + b'\x87R(K\x01' + shape + dtype + b'\x89' +
                   _binstring(arr.tobytes()) + b'tb')
    out.append(b'u.')
    return b''.join(out)


def tiny_blobs(names, seed=0, groups=1):
    """Small arrays under Caffe2 names: conv weights 4-D (``branch2b`` with ``groups``),
    everything else 1-D, every value distinct."""
    rng = np.random.RandomState(seed)
    out = {}
    for name in names:
        if name.endswith('branch2b_w'):
            shape = (4, 4 // groups, 3, 3)
        elif name.endswith('_w') and name.startswith(('res', 'conv1')):
            shape = (4, 3, 1, 1)
        else:
            shape = (4,)
        out[name] = rng.standard_normal(shape).astype(np.float32)
    return out


def write_pkl(path, blobs, style='py2', wrap=False):
    """``style`` 'py2': Python 2's bytes; 'py3': Python 3's protocol-2 pickle (bytes as
    ``_codecs.encode``); ``wrap``: ``{'blobs': ...}`` as Detectron's detection models."""
    obj = {'blobs': blobs, 'cfg': 'MODEL: ...'} if wrap else blobs
    if style == 'py2':
        raw = py2_pickle(blobs)
        if wrap:  # {'blobs': <dict>, 'cfg': str}
            raw = (b'\x80\x02}(' + _binstring(b'blobs') + raw[2:-1] + _binstring(b'cfg') +
                   _binstring(b'MODEL: ...') + b'u.')
    else:
        raw = pickle.dumps(obj, protocol=2)
    with open(path, 'wb') as f:
        f.write(raw)
    return str(path)


# ------------------------------------------------------------------ names
@pytest.mark.parametrize('body', BODIES)
def test_names_equal_the_reference(body):
    fx = _fixture(body)
    mapping, dropped = c2_to_maskrcnn_names(fx['c2_names'], fx['conv_body'])
    assert dict(mapping) == fx['mapping']
    assert sorted(dropped) == sorted(fx['dropped'])
    # the reference skips *_momentum; the classifier and conv1_b fall out at suffix matching
    for name, reason in dropped.items():
        assert ('_momentum' in name) == ('momentum' in reason)
        assert fx['dropped'][name] == ('skipped' if '_momentum' in name else 'unmatched')
        if '_momentum' not in name:
            assert fx['renamed'][name] in ('conv1.bias', 'fc1000.weight', 'fc1000.bias')
    assert sorted(set(fx['body_shapes']) - set(mapping.values())) == \
        sorted(fx['body_not_filled'])
    assert all(k.endswith(('.running_mean', '.running_var')) for k in fx['body_not_filled'])


@pytest.mark.parametrize('body', BODIES)
def test_names_cover_sgb_detector_body(body):
    """Every body tensor of SGB's detector but the batch-norm statistics comes from a blob
    (helper-recorded key list), with the shapes the reference's body has; and no other key of
    the whole detector ends with a renamed blob (so converting the body alone is what the
    reference's whole-model suffix matching does)."""
    fx, sgb = _fixture(body), _sgb_detector(body)
    prefix = 'backbone.body.'
    shapes = {k[len(prefix):]: v for k, v, _ in sgb['keys'] if k.startswith(prefix)}
    mapping, _ = c2_to_maskrcnn_names(fx['c2_names'], fx['conv_body'])
    assert set(mapping.values()) == {k for k in shapes
                                     if not k.endswith(('running_mean', 'running_var'))}
    assert fx['body_shapes'] == shapes
    renamed = list(fx['renamed'].values())
    others = [k for k, _, _ in sgb['keys'] if not k.startswith(prefix)]
    assert others and not [(k, r) for k in others for r in renamed if k.endswith(r)]


def test_unknown_blobs_and_conv_bodies():
    mapping, dropped = c2_to_maskrcnn_names(
        ['conv1_w', 'fpn_inner_res5_2_sum_w', 'res2_0_branch2a_gn_s', 'res6_0_branch2a_w',
         'res3_1_branch2c_bn_b_momentum'])
    assert dict(mapping) == {'conv1_w': 'stem.conv1.weight'}
    assert list(dropped) == ['fpn_inner_res5_2_sum_w', 'res2_0_branch2a_gn_s',
                             'res6_0_branch2a_w', 'res3_1_branch2c_bn_b_momentum']
    assert 'not a ResNet body blob' in dropped['res6_0_branch2a_w']
    assert set(C2_CONV_BODIES) >= {'R-50-FPN', 'R-101-FPN', 'R-152-FPN'}
    with pytest.raises(ValueError, match="'VGG-16' has no Caffe2"):
        c2_to_maskrcnn_names(['conv1_w'], 'VGG-16')
    assert group_c2_names(['fc1000_w', 'fc1000_b', 'conv1_w', 'x']) == [
        'conv1_w', 'fc1000_{b, w}', 'x']


# ------------------------------------------------------------------ reading files
def test_py2_bytes_are_a_valid_pickle_of_the_arrays(tmp_path):
    blobs = tiny_blobs(['conv1_w', 'res_conv1_bn_s'])
    path = write_pkl(tmp_path / 'R-50.pkl', blobs)
    with open(path, 'rb') as f:  # what maskrcnn-benchmark's _load_c2_pickled_weights does
        plain = pickle.load(f, encoding='latin1')
    assert sorted(plain) == sorted(blobs)
    for name, arr in blobs.items():
        assert plain[name].dtype == np.float32 and np.array_equal(plain[name], arr)


@pytest.mark.parametrize('style', ['py2', 'py3'])
@pytest.mark.parametrize('wrap', [False, True], ids=['bare', 'blobs'])
def test_fake_r50_loads_every_body_key(tmp_path, style, wrap):
    fx = _fixture('R-50-FPN')
    blobs = tiny_blobs(fx['c2_names'])
    path = write_pkl(tmp_path / 'R-50.pkl', blobs, style, wrap)
    raw = load_c2_file(path)
    assert list(raw) == sorted(fx['c2_names'])
    state, notes = c2_body_state_dict(path, 'R-50-FPN')
    assert sorted(state) == sorted(fx['mapping'].values())
    for name, key in fx['mapping'].items():
        assert state[key].dtype == torch.float32
        assert np.array_equal(state[key].numpy(), blobs[name])
    assert notes.groups == 1 and notes.blobs == 324 and len(notes.mapping) == 159
    line = notes.summary()
    assert line == ('converted 159 of 324 Caffe2 blobs of {} to R-50-FPN body keys (unused, as '
                    'in maskrcnn-benchmark: 162 *_momentum, conv1_b, fc1000_{{b, w}})'.format(path))
    text = notes.format().splitlines()
    assert text[1:4] == ['Caffe2 blobs not used: the stem convolution\'s bias (maskrcnn-'
                         'benchmark renames it conv1.bias, which no model key ends with: its '
                         'stem convolution has no bias):', '  conv1_b',
                         '162 *_momentum blobs not used: optimizer state (maskrcnn-benchmark '
                         'skips *_momentum blobs)']
    assert '  fc1000_{b, w}' in text and 'running_mean / running_var' in text[-1]


def test_float64_and_bytes_names_become_float32_str(tmp_path):
    path = tmp_path / 'x.pkl'
    with open(path, 'wb') as f:
        pickle.dump({b'conv1_w': np.arange(6.).reshape(1, 2, 3, 1)}, f, protocol=2)
    out = load_c2_file(str(path))
    assert list(out) == ['conv1_w'] and out['conv1_w'].dtype == torch.float32
    assert out['conv1_w'].flatten().tolist() == [0., 1., 2., 3., 4., 5.]


def test_groups_read_off_the_shapes(tmp_path):
    names = _fixture('X-101-32x8d-FPN')['c2_names']
    path = write_pkl(tmp_path / 'X-101.pkl', tiny_blobs(names, groups=4))
    state, notes = c2_body_state_dict(path, 'R-101-FPN')
    assert len(state) == 312 and notes.groups == 4
    assert '(4 groups: a ResNeXt body)' in notes.summary()
    assert 'pred_{b, w}' in notes.format()


def _hostile(marker):
    class Evil:  # pylint: disable=too-few-public-methods
        def __reduce__(self):
            return os.system, ('touch ' + str(marker),)
    return pickle.dumps({'conv1_w': Evil()}, protocol=2)


@pytest.mark.parametrize('case', ['hostile', 'truncated', 'text', 'empty', 'torch-zip',
                                  'not-a-dict', 'not-arrays', 'no-body-blob'])
def test_bad_files_give_one_line(tmp_path, case):
    path = tmp_path / 'bad.pkl'
    marker = tmp_path / 'executed'
    good = py2_pickle(tiny_blobs(['conv1_w', 'res_conv1_bn_s']))
    raw = {'hostile': _hostile(marker), 'truncated': good[:len(good) // 2],
           'text': b'MODEL:\n  WEIGHT: x\n', 'empty': b'',
           'not-a-dict': pickle.dumps([np.zeros(2)], protocol=2),
           'not-arrays': pickle.dumps({'conv1_w': 'abc'}, protocol=2),
           'no-body-blob': pickle.dumps({'fc1000_w': np.zeros(2, np.float32)}, protocol=2),
           }.get(case)
    if case == 'torch-zip':
        torch.save({'conv1.weight': torch.zeros(1)}, str(path))
        assert zipfile.is_zipfile(str(path))
    else:
        path.write_bytes(raw)
    with pytest.raises(WeightsLoadError) as err:
        c2_body_state_dict(str(path), 'R-50-FPN')
    msg = str(err.value)
    assert '\n' not in msg and str(path) in msg and 'MODEL.WEIGHT' in msg
    expect = {'hostile': 'its pickle calls posix.system', 'truncated': 'truncated',
              'text': 'not a readable Caffe2 pickle', 'empty': 'empty (0 bytes)',
              'torch-zip': 'PyTorch zip archive', 'not-a-dict': 'holds a list',
              'not-arrays': "holds 'conv1_w' = str", 'no-body-blob': 'no Caffe2 ResNet body'}
    assert expect[case] in msg.replace('nt.system', 'posix.system')
    assert not marker.exists()


def test_missing_file_and_suffix(tmp_path):
    with pytest.raises(FileNotFoundError, match='MODEL.WEIGHT .*nope.pkl does not exist'):
        load_c2_file(str(tmp_path / 'nope.pkl'))
    with pytest.raises(WeightsLoadError, match='is a directory'):
        load_c2_file(str(tmp_path))
    assert is_c2_file('R-50.pkl') and not is_c2_file('model_final.pth')


# ------------------------------------------------------------------ into the detector's body
def _body_cfg(fx, width_mult=1.0):
    cfg = get_cfg()
    cfg.MODEL.BACKBONE.CONV_BODY = fx['conv_body']
    cfg.MODEL.BACKBONE.WIDTH_MULT = width_mult
    for key, value in fx['resnets'].items():
        setattr(cfg.MODEL.RESNETS, key, value)
    return cfg


@pytest.mark.parametrize('body', BODIES)
def test_detector_body_takes_every_converted_tensor(body):
    """The reference body's shapes under the converted keys fill the detector's body
    (built on the meta device) completely; only the statistics C2 lacks stay unfilled."""
    fx = _fixture(body)
    with torch.device('meta'):
        own = build_body(_body_cfg(fx)).state_dict()
    converted = {k: v for k, v in fx['body_shapes'].items() if k in fx['mapping'].values()}
    report = compare({k: tuple(v.shape) for k, v in own.items()}, converted, body + '.pkl',
                     ignore=STATS)
    assert report.complete and not report.unexpected
    assert sorted(report.loaded) == sorted(fx['mapping'].values())
    assert sorted(report.ignored) == sorted(fx['body_not_filled'])


def test_fake_file_into_a_narrow_body(tmp_path):
    """A Python-2-style file with the shapes of a WIDTH_MULT 1/16 R-50 body goes through
    c2_body_state_dict and the weights report into the body, value for value."""
    fx = _fixture('R-50-FPN')
    body = build_body(_body_cfg(fx, width_mult=0.0625))
    own = body.state_dict()
    rng = np.random.RandomState(1)
    blobs = {name: rng.standard_normal(tuple(own[key].shape)).astype(np.float32)
             for name, key in fx['mapping'].items()}
    blobs.update({n: np.zeros(3, np.float32) for n in fx['dropped']})
    path = write_pkl(tmp_path / 'R-50.pkl', blobs)
    state, notes = c2_body_state_dict(path, 'R-50-FPN')
    report = load_state_dict_reported(body, state, path, 'MODEL.WEIGHT', 'fix', ignore=STATS)
    assert (len(report.loaded), report.total, len(report.ignored)) == (159, 159, 106)
    assert report.summary() == ('loaded 159 of 159 tensors from {} (0 missing, 0 unexpected, 0 '
                                'wrong shape); 106 not expected in the file (running_mean, '
                                'running_var)'.format(path))
    after = body.state_dict()
    for name, key in fx['mapping'].items():
        assert np.array_equal(after[key].numpy(), blobs[name])
    for key in fx['body_not_filled']:  # FrozenBatchNorm2d's initial statistics, as the reference
        assert after[key].eq(0.0 if key.endswith('mean') else 1.0).all()
    assert notes.groups == 1


# ------------------------------------------------------------------ against the live reference
def _reference_modules():
    refs = os.environ.get('GLUONTRAIN_REFERENCES')
    if not refs:
        pytest.skip('GLUONTRAIN_REFERENCES not set: the live maskrcnn-benchmark comparison '
                    'needs its source')
    spec = importlib.util.spec_from_file_location(
        'make_c2_fixtures', os.path.join(FIXTURES, 'make_c2_fixtures.py'))
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    roots = [os.path.join(refs, r) for r in gen.REFERENCES
             if os.path.isdir(os.path.join(refs, r, 'maskrcnn_benchmark'))]
    if not roots:
        pytest.skip('no maskrcnn-benchmark work tree under GLUONTRAIN_REFERENCES')
    return gen, roots


@pytest.mark.live_reference
def test_values_equal_the_live_reference_loader(tmp_path):
    """maskrcnn-benchmark's own ``load_c2_format`` + ``align_and_update_state_dicts`` on a
    Python-2-style R-50 file put the same tensors under the same body keys as ours."""
    gen, roots = _reference_modules()
    fx = _fixture('R-50-FPN')
    path = write_pkl(tmp_path / 'R-50.pkl', tiny_blobs(fx['c2_names'], seed=3))
    ours, _ = c2_body_state_dict(path, 'R-50-FPN')
    for root in roots:
        with gen.reference_modules(root) as ref:
            cfg = ref.cfg.clone()
            cfg.MODEL.BACKBONE.CONV_BODY = 'R-50-FPN'
            loaded = ref.c2.load_c2_format(cfg, path)['model']
            model = {'backbone.body.' + k: torch.empty(v, device='meta')
                     for k, v in fx['body_shapes'].items()}
            align = ref.serialization.align_and_update_state_dicts
            align(model, loaded, *([{}] if 'Scene-Graph' in root else []))
        filled = {k[len('backbone.body.'):]: v for k, v in model.items() if not v.is_meta}
        assert sorted(filled) == sorted(ours)
        for key, value in ours.items():
            assert torch.equal(filled[key], value), key
