"""Detections of the PyTorch YOLOv3 on raw images, and the validation samples picture."""
import numpy as np
import torch

from ...core.plots import SamplesHook, draw_samples
from ...yolo3.transform import val_transform, cv2_imresize
from .model import YOLOV3, eval_mode  # noqa: F401  (YOLOV3: the docstrings' type)

__all__ = ['detect', 'val_samples_hook']


@torch.no_grad()
def detect(net, img, device, data_shape):
    """``net`` on one RGB uint8 image as ``validate`` runs it: ``(ids, scores, boxes)`` in the
    image's pixels, NMS padding removed (x and y scale separately: the input is squashed)."""
    h, w = img.shape[:2]
    x, _ = val_transform(np.asarray(img), np.zeros((0, 5), np.float32), data_shape,
                         data_shape, cv2_imresize)
    with eval_mode(net) as model:
        ids, scores, boxes = model(torch.from_numpy(x)[None].to(device))
    ids, scores = ids[0, :, 0].cpu().numpy(), scores[0, :, 0].cpu().numpy()
    boxes = boxes[0].clamp(0, data_shape).cpu().numpy()
    keep = ids >= 0
    scale = np.array([w, h, w, h], np.float32) / float(data_shape)
    return ids[keep].astype(int), scores[keep], boxes[keep] * scale


def val_samples_hook(net, dataset, path, device, data_shape, num=4, thresh=0.1):
    """A :class:`~gluontrain.core.plots.SamplesHook` drawing ground truth and detections on
    the first ``num`` images of the raw validation ``dataset`` to ``path`` (None: nothing)."""
    if dataset is None:
        return None
    classes = list(getattr(dataset, 'classes', ()) or ()) or None

    def draw(title):
        samples = []
        for i in range(min(num, len(dataset))):
            img, label = dataset[i]
            label = np.asarray(label).reshape(-1, np.asarray(label).shape[-1] or 5)
            samples.append((img, label[label[:, 4] >= 0, :4],
                            detect(net, img, device, data_shape)))
        return draw_samples(samples, classes, path, thresh, 10, title)
    return SamplesHook(draw, errors=(OSError, ValueError, IndexError, RuntimeError))
