"""Command lines of ``scripts/demo_yolov3.py`` and ``scripts/eval_yolov3.py`` on MXNet
(``--backend mxnet``, the default; the parsers are :mod:`gluontrain.yolo3.infer`'s)."""
import argparse
import os
import tempfile

from gluoncv import utils as gutils
from gluoncv.model_zoo import model_store

from ..context import get_contexts
# the parsers and cli are both backends' (gluontrain.yolo3.infer), re-exported here
from ...yolo3.infer import (cli, dataset_classes, demo_parser, eval_lines,  # noqa: F401
                            eval_parser, is_zoo_true, model_name)
from .data import get_dataset
from .infer import KNOWN_CLASSES, evaluate, load_net, run_demo
from .model import model_store_path


def zoo_params(args):
    """The weights file of ``--params``/``--pretrained``: the file itself, or for ``True``
    (the reference scripts' default spelling) GluonCV's model-zoo file for ``--network`` and
    ``--dataset`` in gluoncv's model store, which must be on this machine (no download).

    Returns
    -------
    str or None
    """
    value = (args.params or '').strip()
    if not is_zoo_true(value):
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


def demo_main(argv=None):
    """Run the demo; returns what ``detections.json`` holds."""
    args = demo_parser().parse_args(argv)
    ctx = get_contexts(args.gpus, 0)
    classes = dataset_classes(args.dataset, args.classes, KNOWN_CLASSES)
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
    for line in eval_lines(args, names, values):
        print(line)
    return names, values
