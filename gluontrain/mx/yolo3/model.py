"""Building the YOLOv3 network (and the SyncBN ``async_net``) as the reference does."""
import warnings

from mxnet import gluon

from gluoncv.model_zoo import get_model
from gluoncv.model_zoo.yolo.yolo3 import custom_yolov3

from ...core import model_store
from ...yolo3.layout import find_pretrained_base, pretrained_base_lines
from ...yolo3.anchors import GLUONCV_ANCHORS_TEXT, anchor_scales, anchors_line, anchors_text
from ...yolo3.args import net_name
from ...yolo3.transfer import (ZOO_CLASSES, resolve_reuse, reuse_spec, reuse_summary,
                               rows_to_copy, transfer_fix, transfer_source)
from .weights import load_base, load_params, net_anchors

__all__ = ['net_name', 'model_store_path',
           'load_pretrained_base', 'get_net', 'build_yolov3']

#: detection block widths and strides of each base, as gluoncv's ``yolo3_<network>_*`` pass them
FILTERS = {'darknet53': [512, 256, 128], 'mobilenet1.0': [512, 256, 128],
           'mobilenet0.25': [256, 128, 128]}
STRIDES = [8, 16, 32]


def build_yolov3(name, anchors=None, **kwargs):
    """GluonCV's ``get_model(name, pretrained_base=False, **kwargs)``, with ``anchors``.

    GluonCV's ``yolo3_<network>_<dataset>`` functions hard-code its anchors (and pass every
    other keyword to the base network, so ``anchors=`` cannot reach them); other anchors build
    the same network through GluonCV's own ``custom_yolov3`` (what those functions call: the
    same base, stages, filters and strides; with GluonCV's anchors it is ``get_model``'s
    network parameter for parameter, tested).

    Parameters
    ----------
    name : str
        ``yolo3_<network>_<voc|coco|custom>``.
    anchors : str or sequence, optional
        ``--anchors`` text or GluonCV's nesting; default (or GluonCV's own): ``get_model``.
    **kwargs
        ``classes`` (custom networks; default VOC's / COCO's), ``norm_layer``,
        ``norm_kwargs``, ``pretrained``...
    """
    kwargs.setdefault('pretrained_base', False)
    text = None if anchors is None else (anchors if isinstance(anchors, str)
                                         else anchors_text(anchors))
    if text is None or anchor_scales(text) == anchor_scales(GLUONCV_ANCHORS_TEXT):
        return get_model(name, **kwargs)
    _, network, dataset = name.split('_')
    classes = kwargs.pop('classes', None) or ZOO_CLASSES[dataset]
    return custom_yolov3(network, FILTERS[network], anchor_scales(text), STRIDES, classes,
                         dataset if dataset in ZOO_CLASSES else '', **kwargs)


def model_store_path(name):
    """Where gluoncv's model store keeps ``name``'s released weights (may not exist):
    ``$MXNET_HOME/models`` (default ``~/.mxnet/models``), ``{name}-{short sha1}.params``."""
    return model_store.params_path(name)


def _check_pretrained_base(network, path=''):
    """The base's file, downloaded as gluoncv downloads it when it is not there."""
    return find_pretrained_base(network, path)[0]


def load_pretrained_base(net, network, path=''):
    """Load the model store's ImageNet ``network`` base into ``net``'s stages, with a report.

    What ``get_model(name, pretrained_base=True)`` does inside gluoncv (the base network loads
    the file, the YOLOv3 takes its layers), but the file's tensors are matched and reported
    (:func:`.weights.load_base`), and a file whose SHA-1 is not the model store's is loaded
    with a note instead of being replaced by a download (there is no network here).

    Returns
    -------
    list of str
        The report's lines (and the note), for the training log.
    """
    given = bool(path)
    path, what, fix = find_pretrained_base(network, path)
    return pretrained_base_lines(load_base(net, path, what, fix), path, network, given)


def get_net(args, ctx, reports=None):
    """The training network and the network the data workers use for target generation.

    With ``--syncbn`` and several contexts the training net uses
    ``gluon.contrib.nn.SyncBatchNorm(num_devices=len(ctx))`` and a second, plain-BatchNorm
    ``async_net`` feeds the train transforms (SyncBatchNorm cannot run in a worker);
    otherwise both are the same object. Parameters are initialised, not loaded: ``train``
    loads ``--resume``/``--load-weights``. The ImageNet base (unless
    ``--no-pretrained-base``) is loaded into the training net before the other parameters
    are initialised, as gluoncv's ``pretrained_base=True`` does, with a report.

    Parameters
    ----------
    args : argparse.Namespace
        Uses ``network``, ``dataset``, ``classes``, ``syncbn``, ``no_pretrained_base``,
        ``anchors`` (:func:`build_yolov3`).
    ctx : list of mx.Context
    reports : list, optional
        Receives the base's load report lines (for the training log).

    Returns
    -------
    (net, async_net)
    """
    name = net_name(args)
    classes = [c for c in args.classes.split(',') if c] if name.endswith('_custom') else None
    transfer = getattr(args, 'transfer', '').strip() and not getattr(args, 'resume', '').strip()
    pretrained_base = not getattr(args, 'no_pretrained_base', False) and not transfer
    base_file = getattr(args, 'pretrained_base', '').strip()  # '': the model store's
    if pretrained_base:
        _check_pretrained_base(args.network, base_file)
    kwargs = {'classes': classes} if classes else {}
    anchors = getattr(args, 'anchors', None)
    if transfer:
        source = transfer_source(args)
        name, kwargs = 'yolo3_{}_custom'.format(args.network), {'classes': source[1]}
    # the base is loaded here rather than by gluoncv: same tensors, same (absent) random
    # draws, but reported, and no download attempt for a file that is not the released one
    if args.syncbn and len(ctx) > 1:
        net = build_yolov3(name, anchors, norm_layer=gluon.contrib.nn.SyncBatchNorm,
                           norm_kwargs={'num_devices': len(ctx)}, **kwargs)
        async_net = build_yolov3(name, anchors, **kwargs)  # used by cpu worker
    else:
        net = build_yolov3(name, anchors, **kwargs)
        async_net = net
    if pretrained_base:
        lines = load_pretrained_base(net, args.network, base_file)
        if reports is not None:
            reports.extend(lines)
    with warnings.catch_warnings(record=True):
        # pretrained base layers warn that they are initialised already
        warnings.simplefilter('always')
        net.initialize()
        async_net.initialize()
    if transfer:
        lines = transfer_classes(net, async_net, source, classes or
                                 list(ZOO_CLASSES[args.dataset.lower()]), args)
        if reports is not None:
            reports.extend(lines)
    return net, async_net


def transfer_classes(net, async_net, source, new_classes, args):
    """``--transfer``: load ``source`` ``(path, classes, label)`` into the network built for
    its classes, then GluonCV's own ``reset_class`` to ``new_classes`` (and, with
    ``--keep-box-rows``, the old box and objectness rows put back where GluonCV drew new
    ones). Returns the report lines."""
    path, old_classes, label = source
    fix = transfer_fix(args.network)
    # the network keeps --anchors (the file's are reported when they differ)
    report = load_params(net, path, '--transfer', fix, anchors='network')
    spec = reuse_spec(args.reuse_classes, old_classes, new_classes)
    mapping = resolve_reuse(old_classes, new_classes, spec)
    for model in {id(net): net, id(async_net): async_net}.values():
        if model is not net:
            load_params(model, path, '--transfer', fix, anchors='network')
        old = [(o.prediction.weight.data().asnumpy(), o.prediction.bias.data().asnumpy())
               for o in model.yolo_outputs]
        model.reset_class(new_classes, reuse_weights=spec)
        if args.keep_box_rows and not mapping:
            for output, (weight, bias) in zip(model.yolo_outputs, old):
                new_w = output.prediction.weight.data().asnumpy()
                new_b = output.prediction.bias.data().asnumpy()
                for row, old_row in rows_to_copy(None, output._num_anchors, len(old_classes),
                                                 len(new_classes), keep_box_rows=True):
                    new_w[row], new_b[row] = weight[old_row], bias[old_row]
                output.prediction.weight.set_data(new_w)
                output.prediction.bias.set_data(new_b)
    lines = [report.format(), reuse_summary(old_classes, new_classes, mapping, label,
                                            args.keep_box_rows)]
    line = anchors_line(report.anchors, net_anchors(net))
    return lines + ([line] if line else [])
