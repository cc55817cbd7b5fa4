"""ssd.pytorch's VOC / COCO datasets and collate functions on the generated datasets."""
import json
import os
import re
import shutil

import cv2
import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

from launch import LOADER_CONTEXT  # tests/launch.py
from gluontrain.torch import data as D
from gluontrain.torch.batchify import Pad, Stack, Tuple
from gluontrain.torch.ssd.data import detection_collate
from gluontrain.torch.ssd.augmentations import BaseTransform, SSDAugmentation

torch.set_num_threads(1)
MEAN = (104, 117, 123)


def xml_objects(path):
    """(name, difficult, xmin, ymin, xmax, ymax, width, height) read with regexes, not ET."""
    text = open(path).read()
    width = int(re.search(r'<width>(\d+)</width>', text).group(1))
    height = int(re.search(r'<height>(\d+)</height>', text).group(1))
    out = []
    for obj in re.findall(r'<object>(.*?)</object>', text, re.S):
        get = lambda tag: re.search(r'<%s>(.*?)</%s>' % (tag, tag), obj).group(1)
        out.append((get('name'), int(get('difficult'))) +
                   tuple(int(get(t)) for t in ('xmin', 'ymin', 'xmax', 'ymax')) +
                   (width, height))
    return out


def expected_voc_target(path, keep_difficult=False):
    rows = []
    for name, diff, x1, y1, x2, y2, w, h in xml_objects(path):
        if diff and not keep_difficult:
            continue
        rows.append([(x1 - 1) / w, (y1 - 1) / h, (x2 - 1) / w, (y2 - 1) / h,
                     D.VOC_CLASSES.index(name)])
    return np.array(rows, dtype=np.float32).reshape(-1, 5)


def test_ssd_data_voc_classes():
    assert len(D.VOC_CLASSES) == 20
    assert D.VOC_CLASSES[0] == 'aeroplane' and D.VOC_CLASSES[14] == 'person'
    assert D.VOC_CLASSES[19] == 'tvmonitor'


def test_ssd_data_voc_targets_equal_xml(voc_root):
    ds = D.VOCDetection(voc_root, [('2007', 'trainval'), ('2012', 'trainval')])
    assert len(ds) == 32 and ds.name == 'VOC0712'
    dropped = 0
    for i in range(len(ds)):
        rootpath, img_id = ds.ids[i]
        xml = os.path.join(rootpath, 'Annotations', img_id + '.xml')
        img, target = ds[i]
        np.testing.assert_allclose(target, expected_voc_target(xml), rtol=1e-6)
        assert target.dtype == np.float32
        # no transform: the raw BGR uint8 image, CHW, as the reference
        bgr = cv2.imread(os.path.join(rootpath, 'JPEGImages', img_id + '.jpg'))
        assert img.dtype == torch.uint8 and torch.equal(img, torch.from_numpy(bgr).permute(2, 0, 1))
        _, _, h, w = ds.pull_item(i)
        assert (h, w) == bgr.shape[:2]
        kept = D.VOCDetection(voc_root, [(rootpath[-4:], 'trainval')],
                              target_transform=D.VOCAnnotationTransform(keep_difficult=True))
        full = kept.pull_item(kept.ids.index((rootpath, img_id)))[1]
        np.testing.assert_allclose(full, expected_voc_target(xml, True), rtol=1e-6)
        dropped += len(full) - len(target)
    assert dropped > 0  # the fixture has difficult objects, and they were dropped


def test_ssd_data_voc_pull_anno_and_image(voc_root):
    ds = D.VOCDetection(voc_root, [('2007', 'test')])
    assert len(ds) == 8
    img_id, rows = ds.pull_anno(0)
    assert img_id == ds.ids[0][1]
    objs = [o for o in xml_objects(os.path.join(ds.ids[0][0], 'Annotations', img_id + '.xml'))
            if not o[1]]
    assert rows == [[o[2] - 1, o[3] - 1, o[4] - 1, o[5] - 1, D.VOC_CLASSES.index(o[0])]
                    for o in objs]
    assert ds.pull_image(0).shape[2] == 3 and ds.pull_image(0).dtype == np.uint8
    assert ds.pull_tensor(0).shape == (1,) + ds.pull_image(0).shape


def test_ssd_data_voc_with_base_transform(voc_root):
    ds = D.VOCDetection(voc_root, [('2007', 'test')], transform=BaseTransform(300, MEAN))
    img, target = ds[1]
    bgr = ds.pull_image(1)
    expected = cv2.resize(bgr, (300, 300)).astype(np.float32) - np.float32(MEAN)
    # float CHW, channels flipped to RGB as the reference's pull_item
    assert img.dtype == torch.float32 and img.shape == (3, 300, 300)
    assert torch.equal(img, torch.from_numpy(expected[:, :, ::-1].copy()).permute(2, 0, 1))
    np.testing.assert_allclose(target, D.VOCDetection(voc_root, [('2007', 'test')])[1][1])


def test_ssd_data_voc_with_augmentation_and_empty_images(voc_root, tmp_path):
    root = str(tmp_path / 'VOCdevkit')
    shutil.copytree(voc_root, root)
    ds = D.VOCDetection(root, [('2007', 'trainval')], transform=SSDAugmentation(300, MEAN))
    xml = os.path.join(ds.ids[0][0], 'Annotations', ds.ids[0][1] + '.xml')
    text = open(xml).read()
    with open(xml, 'w') as f:
        f.write(re.sub(r'<difficult>0</difficult>', '<difficult>1</difficult>', text))
    np.random.seed(0)
    img, target = ds[0]  # every object difficult: kept with an empty target
    assert img.shape == (3, 300, 300) and target.shape == (0, 5)
    for i in range(1, len(ds)):
        img, target = ds[i]
        assert img.shape == (3, 300, 300) and img.dtype == torch.float32
        assert target.shape[1] == 5 and target.dtype == np.float32
        assert np.all((target[:, :4] >= 0) & (target[:, :4] <= 1))
        assert np.all(target[:, 0] < target[:, 2]) and np.all(target[:, 1] < target[:, 3])
        assert set(target[:, 4].tolist()) <= {5, 6, 7, 11, 14}  # the five generated classes
    batch = detection_collate([ds[0], ds[1]])
    assert batch[1][0].shape == (0, 5)
    imgs, padded = Tuple(Stack(), Pad(pad_val=-1))([ds[0], ds[1]])
    assert padded.shape[0] == 2 and torch.all(padded[0] == -1)


def test_ssd_data_coco_label_map(coco_root, tmp_path):
    ann = os.path.join(coco_root, 'annotations', 'instances_train2017.json')
    label_map = D.get_label_map(ann)
    assert sorted(label_map.values()) == list(range(1, 81))
    # lines of the reference's data/coco_labels.txt (id, index, name)
    assert (label_map[1], label_map[11], label_map[13], label_map[78], label_map[90]) == \
        (1, 11, 12, 69, 80)
    ref_txt = str(tmp_path / 'coco_labels.txt')
    cats = sorted(json.load(open(ann))['categories'], key=lambda c: c['id'])
    with open(ref_txt, 'w') as f:
        f.writelines('%d,%d,%s\n' % (c['id'], i + 1, c['name']) for i, c in enumerate(cats))
    assert D.get_label_map(ref_txt) == label_map
    assert len(D.COCO_CLASSES) == 80
    assert D.COCO_CLASSES[10] == 'fire hydrant' and D.COCO_CLASSES[68:70] == ('microwave',
                                                                                'oven')
    assert D.COCOAnnotationTransform().label_map == label_map


def test_ssd_data_coco_targets(coco_root):
    ds = D.COCODetection(coco_root, 'train2017')
    raw = json.load(open(os.path.join(coco_root, 'annotations', 'instances_train2017.json')))
    rank = {c['id']: i for i, c in enumerate(sorted(raw['categories'], key=lambda c: c['id']))}
    images = {im['id']: im for im in raw['images']}
    anns = {}
    for a in raw['annotations']:
        anns.setdefault(a['image_id'], []).append(a)
    assert sorted(ds.ids) == sorted(anns)
    labels = set()
    for i, img_id in enumerate(ds.ids):
        w, h = images[img_id]['width'], images[img_id]['height']
        expected = [[x / w, y / h, (x + bw) / w, (y + bh) / h, rank[a['category_id']]]
                    for a in anns[img_id] for x, y, bw, bh in [a['bbox']]]
        for _ in range(2):  # twice: the reference grew the cached boxes on every call
            img, target, hh, ww = ds.pull_item(i)
            np.testing.assert_allclose(target, np.float32(expected), rtol=1e-6)
        assert (hh, ww) == (h, w) and img.shape == (3, h, w)
        labels |= set(target[:, 4].tolist())
    assert labels <= set(range(80)) and labels >= {0, 2, 62}  # person, car, tv
    val = D.COCODetection(coco_root, 'val2017')
    raw_val = json.load(open(os.path.join(coco_root, 'annotations', 'instances_val2017.json')))
    # the image without annotations is not listed, as in the reference
    assert len(val) == len({a['image_id'] for a in raw_val['annotations']}) == 5
    with pytest.raises(FileNotFoundError, match='instances_test2017.json'):
        D.COCODetection(coco_root, 'test2017')


@pytest.mark.parametrize('workers', [0, 1])
def test_ssd_data_collate_on_dataloader(voc_root, coco_root, workers):
    """Both collations give the samples, in order, in this process and from a spawned worker
    process (the batch pickled back). One worker, not two: the one batch read comes from the
    first worker either way, and each spawned worker imports torch (was 12.8 s of CPU with
    two, about 6 s with one)."""
    voc = D.VOCDetection(voc_root, [('2007', 'test')], transform=BaseTransform(64, MEAN))
    coco = D.COCODetection(coco_root, 'val2017', transform=BaseTransform(64, MEAN))
    for ds in (voc, coco):
        samples = [ds[i] for i in range(4)]
        loader = DataLoader(ds, batch_size=4, num_workers=workers, collate_fn=detection_collate,
                            multiprocessing_context=LOADER_CONTEXT if workers else None)
        imgs, targets = next(iter(loader))
        assert imgs.shape == (4, 3, 64, 64)
        assert torch.equal(imgs, torch.stack([s[0] for s in samples]))
        assert isinstance(targets, list) and len(targets) == 4
        for t, s in zip(targets, samples):
            assert t.dtype == torch.float32 and torch.equal(t, torch.from_numpy(s[1]))
        loader = DataLoader(ds, batch_size=4, num_workers=workers,
                            collate_fn=Tuple(Stack(), Pad(pad_val=-1)))
        imgs, padded = next(iter(loader))
        n = max(len(s[1]) for s in samples)
        assert imgs.shape == (4, 3, 64, 64) and padded.shape == (4, n, 5)
        assert padded.dtype == torch.float32
        for row, s in zip(padded, samples):
            k = len(s[1])
            assert torch.equal(row[:k], torch.from_numpy(s[1])) and torch.all(row[k:] == -1)
        assert min(len(s[1]) for s in samples) < n  # something was padded
