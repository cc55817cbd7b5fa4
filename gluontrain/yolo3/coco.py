"""GluonCV's ``COCODetection`` in numpy + pycocotools, for both backends of the YOLOv3 recipe.

The same images and labels as ``gluoncv.data.COCODetection`` on the same annotation files:
the images of each split in ``sorted(coco.getImgIds())`` order, the path from the image's
``coco_url`` (``<root>/<folder>/<file>``), boxes converted ``(x, y, w, h) -> (x, y, x + w - 1,
y + h - 1)`` (``w - 1`` floored at 0) and clipped to ``[0, width - 1] x [0, height - 1]``;
annotations with ``area < min_object_area``, ``ignore`` set, zero area or an empty clipped box
dropped, crowd regions dropped with ``use_crowd=False``; an image left without objects is
skipped, or with ``skip_empty=False`` kept with the one row ``[-1, -1, -1, -1, -1]``; labels
``xmin, ymin, xmax, ymax, class`` as float64, classes numbered in the file's category order.
Images are RGB uint8 decoded by OpenCV as MXNet's ``imread`` decodes them.
"""
import os

import numpy as np

from ..data.checks import DatasetError, check_coco
from ..data.coco import COCO_CATEGORIES
from ..data.images import read_bgr
from .data import _TransformView

__all__ = ['COCODetection', 'COCO_CLASSES', 'COCO_DEFAULT_ROOT', 'coco_datasets']

#: COCO's 80 classes in GluonCV's order (``COCODetection.CLASSES``: by category id)
COCO_CLASSES = tuple(c['name'] for c in sorted(COCO_CATEGORIES, key=lambda c: c['id']))
#: gluoncv's default COCO folder
COCO_DEFAULT_ROOT = os.path.join('~', '.mxnet', 'datasets', 'coco')


def _label_row(obj, width, height):
    """``[xmin, ymin, xmax, ymax]`` of an annotation as GluonCV converts and clips it."""
    x, y, w, h = obj['bbox']
    xmax, ymax = x + np.maximum(w - 1, 0), y + np.maximum(h - 1, 0)
    return [np.minimum(width - 1, np.maximum(0, x)), np.minimum(height - 1, np.maximum(0, y)),
            np.minimum(width - 1, np.maximum(0, xmax)),
            np.minimum(height - 1, np.maximum(0, ymax))]


class COCODetection(_TransformView):
    """MS-COCO detection items as GluonCV reads them (see the module).

    Parameters
    ----------
    root : str
        The folder holding ``annotations/<split>.json`` and the image folders.
    splits : str or sequence of str
        Annotation file stems, e.g. ``'instances_val2017'``.
    transform : callable, optional
        ``transform(img, label)``, or set later with :meth:`transform`.
    min_object_area : float
    skip_empty : bool
        Skip images without a valid object (training), else keep them with a ``-1`` row.
    use_crowd : bool
        Keep ``iscrowd`` regions as objects.
    """
    CLASSES = COCO_CLASSES

    def __init__(self, root=COCO_DEFAULT_ROOT, splits=('instances_val2017',), transform=None,
                 min_object_area=0, skip_empty=True, use_crowd=True):
        self.root = os.path.expanduser(root)
        self._transform = transform
        self._min_object_area = min_object_area
        self._skip_empty, self._use_crowd = skip_empty, use_crowd
        self.splits = [splits] if isinstance(splits, str) else list(splits)
        self.classes = self.CLASSES
        self.json_id_to_contiguous = self.contiguous_id_to_json = None
        self._coco, self.items, self.labels, self._listed_in = [], [], [], []
        for split in self.splits:
            self._load_split(split)

    @property
    def num_class(self):
        """80."""
        return len(self.classes)

    @property
    def coco(self):
        """The ``pycocotools.coco.COCO`` of the (single) split, for the metric."""
        if len(self._coco) != 1:
            raise ValueError('COCODetection.coco: the metric scores one split at a time, '
                             'this dataset reads {}'.format(self.splits))
        return self._coco[0]

    def _load_split(self, split):
        from pycocotools.coco import COCO  # pylint: disable=import-outside-toplevel
        path = os.path.join(self.root, 'annotations', split + '.json')
        coco = COCO(path)
        self._coco.append(coco)
        cat_ids = coco.getCatIds()
        if [c['name'] for c in coco.loadCats(cat_ids)] != list(self.classes):
            raise DatasetError('{}: the categories are not COCO\'s 80 in COCO\'s order (what '
                               'GluonCV\'s COCODetection reads); for other classes use '
                               '--dataset custom with VOC-format data'.format(path))
        to_contiguous = {cid: k for k, cid in enumerate(cat_ids)}
        if self.json_id_to_contiguous is None:
            self.json_id_to_contiguous = to_contiguous
            self.contiguous_id_to_json = {k: cid for cid, k in to_contiguous.items()}
        elif to_contiguous != self.json_id_to_contiguous:
            raise DatasetError('{}: its category ids differ from {}\'s'.format(
                path, self.splits[0]))
        for entry in coco.loadImgs(sorted(coco.getImgIds())):
            folder, name = entry['coco_url'].split('/')[-2:]
            image = os.path.join(self.root, folder, name)
            if not os.path.exists(image):
                raise FileNotFoundError('image {} of {} does not exist: put it there or '
                                        'regenerate the dataset'.format(image, path))
            label = self._label(coco, entry)
            if label:
                self.items.append(image)
                self.labels.append(label)
                self._listed_in.append(path)

    def _label(self, coco, entry):
        rows = []
        for obj in coco.loadAnns(coco.getAnnIds(imgIds=[entry['id']], iscrowd=None)):
            if obj['area'] < self._min_object_area or obj.get('ignore', 0) == 1:
                continue
            if not self._use_crowd and obj.get('iscrowd', 0):
                continue
            xmin, ymin, xmax, ymax = _label_row(obj, entry['width'], entry['height'])
            if obj['area'] > 0 and xmax > xmin and ymax > ymin:
                rows.append([xmin, ymin, xmax, ymax, self.json_id_to_contiguous[
                    obj['category_id']]])
        if not rows and not self._skip_empty:
            rows.append([-1, -1, -1, -1, -1])
        return rows

    def __len__(self):
        return len(self.items)

    def image(self, idx):
        """The RGB uint8 image of item ``idx``."""
        return np.ascontiguousarray(read_bgr(
            self.items[idx], 'listed in {}'.format(self._listed_in[idx]),
            exif_orientation=False)[:, :, ::-1])

    def _item(self, idx):
        return self.image(idx), np.array(self.labels[idx])


def coco_datasets(args):
    """GluonCV's training and validation COCO splits of ``train_yolo3.py``: ``train2017``
    without crowd regions, ``val2017`` with its images without objects; each annotation file
    checked first (:func:`gluontrain.data.checks.check_coco`). ``args.dataset_root``, else
    ``~/.mxnet/datasets/coco``.

    Returns
    -------
    (COCODetection, COCODetection)
    """
    root = os.path.expanduser(getattr(args, 'dataset_root', None) or COCO_DEFAULT_ROOT)
    check_coco(root, 'instances_train2017')
    check_coco(root, 'instances_val2017')
    return (COCODetection(root, 'instances_train2017', use_crowd=False),
            COCODetection(root, 'instances_val2017', skip_empty=False))
