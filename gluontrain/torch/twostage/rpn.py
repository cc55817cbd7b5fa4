"""The RPN of both two-stage flavours: the shared :class:`RPNHead` (seamseg's
``modules/heads/rpn.py`` or maskrcnn-benchmark's ``RPNHead``, by its arguments), the flattening
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
from .flavours import RPN_HEAD_NAMES, add_module_at, flavour_names
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

    seamseg: ``norm_act`` after a conv without bias, ``init='xavier'`` (the activation's
    gain, 0.01 for the two outputs), zero biases. maskrcnn-benchmark: ``norm_act=None`` (conv
    with bias + ReLU), ``init='normal'`` (N(0, 0.01)), zero biases. The module names are the
    ``naming``'s (:data:`.flavours.RPN_HEAD_NAMES`).

    Parameters
    ----------
    in_channels : int
    num_anchors : int
    stride : int
    hidden_channels : int
    norm_act : callable or None
        seamseg's norm-act factory; None: ReLU.
    naming : str
        A key of :data:`.flavours.RPN_HEAD_NAMES` (module names only).
    init : {'xavier', 'normal'}
    """

    def __init__(self, in_channels, num_anchors, stride=1, hidden_channels=255,
                 norm_act=BatchNormAct, naming='seamseg', init='xavier'):
        super().__init__()
        if init not in ('xavier', 'normal'):
            raise ValueError("RPNHead: init must be 'xavier' or 'normal', got {!r}".format(init))
        self.naming, self.init = naming, init
        self.names = names = flavour_names(RPN_HEAD_NAMES, naming, 'RPNHead')
        add_module_at(self, names['conv'], nn.Conv2d(in_channels, hidden_channels, 3, padding=1,
                                                     stride=stride, bias=norm_act is None))
        self.has_norm = norm_act is not None
        if self.has_norm:
            add_module_at(self, names['norm'], norm_act(hidden_channels))
        add_module_at(self, names['obj'], nn.Conv2d(hidden_channels, num_anchors, 1))
        add_module_at(self, names['bbx'], nn.Conv2d(hidden_channels, num_anchors * 4, 1))
        self.reset_parameters()

    def _part(self, part):
        return self.get_submodule(self.names[part])

    def reset_parameters(self):
        """seamseg's (``'xavier'``) or maskrcnn-benchmark's (``'normal'``) initialisation."""
        conv, outputs = self._part('conv'), (self._part('obj'), self._part('bbx'))
        if self.init == 'normal':
            for layer in (conv,) + outputs:
                nn.init.normal_(layer.weight, std=0.01)
                nn.init.constant_(layer.bias, 0)
            return
        norm = self._part('norm') if self.has_norm else None
        nn.init.xavier_normal_(conv.weight, norm_act_gain(norm) if norm is not None else 1.)
        if conv.bias is not None:
            nn.init.constant_(conv.bias, 0)
        if norm is not None:
            norm.reset_parameters()
        for m in outputs:
            nn.init.xavier_normal_(m.weight, .01)
            nn.init.constant_(m.bias, 0)

    def forward(self, x):
        """``(N, C, H, W)`` -> ``obj_logits (N, A, H, W)``, ``bbx_logits (N, 4A, H, W)``; a
        list of levels -> the list of each (maskrcnn-benchmark's interface)."""
        if isinstance(x, (list, tuple)):
            objs, bbxs = zip(*[self(level) for level in x])
            return list(objs), list(bbxs)
        x = self._part('conv')(x)
        x = self._part('norm')(x) if self.has_norm else F.relu(x)
        return self._part('obj')(x), self._part('bbx')(x)


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
    """SGB's ``RPNModule`` for FPN (``MODEL.RPN.USE_FPN``); the arguments are SGB's
    ``MODEL.RPN`` keys (:func:`gluontrain.torch.sgg.modeling.detector.build_rpn` reads them).

    Parameters
    ----------
    in_channels : int
    strides, sizes : sequence
        ``ANCHOR_STRIDE``, ``ANCHOR_SIZES``: one per FPN level.
    aspect_ratios : sequence of float
    hidden_channels : int
        ``RPN_MID_CHANNEL``.
    straddle_thresh : float
    fg_iou, bg_iou : float
        ``FG_IOU_THRESHOLD``, ``BG_IOU_THRESHOLD``.
    batch_size : int
        ``BATCH_SIZE_PER_IMAGE``.
    pos_fraction : float
    pre_nms, post_nms, fpn_post_nms : (int, int)
        ``{PRE_NMS, POST_NMS, FPN_POST_NMS}_TOP_N_{TRAIN, TEST}``.
    fpn_post_nms_per_batch : bool
    nms_thresh, min_size : float
    add_gt : bool
        Append the ground-truth boxes to the training proposals (SGB's
        ``ADD_GTBOX_TO_PROPOSAL_IN_TRAIN``).
    generator : torch.Generator, optional
        Source of the anchor sampling permutations (torch's global RNG when None).
    """

    def __init__(self, in_channels, strides, sizes, aspect_ratios, hidden_channels,
                 straddle_thresh, fg_iou, bg_iou, batch_size, pos_fraction, pre_nms, post_nms,
                 fpn_post_nms, fpn_post_nms_per_batch, nms_thresh, min_size, add_gt=False,
                 generator=None):
        super().__init__()
        if len(strides) != len(sizes):
            raise ValueError('MODEL.RPN.ANCHOR_STRIDE {} and ANCHOR_SIZES {} must have one '
                             'entry per FPN level'.format(strides, sizes))
        self.strides = tuple(int(s) for s in strides)
        self.anchor_generator = AnchorGenerator(self.strides, sizes, aspect_ratios)
        self.head = RPNHead(in_channels, len(aspect_ratios), hidden_channels=hidden_channels,
                            norm_act=None, naming='maskrcnn', init='normal')
        self.straddle_thresh = straddle_thresh
        self.fg_iou, self.bg_iou = fg_iou, bg_iou
        self.batch_size, self.pos_fraction = batch_size, pos_fraction
        self.pre_nms = {True: pre_nms[0], False: pre_nms[1]}
        self.post_nms = {True: post_nms[0], False: post_nms[1]}
        self.fpn_post_nms = {True: fpn_post_nms[0], False: fpn_post_nms[1]}
        self.fpn_post_nms_per_batch = fpn_post_nms_per_batch
        self.nms_thresh, self.min_size = nms_thresh, min_size
        self.add_gt = add_gt
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
