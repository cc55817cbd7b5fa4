"""ssd.pytorch's collate functions (``data/__init__.py``); the VOC and COCO datasets live in
:mod:`gluontrain.torch.data`."""
import numpy as np
import torch

__all__ = ['detection_collate']


def detection_collate(batch):
    """The reference's collate: stack the images, keep the targets as a list.

    Parameters
    ----------
    batch : list of (torch.Tensor, array-like)
        ``(img [3, H, W], target [N_i, 5])`` samples of equal image size.

    Returns
    -------
    (torch.Tensor, list of torch.Tensor)
        Images ``[B, 3, H, W]`` and one float32 ``[N_i, 5]`` tensor per image.
    """
    return (torch.stack([sample[0] for sample in batch], 0),
            [torch.as_tensor(np.asarray(sample[1]), dtype=torch.float32) for sample in batch])

