"""The PyTorch YOLOv3 equals GluonCV's: layout, head outputs, decoded rows and NMS output.

Each network gets the weights of ``make_yolo3_torch_fixtures.weights_for`` (numpy, seeded by
name) through a ``.params`` file and the torch loader, and runs on the fixture's 416 x 416
input. ``[recorded]`` compares with GluonCV's outputs recorded in
``tests/fixtures/yolo3_torch/`` (subsampled head maps and rows, full NMS output); ``[live]``
runs gluoncv now (where mxnet and gluoncv import) and compares everything.
"""
import functools
import hashlib
import importlib.util
import json
import os

import numpy as np
import pytest
import torch

from fixtures.make_yolo3_torch_fixtures import (NETWORKS, ROW_STEP, STEP, gluoncv_outputs,
                                                make_input, sample, sample_rows)
from fixtures.reference_fill import read_npz
from gluontrain.core import mxparams
from gluontrain.torch.yolo3 import get_yolov3, load_params
from gluontrain.torch.yolo3.model import BN_EPS, BN_MOMENTUM
from gluontrain.torch.yolo3.weights import gluon_names
from yolo3_torch_support import fill_arrays

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'fixtures')
HAS_GLUONCV = all(importlib.util.find_spec(m) is not None for m in ('mxnet', 'gluoncv'))
#: the issue's bounds: raw head outputs, boxes after NMS (pixels)
HEAD_TOL, BOX_TOL = 1e-4, 1e-3
# darknet53 (62 M parameters) and mobilenet1.0 take over 10 s at 416 on one core
PARAMS = [n if n.endswith('0.25_voc') else pytest.param(n, marks=pytest.mark.slow)
          for n in NETWORKS]
SOURCES = ['recorded', pytest.param('live', marks=pytest.mark.skipif(
    not HAS_GLUONCV, reason='mxnet/gluoncv not installed: the live comparison runs GluonCV '
    'itself; its [recorded] twin ran'))]


@functools.lru_cache(maxsize=None)
def torch_run(name, folder):
    """The torch network loaded from the fixture weights' ``.params`` and its outputs."""
    model = get_yolov3(name).eval()
    path = os.path.join(folder, name + '.params')
    mxparams.write_params(path, fill_arrays(model))
    with open(path, 'rb') as f:
        sha1 = hashlib.sha1(f.read()).hexdigest()
    report = load_params(model, path)
    os.remove(path)
    x = torch.from_numpy(make_input())
    with torch.no_grad():
        preds = [p.numpy() for p in model.predictions(x)]
        rows = model.detections(x)
        ids, scores, bboxes = (t.numpy() for t in model.nms(rows))
    return {'report': report, 'sha1': sha1, 'preds': preds, 'rows': rows.numpy(), 'ids': ids,
            'scores': scores, 'bboxes': bboxes}


@functools.lru_cache(maxsize=None)
def reference(name, source, folder):
    """GluonCV's outputs, as the fixture records them (sampled) from ``source``."""
    if source == 'recorded':
        rec = read_npz(os.path.join(FIXTURES, 'yolo3_torch', name + '.npz'))
        return {'sha1': str(rec['weights_sha1']), 'ids': rec['ids'], 'scores': rec['scores'],
                'bboxes': rec['bboxes'], 'detections': rec['detections'],
                'preds': [rec['pred%d' % i] for i in range(3)],
                'pred_shapes': [tuple(rec['pred%d_shape' % i]) for i in range(3)],
                'num_detections': int(rec['num_detections'])}
    out = gluoncv_outputs(name, folder)
    return {'sha1': out['sha1'], 'ids': out['ids'], 'scores': out['scores'],
            'bboxes': out['bboxes'], 'full_preds': out['preds'], 'rows': out['rows']}


@pytest.fixture(scope='module')
def folder(tmp_path_factory):
    return str(tmp_path_factory.mktemp('yolo3_torch'))


@pytest.mark.parametrize('source', SOURCES)
@pytest.mark.parametrize('name', PARAMS)
def test_gluoncv_weights_load_with_nothing_missing_or_unexpected(name, source, folder):
    ours = torch_run(name, folder)
    ref = reference(name, source, folder)
    report = ours['report']
    assert not (report.missing or report.unexpected or report.mismatched)
    assert report.total == len(report.loaded) == len(fill_arrays(get_yolov3(name)))
    # the very bytes gluoncv loaded: the torch side fills the same weights
    assert ours['sha1'] == ref['sha1']


@pytest.mark.parametrize('source', SOURCES)
@pytest.mark.parametrize('name', PARAMS)
def test_head_outputs_and_decoded_rows_equal_gluoncv(name, source, folder):
    ours = torch_run(name, folder)
    ref = reference(name, source, folder)
    if source == 'recorded':
        assert [p.shape for p in ours['preds']] == ref['pred_shapes']
        got, want = [sample(p, STEP) for p in ours['preds']], ref['preds']
        assert ours['rows'].shape[1] == ref['num_detections']
        rows, ref_rows = sample_rows(ours['rows'], ROW_STEP)[:, 1:], ref['detections']
    else:
        got, want = ours['preds'], ref['full_preds']
        np.testing.assert_array_equal(ours['rows'][..., 0], ref['rows'][..., 0])  # class ids
        rows, ref_rows = ours['rows'][..., 1:], ref['rows'][..., 1:]
    for i, (g, w) in enumerate(zip(got, want)):
        assert g.shape == w.shape
        assert np.abs(g - w).max() <= HEAD_TOL, 'head {}'.format(i)
    np.testing.assert_allclose(rows[..., 0], ref_rows[..., 0], rtol=0, atol=HEAD_TOL)  # scores
    np.testing.assert_allclose(rows[..., 1:], ref_rows[..., 1:], rtol=0, atol=BOX_TOL)


@pytest.mark.parametrize('source', SOURCES)
@pytest.mark.parametrize('name', PARAMS)
def test_nms_output_equals_gluoncv_row_for_row(name, source, folder):
    ours = torch_run(name, folder)
    ref = reference(name, source, folder)
    assert ours['ids'].shape == ref['ids'].shape == (1, 100, 1)
    np.testing.assert_array_equal(ours['ids'], ref['ids'])  # same classes, same order
    kept = ref['ids'][0, :, 0] >= 0
    assert kept.sum() > 10  # a comparison of -1 padding alone would prove nothing
    np.testing.assert_allclose(ours['scores'], ref['scores'], rtol=0, atol=1e-5)
    np.testing.assert_allclose(ours['bboxes'], ref['bboxes'], rtol=0, atol=BOX_TOL)


@pytest.mark.parametrize('layout', ['yolo3_darknet53_voc', 'yolo3_mobilenet1_0_voc',
                                    'yolo3_darknet53_coco', 'yolo3_mobilenet1_0_coco'])
def test_gluon_names_are_gluoncv_save_parameters_layout_key_for_key(layout):
    with open(os.path.join(FIXTURES, 'references', layout + '.json')) as f:
        recorded = json.load(f)
    model = get_yolov3(layout.replace('1_0', '1.0'))
    names = gluon_names(model)
    shapes = {names[k]: tuple(v.shape) for k, v in model.state_dict().items() if names[k]}
    assert list(shapes) == [k for k, _, _ in recorded['keys']]  # same names, same order
    assert shapes == {k: tuple(s) for k, s, _ in recorded['keys']}
    skipped = [k for k, v in names.items() if v is None]
    assert skipped and all(k.endswith('.num_batches_tracked') for k in skipped)


@pytest.mark.parametrize('name', NETWORKS)
def test_batchnorm_is_gluons_epsilon_and_momentum(name):
    norms = [m for m in get_yolov3(name).modules() if isinstance(m, torch.nn.BatchNorm2d)]
    assert norms and all(m.eps == BN_EPS == 1e-5 for m in norms)
    assert all(m.momentum == BN_MOMENTUM == 0.1 for m in norms)  # Gluon's 0.9


def test_batchnorm_running_update_is_gluons_momentum_0_9():
    """Gluon: running = 0.9 * running + 0.1 * batch (biased variance aside)."""
    model = get_yolov3('yolo3_mobilenet0.25_voc').train()
    bn = model.stages[0][1]
    x = torch.randn(2, 3, 64, 64)
    with torch.no_grad():
        feats = model.stages[0][0](x)
        model.stages[0](x)
    np.testing.assert_allclose(bn.running_mean.numpy(),
                               0.1 * feats.mean(dim=(0, 2, 3)).numpy(), atol=1e-6)


def test_set_nms_off_returns_every_row_and_post_nms_keeps_more():
    model = get_yolov3('yolo3_mobilenet0.25_voc').eval()
    x = torch.from_numpy(make_input()[:, :, :128, :128])
    with torch.no_grad():
        rows = model.detections(x)
        model.set_nms(nms_thresh=0)
        ids, scores, boxes = model(x)
        model.set_nms(0.45, 400, -1)
        kept = model(x)[0]
    assert ids.shape[1] == rows.shape[1] == 20 * 3 * (4 * 4 + 8 * 8 + 16 * 16)
    torch.testing.assert_close(torch.cat([ids, scores, boxes], -1), rows)
    assert kept.shape[1] == rows.shape[1]  # post_nms -1: nothing cut, -1 rows after NMS
