"""The RPN of both two-stage flavours: the shared :class:`RPNHead` (seamseg's
``modules/heads/rpn.py`` or maskrcnn-benchmark's ``RPNHead``, by ``naming``), the flattening
of its outputs, and maskrcnn-benchmark's FPN RPN as Scene-Graph-Benchmark configures it (SGB
``modeling/rpn/{anchor_generator, rpn, loss, inference}.py``, :class:`RPNModule`).

seamseg's RPN algorithms (targets, loss, proposals) are functions in :mod:`.algos`.
maskrcnn-benchmark's: anchors (:func:`~gluontrain.torch.ops.generate_anchors`,
location-major then anchor), ``STRADDLE_THRESH`` visibility, the ``Matcher(FG, BG,
allow_low_quality_matches=True)``, the balanced sampler, BCE + smooth-L1 (beta 1/9)
normalised by the sampled anchors, and the per-level top-k / NMS / FPN selection of the
post-processor.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

from ..ops import (VOID, balanced_sample, generate_anchors, grid_anchors, maskrcnn_nms_options,
                   match_by_iou, proposal_nms, smooth_l1)
from .box_inference import BoxCoder
from .fpn import norm_act_gain
from .norm import BatchNormAct
from .structures import BoxList, boxlist_iou, cat_boxlist

__all__ = ['RPNHead', 'flatten_rpn_outputs', 'AnchorGenerator', 'RPNModule']


class AnchorGenerator(nn.Module):
    """The per-level cell anchors as maskrcnn-benchmark's ``AnchorGenerator`` holds them:
    buffers ``cell_anchors.0`` .. (so SGB's detector checkpoints, which carry them, load
    with no unexpected key; the values are :func:`generate_anchors`' and a checkpoint's
    equal them for the same ``MODEL.RPN`` settings).

    Parameters
    ----------
    strides : sequence of int
    sizes : sequence of float
        One anchor size per level.
    aspect_ratios : sequence of float
    """

    def __init__(self, strides, sizes, aspect_ratios):
        super().__init__()
        # a bare module holding buffers '0', '1' ... (maskrcnn-benchmark's BufferList)
        self.cell_anchors = nn.Module()
        for i, (s, size) in enumerate(zip(strides, sizes)):
            self.cell_anchors.register_buffer(str(i), generate_anchors(s, (size,), aspect_ratios))


class RPNHead(nn.Module):
    """3x3 conv + activation, then 1x1 objectness (A channels) and box (4A) convs.

    ``'seamseg'``: ``conv1`` (no bias) + ``bn1`` norm-act, ``conv_obj``, ``conv_bbx``;
    Xavier-normal (the activation's gain, 0.01 for the two outputs), zero biases.
    ``'maskrcnn'``: ``conv`` + ReLU, ``cls_logits``, ``bbox_pred``; N(0, 0.01), zero biases.

    Parameters
    ----------
    in_channels : int
    num_anchors : int
    stride : int
    hidden_channels : int
    norm_act : callable
        seamseg's norm-act factory (``'seamseg'`` only).
    naming : {'seamseg', 'maskrcnn'}
    """

    def __init__(self, in_channels, num_anchors, stride=1, hidden_channels=255,
                 norm_act=BatchNormAct, naming='seamseg'):
        super().__init__()
        self.naming = naming
        if naming == 'maskrcnn':
            self.conv = nn.Conv2d(in_channels, hidden_channels, 3, padding=1)
            self.cls_logits = nn.Conv2d(hidden_channels, num_anchors, 1)
            self.bbox_pred = nn.Conv2d(hidden_channels, num_anchors * 4, 1)
            for layer in (self.conv, self.cls_logits, self.bbox_pred):
                nn.init.normal_(layer.weight, std=0.01)
                nn.init.constant_(layer.bias, 0)
            return
        self.conv1 = nn.Conv2d(in_channels, hidden_channels, 3, padding=1, stride=stride,
                               bias=False)
        self.bn1 = norm_act(hidden_channels)
        self.conv_obj = nn.Conv2d(hidden_channels, num_anchors, 1)
        self.conv_bbx = nn.Conv2d(hidden_channels, num_anchors * 4, 1)
        self.reset_parameters()

    def reset_parameters(self):
        """seamseg's RPN head initialisation (maskrcnn-benchmark's is done when built)."""
        if self.naming != 'seamseg':
            return
        nn.init.xavier_normal_(self.conv1.weight, norm_act_gain(self.bn1))
        self.bn1.reset_parameters()
        for m in (self.conv_obj, self.conv_bbx):
            nn.init.xavier_normal_(m.weight, .01)
            nn.init.constant_(m.bias, 0)

    def forward(self, x):
        """``(N, C, H, W)`` -> ``obj_logits (N, A, H, W)``, ``bbx_logits (N, 4A, H, W)``; a
        list of levels -> the list of each (maskrcnn-benchmark's interface)."""
        if isinstance(x, (list, tuple)):
            objs, bbxs = zip(*[self(level) for level in x])
            return list(objs), list(bbxs)
        if self.naming == 'maskrcnn':
            x = F.relu(self.conv(x))
            return self.cls_logits(x), self.bbox_pred(x)
        x = self.bn1(self.conv1(x))
        return self.conv_obj(x), self.conv_bbx(x)


def _flatten(layer, channels):
    """``(N, A * channels, H, W)`` -> ``(N, H * W * A, channels)``, anchors row-major over
    (y, x), then anchor."""
    n, _, h, w = layer.shape
    return layer.view(n, -1, channels, h, w).permute(0, 3, 4, 1, 2).reshape(n, -1, channels)


def flatten_rpn_outputs(head, features):
    """Run the shared RPN head on every level and flatten as seamseg's ``_get_logits``
    (anchors row-major over (y, x), then over ratios).

    Parameters
    ----------
    head : RPNHead
    features : list of torch.Tensor

    Returns
    -------
    obj_logits : torch.Tensor
        ``(N, sum_l H_l W_l A)``.
    bbx_logits : torch.Tensor
        ``(N, sum_l H_l W_l A, 4)``.
    sizes : list of (int, int)
        ``(H_l, W_l)`` per level.
    """
    objs, bbxs, sizes = [], [], []
    for x in features:
        obj, bbx = head(x)
        sizes.append(tuple(int(s) for s in obj.shape[-2:]))
        objs.append(_flatten(obj, 1).reshape(obj.size(0), -1))
        bbxs.append(_flatten(bbx, 4))
    return torch.cat(objs, 1), torch.cat(bbxs, 1), sizes


class RPNModule(nn.Module):
    """SGB's ``RPNModule`` for FPN (``MODEL.RPN.USE_FPN``).

    Parameters
    ----------
    cfg : yacs.config.CfgNode
        ``MODEL.RPN.{ANCHOR_SIZES, ANCHOR_STRIDE, ASPECT_RATIOS, STRADDLE_THRESH,
        RPN_MID_CHANNEL, FG_IOU_THRESHOLD, BG_IOU_THRESHOLD, BATCH_SIZE_PER_IMAGE,
        POSITIVE_FRACTION, PRE_NMS_TOP_N_TRAIN/TEST, POST_NMS_TOP_N_TRAIN/TEST, NMS_THRESH,
        MIN_SIZE, FPN_POST_NMS_TOP_N_TRAIN/TEST, FPN_POST_NMS_PER_BATCH}``,
        ``MODEL.ROI_RELATION_HEAD.ADD_GTBOX_TO_PROPOSAL_IN_TRAIN``.
    in_channels : int
    generator : torch.Generator, optional
        Source of the anchor sampling permutations (torch's global RNG when None).
    """

    def __init__(self, cfg, in_channels, generator=None):
        super().__init__()
        r = cfg.MODEL.RPN
        if len(r.ANCHOR_STRIDE) != len(r.ANCHOR_SIZES):
            raise ValueError('MODEL.RPN.ANCHOR_STRIDE {} and ANCHOR_SIZES {} must have one '
                             'entry per FPN level'.format(r.ANCHOR_STRIDE, r.ANCHOR_SIZES))
        self.strides = tuple(int(s) for s in r.ANCHOR_STRIDE)
        self.anchor_generator = AnchorGenerator(self.strides, r.ANCHOR_SIZES, r.ASPECT_RATIOS)
        self.head = RPNHead(in_channels, len(r.ASPECT_RATIOS),
                            hidden_channels=r.RPN_MID_CHANNEL, naming='maskrcnn')
        self.straddle_thresh = r.STRADDLE_THRESH
        self.fg_iou, self.bg_iou = r.FG_IOU_THRESHOLD, r.BG_IOU_THRESHOLD
        self.batch_size, self.pos_fraction = r.BATCH_SIZE_PER_IMAGE, r.POSITIVE_FRACTION
        self.pre_nms = {True: r.PRE_NMS_TOP_N_TRAIN, False: r.PRE_NMS_TOP_N_TEST}
        self.post_nms = {True: r.POST_NMS_TOP_N_TRAIN, False: r.POST_NMS_TOP_N_TEST}
        self.fpn_post_nms = {True: r.FPN_POST_NMS_TOP_N_TRAIN, False: r.FPN_POST_NMS_TOP_N_TEST}
        self.fpn_post_nms_per_batch = r.FPN_POST_NMS_PER_BATCH
        self.nms_thresh, self.min_size = r.NMS_THRESH, r.MIN_SIZE
        self.add_gt = cfg.MODEL.ROI_RELATION_HEAD.ADD_GTBOX_TO_PROPOSAL_IN_TRAIN
        self.box_coder = BoxCoder((1., 1., 1., 1.))
        self.generator = generator

    def anchors(self, image_sizes, features):
        """Per image, per level ``BoxList`` of anchors with a ``visibility`` field."""
        out = []
        cells = self.anchor_generator.cell_anchors.buffers()
        per_level = [grid_anchors(c, s, f.shape[-2], f.shape[-1], device=f.device,
                                  layout='xy')
                     for c, s, f in zip(cells, self.strides, features)]
        t = self.straddle_thresh
        for (h, w) in image_sizes:
            levels = []
            for a in per_level:
                box = BoxList(a, (w, h), 'xyxy')
                vis = ((a[:, 0] >= -t) & (a[:, 1] >= -t) & (a[:, 2] < w + t) & (a[:, 3] < h + t)
                       if t >= 0 else torch.ones(a.shape[0], dtype=torch.bool, device=a.device))
                box.add_field('visibility', vis)
                levels.append(box)
            out.append(levels)
        return out

    def forward(self, image_sizes, features, targets=None):
        """-> ``(proposals, losses)``.

        Parameters
        ----------
        image_sizes : list of (int, int)
            ``(height, width)`` of each image before padding (``ImageList.image_sizes``).
        features : list of torch.Tensor
            FPN levels, finest first (as many as ``ANCHOR_STRIDE``).
        targets : list of BoxList, optional
            Needed in training.
        """
        features = list(features[:len(self.strides)])
        objectness, box_regression = self.head(features)
        anchors = self.anchors(image_sizes, features)
        with torch.no_grad():
            boxes = self.select(anchors, objectness, box_regression, targets)
        if not self.training:
            return boxes, {}
        loss_obj, loss_reg = self.loss(anchors, objectness, box_regression, targets)
        return boxes, {'loss_objectness': loss_obj, 'loss_rpn_box_reg': loss_reg}

    # -- inference ----------------------------------------------------------------------
    def _single_level(self, anchors, objectness, box_regression):
        n, a, h, w = objectness.shape
        obj = _flatten(objectness, 1).view(n, -1).sigmoid()
        reg = _flatten(box_regression, 4)
        k = min(self.pre_nms[self.training], a * h * w)
        obj, idx = obj.topk(k, dim=1, sorted=True)
        batch = torch.arange(n, device=obj.device)[:, None]
        reg = reg[batch, idx]
        anc = torch.stack([x.bbox for x in anchors])[batch, idx]
        props = self.box_coder.decode(reg.reshape(-1, 4), anc.reshape(-1, 4)).view(n, -1, 4)
        post = self.post_nms[self.training]
        out = []
        for p, s, anc_i in zip(props, obj, anchors):
            # float32 first, as SGB's BoxList holds the boxes (half under autocast)
            p, s = proposal_nms(p.float(), s, anc_i.size, self.min_size, self.nms_thresh,
                                post_nms=post if post > 0 else None,
                                **maskrcnn_nms_options(p.device))
            out.append(BoxList(p, anc_i.size, 'xyxy'))
            out[-1].add_field('objectness', s)
        return out

    def select(self, anchors, objectness, box_regression, targets=None):
        """SGB's ``RPNPostProcessor.forward`` (list of BoxList with ``objectness``)."""
        per_level = [self._single_level([a[lvl] for a in anchors], o, b)
                     for lvl, (o, b) in enumerate(zip(objectness, box_regression))]
        boxlists = [cat_boxlist(list(b)) for b in zip(*per_level)]
        if len(objectness) > 1:
            boxlists = self._select_over_all_levels(boxlists)
        if self.training and targets is not None and self.add_gt:
            gts = []
            for b, t in zip(boxlists, targets):
                gt = t.copy_with_fields([])
                gt.add_field('objectness', torch.ones(len(gt), device=b.bbox.device))
                gts.append(cat_boxlist([b, gt]))
            boxlists = gts
        return boxlists

    def _select_over_all_levels(self, boxlists):
        top = self.fpn_post_nms[self.training]
        if self.training and self.fpn_post_nms_per_batch:
            obj = torch.cat([b.get_field('objectness') for b in boxlists])
            _, idx = torch.topk(obj, min(top, obj.numel()), dim=0, sorted=True)
            mask = torch.zeros_like(obj, dtype=torch.bool)
            mask[idx] = True
            return [b[m] for b, m in zip(boxlists, mask.split([len(b) for b in boxlists]))]
        out = []
        for b in boxlists:
            obj = b.get_field('objectness')
            _, idx = torch.topk(obj, min(top, obj.numel()), dim=0, sorted=True)
            out.append(b[idx])
        return out

    # -- training -----------------------------------------------------------------------
    def _labels(self, anchors, target):
        iou = boxlist_iou(target, anchors)
        matched = match_by_iou(iou, self.fg_iou, self.bg_iou, allow_low_quality=True)
        labels = (matched >= 0).to(torch.float32)
        labels[(matched == VOID) | ~anchors.get_field('visibility')] = -1
        return labels, self.box_coder.encode_matched(target.bbox, matched, anchors.bbox)

    def loss(self, anchors, objectness, box_regression, targets):
        """SGB's ``RPNLossComputation``: ``(loss_objectness, loss_rpn_box_reg)``."""
        if targets is None:
            raise ValueError('RPN training needs the targets (one BoxList per image)')
        labels, regs, pos_masks, neg_masks = [], [], [], []
        for anc, tgt in zip(anchors, targets):
            lab, reg = self._labels(cat_boxlist(anc), tgt)
            p, n = balanced_sample(lab, self.batch_size, self.pos_fraction, self.generator)
            for out, value in zip((labels, regs, pos_masks, neg_masks), (lab, reg, p, n)):
                out.append(value)
        pos = torch.nonzero(torch.cat(pos_masks)).squeeze(1)
        neg = torch.nonzero(torch.cat(neg_masks)).squeeze(1)
        sampled = torch.cat([pos, neg])
        obj = torch.cat([_flatten(o, 1) for o in objectness], dim=1).reshape(-1)
        reg = torch.cat([_flatten(b, 4) for b in box_regression], dim=1).reshape(-1, 4)
        labels, regs = torch.cat(labels), torch.cat(regs)
        loss_reg = smooth_l1(reg[pos], regs[pos], 3.).sum() / max(sampled.numel(), 1)
        loss_obj = F.binary_cross_entropy_with_logits(obj[sampled], labels[sampled])
        return loss_obj, loss_reg
