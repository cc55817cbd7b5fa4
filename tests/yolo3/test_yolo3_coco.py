"""yolo3.coco: GluonCV's COCODetection items and labels, read in numpy + pycocotools.

Edge annotations are added to a generated COCO split (a box past the image, zero area, an
``ignore`` flag, a sub-pixel width, a tiny box for ``min_object_area``); the hand-computed
labels are checked everywhere, and where gluoncv imports every item, label and image equals
its ``COCODetection``'s under each of its switches.
"""
import importlib.util
import json
import os

import numpy as np
import pytest

from gluontrain.data import synthetic
from gluontrain.data.checks import DatasetError
from gluontrain.yolo3.coco import COCO_CLASSES, COCODetection, coco_datasets

HAS_GLUONCV = all(importlib.util.find_spec(m) is not None for m in ('mxnet', 'gluoncv'))
needs_gluoncv = pytest.mark.skipif(not HAS_GLUONCV, reason='mxnet/gluoncv not installed: the '
                                   'live comparison runs gluoncv.data.COCODetection')
#: (bbox, area, extra keys) added to the first training image, and GluonCV's row for each
#: (None: dropped) on that image of width W and height H
EDGE = [([10.0, 5.0, 30.0, 20.0], 600.0, {}, lambda w, h: [10, 5, 39, 24]),
        ([-4.0, 3.0, 1000.0, 7.5], 100.0, {}, lambda w, h: [0, 3, w - 1, 9.5]),
        ([2.0, 2.0, 10.0, 10.0], 0.0, {}, None),              # zero area
        ([2.0, 2.0, 10.0, 10.0], 100.0, {'ignore': 1}, None),
        ([8.0, 8.0, 0.5, 10.0], 5.0, {}, None),               # w - 1 < 0: xmax == xmin
        ([3.0, 4.0, 2.0, 2.0], 4.0, {}, lambda w, h: [3, 4, 4, 5])]


@pytest.fixture(scope='module')
def edge_root(tmp_path_factory):
    root = synthetic.write_coco(str(tmp_path_factory.mktemp('coco_edges') / 'coco'),
                                num_train=6, num_val=6, seed=1, image_size=(64, 96),
                                crowd_prob=0.5)
    path = os.path.join(root, 'annotations', 'instances_train2017.json')
    with open(path) as f:
        data = json.load(f)
    first = min(i['id'] for i in data['images'])
    next_id = max(a['id'] for a in data['annotations']) + 1
    for k, (bbox, area, extra, _) in enumerate(EDGE):
        data['annotations'].append(dict({'id': next_id + k, 'image_id': first, 'bbox': bbox,
                                         'area': area, 'iscrowd': 0, 'category_id': 18,
                                         'segmentation': [[0, 0, 1, 0, 1, 1]]}, **extra))
    with open(path, 'w') as f:
        json.dump(data, f)
    return root


def test_edge_annotations_as_gluoncv_converts_and_clips_them(edge_root):
    train = COCODetection(edge_root, 'instances_train2017')
    with open(os.path.join(edge_root, 'annotations', 'instances_train2017.json')) as f:
        first = min(json.load(f)['images'], key=lambda i: i['id'])
    label = np.array(train.labels[0])
    dog = COCO_CLASSES.index('dog')  # category id 18
    want = [row(first['width'], first['height']) + [dog] for *_, row in EDGE if row]
    np.testing.assert_array_equal(label[-len(want):], want)
    tiny = COCODetection(edge_root, 'instances_train2017', min_object_area=5)
    assert len(tiny.labels[0]) == len(label) - 1  # the 2 x 2 box (area 4) goes


def test_empty_images_are_kept_with_a_minus_one_row_only_when_asked(edge_root):
    kept = COCODetection(edge_root, 'instances_val2017', skip_empty=False)
    skipped = COCODetection(edge_root, 'instances_val2017')
    empty = [i for i, lab in enumerate(kept.labels) if lab == [[-1, -1, -1, -1, -1]]]
    assert len(empty) == 1 and len(skipped) == len(kept) - 1
    img, label = kept[empty[0]]
    assert img.dtype == np.uint8 and img.ndim == 3 and label.tolist() == [[-1] * 5]


def test_crowd_regions_go_with_use_crowd_false(edge_root):
    with open(os.path.join(edge_root, 'annotations', 'instances_train2017.json')) as f:
        crowds = sum(a['iscrowd'] for a in json.load(f)['annotations'])
    assert crowds > 0
    both = sum(len(lab) for lab in COCODetection(edge_root, 'instances_train2017').labels)
    without = sum(len(lab) for lab in COCODetection(edge_root, 'instances_train2017',
                                                    use_crowd=False).labels)
    assert both - without == crowds


@needs_gluoncv
@pytest.mark.parametrize('split,kwargs', [
    ('instances_train2017', {}), ('instances_train2017', {'use_crowd': False}),
    ('instances_train2017', {'min_object_area': 5}), ('instances_val2017', {}),
    ('instances_val2017', {'skip_empty': False})])
def test_items_labels_and_images_equal_gluoncvs(edge_root, split, kwargs):
    import gluontrain.mx  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
    from gluoncv.data import COCODetection as GluonCOCO  # noqa: E501  pylint: disable=import-outside-toplevel
    theirs = GluonCOCO(root=edge_root, splits=split, **kwargs)
    ours = COCODetection(edge_root, split, **kwargs)
    assert ours.items == theirs._items
    assert ours.contiguous_id_to_json == theirs.contiguous_id_to_json
    assert list(ours.classes) == theirs.classes
    for k in range(len(ours)):
        img, label = ours[k]
        their_img, their_label = theirs[k]
        assert label.dtype == their_label.dtype
        np.testing.assert_array_equal(label, their_label)
        if k < 2:
            np.testing.assert_array_equal(img, their_img.asnumpy())


def test_other_categories_are_refused_naming_the_file(tmp_path):
    root = synthetic.write_coco(str(tmp_path / 'coco'), num_train=1, num_val=1, seed=0,
                                image_size=64)
    path = os.path.join(root, 'annotations', 'instances_val2017.json')
    with open(path) as f:
        data = json.load(f)
    data['categories'] = data['categories'][:10]
    with open(path, 'w') as f:
        json.dump(data, f)
    with pytest.raises(DatasetError, match=r'instances_val2017.json: the categories are not '
                       r"COCO's 80 .* use --dataset coco-json, or custom"):
        COCODetection(root, 'instances_val2017')


def test_coco_datasets_are_gluoncvs_training_splits(coco_root):
    class Args:
        dataset_root = coco_root
    train, val = coco_datasets(Args)
    assert not train._use_crowd and train._skip_empty
    assert val._use_crowd and not val._skip_empty
    assert len(val) == len(val.coco.getImgIds())  # every validation image, the metric's order
    transformed = val.transform(lambda img, label: (img.shape, label.shape))
    assert transformed[0][1][1] == 5 and val._transform is None


def _own_json(root, tmp_path, split, categories, remap):
    """The generated split as your own COCO json: file_name with its folder, only
    ``categories`` (file order), category ids changed by ``remap``."""
    with open(os.path.join(root, 'annotations', 'instances_{}.json'.format(split))) as f:
        data = json.load(f)
    for image in data['images']:
        image['file_name'] = '{}/{}'.format(split, image['file_name'])
        del image['coco_url']
    data['annotations'] = [dict(a, category_id=remap[a['category_id']])
                           for a in data['annotations'] if a['category_id'] in remap]
    data['categories'] = categories
    path = str(tmp_path / 'my_{}.json'.format(split))
    with open(path, 'w') as f:
        json.dump(data, f)
    return path


@pytest.fixture
def own_coco(coco_root, tmp_path):
    # the generator's person (1), bicycle (2), car (3) as your ids 12, 7, 3, listed in that order
    cats = [{'id': 12, 'name': 'walker'}, {'id': 7, 'name': 'bike'}, {'id': 3, 'name': 'auto'}]
    remap = {1: 12, 2: 7, 3: 3}
    return (_own_json(coco_root, tmp_path, 'train2017', cats, remap),
            _own_json(coco_root, tmp_path, 'val2017', cats, remap), coco_root)


def _json_args(train, val, root, classes=''):
    import argparse  # pylint: disable=import-outside-toplevel
    return argparse.Namespace(train_json=train, val_json=val, dataset_root=root,
                              classes=classes)


def test_coco_json_maps_your_category_ids_in_file_order(own_coco):
    from gluontrain.yolo3.coco import coco_json_datasets  # noqa: E501  pylint: disable=import-outside-toplevel
    args = _json_args(*own_coco)
    train, val = coco_json_datasets(args)
    assert args.classes == 'walker,bike,auto' and train.classes == ('walker', 'bike', 'auto')
    assert train.json_id_to_contiguous == {12: 0, 7: 1, 3: 2}
    assert not train._use_crowd and not val._skip_empty and len(val) == 6
    with open(own_coco[0]) as f:
        data = json.load(f)
    by_image = {}
    for a in data['annotations']:
        if not a['iscrowd']:
            by_image.setdefault(a['image_id'], []).append({12: 0, 7: 1, 3: 2}[a['category_id']])
    ids = sorted(by_image)
    assert len(train) == len(ids)
    for k, image_id in enumerate(ids):
        assert sorted(np.array(train.labels[k])[:, 4].astype(int)) == sorted(by_image[image_id])
    img, _ = train[0]
    assert img.ndim == 3 and img.dtype == np.uint8


def test_coco_json_refusals_name_the_file(own_coco, tmp_path):
    from gluontrain.yolo3.coco import coco_json_datasets  # noqa: E501  pylint: disable=import-outside-toplevel
    with pytest.raises(DatasetError, match=r"its categories are walker,bike,auto \(in file "
                                           r"order\), not --classes bike,walker,auto"):
        coco_json_datasets(_json_args(*own_coco, classes='bike,walker,auto'))
    with pytest.raises(ValueError, match='--dataset coco-json needs --val-json'):
        coco_json_datasets(_json_args(own_coco[0], '', own_coco[2]))
    with open(own_coco[0]) as f:
        data = json.load(f)
    data['annotations'][0]['category_id'] = 99
    bad = str(tmp_path / 'bad.json')
    with open(bad, 'w') as f:
        json.dump(data, f)
    with pytest.raises(DatasetError, match=r'bad.json: annotation \d+ has category_id 99, '
                                           r'which its categories do not list'):
        coco_json_datasets(_json_args(bad, own_coco[1], own_coco[2]))
