"""gluontrain.torch.yolo3.infer: eval_yolov3.py / demo_yolov3.py --backend torch read any YOLOv3
.params, print what the MXNet scripts print, the same mAP (live, where mxnet is installed), and
refuse in one line what needs MXNet."""
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest
import torch

from gluontrain.data import synthetic
from gluontrain.data.classes import VOC_CLASSES
from gluontrain.torch.yolo3 import get_yolov3
from gluontrain.torch.yolo3.weights import save_params
from gluontrain.torch.yolo3.infer import demo_main, detect_file, eval_main, load_net
from gluontrain.torch.yolo3.recipe import gluon_init
from gluontrain.yolo3.infer import cli

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..')
HAS_MXNET = all(importlib.util.find_spec(m) is not None for m in ('mxnet', 'gluoncv'))
needs_mxnet = pytest.mark.skipif(not HAS_MXNET, reason='mxnet/gluoncv not installed: the live '
                                 'comparison runs eval_yolov3.py on MXNet too')
SHAPE = '96'


@pytest.fixture(scope='module')
def tiny_voc(tmp_path_factory):
    return synthetic.write_voc(str(tmp_path_factory.mktemp('voc')), num_train=4, num_val=6,
                               seed=1, years=(2007, 2012), classes=None, image_size=(96, 128),
                               max_objects=2)


@pytest.fixture(scope='module')
def torch_params(tmp_path_factory):
    """A .params written by the torch backend (seeded Gluon-default weights)."""
    torch.manual_seed(0)
    path = str(tmp_path_factory.mktemp('w') / 'yolo3_mobilenet0.25_voc.params')
    save_params(gluon_init(get_yolov3('yolo3_mobilenet0.25_voc')), path)
    return path


def _eval_argv(root, params, *extra):
    return ['--backend', 'torch', '--network', 'mobilenet0.25', '--dataset', 'voc',
            '--dataset-root', root, '--data-shape', SHAPE, '--batch-size', '4',
            '--params', params] + list(extra)


def relabel_test_set(root, params, out):
    """A copy of the VOCdevkit ``root`` whose VOC2007 test annotations hold two boxes per image
    of the class of the best detection of ``params``: its box (integer corners), and that box
    moved sideways by 0.6 of its width (IoU 0.25 or less: missed). A network one epoch old
    gives nearly the same scores on every image (they differ in the 8th digit, so that ties
    across images must not decide the number): VOC07's 11-point AP of that class is then
    6/11 (precision 1 up to recall 0.5), the other classes have no object (nan, left out of
    the mean), so the mAP is 6/11 where boxes, classes and the scaling to each image's pixels
    are right, and lower where a backend's are not."""
    dst = os.path.join(out, 'VOCdevkit')
    shutil.copytree(root, dst)
    year = os.path.join(dst, 'VOC2007')
    net = load_net('mobilenet0.25', 'voc', list(VOC_CLASSES), torch.device('cpu'), params)
    ids = open(os.path.join(year, 'ImageSets', 'Main', 'test.txt')).read().split()
    for image_id in ids:
        img, record = detect_file(net, os.path.join(year, 'JPEGImages', image_id + '.jpg'),
                                  list(VOC_CLASSES), torch.device('cpu'), int(SHAPE), thresh=0.0)
        h, w = img.shape[:2]
        best = record['detections'][0]
        objects = []
        for shift in (0.0, 0.6):
            x0, y0, x1, y1 = best['box']
            move = shift * (x1 - x0) * (1 if x1 + shift * (x1 - x0) < w else -1)
            x0, y0, x1, y1 = (int(round(v)) for v in (x0 + move, y0, x1 + move, y1))
            # VOC corners are 1-based (the readers subtract 1) and inside the image
            box = (max(x0, 0) + 1, max(y0, 0) + 1, min(x1, w - 1) + 1, min(y1, h - 1) + 1)
            assert box[0] < box[2] and box[1] < box[3], best
            objects.append({'name': best['class'], 'bndbox': box, 'truncated': 0,
                            'difficult': 0})
        with open(os.path.join(year, 'Annotations', image_id + '.xml'), 'w') as f:
            f.write(synthetic._voc_xml(2007, image_id, w, h, objects))  # pylint: disable=protected-access
    return dst


def _script(*argv):
    proc = subprocess.run([sys.executable, os.path.join(ROOT, 'scripts', 'eval_yolov3.py')]
                          + list(argv), capture_output=True, text=True, cwd=ROOT,
                          env=dict(os.environ, PYTHONPATH=ROOT), timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return dict(re.findall(r'^(\w+)=(\S+)$', proc.stdout, re.M)), proc.stdout


@pytest.mark.slow
@needs_mxnet
def test_eval_script_prints_the_mxnet_map_for_a_params_of_the_mxnet_recipe(tiny_voc, tmp_path):
    out = str(tmp_path / 'run') + os.sep
    # one epoch of the MXNet recipe (lr 1e-4: the objectness stays above NMS's 0.01)
    subprocess.run([sys.executable, os.path.join(ROOT, 'scripts', 'train_yolov3.py'),
                    '--network', 'mobilenet0.25', '--dataset', 'voc', '--dataset-root',
                    tiny_voc, '--no-pretrained-base', '--gpus', '', '--batch-size', '4', '-j',
                    '0', '--data-shape', SHAPE, '--no-random-shape', '--epochs', '1',
                    '--lr', '0.0001', '--log-interval', '0', '--save-interval', '1',
                    '--save-prefix', out], cwd=ROOT, check=True,
                   env=dict(os.environ, PYTHONPATH=ROOT), capture_output=True, timeout=300)
    params = [os.path.join(out, f) for f in os.listdir(out) if f.endswith('.params')
              and f.startswith('yolo3_mobilenet0.25_voc_0000_')]
    assert len(params) == 1
    root = relabel_test_set(tiny_voc, params[0], str(tmp_path))
    argv = _eval_argv(root, params[0])[2:]
    mx_values, mx_text = _script(*argv)
    torch_values, torch_text = _script('--backend', 'torch', *argv)
    assert float(mx_values['mAP']) == pytest.approx(6 / 11, abs=1e-9)
    assert sorted(mx_values) == sorted(torch_values) and len(mx_values) == 21
    for name, value in mx_values.items():
        assert (value == 'nan' == torch_values[name]) or \
            abs(float(value) - float(torch_values[name])) <= 1e-3, name
    # the same report and table, line for line (torch names its extra BatchNorm counter)
    assert [line.split(';')[0] for line in torch_text.splitlines()][0] == \
        mx_text.splitlines()[0]
    assert torch_text.splitlines()[-5:-1] == mx_text.splitlines()[-5:-1]


def test_eval_prints_the_report_and_the_table_as_the_mxnet_script(tiny_voc, torch_params,
                                                                     capsys):
    names, values = eval_main(_eval_argv(tiny_voc, torch_params))
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith('loaded 247 of 247 tensors from {} (0 missing, 0 unexpected, 0 '
                             'wrong shape)'.format(torch_params))
    assert len(names) == 21 and names[-1] == 'mAP'
    assert out[1:22] == ['{}={}'.format(n, v) for n, v in zip(names, values)]
    assert out[-1] == 'score: {:.4f}'.format(100.0 * float(values[-1]))
    assert out[-2].startswith('yolo3_mobilenet0.25_voc') and out[-2].endswith('—')


def test_demo_writes_pictures_and_detections_json(tiny_voc, torch_params, tmp_path, capsys):
    from PIL import Image  # pylint: disable=import-outside-toplevel
    image = os.path.join(tiny_voc, 'VOC2007', 'JPEGImages', '000001.jpg')
    result = demo_main(['--backend', 'torch', '--network', 'mobilenet0.25', '--params',
                        torch_params, '--data-shape', SHAPE, '--thresh', '0', '--ext', 'jpg',
                        '--out', str(tmp_path / 'demo'), image])
    assert capsys.readouterr().out.startswith('loaded 247 of 247 tensors')
    stored = json.load(open(tmp_path / 'demo' / 'detections.json'))
    assert stored == json.loads(json.dumps(result)) and stored['backend'] == 'torch'
    rec = stored['images'][0]
    w, h = Image.open(image).size
    assert (rec['width'], rec['height']) == (w, h) and Image.open(rec['output']).size == (w, h)
    scores = [d['score'] for d in rec['detections']]
    # thresh 0: every row NMS kept (post_nms 100), highest first, inside the image
    assert len(scores) == 100 and scores == sorted(scores, reverse=True)
    boxes = np.array([d['box'] for d in rec['detections']])
    assert boxes.min() >= 0 and boxes[:, [0, 2]].max() <= w and boxes[:, [1, 3]].max() <= h


@pytest.mark.parametrize('extra,message', [
    (['--symbol', 's.json', '--exported-params', 'e.params'],
     'error: --symbol/--exported-params is an MXNet exported graph, which runs on MXNet only'),
    (['--pretrained', 'True'], 'error: --pretrained True: GluonCV has no model-zoo '
                               'yolo3_mobilenet0.25_voc'),
    (['--gpus', '0,1'], 'error: --gpus 0,1 with --backend torch'),
])
def test_what_needs_mxnet_is_one_error_line(tiny_voc, torch_params, extra, message, capsys):
    if extra == ['--gpus', '0,1'] and torch.cuda.device_count() < 2:
        message = 'error: '  # get_devices refuses ids this machine lacks, also in one line
    assert cli(eval_main, _eval_argv(tiny_voc, torch_params, *extra)) == 1
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(message) and not captured.out


def test_a_file_of_another_network_is_one_error_line(tiny_voc, tmp_path, capsys):
    other = str(tmp_path / 'three.params')
    save_params(get_yolov3('yolo3_mobilenet0.25_custom', ['a', 'b', 'c']), other)
    assert cli(eval_main, _eval_argv(tiny_voc, other)) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(
        'error: --params {} holds the weights of another network'.format(other))
    assert '(it fits --network mobilenet0.25 with 3 classes)' in err[0]


def test_the_torch_scripts_import_no_mxnet(tiny_voc, torch_params, tmp_path):
    code = ('import sys; from gluontrain.tool_route import script_main; '
            'rc = script_main("eval", sys.argv[1:]); '
            'print(rc, sorted(m for m in sys.modules if m.split(".")[0] in ("mxnet", "gluoncv")))')
    proc = subprocess.run([sys.executable, '-c', code] + _eval_argv(tiny_voc, torch_params),
                          capture_output=True, text=True, cwd=str(tmp_path), timeout=300,
                          env=dict(os.environ, PYTHONPATH=ROOT), check=False)
    assert proc.stdout.splitlines()[-1] == '0 []', proc.stderr[-2000:]
