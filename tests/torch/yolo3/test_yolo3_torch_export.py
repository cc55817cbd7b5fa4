"""gluontrain.torch.yolo3.export: the decoded outputs before NMS equal the model's, NMS on them
gives the model's detections, and the ONNX file (where onnx / onnxruntime are installed)
checks and runs to the same numbers."""
import importlib.util

import numpy as np
import pytest
import torch

from gluontrain.torch.yolo3 import get_yolov3
from gluontrain.torch.yolo3.export import DecodedYOLOV3, export_main, export_onnx, nms_rows
from gluontrain.torch.yolo3.recipe import gluon_init
from gluontrain.torch.yolo3.weights import save_params
from gluontrain.yolo3.infer import cli

HAS_ONNX = importlib.util.find_spec('onnx') is not None
HAS_ORT = importlib.util.find_spec('onnxruntime') is not None


@pytest.fixture(scope='module')
def net():
    torch.manual_seed(0)
    model = gluon_init(get_yolov3('yolo3_mobilenet0.25_voc')).eval()
    with torch.no_grad():  # untrained, every score is 0.25: spread them per anchor and class
        for out in model.yolo_outputs:
            out.prediction.bias.normal_(0, 2)
    return model


def _input(shape=64, batch=2):
    return torch.from_numpy(np.random.RandomState(0).normal(size=(batch, 3, shape, shape))
                            .astype(np.float32))


def test_decoded_outputs_are_the_model_s_rows_and_nms_gives_its_detections(net):
    x = _input()
    with torch.no_grad():
        boxes, scores = DecodedYOLOV3(net)(x)
        rows = net.detections(x)
        ids, sc, bb = net(x)
        again = net.nms(nms_rows(boxes, scores))
    # 64 px: 2x2, 4x4, 8x8 cells x 3 anchors
    assert boxes.shape == (2, 3 * (4 + 16 + 64), 4) and scores.shape == (2, 252, 20)
    # the same rows as the model's (class-major per head), as sets of (id, score, box)
    key = lambda r: np.lexsort(r.T[::-1])  # noqa: E731
    ours = nms_rows(boxes, scores).numpy()
    for b in range(2):
        np.testing.assert_array_equal(ours[b][key(ours[b])], rows.numpy()[b][key(rows.numpy()[b])])
    assert len(np.unique(scores.numpy())) > 50 and int((sc >= 0).sum()) > 10
    for got, want in zip(again, (ids, sc, bb)):
        np.testing.assert_allclose(got.numpy(), want.numpy(), atol=1e-5)


@pytest.mark.skipif(HAS_ONNX, reason='onnx is installed')
def test_export_without_onnx_is_one_line(net, tmp_path):
    with pytest.raises(ValueError, match='^torch.onnx.export needs the onnx package: pip '
                       'install onnx'):
        export_onnx(net, str(tmp_path / 'm.onnx'), 64)
    assert not list(tmp_path.iterdir())


@pytest.mark.skipif(not HAS_ONNX, reason='onnx not installed: torch.onnx.export needs it')
def test_onnx_file_checks_and_runs_to_the_same_numbers(net, tmp_path):
    import onnx  # pylint: disable=import-outside-toplevel
    path = export_onnx(net, str(tmp_path / 'yolo3.onnx'), 64, batch_size=2)
    model = onnx.load(path)
    onnx.checker.check_model(model, full_check=True)
    assert [i.name for i in model.graph.input] == ['data']
    assert [o.name for o in model.graph.output] == ['boxes', 'scores']
    assert not net.training and [f.name for f in tmp_path.iterdir()] == ['yolo3.onnx']
    if not HAS_ORT:
        pytest.skip('onnxruntime not installed: the graph was checked, not run')
    import onnxruntime  # pylint: disable=import-outside-toplevel
    session = onnxruntime.InferenceSession(path, providers=['CPUExecutionProvider'])
    x = _input(64, 2)
    boxes, scores = session.run(None, {'data': x.numpy()})
    with torch.no_grad():
        want_boxes, want_scores = DecodedYOLOV3(net)(x)
    np.testing.assert_allclose(boxes, want_boxes.numpy(), atol=1e-3)
    np.testing.assert_allclose(scores, want_scores.numpy(), atol=1e-5)


def test_export_script_reads_params_and_writes_the_graph_or_one_error_line(net, tmp_path,
                                                                            capsys):
    params, out = str(tmp_path / 'w.params'), tmp_path / 'm.onnx'
    save_params(net, params)
    argv = ['--network', 'mobilenet0.25', '--dataset', 'voc', '--params', params,
            '--data-shape', '64', '--out', str(out)]
    status = cli(export_main, argv)
    printed, err = capsys.readouterr()
    # every tensor but BatchNorm's num_batches_tracked, which Gluon does not have
    tensors = len([k for k in net.state_dict() if not k.endswith('num_batches_tracked')])
    assert printed.startswith('loaded {0} of {0} tensors from {1} (0 missing, 0 unexpected, '
                              '0 wrong shape)'.format(tensors, params))
    if HAS_ONNX:
        assert status == 0 and out.is_file() and err == ''
    else:
        assert status == 1 and not out.exists()
        assert err == ('error: torch.onnx.export needs the onnx package: pip install onnx '
                       "(the 'onnx' extra of gluontrain)\n")
    # a missing weights file: one line naming it
    assert cli(export_main, argv[:5] + [str(tmp_path / 'nope.params')]) == 1
    err = capsys.readouterr().err
    assert err.count('\n') == 1 and 'nope.params' in err
