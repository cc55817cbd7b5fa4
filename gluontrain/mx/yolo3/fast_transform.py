"""GluonCV's YOLOv3 train transform in numpy, drawing the same random numbers in the same order.

:class:`FastYOLO3TrainTransform` is ``YOLO3DefaultTrainTransform`` (it subclasses it: same
constructor, same net run on zeros for the feature map sizes) with ``__call__`` rewritten:

* colour distortion in float32 numpy with the ``mx.nd`` arithmetic reproduced: scalars are
  rounded to float32 before they are applied, the saturation grey is ``mx.nd.sum``'s
  Kahan-compensated sum, the hue matrix product is the same ``sgemm`` on ``(H*W, 3)``;
* the expansion canvas is never built: only the window the random crop keeps is filled with
  the mean colour and the image pasted into it (the same pixels, without allocating and
  copying a canvas up to 16 times the image);
* the 300 random-crop trials are drawn from Python's ``random`` as the reference draws them,
  their IoU with the boxes computed in one array operation per constraint, and the stream
  rewound and replayed up to the accepted trial, so it ends where the reference's ends;
* the resize is MXNet's own OpenCV ``imresize`` (the OpenCV in ``cv2`` rounds bilinear and
  area upsampling differently), the flip a view, ``to_tensor`` + ``normalize`` one pass;
* targets come from :class:`~gluontrain.mx.yolo3.fast_targets.FastYOLOV3TargetGenerator`.

Outputs are numpy arrays equal (``np.array_equal``) to the reference's for the same seeds of
``random`` and ``np.random`` (``tests/mx/yolo3/test_fast_transform.py``); the batchify
functions turn them into the same NDArrays.
"""
import math
import random

import numpy as np
import mxnet as mx

from gluoncv.data.transforms import bbox as tbbox
from gluoncv.data.transforms.presets.yolo import YOLO3DefaultTrainTransform

from .fast_targets import FastYOLOV3TargetGenerator

__all__ = ['FastYOLO3TrainTransform', 'random_color_distort', 'random_crop_with_constraints']

_GRAY = np.array([0.299, 0.587, 0.114], np.float32)
_TYIQ = np.array([[0.299, 0.587, 0.114], [0.596, -0.274, -0.321], [0.211, -0.523, 0.311]])
_ITYIQ = np.array([[1.0, 0.956, 0.621], [1.0, -0.272, -0.647], [1.0, -1.107, 1.705]])
_CONSTRAINTS = ((0.1, None), (0.3, None), (0.5, None), (0.7, None), (0.9, None), (None, 1))


def random_color_distort(img, brightness_delta=32, contrast_low=0.5, contrast_high=1.5,
                         saturation_low=0.5, saturation_high=1.5, hue_delta=18):
    """GluonCV's ``experimental.image.random_color_distort`` on a float32 HWC numpy image.

    Draws ``np.random`` (and ``random`` for the hue angle) exactly as the reference and
    returns the same float32 values. ``img`` is modified in place where possible.
    """
    f32 = np.float32
    if np.random.uniform(0, 1) > 0.5:
        img += f32(np.random.uniform(-brightness_delta, brightness_delta))
    if np.random.randint(0, 2):
        img = _contrast(img, contrast_low, contrast_high)
        img = _saturation(img, saturation_low, saturation_high)
        img = _hue(img, hue_delta)
    else:
        img = _saturation(img, saturation_low, saturation_high)
        img = _hue(img, hue_delta)
        img = _contrast(img, contrast_low, contrast_high)
    return img


def _contrast(img, low, high):
    if np.random.uniform(0, 1) > 0.5:
        img *= np.float32(np.random.uniform(low, high))
    return img


def _saturation(img, low, high):
    if np.random.uniform(0, 1) > 0.5:
        alpha = np.random.uniform(low, high)
        w0, w1, w2 = (img[:, :, c] * _GRAY[c] for c in range(3))
        # mx.nd.sum's Kahan-compensated sum of three terms from zero, unrolled: the first
        # two steps add exactly, the third corrects by the rounding error of w0 + w1
        total = w0 + w1
        total += w2 - ((total - w0) - w1)
        total = total[:, :, None]
        total *= np.float32(1.0 - alpha)
        img *= np.float32(alpha)
        img += total
    return img


def _hue(img, delta):
    if np.random.uniform(0, 1) > 0.5:
        alpha = random.uniform(-delta, delta)
        u, w = np.cos(alpha * np.pi), np.sin(alpha * np.pi)
        bt = np.array([[1.0, 0.0, 0.0], [0.0, u, -w], [0.0, w, u]])
        t = np.dot(np.dot(_ITYIQ, bt), _TYIQ).T.astype(np.float32)
        img = np.dot(img.reshape(-1, 3), t).reshape(img.shape)
    return img


def _iou_with_crops(bbox, crops):
    """``gluoncv.utils.bbox_iou(bbox, crop[None])`` for many crops: [trials, boxes]."""
    tl = np.maximum(bbox[None, :, :2], crops[:, None, :2])
    br = np.minimum(bbox[None, :, 2:4], crops[:, None, 2:4])
    area_i = np.prod(br - tl, axis=2) * (tl < br).all(axis=2)
    area_a = np.prod(bbox[:, 2:4] - bbox[:, :2], axis=1)
    area_b = np.prod(crops[:, 2:4] - crops[:, :2], axis=1)
    with np.errstate(divide='ignore', invalid='ignore'):
        return area_i / (area_a[None, :] + area_b[:, None] - area_i)


def _draw_trials(w, h, min_scale, max_scale, max_aspect_ratio, count):
    """Draw ``count`` crop trials from ``random`` as the reference's loop body does."""
    out = []
    for _ in range(count):
        scale = random.uniform(min_scale, max_scale)
        aspect_ratio = random.uniform(max(1 / max_aspect_ratio, scale * scale),
                                      min(max_aspect_ratio, 1 / (scale * scale)))
        crop_h = int(h * scale / math.sqrt(aspect_ratio))
        crop_w = int(w * scale * math.sqrt(aspect_ratio))
        crop_t = random.randrange(h - crop_h)
        crop_l = random.randrange(w - crop_w)
        out.append((crop_l, crop_t, crop_l + crop_w, crop_t + crop_h))
    return out


def random_crop_with_constraints(bbox, size, min_scale=0.3, max_scale=1, max_aspect_ratio=2,
                                 constraints=None, max_trial=50):
    """GluonCV's ``experimental.bbox.random_crop_with_constraints``, one IoU call per constraint.

    Same arguments, same draws from ``random`` and ``np.random``, same result ``(bbox,
    (x, y, w, h))``. The trials of a constraint are drawn ahead from a saved state of
    ``random``; when one is accepted the state is restored and the draws replayed up to it.
    """
    w, h = size
    candidates = [(0, 0, w, h)]
    for min_iou, max_iou in (_CONSTRAINTS if constraints is None else constraints):
        min_iou = -np.inf if min_iou is None else min_iou
        max_iou = np.inf if max_iou is None else max_iou
        if len(bbox) == 0:
            l, t, r, b = _draw_trials(w, h, min_scale, max_scale, max_aspect_ratio, 1)[0]
            return bbox, (l, t, r - l, b - t)
        state = random.getstate()
        try:
            trials = _draw_trials(w, h, min_scale, max_scale, max_aspect_ratio, max_trial)
        except ValueError:
            # the reference raises at that trial unless an earlier one is accepted: find
            # how many draw cleanly, then replay them (re-raising if none is accepted)
            random.setstate(state)
            trials = []
            try:
                for _ in range(max_trial):
                    trials += _draw_trials(w, h, min_scale, max_scale, max_aspect_ratio, 1)
            except ValueError:
                pass
        iou = _iou_with_crops(bbox, np.array(trials, dtype=np.int64).reshape(-1, 4))
        ok = np.flatnonzero((min_iou <= iou.min(axis=1)) & (iou.max(axis=1) <= max_iou))
        if len(ok):
            k = int(ok[0])
            random.setstate(state)
            _draw_trials(w, h, min_scale, max_scale, max_aspect_ratio, k + 1)
            l, t, r, b = trials[k]
            candidates.append((l, t, r - l, b - t))
        elif len(trials) < max_trial:
            random.setstate(state)
            _draw_trials(w, h, min_scale, max_scale, max_aspect_ratio, max_trial)  # raises
    while candidates:
        crop = candidates.pop(np.random.randint(0, len(candidates)))
        new_bbox = tbbox.crop(bbox, crop, allow_outside_center=False)
        if new_bbox.size < 1:
            continue
        return new_bbox, (crop[0], crop[1], crop[2], crop[3])
    return bbox, (0, 0, w, h)


def _expanded_window(img, fill, offset, window):
    """``window`` (x, y, w, h) of ``img`` pasted at ``offset`` on a ``fill`` canvas."""
    x0, y0, cw, ch = window
    c = img.shape[2]
    out = np.empty((ch, cw, c), np.float32)
    rows = out.reshape(ch, cw * c)
    # one long row of the fill colour: broadcasting a 3-vector pixel by pixel is ~5x slower
    fill_row = np.tile(fill, cw)
    ox, oy = offset
    h, w = img.shape[:2]
    # the pasted image's extent inside the window, in window coordinates
    left, top = min(max(ox - x0, 0), cw), min(max(oy - y0, 0), ch)
    right, bottom = max(min(ox + w - x0, cw), left), max(min(oy + h - y0, ch), top)
    rows[:top] = fill_row
    rows[bottom:] = fill_row
    if bottom > top:
        out[top:bottom, :left] = fill_row[:left * c].reshape(left, c)
        out[top:bottom, right:] = fill_row[:(cw - right) * c].reshape(cw - right, c)
        out[top:bottom, left:right] = img[top + y0 - oy:bottom + y0 - oy,
                                          left + x0 - ox:right + x0 - ox]
    return out


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
        img = random_color_distort(img.astype(np.float32))
        h, w = img.shape[:2]
        if np.random.uniform(0, 1) > 0.5:
            ratio = random.uniform(1, 4)
            oh, ow = int(h * ratio), int(w * ratio)
            off_y, off_x = random.randint(0, oh - h), random.randint(0, ow - w)
            bbox = tbbox.translate(label, x_offset=off_x, y_offset=off_y)
            bbox, crop = random_crop_with_constraints(bbox, (ow, oh))
            fill = np.array([m * 255 for m in self._mean], np.float32)
            img = _expanded_window(img, fill, (off_x, off_y), crop)
        else:
            bbox, crop = random_crop_with_constraints(label, (w, h))
            x0, y0, cw, ch = crop
            img = img[y0:y0 + ch, x0:x0 + cw]
        h, w = img.shape[:2]
        interp = np.random.randint(0, 5)
        img = _imresize(np.ascontiguousarray(img), self._width, self._height, interp)
        bbox = tbbox.resize(bbox, (w, h), (self._width, self._height))
        h, w = img.shape[:2]
        np.random.choice([False, True], p=[1, 0])  # the reference's vertical flip draw
        flip_x = np.random.choice([False, True], p=[0.5, 0.5])
        if flip_x:
            img = img[:, ::-1]
        bbox = tbbox.flip(bbox, (w, h), flip_x=flip_x)
        # to_tensor + normalize, written straight into CHW planes: a per-channel scalar over
        # contiguous memory is several times faster than a 3-vector broadcast over HWC
        out = np.empty((img.shape[2],) + img.shape[:2], np.float32)
        np.divide(img.transpose(2, 0, 1), np.float32(255), out=out)
        out -= np.array(self._mean, np.float32)[:, None, None]
        out /= np.array(self._std, np.float32)[:, None, None]
        img = out
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
