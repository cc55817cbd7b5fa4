"""The image batch of both two-stage flavours: images of different sizes zero-padded at the
bottom and right into one tensor, with their sizes before padding (maskrcnn-benchmark's
``ImageList`` / ``to_image_list``; seamseg's ``pad_packed_images`` is the same padding
without size rounding)."""
import torch

__all__ = ['ImageList', 'to_image_list', 'pad_images']


class ImageList:
    """Images zero-padded into one tensor, with their sizes before padding.

    Parameters
    ----------
    tensors : torch.Tensor
        ``(B, C, H, W)``.
    image_sizes : sequence of (int, int)
        ``(height, width)`` of each image.
    """

    def __init__(self, tensors, image_sizes):
        self.tensors = tensors
        self.image_sizes = [tuple(int(v) for v in s) for s in image_sizes]

    def to(self, *args, **kwargs):
        """A copy with ``tensors.to(*args, **kwargs)``."""
        return ImageList(self.tensors.to(*args, **kwargs), self.image_sizes)


def pad_images(images, size_divisible=0, pad_value=0.):
    """Pad to the largest height and width of the batch (rounded up to a multiple of
    ``size_divisible``), top-left aligned.

    Parameters
    ----------
    images : sequence of torch.Tensor
        ``(C, H_i, W_i)`` each.
    size_divisible : int
        0 for no rounding (seamseg; maskrcnn-benchmark's FPN configs use 32).
    pad_value : float

    Returns
    -------
    padded : torch.Tensor
        ``(N, C, H, W)``.
    valid_size : list of (int, int)
        ``(H_i, W_i)`` per image.
    """
    if len(images) == 0:
        raise ValueError('pad_images needs at least one image')
    chans = {int(img.shape[0]) for img in images}
    if len(chans) != 1 or any(img.dim() != 3 for img in images):
        raise ValueError('pad_images needs (C, H, W) tensors with one C, got shapes {}'.format(
            [tuple(img.shape) for img in images]))
    h = max(int(img.shape[1]) for img in images)
    w = max(int(img.shape[2]) for img in images)
    if size_divisible > 0:
        h = (h + size_divisible - 1) // size_divisible * size_divisible
        w = (w + size_divisible - 1) // size_divisible * size_divisible
    out = images[0].new_full((len(images), chans.pop(), h, w), pad_value)
    sizes = []
    for i, img in enumerate(images):
        out[i, :, :img.shape[1], :img.shape[2]] = img
        sizes.append((int(img.shape[1]), int(img.shape[2])))
    return out, sizes


def to_image_list(tensors, size_divisible=0):
    """maskrcnn-benchmark's ``to_image_list``.

    Parameters
    ----------
    tensors : ImageList, torch.Tensor or sequence of torch.Tensor
        An ``ImageList`` (or any object with ``tensors`` and ``image_sizes``) is returned as
        is; a ``(B, C, H, W)`` tensor is one batch; a ``(C, H, W)`` tensor is a batch of one
        (padded when ``size_divisible > 0``); a sequence of ``(C, H, W)`` tensors is padded
        with :func:`pad_images`.
    size_divisible : int
        0 for no rounding (the FPN configs use 32).

    Returns
    -------
    ImageList
    """
    if hasattr(tensors, 'tensors') and hasattr(tensors, 'image_sizes'):
        return tensors
    if isinstance(tensors, torch.Tensor):
        if tensors.dim() == 4:
            return ImageList(tensors, [tensors.shape[-2:]] * tensors.shape[0])
        if tensors.dim() != 3:
            raise ValueError('to_image_list needs (C, H, W) or (B, C, H, W) tensors, got shape '
                             '{}'.format(tuple(tensors.shape)))
        if size_divisible <= 0:
            return ImageList(tensors[None], [tensors.shape[-2:]])
        tensors = [tensors]
    if isinstance(tensors, (tuple, list)):
        return ImageList(*pad_images(tensors, size_divisible))
    raise TypeError('Unsupported type for to_image_list: {}'.format(type(tensors)))
