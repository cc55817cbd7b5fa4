"""Predicted vs ground-truth boxes on a few validation images, redrawn after validations
(``core.plots.SamplesHook``: at most every ``REDRAW_INTERVAL_S``, and at the end)."""
import mxnet as mx
import numpy as np

from gluoncv.data.transforms.presets.yolo import YOLO3DefaultValTransform

from ...core.plots import SamplesHook, draw_samples


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
        PNG of ``core.plots.samples_figsize(num) * SAMPLES_DPI`` pixels (800 x 800 for four images).
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
    samples = []
    for i in range(min(num, len(dataset))):
        img, label = dataset[i]
        label = np.asarray(label)
        gt = label[label[:, 4] >= 0] if len(label) else label.reshape(0, 5)
        samples.append((img.asnumpy() if hasattr(img, 'asnumpy') else np.asarray(img),
                        gt[:, :4], detect(net, img, ctx, data_shape)))
    return draw_samples(samples, classes, path, thresh, max_boxes, title)


def raw_val_dataset(val_data):
    """The untransformed dataset behind a validation ``DataLoader``, or None.

    ``get_dataloader`` publishes it as ``val_data.raw_dataset``; other loaders built on
    ``val_dataset.transform(...)`` keep it as the ``_LazyTransformDataset``'s ``_data``.
    """
    dataset = getattr(val_data, 'raw_dataset', None)
    if dataset is None:
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


def val_samples_hook(net, val_dataset, classes, path, ctx, data_shape, num=4, thresh=0.1):
    """A :class:`~gluontrain.core.plots.SamplesHook` redrawing :func:`draw_val_samples` to
    ``path`` after validations (the same style as the SSD recipe's).

    Parameters
    ----------
    net : YOLOV3
    val_dataset : gluon Dataset
        Raw images and labels (see :func:`raw_val_dataset`); None draws nothing.
    classes : list of str
    path : str
        Usually ``RunPaths.val_samples``.
    ctx : mx.Context or list of mx.Context
        The first context runs the forward passes.
    data_shape : int
    num : int
        Images drawn.
    thresh : float
        Lowest score drawn. YOLOv3's score is objectness x class probability: after a few
        minutes from random weights the right boxes score 0.1-0.3, so 0.2 hid most of them.
    """
    ctx = ctx[0] if isinstance(ctx, (list, tuple)) else ctx

    def draw(title):
        if val_dataset is None or not len(val_dataset):
            return None
        return draw_val_samples(net, val_dataset, classes, path, ctx, data_shape, num, thresh,
                                title=title)
    return SamplesHook(draw, errors=(OSError, ValueError, IndexError, mx.base.MXNetError))
