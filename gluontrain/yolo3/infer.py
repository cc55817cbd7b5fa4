"""The command lines of ``scripts/eval_yolov3.py`` and ``scripts/demo_yolov3.py`` for both
backends, and what they print and write, in plain Python (numpy only).

One parser per script (``--backend mxnet``, the default, or ``torch``);
:func:`gluontrain.tool_route.script_main` picks the backend's ``eval_main`` /
``demo_main`` before anything of the other framework is imported, so ``--backend torch`` runs
where MXNet is not installed.
"""
import argparse
import json
import os
import sys

import numpy as np

from ..core.argtypes import multiple_of, non_negative_int, positive_size, unit_interval_float
from ..core import model_store
from ..core.checkpoint import atomic_save_file, atomic_write
from ..core.errors import oserror_message, raised_by_ctrl_c
from ..core.plots import draw_boxes, new_figure, save_png
from ..data.classes import VOC_CLASSES
from ..data.coco import COCO_CATEGORIES
from .args import (BACKENDS, DATASETS, MAX_DATA_SHAPE, NETWORKS, STRIDE, class_names,
                   model_name)
from .infer_checks import check_images, check_output_folder, check_weights_inputs

__all__ = ['ZOO_SCORES', 'KNOWN_CLASSES', 'demo_parser', 'eval_parser', 'cli', 'backend_of',
           'zoo_params',
           'dataset_classes', 'model_name', 'main_score_percent', 'zoo_table', 'eval_lines',
           'is_zoo_true', 'draw_detections', 'detection_record', 'run_demo', 'load_reported',
           'demo_with', 'eval_with']

# GluonCV model zoo (0.10), detection: VOC07 test mAP and COCO val2017 AP[.5:.95], in percent,
# by input size; models the zoo does not list have no entry
ZOO_SCORES = {
    'yolo3_darknet53_voc': {320: 79.3, 416: 81.5},
    'yolo3_mobilenet1.0_voc': {320: 73.9, 416: 75.8},
    'yolo3_darknet53_coco': {320: 33.6, 416: 36.0, 608: 37.0},
    'yolo3_mobilenet1.0_coco': {320: 26.7, 416: 28.6, 608: 28.0},
}

# the class lists of --dataset voc / coco, GluonCV's (others name theirs with --classes)
KNOWN_CLASSES = {'voc': VOC_CLASSES, 'coco': tuple(
    c['name'] for c in sorted(COCO_CATEGORIES, key=lambda c: c['id']))}

_TRUE = ('true', '1', 'yes', 't')


def is_zoo_true(value):
    """Whether ``--params`` / ``--pretrained`` asks for the model-zoo file (``True``, ``1``...)."""
    return (value or '').strip().lower() in _TRUE


#: ``--data-shape`` of the inference scripts: what training accepts
data_shape_type = multiple_of(STRIDE, "YOLOv3's coarsest stride", MAX_DATA_SHAPE)


def _common(p):
    a = p.add_argument
    a('--backend', type=str, default='mxnet', choices=BACKENDS,
      help='mxnet (GluonCV) or torch (gluontrain.torch.yolo3, no MXNet needed); either reads '
           'a .params written by either backend or by GluonCV')
    a('--network', type=str, default='darknet53', help=', '.join(NETWORKS))
    a('--params', '--pretrained', dest='params', type=str, default='',
      help='.params to load: written during training, or a GluonCV model-zoo file; '
           "--pretrained True takes the model zoo's file from gluoncv's model store "
           '(~/.mxnet/models, downloaded there when missing), as GluonCV\'s '
           'eval_yolo.py/demo_yolo.py do')
    a('--symbol', type=str, default='', help='exported model-symbol.json')
    a('--exported-params', type=str, default='', help='exported model-0000.params')
    a('--data-shape', type=data_shape_type, default=416,
      help='square network input, a multiple of 32: 320, 416, 608...')
    a('--gpus', type=str, default='', help="GPUs, e.g. 0 or 0,1; '' for the CPU")


def demo_parser():
    """Arguments of ``scripts/demo_yolov3.py``."""
    p = argparse.ArgumentParser(description='Detect objects with a trained YOLOv3 and draw them.')
    _common(p)
    p.add_argument('--dataset', type=str, default='voc',
                   help='voc or coco (their class names), else custom: give --classes')
    p.add_argument('--classes', type=str, default='', help='comma-separated class names')
    p.add_argument('--thresh', type=unit_interval_float, default=0.5,
                   help='lowest score kept, in [0, 1]')
    p.add_argument('--out', type=str, default='demo_out', help='output folder')
    p.add_argument('--ext', type=str, default='png', choices=('png', 'jpg'),
                   help='format of the annotated pictures')
    p.add_argument('images', nargs='+', help='image files')
    return p


def eval_parser():
    """Arguments of ``scripts/eval_yolov3.py``."""
    p = argparse.ArgumentParser(description="Evaluate a trained YOLOv3 with the recipe's "
                                            'validate, beside the GluonCV model-zoo numbers.')
    _common(p)
    a = p.add_argument
    a('--dataset', type=str, default='voc', choices=DATASETS)
    a('--dataset-root', type=str, default=None, help='as in training')
    a('--classes', type=str, default='', help='custom data: class names in training order')
    a('--batch-size', type=positive_size, default=4, help='validation batch size')
    a('--num-workers', '-j', dest='num_workers', type=non_negative_int, default=0)
    return p


def cli(main_fn, argv=None, interrupted='interrupted; nothing more was written'):
    """Run ``main_fn(argv)`` as a command: a bad argument, input file or output path is one
    ``error: ...`` line on stderr and status 1, a Ctrl-C one ``interrupted`` line and status
    130, never a traceback.

    Parameters
    ----------
    main_fn : callable
    argv : list of str, optional
    interrupted : str
        The Ctrl-C line.

    Returns
    -------
    int
        The exit status.
    """
    try:
        main_fn(argv)
    except (ValueError, FileNotFoundError) as e:
        print('error: {}'.format(e), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(interrupted, file=sys.stderr)
        return 130
    except MemoryError as e:
        print('error: out of memory{}: lower --data-shape or --batch-size'.format(
            ' ({})'.format(e) if str(e) else ''), file=sys.stderr)
        return 1
    except OSError as e:
        message = oserror_message(e, '--out')
        if message is None:
            raise
        print('error: ' + message, file=sys.stderr)
        return 1
    except Exception as e:  # pylint: disable=broad-except
        # MXNet turns a Ctrl-C inside its calls into an error of its own
        if not raised_by_ctrl_c(e):
            raise
        print(interrupted, file=sys.stderr)
        return 130
    return 0


def backend_of(argv):
    """The ``--backend`` of ``argv`` without parsing the rest (the last one wins, as in
    argparse); ``'mxnet'`` if none."""
    backend = 'mxnet'
    for i, arg in enumerate(argv):
        if arg == '--backend' and i + 1 < len(argv):
            backend = argv[i + 1]
        elif arg.startswith('--backend='):
            backend = arg.split('=', 1)[1]
    return backend


def zoo_params(args):
    """The weights file of ``--params`` / ``--pretrained``: the file itself, or for ``True``
    (the reference scripts' spelling) GluonCV's model-zoo file for ``--network`` and
    ``--dataset`` from its model store, downloaded as gluoncv downloads it when it is not
    there (:func:`gluontrain.core.model_store.fetch`; both backends read it).

    Returns
    -------
    str or None

    Raises
    ------
    ValueError
        No such zoo model, or the download failed (the address, SHA-1 and path to put the
        file at, in one line).
    """
    value = (args.params or '').strip()
    if not is_zoo_true(value):
        return value or None
    name = model_name(args.network, args.dataset)
    if name not in model_store.SHA1:
        raise ValueError('--pretrained {}: GluonCV has no model-zoo {}; pass a .params file '
                         'instead'.format(value, name))
    try:
        return model_store.find_or_fetch(name)
    except ValueError as e:
        raise ValueError('--pretrained {}: the model-zoo {} is not on this machine and {}'
                         .format(value, name, e)) from None


def dataset_classes(dataset, classes, known=None):
    """Class names: the comma-separated ``classes`` (custom data), else ``known[dataset]``
    (default :data:`KNOWN_CLASSES`, GluonCV's VOC and COCO lists)."""
    known = KNOWN_CLASSES if known is None else known
    if classes:
        return class_names(classes)
    if dataset.lower() in known:
        return list(known[dataset.lower()])
    raise ValueError('--dataset {} needs --classes (comma-separated names, in training '
                     'order)'.format(dataset))


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


def eval_lines(args, names, values):
    """What ``eval_yolov3.py`` prints after the load report: ``name=value`` per class and mAP
    (COCO: its AP text), the zoo table, ``score: NN.NNNN``.

    Returns
    -------
    list of str
    """
    if args.dataset == 'coco':
        lines = [str(values[0])]
    else:
        lines = ['{}={}'.format(n, v) for n, v in zip(names, values)]
    return lines + [zoo_table(args.network, args.dataset, args.data_shape, names, values),
                    'score: {:.4f}'.format(main_score_percent(args.dataset, values))]


def draw_detections(img, record, out_path, dpi=100):
    """Save ``img`` (``HxWx3`` uint8, numpy or MXNet NDArray) with ``record['detections']``
    drawn, at the image's own pixel size; the format follows ``out_path``'s extension."""
    img = img.asnumpy() if hasattr(img, 'asnumpy') else np.asarray(img)
    h, w = img.shape[:2]
    fig = new_figure((w / float(dpi), h / float(dpi)), dpi)
    ax = fig.add_axes([0, 0, 1, 1])
    ax.imshow(img)
    ax.axis('off')
    dets = record['detections']
    draw_boxes(ax, [d['box'] for d in dets],
               ['{} {:.2f}'.format(d['class'], d['score']) for d in dets], 'tab:red', '-')
    fmt = os.path.splitext(out_path)[1].lstrip('.').lower() or 'png'
    fmt = 'jpeg' if fmt == 'jpg' else fmt
    if fmt == 'png':
        return save_png(fig, out_path)
    atomic_save_file(out_path, lambda f: fig.savefig(f, format=fmt, dpi=dpi))
    return out_path


def detection_record(path, img, ids, scores, boxes, classes, thresh):
    """One image's ``detections.json`` entry from ``detect``'s ``(ids, scores, boxes)`` in the
    image's pixels: detections with score >= ``thresh``, highest first."""
    dets = [{'class_id': int(c), 'score': float(s), 'box': [float(v) for v in b],
             'class': classes[c] if 0 <= c < len(classes) else str(c)}
            for c, s, b in zip(ids, scores, boxes) if s >= thresh]
    dets.sort(key=lambda d: -d['score'])
    return {'image': os.path.abspath(path), 'width': int(img.shape[1]),
            'height': int(img.shape[0]), 'detections': dets}


def run_demo(detect_file, paths, classes, data_shape, out_dir, thresh=0.5, ext='png',
             meta=None):
    """Detect on every image of ``paths``; write annotated pictures and ``detections.json``.

    Parameters
    ----------
    detect_file : callable
        ``detect_file(path) -> (img, record)``, a backend's detector (record as
        :func:`detection_record`).
    paths, classes, data_shape, out_dir, thresh, ext, meta
        The images; what ``detections.json`` records; ``ext`` of the pictures.

    Returns
    -------
    dict
        What ``detections.json`` holds: ``meta`` entries plus ``'threshold'``, ``'data_shape'``,
        ``'classes'`` and ``'images'`` (one record each, with ``'output'``, the picture).
    """
    os.makedirs(out_dir, exist_ok=True)
    images = []
    for path in paths:
        img, record = detect_file(path)
        stem = os.path.splitext(os.path.basename(path))[0]
        record['output'] = draw_detections(img, record,
                                           os.path.join(out_dir, '{}.{}'.format(stem, ext)))
        images.append(record)
    result = dict(meta or {}, threshold=thresh, data_shape=data_shape, classes=list(classes),
                  images=images)
    atomic_write(os.path.join(out_dir, 'detections.json'),
                 lambda f: json.dump(result, f, indent=1), mode='w')
    return result


def load_reported(load_net, args, classes, device, params):
    """A backend's ``load_net`` with the scripts' weights arguments (``params``: the weights
    file); prints its load report first, as both scripts do, and returns the network."""
    reports = []
    net = load_net(args.network, args.dataset, classes, device, params, args.symbol or None,
                   args.exported_params or None, reports)
    for line in reports:
        print(line)
    return net


def demo_with(args, device, load_net, weights_of, detect_file, meta):
    """The body of a backend's ``demo_main``: its ``load_net`` on ``device`` (weights file
    ``weights_of(args)``, asked once the classes are known), :func:`run_demo` with its
    ``detect_file``, one line printed per image; ``meta``
    is what ``detections.json`` records beside network and dataset. Returns what it holds."""
    classes = dataset_classes(args.dataset, args.classes)
    check_weights_inputs(args, is_zoo_true)
    check_output_folder(args.out, '--out')
    check_images(args.images)
    net = load_reported(load_net, args, classes, device, weights_of(args))
    result = run_demo(lambda path: detect_file(net, path, classes, device, args.data_shape,
                                               args.thresh),
                      args.images, classes, args.data_shape, args.out, args.thresh, args.ext,
                      meta=dict({'network': args.network, 'dataset': args.dataset}, **meta))
    for rec in result['images']:
        print('{}: {} detections -> {}'.format(rec['image'], len(rec['detections']),
                                               rec['output']))
    return result


def eval_with(args, device, get_dataset, load_net, weights_of, evaluate, save_prefix=None):
    """The body of a backend's ``eval_main``: its ``get_dataset`` (``save_prefix``: where
    COCO's metric writes its JSON), its ``load_net`` on ``device`` (weights file
    ``weights_of(args)``, asked once the data is read), ``evaluate``, then what
    ``eval_yolov3.py`` prints (:func:`eval_lines`). Returns ``(names, values)``."""
    check_weights_inputs(args, is_zoo_true)
    # get_dataset reads the recipe's arguments
    ds_args = argparse.Namespace(
        dataset_root=args.dataset_root, classes=args.classes, data_shape=args.data_shape,
        save_prefix=save_prefix, num_samples=-1, mixup=False, reference_mixup=False)
    _, val_dataset, metric = get_dataset(args.dataset, ds_args)
    net = load_reported(load_net, args, list(val_dataset.classes), device, weights_of(args))
    names, values = evaluate(net, val_dataset, metric, device, args.data_shape,
                             args.batch_size, args.num_workers)
    for line in eval_lines(args, names, values):
        print(line)
    return names, values


def _write_json(path, obj):
    with open(path, 'w') as f:
        json.dump(obj, f, indent=1)
