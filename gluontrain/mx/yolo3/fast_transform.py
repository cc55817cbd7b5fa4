"""GluonCV's YOLOv3 train transform in numpy on MXNet: :mod:`gluontrain.yolo3.transform`
with MXNet's own OpenCV ``imresize``.

:class:`FastYOLO3TrainTransform` is ``YOLO3DefaultTrainTransform`` (it subclasses it: same
constructor, same net run on zeros for the feature map sizes) with ``__call__`` replaced by
the shared numpy :func:`~gluontrain.yolo3.transform.augment` (colour distortion, expansion,
constrained crop, flip, drawn as the reference draws them) and
:class:`~gluontrain.yolo3.targets.FastYOLOV3TargetGenerator`. The resize is MXNet's own
OpenCV ``imresize`` (the OpenCV in ``cv2`` rounds bilinear and area upsampling differently).

Outputs are numpy arrays equal (``np.array_equal``) to the reference's for the same seeds of
``random`` and ``np.random`` (``tests/mx/yolo3/test_fast_transform.py``); the batchify
functions turn them into the same NDArrays.
"""
import numpy as np
import mxnet as mx

from gluoncv.data.transforms.presets.yolo import YOLO3DefaultTrainTransform

from ...yolo3.targets import FastYOLOV3TargetGenerator
from ...yolo3.transform import augment

__all__ = ['FastYOLO3TrainTransform']


def _imresize(img, w, h, interp):
    """MXNet's OpenCV resize (the reference's), on a C-contiguous numpy float32 image."""
    # zero-copy: the expanded window can be tens of MB, copying it cost as much as resizing
    src = mx.nd.from_numpy(img, zero_copy=True)
    return mx.nd._internal._cvimresize(src, w=w, h=h, interp=interp).asnumpy()


class FastYOLO3TrainTransform(YOLO3DefaultTrainTransform):
    """``YOLO3DefaultTrainTransform`` with the same outputs, computed in numpy.

    Same parameters as the reference (``width, height, net=None, mean, std, mixup``); the
    image may be a uint8 numpy array or NDArray (HWC, RGB), the label a numpy array
    ``[N, 5+]``. Returns numpy arrays: ``(image [3, H, W], objectness, center_targets,
    scale_targets, weights, class_targets, gt_boxes)`` as float32, or ``(image, label)``
    when ``net`` is None.
    """

    _fast_targets = None

    def __call__(self, src, label):
        """Apply the transform to one training image and its label."""
        img = src.asnumpy() if hasattr(src, 'asnumpy') else np.asarray(src)
        img, bbox = augment(img, label, self._width, self._height, _imresize, self._mean,
                            self._std)
        if self._net_none:
            return img, bbox.astype(img.dtype)
        gt_boxes = bbox[:, :4].astype(np.float32)
        targets = self._fast_target_generator()(
            gt_boxes, bbox[:, 4:5].astype(np.float32),
            bbox[:, -1:].astype(np.float32) if self._mixup else None)
        return (img,) + tuple(targets) + (gt_boxes,)

    def _fast_target_generator(self):
        if self._fast_targets is None:
            self._fast_targets = FastYOLOV3TargetGenerator(
                self._num_classes, self._anchors, self._offsets, self._feat_maps,
                self._width, self._height)
        return self._fast_targets
