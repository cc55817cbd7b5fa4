"""The VOC evaluation dataset (eval.py's ground truth) and image reading of gluontrain.torch.data."""
import os
import re
import shutil

import numpy as np
import pytest
import torch

from launch import LOADER_CONTEXT, as_list  # tests/launch.py
from gluontrain.torch.data import COCODetection, VOCDetection, VOCEvalDataset


def xml_rows(path, classes):
    text = open(path).read()
    rows = []
    for obj in re.findall(r'<object>(.*?)</object>', text, re.S):
        get = lambda tag: re.search(r'<%s>(.*?)</%s>' % (tag, tag), obj).group(1)  # noqa: E731
        rows.append([float(get(t)) for t in ('xmin', 'ymin', 'xmax', 'ymax')]
                    + [classes.index(get('name').strip()), int(get('difficult'))])
    return np.array(rows, np.float32).reshape(-1, 6)


def test_eval_dataset_items_are_the_xml_ground_truth(voc_root):
    ds = VOCEvalDataset(voc_root)
    ids = open(os.path.join(voc_root, 'VOC2007', 'ImageSets', 'Main', 'test.txt')).read().split()
    assert len(ds) == len(ids) == 8
    for k in range(len(ds)):
        img, gt, size = ds[k]
        xml = os.path.join(voc_root, 'VOC2007', 'Annotations', ids[k] + '.xml')
        assert np.array_equal(gt, xml_rows(xml, ds.classes))
        assert img.shape[0] == 3 and tuple(img.shape[1:]) == tuple(int(s) for s in size)


def test_missing_image_names_the_file(voc_root, tmp_path):
    root = str(tmp_path / 'voc')
    shutil.copytree(voc_root, root)
    ids = open(os.path.join(root, 'VOC2007', 'ImageSets', 'Main', 'test.txt')).read().split()
    os.remove(os.path.join(root, 'VOC2007', 'JPEGImages', ids[0] + '.jpg'))
    with pytest.raises(FileNotFoundError, match=ids[0] + '.jpg'):
        VOCEvalDataset(root)[0]
    with pytest.raises(FileNotFoundError, match=ids[0] + '.jpg'):
        VOCDetection(root, [('2007', 'test')]).pull_image(0)


@pytest.mark.parametrize('content, reason', [(b'', 'is empty (0 bytes)'),
                                             (b'not a jpeg', 'is not an image file OpenCV can '
                                              'decode')])
def test_unreadable_image_is_one_line_also_from_a_worker(voc_root, coco_root, tmp_path, content,
                                                         reason):
    root = str(tmp_path / 'voc')
    shutil.copytree(voc_root, root)
    ds = VOCDetection(root, [('2007', 'test')])
    path = ds._image_path(1)
    with open(path, 'wb') as f:
        f.write(content)
    xml = os.path.join(root, 'VOC2007', 'Annotations', ds.ids[1][1] + '.xml')
    expected = ('image {} {} (annotation {}): restore the file (re-encode or re-download it), '
                'or remove the image from its dataset'.format(path, reason, xml))
    with pytest.raises(ValueError, match='^' + re.escape(expected) + '$'):
        ds.pull_image(1)
    with pytest.raises(ValueError, match='^' + re.escape(expected) + '$'):
        VOCEvalDataset(root)[1]
    loader = torch.utils.data.DataLoader(ds, batch_size=1, sampler=[1], num_workers=1,
                                         collate_fn=as_list,
                                         multiprocessing_context=LOADER_CONTEXT)
    with pytest.raises(ValueError, match='^' + re.escape(expected) + '$'):
        next(iter(loader))
    coco = tmp_path / 'coco'
    shutil.copytree(coco_root, coco)
    ds = COCODetection(str(coco), 'train2017')
    path = ds._image_path(0)
    with open(path, 'wb') as f:
        f.write(content)
    with pytest.raises(ValueError, match=r'^image {} {} \(image id {} of .*instances_train2017'
                       r'\.json\)'.format(re.escape(path), re.escape(reason), ds.ids[0])):
        ds.pull_item(0)


def test_unparsable_voc_coordinate_names_the_annotation(voc_root, tmp_path):
    root = str(tmp_path / 'voc')
    shutil.copytree(voc_root, root)
    ds = VOCDetection(root, [('2007', 'test')])
    xml = os.path.join(root, 'VOC2007', 'Annotations', ds.ids[0][1] + '.xml')
    text = open(xml).read()
    with open(xml, 'w') as f:
        f.write(re.sub(r'<xmin>\d+</xmin>', '<xmin>nan</xmin>', text, count=1))
    with pytest.raises(ValueError, match=r"^annotation {}: cannot convert its annotation "
                       r"\(ValueError: invalid literal for int\(\) with base 10: 'nan'\); fix "
                       r"it".format(re.escape(xml))):
        ds.pull_item(0)
