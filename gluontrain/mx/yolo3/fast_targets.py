"""The vectorised YOLOv3 target generator, shared by both backends: see
:mod:`gluontrain.yolo3.targets` (kept here so that existing imports keep working)."""
from ...yolo3.targets import FastYOLOV3TargetGenerator, zero_center_iou

__all__ = ['FastYOLOV3TargetGenerator', 'zero_center_iou']
