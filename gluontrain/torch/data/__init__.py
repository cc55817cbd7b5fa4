"""Detection datasets for the PyTorch recipes: ssd.pytorch's VOC and COCO datasets
(``data/voc0712.py``, ``data/coco.py``) and the VOC evaluation dataset.

Samples are ``(img, target)``: ``img`` a ``[3, H, W]`` tensor, ``target`` a float32
``[N, 5]`` numpy array of (x1, y1, x2, y2) relative to the image size plus the label index
(0-based, no background; the reference's list of lists or float64). With a transform the
image is its float32 output flipped BGR -> RGB (``img[:, :, (2, 1, 0)]``, exactly as the
reference); without one it is the raw uint8 BGR image as read by ``cv2.imread``.

Fixed (empty targets kept, COCO's boxes copied and its 80 names): docs/faithfulness.md,
"SSD300", "Deliberate differences". COCO images without annotations are not listed, as in
the reference. COCO's split is an argument (``image_set='train2017'``; the reference
hard-coded the 2014 names and an ``images/`` folder), images are read from
``root/<image_set>/`` and the label map comes from the annotation file's categories sorted by
id instead of ``coco_labels.txt`` (the same map for real COCO)."""
from .coco import COCO_CLASSES, COCOAnnotationTransform, COCODetection, get_label_map
from .voc import VOC_CLASSES, VOCAnnotationTransform, VOCDetection, VOCEvalDataset

__all__ = ['VOC_CLASSES', 'VOCAnnotationTransform', 'VOCDetection', 'VOCEvalDataset',
           'COCO_CLASSES', 'get_label_map', 'COCOAnnotationTransform', 'COCODetection']
