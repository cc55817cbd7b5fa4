"""The VOC writer, generate(), default_voc_root() and the CLI, read back by gluoncv's reader."""
import hashlib
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from PIL import Image

from gluontrain.data import shapes, synthetic

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# gluoncv's VOCDetection.CLASSES, written out by hand
VOC_NAMES = ['aeroplane', 'bicycle', 'bird', 'boat', 'bottle', 'bus', 'car', 'cat', 'chair',
             'cow', 'diningtable', 'dog', 'horse', 'motorbike', 'person', 'pottedplant',
             'sheep', 'sofa', 'train', 'tvmonitor']
# The documented look of the five default classes: (RGB, fraction of its box the shape fills)
DEFAULT_LOOK = {'bus': ((220, 40, 40), np.pi / 4), 'car': ((40, 170, 60), 1.0),
                'cat': ((40, 80, 225), 0.5), 'dog': ((240, 215, 40), 0.5),
                'person': ((210, 50, 210), 5.0 / 9)}


def parse_voc(devkit, year, image_id):
    """(width, height, [(name, difficult, truncated, xmin, ymin, xmax, ymax)]) from the XML."""
    root = ET.parse(os.path.join(devkit, 'VOC{}'.format(year), 'Annotations',
                                 image_id + '.xml')).getroot()
    objs = []
    for o in root.findall('object'):
        box = [int(o.find('bndbox/' + k).text) for k in ('xmin', 'ymin', 'xmax', 'ymax')]
        objs.append((o.find('name').text, int(o.find('difficult').text),
                     int(o.find('truncated').text), *box))
    return int(root.find('size/width').text), int(root.find('size/height').text), objs


def read_list(devkit, year, name):
    with open(os.path.join(devkit, 'VOC{}'.format(year), 'ImageSets', 'Main', name + '.txt')) as f:
        return f.read().split()


def tree_digest(root):
    out = {}
    for dirpath, _, files in os.walk(root):
        for name in files:
            path = os.path.join(dirpath, name)
            with open(path, 'rb') as f:
                out[os.path.relpath(path, root)] = hashlib.sha256(f.read()).hexdigest()
    return out


def test_voc_class_constants():
    assert list(synthetic.VOC_CLASSES) == VOC_NAMES
    assert set(synthetic.DEFAULT_VOC_CLASSES) <= set(VOC_NAMES)


def test_voc_layout_and_splits(voc_root):
    assert os.path.basename(voc_root) == 'VOCdevkit'
    assert sorted(os.listdir(voc_root)) == ['VOC2007', 'VOC2012', synthetic.MARKER]
    assert sorted(os.listdir(os.path.join(voc_root, 'VOC2007', 'ImageSets', 'Main'))) == [
        'test.txt', 'train.txt', 'trainval.txt', 'val.txt']
    # like the real VOC2012, no test list
    assert sorted(os.listdir(os.path.join(voc_root, 'VOC2012', 'ImageSets', 'Main'))) == [
        'train.txt', 'trainval.txt', 'val.txt']
    for year, n_trainval, n_test in ((2007, 16, 8), (2012, 16, 0)):
        trainval, train, val = (read_list(voc_root, year, n) for n in ('trainval', 'train', 'val'))
        assert len(trainval) == n_trainval and len(train) == len(val) == 8
        assert sorted(train + val) == trainval
        all_ids = trainval + (read_list(voc_root, year, 'test') if n_test else [])
        assert len(set(all_ids)) == n_trainval + n_test
        jpgs = sorted(os.listdir(os.path.join(voc_root, 'VOC{}'.format(year), 'JPEGImages')))
        assert jpgs == sorted(i + '.jpg' for i in all_ids)
    ids07 = sorted(read_list(voc_root, 2007, 'trainval') + read_list(voc_root, 2007, 'test'))
    assert ids07 == ['{:06d}'.format(i) for i in range(1, 25)]
    assert sorted(read_list(voc_root, 2012, 'trainval')) == [
        '2012_{:06d}'.format(i) for i in range(1, 17)]


def test_voc_xml_is_real_voc_format(voc_root):
    root = ET.parse(os.path.join(voc_root, 'VOC2007', 'Annotations', '000001.xml')).getroot()
    assert root.tag == 'annotation'
    assert root.find('folder').text == 'VOC2007' and root.find('filename').text == '000001.jpg'
    assert root.find('size/depth').text == '3' and root.find('segmented').text == '0'
    obj = root.find('object')
    assert [c.tag for c in obj] == ['name', 'pose', 'truncated', 'difficult', 'bndbox']
    assert [c.tag for c in obj.find('bndbox')] == ['xmin', 'ymin', 'xmax', 'ymax']


@pytest.mark.parametrize('year', [2007, 2012])
def test_gluoncv_reads_voc(voc_root, year):
    from gluontrain.mx import gluoncv
    ds = gluoncv.data.VOCDetection(root=voc_root, splits=[(year, 'trainval')])
    ids = read_list(voc_root, year, 'trainval')
    assert len(ds) == len(ids) == 16
    assert list(ds.classes) == VOC_NAMES
    n_objects = 0
    for idx, image_id in enumerate(ids):
        width, height, objs = parse_voc(voc_root, year, image_id)
        img, label = ds[idx]
        assert img.shape == (height, width, 3)
        # gluoncv: 0-based corners = XML - 1, then class index and difficult
        expected = [[x1 - 1, y1 - 1, x2 - 1, y2 - 1, VOC_NAMES.index(n), d]
                    for n, d, _, x1, y1, x2, y2 in objs]
        np.testing.assert_array_equal(label, np.array(expected, dtype=np.float64))
        n_objects += len(objs)
        assert 1 <= len(objs) <= 6
        assert {o[0] for o in objs} <= set(synthetic.DEFAULT_VOC_CLASSES)
    assert n_objects >= 16


def test_gluoncv_reads_voc2007_test(voc_root):
    from gluontrain.mx import gluoncv
    ds = gluoncv.data.VOCDetection(root=voc_root, splits=[(2007, 'test')])
    assert len(ds) == 8
    width, height, objs = parse_voc(voc_root, 2007, read_list(voc_root, 2007, 'test')[0])
    assert ds[0][1].shape == (len(objs), 6)


def test_voc_boxes_frame_the_drawn_shapes(voc_root):
    """Independent of the writer's bookkeeping: the class colour fills the annotated box."""
    checked = 0
    for image_id in read_list(voc_root, 2007, 'trainval'):
        width, height, objs = parse_voc(voc_root, 2007, image_id)
        pixels = np.asarray(Image.open(os.path.join(
            voc_root, 'VOC2007', 'JPEGImages', image_id + '.jpg')).convert('RGB'), np.float64)
        for k, (name, _, truncated, x1, y1, x2, y2) in enumerate(objs):
            others = [o for j, o in enumerate(objs) if j != k]
            # isolated (5+ px from others), uncut objects only: neighbours would enter the patch
            if truncated or any(min(x2, o[5]) + 6 >= max(x1, o[3]) and
                                min(y2, o[6]) + 6 >= max(y1, o[4]) for o in others):
                continue
            rgb, fill = DEFAULT_LOOK[name]
            lo_x, lo_y = max(0, x1 - 4), max(0, y1 - 4)
            patch = pixels[lo_y:y2 + 3, lo_x:x2 + 3]
            mask = np.linalg.norm(patch - np.array(rgb), axis=2) < 45
            # columns/rows with 2+ matching pixels: a stray background pixel can match too
            xs, ys = np.flatnonzero(mask.sum(0) >= 2), np.flatnonzero(mask.sum(1) >= 2)
            # mask extent vs the 1-based inclusive XML corners
            assert abs(xs.min() + lo_x + 1 - x1) <= 2 and abs(xs.max() + lo_x + 1 - x2) <= 2
            assert abs(ys.min() + lo_y + 1 - y1) <= 2 and abs(ys.max() + lo_y + 1 - y2) <= 2
            assert mask.sum() == pytest.approx(fill * (x2 - x1 + 1) * (y2 - y1 + 1), rel=0.2)
            checked += 1
    assert checked >= 5


def test_voc_all_classes_difficult_truncated_crowded(tmp_path):
    devkit = synthetic.write_voc(str(tmp_path), num_train=60, num_val=0, years=(2007,),
                                 image_size=(96, 128), seed=3)
    names, difficult, n_per_image = [], [], []
    for image_id in read_list(devkit, 2007, 'trainval'):
        width, height, objs = parse_voc(devkit, 2007, image_id)
        assert 96 <= width <= 128 and 96 <= height <= 128
        n_per_image.append(len(objs))
        for name, diff, trunc, x1, y1, x2, y2 in objs:
            names.append(name)
            difficult.append(diff)
            assert 1 <= x1 < x2 <= width and 1 <= y1 < y2 <= height
            assert trunc == int(x1 == 1 or y1 == 1 or x2 == width or y2 == height)
    assert not os.path.exists(os.path.join(devkit, 'VOC2012'))
    assert set(names) <= set(VOC_NAMES) and len(set(names)) >= 15
    assert 0.03 <= np.mean(difficult) <= 0.2
    assert max(n_per_image) >= 5 and min(n_per_image) == 1 and max(n_per_image) <= 8


def test_voc_arguments(tmp_path):
    with pytest.raises(ValueError, match='unicorn'):
        synthetic.write_voc(str(tmp_path), classes=['dog', 'unicorn'])
    with pytest.raises(ValueError, match='2007'):
        synthetic.write_voc(str(tmp_path), num_val=2, years=(2012,))
    with pytest.raises(ValueError, match='image_size'):
        synthetic.write_voc(str(tmp_path), image_size=(100, 50))
    devkit = synthetic.write_voc(str(tmp_path), num_train=3, num_val=0, years=(2007,),
                                 classes=['dog', 'cat'], image_size=80)
    for image_id in read_list(devkit, 2007, 'trainval'):
        width, height, objs = parse_voc(devkit, 2007, image_id)
        assert (width, height) == (80, 80)
        assert {o[0] for o in objs} <= {'cat', 'dog'}
    assert sorted(os.listdir(str(tmp_path))) == ['VOCdevkit']  # no staging leftovers


@pytest.mark.parametrize('kind', ['voc', 'coco', 'vg', 'iss'])
def test_same_seed_same_bytes(tmp_path, kind):
    a = synthetic.generate(kind, str(tmp_path / 'a'), num_train=4, num_val=2, seed=5)
    b = synthetic.generate(kind, str(tmp_path / 'b'), num_train=4, num_val=2, seed=5)
    c = synthetic.generate(kind, str(tmp_path / 'c'), num_train=4, num_val=2, seed=6)
    da, db, dc = tree_digest(a), tree_digest(b), tree_digest(c)
    assert da == db
    assert len(da) >= 8
    assert sorted(da) == sorted(dc) or kind == 'coco'  # COCO file names follow random ids
    differing = [k for k in da if da[k] != dc.get(k)]
    assert len(differing) >= len(da) // 2


def test_generate_rejects_unknown_kind(tmp_path):
    with pytest.raises(ValueError, match='kind'):
        synthetic.generate('imagenet', str(tmp_path))


def test_default_voc_root_caches_and_regenerates(tmp_path, monkeypatch):
    root = str(tmp_path / 'data')
    devkit = synthetic.default_voc_root(root, num_train=4, num_val=2)
    assert devkit == os.path.join(root, 'VOCdevkit')
    assert len(read_list(devkit, 2007, 'trainval')) == 4 and len(read_list(devkit, 2012,
                                                                            'trainval')) == 4
    with open(os.path.join(devkit, synthetic.MARKER)) as f:
        marker = json.load(f)
    assert marker['params']['classes'] == list(synthetic.DEFAULT_VOC_CLASSES)
    assert marker['params']['num_train'] == 4 and marker['params']['image_size'] == [160, 256]

    def boom(*args, **kwargs):
        raise AssertionError('regenerated although cached')
    monkeypatch.setattr(synthetic, 'write_voc', boom)
    assert synthetic.default_voc_root(root, num_train=4, num_val=2) == devkit
    monkeypatch.undo()
    synthetic.default_voc_root(root, num_train=5, num_val=2)  # other params: rebuilt
    assert len(read_list(devkit, 2007, 'trainval')) == 5
    with pytest.raises(TypeError, match='bogus'):
        synthetic.default_voc_root(root, bogus=1)


def test_default_voc_root_env(tmp_path, monkeypatch):
    monkeypatch.setenv('GLUONTRAIN_DATA', str(tmp_path / 'env'))
    devkit = synthetic.default_voc_root(num_train=2, num_val=1, years=(2007,))
    # a test split other than the default's 50 gets a folder of its own (_val<N>)
    assert devkit == str(tmp_path / 'env_val1' / 'VOCdevkit')
    assert len(read_list(devkit, 2007, 'test')) == 1


def test_default_parameters_documented_values():
    p = synthetic.DEFAULT_VOC_PARAMS
    assert (p['num_train'], p['num_val'], tuple(p['years'])) == (100, 50, (2007, 2012))
    assert len(p['classes']) == 5


def test_interrupted_generation_leaves_old_dataset(tmp_path, monkeypatch):
    devkit = synthetic.write_voc(str(tmp_path), num_train=2, num_val=1, years=(2007,))
    before = tree_digest(devkit)
    calls = []
    real = shapes.render_scene

    def interrupted(*args, **kwargs):
        calls.append(1)
        if len(calls) % 3 == 0:
            raise KeyboardInterrupt
        return real(*args, **kwargs)
    monkeypatch.setattr(shapes, 'render_scene', interrupted)
    with pytest.raises(KeyboardInterrupt):
        synthetic.write_voc(str(tmp_path), num_train=5, num_val=1, years=(2007,), seed=9)
    assert tree_digest(devkit) == before
    assert sorted(os.listdir(str(tmp_path))) == ['VOCdevkit']
    with pytest.raises(KeyboardInterrupt):
        synthetic.write_voc(str(tmp_path / 'fresh'), num_train=5, num_val=1, years=(2007,))
    assert os.listdir(str(tmp_path / 'fresh')) == []


def test_cli_writes_voc(tmp_path):
    out = subprocess.run(
        [sys.executable, os.path.join(REPO, 'scripts', 'make_synthetic_data.py'), 'voc',
         '--root', str(tmp_path), '--num-train', '3', '--num-val', '2', '--seed', '1'],
        check=True, capture_output=True, text=True, cwd=REPO,
        env=dict(os.environ, PYTHONPATH=REPO))
    assert 'VOCdevkit' in out.stdout
    devkit = str(tmp_path / 'VOCdevkit')
    assert len(read_list(devkit, 2007, 'trainval')) == 3
    assert len(read_list(devkit, 2007, 'test')) == 2
    assert len(read_list(devkit, 2012, 'trainval')) == 3
    expected = synthetic.write_voc(str(tmp_path / 'lib'), num_train=3, num_val=2, seed=1)
    assert tree_digest(devkit) == tree_digest(expected)


def test_cli_writes_iss(tmp_path):
    subprocess.run(
        [sys.executable, os.path.join(REPO, 'scripts', 'make_synthetic_data.py'), 'iss',
         '--root', str(tmp_path / 'cli'), '--num-train', '2', '--num-val', '1', '--seed', '4'],
        check=True, capture_output=True, text=True, cwd=REPO,
        env=dict(os.environ, PYTHONPATH=REPO))
    expected = synthetic.write_iss(str(tmp_path / 'lib'), num_train=2, num_val=1, seed=4)
    assert sorted(os.listdir(str(tmp_path / 'cli'))) == ['coco', 'img', 'lst', 'metadata.bin',
                                                          'msk']
    assert tree_digest(str(tmp_path / 'cli')) == tree_digest(expected)


def test_object_size_bounds_the_drawn_objects(tmp_path):
    import xml.etree.ElementTree as ET
    devkit = synthetic.write_voc(str(tmp_path), num_train=12, num_val=0, years=(2012,),
                                 image_size=(100, 100), max_objects=2, object_size=(0.3, 0.5))
    sides = []
    for xml in os.listdir(os.path.join(devkit, 'VOC2012', 'Annotations')):
        root = ET.parse(os.path.join(devkit, 'VOC2012', 'Annotations', xml)).getroot()
        for obj in root.iter('object'):
            if obj.find('truncated').text == '0':
                box = [int(obj.find('bndbox').find(k).text)
                       for k in ('xmin', 'ymin', 'xmax', 'ymax')]
                sides.append(max(box[2] - box[0] + 1, box[3] - box[1] + 1))
    # side = frac * 100 * sqrt(aspect), aspect in [0.7, 1.45]: between 25 and 61 px
    assert sides and min(sides) >= 25 and max(sides) <= 61
    with open(os.path.join(devkit, synthetic.MARKER)) as f:
        assert json.load(f)['params']['object_size'] == [0.3, 0.5]
    with pytest.raises(ValueError, match='object_size'):
        synthetic.write_voc(str(tmp_path / 'bad'), num_train=1, num_val=0, years=(2012,),
                            object_size=(0.5, 0.3))
