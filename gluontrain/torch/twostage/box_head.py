"""The ROI box heads of the two-stage flavours: seamseg's FPN ROI head (:class:`FPNROIHead`,
``seamseg/modules/heads/fpn.py``; its algorithms are in :mod:`.algos`) and maskrcnn-benchmark's
FPN box head as Scene-Graph-Benchmark uses it (:class:`ROIBoxHead`; SGB ``modeling/poolers.py``,
``roi_heads/box_head/{roi_box_feature_extractors, roi_box_predictors, sampling, loss,
box_head}.py``). Every part takes plain arguments (the scene-graph recipe reads them from its
config in :mod:`gluontrain.torch.sgg.modeling.detector`).

- :class:`Pooler` -- ROIAlign on each box's ``LevelMapper`` level, or on all levels
  concatenated and reduced by a 3x3 conv (``cat_all_levels``, the union features);
- :class:`FPN2MLPFeatureExtractor` -- pooler + ``fc6``/``fc7`` (``MLP_HEAD_DIM``, ReLU);
- :class:`FPNPredictor` -- ``cls_score`` and class-specific ``bbox_pred``;
- :class:`BoxSampler` -- ``Matcher`` + ``BalancedPositiveNegativeSampler`` (detector
  training) and ``assign_label_to_proposals`` (SGDet);
- :func:`box_loss` -- ``FastRCNNLossComputation``;
- :class:`ROIBoxHead` -- the detector's box head (its relation mode is the scene-graph
  recipe's, :mod:`gluontrain.torch.sgg.modeling.relation_box_head`).
"""
from collections import OrderedDict

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..ops import (VOID, balanced_sample, fast_rcnn_loss, match_by_iou, multilevel_roi_align,
                   roi_align)
from .box_inference import BoxCoder
from .fpn import norm_act_gain
from .norm import NORM_LAYERS, BatchNormAct
from .structures import boxlist_iou

__all__ = ['Pooler', 'make_fc', 'FPN2MLPFeatureExtractor', 'FPNPredictor', 'BoxSampler',
           'box_loss', 'ROIBoxHead', 'FPNROIHead', 'add_predict_logits']


def make_fc(dim_in, hidden_dim):
    """maskrcnn-benchmark's ``make_fc`` (no GN): ``kaiming_uniform_(a=1)`` weight, zero bias.

    Parameters
    ----------
    dim_in, hidden_dim : int

    Returns
    -------
    nn.Linear
    """
    fc = nn.Linear(dim_in, hidden_dim)
    nn.init.kaiming_uniform_(fc.weight, a=1)
    nn.init.constant_(fc.bias, 0)
    return fc


def _rois(boxes):
    """Concatenated ``xyxy`` boxes and image index of a list of BoxList."""
    bbox = torch.cat([b.convert('xyxy').bbox for b in boxes], dim=0)
    idx = torch.cat([torch.full((len(b),), i, dtype=torch.long, device=bbox.device)
                     for i, b in enumerate(boxes)])
    return bbox, idx


class Pooler(nn.Module):
    """maskrcnn-benchmark's ``Pooler`` (SGB's, with ``cat_all_levels``).

    Parameters
    ----------
    output_size : (int, int)
    scales : sequence of float
        ``1 / stride`` of each level, finest first.
    sampling_ratio : int
    in_channels : int
        Channels of each level (only used with ``cat_all_levels``).
    cat_all_levels : bool
        Pool every box on every level and reduce the concatenation with conv3x3 + ReLU
        (``make_conv3x3(kaiming_init=True)``: ``kaiming_normal_(fan_out, relu)``, zero bias).
    """

    def __init__(self, output_size, scales, sampling_ratio, in_channels=512,
                 cat_all_levels=False):
        super().__init__()
        self.output_size = tuple(output_size)
        self.scales = tuple(float(s) for s in scales)
        self.sampling_ratio = sampling_ratio  # roi_align refuses a non-integer ratio
        self.cat_all_levels = cat_all_levels
        if cat_all_levels:
            conv = nn.Conv2d(in_channels * len(self.scales), in_channels, 3, padding=1)
            nn.init.kaiming_normal_(conv.weight, mode='fan_out', nonlinearity='relu')
            nn.init.constant_(conv.bias, 0)
            self.reduce_channel = nn.Sequential(conv, nn.ReLU(inplace=True))

    def forward(self, x, boxes):
        """``x`` feature levels (finest first), ``boxes`` list of BoxList -> ``(K, C, h, w)``."""
        rois, idx = _rois(boxes)
        if rois.shape[0] == 0:
            raise ValueError('Pooler: no boxes to pool (maskrcnn-benchmark asserts the same)')
        feats = list(x[:len(self.scales)])
        if self.cat_all_levels:
            out = torch.cat([roi_align(f, rois, idx, self.output_size, s, self.sampling_ratio)
                             for f, s in zip(feats, self.scales)], dim=1)
            return self.reduce_channel(out)
        return multilevel_roi_align(feats, rois, idx, self.scales, self.output_size,
                                    self.sampling_ratio)


class FPN2MLPFeatureExtractor(nn.Module):
    """SGB's ``FPN2MLPFeatureExtractor``: pooler, flatten, ``relu(fc6)``, ``relu(fc7)``.

    Parameters
    ----------
    in_channels : int
    resolution : int
        Pooled size (SGB's ``POOLER_RESOLUTION``).
    scales : sequence of float
        ``POOLER_SCALES``.
    sampling_ratio : int
        ``POOLER_SAMPLING_RATIO``.
    rep : int
        ``fc6`` width (``MLP_HEAD_DIM``).
    half_out : bool
        ``fc7`` outputs ``int(rep / 2)`` (attribute mode).
    cat_all_levels : bool
    """

    def __init__(self, in_channels, resolution, scales, sampling_ratio, rep, half_out=False,
                 cat_all_levels=False):
        super().__init__()
        res = resolution
        self.pooler = Pooler((res, res), scales, sampling_ratio, in_channels=in_channels,
                             cat_all_levels=cat_all_levels)
        input_size = in_channels * res ** 2
        self.fc6 = make_fc(input_size, rep)
        out_dim = int(rep / 2) if half_out else rep
        self.fc7 = make_fc(rep, out_dim)
        self.resize_channels = input_size
        self.out_channels = out_dim

    def forward(self, x, proposals):
        """Features ``(K, out_channels)`` of the boxes of ``proposals``."""
        return self.forward_without_pool(self.pooler(x, proposals))

    def forward_without_pool(self, x):
        """``fc6``/``fc7`` on already pooled ``(K, C, h, w)`` features."""
        x = x.reshape(x.size(0), -1)
        return F.relu(self.fc7(F.relu(self.fc6(x))))


class FPNPredictor(nn.Module):
    """maskrcnn-benchmark's ``FPNPredictor``: ``cls_score`` (std 0.01) and ``bbox_pred``
    (``num_classes x 4``, or 2 x 4 class-agnostic; std 0.001), zero biases.

    Parameters
    ----------
    in_channels : int
    num_classes : int
        With the background.
    cls_agnostic : bool
        ``CLS_AGNOSTIC_BBOX_REG``.
    """

    def __init__(self, in_channels, num_classes, cls_agnostic=False):
        super().__init__()
        reg = 2 if cls_agnostic else num_classes
        self.cls_score = nn.Linear(in_channels, num_classes)
        self.bbox_pred = nn.Linear(in_channels, reg * 4)
        nn.init.normal_(self.cls_score.weight, std=0.01)
        nn.init.normal_(self.bbox_pred.weight, std=0.001)
        for lin in (self.cls_score, self.bbox_pred):
            nn.init.constant_(lin.bias, 0)

    def forward(self, x):
        """-> ``(class_logits (K, C), box_regression (K, 4 C'))``."""
        x = x.reshape(x.size(0), -1)
        return self.cls_score(x), self.bbox_pred(x)


class BoxSampler:
    """SGB's ``FastRCNNSampling`` (``Matcher(fg_iou, bg_iou)`` +
    ``BalancedPositiveNegativeSampler(batch_size, pos_fraction)`` + ``BoxCoder(weights)``).

    Parameters
    ----------
    fg_iou, bg_iou : float
        ``FG_IOU_THRESHOLD``, ``BG_IOU_THRESHOLD``.
    batch_size : int
        ``BATCH_SIZE_PER_IMAGE``.
    pos_fraction : float
        ``POSITIVE_FRACTION``.
    weights : sequence of 4 float
        ``BBOX_REG_WEIGHTS``.
    generator : torch.Generator, optional
        Source of the sampling permutations (torch's global RNG when None, as SGB).
    """

    def __init__(self, fg_iou, bg_iou, batch_size, pos_fraction, weights, generator=None):
        self.fg_iou, self.bg_iou = fg_iou, bg_iou
        self.batch_size, self.pos_fraction = batch_size, pos_fraction
        self.box_coder = BoxCoder(weights)
        self.generator = generator

    def _label(self, proposal, target, void=True):
        """Match ``proposal`` to ``target`` and attach the matched ``labels`` (and
        ``attributes``): 0 below ``BG_IOU_THRESHOLD``, -1 between the thresholds with
        ``void`` (``subsample``), else 0 for every unmatched proposal (SGDet's
        ``matched_idxs < 0``). Returns the matches."""
        matched = match_by_iou(boxlist_iou(target, proposal), self.fg_iou, self.bg_iou)
        tgt = matched.clamp(min=0)
        labels = target.get_field('labels').long()[tgt] if len(target) else \
            matched.new_zeros(len(proposal))
        labels[matched < 0] = 0
        if void:
            labels[matched == VOID] = -1
        proposal.add_field('labels', labels)
        if target.has_field('attributes') and len(target):
            attrs = target.get_field('attributes').long()[tgt]
            attrs[matched < 0] = 0
            proposal.add_field('attributes', attrs)
        return matched

    def subsample(self, proposals, targets):
        """Label, encode and subsample the proposals of each image (SGB ``subsample``).

        Returns
        -------
        list of BoxList
            Sampled proposals with ``labels``, ``regression_targets``, ``matched_idxs``
            (and ``attributes`` when the targets have them).
        """
        out = []
        for proposal, target in zip(proposals, targets):
            matched = self._label(proposal, target)
            proposal.add_field('regression_targets', self.box_coder.encode_matched(
                target.bbox, matched, proposal.bbox))
            proposal.add_field('matched_idxs', matched)
            out.append(proposal[self._balanced(proposal.get_field('labels'))])
        return out

    def _balanced(self, labels):
        """``BalancedPositiveNegativeSampler`` for one image: kept indices, positives first
        in index order as ``nonzero(pos | neg)`` gives them."""
        pos, neg = balanced_sample(labels, self.batch_size, self.pos_fraction, self.generator)
        return torch.nonzero(pos | neg).squeeze(1)

    def assign_label_to_proposals(self, proposals, targets):
        """SGDet: ``labels`` (and ``attributes``) of the matched ground truth, 0 for
        proposals below ``FG_IOU_THRESHOLD`` (SGB's ``matched_idxs < 0``)."""
        for proposal, target in zip(proposals, targets):
            self._label(proposal, target, void=False)
        return proposals


def box_loss(class_logits, box_regression, proposals, cls_agnostic=False):
    """SGB's ``FastRCNNLossComputation``: mean cross-entropy over the sampled proposals;
    smooth-L1 (beta 1) of the positives' class deltas, summed and divided by the number of
    sampled proposals.

    Parameters
    ----------
    class_logits : torch.Tensor
        ``(K, C)``.
    box_regression : torch.Tensor
        ``(K, 4 C)`` (or ``(K, 8)`` class-agnostic).
    proposals : list of BoxList
        With ``labels`` and ``regression_targets``.
    cls_agnostic : bool

    Returns
    -------
    loss_classifier, loss_box_reg : torch.Tensor
    """
    labels = torch.cat([p.get_field('labels') for p in proposals]).long()
    targets = torch.cat([p.get_field('regression_targets') for p in proposals])
    # without the background column (class-agnostic: column 1 for every class)
    deltas = box_regression.reshape(labels.numel(), box_regression.shape[1] // 4, 4)[:, 1:]
    if cls_agnostic:
        deltas = deltas.expand(-1, class_logits.shape[1] - 1, 4)
    return fast_rcnn_loss(class_logits, deltas, labels, targets[labels > 0], 1.)


def add_predict_logits(proposals, class_logits):
    """Attach each image's slice of ``class_logits`` as ``predict_logits``."""
    start = 0
    for p in proposals:
        p.add_field('predict_logits', class_logits[start:start + len(p)])
        start += len(p)
    return proposals


class ROIBoxHead(nn.Module):
    """maskrcnn-benchmark's FPN box head (SGB's ``ROIBoxHead``, detector mode):
    ``feature_extractor``, ``predictor``, ``post_processor``. Training subsamples the
    proposals and returns ``loss_classifier`` / ``loss_box_reg``; evaluation post-processes
    into detections.

    Parameters
    ----------
    feature_extractor : FPN2MLPFeatureExtractor
    predictor : FPNPredictor
    post_processor : BoxPostProcessor
    sampler : BoxSampler
    cls_agnostic : bool
        Class-agnostic box regression (the loss).
    """

    def __init__(self, feature_extractor, predictor, post_processor, sampler,
                 cls_agnostic=False):
        super().__init__()
        self.feature_extractor = feature_extractor
        self.predictor = predictor
        self.post_processor = post_processor
        self.samp_processor = sampler
        self.cls_agnostic = cls_agnostic

    def forward(self, features, proposals=None, targets=None):
        """-> ``(x, proposals_or_detections, losses)`` as SGB's ``ROIBoxHead.forward``."""
        if self.training:
            with torch.no_grad():
                proposals = self.samp_processor.subsample(proposals, targets)
        x = self.feature_extractor(features, proposals)
        class_logits, box_regression = self.predictor(x)
        if not self.training:
            x, result = self.post_processor((x, class_logits, box_regression), proposals)
            return x, result, {}
        loss_cls, loss_reg = box_loss(class_logits, box_regression, proposals,
                                      self.cls_agnostic)
        return x, proposals, {'loss_classifier': loss_cls, 'loss_box_reg': loss_reg}


class FPNROIHead(nn.Module):
    """seamseg's FPN ROI head (``FPNROIHead``): ROI features ``(S, C, h, w)`` -> 2x2 average
    pool -> ``fc.fc1`` + norm-act -> ``fc.fc2`` + norm-act -> ``roi_cls`` (thing + 1) and
    ``roi_bbx`` (thing x 4); Xavier-normal (the norm's gain, 0.01 for ``roi_cls``, 0.001 for
    ``roi_bbx``), norm scale 1, zero biases.

    Parameters
    ----------
    in_channels : int
    classes : dict
        ``{'total', 'stuff', 'thing'}`` counts.
    roi_size : (int, int)
    hidden_channels : int
    norm_act : callable
    """

    def __init__(self, in_channels, classes, roi_size, hidden_channels=1024,
                 norm_act=BatchNormAct):
        super().__init__()
        self.fc = nn.Sequential(OrderedDict([
            ('fc1', nn.Linear(int(roi_size[0] * roi_size[1] * in_channels / 4),
                              hidden_channels, bias=False)),
            ('bn1', norm_act(hidden_channels)),
            ('fc2', nn.Linear(hidden_channels, hidden_channels, bias=False)),
            ('bn2', norm_act(hidden_channels))]))
        self.roi_cls = nn.Linear(hidden_channels, classes['thing'] + 1)
        self.roi_bbx = nn.Linear(hidden_channels, classes['thing'] * 4)
        self.reset_parameters()

    def reset_parameters(self):
        """seamseg's ROI head initialisation."""
        gain = norm_act_gain(self.fc.bn1)
        for name, mod in self.named_modules():
            if isinstance(mod, nn.Linear):
                g = .01 if 'roi_cls' in name else (.001 if 'roi_bbx' in name else gain)
                nn.init.xavier_normal_(mod.weight, g)
            elif isinstance(mod, NORM_LAYERS) and mod.weight is not None:
                nn.init.constant_(mod.weight, 1.)
            if getattr(mod, 'bias', None) is not None:
                nn.init.constant_(mod.bias, 0.)

    def forward(self, features):
        """Pooled ROI features -> ``cls_logits (S, thing + 1)``, ``bbx_logits (S, thing, 4)``."""
        x = F.avg_pool2d(features, 2)
        x = self.fc(x.reshape(x.size(0), -1))
        return self.roi_cls(x), self.roi_bbx(x).view(x.size(0), -1, 4)
