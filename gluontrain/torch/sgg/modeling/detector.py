"""Scene-Graph-Benchmark's config -> the two-stage modules' arguments: the one place where the
scene-graph recipe reads ``MODEL.BACKBONE`` / ``RESNETS`` / ``RPN`` / ``ROI_HEADS`` /
``ROI_BOX_HEAD`` for the maskrcnn-benchmark flavour of :mod:`gluontrain.torch.twostage`
(:mod:`gluontrain.torch.twostage.maskrcnn`), as SGB's ``build_backbone``, ``build_rpn``,
``build_roi_box_head`` and ``build_detection_model`` do.

With ``MODEL.RELATION_ON`` the box head is :class:`.relation_box_head.RelationBoxHead`.
"""
import torch.nn as nn

from ...backbone import FrozenBatchNorm2d, freeze_stages, make_group_norm, make_resnet
from ...twostage.box_head import (BoxSampler, FPN2MLPFeatureExtractor, FPNPredictor,
                                  ROIBoxHead)
from ...twostage.box_inference import BoxCoder, BoxPostProcessor
from ...twostage.maskrcnn import SGGDetector, fpn_backbone
from ...twostage.rpn import RPNModule
from .relation_box_head import RelationBoxHead

__all__ = ['CONV_BODIES', 'BODY_NORMS', 'cfg_get', 'body_norms', 'build_body', 'build_backbone',
           'build_rpn', 'box_feature_extractor', 'box_sampler', 'box_post_processor',
           'build_box_head', 'detector_parts', 'build_detector']

#: ``MODEL.BACKBONE.CONV_BODY`` -> ResNet depth (maskrcnn-benchmark's FPN bodies; R-18/34 with
#: basic blocks are ours, for CPU runs). ResNeXt is ``MODEL.RESNETS.NUM_GROUPS`` /
#: ``WIDTH_PER_GROUP`` on these, as in SGB's X-101-32x8d configs.
CONV_BODIES = {'R-18-FPN': 18, 'R-34-FPN': 34, 'R-50-FPN': 50, 'R-101-FPN': 101,
               'R-152-FPN': 152}
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
    gluontrain.torch.twostage.fpn.FPNBody
        ``body`` + ``fpn`` (maskrcnn-benchmark's ``backbone`` module).
    """
    return fpn_backbone(build_body(cfg), cfg.MODEL.RESNETS.BACKBONE_OUT_CHANNELS)


def build_rpn(cfg, in_channels, generator=None):
    """SGB's ``build_rpn`` (FPN): ``MODEL.RPN.*`` and
    ``MODEL.ROI_RELATION_HEAD.ADD_GTBOX_TO_PROPOSAL_IN_TRAIN``.

    Returns
    -------
    gluontrain.torch.twostage.rpn.RPNModule
    """
    r = cfg.MODEL.RPN
    return RPNModule(
        in_channels, r.ANCHOR_STRIDE, r.ANCHOR_SIZES, r.ASPECT_RATIOS, r.RPN_MID_CHANNEL,
        r.STRADDLE_THRESH, r.FG_IOU_THRESHOLD, r.BG_IOU_THRESHOLD, r.BATCH_SIZE_PER_IMAGE,
        r.POSITIVE_FRACTION, (r.PRE_NMS_TOP_N_TRAIN, r.PRE_NMS_TOP_N_TEST),
        (r.POST_NMS_TOP_N_TRAIN, r.POST_NMS_TOP_N_TEST),
        (r.FPN_POST_NMS_TOP_N_TRAIN, r.FPN_POST_NMS_TOP_N_TEST), r.FPN_POST_NMS_PER_BATCH,
        r.NMS_THRESH, r.MIN_SIZE, cfg.MODEL.ROI_RELATION_HEAD.ADD_GTBOX_TO_PROPOSAL_IN_TRAIN,
        generator)


def box_feature_extractor(cfg, in_channels, half_out=False, cat_all_levels=False):
    """SGB's ``FPN2MLPFeatureExtractor(cfg, ...)``: ``MODEL.ROI_BOX_HEAD.{POOLER_RESOLUTION,
    POOLER_SCALES, POOLER_SAMPLING_RATIO, MLP_HEAD_DIM}``."""
    head = cfg.MODEL.ROI_BOX_HEAD
    return FPN2MLPFeatureExtractor(in_channels, head.POOLER_RESOLUTION, head.POOLER_SCALES,
                                   head.POOLER_SAMPLING_RATIO, head.MLP_HEAD_DIM,
                                   half_out=half_out, cat_all_levels=cat_all_levels)


def box_sampler(cfg, generator=None):
    """SGB's ``make_roi_box_samp_processor``: ``MODEL.ROI_HEADS.{FG_IOU_THRESHOLD,
    BG_IOU_THRESHOLD, BATCH_SIZE_PER_IMAGE, POSITIVE_FRACTION, BBOX_REG_WEIGHTS}``."""
    h = cfg.MODEL.ROI_HEADS
    return BoxSampler(h.FG_IOU_THRESHOLD, h.BG_IOU_THRESHOLD, h.BATCH_SIZE_PER_IMAGE,
                      h.POSITIVE_FRACTION, h.BBOX_REG_WEIGHTS, generator)


def box_post_processor(cfg):
    """SGB's ``make_roi_box_post_processor``: ``MODEL.ROI_HEADS.{SCORE_THRESH, NMS,
    POST_NMS_PER_CLS_TOPN, NMS_FILTER_DUPLICATES, DETECTIONS_PER_IMG, BBOX_REG_WEIGHTS}``,
    ``MODEL.CLS_AGNOSTIC_BBOX_REG``, ``TEST.CUSTUM_EVAL``."""
    h = cfg.MODEL.ROI_HEADS
    return BoxPostProcessor(h.SCORE_THRESH, h.NMS, h.POST_NMS_PER_CLS_TOPN,
                            h.NMS_FILTER_DUPLICATES, h.DETECTIONS_PER_IMG,
                            BoxCoder(h.BBOX_REG_WEIGHTS), cfg.MODEL.CLS_AGNOSTIC_BBOX_REG,
                            cfg.TEST.CUSTUM_EVAL)


def build_box_head(cfg, in_channels, generator=None):
    """SGB's ``ROIBoxHead(cfg, in_channels)``: the detector's
    (:class:`~gluontrain.torch.twostage.box_head.ROIBoxHead`) or, with ``MODEL.RELATION_ON``,
    the relation mode's (:class:`.relation_box_head.RelationBoxHead`: ``USE_GT_BOX``,
    ``USE_GT_OBJECT_LABEL``, ``TEST.CUSTUM_EVAL``).

    Parameters
    ----------
    cfg : yacs.config.CfgNode
    in_channels : int
    generator : torch.Generator, optional
        For the proposal subsampling.
    """
    extractor = box_feature_extractor(cfg, in_channels, half_out=cfg.MODEL.ATTRIBUTE_ON)
    parts = (extractor,
             FPNPredictor(extractor.out_channels, cfg.MODEL.ROI_BOX_HEAD.NUM_CLASSES,
                          cfg.MODEL.CLS_AGNOSTIC_BBOX_REG),
             box_post_processor(cfg), box_sampler(cfg, generator), cfg.MODEL.CLS_AGNOSTIC_BBOX_REG)
    if not cfg.MODEL.RELATION_ON:
        return ROIBoxHead(*parts)
    rel = cfg.MODEL.ROI_RELATION_HEAD
    return RelationBoxHead(*parts, use_gt_box=rel.USE_GT_BOX,
                           use_gt_object_label=rel.USE_GT_OBJECT_LABEL,
                           custum_eval=cfg.TEST.CUSTUM_EVAL)


def detector_parts(cfg, generator=None):
    """The :class:`~gluontrain.torch.twostage.maskrcnn.SGGDetector` arguments of ``cfg``, built
    in SGB's order (backbone, RPN, box head: that of the random draws)."""
    backbone = build_backbone(cfg)
    rpn = build_rpn(cfg, backbone.out_channels, generator)
    box = build_box_head(cfg, backbone.out_channels, generator)
    return backbone, rpn, box, cfg.DATALOADER.SIZE_DIVISIBILITY


def build_detector(cfg, generator=None):
    """The sgg-detector of ``cfg`` (``MODEL.RELATION_ON`` must be False).

    Parameters
    ----------
    cfg : yacs.config.CfgNode
    generator : torch.Generator, optional
        Source of the RPN / box-head sampling draws (torch's global RNG when None, as SGB).

    Returns
    -------
    gluontrain.torch.twostage.maskrcnn.SGGDetector
    """
    if cfg.MODEL.RELATION_ON:
        raise ValueError('build_detector: MODEL.RELATION_ON is True; the relation model is '
                         'gluontrain.torch.sgg.model.build_relation_model')
    return SGGDetector(*detector_parts(cfg, generator))
