"""Predicted vs ground-truth boxes on a few validation images, redrawn after every validation."""
import warnings

import mxnet as mx
import numpy as np

from gluoncv.data.transforms.presets.yolo import YOLO3DefaultValTransform

from ...core.loop import Hook
from ...core.plots import new_figure, save_png

# pixel size of the samples picture: SAMPLES_CELL inches per image, SAMPLES_DPI
SAMPLES_CELL = 4.0
SAMPLES_DPI = 100


def samples_figsize(num):
    """``(width, height)`` in inches of the grid for ``num`` images (two columns)."""
    cols = 2 if num > 1 else 1
    rows = (num + cols - 1) // cols
    return SAMPLES_CELL * cols, SAMPLES_CELL * rows


def detect(net, img, ctx, data_shape):
    """Run ``net`` on one raw image the way ``validate`` does; boxes in the image's pixels.

    Parameters
    ----------
    net : YOLOV3
        In inference mode (not under ``autograd.record``).
    img : mx.nd.NDArray
        ``H x W x 3`` uint8 RGB, as the detection datasets return it.
    ctx : mx.Context
    data_shape : int
        The square network input (``YOLO3DefaultValTransform(data_shape, data_shape)``).

    Returns
    -------
    (ids, scores, bboxes) : numpy arrays
        ``(N,)``, ``(N,)``, ``(N, 4)``; entries with id < 0 (NMS padding) removed. The
        transform resizes without keeping the aspect ratio, so x and y scale separately.
    """
    h, w = img.shape[:2]
    x, _ = YOLO3DefaultValTransform(data_shape, data_shape)(img, np.zeros((0, 5), 'float32'))
    ids, scores, bboxes = net(x.expand_dims(0).as_in_context(ctx))
    ids, scores = ids[0, :, 0].asnumpy(), scores[0, :, 0].asnumpy()
    bboxes = bboxes[0].clip(0, data_shape).asnumpy()
    keep = ids >= 0
    scale = np.array([w, h, w, h], dtype='float32') / float(data_shape)
    return ids[keep].astype(int), scores[keep], bboxes[keep] * scale


def draw_boxes(ax, bboxes, labels, color, style):
    """Rectangles ``[x0, y0, x1, y1]`` on matplotlib axes ``ax``, each with its label text
    (an empty label draws no text)."""
    from matplotlib.patches import Rectangle  # pylint: disable=import-outside-toplevel
    for (x0, y0, x1, y1), text in zip(bboxes, labels):
        ax.add_patch(Rectangle((x0, y0), x1 - x0, y1 - y0, fill=False, edgecolor=color,
                               linewidth=1.5, linestyle=style))
        if text:
            ax.text(x0, y0, text, fontsize=7, color='white', va='bottom',
                    bbox={'facecolor': color, 'alpha': 0.7, 'pad': 1, 'edgecolor': 'none'})


def draw_val_samples(net, dataset, classes, path, ctx, data_shape, num=4, thresh=0.2,
                     max_boxes=10, title=None):
    """Draw ground truth (cyan, dashed) and predictions (red, ``class score``) on the first
    ``num`` images of ``dataset`` and save the grid as a PNG.

    Parameters
    ----------
    net : YOLOV3
    dataset : gluon Dataset
        Raw detection dataset: ``(HxWx3 uint8 image, label)``, label rows
        ``[x0, y0, x1, y1, class, (difficult)]`` in pixels.
    classes : list of str
    path : str
        PNG of ``samples_figsize(num) * SAMPLES_DPI`` pixels (800 x 800 for four images).
    ctx : mx.Context
    data_shape : int
    num : int
        How many images (the first ones, so that pictures of successive epochs compare).
    thresh : float
        Predictions below this score are not drawn.
    max_boxes : int
        At most this many predictions per image (highest scores).

    Returns
    -------
    str
        ``path``.
    """
    num = min(num, len(dataset))
    fig = new_figure(samples_figsize(num), SAMPLES_DPI)
    cols = 2 if num > 1 else 1
    for i in range(num):
        img, label = dataset[i]
        ids, scores, bboxes = detect(net, img, ctx, data_shape)
        ax = fig.add_subplot((num + cols - 1) // cols, cols, i + 1)
        ax.imshow(img.asnumpy() if hasattr(img, 'asnumpy') else np.asarray(img))
        label = np.asarray(label)
        gt = label[label[:, 4] >= 0] if len(label) else label
        draw_boxes(ax, gt[:, :4], [''] * len(gt), 'cyan', '--')
        order = np.argsort(-scores)[:max_boxes]
        order = order[scores[order] >= thresh]
        draw_boxes(ax, bboxes[order], ['{} {:.2f}'.format(_name(classes, ids[k]), scores[k])
                                        for k in order], 'tab:red', '-')
        ax.set_title('image {}: {} gt, {} pred >= {:.2f}'.format(i, len(gt), len(order),
                                                                 thresh), fontsize=8)
        ax.axis('off')
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return save_png(fig, path)


def _name(classes, cid):
    return classes[cid] if classes is not None and 0 <= cid < len(classes) else str(cid)


def raw_val_dataset(val_data):
    """The untransformed dataset behind a validation ``DataLoader``, or None.

    ``get_dataloader`` builds the loader on ``val_dataset.transform(...)``, a
    ``_LazyTransformDataset`` that keeps the raw dataset as ``_data``.
    """
    dataset = getattr(val_data, '_dataset', None)
    dataset = getattr(dataset, '_data', dataset)
    if dataset is None:
        return None
    try:
        img, label = dataset[0]
    except Exception:  # pylint: disable=broad-except
        return None
    if getattr(img, 'ndim', 0) != 3 or img.shape[-1] != 3 or np.asarray(label).ndim != 2:
        return None  # not raw HWC images with box labels
    return dataset


class ValSamplesHook(Hook):
    """After every validation (``'val'`` in ``state.scores``), redraw ``path``.

    Parameters
    ----------
    net : YOLOV3
    val_dataset : gluon Dataset
        Raw images and labels (see :func:`raw_val_dataset`).
    classes : list of str
    path : str
        Usually ``{prefix}_val_samples.png``.
    ctx : mx.Context or list of mx.Context
        The first context runs the forward passes.
    data_shape : int
    num : int
        Images drawn.
    """

    def __init__(self, net, val_dataset, classes, path, ctx, data_shape, num=4, thresh=0.2):
        self.net, self.dataset, self.classes, self.path = net, val_dataset, classes, path
        self.ctx = ctx[0] if isinstance(ctx, (list, tuple)) else ctx
        self.data_shape, self.num, self.thresh = data_shape, num, thresh

    def after_epoch(self, state):
        if 'val' not in state.scores or self.dataset is None or not len(self.dataset):
            return
        try:
            draw_val_samples(self.net, self.dataset, self.classes, self.path, self.ctx,
                             self.data_shape, self.num, self.thresh,
                             title='epoch {}'.format(state.epoch))
        except (OSError, ValueError, IndexError, mx.base.MXNetError) as e:
            # a picture must never end a training run
            warnings.warn('val samples picture not written: {}'.format(e))
