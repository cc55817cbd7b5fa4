"""ssd.pytorch's training augmentation (``utils/augmentations.py``) and eval transform.

Every transform is called as ``t(img, boxes=None, labels=None) -> (img, boxes, labels)`` on an
HWC BGR numpy image and ``[N, 4]`` boxes (x1, y1, x2, y2). Randomness comes from the global
``numpy.random`` exactly as in the reference (same calls, same order), so ``np.random.seed``
reproduces the reference's draws. What is fixed (the mode draw on NumPy >= 1.24, images
without boxes pass through uncropped) and what is kept (``RandomSampleCrop``'s IoU rule that
never rejects; ``fix_iou_constraint=True`` applies the intended one): docs/faithfulness.md,
"SSD300", "Deliberate differences"."""
import cv2
import numpy as np
from numpy import random

from ...core.voc_eval import box_iou

__all__ = ['Compose', 'ConvertFromInts', 'SubtractMeans',
           'ToAbsoluteCoords', 'ToPercentCoords', 'Resize', 'RandomSaturation', 'RandomHue',
           'RandomLightingNoise', 'ConvertColor', 'RandomContrast', 'RandomBrightness',
           'RandomSampleCrop', 'Expand', 'RandomMirror', 'SwapChannels',
           'PhotometricDistort', 'SSDAugmentation', 'BaseTransform', 'base_transform']


def _has_boxes(boxes):
    return boxes is not None and len(boxes) > 0


class Compose:
    """Apply ``transforms`` in order, threading ``(img, boxes, labels)`` through them."""

    def __init__(self, transforms):
        self.transforms = transforms

    def __call__(self, img, boxes=None, labels=None):
        """Run every transform; returns ``(img, boxes, labels)``."""
        for t in self.transforms:
            img, boxes, labels = t(img, boxes, labels)
        return img, boxes, labels


class ConvertFromInts:
    """Cast the image to float32 (the photometric ops work in float)."""

    def __call__(self, image, boxes=None, labels=None):
        """Returns ``(image as float32, boxes, labels)``."""
        return image.astype(np.float32), boxes, labels


class SubtractMeans:
    """Subtract the per-channel (BGR) ``mean``; output float32."""

    def __init__(self, mean):
        self.mean = np.array(mean, dtype=np.float32)

    def __call__(self, image, boxes=None, labels=None):
        """Returns ``(image - mean, boxes, labels)``."""
        image = image.astype(np.float32)
        image -= self.mean
        return image.astype(np.float32), boxes, labels


class ToAbsoluteCoords:
    """Scale relative boxes by the image width/height (in place, as the reference)."""

    def __call__(self, image, boxes=None, labels=None):
        """Returns ``(image, boxes in pixels, labels)``."""
        height, width, _ = image.shape
        boxes[:, 0::2] *= width
        boxes[:, 1::2] *= height
        return image, boxes, labels


class ToPercentCoords:
    """Divide pixel boxes by the image width/height (in place, as the reference)."""

    def __call__(self, image, boxes=None, labels=None):
        """Returns ``(image, boxes in [0, 1], labels)``."""
        height, width, _ = image.shape
        boxes[:, 0::2] /= width
        boxes[:, 1::2] /= height
        return image, boxes, labels


class Resize:
    """Resize to ``size`` x ``size`` with OpenCV's default (bilinear) interpolation; boxes
    must already be relative."""

    def __init__(self, size=300):
        self.size = size

    def __call__(self, image, boxes=None, labels=None):
        """Returns ``(resized image, boxes, labels)``."""
        return cv2.resize(image, (self.size, self.size)), boxes, labels


class _RandomScale:
    """With p = 0.5, multiply the image's ``channels`` by U(lower, upper), in place: the
    reference's RandomSaturation and RandomContrast, which differ only in the channels
    (their checks and messages are the reference's, 'contrast' in both)."""
    channels = slice(None)

    def __init__(self, lower=0.5, upper=1.5):
        assert upper >= lower, 'contrast upper must be >= lower.'
        assert lower >= 0, 'contrast lower must be non-negative.'
        self.lower = lower
        self.upper = upper

    def __call__(self, image, boxes=None, labels=None):
        """Returns ``(image, boxes, labels)``; ``image`` is modified in place."""
        if random.randint(2):
            image[:, :, self.channels] *= random.uniform(self.lower, self.upper)
        return image, boxes, labels


class RandomSaturation(_RandomScale):
    """With p = 0.5, multiply the S channel of an HSV image by U(lower, upper)."""
    channels = 1


class RandomHue:
    """With p = 0.5, shift the H channel (degrees) by U(-delta, delta), wrapped to [0, 360]."""

    def __init__(self, delta=18.0):
        assert 0.0 <= delta <= 360.0
        self.delta = delta

    def __call__(self, image, boxes=None, labels=None):
        """Returns ``(image, boxes, labels)``; ``image`` is modified in place."""
        if random.randint(2):
            image[:, :, 0] += random.uniform(-self.delta, self.delta)
            image[:, :, 0][image[:, :, 0] > 360.0] -= 360.0
            image[:, :, 0][image[:, :, 0] < 0.0] += 360.0
        return image, boxes, labels


class SwapChannels:
    """Reorder the channels of an HWC image to ``swaps`` (e.g. ``(2, 1, 0)``)."""

    def __init__(self, swaps):
        self.swaps = swaps

    def __call__(self, image):
        """Returns a copy of ``image`` with channels ``swaps``."""
        return image[:, :, self.swaps]


class RandomLightingNoise:
    """With p = 0.5, apply one of the six channel permutations (uniformly)."""

    def __init__(self):
        self.perms = ((0, 1, 2), (0, 2, 1), (1, 0, 2), (1, 2, 0), (2, 0, 1), (2, 1, 0))

    def __call__(self, image, boxes=None, labels=None):
        """Returns ``(image, boxes, labels)``."""
        if random.randint(2):
            swap = self.perms[random.randint(len(self.perms))]
            image = SwapChannels(swap)(image)
        return image, boxes, labels


class ConvertColor:
    """Convert between BGR and HSV with OpenCV (float32 in: H in degrees, S in [0, 1])."""

    def __init__(self, current='BGR', transform='HSV'):
        self.transform = transform
        self.current = current

    def __call__(self, image, boxes=None, labels=None):
        """Returns ``(converted image, boxes, labels)``."""
        if self.current == 'BGR' and self.transform == 'HSV':
            image = cv2.cvtColor(image, cv2.COLOR_BGR2HSV)
        elif self.current == 'HSV' and self.transform == 'BGR':
            image = cv2.cvtColor(image, cv2.COLOR_HSV2BGR)
        else:
            raise NotImplementedError('{} -> {}'.format(self.current, self.transform))
        return image, boxes, labels


class RandomContrast(_RandomScale):
    """With p = 0.5, multiply the (float) image by U(lower, upper)."""


class RandomBrightness:
    """With p = 0.5, add U(-delta, delta) to every pixel (no clipping, as the reference)."""

    def __init__(self, delta=32):
        assert 0.0 <= delta <= 255.0
        self.delta = delta

    def __call__(self, image, boxes=None, labels=None):
        """Returns ``(image, boxes, labels)``; ``image`` is modified in place."""
        if random.randint(2):
            image += random.uniform(-self.delta, self.delta)
        return image, boxes, labels


class PhotometricDistort:
    """Brightness, then (p = 0.5 each) contrast before *or* after the HSV block
    (BGR->HSV, saturation, hue, HSV->BGR), then a random channel swap. Works on a copy;
    boxes and labels pass through untouched."""

    def __init__(self):
        self.pd = [RandomContrast(), ConvertColor(transform='HSV'), RandomSaturation(),
                   RandomHue(), ConvertColor(current='HSV', transform='BGR'),
                   RandomContrast()]
        self.rand_brightness = RandomBrightness()
        self.rand_light_noise = RandomLightingNoise()

    def __call__(self, image, boxes=None, labels=None):
        """Returns ``(distorted copy of image, boxes, labels)``."""
        im = image.copy()
        im, boxes, labels = self.rand_brightness(im, boxes, labels)
        distort = Compose(self.pd[:-1] if random.randint(2) else self.pd[1:])
        im, boxes, labels = distort(im, boxes, labels)
        return self.rand_light_noise(im, boxes, labels)


class Expand:
    """With p = 0.5, place the image at a random offset on a canvas up to 4x its size filled
    with ``mean`` (zoom out); pixel boxes are shifted by the integer offset."""

    def __init__(self, mean):
        self.mean = mean

    def __call__(self, image, boxes=None, labels=None):
        """Returns ``(image, boxes, labels)``, boxes in pixels."""
        if random.randint(2):
            return image, boxes, labels
        height, width, depth = image.shape
        ratio = random.uniform(1, 4)
        left = random.uniform(0, width * ratio - width)
        top = random.uniform(0, height * ratio - height)
        expand_image = np.full((int(height * ratio), int(width * ratio), depth), self.mean,
                               dtype=image.dtype)
        expand_image[int(top):int(top + height), int(left):int(left + width)] = image
        if boxes is not None:
            boxes = boxes.copy()
            boxes += (int(left), int(top), int(left), int(top))
        return expand_image, boxes, labels


class RandomSampleCrop:
    """SSD's random crop (zoom in), on pixel boxes.

    Draws a mode among: keep the whole image, a crop with minimum IoU 0.1 / 0.3 / 0.7 / 0.9
    to the boxes, or a free crop; tries up to 50 crops of 0.3-1x the sides with aspect ratio
    h / w in [0.5, 2] (integer corners) and keeps the boxes whose centre lies strictly inside
    the crop, clipped to it; when no trial keeps a box, draws a new mode.

    Parameters
    ----------
    fix_iou_constraint : bool, default False
        False = the reference's test (effectively no IoU constraint, see the module notes);
        True = the SSD paper's constraint.
    """

    def __init__(self, fix_iou_constraint=False):
        self.sample_options = (
            None,           # the whole image
            (0.1, None),    # min IoU with the boxes
            (0.3, None),
            (0.7, None),
            (0.9, None),
            (None, None),   # any patch
        )
        self.fix_iou_constraint = fix_iou_constraint

    def __call__(self, image, boxes=None, labels=None):
        """Returns ``(image, boxes, labels)``, cropped (boxes in crop pixels) or unchanged."""
        if not _has_boxes(boxes):
            return image, boxes, labels  # nothing to keep: the reference crashed here
        height, width, _ = image.shape
        while True:
            # randint(n) is the draw np.random.choice made on the (now ragged) options
            mode = self.sample_options[random.randint(len(self.sample_options))]
            if mode is None:
                return image, boxes, labels
            min_iou, max_iou = mode
            min_iou = float('-inf') if min_iou is None else min_iou
            max_iou = float('inf') if max_iou is None else max_iou
            for _ in range(50):
                w = random.uniform(0.3 * width, width)
                h = random.uniform(0.3 * height, height)
                if h / w < 0.5 or h / w > 2:
                    continue
                left = random.uniform(width - w)
                top = random.uniform(height - h)
                rect = np.array([int(left), int(top), int(left + w), int(top + h)])
                overlap = box_iou(rect, boxes)
                if self.fix_iou_constraint:
                    rejected = overlap.min() < min_iou or overlap.max() > max_iou
                else:
                    rejected = overlap.min() < min_iou and max_iou < overlap.max()
                if rejected:
                    continue
                current_image = image[rect[1]:rect[3], rect[0]:rect[2], :]
                centers = (boxes[:, :2] + boxes[:, 2:]) / 2.0
                mask = ((rect[:2] < centers) & (centers < rect[2:])).all(1)
                if not mask.any():
                    continue
                current_boxes = boxes[mask, :].copy()
                current_labels = labels[mask]
                current_boxes[:, :2] = np.maximum(current_boxes[:, :2], rect[:2])
                current_boxes[:, :2] -= rect[:2]
                current_boxes[:, 2:] = np.minimum(current_boxes[:, 2:], rect[2:])
                current_boxes[:, 2:] -= rect[:2]
                return current_image, current_boxes, current_labels


class RandomMirror:
    """With p = 0.5, flip the image left-right and mirror the pixel boxes."""

    def __call__(self, image, boxes=None, labels=None):
        """Returns ``(image, boxes, labels)``."""
        _, width, _ = image.shape
        if random.randint(2):
            image = image[:, ::-1]
            if boxes is not None:
                boxes = boxes.copy()
                boxes[:, 0::2] = width - boxes[:, 2::-2]
        return image, boxes, labels


class SSDAugmentation:
    """ssd.pytorch's training augmentation.

    ConvertFromInts, ToAbsoluteCoords, PhotometricDistort, Expand(mean), RandomSampleCrop,
    RandomMirror, ToPercentCoords, Resize(size), SubtractMeans(mean).

    Parameters
    ----------
    size : int
        Output side.
    mean : tuple of 3 numbers
        BGR mean (used for the Expand fill and subtracted at the end).
    fix_iou_constraint : bool, default False
        Passed to :class:`RandomSampleCrop` (False = the reference).

    Examples
    --------
    >>> img, boxes, labels = SSDAugmentation(300)(bgr_uint8, rel_boxes, labels)
    """

    def __init__(self, size=300, mean=(104, 117, 123), fix_iou_constraint=False):
        self.mean = mean
        self.size = size
        self.augment = Compose([
            ConvertFromInts(),
            ToAbsoluteCoords(),
            PhotometricDistort(),
            Expand(self.mean),
            RandomSampleCrop(fix_iou_constraint),
            RandomMirror(),
            ToPercentCoords(),
            Resize(self.size),
            SubtractMeans(self.mean),
        ])

    def __call__(self, img, boxes=None, labels=None):
        """Augment an HWC BGR image with relative ``boxes`` [N, 4] (float, modified in
        place) and ``labels`` [N].

        Returns
        -------
        (numpy.ndarray, numpy.ndarray, numpy.ndarray)
            float32 ``[size, size, 3]`` image minus mean, relative boxes, labels.
        """
        return self.augment(img, boxes, labels)


def base_transform(image, size, mean):
    """Resize ``image`` to ``size`` x ``size`` (bilinear) and subtract ``mean``; float32."""
    x = cv2.resize(image, (size, size)).astype(np.float32)
    x -= mean
    return x.astype(np.float32)


class BaseTransform:
    """The eval transform: resize to ``size`` x ``size`` and subtract the BGR ``mean``.

    Parameters
    ----------
    size : int
        Output side.
    mean : tuple of 3 numbers
        BGR mean.
    """

    def __init__(self, size, mean):
        self.size = size
        self.mean = np.array(mean, dtype=np.float32)

    def __call__(self, image, boxes=None, labels=None):
        """Returns ``(float32 image, boxes, labels)``; boxes and labels pass through."""
        return base_transform(image, self.size, self.mean), boxes, labels
