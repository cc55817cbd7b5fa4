"""GluonCV's YOLOv3 train and validation transforms in numpy, drawing the same random numbers
in the same order, for both backends; how (float32 ``mx.nd`` arithmetic, the crop window
only, the crop trials replayed) is docs/faithfulness.md, "Fast train transform, targets and
VOC metric" ("Augmentation").

The hue product and the resize are passed in: MXNet's ``nd.dot`` and OpenCV ``imresize`` on
MXNet (:mod:`gluontrain.mx.yolo3.fast_transform`), ``np.dot`` and ``cv2.resize`` elsewhere
(:func:`cv2_imresize`: the same pixels for nearest, bilinear, area and Lanczos up to 1e-4 of
255; bicubic within 2e-3 of 255 on float32 images, 1 on uint8 ones).
:func:`augment` is the train transform up to the targets, :func:`val_transform` GluonCV's
``YOLO3DefaultValTransform``; :class:`TrainTransform` adds the targets of
:class:`~gluontrain.yolo3.targets.FastYOLOV3TargetGenerator`."""
import math
import random

import numpy as np

from .targets import FastYOLOV3TargetGenerator

__all__ = ['MEAN', 'STD', 'TrainTransform', 'ValTransform', 'augment', 'val_transform',
           'random_color_distort', 'random_crop_with_constraints', 'bbox_crop', 'bbox_flip',
           'bbox_resize', 'bbox_translate', 'cv2_imresize', 'interp_method', 'to_chw']

#: GluonCV's ImageNet normalisation
MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)

_GRAY = np.array([0.299, 0.587, 0.114], np.float32)
_TYIQ = np.array([[0.299, 0.587, 0.114], [0.596, -0.274, -0.321], [0.211, -0.523, 0.311]])
_ITYIQ = np.array([[1.0, 0.956, 0.621], [1.0, -0.272, -0.647], [1.0, -1.107, 1.705]])
_CONSTRAINTS = ((0.1, None), (0.3, None), (0.5, None), (0.7, None), (0.9, None), (None, 1))


def random_color_distort(img, brightness_delta=32, contrast_low=0.5, contrast_high=1.5,
                         saturation_low=0.5, saturation_high=1.5, hue_delta=18, matmul=np.dot):
    """GluonCV's ``experimental.image.random_color_distort`` on a float32 HWC numpy image.

    Draws ``np.random`` (and ``random`` for the hue angle) exactly as the reference and
    returns the same float32 values when ``matmul`` rounds as the reference's ``nd.dot``
    (docs/faithfulness.md, "Kernels"). ``img`` is modified in place where possible.

    ``matmul(a, t)`` multiplies a C-contiguous float32 ``[N, 3]`` array by the float32 ``[3, 3]``
    hue matrix.
    """
    f32 = np.float32
    if np.random.uniform(0, 1) > 0.5:
        img += f32(np.random.uniform(-brightness_delta, brightness_delta))
    if np.random.randint(0, 2):
        img = _contrast(img, contrast_low, contrast_high)
        img = _saturation(img, saturation_low, saturation_high)
        img = _hue(img, hue_delta, matmul)
    else:
        img = _saturation(img, saturation_low, saturation_high)
        img = _hue(img, hue_delta, matmul)
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
        total *= np.float32(1.0 - alpha)
        img *= np.float32(alpha)
        # the grey added to each channel: numpy's broadcast over a last axis of 3 runs an
        # inner loop of 3, OpenCV's merge builds the 3-channel grey image 4x faster
        import cv2  # pylint: disable=import-outside-toplevel
        img += cv2.merge((total, total, total))
    return img


def _hue(img, delta, matmul):
    if np.random.uniform(0, 1) > 0.5:
        alpha = random.uniform(-delta, delta)
        u, w = np.cos(alpha * np.pi), np.sin(alpha * np.pi)
        bt = np.array([[1.0, 0.0, 0.0], [0.0, u, -w], [0.0, w, u]])
        t = np.dot(np.dot(_ITYIQ, bt), _TYIQ).T.astype(np.float32)
        img = matmul(np.ascontiguousarray(img).reshape(-1, 3), t).reshape(img.shape)
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


def _below(n, bits):
    """``random.randrange(n)`` with ``bits = random.getrandbits``, spelled out."""
    if n <= 0:
        raise ValueError('empty range for randrange()')
    k = n.bit_length()
    r = bits(k)
    while r >= n:
        r = bits(k)
    return r


def _draw_trials(w, h, min_scale, max_scale, max_aspect_ratio, count):
    """Draw ``count`` crop trials from ``random`` as the reference's loop body does.

    ``random.uniform(a, b)`` is ``a + (b - a) * random.random()`` and ``random.randrange(n)``
    draws ``getrandbits(n.bit_length())`` until below ``n``; they are spelled out here (the
    same draws, about 3x faster than the calls): the test compares crops and the stream's
    next values with GluonCV's function on the running Python.
    """
    rnd, bits, sqrt = random.random, random.getrandbits, math.sqrt
    span, low_ratio = max_scale - min_scale, 1 / max_aspect_ratio
    out = []
    for _ in range(count):
        scale = min_scale + span * rnd()
        square = scale * scale
        # max() / min() of the reference, as comparisons (on a tie both are the same value)
        low = square if square > low_ratio else low_ratio
        high = 1 / square
        if high > max_aspect_ratio:
            high = max_aspect_ratio
        root = sqrt(low + (high - low) * rnd())
        crop_h = int(h * scale / root)
        crop_w = int(w * scale * root)
        crop_t = _below(h - crop_h, bits)
        crop_l = _below(w - crop_w, bits)
        out.append((crop_l, crop_t, crop_l + crop_w, crop_t + crop_h))
    return out


def _accepted(bbox, trials, min_iou, max_iou):
    """Indices of the trials whose IoU with every box lies in [min_iou, max_iou]."""
    iou = _iou_with_crops(bbox, np.array(trials, dtype=np.int64).reshape(-1, 4))
    return np.flatnonzero((min_iou <= iou.min(axis=1)) & (iou.max(axis=1) <= max_iou))


def random_crop_with_constraints(bbox, size, min_scale=0.3, max_scale=1, max_aspect_ratio=2,
                                 constraints=None, max_trial=50):
    """GluonCV's ``experimental.bbox.random_crop_with_constraints``, one IoU call per constraint.

    Same arguments, same draws from ``random`` and ``np.random``, same result ``(bbox,
    (x, y, w, h))``. The trials of a constraint are drawn ahead from a saved state of
    ``random`` (the first one alone when there is no lower IoU bound); when one is accepted
    before the last drawn, the state is restored and the draws replayed up to it.
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
        # without a lower bound the first trial is nearly always accepted: try it alone first
        first = 1 if min_iou == -np.inf and max_trial > 1 else max_trial
        clean = True  # the stream stands right after the last trial drawn
        try:
            trials = _draw_trials(w, h, min_scale, max_scale, max_aspect_ratio, first)
            ok = _accepted(bbox, trials, min_iou, max_iou)
            if not len(ok) and first < max_trial:
                rest = _draw_trials(w, h, min_scale, max_scale, max_aspect_ratio,
                                    max_trial - first)
                ok = first + _accepted(bbox, rest, min_iou, max_iou)
                trials += rest
        except ValueError:
            # the reference raises at that trial unless an earlier one is accepted: find
            # how many draw cleanly, then replay them (re-raising if none is accepted)
            random.setstate(state)
            trials, clean = [], False
            try:
                for _ in range(max_trial):
                    trials += _draw_trials(w, h, min_scale, max_scale, max_aspect_ratio, 1)
            except ValueError:
                pass
            ok = _accepted(bbox, trials, min_iou, max_iou)
        if len(ok):
            k = int(ok[0])
            if not clean or k + 1 < len(trials):
                random.setstate(state)
                _draw_trials(w, h, min_scale, max_scale, max_aspect_ratio, k + 1)
            l, t, r, b = trials[k]
            candidates.append((l, t, r - l, b - t))
        elif len(trials) < max_trial:
            random.setstate(state)
            _draw_trials(w, h, min_scale, max_scale, max_aspect_ratio, max_trial)  # raises
    while candidates:
        crop = candidates.pop(np.random.randint(0, len(candidates)))
        new_bbox = bbox_crop(bbox, crop, allow_outside_center=False)
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


def bbox_translate(bbox, x_offset=0, y_offset=0):
    """GluonCV's ``bbox.translate``: corners shifted by the offsets (a copy)."""
    bbox = bbox.copy()
    bbox[:, :4] += (x_offset, y_offset, x_offset, y_offset)
    return bbox


def bbox_crop(bbox, crop_box, allow_outside_center=True):
    """GluonCV's ``bbox.crop`` for a full ``(x, y, w, h)`` crop: boxes clipped to it, in its
    coordinates; boxes left empty (or, unless ``allow_outside_center``, whose centre lies
    outside) are dropped."""
    bbox = bbox.copy()
    left, top, width, height = crop_box
    left, top = left or 0, top or 0
    window = np.array((left, top, left + (width or np.inf), top + (height or np.inf)))
    if allow_outside_center:
        keep = np.ones(bbox.shape[0], dtype=bool)
    else:
        centres = (bbox[:, :2] + bbox[:, 2:4]) / 2
        keep = ((window[:2] <= centres) & (centres < window[2:])).all(axis=1)
    bbox[:, :2] = np.maximum(bbox[:, :2], window[:2])
    bbox[:, 2:4] = np.minimum(bbox[:, 2:4], window[2:4])
    bbox[:, :4] -= np.tile(window[:2], 2)
    keep &= (bbox[:, :2] < bbox[:, 2:4]).all(axis=1)
    return bbox[keep]


def bbox_resize(bbox, in_size, out_size):
    """GluonCV's ``bbox.resize``: corners scaled from ``in_size`` to ``out_size`` (w, h),
    as float64 (its ``astype(float)``)."""
    bbox = bbox.astype(float)
    sx, sy = out_size[0] / in_size[0], out_size[1] / in_size[1]
    bbox[:, :4] *= (sx, sy, sx, sy)
    return bbox


def bbox_flip(bbox, size, flip_x=False):
    """GluonCV's ``bbox.flip`` (horizontal only: the recipe never flips vertically)."""
    bbox = bbox.copy()
    if flip_x:
        width = size[0]
        xmax, xmin = width - bbox[:, 0], width - bbox[:, 2]
        bbox[:, 0], bbox[:, 2] = xmin, xmax
    return bbox


def interp_method(interp, sizes):
    """MXNet's ``_get_interp_method``: 9 is bicubic to enlarge, area to shrink, else
    bilinear; other values are OpenCV's (10, random, is not used by the recipe).

    Parameters
    ----------
    interp : int
    sizes : (old_h, old_w, new_h, new_w)
    """
    if interp == 9:
        oh, ow, nh, nw = sizes
        if nh > oh and nw > ow:
            return 2
        if nh < oh and nw < ow:
            return 3
        return 1
    return interp


def cv2_imresize(img, w, h, interp):
    """``cv2.resize`` of an HWC image to ``w`` x ``h`` with OpenCV interpolation ``interp``
    (``interp_method`` codes; the recipe's 0-4 are OpenCV's own)."""
    import cv2  # pylint: disable=import-outside-toplevel
    interp = interp_method(interp, img.shape[:2] + (h, w))
    return cv2.resize(img, (w, h), interpolation=interp)


def to_chw(img, mean=MEAN, std=STD):
    """``to_tensor`` + ``normalize``: HWC 0-255 to normalised CHW float32."""
    out = np.empty((img.shape[2],) + img.shape[:2], np.float32)
    if img.dtype in (np.float32, np.uint8):
        # exact in float32: the strided transpose read once, as a plain copy, then the
        # arithmetic on contiguous planes (a third faster than dividing from the view)
        out[...] = img.transpose(2, 0, 1)
        out /= np.float32(255)
    else:
        np.divide(img.transpose(2, 0, 1), np.float32(255), out=out)
    out -= np.array(mean, np.float32)[:, None, None]
    out /= np.array(std, np.float32)[:, None, None]
    return out


def augment(src, label, width, height, imresize, mean=MEAN, std=STD, matmul=np.dot):
    """GluonCV's ``YOLO3DefaultTrainTransform`` up to the targets: colour distortion,
    random expansion (p = 0.5, up to 4x), the constrained random crop, a resize with a random
    OpenCV interpolation, a horizontal flip (p = 0.5), normalisation.

    Parameters
    ----------
    src : ndarray [H, W, 3] uint8 (RGB)
    label : ndarray [N, 5+]
        Corner boxes in pixels, class id, more columns (difficult, mixup weight) kept.
    width, height : int
        Output size.
    imresize : callable
        ``imresize(img, w, h, interp)`` on a C-contiguous float32 HWC image.
    matmul : callable
        The hue step's matrix product (:func:`random_color_distort`).

    Returns
    -------
    (ndarray [3, height, width] float32, ndarray [N', 5+])
    """
    img = random_color_distort(np.asarray(src).astype(np.float32), matmul=matmul)
    h, w = img.shape[:2]
    if np.random.uniform(0, 1) > 0.5:
        ratio = random.uniform(1, 4)
        oh, ow = int(h * ratio), int(w * ratio)
        off_y, off_x = random.randint(0, oh - h), random.randint(0, ow - w)
        bbox = bbox_translate(label, x_offset=off_x, y_offset=off_y)
        bbox, crop = random_crop_with_constraints(bbox, (ow, oh))
        fill = np.array([m * 255 for m in mean], np.float32)
        img = _expanded_window(img, fill, (off_x, off_y), crop)
    else:
        bbox, crop = random_crop_with_constraints(label, (w, h))
        x0, y0, cw, ch = crop
        img = img[y0:y0 + ch, x0:x0 + cw]
    h, w = img.shape[:2]
    interp = np.random.randint(0, 5)
    img = imresize(np.ascontiguousarray(img), width, height, interp)
    bbox = bbox_resize(bbox, (w, h), (width, height))
    h, w = img.shape[:2]
    np.random.choice([False, True], p=[1, 0])  # the reference's vertical flip draw
    flip_x = np.random.choice([False, True], p=[0.5, 0.5])
    if flip_x:
        img = img[:, ::-1]
    bbox = bbox_flip(bbox, (w, h), flip_x=flip_x)
    return to_chw(img, mean, std), bbox


def val_transform(src, label, width, height, imresize, mean=MEAN, std=STD):
    """GluonCV's ``YOLO3DefaultValTransform``: resize (interpolation 9: bicubic up, area
    down), normalise; returns ``(image [3, height, width], label as float32)``."""
    h, w = src.shape[:2]
    img = imresize(np.ascontiguousarray(src), width, height, 9)
    bbox = bbox_resize(label, (w, h), (width, height))
    img = to_chw(img, mean, std)
    return img, bbox.astype(img.dtype)


class TrainTransform:
    """The whole train transform: :func:`augment`, then the five targets of
    :class:`~gluontrain.yolo3.targets.FastYOLOV3TargetGenerator`.

    Parameters
    ----------
    width, height : int
    layout : dict or None
        ``num_class``, ``anchors``, ``offsets``, ``feat_maps`` of the network (what GluonCV's
        transform reads from the net run on zeros); None returns ``(image, label)``.
    imresize : callable
        See :func:`augment`.
    mixup : bool
        Objectness from the label's last column (the mixup weight).
    matmul : callable
        See :func:`random_color_distort`.

    Returns (when called)
    ---------------------
    ``(image, objectness, center_targets, scale_targets, weights, class_targets, gt_boxes)``
    as float32 numpy arrays.
    """

    def __init__(self, width, height, layout, imresize=cv2_imresize, mean=MEAN, std=STD,
                 mixup=False, matmul=np.dot):
        self.width, self.height, self.imresize = width, height, imresize
        self.mean, self.std, self.mixup, self.matmul = mean, std, mixup, matmul
        self.targets = None if layout is None else FastYOLOV3TargetGenerator(
            layout['num_class'], layout['anchors'], layout['offsets'], layout['feat_maps'],
            width, height)

    def __call__(self, src, label):
        img, bbox = augment(src, label, self.width, self.height, self.imresize, self.mean,
                            self.std, self.matmul)
        if self.targets is None:
            return img, bbox.astype(img.dtype)
        gt_boxes = bbox[:, :4].astype(np.float32)
        targets = self.targets(gt_boxes, bbox[:, 4:5].astype(np.float32),
                               bbox[:, -1:].astype(np.float32) if self.mixup else None)
        return (img,) + tuple(targets) + (gt_boxes,)


class ValTransform:
    """:func:`val_transform` as a dataset transform ``(src, label) -> (image, label)``."""

    def __init__(self, width, height, imresize=cv2_imresize, mean=MEAN, std=STD):
        self.width, self.height, self.imresize = width, height, imresize
        self.mean, self.std = mean, std

    def __call__(self, src, label):
        return val_transform(src, label, self.width, self.height, self.imresize, self.mean,
                             self.std)
