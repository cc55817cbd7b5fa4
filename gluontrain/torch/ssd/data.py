"""ssd.pytorch's datasets (``data/voc0712.py``, ``data/coco.py``) and collate functions.

Samples are ``(img, target)``: ``img`` a ``[3, H, W]`` tensor, ``target`` a float32
``[N, 5]`` array of (x1, y1, x2, y2) relative to the image size plus the label index
(0-based, no background). With a transform the image is its float32 output flipped
BGR -> RGB (``img[:, :, (2, 1, 0)]``, exactly as the reference); without one it is the raw
uint8 BGR image as read by ``cv2.imread``, also as the reference.

Differences from the reference, all deliberate:

- ``target`` is always a float32 ``[N, 5]`` numpy array (the reference returned a list of
  lists without a transform, float64 with one; ``detection_collate`` makes float32 anyway).
- Images without objects (VOC images whose objects are all ``difficult``) are kept with an
  empty ``[0, 5]`` target and the transforms pass them through; the reference crashed in
  ``target[:, :4]``. COCO images without annotations are not listed at all, as in the
  reference (``ids = coco.imgToAnns.keys()``).
- COCO: the split is an argument (``image_set='train2017'``; the reference hard-coded the
  2014 names and an ``images/`` folder), images are read from ``root/<image_set>/``, the
  label map comes from the annotation file's categories sorted by id instead of
  ``coco_labels.txt`` (same map for real COCO), ``COCOAnnotationTransform`` no longer adds
  x/y to the width/height of pycocotools' cached annotation dicts in place (the reference
  did, so every later epoch saw growing boxes), and :data:`COCO_CLASSES` holds COCO's 80
  names (the reference's tuple split 'fire hydrant' in two and merged 'microwave',
  'oven', shifting 58 names).
"""
import os
import xml.etree.ElementTree as ET

import cv2
import numpy as np
import torch
import torch.utils.data as data

from gluontrain.data.coco import COCO_CATEGORIES as _COCO_2017
from gluontrain.torch.batchify import Pad, Stack, Tuple

__all__ = ['VOC_CLASSES', 'COCO_CLASSES', 'VOCAnnotationTransform', 'VOCDetection',
           'get_label_map', 'COCOAnnotationTransform', 'COCODetection', 'detection_collate',
           'ssd_batchify_fn']

VOC_CLASSES = ('aeroplane', 'bicycle', 'bird', 'boat', 'bottle', 'bus', 'car', 'cat', 'chair',
               'cow', 'diningtable', 'dog', 'horse', 'motorbike', 'person', 'pottedplant',
               'sheep', 'sofa', 'train', 'tvmonitor')

COCO_CLASSES = tuple(c['name'] for c in sorted(_COCO_2017, key=lambda c: c['id']))


def _as_target(rows):
    """A list of [x1, y1, x2, y2, label] rows as a float64 [N, 5] array (also when empty)."""
    return np.array(rows, dtype=np.float64).reshape(-1, 5)


def _apply_transform(transform, img, target):
    """Run an ssd.pytorch transform on (BGR image, [N, 5] target) like the reference's
    ``pull_item``; returns the CHW tensor (RGB after a transform) and a float32 target."""
    target = _as_target(target)
    if transform is not None:
        # copies: transforms scale boxes in place
        img, boxes, labels = transform(img, target[:, :4].copy(), target[:, 4].copy())
        img = img[:, :, (2, 1, 0)]  # to RGB, as the reference
        target = np.hstack((boxes, np.expand_dims(labels, axis=1)))
    img = torch.from_numpy(np.ascontiguousarray(img)).permute(2, 0, 1)
    return img, target.astype(np.float32).reshape(-1, 5)


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
            box = []
            for i, pt in enumerate(('xmin', 'ymin', 'xmax', 'ymax')):
                cur = int(bbox.find(pt).text) - 1
                box.append(cur / width if i % 2 == 0 else cur / height)
            box.append(self.class_to_ind[name])
            res.append(box)
        return res


class VOCDetection(data.Dataset):
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
        self.ids = []
        for year, name in image_sets:
            rootpath = os.path.join(self.root, 'VOC' + str(year))
            with open(os.path.join(rootpath, 'ImageSets', 'Main', name + '.txt')) as f:
                self.ids += [(rootpath, line.strip()) for line in f if line.strip()]

    def __getitem__(self, index):
        """Returns ``(img [3, H, W] tensor, target float32 [N, 5])``."""
        im, gt, _, _ = self.pull_item(index)
        return im, gt

    def __len__(self):
        return len(self.ids)

    def pull_item(self, index):
        """Returns ``(img, target, height, width)``, height/width of the original image."""
        img_id = self.ids[index]
        target = ET.parse(self._annopath % img_id).getroot()
        img = self.pull_image(index)
        height, width, _ = img.shape
        if self.target_transform is not None:
            target = self.target_transform(target, width, height)
        img, target = _apply_transform(self.transform, img, target)
        return img, target, height, width

    def pull_image(self, index):
        """The original BGR uint8 image ``[H, W, 3]`` (no transform).

        Raises
        ------
        FileNotFoundError
            When OpenCV cannot read the file (``cv2.imread`` returns None silently).
        """
        path = self._imgpath % self.ids[index]
        img = cv2.imread(path, cv2.IMREAD_COLOR)
        if img is None:
            raise FileNotFoundError('cannot read image {}'.format(path))
        return img

    def pull_anno(self, index):
        """Returns ``(image id, rows)`` with the target transform at width = height = 1
        (pixel corners minus one), as the reference's ``pull_anno``."""
        img_id = self.ids[index]
        anno = ET.parse(self._annopath % img_id).getroot()
        return img_id[1], self.target_transform(anno, 1, 1)

    def pull_tensor(self, index):
        """The original image as a float ``[1, H, W, 3]`` tensor (the reference's layout)."""
        return torch.from_numpy(self.pull_image(index).astype(np.float32)).unsqueeze_(0)


def get_label_map(source):
    """COCO category id -> contiguous index 1..K (the reference's ``coco_labels.txt`` map).

    Parameters
    ----------
    source : pycocotools.coco.COCO, str or list of dict
        A COCO object, the path of an instances json, the path of a reference-style
        ``coco_labels.txt`` (``id,index,name`` lines), or a list of category dicts.

    Returns
    -------
    dict
        ``{category_id: index}``, indices 1..K in increasing category id.
    """
    if isinstance(source, str):
        if source.endswith('.txt'):
            label_map = {}
            with open(source) as f:
                for line in f:
                    if line.strip():
                        ids = line.split(',')
                        label_map[int(ids[0])] = int(ids[1])
            return label_map
        import json
        with open(source) as f:
            categories = json.load(f)['categories']
    elif hasattr(source, 'loadCats'):
        categories = source.loadCats(source.getCatIds())
    else:
        categories = source
    ids = sorted(int(c['id']) for c in categories)
    return {cid: i + 1 for i, cid in enumerate(ids)}


class COCOAnnotationTransform:
    """Turn COCO annotations into ``[[x1, y1, x2, y2, label_idx], ...]`` relative to the
    image size, ``label_idx = label_map[category_id] - 1`` (0-based).

    Every annotation with a ``bbox`` is kept, crowd regions included, as in the reference.

    Parameters
    ----------
    label_map : dict, optional
        ``{category_id: 1-based index}``; default :func:`get_label_map` of the 80 COCO 2017
        categories (what ``coco_labels.txt`` holds). :class:`COCODetection` replaces the
        default with the map of its own annotation file.
    """

    def __init__(self, label_map=None):
        self.label_map = label_map
        self._default = label_map is None
        if label_map is None:
            self.label_map = get_label_map(_COCO_2017)

    def __call__(self, target, width, height):
        """Convert a list of COCO annotation dicts (not modified).

        Returns
        -------
        list of list
            ``[x1, y1, x2, y2, label_idx]`` per annotation with a bbox.
        """
        scale = np.array([width, height, width, height], dtype=np.float64)
        res = []
        for obj in target:
            if 'bbox' not in obj:
                continue  # the reference printed "no bbox problem!" and skipped it too
            x, y, w, h = obj['bbox']
            box = list(np.array([x, y, x + w, y + h], dtype=np.float64) / scale)
            res.append(box + [self.label_map[obj['category_id']] - 1])
        return res


class COCODetection(data.Dataset):
    """MS COCO detection in ssd.pytorch's form.

    Parameters
    ----------
    root : str
        Holds ``annotations/instances_<image_set>.json`` and ``<image_set>/*.jpg``.
    image_set : str
        Split name, e.g. ``'train2017'`` or ``'val2017'``.
    transform : callable, optional
        ``transform(img, boxes, labels) -> (img, boxes, labels)``.
    target_transform : callable, optional
        ``target_transform(annotations, width, height)`` -> list of rows.
    dataset_name : str
        Stored as ``name``.
    """

    def __init__(self, root, image_set='train2017', transform=None,
                 target_transform=COCOAnnotationTransform(), dataset_name='MS COCO'):
        from pycocotools.coco import COCO
        self.root = os.path.join(root, image_set)
        ann_file = os.path.join(root, 'annotations', 'instances_{}.json'.format(image_set))
        if not os.path.isfile(ann_file):
            raise FileNotFoundError('COCO annotation file not found: {}'.format(ann_file))
        self.coco = COCO(ann_file)
        # images with at least one annotation, in annotation order (the reference's ids)
        self.ids = list(self.coco.imgToAnns.keys())
        self.transform = transform
        if isinstance(target_transform, COCOAnnotationTransform) and target_transform._default:
            # a fresh instance: the default argument object is shared by every dataset
            target_transform = COCOAnnotationTransform(get_label_map(self.coco))
        self.target_transform = target_transform
        self.name = dataset_name

    def __getitem__(self, index):
        """Returns ``(img [3, H, W] tensor, target float32 [N, 5])``."""
        im, gt, _, _ = self.pull_item(index)
        return im, gt

    def __len__(self):
        return len(self.ids)

    def pull_item(self, index):
        """Returns ``(img, target, height, width)``, height/width of the original image."""
        target = self.pull_anno(index)
        img = self.pull_image(index)
        height, width, _ = img.shape
        if self.target_transform is not None:
            target = self.target_transform(target, width, height)
        img, target = _apply_transform(self.transform, img, target)
        return img, target, height, width

    def pull_image(self, index):
        """The original BGR uint8 image ``[H, W, 3]``.

        Raises
        ------
        FileNotFoundError
            When the image cannot be read.
        """
        path = os.path.join(self.root, self.coco.loadImgs(self.ids[index])[0]['file_name'])
        img = cv2.imread(path, cv2.IMREAD_COLOR)
        if img is None:
            raise FileNotFoundError('Image path does not exist or is unreadable: {}'
                                    .format(path))
        return img

    def pull_anno(self, index):
        """The image's annotation dicts as ``coco.loadAnns`` returns them (do not modify)."""
        return self.coco.loadAnns(self.coco.getAnnIds(imgIds=self.ids[index]))

    def __repr__(self):
        return ('Dataset {}\n    Number of datapoints: {}\n    Root Location: {}\n'
                '    Transforms (if any): {!r}\n    Target Transforms (if any): {!r}'
                .format(type(self).__name__, len(self), self.root, self.transform,
                        self.target_transform))


def detection_collate(batch):
    """The reference's collate: stack the images, keep the targets as a list.

    Parameters
    ----------
    batch : list of (torch.Tensor, array-like)
        ``(img [3, H, W], target [N_i, 5])`` samples of equal image size.

    Returns
    -------
    (torch.Tensor, list of torch.Tensor)
        Images ``[B, 3, H, W]`` and one float32 ``[N_i, 5]`` tensor per image.
    """
    imgs, targets = [], []
    for sample in batch:
        imgs.append(sample[0])
        targets.append(torch.as_tensor(np.asarray(sample[1]), dtype=torch.float32))
    return torch.stack(imgs, 0), targets


def ssd_batchify_fn():
    """gluontrain's padded alternative to :func:`detection_collate`:
    ``Tuple(Stack(), Pad(pad_val=-1))``.

    Returns
    -------
    gluontrain.torch.batchify.Tuple
        Collate function giving images ``[B, 3, H, W]`` and targets ``[B, max N_i, 5]``
        (dtype of the first target, float32 for these datasets) padded with rows of -1.
    """
    return Tuple(Stack(), Pad(pad_val=-1))
