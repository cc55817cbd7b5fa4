"""SSD300 configurations of amdegroot/ssd.pytorch (``data/config.py``).

Keys and values are the reference's except COCO ``num_classes``: 81, not the reference's 201
(docs/faithfulness.md, "SSD300", "Deliberate differences"), which is kept as
:data:`COCO_NUM_CLASSES_REFERENCE` for weights trained with the original setting."""

__all__ = ['MEANS', 'voc', 'coco', 'COCO_NUM_CLASSES_REFERENCE']

#: Per-channel pixel means subtracted from images, in **BGR** order (OpenCV images).
MEANS = (104, 117, 123)

#: The reference's (wrong) COCO class count, kept for loading checkpoints trained with it.
COCO_NUM_CLASSES_REFERENCE = 201

# SSD300 on Pascal VOC: 20 classes + background.
voc = {
    'num_classes': 21,
    'lr_steps': (80000, 100000, 120000),
    'max_iter': 120000,
    'feature_maps': [38, 19, 10, 5, 3, 1],
    'min_dim': 300,
    'steps': [8, 16, 32, 64, 100, 300],
    'min_sizes': [30, 60, 111, 162, 213, 264],
    'max_sizes': [60, 111, 162, 213, 264, 315],
    'aspect_ratios': [[2], [2, 3], [2, 3], [2, 3], [2], [2]],
    'variance': [0.1, 0.2],
    'clip': True,
    'name': 'VOC',
}

# SSD300 on COCO: VOC's geometry (the same lists) with smaller default boxes and the longer
# schedule; num_classes corrected from the reference's 201.
coco = dict(voc, num_classes=81, lr_steps=(280000, 360000, 400000), max_iter=400000,
            min_sizes=[21, 45, 99, 153, 207, 261], max_sizes=[45, 99, 153, 207, 261, 315],
            name='COCO')
