"""eval/demo command lines: the load report, --pretrained as GluonCV's, one error line."""
import os
import subprocess
import sys
from argparse import Namespace

import mxnet as mx
import pytest

from gluontrain.mx._gluoncv import gluoncv
from gluontrain.mx.yolo3.infer import cli, demo_main, eval_main, zoo_params
from gluontrain.mx.yolo3.model import model_store_path

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..')


def _save(name, path, **kwargs):
    mx.random.seed(0)
    net = gluoncv.model_zoo.get_model(name, pretrained=False, pretrained_base=False, **kwargs)
    net.initialize()
    net(mx.nd.zeros((1, 3, 64, 64)))
    net.save_parameters(str(path))
    return str(path)


@pytest.fixture(scope='module')
def voc_weights(tmp_path_factory):
    return _save('yolo3_mobilenet0.25_voc',
                 tmp_path_factory.mktemp('w') / 'yolo3_mobilenet0.25_voc.params')


def _eval_argv(voc_root, *extra):
    return ['--network', 'mobilenet0.25', '--dataset', 'voc', '--dataset-root', voc_root,
            '--data-shape', '128', '--batch-size', '8'] + list(extra)


def test_eval_prints_the_report_first_and_pretrained_is_params(voc_root, voc_weights, capsys):
    a = eval_main(_eval_argv(voc_root, '--params', voc_weights))
    first = capsys.readouterr().out.splitlines()[0]
    b = eval_main(_eval_argv(voc_root, '--pretrained', voc_weights))
    assert capsys.readouterr().out.splitlines()[0] == first == (
        'loaded 247 of 247 tensors from {} (0 missing, 0 unexpected, 0 wrong shape)'.format(
            voc_weights))
    assert list(a[0]) == list(b[0]) and [float(v) for v in a[1]][-1] == float(b[1][-1])


def test_pretrained_true_takes_the_model_zoo_file_from_the_store(tmp_path, monkeypatch):
    monkeypatch.setenv('MXNET_HOME', str(tmp_path))
    monkeypatch.setenv('MXNET_GLUON_REPO', 'http://127.0.0.1:9/')  # closed: fails at once
    args = Namespace(params='True', network='mobilenet1.0', dataset='voc')
    path = model_store_path('yolo3_mobilenet1.0_voc')
    assert path.startswith(str(tmp_path / 'models' / 'yolo3_mobilenet1.0_voc-3b47835a'))
    with pytest.raises(ValueError, match='--pretrained True: the model-zoo '
                       'yolo3_mobilenet1.0_voc is not on this machine and cannot download '
                       'http://127.0.0.1:9/gluon/models/yolo3_mobilenet1.0_voc-3b47835a.zip .*'
                       'at ' + path):
        zoo_params(args)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    open(path, 'wb').close()
    assert zoo_params(args) == path
    # no zoo file for mobilenet0.25, nor for custom classes
    with pytest.raises(ValueError, match='GluonCV has no model-zoo yolo3_mobilenet0.25_voc'):
        zoo_params(Namespace(params='1', network='mobilenet0.25', dataset='voc'))
    assert zoo_params(Namespace(params=' x.params ', network='darknet53', dataset='voc')) == \
        'x.params'


def test_cli_turns_a_file_of_another_network_into_one_error_line(voc_root, tmp_path, capsys):
    other = _save('yolo3_mobilenet0.25_custom', tmp_path / 'three.params', classes=['a', 'b', 'c'])
    assert cli(eval_main, _eval_argv(voc_root, '--params', other)) == 1
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and not captured.out
    assert lines[0].startswith('error: --params {} holds the weights of another network: '
                               .format(other))
    assert '(it fits --network mobilenet0.25 with 3 classes)' in lines[0]
    image = os.path.join(voc_root, 'VOC2007', 'JPEGImages', '000001.jpg')
    assert cli(demo_main, ['--network', 'mobilenet0.25', '--params', other,
                           '--out', str(tmp_path / 'demo'), image]) == 1
    assert capsys.readouterr().err.startswith('error: --params {} holds'.format(other))
    assert not os.path.exists(tmp_path / 'demo')  # refused before anything was written


def test_demo_reports_what_loaded(voc_root, voc_weights, tmp_path, capsys):
    image = os.path.join(voc_root, 'VOC2007', 'JPEGImages', '000001.jpg')
    demo_main(['--network', 'mobilenet0.25', '--pretrained', voc_weights, '--data-shape', '128',
               '--out', str(tmp_path / 'demo'), image])
    out = capsys.readouterr().out.splitlines()
    assert out[0] == 'loaded 247 of 247 tensors from {} (0 missing, 0 unexpected, 0 wrong ' \
        'shape)'.format(voc_weights)
    assert os.path.isfile(tmp_path / 'demo' / 'detections.json')


def test_eval_script_prints_one_error_line_for_a_truncated_file(voc_root, voc_weights,
                                                                tmp_path):
    truncated = tmp_path / 'truncated.params'
    truncated.write_bytes(open(voc_weights, 'rb').read()[:4096])
    proc = subprocess.run(
        [sys.executable, os.path.join(ROOT, 'scripts', 'eval_yolov3.py')] +
        _eval_argv(voc_root, '--params', str(truncated)),
        capture_output=True, text=True, cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT),
        timeout=300, check=False)
    assert proc.returncode == 1, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith('error: ')]
    assert len(errors) == 1 and 'Traceback' not in proc.stderr
    assert errors[0].startswith('error: --params {} is not an MXNet .params file that can be '
                                'read: it is truncated or corrupt'.format(truncated))
