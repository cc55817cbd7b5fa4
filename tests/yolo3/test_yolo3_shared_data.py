"""gluontrain.yolo3.data: GluonCV's batch order (rollover, random shapes) and VOC labels."""
import os

import pytest
import numpy as np

from gluontrain.data import synthetic
from gluontrain.data.classes import VOC_CLASSES
from gluontrain.yolo3.data import MixupDetection, RolloverBatchSampler, VOCDetection


def test_rollover_batches_follow_the_shuffle_and_carry_the_leftover():
    np.random.seed(3)
    sampler = RolloverBatchSampler(7, 3)
    first = list(sampler)
    np.random.seed(3)
    order = np.arange(7)
    np.random.shuffle(order)
    assert first == [list(order[:3]), list(order[3:6])]
    assert sampler.prev == [order[6]] and len(sampler) == 2  # (1 + 7) // 3
    state = np.random.get_state()
    second = list(sampler)
    np.random.set_state(state)
    again = np.arange(7)
    np.random.shuffle(again)  # the second pass draws the next permutation
    assert second == [[int(order[6])] + list(again[:2]), list(again[2:5])]
    assert sampler.prev == list(again[5:])


def test_random_shapes_drawn_before_the_shuffle_and_every_interval():
    np.random.seed(5)
    batches = list(RolloverBatchSampler(8, 2, shapes=10, interval=2))
    np.random.seed(5)
    np.random.choice(10)  # RandomTransformDataLoader's draw before the pass
    order = np.arange(8)
    np.random.shuffle(order)
    expect = []
    for b in range(4):
        if b % 2 == 0:
            shape = int(np.random.choice(10))
        expect.append([(int(i), shape) for i in order[2 * b:2 * b + 2]])
    assert batches == expect


def test_voc_labels_are_gluoncv_s(tmp_path):
    root = synthetic.write_voc(str(tmp_path), num_train=2, num_val=1, seed=0, years=(2007,),
                               classes=None, image_size=(64, 96), max_objects=2)
    ds = VOCDetection(root, [(2007, 'trainval')], VOC_CLASSES)
    img, label = ds[0]
    assert img.dtype == np.uint8 and img.ndim == 3 and img.shape[2] == 3
    xml = open('{}/VOC2007/Annotations/{}.xml'.format(root, ds.items[0][1])).read()
    xmin = float(xml.split('<xmin>')[1].split('<')[0])
    assert label.dtype == np.float64 and label.shape[1] == 6
    assert label[0, 0] == xmin - 1  # GluonCV's 0-based corners


def test_images_keep_their_stored_pixels_whatever_the_exif_orientation(tmp_path):
    """GluonCV reads with mx.image.imread, which ignores the EXIF orientation (cv2.imread
    would turn a 'rotated' 64x96 picture into 96x64)."""
    from PIL import Image  # pylint: disable=import-outside-toplevel
    root = synthetic.write_voc(str(tmp_path), num_train=1, num_val=1, seed=0, years=(2007,),
                               classes=None, image_size=(64, 96), max_objects=1)
    ds = VOCDetection(root, [(2007, 'trainval')], VOC_CLASSES)
    path = '{}/VOC2007/JPEGImages/{}.jpg'.format(root, ds.items[0][1])
    stored = ds.image(0)
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 90 degrees on display
    Image.open(path).save(path, quality=100, exif=exif)
    again = ds.image(0)
    assert again.shape == stored.shape
    assert np.abs(again.astype(int) - stored.astype(int)).mean() < 3  # re-encoded, not turned


def test_mixup_off_adds_a_weight_column_of_ones(tmp_path):
    root = synthetic.write_voc(str(tmp_path), num_train=2, num_val=1, seed=0, years=(2007,),
                               classes=None, image_size=(64, 96), max_objects=2)
    mix = MixupDetection(VOCDetection(root, [(2007, 'trainval')], VOC_CLASSES))
    mix.set_mixup(None)
    img, label = mix[0]
    assert label.shape[1] == 7 and np.all(label[:, -1] == 1)
    mix.set_mixup(np.random.beta, 1.5, 1.5)
    np.random.seed(0)
    lambd = np.random.beta(1.5, 1.5)
    np.random.seed(0)
    img, label = mix[0]
    assert np.isclose(label[0, -1], lambd) and label.shape[0] > 0


def test_synthetic_with_classes_draws_those_classes_in_its_own_folder(tmp_path, monkeypatch):
    """``--dataset synthetic --classes car,dog`` generates the embedded set with those classes
    only (README command (a)), beside the default five-class set, which stays as it is."""
    import argparse
    import glob
    import xml.etree.ElementTree as ET
    from gluontrain.yolo3.data import voc_folders
    monkeypatch.setenv('GLUONTRAIN_DATA', str(tmp_path / 'sv'))
    monkeypatch.setattr(synthetic, 'DEFAULT_VOC_PARAMS',
                        dict(synthetic.DEFAULT_VOC_PARAMS, num_train=6, num_val=6))

    def names(devkit):
        return {o.find('name').text for f in glob.glob(devkit + '/VOC*/Annotations/*.xml')
                for o in ET.parse(f).findall('object')}

    two = argparse.Namespace(dataset_root=None, classes='dog,car')
    root, _, _, classes = voc_folders('synthetic', two)
    assert classes == ['dog', 'car'] and two.classes == 'dog,car'
    assert root == str(tmp_path / 'sv_car_dog' / 'VOCdevkit') and names(root) == {'car', 'dog'}
    five = argparse.Namespace(dataset_root=None, classes='')
    root5, _, _, classes5 = voc_folders('synthetic', five)
    assert root5 == str(tmp_path / 'sv' / 'VOCdevkit')
    assert tuple(classes5) == synthetic.DEFAULT_VOC_CLASSES == tuple(sorted(names(root5)))
    assert voc_folders('synthetic', two)[0] == root and names(root) == {'car', 'dog'}
    with pytest.raises(ValueError, match='--classes zebra: the synthetic dataset draws VOC'):
        voc_folders('synthetic', argparse.Namespace(dataset_root=None, classes='car,zebra'))


def test_synthetic_val_images_draw_a_larger_test_split_in_its_own_folder(tmp_path, monkeypatch):
    """``--synthetic-val-images N`` (README command (a): 400) draws N VOC2007 test images beside
    the same number of training images, in a folder of its own; the default set is untouched
    and a dataset other than synthetic refuses the argument in one line."""
    import argparse
    from gluontrain.yolo3.args import check_common, parse_args
    from gluontrain.yolo3.data import voc_folders
    monkeypatch.setenv('GLUONTRAIN_DATA', str(tmp_path / 'sv'))
    monkeypatch.setattr(synthetic, 'DEFAULT_VOC_PARAMS',
                        dict(synthetic.DEFAULT_VOC_PARAMS, num_train=6, num_val=4))

    def split(devkit, year, name):
        with open(os.path.join(devkit, 'VOC{}'.format(year), 'ImageSets', 'Main',
                               name + '.txt')) as f:
            return f.read().split()

    big = argparse.Namespace(dataset_root=None, classes='car,dog', synthetic_val_images=9)
    root, train, val, _ = voc_folders('synthetic', big)
    assert root == str(tmp_path / 'sv_car_dog_val9' / 'VOCdevkit')
    assert val == [('VOC2007', 'test')] and len(split(root, 2007, 'test')) == 9
    assert [len(split(root, y, 'trainval')) for y in (2007, 2012)] == [6, 6]
    small = argparse.Namespace(dataset_root=None, classes='car,dog', synthetic_val_images=None)
    root4 = voc_folders('synthetic', small)[0]
    assert root4 == str(tmp_path / 'sv_car_dog' / 'VOCdevkit')
    assert len(split(root4, 2007, 'test')) == 4
    args = parse_args(['--dataset', 'voc', '--synthetic-val-images', '400'])
    with pytest.raises(ValueError, match=r"^--synthetic-val-images 400 sizes the generated "
                                         r"dataset's test split; --dataset voc has its own"):
        check_common(args, True, 1)
