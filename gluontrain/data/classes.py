"""Class lists of the public detection datasets, shared by the validators and the synthetic
data writers."""

__all__ = ['VOC_CLASSES']

#: Pascal VOC's 20 classes in the order of its devkit (and of GluonCV's ``VOCDetection``).
VOC_CLASSES = ('aeroplane', 'bicycle', 'bird', 'boat', 'bottle', 'bus', 'car', 'cat', 'chair',
               'cow', 'diningtable', 'dog', 'horse', 'motorbike', 'person', 'pottedplant',
               'sheep', 'sofa', 'train', 'tvmonitor')
