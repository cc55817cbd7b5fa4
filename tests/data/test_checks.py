"""The validators: accept the generated datasets, reject each corruption naming the file."""
import json
import os
import re
import shutil
import xml.etree.ElementTree as ET

import h5py
import numpy as np
import pytest

from gluontrain.data import DatasetError, check_coco, check_vg, check_voc, vg

SPLITS = [(2007, 'trainval'), (2012, 'trainval'), (2007, 'test')]


def count_xml_objects(devkit, splits):
    images = objects = 0
    for year, name in splits:
        base = os.path.join(devkit, 'VOC{}'.format(year))
        with open(os.path.join(base, 'ImageSets', 'Main', name + '.txt')) as f:
            for image_id in f.read().split():
                images += 1
                root = ET.parse(os.path.join(base, 'Annotations', image_id + '.xml')).getroot()
                objects += len(root.findall('object'))
    return images, objects


@pytest.fixture
def voc(voc_root, tmp_path):
    """A private copy of the session VOCdevkit, free to corrupt."""
    return shutil.copytree(voc_root, str(tmp_path / 'VOCdevkit'))


@pytest.fixture
def coco(coco_root, tmp_path):
    return shutil.copytree(coco_root, str(tmp_path / 'coco'))


@pytest.fixture
def vgr(vg_root, tmp_path):
    return shutil.copytree(vg_root, str(tmp_path / 'vg'))


def xml_path(devkit, image_id='000001', year=2007):
    return os.path.join(devkit, 'VOC{}'.format(year), 'Annotations', image_id + '.xml')


def first_trainval(devkit, year=2007):
    with open(os.path.join(devkit, 'VOC{}'.format(year), 'ImageSets', 'Main', 'trainval.txt')) as f:
        return f.readline().strip()


def edit_xml(path, fn):
    tree = ET.parse(path)
    fn(tree.getroot())
    tree.write(path)


def voc_error(devkit, splits=SPLITS, **kw):
    with pytest.raises(DatasetError) as info:
        check_voc(devkit, splits, **kw)
    return str(info.value)


# ---------------------------------------------------------------- VOC
def test_voc_accepts_generated(voc):
    images, objects = count_xml_objects(voc, SPLITS)
    assert (images, objects)[0] == 40
    assert check_voc(voc, SPLITS) == {'images': 40, 'objects': objects}


def test_voc_missing_root(tmp_path):
    msg = voc_error(str(tmp_path / 'nowhere'))
    assert str(tmp_path / 'nowhere') in msg
    assert '--dataset-root' in msg and 'make_synthetic_data.py voc --root DIR' in msg
    assert isinstance(DatasetError('x'), ValueError)


def test_voc_root_one_level_off(voc):
    msg = voc_error(os.path.dirname(voc), [(2007, 'trainval')])
    assert os.path.join(os.path.dirname(voc), 'VOC2007') in msg and 'contains VOC2007/' in msg


def test_voc_missing_split_list(voc):
    msg = voc_error(voc, [(2012, 'test')])
    assert os.path.join(voc, 'VOC2012', 'ImageSets', 'Main', 'test.txt') in msg


@pytest.mark.parametrize('year,split', [(2007, 'trainval'), (2007, 'test')])
def test_voc_empty_split_list(voc, year, split):
    # gluoncv would train on VOC2012 alone without a word, or validate over no image
    list_file = os.path.join(voc, 'VOC{}'.format(year), 'ImageSets', 'Main', split + '.txt')
    with open(list_file, 'w') as f:
        f.write('\n')  # blank lines are no ids either
    msg = voc_error(voc)
    assert '{} lists no image ids'.format(list_file) in msg and msg.startswith('1 problem')


def test_voc_missing_annotation_and_image(voc):
    image_id = first_trainval(voc)
    os.remove(xml_path(voc, image_id))
    os.remove(os.path.join(voc, 'VOC2007', 'JPEGImages', image_id + '.jpg'))
    msg = voc_error(voc)
    assert xml_path(voc, image_id) + ' is missing' in msg
    assert os.path.join(voc, 'VOC2007', 'JPEGImages', image_id + '.jpg') + ' is missing' in msg
    assert msg.startswith('2 problems')


def test_voc_empty_and_broken_jpeg(voc):
    image_id = first_trainval(voc)
    jpg = os.path.join(voc, 'VOC2007', 'JPEGImages', image_id + '.jpg')
    open(jpg, 'w').close()
    assert jpg + ' is empty (0 bytes)' in voc_error(voc)
    with open(jpg, 'wb') as f:
        f.write(b'not a jpeg at all')
    assert jpg + ' is not an image file:' in voc_error(voc)


def test_voc_malformed_xml(voc):
    path = xml_path(voc, first_trainval(voc))
    with open(path) as f:
        text = f.read()
    with open(path, 'w') as f:
        f.write(text.replace('</size>', '</sise>', 1))
    msg = voc_error(voc)
    line = text[:text.index('</size>')].count('\n') + 1
    assert path in msg and 'not well-formed XML (line {}, column'.format(line) in msg


def test_voc_missing_fields(voc):
    path = xml_path(voc, first_trainval(voc))

    def drop(root):
        obj = root.find('object')
        obj.remove(obj.find('difficult'))
        box = obj.find('bndbox')
        box.remove(box.find('xmax'))
    edit_xml(path, drop)
    msg = voc_error(voc)
    assert re.search(re.escape(path) + r", object #0 \('\w+'\): <difficult> missing", msg)
    assert '<bndbox> with numeric xmin, ymin, xmax, ymax missing' in msg


def test_voc_box_outside_image(voc):
    path = xml_path(voc, first_trainval(voc))
    root = ET.parse(path).getroot()
    width = int(root.find('size/width').text)
    height = int(root.find('size/height').text)
    obj = root.findall('object')[-1]
    k, name = len(root.findall('object')) - 1, obj.find('name').text

    def widen(r):
        r.findall('object')[-1].find('bndbox/xmax').text = str(width + 40)
    edit_xml(path, widen)
    msg = voc_error(voc)
    assert "{}, object #{} ('{}')".format(path, k, name) in msg
    assert 'xmax={}'.format(width + 40) in msg and 'lies outside the image' in msg
    assert 'of size {}x{}'.format(width, height) in msg and 'Fix the coordinates' in msg


def test_voc_degenerate_box(voc):
    path = xml_path(voc, first_trainval(voc))

    def flip(r):
        box = r.find('object/bndbox')
        box.find('xmax').text = box.find('xmin').text
    edit_xml(path, flip)
    msg = voc_error(voc)
    assert path in msg and 'is degenerate' in msg


def test_voc_unknown_class_and_empty_image(voc):
    path = xml_path(voc, first_trainval(voc))

    def rename(r):
        for obj in r.findall('object'):
            obj.find('name').text = 'unicorn'
    edit_xml(path, rename)
    msg = voc_error(voc)
    assert "unknown class 'unicorn'" in msg
    # with every object unknown the image has nothing left to train on
    assert path + ' has no valid object' in msg and 'ImageSets' in msg
    # accepted when the caller declares the class
    classes = ('unicorn', 'bus', 'car', 'cat', 'dog', 'person')
    check_voc(voc, SPLITS, classes=classes)


def test_voc_image_without_objects(voc):
    path = xml_path(voc, first_trainval(voc, 2012), 2012)

    def strip(r):
        for obj in r.findall('object'):
            r.remove(obj)
    edit_xml(path, strip)
    msg = voc_error(voc)
    assert msg.startswith('1 problem in VOC dataset')
    assert path + ' has no valid object' in msg and 'remove' in msg


def test_voc_size_mismatch(voc):
    path = xml_path(voc, first_trainval(voc))
    edit_xml(path, lambda r: setattr(r.find('size/width'), 'text', '999'))
    msg = voc_error(voc)
    assert path in msg and 'says the image is 999x' in msg


def test_voc_many_problems_are_counted(voc):
    with open(os.path.join(voc, 'VOC2007', 'ImageSets', 'Main', 'trainval.txt')) as f:
        ids = f.read().split()
    for image_id in ids:
        os.remove(xml_path(voc, image_id))
    with pytest.raises(DatasetError) as info:
        check_voc(voc, [(2007, 'trainval')])
    msg = str(info.value)
    assert len(info.value.problems) == 16
    assert msg.startswith('16 problems in VOC dataset') and '(first 10 shown)' in msg
    assert msg.count(' is missing') == 10 and msg.rstrip().endswith('... and 6 more.')


def test_voc_blank_line_in_list(voc):
    list_file = os.path.join(voc, 'VOC2007', 'ImageSets', 'Main', 'trainval.txt')
    with open(list_file) as f:
        lines = f.readlines()
    with open(list_file, 'w') as f:
        f.writelines(lines[:2] + ['\n'] + lines[2:])
    assert list_file + ' line 3 is empty' in voc_error(voc)


# ---------------------------------------------------------------- COCO
def coco_json(root, split='instances_train2017'):
    return os.path.join(root, 'annotations', split + '.json')


def rewrite(path, fn):
    with open(path) as f:
        data = json.load(f)
    fn(data)
    with open(path, 'w') as f:
        json.dump(data, f)


def coco_error(root, split='instances_train2017', **kw):
    with pytest.raises(DatasetError) as info:
        check_coco(root, split, **kw)
    return str(info.value)


def test_coco_accepts_generated(coco):
    from gluontrain.data.synthetic import COCO_CATEGORIES
    with open(coco_json(coco)) as f:
        n_ann = len(json.load(f)['annotations'])
    assert check_coco(coco, 'instances_train2017') == {'images': 12, 'annotations': n_ann}
    names = [c['name'] for c in sorted(COCO_CATEGORIES, key=lambda c: c['id'])]
    assert check_coco(coco, 'instances_val2017', classes=names)['images'] == 6
    assert 'categories' in coco_error(coco, classes=names[:10])


def test_coco_missing_root_and_file(coco, tmp_path):
    msg = coco_error(str(tmp_path / 'nowhere'))
    assert str(tmp_path / 'nowhere') in msg and 'make_synthetic_data.py coco' in msg
    msg = coco_error(coco, 'instances_test2017')
    assert coco_json(coco, 'instances_test2017') in msg and '--dataset-root' in msg


def test_coco_malformed_json(coco):
    path = coco_json(coco)
    with open(path, 'w') as f:
        f.write('{"images": [],\n  "annotations": [}\n')
    msg = coco_error(coco)
    assert path in msg and 'not valid JSON (line 2, column 19' in msg


def test_coco_missing_keys(coco):
    rewrite(coco_json(coco), lambda d: d.pop('categories'))
    msg = coco_error(coco)
    assert coco_json(coco) in msg and "['categories']" in msg


def test_coco_bad_boxes_and_category(coco):
    path = coco_json(coco)
    with open(path) as f:
        data = json.load(f)
    images = {im['id']: im for im in data['images']}
    a0, a1, a2 = data['annotations'][:3]
    im0 = images[a0['image_id']]

    def corrupt(d):
        anns = d['annotations']
        anns[0]['bbox'][2] = im0['width']  # x + w beyond the right edge
        anns[1]['bbox'][3] = 0
        anns[2]['category_id'] = 12  # a gap in COCO's ids
    rewrite(path, corrupt)
    with pytest.raises(DatasetError) as info:
        check_coco(coco, 'instances_train2017')
    msg = str(info.value)
    assert len(info.value.problems) == 3
    assert 'annotation id {} (image {})'.format(a0['id'], im0['file_name']) in msg
    assert 'reaches outside the {}x{} image'.format(im0['width'], im0['height']) in msg
    assert 'annotation id {}'.format(a1['id']) in msg and 'non-positive width/height' in msg
    assert 'annotation id {}'.format(a2['id']) in msg and 'category_id 12 is not in' in msg
    assert msg.count(path) == 1 + 3  # the header, then each problem


def test_coco_box_within_one_pixel_is_fine(coco):
    def nudge(d):
        im = {i['id']: i for i in d['images']}[d['annotations'][0]['image_id']]
        d['annotations'][0]['bbox'] = [-0.5, 0.0, im['width'] + 0.9, 10.0]
    rewrite(coco_json(coco), nudge)
    check_coco(coco, 'instances_train2017')


def test_coco_missing_image(coco):
    with open(coco_json(coco)) as f:
        name = json.load(f)['images'][0]['file_name']
    os.remove(os.path.join(coco, 'train2017', name))
    msg = coco_error(coco)
    assert os.path.join(coco, 'train2017', name) in msg and 'is missing' in msg


# ---------------------------------------------------------------- Visual Genome
def rewrite_h5(root, **changes):
    path = os.path.join(root, vg.H5_NAME)
    with h5py.File(path, 'r') as f:
        data = {k: f[k][:] for k in f}
    for key, value in changes.items():
        if value is None:
            data.pop(key)
        else:
            data[key] = value
    with h5py.File(path, 'w') as f:
        for k, v in data.items():
            f[k] = v
    return path


def vg_error(root):
    with pytest.raises(DatasetError) as info:
        check_vg(root)
    return str(info.value)


def test_vg_accepts_generated(vgr):
    with h5py.File(os.path.join(vgr, vg.H5_NAME), 'r') as f:
        n_box, n_rel = len(f['labels']), len(f['relationships'])
    assert check_vg(vgr) == {'images': 18, 'boxes': n_box, 'relationships': n_rel}


def test_vg_missing_files(vgr, tmp_path):
    assert 'make_synthetic_data.py vg' in vg_error(str(tmp_path / 'nowhere'))
    os.remove(os.path.join(vgr, vg.DICTS_NAME))
    msg = vg_error(vgr)
    assert os.path.join(vgr, vg.DICTS_NAME) + ' is missing' in msg


def test_vg_missing_h5_key(vgr):
    path = rewrite_h5(vgr, predicates=None)
    msg = vg_error(vgr)
    assert path in msg and "['predicates']" in msg


def test_vg_inconsistent_ranges(vgr):
    with h5py.File(os.path.join(vgr, vg.H5_NAME), 'r') as f:
        first, last = f['img_to_first_box'][:], f['img_to_last_box'][:]
    bad = last.copy()
    bad[3] = first[3] - 1
    path = rewrite_h5(vgr, img_to_last_box=bad)
    msg = vg_error(vgr)
    assert '{}: image #3 (image_id 4)'.format(path) in msg and 'box range' in msg
    rewrite_h5(vgr, img_to_last_box=last, img_to_first_rel=np.zeros(5, np.int32))
    assert 'img_to_first_rel has 5 entries but split has 18' in vg_error(vgr)


def test_load_vg_refuses_inverted_box_ranges_naming_the_file(vgr):
    with h5py.File(os.path.join(vgr, vg.H5_NAME), 'r') as f:
        first, last = f['img_to_first_box'][:], f['img_to_last_box'][:]
    bad = last.copy()
    bad[3] = first[3] - 1  # read as an image without boxes by the slicing, silently
    path = rewrite_h5(vgr, img_to_last_box=bad)
    with pytest.raises(DatasetError) as info:
        vg.load_vg(vgr, 'train', filter_empty_rels=False)
    assert '{}: image #3 (image_id 4)'.format(path) in str(info.value)


def test_vg_relationship_outside_image(vgr):
    with h5py.File(os.path.join(vgr, vg.H5_NAME), 'r') as f:
        rels = f['relationships'][:]
        first_rel = f['img_to_first_rel'][:]
        last_box = f['img_to_last_box'][:]
    i = int(np.flatnonzero(first_rel >= 0)[0])
    rels[first_rel[i], 1] = last_box[i] + 1  # the next image's first box
    path = rewrite_h5(vgr, relationships=rels)
    msg = vg_error(vgr)
    assert '{}: image #{}'.format(path, i) in msg
    assert 'relationship #{}'.format(first_rel[i]) in msg and 'points outside' in msg


def test_vg_bad_labels_and_image(vgr):
    with h5py.File(os.path.join(vgr, vg.H5_NAME), 'r') as f:
        labels = f['labels'][:]
    labels[2, 0] = 99
    rewrite_h5(vgr, labels=labels)
    os.remove(os.path.join(vgr, vg.IMAGE_DIR, '5.jpg'))
    msg = vg_error(vgr)
    assert 'labels at rows [2] are outside 1..8' in msg
    assert os.path.join(vgr, vg.IMAGE_DIR, '5.jpg') in msg


# ---------------------------------------------------------------- non-finite numbers, sizes
@pytest.mark.parametrize('value', ['nan', 'inf'])
def test_voc_non_finite_coordinate_is_named_as_such(voc, value):
    image_id = first_trainval(voc)
    path = xml_path(voc, image_id)
    name = ET.parse(path).getroot().find('object/name').text

    def spoil(r):
        r.find('object/bndbox/ymin').text = value  # float() reads it
    edit_xml(path, spoil)
    msg = voc_error(voc)
    assert msg.startswith('1 problem')
    assert re.search(r"{}, object #0 \('{}'\): box \(xmin=\d+, ymin={}, xmax=\d+, ymax=\d+\) has a "
                     r"non-finite coordinate; write pixel numbers".format(
                         re.escape(path), name, value), msg)
    assert 'outside' not in msg


@pytest.mark.parametrize('value', [float('nan'), float('inf')])
def test_coco_non_finite_bbox_is_named(coco, value):
    path = coco_json(coco)
    with open(path) as f:
        ann = json.load(f)['annotations'][3]
    rewrite(path, lambda d: d['annotations'][3]['bbox'].__setitem__(2, value))
    msg = coco_error(coco)
    assert msg.startswith('1 problem')
    assert re.search(r'{}: annotation id {} \(image {:012d}\.jpg\): bbox \[.*{}.*\] has a '
                     r'non-finite value; write pixel numbers'.format(
                         re.escape(path), ann['id'], ann['image_id'], str(value)), msg)


def test_coco_bbox_of_strings_is_named(coco):
    path = coco_json(coco)
    rewrite(path, lambda d: d['annotations'][0].__setitem__('bbox', ['1', 2, 3, 4]))
    assert "bbox must hold four numbers [x, y, width, height], got ['1', 2, 3, 4]" in \
        coco_error(coco)


def test_coco_declared_size_contradicting_the_file_warns(coco):
    path = coco_json(coco)
    with open(path) as f:
        img = json.load(f)['images'][0]
    rewrite(path, lambda d: d['images'][0].__setitem__('height', img['height'] + 9))
    with pytest.warns(UserWarning, match=r'{} is {}x{} but {} \(image id {}\) says {}x{}; boxes '
                      r'are clipped to the declared size'.format(
                          img['file_name'], img['width'], img['height'], re.escape(path),
                          img['id'], img['width'], img['height'] + 9)):
        check_coco(coco, 'instances_train2017')
    rewrite(path, lambda d: d['images'][0].__setitem__('height', 'tall'))
    assert "image entry {} has width/height {}x'tall'".format(img['id'], img['width']) in \
        coco_error(coco)


def test_vg_non_finite_box_is_named(vgr):
    path = os.path.join(vgr, vg.H5_NAME)
    with h5py.File(path, 'a') as f:
        boxes = f['boxes_1024'][:].astype(np.float64)
        first = int(f['img_to_first_box'][2])
        boxes[first, 0] = np.inf
        del f['boxes_1024']
        f['boxes_1024'] = boxes
    with pytest.raises(DatasetError, match=r'{}: boxes_1024 row {} \(image #2 \(image_id 3\)\) = '
                       r'\[inf, .*\] is not finite'.format(re.escape(path), first)):
        check_vg(vgr, check_images=False)
