"""The VOC evaluation dataset (eval.py's ground truth) and image reading of gluontrain.torch.data."""
import os
import re
import shutil

import numpy as np
import pytest

from gluontrain.torch.data import VOCDetection, VOCEvalDataset


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
