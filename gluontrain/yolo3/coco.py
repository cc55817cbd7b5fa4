"""GluonCV's ``COCODetection`` in numpy + pycocotools, for both backends of the YOLOv3 recipe:
the same images and labels as ``gluoncv.data.COCODetection`` on the same annotation files
(order, boxes, what is dropped: docs/faithfulness.md, "COCO on both backends"); images are
RGB uint8 decoded by OpenCV as MXNet's ``imread`` decodes them."""
import os

import numpy as np

from ..data.checks import DatasetError, check_coco
from ..data.coco import COCO_CLASSES
from ..data.images import read_bgr
from ..data.views import TransformView

__all__ = ['COCODetection', 'COCOJsonDetection', 'COCO_CLASSES', 'COCO_DEFAULT_ROOT',
           'coco_datasets', 'coco_json_datasets']

#: gluoncv's default COCO folder
COCO_DEFAULT_ROOT = os.path.join('~', '.mxnet', 'datasets', 'coco')


def _label_row(obj, width, height):
    """``[xmin, ymin, xmax, ymax]`` of an annotation as GluonCV converts and clips it."""
    x, y, w, h = obj['bbox']
    xmax, ymax = x + np.maximum(w - 1, 0), y + np.maximum(h - 1, 0)
    return [np.minimum(width - 1, np.maximum(0, x)), np.minimum(height - 1, np.maximum(0, y)),
            np.minimum(width - 1, np.maximum(0, xmax)),
            np.minimum(height - 1, np.maximum(0, ymax))]


class COCODetection(TransformView):
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

    def _annotation_path(self, split):
        return os.path.join(self.root, 'annotations', split + '.json')

    def _image_path(self, entry):
        folder, name = entry['coco_url'].split('/')[-2:]
        return os.path.join(self.root, folder, name)

    def _check_classes(self, names, path):
        if names != list(self.classes):
            raise DatasetError('{}: the categories are not COCO\'s 80 in COCO\'s order (what '
                               'GluonCV\'s COCODetection reads); for other classes use '
                               '--dataset coco-json, or custom with VOC-format data'.format(path))

    def _load_split(self, split):
        from pycocotools.coco import COCO  # pylint: disable=import-outside-toplevel
        path = self._annotation_path(split)
        coco = COCO(path)
        self._coco.append(coco)
        cat_ids = coco.getCatIds()
        self._check_classes([c['name'] for c in coco.loadCats(cat_ids)], path)
        to_contiguous = {cid: k for k, cid in enumerate(cat_ids)}
        if self.json_id_to_contiguous is None:
            self.json_id_to_contiguous = to_contiguous
            self.contiguous_id_to_json = {k: cid for cid, k in to_contiguous.items()}
        elif to_contiguous != self.json_id_to_contiguous:
            raise DatasetError('{}: its category ids differ from {}\'s'.format(
                path, self.splits[0]))
        for entry in coco.loadImgs(sorted(coco.getImgIds())):
            image = self._image_path(entry)
            if not os.path.exists(image):
                raise FileNotFoundError('image {} of {} does not exist: put it there or '
                                        'regenerate the dataset'.format(image, path))
            label = self._label(coco, entry, path)
            if label:
                self.items.append(image)
                self.labels.append(label)
                self._listed_in.append(path)

    def _label(self, coco, entry, path):
        rows = []
        for obj in coco.loadAnns(coco.getAnnIds(imgIds=[entry['id']], iscrowd=None)):
            if obj['category_id'] not in self.json_id_to_contiguous:
                raise DatasetError('{}: annotation {} has category_id {}, which its categories '
                                   'do not list; add the category or fix the id'.format(
                                       path, obj.get('id'), obj['category_id']))
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


class COCOJsonDetection(COCODetection):
    """COCO-format annotations of your own (GluonCV users subclass ``COCODetection`` for them,
    gluon-cv #684): any json file, images under ``image_root`` by their ``file_name``, the
    classes the file's categories name (in the file's order, GluonCV's contiguous ids), or
    ``classes`` when given (the file must name exactly those, in that order).

    Parameters
    ----------
    json_path : str
    image_root : str
    classes : sequence of str, optional
    **kwargs
        ``transform``, ``min_object_area``, ``skip_empty``, ``use_crowd`` of
        :class:`COCODetection`.
    """

    def __init__(self, json_path, image_root, classes=None, **kwargs):
        self._json_path, self._image_root = json_path, os.path.expanduser(image_root)
        self._given = None if classes is None else list(classes)
        self.CLASSES = ()  # set from the file (a property of this instance)
        super().__init__(root=self._image_root, splits=[json_path], **kwargs)

    def _annotation_path(self, split):
        return split

    def _image_path(self, entry):
        return os.path.join(self._image_root, entry['file_name'])

    def _check_classes(self, names, path):
        if not names:
            raise DatasetError('{}: no categories; list your classes under "categories" '
                               '(id, name)'.format(path))
        if self._given is not None and names != self._given:
            raise DatasetError('{}: its categories are {} (in file order), not --classes {}; '
                               'pass them in the file\'s order or drop --classes'.format(
                                   path, ','.join(names), ','.join(self._given)))
        if not self.classes:
            self.classes = tuple(names)
        elif tuple(names) != tuple(self.classes):
            raise DatasetError('{}: its categories {} differ from the first file\'s {}'.format(
                path, ','.join(names), ','.join(self.classes)))


def coco_json_datasets(args):
    """``--dataset coco-json``: ``--train-json`` (crowd regions dropped, images without
    objects skipped) and ``--val-json`` (all images), their images under ``--dataset-root``
    by ``file_name``; sets ``args.classes`` to the file's categories.

    Returns
    -------
    (COCOJsonDetection, COCOJsonDetection)
    """
    missing = [a for a, v in (('--train-json', args.train_json), ('--val-json', args.val_json),
                              ('--dataset-root', getattr(args, 'dataset_root', None)))
               if not v]
    if missing:
        raise ValueError('--dataset coco-json needs {}: the COCO-format annotation files and '
                         'the folder their file_name entries are relative to'.format(
                             ', '.join(missing)))
    for argument, path in (('--train-json', args.train_json), ('--val-json', args.val_json)):
        if not os.path.isfile(path):
            raise DatasetError('{} {} does not exist: give a COCO-format json (images, '
                               'annotations, categories)'.format(argument, path))
    given = [c for c in args.classes.split(',') if c.strip()] if args.classes else None
    train = COCOJsonDetection(args.train_json, args.dataset_root, given, use_crowd=False)
    val = COCOJsonDetection(args.val_json, args.dataset_root, list(train.classes),
                            skip_empty=False)
    args.classes = ','.join(train.classes)
    return train, val


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
