"""COCO detection dataset of ssd.pytorch (``data/coco.py``).

Sample form and the differences from the reference: see :mod:`gluontrain.torch.data`.
"""
import os

import numpy as np

from gluontrain.data.coco import COCO_CATEGORIES as _COCO_2017

from ._base import PullItemDataset

__all__ = ['COCO_CLASSES', 'get_label_map', 'COCOAnnotationTransform', 'COCODetection']

COCO_CLASSES = tuple(c['name'] for c in sorted(_COCO_2017, key=lambda c: c['id']))


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
            with open(source) as f:
                rows = [line.split(',') for line in f if line.strip()]
            return {int(row[0]): int(row[1]) for row in rows}
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
        self._default = label_map is None
        self.label_map = get_label_map(_COCO_2017) if label_map is None else label_map

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


class COCODetection(PullItemDataset):
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
        self.ann_file = ann_file
        self.coco = COCO(ann_file)
        # images with at least one annotation, in annotation order (the reference's ids)
        self.ids = list(self.coco.imgToAnns.keys())
        self.transform = transform
        if isinstance(target_transform, COCOAnnotationTransform) and target_transform._default:
            # a fresh instance: the default argument object is shared by every dataset
            target_transform = COCOAnnotationTransform(get_label_map(self.coco))
        self.target_transform = target_transform
        self.name = dataset_name

    def _image_path(self, index):
        return os.path.join(self.root, self.coco.loadImgs(self.ids[index])[0]['file_name'])

    def _image_context(self, index):
        return 'image id {} of {}'.format(self.ids[index], self.ann_file)

    def pull_anno(self, index):
        """The image's annotation dicts as ``coco.loadAnns`` returns them (do not modify)."""
        return self.coco.loadAnns(self.coco.getAnnIds(imgIds=self.ids[index]))

    _raw_target = pull_anno

    def __repr__(self):
        return ('Dataset {}\n    Number of datapoints: {}\n    Root Location: {}\n'
                '    Transforms (if any): {!r}\n    Target Transforms (if any): {!r}'
                .format(type(self).__name__, len(self), self.root, self.transform,
                        self.target_transform))
