"""The validation samples picture of the two-stage recipe, redrawn by
:class:`gluontrain.core.plots.SamplesHook` after every validation."""
import numpy as np
import torch

from ...core.plots import SamplesHook, draw_samples

__all__ = ['draw_val_samples', 'val_samples_hook']


def draw_val_samples(model, dataset, path, device, num=4, thresh=0.3, title=None):
    """Ground truth and detections on the first ``num`` images of a validation dataset.

    The images are the network's input (after seamseg's validation transform),
    un-normalised for display; boxes are drawn in its pixels (``(y0, x0, y1, x1)``
    swapped to ``(x0, y0, x1, y1)``).

    Parameters
    ----------
    model : DetectionNet
        Put in eval mode for the drawing and restored.
    dataset : ISSDataset or COCODataset
    path : str
    device : torch.device
    num : int
    thresh : float
        Detections below this score are not drawn.
    title : str, optional

    Returns
    -------
    str
        ``path``.
    """
    tf = dataset.transform
    mean = np.asarray(tf.rgb_mean or (0., 0., 0.), dtype=np.float32)[:, None, None]
    std = np.asarray(tf.rgb_std or (1., 1., 1.), dtype=np.float32)[:, None, None]
    was_training = model.training
    model.eval()
    samples = []
    try:
        for i in range(min(num, len(dataset))):
            item = dataset[i]
            with torch.no_grad():
                _, pred = model(img=[item['img'].to(device)], do_loss=False,
                                do_prediction=True)
            img = np.clip(item['img'].numpy() * std + mean, 0, 1).transpose(1, 2, 0)
            gt = item['bbx'].numpy()[:, [1, 0, 3, 2]] if item['bbx'] is not None \
                else np.zeros((0, 4))
            if pred['bbx_pred'][0] is None:
                dets = (np.zeros(0), np.zeros(0), np.zeros((0, 4)))
            else:
                dets = (pred['cls_pred'][0].cpu().numpy(), pred['obj_pred'][0].cpu().numpy(),
                        pred['bbx_pred'][0].cpu().numpy()[:, [1, 0, 3, 2]])
            samples.append((img, gt, dets))
    finally:
        model.train(was_training)
    names = [str(c) for c in getattr(dataset, 'categories', [])][dataset.num_stuff:] or None
    return draw_samples(samples, names, path, thresh, 10, title)


def val_samples_hook(model, dataset, path, device, num=4, thresh=0.3):
    """A :class:`~gluontrain.core.plots.SamplesHook` for :func:`draw_val_samples`."""
    def draw(title):
        if dataset is None or not len(dataset):
            return None
        return draw_val_samples(model, dataset, path, device, num, thresh, title=title)
    return SamplesHook(draw, errors=(OSError, ValueError, IndexError, RuntimeError))
