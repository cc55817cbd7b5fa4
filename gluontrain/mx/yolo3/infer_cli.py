"""Command lines of ``scripts/demo_yolov3.py`` and ``scripts/eval_yolov3.py``."""
import argparse
import os
import sys
import tempfile

from gluoncv import utils as gutils
from gluoncv.model_zoo import model_store

from ..context import get_contexts
from .args import DATASETS, NETWORKS
from .data import get_dataset
from .infer import (dataset_classes, evaluate, load_net, main_score_percent, model_name,
                    run_demo, zoo_table)
from .model import model_store_path


def _common(p):
    a = p.add_argument
    a('--network', type=str, default='darknet53', help=', '.join(NETWORKS))
    a('--params', '--pretrained', dest='params', type=str, default='',
      help='.params to load: written during training, or a GluonCV model-zoo file; '
           "--pretrained True takes the model zoo's file from gluoncv's model store "
           '(~/.mxnet/models), as GluonCV\'s eval_yolo.py/demo_yolo.py do')
    a('--symbol', type=str, default='', help='exported model-symbol.json')
    a('--exported-params', type=str, default='', help='exported model-0000.params')
    a('--data-shape', type=int, default=416, help='square network input, 320, 416, 608...')
    a('--gpus', type=str, default='', help="GPUs, e.g. 0 or 0,1; '' for the CPU")


_TRUE = ('true', '1', 'yes', 't')


def zoo_params(args):
    """The weights file of ``--params``/``--pretrained``: the file itself, or for ``True``
    (the reference scripts' default spelling) GluonCV's model-zoo file for ``--network`` and
    ``--dataset`` in gluoncv's model store, which must be on this machine (no download).

    Returns
    -------
    str or None
    """
    value = (args.params or '').strip()
    if value.lower() not in _TRUE:
        return value or None
    name = model_name(args.network, args.dataset)
    if name not in model_store._model_sha1:
        raise ValueError('--pretrained {}: GluonCV has no model-zoo {}; pass a .params file '
                         'instead'.format(value, name))
    path = model_store_path(name)
    if not os.path.isfile(path):
        raise FileNotFoundError('--pretrained {}: the model-zoo {} is not on this machine and '
                                'cannot be downloaded here; put it at {} ($MXNET_HOME/models if '
                                'MXNET_HOME is set) or pass the file\'s path'.format(
                                    value, name, path))
    return path


def cli(main_fn, argv=None):
    """Run ``main_fn(argv)`` as a command: a bad argument or weights file is one
    ``error: ...`` line on stderr and status 1, never a traceback.

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
    return 0


def demo_parser():
    """Arguments of ``scripts/demo_yolov3.py``."""
    p = argparse.ArgumentParser(description='Detect objects with a trained YOLOv3 and draw them.')
    _common(p)
    p.add_argument('--dataset', type=str, default='voc',
                   help='voc or coco (their class names), else custom: give --classes')
    p.add_argument('--classes', type=str, default='', help='comma-separated class names')
    p.add_argument('--thresh', type=float, default=0.5, help='lowest score kept')
    p.add_argument('--out', type=str, default='demo_out', help='output folder')
    p.add_argument('--ext', type=str, default='png', choices=('png', 'jpg'),
                   help='format of the annotated pictures')
    p.add_argument('images', nargs='+', help='image files')
    return p


def demo_main(argv=None):
    """Run the demo; returns what ``detections.json`` holds."""
    args = demo_parser().parse_args(argv)
    ctx = get_contexts(args.gpus, 0)
    classes = dataset_classes(args.dataset, args.classes)
    reports = []
    net = load_net(args.network, args.dataset, classes, ctx, zoo_params(args),
                   args.symbol or None, args.exported_params or None, reports)
    for line in reports:
        print(line)
    result = run_demo(net, args.images, classes, ctx[0], args.data_shape, args.out,
                      args.thresh, args.ext,
                      meta={'network': args.network, 'dataset': args.dataset,
                            'weights': args.params or [args.symbol, args.exported_params]})
    for rec in result['images']:
        print('{}: {} detections -> {}'.format(rec['image'], len(rec['detections']),
                                               rec['output']))
    return result


def eval_parser():
    """Arguments of ``scripts/eval_yolov3.py``."""
    p = argparse.ArgumentParser(description="Evaluate a trained YOLOv3 with the recipe's "
                                            'validate, beside the GluonCV model-zoo numbers.')
    _common(p)
    a = p.add_argument
    a('--dataset', type=str, default='voc', choices=DATASETS)
    a('--dataset-root', type=str, default=None, help='as in training')
    a('--classes', type=str, default='', help='custom data: class names in training order')
    a('--batch-size', type=int, default=4, help='validation batch size')
    a('--num-workers', '-j', dest='num_workers', type=int, default=0)
    return p


def eval_main(argv=None):
    """Evaluate and print the table; returns ``(names, values)`` of ``validate``."""
    args = eval_parser().parse_args(argv)
    ctx = get_contexts(args.gpus, 0)
    gutils.random.seed(233)
    with tempfile.TemporaryDirectory() as tmp:
        # get_dataset reads the recipe's arguments; COCO's metric writes its JSON below prefix
        ds_args = argparse.Namespace(
            dataset_root=args.dataset_root, classes=args.classes, data_shape=args.data_shape,
            save_prefix=os.path.join(tmp, 'eval'), num_samples=-1, mixup=False,
            reference_mixup=False)
        _, val_dataset, metric = get_dataset(args.dataset, ds_args)
        reports = []
        net = load_net(args.network, args.dataset, list(val_dataset.classes), ctx,
                       zoo_params(args), args.symbol or None, args.exported_params or None,
                       reports)
        for line in reports:
            print(line)
        names, values = evaluate(net, val_dataset, metric, ctx, args.data_shape,
                                 args.batch_size, args.num_workers)
    if args.dataset == 'coco':
        print(values[0])
    else:
        for n, v in zip(names, values):
            print('{}={}'.format(n, v))
    print(zoo_table(args.network, args.dataset, args.data_shape, names, values))
    print('score: {:.4f}'.format(main_score_percent(args.dataset, values)))
    return names, values
