"""Pictures of the SSD recipe: detections on raw images, and the validation samples grid that
:class:`gluontrain.core.plots.SamplesHook` redraws after validations."""
import os

import numpy as np
import torch

from ...core.plots import SamplesHook, draw_samples
from ...data.images import read_bgr
from ..passes import preserved_rng
from .augmentations import base_transform
from .config import MEANS
from .detection import detections_in_pixels
from .model import test_phase

#: images in the validation samples picture (the split's first ones)
SAMPLE_IMAGES = 4


def detect(net, image_bgr, device, size=300):
    """Run the SSD on one raw image as ``validate`` does (BaseTransform, test phase).

    Parameters
    ----------
    net : SSD
        In either phase; it runs in test phase here and is restored afterwards.
    image_bgr : numpy.ndarray
        ``H x W x 3`` uint8, BGR as ``cv2.imread`` returns it.
    device : torch.device
    size : int
        Network input side (300).

    Returns
    -------
    (labels, scores, boxes)
        0-based foreground classes, scores and ``[N, 4]`` x1, y1, x2, y2 in the image's
        0-based pixels (see :func:`.detection.detections_in_pixels`).
    """
    h, w = image_bgr.shape[:2]
    x = base_transform(image_bgr, size, np.array(MEANS, dtype=np.float32))
    # the recipe feeds RGB-ordered channels of the mean-subtracted image (VOCDetection does)
    x = torch.from_numpy(np.ascontiguousarray(x[:, :, (2, 1, 0)])).permute(2, 0, 1)
    with test_phase(net) as model:
        dets = model(x.unsqueeze(0).to(device)).cpu().numpy()[0]
    return detections_in_pixels(dets, w, h)


def draw_val_samples(net, dataset, path, device, num=SAMPLE_IMAGES, thresh=0.2, max_boxes=10,
                     title=None, detections=None):
    """Ground truth and the SSD's detections on the first ``num`` images of a VOC split.

    Parameters
    ----------
    net : SSD
    dataset : gluontrain.torch.data.VOCEvalDataset
        Its ``ids`` locate the JPEGs; boxes come from its annotation reader (difficult ones
        are drawn too, as eval.py keeps them to ignore).
    path : str
        The PNG (800 x 800 pixels for four images).
    device : torch.device
    num, thresh, max_boxes, title
        See :func:`gluontrain.core.plots.draw_samples`.
    detections : dict, optional
        ``{index: (labels, scores, boxes) or None}`` kept by ``validate``
        (``detections_of``): an image found there is not run through the net again (the same
        input; the validation batch's float kernels may differ from a one-image forward in the
        4th decimal of a pixel).

    Returns
    -------
    str
        ``path``.
    """
    samples = []
    for base, image_id in dataset.ids[:num]:
        # a missing or undecodable JPEG is one clear error (the hook logs it and goes on)
        img = read_bgr(os.path.join(base, 'JPEGImages', image_id + '.jpg'))
        gt = dataset.annotation(base, image_id)
        kept = (detections or {}).get(len(samples))
        # XML boxes are 1-based pixels
        samples.append((img[:, :, ::-1], gt[:, :4] - 1, kept or detect(net, img, device)))
    return draw_samples(samples, dataset.classes, path, thresh, max_boxes, title)


def val_samples_hook(net, dataset, path, device, num=SAMPLE_IMAGES, thresh=0.2,
                     detections=None):
    """A :class:`~gluontrain.core.plots.SamplesHook` drawing :func:`draw_val_samples` to
    ``path`` after validations (nothing when ``dataset`` is None or empty); ``detections``:
    what the last validation kept of those images (see :func:`draw_val_samples`)."""
    def draw(title):
        if dataset is None or not len(dataset):
            return None
        with preserved_rng():  # a picture must not change the training's next shuffle
            return draw_val_samples(net, dataset, path, device, num, thresh, title=title,
                                    detections=detections)
    return SamplesHook(draw, errors=(OSError, ValueError, IndexError, RuntimeError))
