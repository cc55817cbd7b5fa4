"""maskrcnn-benchmark's FPN RPN as Scene-Graph-Benchmark configures it (SGB
``modeling/rpn/{anchor_generator, rpn, loss, inference}.py``), in plain torch.

Anchors (``generate_anchors``: one size per level, ``np.round`` of the ratio sides, ``+1``
pixel convention, location-major then anchor), ``STRADDLE_THRESH`` visibility, the
``Matcher(FG, BG, allow_low_quality_matches=True)``, the balanced sampler, BCE + smooth-L1
(beta 1/9) normalised by the sampled anchors, and the per-level top-k / NMS / FPN selection
of the post-processor.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from ...ops import nms, smooth_l1
from ..structures import BoxList, boxlist_iou, cat_boxlist
from .box_head import BELOW_LOW_THRESHOLD, BETWEEN_THRESHOLDS, match
from .box_inference import BoxCoder

__all__ = ['generate_anchors', 'AnchorGenerator', 'RPNHead', 'RPNModule']


def _mkanchors(ws, hs, x_ctr, y_ctr):
    ws, hs = ws[:, None], hs[:, None]
    return np.hstack((x_ctr - 0.5 * (ws - 1), y_ctr - 0.5 * (hs - 1),
                      x_ctr + 0.5 * (ws - 1), y_ctr + 0.5 * (hs - 1)))


def _whctrs(anchor):
    w, h = anchor[2] - anchor[0] + 1, anchor[3] - anchor[1] + 1
    return w, h, anchor[0] + 0.5 * (w - 1), anchor[1] + 0.5 * (h - 1)


def generate_anchors(stride, sizes, aspect_ratios):
    """maskrcnn-benchmark's ``generate_anchors``: the cell anchors of one level.

    Parameters
    ----------
    stride : int
    sizes : sequence of float
    aspect_ratios : sequence of float
        Height / width.

    Returns
    -------
    torch.Tensor
        ``(len(ratios) * len(sizes), 4)`` float32 ``xyxy`` anchors of the cell at the origin.
    """
    anchor = np.array([1, 1, stride, stride], dtype=np.float64) - 1
    w, h, x_ctr, y_ctr = _whctrs(anchor)
    ratios = np.asarray(aspect_ratios, dtype=np.float64)
    ws = np.round(np.sqrt(w * h / ratios))
    hs = np.round(ws * ratios)
    by_ratio = _mkanchors(ws, hs, x_ctr, y_ctr)
    scales = np.asarray(sizes, dtype=np.float64) / stride
    out = []
    for a in by_ratio:
        w, h, x_ctr, y_ctr = _whctrs(a)
        out.append(_mkanchors(w * scales, h * scales, x_ctr, y_ctr))
    return torch.from_numpy(np.vstack(out)).float()


def grid_anchors(cell, stride, height, width, device):
    """All anchors of a ``height x width`` level (shift-major, then cell anchor)."""
    xs = torch.arange(0, width * stride, step=stride, dtype=torch.float32, device=device)
    ys = torch.arange(0, height * stride, step=stride, dtype=torch.float32, device=device)
    sy, sx = torch.meshgrid(ys, xs, indexing='ij')
    sx, sy = sx.reshape(-1), sy.reshape(-1)
    shifts = torch.stack((sx, sy, sx, sy), dim=1)
    return (shifts.view(-1, 1, 4) + cell.to(device).view(1, -1, 4)).reshape(-1, 4)


class _BufferList(nn.Module):
    """Tensors registered as buffers ``0``, ``1`` ... (maskrcnn-benchmark's ``BufferList``)."""

    def __init__(self, tensors):
        super().__init__()
        for i, tensor in enumerate(tensors):
            self.register_buffer(str(i), tensor)

    def __len__(self):
        return len(self._buffers)

    def __iter__(self):
        return iter(self._buffers.values())


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
        self.cell_anchors = _BufferList([generate_anchors(s, (size,), aspect_ratios)
                                         for s, size in zip(strides, sizes)])


class RPNHead(nn.Module):
    """maskrcnn-benchmark's ``RPNHead``: 3x3 conv (``RPN_MID_CHANNEL``) + ReLU, 1x1
    ``cls_logits`` (A) and ``bbox_pred`` (4A), all N(0, 0.01) with zero bias.

    Parameters
    ----------
    in_channels, mid_channels, num_anchors : int
    """

    def __init__(self, in_channels, mid_channels, num_anchors):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, mid_channels, 3, padding=1)
        self.cls_logits = nn.Conv2d(mid_channels, num_anchors, 1)
        self.bbox_pred = nn.Conv2d(mid_channels, num_anchors * 4, 1)
        for layer in (self.conv, self.cls_logits, self.bbox_pred):
            nn.init.normal_(layer.weight, std=0.01)
            nn.init.constant_(layer.bias, 0)

    def forward(self, x):
        """Levels -> ``(objectness per level, box regression per level)``."""
        logits, reg = [], []
        for feature in x:
            t = F.relu(self.conv(feature))
            logits.append(self.cls_logits(t))
            reg.append(self.bbox_pred(t))
        return logits, reg


def _flatten(layer, channels):
    n, _, h, w = layer.shape
    return layer.view(n, -1, channels, h, w).permute(0, 3, 4, 1, 2).reshape(n, -1, channels)


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
        self.head = RPNHead(in_channels, r.RPN_MID_CHANNEL, len(r.ASPECT_RATIOS))
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
        per_level = [grid_anchors(c, s, f.shape[-2], f.shape[-1], f.device)
                     for c, s, f in zip(self.anchor_generator.cell_anchors, self.strides,
                                           features)]
        for (h, w) in image_sizes:
            levels = []
            for a in per_level:
                box = BoxList(a, (w, h), 'xyxy')
                t = self.straddle_thresh
                if t >= 0:
                    vis = ((a[:, 0] >= -t) & (a[:, 1] >= -t) & (a[:, 2] < w + t)
                           & (a[:, 3] < h + t))
                else:
                    vis = torch.ones(a.shape[0], dtype=torch.bool, device=a.device)
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
        out = []
        for p, s, anc_i in zip(props, obj, anchors):
            box = BoxList(p, anc_i.size, 'xyxy')
            box.add_field('objectness', s)
            box = box.clip_to_image(remove_empty=False)
            if self.min_size > 0:
                ws, hs = box.bbox[:, 2] - box.bbox[:, 0] + 1, box.bbox[:, 3] - box.bbox[:, 1] + 1
                box = box[(ws >= self.min_size) & (hs >= self.min_size)]
            post = self.post_nms[self.training]
            keep = nms(box.bbox, box.get_field('objectness'), self.nms_thresh, plus_one=True,
                       max_output=post if post > 0 else None)
            out.append(box[keep])
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
        matched = match(iou, self.fg_iou, self.bg_iou)
        if iou.numel():
            # allow_low_quality_matches: every anchor tied for a ground truth's best IoU
            # takes its own (pre-threshold) best match
            best, all_matches = iou.max(dim=0)
            highest = iou.max(dim=1)[0]
            preds = torch.nonzero(iou == highest[:, None])[:, 1]
            matched[preds] = all_matches[preds]
        labels = (matched >= 0).to(torch.float32)
        labels[matched == BELOW_LOW_THRESHOLD] = 0
        labels[~anchors.get_field('visibility')] = -1
        labels[matched == BETWEEN_THRESHOLDS] = -1
        if len(target):
            reg = self.box_coder.encode(target.bbox[matched.clamp(min=0)], anchors.bbox)
        else:
            reg = anchors.bbox.new_zeros(len(anchors), 4)
        return labels, reg

    def _sample(self, labels):
        pos = torch.nonzero(labels >= 1).squeeze(1)
        neg = torch.nonzero(labels == 0).squeeze(1)
        num_pos = min(int(self.batch_size * self.pos_fraction), pos.numel())
        num_neg = min(self.batch_size - num_pos, neg.numel())
        g = self.generator
        pos = pos[torch.randperm(pos.numel(), generator=g)[:num_pos].to(pos.device)]
        neg = neg[torch.randperm(neg.numel(), generator=g)[:num_neg].to(neg.device)]
        pos_mask = torch.zeros_like(labels, dtype=torch.bool)
        neg_mask = torch.zeros_like(labels, dtype=torch.bool)
        pos_mask[pos] = True
        neg_mask[neg] = True
        return pos_mask, neg_mask

    def loss(self, anchors, objectness, box_regression, targets):
        """SGB's ``RPNLossComputation``: ``(loss_objectness, loss_rpn_box_reg)``."""
        if targets is None:
            raise ValueError('RPN training needs the targets (one BoxList per image)')
        labels, regs, pos_masks, neg_masks = [], [], [], []
        for anc, tgt in zip(anchors, targets):
            anc = cat_boxlist(anc)
            lab, reg = self._labels(anc, tgt)
            p, n = self._sample(lab)
            labels.append(lab)
            regs.append(reg)
            pos_masks.append(p)
            neg_masks.append(n)
        pos = torch.nonzero(torch.cat(pos_masks)).squeeze(1)
        neg = torch.nonzero(torch.cat(neg_masks)).squeeze(1)
        sampled = torch.cat([pos, neg])
        obj = torch.cat([_flatten(o, 1) for o in objectness], dim=1).reshape(-1)
        reg = torch.cat([_flatten(b, 4) for b in box_regression], dim=1).reshape(-1, 4)
        labels, regs = torch.cat(labels), torch.cat(regs)
        loss_reg = smooth_l1(reg[pos], regs[pos], 3.).sum() / max(sampled.numel(), 1)
        loss_obj = F.binary_cross_entropy_with_logits(obj[sampled], labels[sampled])
        return loss_obj, loss_reg
