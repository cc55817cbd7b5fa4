"""Batching images of different sizes: maskrcnn-benchmark's ``ImageList``, ``to_image_list``
and ``BatchCollator``."""
import math

import torch

__all__ = ['ImageList', 'to_image_list', 'BatchCollator', 'BBoxAugCollator']


class ImageList:
    """Images zero-padded into one tensor, with their sizes before padding.

    Parameters
    ----------
    tensors : torch.Tensor
        ``(B, C, H, W)``.
    image_sizes : list of tuple
        ``(height, width)`` of each image.
    """

    def __init__(self, tensors, image_sizes):
        self.tensors = tensors
        self.image_sizes = image_sizes

    def to(self, *args, **kwargs):
        """A copy with ``tensors.to(*args, **kwargs)``."""
        return ImageList(self.tensors.to(*args, **kwargs), self.image_sizes)


def to_image_list(tensors, size_divisible=0):
    """Pad images to a common size, rounded up to a multiple of ``size_divisible``.

    Parameters
    ----------
    tensors : ImageList, torch.Tensor or sequence of torch.Tensor
        An ``ImageList`` is returned as is; a ``(C, H, W)`` or ``(B, C, H, W)`` tensor is
        wrapped (padded when ``size_divisible > 0``); a sequence of ``(C, H, W)`` tensors is
        padded with zeros at the bottom and right.
    size_divisible : int
        0 for no rounding (the FPN configs use 32).

    Returns
    -------
    ImageList
    """
    if isinstance(tensors, torch.Tensor) and size_divisible > 0:
        tensors = [tensors]
    if isinstance(tensors, ImageList):
        return tensors
    if isinstance(tensors, torch.Tensor):
        if tensors.dim() == 3:
            tensors = tensors[None]
        if tensors.dim() != 4:
            raise ValueError('to_image_list needs (C, H, W) or (B, C, H, W) tensors, got shape '
                             '{}'.format(tuple(tensors.shape)))
        return ImageList(tensors, [tensor.shape[-2:] for tensor in tensors])
    if isinstance(tensors, (tuple, list)):
        max_size = tuple(max(s) for s in zip(*[img.shape for img in tensors]))
        if size_divisible > 0:
            stride = size_divisible
            max_size = (max_size[0], int(math.ceil(max_size[1] / stride) * stride),
                        int(math.ceil(max_size[2] / stride) * stride))
        batched_imgs = tensors[0].new_zeros((len(tensors),) + max_size)
        for img, pad_img in zip(tensors, batched_imgs):
            pad_img[: img.shape[0], : img.shape[1], : img.shape[2]].copy_(img)
        return ImageList(batched_imgs, [im.shape[-2:] for im in tensors])
    raise TypeError('Unsupported type for to_image_list: {}'.format(type(tensors)))


class BatchCollator:
    """``DataLoader`` ``collate_fn``: ``[(image, target, index), ...]`` ->
    ``(ImageList, targets tuple, indices tuple)``.

    Parameters
    ----------
    size_divisible : int
        ``DATALOADER.SIZE_DIVISIBILITY``.
    """

    def __init__(self, size_divisible=0):
        self.size_divisible = size_divisible

    def __call__(self, batch):
        transposed_batch = list(zip(*batch))
        images = to_image_list(transposed_batch[0], self.size_divisible)
        return images, transposed_batch[1], transposed_batch[2]


class BBoxAugCollator:
    """``collate_fn`` for test-time box augmentation: the samples' fields as tuples."""

    def __call__(self, batch):
        return list(zip(*batch))
