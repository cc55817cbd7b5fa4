"""Evaluation and demo from trained weights and from the exported model; presets; zoo table."""
import glob
import json
import math
import os

import mxnet as mx
import numpy as np
import pytest

from gluontrain.mx.yolo3 import main, parse_args
from gluontrain.mx.yolo3.data import get_dataset
from gluontrain.mx.yolo3.infer import evaluate, load_net, zoo_table
from gluontrain.mx.yolo3.infer import demo_main, eval_main
from gluoncv.utils.metrics.voc_detection import VOC07MApMetric


@pytest.fixture(scope='module')
def trained(voc_root, tmp_path_factory):
    """One epoch of the tiny recipe; (folder, interval .params, validate's (names, values))."""
    out = tmp_path_factory.mktemp('infer')
    # conftest.tiny_argv's settings (the fixture there is per test; this one per module); at
    # the default lr the objectness of every box falls below NMS's 0.01 within these eight
    # updates, leaving no detections to compare, so the lr is ten times lower
    state = main(['--network', 'mobilenet0.25', '--dataset', 'voc', '--dataset-root', voc_root,
                  '--no-pretrained-base', '--gpus', '', '--batch-size', '4', '-j', '0',
                  '--data-shape', '160', '--no-random-shape', '--log-interval', '0',
                  '--epochs', '1', '--save-interval', '1', '--lr', '0.0001', '--save-prefix', str(out) + '/'])
    names, values = state.scores['val']
    params = glob.glob(str(out / 'yolo3_mobilenet0.25_voc_0000_*.params'))
    assert len(params) == 1
    return out, params[0], (names, values)


def _weights(out, params, kind):
    if kind == 'params':
        return ['--params', params]
    return ['--symbol', str(out / 'model-symbol.json'),
            '--exported-params', str(out / 'model-0000.params')]


def _same(a, b):
    return all((math.isnan(x) and math.isnan(y)) or x == pytest.approx(y, abs=1e-9)
               for x, y in zip(a, b)) and len(a) == len(b)


@pytest.mark.parametrize('kind', ['params', 'exported'])
@pytest.mark.slow  # a subprocess, several processes or a live GluonCV run: over ~5 s
def test_eval_equals_what_validate_reported(trained, voc_root, kind, capsys):
    out, params, (names, values) = trained
    got_names, got_values = eval_main(
        ['--network', 'mobilenet0.25', '--dataset', 'voc', '--dataset-root', voc_root,
         '--data-shape', '160', '--batch-size', '4'] + _weights(out, params, kind))
    assert list(got_names) == names and len(names) == 21
    assert _same([float(v) for v in got_values], [float(v) for v in values])
    text = capsys.readouterr().out
    assert 'yolo3_mobilenet0.25_voc' in text and '—' in text  # the zoo has no such model


class _Recording(VOC07MApMetric):
    """VOC07 mAP at IoU 0.1 (non-zero after one epoch) that keeps every detection score."""

    def __init__(self, classes):
        super().__init__(iou_thresh=0.1, class_names=classes)
        self.scores = []

    def update(self, pred_bboxes, pred_labels, pred_scores, *rest):
        self.scores += [s.asnumpy() for s in pred_scores]
        super().update(pred_bboxes, pred_labels, pred_scores, *rest)


def test_params_and_exported_model_give_the_same_detections(trained, voc_root):
    out, params, _ = trained
    args = parse_args(['--dataset-root', voc_root, '--data-shape', '160'])
    _, val_dataset, _ = get_dataset('voc', args)
    results = []
    for kw in ({'params': params}, {'symbol': str(out / 'model-symbol.json'),
                                    'exported_params': str(out / 'model-0000.params')}):
        net = load_net('mobilenet0.25', 'voc', val_dataset.classes, mx.cpu(), **kw)
        metric = _Recording(val_dataset.classes)
        _, values = evaluate(net, val_dataset, metric, [mx.cpu()], 160)
        results.append((values[-1], np.concatenate(metric.scores)))
    (map_a, scores_a), (map_b, scores_b) = results
    assert scores_a.shape == (8, 100, 1) and (scores_a > 0).sum() > 0
    np.testing.assert_allclose(scores_a, scores_b, rtol=1e-5, atol=1e-6)
    assert map_a > 0.0 and map_a == pytest.approx(map_b, abs=1e-9)


def test_load_net_needs_one_kind_of_weights():
    with pytest.raises(ValueError, match='--params'):
        load_net('mobilenet0.25', 'voc', [], mx.cpu())
    with pytest.raises(ValueError, match='either --params'):
        load_net('mobilenet0.25', 'voc', [], mx.cpu(), params='x', symbol='y',
                 exported_params='z')


@pytest.mark.parametrize('kind,ext', [('params', 'png'), ('exported', 'jpg')])
def test_demo_writes_pictures_and_detections_json(trained, voc_root, tmp_path, kind, ext):
    from PIL import Image
    out, params, _ = trained
    images = sorted(glob.glob(os.path.join(voc_root, 'VOC2007', 'JPEGImages', '*.jpg')))[:2]
    dest = tmp_path / 'demo'
    demo_main(['--network', 'mobilenet0.25', '--dataset', 'voc', '--data-shape', '160',
               '--thresh', '0.05', '--out', str(dest), '--ext', ext]
              + _weights(out, params, kind) + images)
    result = json.loads((dest / 'detections.json').read_text())
    assert {'threshold', 'data_shape', 'classes', 'images', 'network'} <= set(result)
    assert result['threshold'] == 0.05 and len(result['classes']) == 20
    assert [r['image'] for r in result['images']] == [os.path.abspath(p) for p in images]
    total = 0
    for rec, path in zip(result['images'], images):
        assert set(rec) == {'image', 'width', 'height', 'detections', 'output'}
        with Image.open(path) as im:
            assert (rec['width'], rec['height']) == im.size
        with Image.open(rec['output']) as im:
            assert im.size == (rec['width'], rec['height'])
            assert im.format == ('PNG' if ext == 'png' else 'JPEG')
        scores = [d['score'] for d in rec['detections']]
        assert scores == sorted(scores, reverse=True) and all(s >= 0.05 for s in scores)
        for d in rec['detections']:
            assert set(d) == {'class_id', 'class', 'score', 'box'}
            assert d['class'] == result['classes'][d['class_id']]
            x0, y0, x1, y1 = d['box']
            # clipped to the network input, then scaled: inside the original image
            assert 0 <= x0 <= x1 <= rec['width'] + 1e-3 and 0 <= y0 <= y1 <= rec['height'] + 1e-3
        total += len(rec['detections'])
    assert total > 0


def test_an_unknown_preset_is_refused():
    # the presets' values: tests/yolo3/test_zoo_presets.py (against the zoo's own logs)
    with pytest.raises(SystemExit):
        parse_args(['--preset', 'resnet_voc'])


def test_zoo_table_lists_the_model_zoo_numbers():
    text = zoo_table('darknet53', 'coco', 416, ['x', 'AP'], ['summary', '12.3'])
    lines = text.splitlines()
    assert lines[0].startswith('AP[.5:.95] (yolo3_darknet53_coco')
    assert lines[2].split() == ['yolo3_darknet53_coco', '416', '12.3', '36.0']
    assert [line.split() for line in lines[3:]] == [['320', '33.6'], ['608', '37.0']]
    text = zoo_table('mobilenet1.0', 'voc', 608, ['mAP'], [0.5])
    assert text.splitlines()[2].split() == ['yolo3_mobilenet1.0_voc', '608', '50.0', '—']
    assert [line.split() for line in text.splitlines()[3:]] == [['320', '73.9'],
                                                                ['416', '75.8']]
