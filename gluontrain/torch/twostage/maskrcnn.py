"""The maskrcnn-benchmark flavour of the two-stage detector, SGB's 'sgg-detector':
maskrcnn-benchmark's ``GeneralizedRCNN`` (backbone + FPN, RPN, FPN box
head) as Scene-Graph-Benchmark pretrains it on Visual Genome (``tools/detector_pretrain_net.py``
with ``MODEL.RELATION_ON False``), in plain torch.

Module names follow SGB's state_dict (``backbone.body``, ``backbone.fpn``, ``rpn.head``,
``roi_heads.box.feature_extractor`` / ``.predictor``) so that ``load_mapping`` finds the box
feature extractor of a detector checkpoint under SGB's key names.

The ResNet / ResNeXt body is the shared :mod:`gluontrain.torch.backbone` one under
maskrcnn-benchmark's names (``backbone.body.stem``, ``backbone.body.layer1.0.conv1`` ...,
``FrozenBatchNorm2d`` buffers), so SGB's detector checkpoints load key for key; the FPN is
:class:`~.fpn.FPN` under maskrcnn-benchmark's names (1x1 inner + 3x3 layer convs with bias and
no norm, nearest top-down, ``top_block='max_pool'``: P6 = stride-2 max-pool of P5).
"""
from collections import OrderedDict

import torch.nn as nn

from ..backbone import FrozenBatchNorm2d, freeze_stages, make_group_norm, make_resnet
from .box_head import ROIBoxHead, add_predict_logits
from .fpn import FPN, FPNBody
from .images import to_image_list
from .rpn import RPNModule

__all__ = ['CONV_BODIES', 'build_backbone', 'build_body', 'body_norms', 'SGGDetector',
           'build_detector', 'cfg_get']

#: ``MODEL.BACKBONE.CONV_BODY`` -> ResNet depth (maskrcnn-benchmark's FPN bodies; R-18/34 with
#: basic blocks are ours, for CPU runs). ResNeXt is ``MODEL.RESNETS.NUM_GROUPS`` /
#: ``WIDTH_PER_GROUP`` on these, as in SGB's X-101-32x8d configs.
CONV_BODIES = {'R-18-FPN': 18, 'R-34-FPN': 34, 'R-50-FPN': 50, 'R-101-FPN': 101,
               'R-152-FPN': 152}
_FPN_INPUTS = ('layer1', 'layer2', 'layer3', 'layer4')
#: ``MODEL.BACKBONE.NORM`` (ours): 'off' builds what ``RESNETS.TRANS_FUNC`` / ``STEM_FUNC``
#: name (maskrcnn-benchmark), 'bn' trainable batch norms (bodies trained from scratch).
BODY_NORMS = ('off', 'bn')
_NORM_FUNCS = {'BottleneckWithFixedBatchNorm': 'frozen', 'StemWithFixedBatchNorm': 'frozen',
               'BottleneckWithGN': 'gn', 'StemWithGN': 'gn'}


def cfg_get(cfg, path, default):
    """``cfg.<path>`` or ``default`` when a key along the dotted path is absent (the
    gluontrain extension keys, e.g. ``MODEL.BACKBONE.WIDTH_MULT``)."""
    node = cfg
    for part in path.split('.'):
        if not hasattr(node, part) and not (isinstance(node, dict) and part in node):
            return default
        node = getattr(node, part) if hasattr(node, part) else node[part]
    return node


def _norm_factory(cfg, kind):
    if kind == 'frozen':
        return FrozenBatchNorm2d
    g = cfg.MODEL.GROUP_NORM
    return make_group_norm(g.DIM_PER_GP, g.NUM_GROUPS, g.EPSILON)


def body_norms(cfg):
    """The ``(stem, blocks)`` norm factories of the body.

    ``MODEL.BACKBONE.NORM 'off'`` (default): maskrcnn-benchmark's choice by
    ``MODEL.RESNETS.STEM_FUNC`` / ``TRANS_FUNC`` (``*WithFixedBatchNorm``:
    ``FrozenBatchNorm2d``; ``*WithGN``: ``GroupNorm`` sized by ``MODEL.GROUP_NORM``).
    ``'bn'`` (ours): ``nn.BatchNorm2d`` everywhere, to train a body from scratch.

    Parameters
    ----------
    cfg : yacs.config.CfgNode

    Returns
    -------
    tuple of callable

    Raises
    ------
    ValueError
        An unknown ``NORM``, ``STEM_FUNC`` or ``TRANS_FUNC``.
    """
    mode = cfg_get(cfg, 'MODEL.BACKBONE.NORM', 'off')
    if mode not in BODY_NORMS:
        raise ValueError("MODEL.BACKBONE.NORM = {!r}: choose 'off' (the norms RESNETS.TRANS_FUNC "
                         "and STEM_FUNC name) or 'bn' (trainable batch norms)".format(mode))
    r = cfg.MODEL.RESNETS
    for key, value, allowed in (('STEM_FUNC', r.STEM_FUNC, ('StemWithFixedBatchNorm',
                                                            'StemWithGN')),
                                ('TRANS_FUNC', r.TRANS_FUNC, ('BottleneckWithFixedBatchNorm',
                                                              'BottleneckWithGN'))):
        if value not in allowed:
            raise ValueError('MODEL.RESNETS.{} = {!r} is not one of maskrcnn-benchmark\'s {}'
                             .format(key, value, ', '.join(allowed)))
    if mode == 'bn':
        return nn.BatchNorm2d, nn.BatchNorm2d
    return (_norm_factory(cfg, _NORM_FUNCS[r.STEM_FUNC]),
            _norm_factory(cfg, _NORM_FUNCS[r.TRANS_FUNC]))


def _refuse_unsupported(cfg):
    r = cfg.MODEL.RESNETS
    if any(r.STAGE_WITH_DCN):
        raise ValueError('MODEL.RESNETS.STAGE_WITH_DCN = {}: deformable convolutions are not '
                         'available (they need maskrcnn-benchmark\'s compiled ops); set all '
                         'False'.format(tuple(r.STAGE_WITH_DCN)))
    for key in ('USE_GN', 'USE_RELU'):
        if cfg.MODEL.FPN[key]:
            raise ValueError('MODEL.FPN.{} True is not supported: the FPN has '
                             'maskrcnn-benchmark\'s default plain convolutions; set False'
                             .format(key))
    if r.RES5_DILATION != 1:
        raise ValueError('MODEL.RESNETS.RES5_DILATION = {}: maskrcnn-benchmark reads it only in '
                         'the C4 box head, never in an FPN body; set 1'.format(r.RES5_DILATION))


def build_body(cfg):
    """maskrcnn-benchmark's ``ResNet(cfg)`` for an ``R-*-FPN`` ``CONV_BODY``.

    Honours ``MODEL.RESNETS.NUM_GROUPS``, ``WIDTH_PER_GROUP``, ``STRIDE_IN_1X1``,
    ``STEM_FUNC``, ``TRANS_FUNC``, ``STEM_OUT_CHANNELS``, ``RES2_OUT_CHANNELS``,
    ``MODEL.GROUP_NORM.*`` and ``MODEL.BACKBONE.FREEZE_CONV_BODY_AT`` (stem, layer1 ..), and
    the gluontrain keys ``MODEL.BACKBONE.WIDTH_MULT`` and ``NORM``; refuses deformable
    stages and ``RES5_DILATION`` (which an FPN body of maskrcnn-benchmark never reads).
    Convolutions start from maskrcnn-benchmark's ``kaiming_uniform_(a=1)``.

    Parameters
    ----------
    cfg : yacs.config.CfgNode

    Returns
    -------
    gluontrain.torch.backbone.ResNet
        maskrcnn-benchmark's names (``stem``, ``layer1`` .. ``layer4``).
    """
    name = cfg.MODEL.BACKBONE.CONV_BODY
    if name not in CONV_BODIES:
        raise ValueError('MODEL.BACKBONE.CONV_BODY = {!r} is not supported; choose one of {} '
                         '(ResNeXt: one of these with MODEL.RESNETS.NUM_GROUPS / '
                         'WIDTH_PER_GROUP, as SGB\'s X-101-32x8d configs)'.format(
                             name, ', '.join(CONV_BODIES)))
    _refuse_unsupported(cfg)
    r = cfg.MODEL.RESNETS
    depth = CONV_BODIES[name]
    if depth < 50 and r.NUM_GROUPS != 1:
        raise ValueError('MODEL.RESNETS.NUM_GROUPS = {} needs bottleneck blocks: {} has basic '
                         'blocks; use R-50-FPN or deeper'.format(r.NUM_GROUPS, name))
    stem_norm, norm = body_norms(cfg)
    body = make_resnet(depth, norm=norm, stem_norm=stem_norm, naming='maskrcnn',
                       groups=r.NUM_GROUPS, width_per_group=r.WIDTH_PER_GROUP,
                       stride_in_1x1=r.STRIDE_IN_1X1, stem_channels=r.STEM_OUT_CHANNELS,
                       res2_channels=r.RES2_OUT_CHANNELS if depth >= 50 else None,
                       width_mult=float(cfg_get(cfg, 'MODEL.BACKBONE.WIDTH_MULT', 1.0)),
                       conv_init='maskrcnn')
    freeze_stages(body, cfg.MODEL.BACKBONE.FREEZE_CONV_BODY_AT)
    return body


def build_backbone(cfg):
    """SGB's ``build_backbone`` for ``R-*-FPN`` bodies: :func:`build_body` + maskrcnn-benchmark's
    FPN (``MODEL.RESNETS.BACKBONE_OUT_CHANNELS`` wide, P2..P6).

    Returns
    -------
    FPNBody
        ``body`` + ``fpn`` (maskrcnn-benchmark's ``backbone`` module).
    """
    body = build_body(cfg)
    out = cfg.MODEL.RESNETS.BACKBONE_OUT_CHANNELS
    fpn = FPN([body.out_channels[k] for k in _FPN_INPUTS], out, naming='maskrcnn',
              top_block='max_pool')
    return FPNBody(body, fpn, _FPN_INPUTS, naming='maskrcnn', out_channels=out)


class SGGDetector(nn.Module):
    """SGB's ``GeneralizedRCNN`` without the relation head.

    Parameters
    ----------
    cfg : yacs.config.CfgNode
        SGB's config (``MODEL.RPN``, ``MODEL.ROI_HEADS``, ``MODEL.ROI_BOX_HEAD``,
        ``MODEL.BACKBONE``, ``MODEL.RESNETS.BACKBONE_OUT_CHANNELS``,
        ``DATALOADER.SIZE_DIVISIBILITY``, ``TEST.CUSTUM_EVAL``).
    generator : torch.Generator, optional
        Source of the RPN / box-head sampling draws (torch's global RNG when None, as SGB).
    """

    def __init__(self, cfg, generator=None):
        super().__init__()
        self.cfg = cfg.clone()
        self.backbone = build_backbone(cfg)
        self.rpn = RPNModule(cfg, self.backbone.out_channels, generator)
        self.roi_heads = nn.ModuleDict(
            OrderedDict(box=ROIBoxHead(cfg, self.backbone.out_channels, generator)))

    def _check_targets(self, targets):
        if self.training and targets is None:
            raise ValueError('In training mode, targets should be passed')

    def forward(self, images, targets=None):
        """Training: loss dict (``loss_objectness``, ``loss_rpn_box_reg``,
        ``loss_classifier``, ``loss_box_reg``). Evaluation: list of BoxList detections
        (``pred_labels``, ``pred_scores``, ``labels`` = ``pred_labels``, ``predict_logits``
        and the fc7 ``box_features`` of each detection).

        Parameters
        ----------
        images : ImageList-like, tensor or list of tensors
        targets : list of BoxList, optional
        """
        self._check_targets(targets)
        images = to_image_list(images, self.cfg.DATALOADER.SIZE_DIVISIBILITY)
        features = self.backbone(images.tensors)
        proposals, rpn_losses = self.rpn(images.image_sizes, features, targets)
        box = self.roi_heads['box']
        if self.training:
            _, _, box_losses = box(features, proposals, targets)
            losses = dict(box_losses)
            losses.update(rpn_losses)
            return losses
        x = box.feature_extractor(features, proposals)
        class_logits, box_regression = box.predictor(x)
        add_predict_logits(proposals, class_logits)
        x, result = box.post_processor((x, class_logits, box_regression), proposals,
                                       relation_mode=False)
        start = 0
        for r in result:
            r.add_field('labels', r.get_field('pred_labels'))
            r.add_field('box_features', x[start:start + len(r)])
            start += len(r)
        return result


def build_detector(cfg, generator=None):
    """The sgg-detector of ``cfg`` (``MODEL.RELATION_ON`` must be False).

    Returns
    -------
    SGGDetector
    """
    if cfg.MODEL.RELATION_ON:
        raise ValueError('build_detector: MODEL.RELATION_ON is True; the relation model is '
                         'gluontrain.torch.sgg.model.build_relation_model')
    return SGGDetector(cfg, generator)

