"""Detection datasets for the PyTorch recipes: ssd.pytorch's VOC and COCO datasets
(``data/voc0712.py``, ``data/coco.py``) and the VOC evaluation dataset.

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
from .coco import COCO_CLASSES, COCOAnnotationTransform, COCODetection, get_label_map
from .voc import VOC_CLASSES, VOCAnnotationTransform, VOCDetection, VOCEvalDataset

__all__ = ['VOC_CLASSES', 'VOCAnnotationTransform', 'VOCDetection', 'VOCEvalDataset',
           'COCO_CLASSES', 'get_label_map', 'COCOAnnotationTransform', 'COCODetection']
