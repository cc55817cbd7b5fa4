"""Command lines of ``scripts/demo_yolov3.py`` and ``scripts/eval_yolov3.py``."""
import argparse
import os
import tempfile

from gluoncv import utils as gutils

from ..context import get_contexts
from .args import DATASETS, NETWORKS
from .data import get_dataset
from .infer import dataset_classes, evaluate, load_net, main_score_percent, run_demo, zoo_table


def _common(p):
    a = p.add_argument
    a('--network', type=str, default='darknet53', help=', '.join(NETWORKS))
    a('--params', type=str, default='', help='.params written during training')
    a('--symbol', type=str, default='', help='exported model-symbol.json')
    a('--exported-params', type=str, default='', help='exported model-0000.params')
    a('--data-shape', type=int, default=416, help='square network input, 320, 416, 608...')
    a('--gpus', type=str, default='', help="GPUs, e.g. 0 or 0,1; '' for the CPU")


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
    net = load_net(args.network, args.dataset, classes, ctx, args.params or None,
                   args.symbol or None, args.exported_params or None)
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
        net = load_net(args.network, args.dataset, list(val_dataset.classes), ctx,
                       args.params or None, args.symbol or None, args.exported_params or None)
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
