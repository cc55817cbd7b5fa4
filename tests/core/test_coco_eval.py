"""core.coco_eval: GluonCV's COCODetectionMetric, printed number for printed number.

On fixed detections (tests/fixtures/make_coco_metric_fixture.py: a non-square input shape, two
validation images without annotations, scores under the threshold, padding rows) our
``(names, values)`` equal GluonCV's: live where gluoncv imports, else the recorded fixture.
"""
import importlib.util
import json
import os
import re

import numpy as np
import pytest
from PIL import Image

from fixtures import make_coco_metric_fixture as fixture
from gluontrain.core.coco_eval import SUMMARY_NAME, COCOEvaluator, mean_ap_name
from gluontrain.yolo3.coco import COCODetection

HAS_GLUONCV = all(importlib.util.find_spec(m) is not None for m in ('mxnet', 'gluoncv'))
RECORDED = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'fixtures',
                        fixture.FIXTURE)
_NUMBER = re.compile(r'-?\d+\.\d+|nan')


@pytest.fixture(scope='module')
def metric_root(tmp_path_factory):
    return fixture.write_dataset(str(tmp_path_factory.mktemp('coco_metric') / 'coco'))


def _ours(root, dets, data_shape=fixture.DATA_SHAPE):
    metric = COCOEvaluator(COCODetection(root, 'instances_val2017', skip_empty=False),
                           data_shape=data_shape)
    for boxes, scores, labels in dets:
        metric.update(boxes, scores, labels)
    return metric.get()


def _numbers(text):
    return [float(v) for v in _NUMBER.findall(text)]


def test_ours_equals_the_recorded_gluoncv_table(metric_root):
    names, values = _ours(metric_root, fixture.detections(metric_root))
    with open(RECORDED) as f:
        recorded = json.load(f)
    assert names == recorded['names']
    assert len(values) == 1 + 80 + 1
    # The same text but for the last digit: COCOeval's float64 sums may round the other way
    # on another processor's numpy kernels, by at most one unit of the printed digit.
    for got, want, unit in zip(values, recorded['values'], [1e-3] + [0.1] * 81):
        assert _NUMBER.sub('#', got) == _NUMBER.sub('#', want)
        np.testing.assert_allclose(_numbers(got), _numbers(want), rtol=0, atol=unit * 1.01)
    assert float(values[-1]) == pytest.approx(27.6, abs=0.11)  # current_map, GluonCV's float()


@pytest.mark.skipif(not HAS_GLUONCV, reason='mxnet/gluoncv not installed: compared with the '
                    'recorded table instead')
def test_ours_equals_gluoncv_live(metric_root):
    dets = fixture.detections(metric_root)
    assert _ours(metric_root, dets) == fixture.gluoncv_metric(metric_root, dets)


def test_the_table_has_gluoncvs_names(metric_root):
    names, values = _ours(metric_root, fixture.detections(metric_root))
    assert names[0] == SUMMARY_NAME and names[-1] == '~~~~ MeanAP @ IoU=[0.50,0.95] ~~~~\n'
    assert names[-1] == mean_ap_name()
    assert len(values[0].splitlines()) == 12
    assert names[1:-1] == list(COCODetection.CLASSES)


def _one_box_root(tmp_path):
    """One 200 x 100 image with one ``person`` box ``(20, 10, w 50, h 40)`` and an empty one."""
    root = tmp_path / 'coco'
    (root / 'annotations').mkdir(parents=True)
    (root / 'val2017').mkdir()
    from gluontrain.data._io import save_jpeg  # pylint: disable=import-outside-toplevel
    from gluontrain.data.coco import COCO_CATEGORIES  # pylint: disable=import-outside-toplevel
    images = []
    for image_id in (7, 3):
        name = '{:012d}.jpg'.format(image_id)
        save_jpeg(Image.new('RGB', (200, 100)), str(root / 'val2017' / name))
        images.append({'id': image_id, 'file_name': name, 'width': 200, 'height': 100,
                       'coco_url': 'http://x/val2017/' + name})
    ann = {'id': 1, 'image_id': 7, 'category_id': 1, 'bbox': [20.0, 10.0, 50.0, 40.0],
           'area': 2000.0, 'iscrowd': 0, 'segmentation': [[20, 10, 70, 10, 70, 50, 20, 50]]}
    with open(root / 'annotations' / 'instances_val2017.json', 'w') as f:
        json.dump({'images': images, 'annotations': [ann], 'categories': COCO_CATEGORIES}, f)
    return str(root)


def test_rescale_from_a_non_square_input_and_the_plus_one_width(tmp_path):
    root = _one_box_root(tmp_path)
    metric = COCOEvaluator(COCODetection(root, 'instances_val2017', skip_empty=False),
                           data_shape=(50, 400))  # image 100 high, 200 wide: x / 2, y x 2
    empty = (np.zeros((0, 4)), np.zeros(0), np.zeros(0))
    # image 3 (sorted first) has no objects; image 7's box in the input's pixels: GluonCV's
    # width is xmax - xmin + 1, so (20, 10, 69, 49) in the image is the annotated box
    metric.update(*empty)
    metric.update([[40, 5, 138, 24.5], [0, 0, 10, 10], [-1, -1, -1, -1]], [0.9, 0.04, -1],
                  [0, 0, -1])
    assert metric._results == [{'image_id': 7, 'category_id': 1,
                                 'bbox': [20.0, 10.0, 50.0, 40.0], 'score': pytest.approx(0.9)}]
    names, values = metric.get()
    assert values[1] == '100.0' and values[-1] == '100.0'  # person; the mean of one class
    assert values[2] == 'nan'  # bicycle: no ground truth, as GluonCV prints it


def test_without_data_shape_boxes_are_the_images_pixels(tmp_path):
    metric = COCOEvaluator(COCODetection(_one_box_root(tmp_path), 'instances_val2017',
                                         skip_empty=False))
    metric.update(np.zeros((0, 4)), [], [])
    metric.update([[20, 10, 69, 49]], [0.5], [0])
    assert metric.get()[1][-1] == '100.0'


def test_no_detections_score_zero_and_too_many_images_is_refused(tmp_path):
    metric = COCOEvaluator(COCODetection(_one_box_root(tmp_path), 'instances_val2017',
                                         skip_empty=False), data_shape=(416, 416))
    for _ in range(2):
        metric.update(np.zeros((0, 4)), [], [])
    assert metric.get()[1][-1] == '0.0'
    with pytest.raises(ValueError, match='more images than the 2 of the split'):
        metric.update(np.zeros((0, 4)), [], [])
    metric.reset()
    with pytest.warns(UserWarning, match='Recorded 0 out of 2 validation images'):
        metric.get()


@pytest.mark.parametrize('shape', [(1, 2, 3), 'big'])
def test_a_bad_data_shape_is_refused(tmp_path, shape):
    with pytest.raises(ValueError, match='data_shape must be'):
        COCOEvaluator(COCODetection(_one_box_root(tmp_path), 'instances_val2017'),
                      data_shape=shape)
