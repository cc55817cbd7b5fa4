"""maskrcnn-benchmark's ``BatchCollator`` (images batched by
:func:`gluontrain.torch.twostage.images.to_image_list`)."""
from ...twostage.images import to_image_list

__all__ = ['BatchCollator', 'BBoxAugCollator']


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
        images, targets, indices = zip(*batch)
        return to_image_list(images, self.size_divisible), targets, indices


class BBoxAugCollator:
    """``collate_fn`` for test-time box augmentation: the samples' fields as tuples."""

    def __call__(self, batch):
        return list(zip(*batch))
