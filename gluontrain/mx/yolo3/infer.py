"""Inference and evaluation of trained YOLOv3 networks: from ``.params`` or an exported model,
and the command lines of ``scripts/demo_yolov3.py`` (annotated pictures + ``detections.json``)
and ``scripts/eval_yolov3.py`` (the recipe's :func:`.recipe.validate` beside the model-zoo
numbers) on MXNet (``--backend mxnet``, the default; the parsers are
:mod:`gluontrain.yolo3.infer`'s).
"""
import os
import tempfile
import warnings

import mxnet as mx
from mxnet import gluon

from gluoncv import utils as gutils
from gluoncv.data.transforms.presets.yolo import YOLO3DefaultValTransform
from gluoncv.model_zoo import get_model

# the backend-neutral pieces live in gluontrain.yolo3.infer (re-exported here, as before)
from ...yolo3.anchors import anchors_line
from ...yolo3.infer_checks import check_exported_graph
from ...yolo3.infer import (cli, demo_parser, demo_with, detection_record,  # noqa: F401
                            eval_parser, eval_with, is_zoo_true, model_name, zoo_params,
                            zoo_table)
from ..context import get_contexts
from .data import get_dataset, val_batchify_fn
from .plots import detect
from .recipe import validate
from .weights import check_params_file, load_params


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
        ``model-symbol.json`` and ``model-0000.params`` from :func:`.recipe.export_model`.
    reports : list, optional
        Receives the load report (``params`` only), and ``anchors (from the file): ...`` when
        the file's anchors are not GluonCV's (the network takes them, as ``load_parameters``).

    Returns
    -------
    gluon.HybridBlock
        Returns ``(ids, scores, bboxes)``; has ``set_nms`` so that ``validate`` accepts it.
    """
    ctx = ctx if isinstance(ctx, (list, tuple)) else [ctx]
    if symbol or exported_params:
        if not (symbol and exported_params) or params:
            raise ValueError('give either --params, or both --symbol and --exported-params')
        check_exported_graph(symbol, exported_params)
        check_params_file(exported_params, '--exported-params')
        try:
            with warnings.catch_warnings():
                warnings.simplefilter('ignore')  # imports warns about the unnamed data input
                net = gluon.SymbolBlock.imports(symbol, ['data'], exported_params, ctx=ctx)
        except (AssertionError, mx.base.MXNetError) as e:
            detail = str(e).strip().splitlines()[0][:200] if str(e).strip() else type(e).__name__
            raise ValueError('--symbol {} and --exported-params {} do not belong together ({}); '
                             'pass the model-symbol.json and model-0000.params that one export '
                             'wrote'.format(symbol, exported_params, detail)) from None
        # its NMS (0.45 / top-400, as validate set it) is built into the exported graph
        net.set_nms = lambda **_kwargs: None
        return net
    if not params:
        raise ValueError('give --params, or --symbol and --exported-params')
    name = model_name(network, dataset)
    kwargs = {'classes': classes} if name.endswith('_custom') else {}
    net = get_model(name, pretrained=False, pretrained_base=False, **kwargs)
    report = load_params(net, params, '--params', PARAMS_FIX.format(name=name), ctx=ctx)
    if reports is not None:
        # the network has the file's anchors now (as Gluon's load_parameters loads them)
        reports.extend(line for line in (report.format(), anchors_line(report.anchors)) if line)
    return net


def evaluate(net, val_dataset, eval_metric, ctx, data_shape, batch_size=4, num_workers=0):
    """``validate`` of the recipe on ``val_dataset``; returns ``(names, values)``."""
    ctx = ctx if isinstance(ctx, (list, tuple)) else [ctx]
    loader = gluon.data.DataLoader(
        val_dataset.transform(YOLO3DefaultValTransform(data_shape, data_shape)),
        batch_size, False, batchify_fn=val_batchify_fn(), last_batch='keep',
        num_workers=num_workers)
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
    return img, detection_record(path, img, ids, scores, boxes, classes, thresh)


def demo_main(argv=None):
    """Run the demo; returns what ``detections.json`` holds."""
    args = demo_parser().parse_args(argv)
    return demo_with(args, get_contexts(args.gpus, 0)[0], load_net, zoo_params, detect_file,
                     {'weights': args.params or [args.symbol, args.exported_params]})


def eval_main(argv=None):
    """Evaluate and print the table; returns ``(names, values)`` of ``validate``."""
    args = eval_parser().parse_args(argv)
    ctx = get_contexts(args.gpus, 0)
    gutils.random.seed(233)
    with tempfile.TemporaryDirectory() as tmp:
        # COCO's metric writes its JSON below the prefix
        return eval_with(args, ctx, get_dataset, load_net, zoo_params, evaluate,
                         os.path.join(tmp, 'eval'))
