"""``scripts/eval_yolov3.py --backend torch`` and ``scripts/demo_yolov3.py --backend torch``:
the MXNet scripts' arguments and output (:mod:`gluontrain.yolo3.infer`), on the PyTorch
YOLOv3, without MXNet.

``--params`` takes any YOLOv3 ``.params``: written by either backend's ``save_params`` or by
GluonCV's ``save_parameters`` (a model-zoo file), or a gluontrain MXNet checkpoint's weights
(:func:`.weights.load_params`, with its "loaded N of M tensors" report). What needs MXNet is
refused in one line: ``--symbol`` / ``--exported-params`` (an MXNet graph), ``--pretrained
True`` (gluoncv's model store), COCO evaluation (:func:`.data.get_dataset`), several GPUs.
"""
import numpy as np

from ...data.images import read_bgr
from ...yolo3.anchors import anchors_line
from ...yolo3.infer import (demo_parser, demo_with, detection_record, eval_parser, eval_with,
                            model_name, zoo_params)
from ..parallel import get_devices
from .data import get_dataset, get_val_loader
from .model import get_yolov3
from .plots import detect
from .recipe import validate
from .weights import load_params

__all__ = ['check_weights_args', 'load_net', 'get_device', 'evaluate', 'detect_file', 'eval_main', 'demo_main',
           'PARAMS_FIX']

# what to pass instead of a --params file that does not fit (as the MXNet scripts say)
PARAMS_FIX = ('pass the .params of a {name} (save_parameters: a run\'s {{prefix}}_best.params, '
              'from either backend, or GluonCV\'s model-zoo file), or set --network/--dataset/'
              '--classes to the ones the file was trained with')


def get_device(gpus):
    """The one device of ``--gpus`` (``''``: the CPU); several ids are refused in one line."""
    devices = get_devices(gpus)
    if len(devices) > 1:
        raise ValueError('--gpus {} with --backend torch: evaluation and the demo run on one '
                         'device; pass one GPU id'.format(gpus))
    return devices[0]


def check_weights_args(params, symbol=None, exported_params=None):
    """Refuse, in one line, the weights arguments only MXNet can serve: an exported graph
    (``--symbol`` / ``--exported-params``), or none at all. (``--pretrained True``, gluoncv's
    model-store file, is read like any ``.params``.)"""
    if symbol or exported_params:
        raise ValueError('--symbol/--exported-params is an MXNet exported graph, which runs on '
                         'MXNet only; with --backend torch pass --params (the save_parameters '
                         '.params), or drop --backend torch')
    if not params:
        raise ValueError('give --params (a .params file written by either backend or by '
                         'GluonCV)')


def load_net(network, dataset, classes, device, params=None, symbol=None, exported_params=None,
             reports=None):
    """The PyTorch YOLOv3 of ``network`` / ``dataset`` / ``classes`` in eval mode on
    ``device``, filled from ``params`` (strict: every tensor, every shape, with a report).

    Parameters
    ----------
    network : str
    dataset : str
        ``voc``, ``coco``, anything else: the custom network of ``classes``.
    classes : list of str
    device : torch.device
    params : str
        A ``.params`` file (either backend's, GluonCV's) or a gluontrain MXNet checkpoint.
    symbol, exported_params : str, optional
        An MXNet exported model: refused (its graph runs on MXNet only).
    reports : list, optional
        Receives the load report line (and ``anchors (from the file): ...`` when the file's
        anchors are not GluonCV's: the network takes them, as Gluon's ``load_parameters``).

    Returns
    -------
    YOLOV3
        Returns ``(ids, scores, bboxes)``, with ``set_nms``.
    """
    check_weights_args(params, symbol, exported_params)
    name = model_name(network, dataset)
    net = get_yolov3(name, classes if name.endswith('_custom') else None)
    report = load_params(net, params, '--params', PARAMS_FIX.format(name=name))
    if reports is not None:
        # the network has the file's anchors now (as Gluon's load_parameters loads them)
        reports.extend(line for line in (report.format(), anchors_line(report.anchors)) if line)
    return net.to(device).eval()


def evaluate(net, val_dataset, eval_metric, device, data_shape, batch_size=4, num_workers=0):
    """The recipe's ``validate`` on ``val_dataset``; returns ``(names, values)``."""
    loader = get_val_loader(val_dataset, data_shape, batch_size, num_workers)
    return validate(net, loader, [device], eval_metric)


def detect_file(net, path, classes, device, data_shape, thresh=0.5):
    """Detections on one image file, boxes in its own pixels: ``(img, record)`` as the MXNet
    demo's (:func:`gluontrain.yolo3.infer.detection_record`)."""
    net.set_nms(nms_thresh=0.45, nms_topk=400)
    img = np.ascontiguousarray(read_bgr(path, '(a positional image argument)')[:, :, ::-1])
    ids, scores, boxes = detect(net, img, device, data_shape)
    return img, detection_record(path, img, ids, scores, boxes, classes, thresh)


def demo_main(argv=None):
    """``demo_yolov3.py --backend torch``; returns what ``detections.json`` holds."""
    args = demo_parser().parse_args(argv)
    return demo_with(args, get_device(args.gpus), load_net, zoo_params, detect_file,
                     {'weights': args.params, 'backend': 'torch'})


def eval_main(argv=None):
    """``eval_yolov3.py --backend torch``: evaluate and print what the MXNet script prints;
    returns ``(names, values)`` of ``validate``."""
    args = eval_parser().parse_args(argv)
    device = get_device(args.gpus)
    check_weights_args(args.params, args.symbol, args.exported_params)  # before the data
    return eval_with(args, device, get_dataset, load_net, zoo_params, evaluate)
