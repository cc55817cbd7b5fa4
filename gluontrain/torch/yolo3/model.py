"""GluonCV's YOLOv3 in PyTorch: the same layers, the same parameter layout, the same outputs.

The modules mirror gluoncv's ``model_zoo/yolo`` (``darknet.py``, ``yolo3.py``) and
``model_zoo/mobilenet.py`` block for block, so that a state_dict key is gluoncv's
``save_parameters`` name (:mod:`.weights`): ``stages.0.2.body.1.0.weight``,
``yolo_outputs.0.anchors``... The stage cuts, Gluon's BatchNorm, the decoding and MXNet's
``box_nms`` (:func:`gluontrain.torch.ops.box_nms`, per class, ``valid_thresh=0.01``):
docs/faithfulness.md, "YOLOv3 network on PyTorch", "Same as the reference"."""
import collections
import contextlib

import numpy as np
import torch
from torch import nn

from ...data.classes import VOC_CLASSES
from ...data.coco import COCO_CLASSES
from ...yolo3.anchors import GLUONCV_ANCHORS, anchor_scales
from ...yolo3.transfer import resolve_reuse, rows_to_copy
from ..ops import box_nms

__all__ = ['YOLOV3', 'YOLODetectionBlockV3', 'YOLOOutputV3', 'DarknetBasicBlockV3',
           'darknet53_features', 'mobilenet_features', 'get_yolov3', 'build_yolov3',
           'NETWORKS', 'VOC_CLASSES', 'COCO_CLASSES', 'ANCHORS', 'STRIDES', 'BN_EPS', 'BN_MOMENTUM',
           'TrainOutputs', 'eval_mode']

#: Gluon's BatchNorm defaults as GluonCV uses them (momentum 0.9 in Gluon's convention)
BN_EPS, BN_MOMENTUM = 1e-5, 0.1
#: GluonCV's YOLOv3 anchors (shallow to deep) and strides
ANCHORS = GLUONCV_ANCHORS
STRIDES = (8, 16, 32)


@contextlib.contextmanager
def eval_mode(net):
    """Run the body with ``net`` (or the module a DDP wrapper holds) in eval mode, then put
    its training flag back."""
    model = getattr(net, 'module', net)
    was_training = model.training
    model.eval()
    try:
        yield model
    finally:
        model.train(was_training)


def _bn(channels):
    return nn.BatchNorm2d(channels, eps=BN_EPS, momentum=BN_MOMENTUM)


def conv_bn_leaky(in_channels, channels, kernel, padding, stride):
    """GluonCV darknet's ``_conv2d`` cell: conv (no bias), BatchNorm, LeakyReLU(0.1)."""
    return nn.Sequential(nn.Conv2d(in_channels, channels, kernel, stride, padding, bias=False),
                         _bn(channels), nn.LeakyReLU(0.1))


class DarknetBasicBlockV3(nn.Module):
    """1x1 reduce to ``channel``, 3x3 back to ``2 * channel``, plus the input."""

    def __init__(self, channel):
        super().__init__()
        self.body = nn.Sequential(conv_bn_leaky(channel * 2, channel, 1, 0, 1),
                                  conv_bn_leaky(channel, channel * 2, 3, 1, 1))

    def forward(self, x):  # pylint: disable=missing-function-docstring
        return self.body(x) + x


def darknet53_features():
    """GluonCV's ``DarknetV3`` ``features`` for 53 layers, as a list of modules (and the
    output channels of each)."""
    layers, channels = (1, 2, 8, 8, 4), (32, 64, 128, 256, 512, 1024)
    mods, outs = [conv_bn_leaky(3, channels[0], 3, 1, 1)], [channels[0]]
    for count, channel, previous in zip(layers, channels[1:], channels):
        mods.append(conv_bn_leaky(previous, channel, 3, 1, 2))  # stride-2 downsample
        outs.append(channel)
        for _ in range(count):
            mods.append(DarknetBasicBlockV3(channel // 2))
            outs.append(channel)
    return mods, outs


def _conv_bn_relu(mods, outs, in_channels, channels, kernel=1, stride=1, pad=0, groups=1):
    # GluonCV mobilenet's _add_conv: three entries of `features` (conv, bn, relu)
    mods += [nn.Conv2d(in_channels, channels, kernel, stride, pad, groups=groups, bias=False),
             _bn(channels), nn.ReLU()]
    outs += [channels] * 3


def mobilenet_features(multiplier):
    """GluonCV's ``MobileNet(multiplier)`` ``features`` without the pooling and flatten."""
    mods, outs = [], []
    _conv_bn_relu(mods, outs, 3, int(32 * multiplier), 3, 2, 1)
    dw_channels = [int(x * multiplier) for x in [32, 64] + [128] * 2 + [256] * 2 + [512] * 6
                   + [1024]]
    channels = [int(x * multiplier) for x in [64] + [128] * 2 + [256] * 2 + [512] * 6
                + [1024] * 2]
    strides = [1, 2] * 3 + [1] * 5 + [2, 1]
    for dwc, c, s in zip(dw_channels, channels, strides):
        _conv_bn_relu(mods, outs, dwc, dwc, 3, s, 1, groups=dwc)
        _conv_bn_relu(mods, outs, dwc, c)
    return mods, outs


#: base network -> (features builder, stage cut points, detection block widths deep first),
#: as gluoncv's ``yolo3_<network>_*`` functions build them
NETWORKS = {
    'darknet53': (darknet53_features, (15, 24), (512, 256, 128)),
    'mobilenet1.0': (lambda: mobilenet_features(1.0), (33, 69), (512, 256, 128)),
    'mobilenet0.25': (lambda: mobilenet_features(0.25), (33, 69), (256, 128, 128)),
}


class YOLODetectionBlockV3(nn.Module):
    """Five alternating 1x1 / 3x3 cells (``body``, the route) and a 3x3 ``tip``."""

    def __init__(self, in_channels, channel):
        super().__init__()
        cells, previous = [], in_channels
        for _ in range(2):
            cells += [conv_bn_leaky(previous, channel, 1, 0, 1),
                      conv_bn_leaky(channel, channel * 2, 3, 1, 1)]
            previous = channel * 2
        cells.append(conv_bn_leaky(previous, channel, 1, 0, 1))
        self.body = nn.Sequential(*cells)
        self.tip = conv_bn_leaky(channel, channel * 2, 3, 1, 1)

    def forward(self, x):  # pylint: disable=missing-function-docstring
        route = self.body(x)
        return route, self.tip(route)


class YOLOOutputV3(nn.Module):
    """One head: a 1x1 prediction conv, its anchors and the grid offsets (both saved, as in
    GluonCV: ``anchors`` ``(1, 1, A, 2)``, ``offsets`` ``(1, 1, 128, 128, 2)`` of ``(x, y)``)."""

    def __init__(self, in_channels, num_class, anchors, stride, alloc_size=(128, 128)):
        super().__init__()
        anchors = np.asarray(anchors, dtype=np.float32).reshape(1, 1, -1, 2)
        self.num_class, self.stride = num_class, stride
        self.num_pred, self.num_anchors = 5 + num_class, anchors.shape[2]
        self.register_buffer('anchors', torch.from_numpy(anchors))
        grid_x, grid_y = np.meshgrid(np.arange(alloc_size[1]), np.arange(alloc_size[0]))
        offsets = np.stack([grid_x, grid_y], -1)[None, None].astype(np.float32)
        self.register_buffer('offsets', torch.from_numpy(offsets))
        self.prediction = nn.Conv2d(in_channels, self.num_pred * self.num_anchors, 1)

    def decode(self, pred):
        """GluonCV's decoding of one head's map ``(B, A * (5 + C), H, W)``: a dict of ``bbox``
        ``(B, H*W, A, 4)`` corners in input pixels, ``raw_centers``, ``raw_scales``,
        ``objness``, ``class_pred`` (logits), ``class_score`` (sigmoid(class) x
        sigmoid(objectness)) and ``offsets`` ``(1, H*W, 1, 2)``."""
        b, _, h, w = pred.shape
        pred = pred.reshape(b, self.num_pred * self.num_anchors, h * w).transpose(1, 2)
        pred = pred.reshape(b, h * w, self.num_anchors, self.num_pred)
        raw_centers, raw_scales = pred[..., 0:2], pred[..., 2:4]
        objness, class_pred = pred[..., 4:5], pred[..., 5:]
        offsets = self.offsets[:, :, :h, :w, :].reshape(1, -1, 1, 2)
        centers = (torch.sigmoid(raw_centers) + offsets) * self.stride
        scales = torch.exp(raw_scales) * self.anchors
        class_score = torch.sigmoid(class_pred) * torch.sigmoid(objness)
        wh = scales / 2.0
        bbox = torch.cat([centers - wh, centers + wh], dim=-1)
        return {'bbox': bbox, 'raw_centers': raw_centers, 'raw_scales': raw_scales,
                'objness': objness, 'class_pred': class_pred, 'class_score': class_score,
                'offsets': offsets}

    def detections(self, decoded):
        """``(B, C * H*W * A, 6)`` rows ``(class id, score, x1, y1, x2, y2)`` in GluonCV's order
        (class-major, then cell, then anchor), which decides ``box_nms``'s tie order."""
        bbox, score = decoded['bbox'], decoded['class_score']
        b, cells, anchors, classes = score.shape
        ids = torch.arange(classes, dtype=score.dtype, device=score.device)
        ids = ids.reshape(1, classes, 1, 1, 1).expand(b, classes, cells, anchors, 1)
        scores = score.permute(0, 3, 1, 2)[..., None]
        boxes = bbox[:, None].expand(b, classes, cells, anchors, 4)
        return torch.cat([ids, scores, boxes], dim=-1).reshape(b, -1, 6)

    def forward(self, x):  # pylint: disable=missing-function-docstring
        return self.prediction(x)

    @torch.no_grad()
    def reset_class(self, num_class, mapping=None, keep_box_rows=False):
        """GluonCV's ``YOLOOutputV3.reset_class``: a new prediction convolution for
        ``num_class`` classes, initialised as Gluon initialises it (weights
        ``Uniform(-0.07, 0.07)`` from torch's generator, bias 0), with the rows of
        :func:`gluontrain.yolo3.transfer.rows_to_copy` copied from the old one."""
        old = self.prediction
        new = nn.Conv2d(old.in_channels, (5 + num_class) * self.num_anchors, 1).to(
            old.weight.device, old.weight.dtype)
        new.weight.uniform_(-0.07, 0.07)
        new.bias.zero_()
        for row, old_row in rows_to_copy(mapping, self.num_anchors, self.num_class, num_class,
                                         keep_box_rows):
            new.weight[row] = old.weight[old_row]
            new.bias[row] = old.bias[old_row]
        new.weight.requires_grad_(old.weight.requires_grad)
        new.bias.requires_grad_(old.bias.requires_grad)
        self.prediction = new
        self.num_class, self.num_pred = num_class, 5 + num_class


#: what the network returns in training mode: per anchor, over the three heads (deep first)
TrainOutputs = collections.namedtuple(
    'TrainOutputs', ['box_preds', 'raw_centers', 'raw_scales', 'objness', 'class_pred',
                     'anchors', 'offsets', 'feat_sizes'])


def _upsample(x, stride=2):
    # GluonCV repeats each pixel along width then height
    return x.repeat_interleave(stride, dim=-1).repeat_interleave(stride, dim=-2)


class YOLOV3(nn.Module):
    """GluonCV's ``YOLOV3``: staged base, detection blocks, transitions, outputs.

    ``stages``: the base cut in three, shallow to deep, with ``stage_channels`` outputs;
    ``channels``: detection block widths, deep first (``[512, 256, 128]``); ``anchors`` and
    ``strides`` shallow first; ``nms_thresh``, ``nms_topk``, ``post_nms`` as ``set_nms``.
    """

    def __init__(self, stages, stage_channels, channels, anchors, strides, classes,
                 nms_thresh=0.45, nms_topk=400, post_nms=100):
        super().__init__()
        self.classes = list(classes)
        self.nms_thresh, self.nms_topk, self.post_nms = nms_thresh, nms_topk, post_nms
        self.stages = nn.ModuleList(stages)
        self.transitions = nn.ModuleList()
        self.yolo_blocks = nn.ModuleList()
        self.yolo_outputs = nn.ModuleList()
        routes = stage_channels[::-1]
        in_channels = routes[0]
        for i, (channel, anchor, stride) in enumerate(zip(channels, anchors[::-1],
                                                          strides[::-1])):
            self.yolo_blocks.append(YOLODetectionBlockV3(in_channels, channel))
            self.yolo_outputs.append(YOLOOutputV3(channel * 2, len(self.classes), anchor,
                                                  stride))
            if i > 0:
                self.transitions.append(conv_bn_leaky(channels[i - 1], channel, 1, 0, 1))
            if i + 1 < len(channels):
                in_channels = channels[i + 1] + routes[i + 1]

    @property
    def num_class(self):
        """Number of (foreground) classes."""
        return len(self.classes)

    def reset_class(self, classes, reuse_weights=None, keep_box_rows=False):
        """GluonCV's ``YOLOV3.reset_class``: new ``classes``, every output's prediction
        convolution rebuilt; returns the resolved ``{new index: old index}`` or None.

        ``reuse_weights``: ``{new: old}`` (indices or names) or names in both lists, whose rows
        start from the old ones (:func:`gluontrain.yolo3.transfer.resolve_reuse`);
        ``keep_box_rows``: also keep unmapped box and objectness rows (docs/faithfulness.md,
        "reset_class").
        """
        mapping = resolve_reuse(self.classes, list(classes), reuse_weights)
        for output in self.yolo_outputs:
            output.reset_class(len(classes), mapping, keep_box_rows)
        self.classes = list(classes)
        return mapping

    def set_nms(self, nms_thresh=0.45, nms_topk=400, post_nms=100):
        """GluonCV's ``set_nms``: a threshold outside (0, 1) disables NMS (every row is
        returned), ``post_nms <= 0`` keeps every row NMS leaves."""
        self.nms_thresh, self.nms_topk, self.post_nms = nms_thresh, nms_topk, post_nms

    def predictions(self, x):
        """The prediction maps of the three heads, deep first: ``[(B, A * (5 + C), H, W)]``."""
        routes = []
        for stage in self.stages:
            x = stage(x)
            routes.append(x)
        preds = []
        for i, (block, output) in enumerate(zip(self.yolo_blocks, self.yolo_outputs)):
            x, tip = block(x)
            preds.append(output(tip))
            if i >= len(routes) - 1:
                break
            x = _upsample(self.transitions[i](x))
            route = routes[::-1][i + 1]
            x = torch.cat([x[:, :, :route.shape[2], :route.shape[3]], route], dim=1)
        return preds

    def detections(self, x):
        """All decoded rows ``(B, N, 6)`` before NMS (GluonCV's ``result`` before ``box_nms``)."""
        preds = self.predictions(x)
        return torch.cat([out.detections(out.decode(p))
                          for out, p in zip(self.yolo_outputs, preds)], dim=1)

    def nms(self, result):
        """GluonCV's post-processing of ``detections``: ``(ids, scores, bboxes)``."""
        if 0 < self.nms_thresh < 1:
            result = box_nms(result, overlap_thresh=self.nms_thresh, valid_thresh=0.01,
                             topk=self.nms_topk, id_index=0, score_index=1, coord_start=2,
                             force_suppress=False)
            if self.post_nms > 0:
                result = result[:, :self.post_nms]
        return result[..., 0:1], result[..., 1:2], result[..., 2:]

    def train_outputs(self, x):
        """What GluonCV's network returns in training mode outside ``autograd.record`` (the
        input of its target generator), each concatenated over the heads, deep first."""
        preds = self.predictions(x)
        parts = collections.defaultdict(list)
        for out, p in zip(self.yolo_outputs, preds):
            dec = out.decode(p)
            b = p.shape[0]
            parts['box_preds'].append(dec['bbox'].reshape(b, -1, 4))
            for key in ('raw_centers', 'raw_scales', 'objness', 'class_pred'):
                parts[key].append(dec[key].reshape(b, -1, dec[key].shape[-1]))
            parts['anchors'].append(out.anchors)
            parts['offsets'].append(dec['offsets'])
            parts['feat_sizes'].append(tuple(p.shape[2:]))
        cat = {k: torch.cat(parts[k], dim=1) for k in ('box_preds', 'raw_centers', 'raw_scales',
                                                        'objness', 'class_pred')}
        return TrainOutputs(anchors=parts['anchors'], offsets=parts['offsets'],
                            feat_sizes=parts['feat_sizes'], **cat)

    def forward(self, x):
        """Eval mode: ``(ids, scores, bboxes)`` as GluonCV's; training mode:
        :class:`TrainOutputs` (the loss comes with the recipe)."""
        if self.training:
            return self.train_outputs(x)
        return self.nms(self.detections(x))


def build_yolov3(network, classes, anchors=None, **kwargs):
    """GluonCV's ``yolo3_<network>_*`` for ``classes`` (PyTorch's random initialisation).

    ``network``: ``'darknet53'``, ``'mobilenet1.0'`` or ``'mobilenet0.25'``; ``anchors``:
    ``--anchors`` text or GluonCV's nesting (shallow first), default :data:`ANCHORS`;
    ``kwargs``: ``nms_thresh``, ``nms_topk``, ``post_nms``.
    """
    if network not in NETWORKS:
        raise ValueError('unknown YOLOv3 network {!r}; choose one of {}'.format(
            network, ', '.join(NETWORKS)))
    features, cuts, channels = NETWORKS[network]
    mods, outs = features()
    bounds = (0,) + cuts + (len(mods),)
    stages = [nn.Sequential(*mods[a:b]) for a, b in zip(bounds, bounds[1:])]
    if anchors is None:
        anchors = ANCHORS
    elif isinstance(anchors, str):
        anchors = anchor_scales(anchors)
    return YOLOV3(stages, [outs[b - 1] for b in bounds[1:]], channels, anchors, STRIDES,
                  classes, **kwargs)


def get_yolov3(name, classes=None, **kwargs):
    """A zoo name (``'yolo3_darknet53_voc'``, ``'yolo3_mobilenet0.25_custom'``...) as
    ``gluoncv.model_zoo.get_model(name, pretrained=False, pretrained_base=False)`` builds it;
    ``classes`` required for ``_custom`` (default VOC's / COCO's); ``kwargs`` as
    :func:`build_yolov3`."""
    parts = name.split('_')
    if len(parts) != 3 or parts[0] != 'yolo3':
        raise ValueError('{!r} is not a YOLOv3 zoo name (yolo3_<network>_<voc|custom>)'
                         .format(name))
    dataset = parts[2]
    defaults = {'voc': VOC_CLASSES, 'coco': COCO_CLASSES}
    if classes is None and dataset in defaults:
        classes = defaults[dataset]
    elif classes is None or dataset not in ('custom',) + tuple(defaults):
        raise ValueError('{}: pass classes= (the zoo network of dataset {!r} is not built '
                         'here)'.format(name, dataset))
    return build_yolov3(parts[1], classes, **kwargs)
