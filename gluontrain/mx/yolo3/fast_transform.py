"""GluonCV's YOLOv3 train transform in numpy on MXNet: :mod:`gluontrain.yolo3.transform`
with MXNet's own OpenCV ``imresize`` and ``nd.dot``.

:class:`FastYOLO3TrainTransform` is ``YOLO3DefaultTrainTransform`` (it subclasses it: same
constructor, same net run on zeros for the feature map sizes) with ``__call__`` replaced by
the shared numpy :class:`~gluontrain.yolo3.transform.TrainTransform`; why MXNet's resize and
``nd.dot``: docs/faithfulness.md, "Fast train transform, targets and VOC metric". Outputs
equal the reference's (``np.array_equal``) for the same seeds of ``random`` and
``np.random`` (``tests/mx/yolo3/test_fast_transform.py``)."""
import mxnet as mx
import numpy as np

from gluoncv.data.transforms.presets.yolo import YOLO3DefaultTrainTransform

from ...yolo3.transform import TrainTransform
from ...yolo3.transform import random_color_distort as _numpy_distort

__all__ = ['FastYOLO3TrainTransform', 'random_color_distort']


def _imresize(img, w, h, interp):
    """MXNet's OpenCV resize (the reference's), on a C-contiguous numpy float32 image."""
    # zero-copy both ways: the expanded window can be tens of MB, copying it cost as much as
    # resizing; the result is written straight into the returned numpy array
    out = np.empty((h, w) + img.shape[2:], img.dtype)
    dst = mx.nd.from_numpy(out, zero_copy=True)
    mx.nd._internal._cvimresize(mx.nd.from_numpy(img, zero_copy=True), w=w, h=h,
                                interp=interp, out=dst)
    dst.wait_to_read()
    return out


def _nd_dot(a, t):
    """The reference hue step's ``nd.dot`` on a C-contiguous float32 ``[N, 3]`` numpy array and
    the float32 ``[3, 3]`` matrix: the same ``sgemm`` call, hence the same bits on any
    processor (docs/faithfulness.md, "Kernels"); zero-copy both ways."""
    out = np.empty((a.shape[0], t.shape[1]), np.float32)
    mx.nd.dot(mx.nd.from_numpy(a, zero_copy=True), mx.nd.array(t),
              out=mx.nd.from_numpy(out, zero_copy=True)).wait_to_read()
    out.flags.writeable = True  # from_numpy's zero copy marked it read-only; the write is done
    return out


# what the reference's constructor computes and our numpy transform does not read: the zeros
# image and the net's anchors, offsets and feature maps (NDArrays: each a shared-memory copy
# and a file descriptor every time a loader sends the transform to a worker, i.e. per batch)
_NOT_PICKLED = ('_fake_x', '_anchors', '_offsets', '_feat_maps', '_internal_target_generator')


def random_color_distort(img, **kwargs):
    """GluonCV's ``random_color_distort`` on a float32 HWC numpy image, bit for bit (the shared
    :func:`gluontrain.yolo3.transform.random_color_distort` with MXNet's ``nd.dot``)."""
    return _numpy_distort(img, matmul=_nd_dot, **kwargs)


class FastYOLO3TrainTransform(YOLO3DefaultTrainTransform):
    """``YOLO3DefaultTrainTransform`` with the same outputs, computed in numpy.

    Same parameters as the reference (``width, height, net=None, mean, std, mixup``); the
    image may be a uint8 numpy array or NDArray (HWC, RGB), the label a numpy array
    ``[N, 5+]``. Returns numpy arrays: ``(image [3, H, W], objectness, center_targets,
    scale_targets, weights, class_targets, gt_boxes)`` as float32, or ``(image, label)``
    when ``net`` is None.

    Pickled (``RandomTransformDataLoader`` sends the transform of the batch to its worker with
    every batch) it keeps only what ``__call__`` uses: a few kB instead of the reference's
    NDArrays.
    """

    def __init__(self, width, height, net=None, mean=(0.485, 0.456, 0.406),
                 std=(0.229, 0.224, 0.225), mixup=False, **kwargs):
        super().__init__(width, height, net, mean, std, mixup, **kwargs)
        # the net's layout, as the reference's constructor read it
        layout = None if self._net_none else {
            'num_class': self._num_classes, 'anchors': self._anchors,
            'offsets': self._offsets, 'feat_maps': self._feat_maps}
        self._numpy = TrainTransform(self._width, self._height, layout, _imresize,
                                     self._mean, self._std, self._mixup, _nd_dot)

    def __getstate__(self):
        return {k: v for k, v in self.__dict__.items() if k not in _NOT_PICKLED}

    def __call__(self, src, label):
        """Apply the transform to one training image and its label."""
        return self._numpy(src.asnumpy() if hasattr(src, 'asnumpy') else src, label)
