"""Pascal VOC datasets: ssd.pytorch's ``VOCDetection`` (``data/voc0712.py``) and the
evaluation dataset of its ``eval.py`` (ground truth as written in the XML).

Sample form and the differences from the reference: see :mod:`gluontrain.torch.data`.
"""
import os
import xml.etree.ElementTree as ET

import numpy as np
import torch

from gluontrain.data.classes import VOC_CLASSES
from gluontrain.data.images import read_bgr

from ._base import PullItemDataset

__all__ = ['VOC_CLASSES', 'VOCAnnotationTransform', 'VOCDetection', 'VOCEvalDataset']


def _split_ids(root, image_sets):
    """``(VOC<year> folder, image id)`` of every line of the ``(year, split)`` lists."""
    ids = []
    for year, name in image_sets:
        base = os.path.join(root, 'VOC' + str(year))
        with open(os.path.join(base, 'ImageSets', 'Main', name + '.txt')) as f:
            ids += [(base, line.strip()) for line in f if line.strip()]
    return ids


class VOCAnnotationTransform:
    """Turn a VOC XML annotation into ``[[x1, y1, x2, y2, label_ind], ...]``.

    Coordinates are ``(value - 1) / width`` (x) or ``/ height`` (y), the reference's
    conversion of VOC's 1-based pixel corners.

    Parameters
    ----------
    class_to_ind : dict, optional
        Class name -> index (default: :data:`VOC_CLASSES` order).
    keep_difficult : bool, default False
        Keep objects marked ``difficult``.
    """

    def __init__(self, class_to_ind=None, keep_difficult=False):
        self.class_to_ind = class_to_ind or dict(zip(VOC_CLASSES, range(len(VOC_CLASSES))))
        self.keep_difficult = keep_difficult

    def __call__(self, target, width, height):
        """Convert ``target`` (an ``xml.etree.ElementTree.Element``).

        Parameters
        ----------
        target : xml.etree.ElementTree.Element
            The annotation root.
        width, height : int
            Image size (pass 1, 1 for pixel coordinates minus one).

        Returns
        -------
        list of list
            ``[x1, y1, x2, y2, label_ind]`` per kept object.
        """
        res = []
        for obj in target.iter('object'):
            difficult = obj.find('difficult')
            # a missing tag counts as not difficult (VOC2012 test XMLs omit it)
            if not self.keep_difficult and difficult is not None and \
                    int(difficult.text) == 1:
                continue
            name = obj.find('name').text.lower().strip()
            bbox = obj.find('bndbox')
            corners = [int(bbox.find(pt).text) - 1 for pt in ('xmin', 'ymin', 'xmax', 'ymax')]
            res.append([c / size for c, size in zip(corners, (width, height, width, height))]
                       + [self.class_to_ind[name]])
        return res


class VOCDetection(PullItemDataset):
    """Pascal VOC detection in ssd.pytorch's form.

    Parameters
    ----------
    root : str
        The ``VOCdevkit`` folder (holds ``VOC2007``, ``VOC2012``).
    image_sets : list of (str, str)
        (year, split) pairs, e.g. ``[('2007', 'test')]``.
    transform : callable, optional
        ``transform(img, boxes, labels) -> (img, boxes, labels)`` (e.g. ``SSDAugmentation``).
    target_transform : callable, optional
        ``target_transform(xml_root, width, height)`` -> list of rows.
    dataset_name : str
        Stored as ``name``.
    """

    def __init__(self, root, image_sets=(('2007', 'trainval'), ('2012', 'trainval')),
                 transform=None, target_transform=VOCAnnotationTransform(),
                 dataset_name='VOC0712'):
        self.root = root
        self.image_set = image_sets
        self.transform = transform
        self.target_transform = target_transform
        self.name = dataset_name
        self._annopath = os.path.join('%s', 'Annotations', '%s.xml')
        self._imgpath = os.path.join('%s', 'JPEGImages', '%s.jpg')
        self.ids = _split_ids(root, image_sets)

    def _raw_target(self, index):
        return ET.parse(self._annopath % self.ids[index]).getroot()

    def _image_path(self, index):
        return self._imgpath % self.ids[index]

    def _image_context(self, index):
        return 'annotation {}'.format(self._annopath % self.ids[index])

    def pull_anno(self, index):
        """Returns ``(image id, rows)`` with the target transform at width = height = 1
        (pixel corners minus one), as the reference's ``pull_anno``."""
        return self.ids[index][1], self.target_transform(self._raw_target(index), 1, 1)

    def pull_tensor(self, index):
        """The original image as a float ``[1, H, W, 3]`` tensor (the reference's layout)."""
        return torch.from_numpy(self.pull_image(index).astype(np.float32)).unsqueeze_(0)


class VOCEvalDataset(torch.utils.data.Dataset):
    """Images of a VOC split with the annotation as eval.py reads it (``parse_rec``).

    Items are ``(image [3,300,300] float, gt [N, 6], (height, width))`` where ``gt`` rows
    are ``(xmin, ymin, xmax, ymax, label, difficult)`` exactly as written in the XML (1-based
    pixels) and ``label`` indexes ``classes``.
    """

    def __init__(self, root, image_sets=(('2007', 'test'),), transform=None, classes=None):
        self.classes = list(classes or VOC_CLASSES)
        self.transform = transform
        self.ids = _split_ids(root, image_sets)

    def __len__(self):
        return len(self.ids)

    def annotation(self, base, image_id):
        """``gt`` rows of one image (see the class docstring), from its XML."""
        rows = []
        for obj in ET.parse(os.path.join(base, 'Annotations', image_id + '.xml')).iter('object'):
            box = obj.find('bndbox')
            rows.append([float(box.find(k).text) for k in ('xmin', 'ymin', 'xmax', 'ymax')]
                        + [self.classes.index(obj.find('name').text.strip()),
                           int(obj.find('difficult').text)])
        return np.array(rows, np.float32).reshape(-1, 6)

    def __getitem__(self, index):
        base, image_id = self.ids[index]
        img = read_bgr(os.path.join(base, 'JPEGImages', image_id + '.jpg'),
                       'annotation {}'.format(os.path.join(base, 'Annotations',
                                                           image_id + '.xml')))
        h, w = img.shape[:2]
        if self.transform is not None:
            img = self.transform(img)[0]
        return (torch.from_numpy(np.ascontiguousarray(img[:, :, (2, 1, 0)])).permute(2, 0, 1),
                self.annotation(base, image_id), np.array([h, w], np.float32))
