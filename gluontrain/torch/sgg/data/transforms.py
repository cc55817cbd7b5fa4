"""maskrcnn-benchmark's image transforms (``data/transforms``), on PIL and torch only.

torchvision is not a dependency: resizing is PIL's bilinear ``Image.resize`` (what
``torchvision.transforms.functional.resize`` calls on a PIL image), ``ToTensor`` and
``Normalize`` are the same arithmetic as torchvision's, and the colour jitter uses PIL's
``ImageEnhance`` as torchvision's PIL path does (hue is not provided).
"""
import random

import numpy as np
import torch
from PIL import Image, ImageEnhance

from ...twostage.structures import BoxList

__all__ = ['Compose', 'Resize', 'RandomHorizontalFlip', 'RandomVerticalFlip', 'ColorJitter',
           'ToTensor', 'Normalize', 'build_transforms']


class Compose:
    """Apply ``transforms`` in order to ``(image, target)``."""

    def __init__(self, transforms):
        self.transforms = transforms

    def __call__(self, image, target):
        for t in self.transforms:
            image, target = t(image, target)
        return image, target

    def __repr__(self):
        return 'Compose(\n' + ''.join('    {}\n'.format(t) for t in self.transforms) + ')'


class Resize:
    """Scale the shorter side to a random ``min_size`` unless the longer would pass ``max_size``.

    Parameters
    ----------
    min_size : int or sequence of int
        Candidate shorter sides (one drawn with ``random.choice`` per image).
    max_size : int or None
        Cap on the longer side.
    """

    def __init__(self, min_size, max_size):
        self.min_size = min_size if isinstance(min_size, (list, tuple)) else (min_size,)
        self.max_size = max_size

    def get_size(self, image_size):
        """``(height, width)`` for a ``(width, height)`` image (maskrcnn-benchmark's arithmetic:
        the capped side is rounded, the other truncated)."""
        w, h = image_size
        size = random.choice(self.min_size)
        max_size = self.max_size
        if max_size is not None:
            min_original_size = float(min((w, h)))
            max_original_size = float(max((w, h)))
            if max_original_size / min_original_size * size > max_size:
                size = int(round(max_size * min_original_size / max_original_size))
        # maskrcnn-benchmark first returns (h, w) when the shorter side is already ``size``:
        # the same numbers (w * h / w is exact), so that branch is left out
        return (int(size * h / w), size) if w < h else (size, int(size * w / h))

    def __call__(self, image, target=None):
        oh, ow = self.get_size(image.size)
        if (ow, oh) != image.size:
            image = image.resize((ow, oh), Image.BILINEAR)
        if target is None:
            return image
        if isinstance(target, BoxList):
            target = target.resize(image.size)
        return image, target

    def __repr__(self):
        return 'Resize(min_size={}, max_size={})'.format(self.min_size, self.max_size)


class RandomHorizontalFlip:
    """Flip image and boxes left-right with probability ``prob`` (``random.random()``)."""

    # PIL's transpose of the image, BoxList.transpose's of the boxes
    _image_method, _box_method = Image.FLIP_LEFT_RIGHT, 0

    def __init__(self, prob=0.5):
        self.prob = prob

    def __call__(self, image, target):
        if random.random() < self.prob:
            image = image.transpose(self._image_method)
            target = target.transpose(self._box_method)
        return image, target


class RandomVerticalFlip(RandomHorizontalFlip):
    """Flip image and boxes top-bottom with probability ``prob`` (``random.random()``)."""

    _image_method, _box_method = Image.FLIP_TOP_BOTTOM, 1


class ColorJitter:
    """Random brightness, contrast and saturation in random order, as torchvision's
    ``ColorJitter`` on a PIL image (factors uniform in ``[max(0, 1 - v), 1 + v]``, order and
    factors drawn from torch's generator)."""

    def __init__(self, brightness=0.0, contrast=0.0, saturation=0.0, hue=0.0):
        if hue:
            raise ValueError('INPUT.HUE = {} is not supported (no torchvision); set it to 0.'
                             .format(hue))
        self.ranges = [(ImageEnhance.Brightness, brightness), (ImageEnhance.Contrast, contrast),
                       (ImageEnhance.Color, saturation)]

    def __call__(self, image, target):
        order = torch.randperm(4).tolist()
        factors = [None if not v else float(torch.empty(1).uniform_(max(0.0, 1 - v), 1 + v))
                   for _, v in self.ranges]
        for i in order:
            if i < 3 and factors[i] is not None:
                image = self.ranges[i][0](image).enhance(factors[i])
        return image, target


class ToTensor:
    """PIL RGB image -> ``(3, H, W)`` float tensor in ``[0, 1]``."""

    def __call__(self, image, target):
        array = np.asarray(image, dtype=np.uint8)
        tensor = torch.from_numpy(array.copy()).permute(2, 0, 1).float().div(255)
        return tensor, target


class Normalize:
    """``(x - mean) / std`` per channel, after RGB[0,1] -> BGR[0,255] when ``to_bgr255``."""

    def __init__(self, mean, std, to_bgr255=True):
        self.mean, self.std, self.to_bgr255 = mean, std, to_bgr255

    def __call__(self, image, target=None):
        if self.to_bgr255:
            image = image[[2, 1, 0]] * 255
        mean = torch.as_tensor(self.mean, dtype=image.dtype).view(-1, 1, 1)
        std = torch.as_tensor(self.std, dtype=image.dtype).view(-1, 1, 1)
        image = (image - mean) / std
        return image if target is None else (image, target)


def build_transforms(cfg, is_train=True):
    """maskrcnn-benchmark's ``build_transforms``.

    Parameters
    ----------
    cfg : yacs.config.CfgNode
        Reads ``INPUT.MIN_SIZE_TRAIN/MAX_SIZE_TRAIN`` (``_TEST`` when not training),
        ``INPUT.VERTICAL_FLIP_PROB_TRAIN``, ``INPUT.BRIGHTNESS/CONTRAST/SATURATION/HUE``,
        ``INPUT.TO_BGR255``, ``INPUT.PIXEL_MEAN/PIXEL_STD``, and ``INPUT.FLIP_PROB_TRAIN`` (ours,
        default 0.5: SGB has no such key and hard-codes 0.5; 0.5 when a config lacks it).
    is_train : bool

    Returns
    -------
    Compose
        ``[ColorJitter], Resize, RandomHorizontalFlip, RandomVerticalFlip, ToTensor,
        Normalize`` (the jitter only when some strength is non-zero).
    """
    inp = cfg.INPUT
    if is_train:
        min_size, max_size = inp.MIN_SIZE_TRAIN, inp.MAX_SIZE_TRAIN
        flip_horizontal_prob = inp.get('FLIP_PROB_TRAIN', 0.5)
        flip_vertical_prob = inp.VERTICAL_FLIP_PROB_TRAIN
        jitter = (inp.BRIGHTNESS, inp.CONTRAST, inp.SATURATION, inp.HUE)
    else:
        min_size, max_size = inp.MIN_SIZE_TEST, inp.MAX_SIZE_TEST
        flip_horizontal_prob = flip_vertical_prob = 0.0
        jitter = (0.0, 0.0, 0.0, 0.0)
    steps = []
    if any(jitter):
        # SGB's jitter at strength 0 is the identity (it only draws random numbers)
        steps.append(ColorJitter(*jitter))
    steps += [Resize(min_size, max_size), RandomHorizontalFlip(flip_horizontal_prob),
              RandomVerticalFlip(flip_vertical_prob), ToTensor(),
              Normalize(mean=inp.PIXEL_MEAN, std=inp.PIXEL_STD, to_bgr255=inp.TO_BGR255)]
    return Compose(steps)
