"""weights: GluonCV names <-> torch keys, reported loads, one-line refusals, and the round trip
torch -> .params -> gluoncv load_parameters (live, where gluoncv imports)."""
import hashlib
import importlib.util
import logging
import os

import numpy as np
import pytest
import torch

from fixtures.make_yolo3_torch_fixtures import make_input
from fixtures.reference_fill import read_npz
from gluontrain.core import mxparams
from gluontrain.core.load_report import WeightsLoadError
from gluontrain.torch.yolo3 import get_yolov3, load_params, to_gluon_key, to_torch_key
from gluontrain.torch.yolo3.weights import gluon_arrays, gluon_names, load_arrays, save_params
from yolo3_torch_support import fill_arrays

HAS_GLUONCV = all(importlib.util.find_spec(m) is not None for m in ('mxnet', 'gluoncv'))
needs_gluoncv = pytest.mark.skipif(not HAS_GLUONCV, reason='mxnet/gluoncv not installed: the '
                                   'round trip into GluonCV needs them')
SMALL = 'yolo3_mobilenet0.25_voc'
FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'fixtures')


@pytest.fixture(scope='module')
def small_file(tmp_path_factory):
    """``save_params`` of a mobilenet0.25 YOLOv3 holding the fixture weights, and the model.

    (PyTorch's default initialisation would do for the loads, but its heads give thousands of
    scores equal to the last float32 bit, whose order after NMS no two frameworks share.)
    """
    model = get_yolov3(SMALL).eval()
    load_arrays(model, fill_arrays(model), 'fixture weights')
    path = str(tmp_path_factory.mktemp('w') / 'small.params')
    save_params(model, path)
    return path, model


def test_save_params_writes_the_bytes_gluoncv_loaded_in_the_fixture(small_file):
    """The torch writer's file is the recorded weights file, byte for byte (its SHA-1)."""
    path, _ = small_file
    with open(path, 'rb') as f:
        sha1 = hashlib.sha1(f.read()).hexdigest()
    recorded = read_npz(os.path.join(FIXTURES, 'yolo3_torch', SMALL + '.npz'))
    assert sha1 == str(recorded['weights_sha1'])


def test_key_mapping_renames_batchnorm_scale_and_shift_only():
    norms = {'stages.0.1.', 'yolo_blocks.0.tip.1.'}
    assert to_gluon_key('stages.0.1.weight', norms) == 'stages.0.1.gamma'
    assert to_gluon_key('stages.0.1.bias', norms) == 'stages.0.1.beta'
    assert to_gluon_key('stages.0.1.running_var', norms) == 'stages.0.1.running_var'
    assert to_gluon_key('stages.0.1.num_batches_tracked', norms) is None
    assert to_gluon_key('stages.0.0.weight', norms) == 'stages.0.0.weight'  # a conv
    assert to_gluon_key('yolo_outputs.0.prediction.bias', norms) == \
        'yolo_outputs.0.prediction.bias'
    for key in ('stages.0.1.weight', 'yolo_blocks.0.tip.1.bias', 'stages.0.0.weight'):
        assert to_torch_key(to_gluon_key(key, norms), norms) == key


def test_save_then_load_fills_every_tensor_with_a_report(small_file, caplog):
    path, model = small_file
    other = get_yolov3(SMALL)
    with caplog.at_level(logging.INFO):
        report = load_params(other, path, logger=logging.getLogger('t'))
    n = len(mxparams.read_params(path))
    assert report.summary() == ('loaded {0} of {0} tensors from {1} (0 missing, 0 unexpected, '
                                '0 wrong shape); 47 not expected in the file '
                                '(num_batches_tracked)'.format(n, path))
    assert report.summary() in caplog.text
    for key, value in model.state_dict().items():
        if not key.endswith('num_batches_tracked'):
            torch.testing.assert_close(other.state_dict()[key], value, rtol=0, atol=0)


def test_missing_and_unexpected_tensors_are_refused_in_one_line_or_reported(small_file,
                                                                            tmp_path):
    path, model = small_file
    arrays = mxparams.read_params(path)
    del arrays['yolo_blocks.1.tip.1.gamma']
    arrays['extra.weight'] = np.zeros(3, np.float32)
    bad = str(tmp_path / 'bad.params')
    mxparams.write_params(bad, arrays)
    with pytest.raises(WeightsLoadError) as err:
        load_params(get_yolov3(SMALL), bad)
    message = str(err.value)
    assert '\n' not in message and bad in message
    assert '1 missing, 1 unexpected' in message and 'yolo_blocks.1.tip.1.weight' in message
    report = load_params(get_yolov3(SMALL), bad, allow_missing=True, ignore_extra=True)
    assert report.missing == ['yolo_blocks.1.tip.1.weight']
    assert report.unexpected == ['extra.weight']
    assert 'yolo_blocks.1.tip.1.weight' in report.format()


def test_another_network_is_named(small_file):
    path, _ = small_file
    with pytest.raises(WeightsLoadError) as err:
        load_params(get_yolov3('yolo3_mobilenet1.0_voc'), path, fix='pass mine')
    message = str(err.value)
    assert '\n' not in message and message.endswith('pass mine')
    assert 'looks like a GluonCV YOLOv3 mobilenet0.25 with 20 classes' in message
    assert 'this is a YOLOv3 mobilenet1.0 with 20 classes' in message
    assert 'it fits --network mobilenet0.25 --dataset voc' in message


def test_custom_classes_file_into_voc_model_names_the_class_count(tmp_path):
    model = get_yolov3('yolo3_mobilenet0.25_custom', classes=['a', 'b'])
    path = str(tmp_path / 'two.params')
    save_params(model, path)
    with pytest.raises(WeightsLoadError, match='with 2 classes .as yolo3_mobilenet0.25_custom'):
        load_params(get_yolov3(SMALL), path)


@pytest.mark.parametrize('content,message', [
    (b'', 'is empty'),
    (b'PK\x03\x04rest', 'is a PyTorch (torch.save) file'),
    (b'hello world, not weights', 'is not an MXNet .params file'),
])
def test_foreign_files_are_one_line(tmp_path, content, message):
    path = tmp_path / 'x.params'
    path.write_bytes(content)
    with pytest.raises(WeightsLoadError) as err:
        load_params(get_yolov3(SMALL), str(path), what='--params', fix='do this')
    assert message in str(err.value) and str(err.value).startswith('--params ' + str(path))
    assert str(err.value).endswith('do this') and '\n' not in str(err.value)


def test_truncated_file_is_one_line(small_file, tmp_path):
    path, _ = small_file
    with open(path, 'rb') as f:
        data = f.read()
    cut = tmp_path / 'cut.params'
    cut.write_bytes(data[:len(data) // 2])
    with pytest.raises(WeightsLoadError, match='is truncated'):
        load_params(get_yolov3(SMALL), str(cut))


def test_unnamed_list_is_refused(tmp_path):
    path = str(tmp_path / 'list.params')
    mxparams.write_params(path, [np.zeros(2, np.float32)])
    with pytest.raises(WeightsLoadError, match='unnamed list of 1 arrays'):
        load_params(get_yolov3(SMALL), path)


def test_gluon_arrays_are_the_state_without_num_batches_tracked(small_file):
    _, model = small_file
    arrays = gluon_arrays(model)
    names = gluon_names(model)
    assert len(arrays) == sum(v is not None for v in names.values())
    assert arrays['stages.0.1.gamma'] is not None and 'stages.0.1.weight' not in arrays


# ------------------------------------------------------------------ into GluonCV itself
@pytest.mark.slow
@needs_gluoncv
def test_live_round_trip_torch_params_load_into_gluoncv_with_the_same_outputs(small_file):
    from fixtures.make_yolo3_torch_fixtures import run_gluoncv  # pylint: disable=import-outside-toplevel
    from gluontrain.mx._gluoncv import gluoncv  # pylint: disable=import-outside-toplevel
    path, model = small_file
    net = gluoncv.model_zoo.get_model(SMALL, pretrained=False, pretrained_base=False)
    net.load_parameters(path)  # gluoncv's strict loader: every name, every shape
    x = make_input()
    ref = run_gluoncv(net, x)
    with torch.no_grad():
        preds = model.predictions(torch.from_numpy(x))
        ids, scores, boxes = model(torch.from_numpy(x))
    for got, want in zip(preds, ref['preds']):
        assert np.abs(got.numpy() - want).max() <= 1e-4
    np.testing.assert_array_equal(ids.numpy(), ref['ids'])
    assert (ref['ids'] >= 0).sum() > 10
    np.testing.assert_allclose(scores.numpy(), ref['scores'], rtol=0, atol=1e-5)
    np.testing.assert_allclose(boxes.numpy(), ref['bboxes'], rtol=0, atol=1e-3)
