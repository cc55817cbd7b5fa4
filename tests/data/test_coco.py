"""The COCO writer, read back by gluoncv's COCODetection and by pycocotools."""
import json
import os

import numpy as np
import pytest

from gluontrain.data import synthetic

# COCO 2017's category ids that are not used, and a few hand-checked categories
MISSING_IDS = [12, 26, 29, 30, 45, 66, 68, 69, 71, 83]
KNOWN = {1: ('person', 'person'), 3: ('car', 'vehicle'), 13: ('stop sign', 'outdoor'),
         44: ('bottle', 'kitchen'), 67: ('dining table', 'furniture'), 72: ('tv', 'electronic'),
         90: ('toothbrush', 'indoor')}


def load(root, split):
    with open(os.path.join(root, 'annotations', 'instances_{}.json'.format(split))) as f:
        return json.load(f)


def test_categories_are_the_real_80():
    cats = synthetic.COCO_CATEGORIES
    assert len(cats) == 80
    assert [c['id'] for c in cats] == [i for i in range(1, 91) if i not in MISSING_IDS]
    for cid, (name, sup) in KNOWN.items():
        cat = next(c for c in cats if c['id'] == cid)
        assert (cat['name'], cat['supercategory']) == (name, sup)


def test_categories_match_gluoncv():
    from gluontrain.mx import gluoncv
    names = [c['name'] for c in sorted(synthetic.COCO_CATEGORIES, key=lambda c: c['id'])]
    assert names == list(gluoncv.data.COCODetection.CLASSES)


def test_coco_layout(coco_root):
    assert sorted(os.listdir(coco_root)) == ['annotations', 'train2017', 'val2017']
    train, val = load(coco_root, 'train2017'), load(coco_root, 'val2017')
    for data, split, n in ((train, 'train2017', 12), (val, 'val2017', 6)):
        assert list(data) == ['info', 'licenses', 'images', 'annotations', 'categories']
        assert len(data['images']) == n and len(data['categories']) == 80
        files = sorted(os.listdir(os.path.join(coco_root, split)))
        assert files == sorted('{:012d}.jpg'.format(im['id']) for im in data['images'])
        for im in data['images']:
            assert im['file_name'] == '{:012d}.jpg'.format(im['id'])
            assert im['coco_url'].endswith('/{}/{}'.format(split, im['file_name']))
            assert {'license', 'date_captured', 'flickr_url', 'width', 'height'} <= set(im)
            assert 112 <= im['width'] <= 144 and 112 <= im['height'] <= 144
    ids = [im['id'] for im in train['images'] + val['images']]
    assert len(set(ids)) == 18 and max(ids) - min(ids) > 18  # unique, non-contiguous
    ann_ids = [a['id'] for a in train['annotations'] + val['annotations']]
    assert len(set(ann_ids)) == len(ann_ids)
    annotated = {a['image_id'] for a in val['annotations']}
    assert len([im for im in val['images'] if im['id'] not in annotated]) == 1
    default_ids = {c['id'] for c in synthetic.COCO_CATEGORIES
                   if c['name'] in synthetic.DEFAULT_COCO_CATEGORIES}
    assert {a['category_id'] for a in train['annotations']} <= default_ids


def _gluoncv_label(ann, width, height):
    """gluoncv's conversion, by hand: xywh -> xyxy with w - 1, clipped to size - 1."""
    x, y, w, h = ann['bbox']
    return [min(width - 1.0, max(0.0, x)), min(height - 1.0, max(0.0, y)),
            min(width - 1.0, max(0.0, x + max(w - 1, 0))),
            min(height - 1.0, max(0.0, y + max(h - 1, 0)))]


def test_gluoncv_reads_coco_train(coco_root):
    from gluontrain.mx import gluoncv
    ds = gluoncv.data.COCODetection(root=coco_root, splits='instances_train2017')
    data = load(coco_root, 'train2017')
    assert len(ds) == 12
    cat_ids = sorted(c['id'] for c in data['categories'])
    images = sorted(data['images'], key=lambda im: im['id'])
    for idx, im in enumerate(images):
        img, label = ds[idx]
        assert img.shape == (im['height'], im['width'], 3)
        anns = [a for a in data['annotations'] if a['image_id'] == im['id']]
        expected = [_gluoncv_label(a, im['width'], im['height']) +
                    [cat_ids.index(a['category_id'])] for a in anns]
        np.testing.assert_allclose(label, np.array(expected))


def test_gluoncv_reads_coco_val_with_empty(coco_root):
    from gluontrain.mx import gluoncv
    kept = gluoncv.data.COCODetection(root=coco_root, splits='instances_val2017')
    everything = gluoncv.data.COCODetection(root=coco_root, splits='instances_val2017',
                                            skip_empty=False)
    assert len(everything) == 6 and len(kept) == 5
    empties = [i for i in range(6) if everything[i][1][0][4] == -1]
    assert len(empties) == 1
    assert everything[empties[0]][1].tolist() == [[-1, -1, -1, -1, -1]]


def test_pycocotools_polygons_match_boxes(coco_root):
    from pycocotools.coco import COCO
    coco = COCO(os.path.join(coco_root, 'annotations', 'instances_val2017.json'))
    data = load(coco_root, 'val2017')
    assert len(coco.getImgIds()) == 6
    assert len(coco.getAnnIds()) == len(data['annotations']) > 0
    assert len(coco.getCatIds()) == 80
    for ann in coco.loadAnns(coco.getAnnIds()):
        mask = coco.annToMask(ann)
        ys, xs = np.nonzero(mask)
        x, y, w, h = ann['bbox']
        # polygon raster vs the box measured from the drawn shape: within a pixel or two
        # (pycocotools drops the thinnest pixels of a star's tips)
        assert abs(xs.min() - x) <= 2 and abs(xs.max() + 1 - (x + w)) <= 2
        assert abs(ys.min() - y) <= 2 and abs(ys.max() + 1 - (y + h)) <= 2
        # raster conventions differ along the outline: up to about one perimeter pixel row
        assert abs(mask.sum() - ann['area']) <= max(0.1 * ann['area'], w + h)


def test_crowd_regions_are_rle(tmp_path):
    from pycocotools.coco import COCO
    root = synthetic.write_coco(str(tmp_path), num_train=6, num_val=0, crowd_prob=1.0,
                                image_size=128, categories=['dog', 'cat'])
    coco = COCO(os.path.join(root, 'annotations', 'instances_train2017.json'))
    crowd = coco.loadAnns(coco.getAnnIds(iscrowd=True))
    assert len(crowd) >= 3
    for ann in crowd:
        assert ann['iscrowd'] == 1 and set(ann['segmentation']) == {'counts', 'size'}
        mask = coco.annToMask(ann)
        ys, xs = np.nonzero(mask)
        assert mask.sum() == ann['area']
        assert [xs.min(), ys.min(), xs.max() + 1 - xs.min(), ys.max() + 1 - ys.min()] == ann['bbox']
        assert ann['category_id'] in (17, 18)


def test_categories_argument(tmp_path):
    root = synthetic.write_coco(str(tmp_path), num_train=4, num_val=0, categories=[90, 'person'])
    data = load(root, 'train2017')
    assert len(data['categories']) == 80
    assert {a['category_id'] for a in data['annotations']} <= {1, 90}
    with pytest.raises(ValueError, match='unicorn'):
        synthetic.write_coco(str(tmp_path), categories=['unicorn'])
