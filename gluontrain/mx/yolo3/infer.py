"""Inference and evaluation of trained YOLOv3 networks: from ``.params`` or an exported model.

Used by ``scripts/demo_yolov3.py`` (annotated pictures + ``detections.json``) and
``scripts/eval_yolov3.py`` (the recipe's :func:`.train.validate` beside the model-zoo numbers).
"""
import json
import os
import warnings

import mxnet as mx
from mxnet import gluon

from gluoncv import data as gdata
from gluoncv.data.transforms.presets.yolo import YOLO3DefaultValTransform
from gluoncv.model_zoo import get_model

from ...core.plots import draw_boxes, new_figure, save_png
from .data import val_batchify_fn
from .plots import detect
from .train import validate
from .weights import load_params

# GluonCV model zoo (0.10), detection: VOC07 test mAP and COCO val2017 AP[.5:.95], in percent,
# by input size; models the zoo does not list have no entry
ZOO_SCORES = {
    'yolo3_darknet53_voc': {320: 79.3, 416: 81.5},
    'yolo3_mobilenet1.0_voc': {320: 73.9, 416: 75.8},
    'yolo3_darknet53_coco': {320: 33.6, 416: 36.0, 608: 37.0},
    'yolo3_mobilenet1.0_coco': {320: 26.7, 416: 28.6, 608: 28.0},
}


def dataset_classes(dataset, classes=''):
    """Class names: VOC's 20, COCO's 80, or the comma-separated ``classes`` (custom data)."""
    if classes:
        return [c.strip() for c in classes.split(',') if c.strip()]
    name = dataset.lower()
    if name == 'voc':
        return list(gdata.VOCDetection.CLASSES)
    if name == 'coco':
        return list(gdata.COCODetection.CLASSES)
    raise ValueError('--dataset {} needs --classes (comma-separated names, in training '
                     'order)'.format(dataset))


def model_name(network, dataset):
    """``yolo3_<network>_<voc|coco|custom>``, as :func:`.model.net_name`."""
    suffix = dataset.lower() if dataset.lower() in ('voc', 'coco') else 'custom'
    return 'yolo3_{}_{}'.format(network, suffix)


def _fixed_nms(**_kwargs):
    """An exported graph has its NMS (0.45 / top-400, as ``validate`` set it) built in."""


# what to pass instead of a --params file that does not fit
PARAMS_FIX = ('pass the .params of a {name} (save_parameters: a run\'s {{prefix}}_best.params or '
              'GluonCV\'s model-zoo file), or set --network/--dataset/--classes to the ones the '
              'file was trained with')


def load_net(network, dataset, classes, ctx, params=None, symbol=None, exported_params=None,
             reports=None):
    """A YOLOv3 network ready for inference, from training weights or an exported model.

    Parameters
    ----------
    network : str
        ``darknet53``, ``mobilenet1.0`` or ``mobilenet0.25`` (ignored for exported models).
    dataset : str
        ``voc``, ``coco``, or anything else for the custom networks.
    classes : list of str
    ctx : mx.Context or list of mx.Context
    params : str, optional
        ``.params`` written by ``save_params`` (``_best.params``, interval files), GluonCV's
        model-zoo files, or a gluontrain checkpoint; loaded strictly, with a report
        (:func:`.weights.load_params`).
    symbol, exported_params : str, optional
        ``model-symbol.json`` and ``model-0000.params`` from :func:`.train.export_model`.
    reports : list, optional
        Receives the load report (``params`` only).

    Returns
    -------
    gluon.HybridBlock
        Returns ``(ids, scores, bboxes)``; has ``set_nms`` so that ``validate`` accepts it.
    """
    ctx = ctx if isinstance(ctx, (list, tuple)) else [ctx]
    if symbol or exported_params:
        if not (symbol and exported_params) or params:
            raise ValueError('give either --params, or both --symbol and --exported-params')
        with warnings.catch_warnings():
            warnings.simplefilter('ignore')  # imports warns about the unnamed data input
            net = gluon.SymbolBlock.imports(symbol, ['data'], exported_params, ctx=ctx)
        net.set_nms = _fixed_nms
        return net
    if not params:
        raise ValueError('give --params, or --symbol and --exported-params')
    name = model_name(network, dataset)
    kwargs = {'classes': classes} if name.endswith('_custom') else {}
    net = get_model(name, pretrained=False, pretrained_base=False, **kwargs)
    report = load_params(net, params, '--params', PARAMS_FIX.format(name=name), ctx=ctx)
    if reports is not None:
        reports.append(report.format())
    return net


def val_loader(val_dataset, data_shape, batch_size, num_workers=0):
    """The recipe's validation loader (same transform and batchify as ``get_dataloader``)."""
    return gluon.data.DataLoader(
        val_dataset.transform(YOLO3DefaultValTransform(data_shape, data_shape)),
        batch_size, False, batchify_fn=val_batchify_fn(), last_batch='keep',
        num_workers=num_workers)


def main_score_percent(dataset, values):
    """The main metric in percent: VOC07 mAP is a fraction, COCO's AP text is percent already."""
    value = float(values[-1])
    return value if dataset.lower() == 'coco' else 100.0 * value


def zoo_table(network, dataset, data_shape, names, values):
    """A text table: our main score beside the zoo's at every size it lists ('—' if none).

    Returns
    -------
    str
    """
    name = model_name(network, dataset)
    zoo = ZOO_SCORES.get(name, {})
    metric = 'AP[.5:.95]' if dataset.lower() == 'coco' else 'VOC07 mAP'
    ours = main_score_percent(dataset, values)
    rows = ['{:<26} {:>6} {:>12} {:>12}'.format('model', 'shape', 'ours', 'GluonCV zoo'),
            '{:<26} {:>6} {:>12.1f} {:>12}'.format(
                name, data_shape, ours,
                '{:.1f}'.format(zoo[data_shape]) if data_shape in zoo else '—')]
    for shape in sorted(s for s in zoo if s != data_shape):
        rows.append('{:<26} {:>6} {:>12} {:>12.1f}'.format('', shape, '', zoo[shape]))
    return '{} ({}, %)\n'.format(metric, name) + '\n'.join(rows)


def evaluate(net, val_dataset, eval_metric, ctx, data_shape, batch_size=4, num_workers=0):
    """``validate`` of the recipe on ``val_dataset``; returns ``(names, values)``."""
    ctx = ctx if isinstance(ctx, (list, tuple)) else [ctx]
    loader = val_loader(val_dataset, data_shape, batch_size, num_workers)
    return validate(net, loader, ctx, eval_metric)


def detect_file(net, path, classes, ctx, data_shape, thresh=0.5):
    """Detections on one image file, boxes in its own pixels.

    Returns
    -------
    (img, dict)
        The ``HxWx3`` uint8 image and ``{'image', 'width', 'height', 'detections': [{'class_id',
        'class', 'score', 'box': [x0, y0, x1, y1]}, ...]}`` sorted by score, score >= thresh.
    """
    net.set_nms(nms_thresh=0.45, nms_topk=400)
    img = mx.image.imread(path)
    ids, scores, boxes = detect(net, img, ctx, data_shape)
    dets = [{'class_id': int(c), 'score': float(s), 'box': [float(v) for v in b],
             'class': classes[c] if 0 <= c < len(classes) else str(c)}
            for c, s, b in zip(ids, scores, boxes) if s >= thresh]
    dets.sort(key=lambda d: -d['score'])
    return img, {'image': os.path.abspath(path), 'width': int(img.shape[1]),
                 'height': int(img.shape[0]), 'detections': dets}


def draw_detections(img, record, out_path, dpi=100):
    """Save ``img`` with ``record['detections']`` drawn, at the image's own pixel size.

    The format follows ``out_path``'s extension (``.png``, ``.jpg``).
    """
    h, w = img.shape[:2]
    fig = new_figure((w / float(dpi), h / float(dpi)), dpi)
    ax = fig.add_axes([0, 0, 1, 1])
    ax.imshow(img.asnumpy())
    ax.axis('off')
    dets = record['detections']
    draw_boxes(ax, [d['box'] for d in dets],
                ['{} {:.2f}'.format(d['class'], d['score']) for d in dets], 'tab:red', '-')
    fmt = os.path.splitext(out_path)[1].lstrip('.').lower() or 'png'
    fmt = 'jpeg' if fmt == 'jpg' else fmt
    if fmt == 'png':
        return save_png(fig, out_path)
    from ...core.checkpoint import atomic_save_file  # pylint: disable=import-outside-toplevel
    atomic_save_file(out_path, lambda f: fig.savefig(f, format=fmt, dpi=dpi))
    return out_path


def run_demo(net, paths, classes, ctx, data_shape, out_dir, thresh=0.5, ext='png', meta=None):
    """Detect on every image of ``paths``; write annotated pictures and ``detections.json``.

    Returns
    -------
    dict
        What ``detections.json`` holds: ``meta`` entries plus ``'threshold'``, ``'data_shape'``,
        ``'classes'`` and ``'images'`` (one :func:`detect_file` record each, with ``'output'``,
        the annotated picture).
    """
    os.makedirs(out_dir, exist_ok=True)
    images = []
    for path in paths:
        img, record = detect_file(net, path, classes, ctx, data_shape, thresh)
        stem = os.path.splitext(os.path.basename(path))[0]
        record['output'] = draw_detections(img, record,
                                           os.path.join(out_dir, '{}.{}'.format(stem, ext)))
        images.append(record)
    result = dict(meta or {}, threshold=thresh, data_shape=data_shape, classes=list(classes),
                  images=images)
    with open(os.path.join(out_dir, 'detections.json'), 'w') as f:
        json.dump(result, f, indent=1)
    return result
