"""The detector's training targets, losses, proposals and predictions, as seamseg's
``RPNAlgoFPN`` / ``RPNLoss`` / ``ProposalGenerator`` (seamseg/algos/rpn.py, fpn.py) and
``DetectionAlgoFPN`` / ``ProposalMatcher`` / ``DetectionLoss`` / ``PredictionGenerator``
(seamseg/algos/detection.py, fpn.py), built on :mod:`gluontrain.torch.ops`.

Boxes are seamseg's ``(y0, x0, y1, x1)`` in input pixels; ``valid_size`` is ``(H, W)``.
Per-image sequences hold ``None`` where seamseg's ``PackedSequence`` does.

Differences from seamseg (docs/faithfulness.md): the final detections of an image come
sorted by score (seamseg concatenates them class by class and sorts only when more than
``max_predictions`` survive; the set is the same); score ties in the proposal ``topk`` and
the NMS are broken by index (stable sorts).
"""
import torch
import torch.nn.functional as F

from ..ops import (SCALE_CLIP, classwise_nms, clip_boxes, decode, encode, match_anchors,
                   match_proposals, multilevel_roi_sampling, proposal_nms, smooth_l1,
                   subsample_anchors)

__all__ = ['RPNSettings', 'ROISettings', 'rpn_targets', 'rpn_loss', 'generate_proposals',
           'roi_targets', 'roi_features', 'predict', 'CALCULATE_SHIFT_EPS']

#: seamseg's ``calculate_shift`` clamps the reference box sizes to at least this.
CALCULATE_SHIFT_EPS = 1e-5
_UNIT = (1., 1., 1., 1.)


class RPNSettings:
    """The ``[rpn]`` numbers (seamseg's ``AnchorMatcher``, ``ProposalGenerator``, ``RPNLoss``
    and ``RPNAlgoFPN`` arguments); defaults are seamseg's ``detection.ini``.

    ``strides`` are ``[fpn] out_strides`` already sliced to the RPN levels.
    """

    def __init__(self, strides=(4, 8, 16, 32), anchor_scale=8., anchor_ratios=(1., .5, 2.),
                 nms_threshold=.7, num_pre_nms_train=12000, num_post_nms_train=2000,
                 num_pre_nms_val=6000, num_post_nms_val=300, min_size=16, num_samples=256,
                 pos_ratio=.5, pos_threshold=.7, neg_threshold=.3, void_threshold=.7,
                 sigma=3.):
        self.strides, self.anchor_scale = tuple(strides), anchor_scale
        self.anchor_ratios = tuple(anchor_ratios)
        self.nms_threshold, self.min_size = nms_threshold, min_size
        self.num_pre_nms = {True: num_pre_nms_train, False: num_pre_nms_val}
        self.num_post_nms = {True: num_post_nms_train, False: num_post_nms_val}
        self.num_samples, self.pos_ratio = num_samples, pos_ratio
        self.pos_threshold, self.neg_threshold = pos_threshold, neg_threshold
        self.void_threshold, self.sigma = void_threshold, sigma

    @classmethod
    def from_config(cls, rpn_config, fpn_config):
        """From the ``[rpn]`` and ``[fpn]`` sections, as seamseg's ``make_model``."""
        lo, n = rpn_config.getint('fpn_min_level'), rpn_config.getint('fpn_levels')
        return cls(fpn_config.getstruct('out_strides')[lo:lo + n],
                   rpn_config.getint('anchor_scale'), rpn_config.getstruct('anchor_ratios'),
                   rpn_config.getfloat('nms_threshold'), rpn_config.getint('num_pre_nms_train'),
                   rpn_config.getint('num_post_nms_train'), rpn_config.getint('num_pre_nms_val'),
                   rpn_config.getint('num_post_nms_val'), rpn_config.getint('min_size'),
                   rpn_config.getint('num_samples'), rpn_config.getfloat('pos_ratio'),
                   rpn_config.getfloat('pos_threshold'), rpn_config.getfloat('neg_threshold'),
                   rpn_config.getfloat('void_threshold'), rpn_config.getfloat('sigma'))


class ROISettings:
    """The ``[roi]`` numbers (seamseg's ``ProposalMatcher``, ``DetectionLoss``,
    ``PredictionGenerator`` and ``DetectionAlgoFPN`` arguments)."""

    def __init__(self, num_samples=128, pos_ratio=.25, pos_threshold=.5, neg_threshold_hi=.5,
                 neg_threshold_lo=0., void_threshold=.7, nms_threshold=.3, score_threshold=.05,
                 max_predictions=100, min_level=0, levels=4, canonical_scale=224,
                 canonical_level=2, roi_size=(14, 14), sigma=1.,
                 bbx_reg_weights=(10., 10., 5., 5.)):
        self.num_samples, self.pos_ratio = num_samples, pos_ratio
        self.pos_threshold, self.neg_threshold_hi = pos_threshold, neg_threshold_hi
        self.neg_threshold_lo, self.void_threshold = neg_threshold_lo, void_threshold
        self.nms_threshold, self.score_threshold = nms_threshold, score_threshold
        self.max_predictions = max_predictions
        self.min_level, self.levels = min_level, levels
        self.canonical_scale, self.canonical_level = canonical_scale, canonical_level
        self.roi_size, self.sigma = tuple(roi_size), sigma
        self.bbx_reg_weights = tuple(bbx_reg_weights)

    @classmethod
    def from_config(cls, roi_config):
        """From the ``[roi]`` section, as seamseg's ``make_model``."""
        c = roi_config
        return cls(c.getint('num_samples'), c.getfloat('pos_ratio'), c.getfloat('pos_threshold'),
                   c.getfloat('neg_threshold_hi'), c.getfloat('neg_threshold_lo'),
                   c.getfloat('void_threshold'), c.getfloat('nms_threshold'),
                   c.getfloat('score_threshold'), c.getint('max_predictions'),
                   c.getint('fpn_min_level'), c.getint('fpn_levels'),
                   c.getint('fpn_canonical_scale'), c.getint('fpn_canonical_level'),
                   c.getstruct('roi_size'), c.getfloat('sigma'), c.getstruct('bbx_reg_weights'))


def rpn_targets(anchors, bbx, crowd, valid_size, settings, generator=None):
    """Objectness and regression labels of every anchor of every image (seamseg's
    ``AnchorMatcher`` + ``_match_to_lbl``).

    Parameters
    ----------
    anchors : torch.Tensor
        ``(M, 4)``.
    bbx, crowd : sequence of (torch.Tensor or None)
        Per image ground truth and crowd boxes (:func:`.model.prepare_inputs`).
    valid_size : sequence of (int, int)
    settings : RPNSettings
    generator : torch.Generator, optional
        Source of the subsampling draws (default torch's global RNG, as seamseg).

    Returns
    -------
    obj_lbl : torch.Tensor
        ``(N, M)`` int64: 1 positive, 0 negative, -1 void.
    bbx_lbl : torch.Tensor
        ``(N, M, 4)`` ``calculate_shift`` targets of the positives (zeros elsewhere).
    """
    obj_lbl = anchors.new_full((len(bbx), anchors.shape[0]), -1, dtype=torch.long)
    bbx_lbl = anchors.new_zeros(len(bbx), anchors.shape[0], 4)
    for i, (bbx_i, crowd_i, size_i) in enumerate(zip(bbx, crowd, valid_size)):
        match = match_anchors(anchors, bbx_i, crowd_i, size_i, settings.pos_threshold,
                              settings.neg_threshold, settings.void_threshold)
        match = subsample_anchors(match, settings.num_samples, settings.pos_ratio, generator)
        pos = match >= 0
        obj_lbl[i, match == -1] = 0
        obj_lbl[i, pos] = 1
        if pos.any():
            bbx_lbl[i, pos] = encode(bbx_i[match[pos]], anchors[pos], weights=_UNIT,
                                     size_eps=CALCULATE_SHIFT_EPS)
    return obj_lbl, bbx_lbl


def rpn_loss(obj_logits, bbx_logits, obj_lbl, bbx_lbl, sigma=3.):
    """seamseg's ``RPNLoss``: BCE over the non-void anchors of the whole batch and smooth-L1
    over the positives, both summed and multiplied by ``min(1 / #non-void, 1)``.

    Parameters
    ----------
    obj_logits : torch.Tensor
        ``(N, M)``.
    bbx_logits : torch.Tensor
        ``(N, M, 4)``.
    obj_lbl, bbx_lbl : torch.Tensor
        From :func:`rpn_targets`.
    sigma : float, default 3.

    Returns
    -------
    obj_loss, bbx_loss : torch.Tensor
        0-d.
    """
    positives = obj_lbl == 1
    non_void = obj_lbl != -1
    scale = torch.clamp(1. / non_void.to(obj_logits.dtype).sum(), max=1.)
    obj_loss = F.binary_cross_entropy_with_logits(
        obj_logits, positives.to(obj_logits.dtype), non_void.to(obj_logits.dtype),
        reduction='sum') * scale
    if positives.any():
        bbx_loss = smooth_l1(bbx_logits[positives], bbx_lbl[positives], sigma).sum() * scale
    else:
        bbx_loss = bbx_logits.sum() * 0
    return obj_loss, bbx_loss


def generate_proposals(obj_logits, bbx_logits, anchors, valid_size, settings, training):
    """Proposals of every image (seamseg's ``RPNAlgoFPN._inference`` + ``ProposalGenerator``).

    Anchors shifted by the logits (``log(1000/16)`` clamp), clipped to the image; boxes with
    a side below ``min_size`` dropped; the ``num_pre_nms`` best logits kept; NMS at
    ``nms_threshold`` (IoU ``>=`` suppresses) keeping at most ``num_post_nms``.

    Parameters
    ----------
    obj_logits, bbx_logits : torch.Tensor
        ``(N, M)``, ``(N, M, 4)``.
    anchors : torch.Tensor
        ``(M, 4)``.
    valid_size : sequence of (int, int)
    settings : RPNSettings
    training : bool
        Selects the train or val counts (seamseg passes ``model.training``).

    Returns
    -------
    list of (torch.Tensor or None)
        ``(P_i, 4)`` per image, by descending objectness; ``None`` when nothing is left.
    """
    boxes = decode(bbx_logits.detach(), anchors, weights=_UNIT, scale_clip=SCALE_CLIP)
    out = []
    for bbx_i, obj_i, size_i in zip(boxes, obj_logits.detach(), valid_size):
        bbx_i, _ = proposal_nms(bbx_i, obj_i, size_i, settings.min_size, settings.nms_threshold,
                                settings.num_pre_nms[training], settings.num_post_nms[training],
                                suppress_equal=True, reference='seamseg')
        out.append(bbx_i if bbx_i.shape[0] else None)
    return out


def roi_targets(proposals, bbx, cat, crowd, num_stuff, settings, rng=None):
    """Sampled ROIs and their labels (seamseg's ``ProposalMatcher`` + ``_match_to_lbl``).

    Parameters
    ----------
    proposals, bbx, cat, crowd : sequence of (torch.Tensor or None)
        Per image.
    num_stuff : int
    settings : ROISettings
    rng : numpy.random.RandomState, optional
        Source of the sampling permutations (default NumPy's global RNG, as seamseg).

    Returns
    -------
    rois : torch.Tensor or None
        ``(S, 4)`` all images' ROIs (each image's positives first); ``None`` when no image
        has any.
    rois_idx : torch.Tensor or None
        ``(S,)`` image index.
    cls_lbl : torch.Tensor or None
        ``(S,)`` ``cat + 1 - num_stuff`` for positives, 0 for background.
    bbx_lbl : torch.Tensor or None
        ``(#positives, 4)`` ``calculate_shift`` x ``bbx_reg_weights``.
    """
    rois, idx, cls_lbl, bbx_lbl = [], [], [], []
    for i, (prop_i, bbx_i, cat_i, crowd_i) in enumerate(zip(proposals, bbx, cat, crowd)):
        if bbx_i is None and prop_i is None:
            continue
        rois_i, match_i = match_proposals(
            prop_i, bbx_i, crowd_i, settings.pos_threshold, settings.neg_threshold_hi,
            settings.neg_threshold_lo, settings.void_threshold, settings.num_samples,
            settings.pos_ratio, rng)
        if rois_i.shape[0] == 0:
            continue
        pos = match_i >= 0
        lbl = torch.zeros_like(match_i)
        if pos.any():
            lbl[pos] = cat_i[match_i[pos]] + 1 - num_stuff
            bbx_lbl.append(encode(bbx_i[match_i[pos]], rois_i[pos],
                                  weights=settings.bbx_reg_weights,
                                  size_eps=CALCULATE_SHIFT_EPS))
        rois.append(rois_i)
        idx.append(torch.full_like(match_i, i))
        cls_lbl.append(lbl)
    if not rois:
        return None, None, None, None
    bbx_lbl = torch.cat(bbx_lbl) if bbx_lbl else rois[0].new_zeros(0, 4)
    return torch.cat(rois), torch.cat(idx), torch.cat(cls_lbl), bbx_lbl


def roi_features(features, rois, rois_idx, img_size, settings):
    """ROI features of seamseg's ``DetectionAlgoFPN._head`` (level per box, ``roi_sampling``).

    Parameters
    ----------
    features : sequence of torch.Tensor
        All FPN outputs (sliced here to ``[min_level, min_level + levels)``).
    rois, rois_idx : torch.Tensor
    img_size : (int, int)
        Padded input size.
    settings : ROISettings

    Returns
    -------
    torch.Tensor
        ``(S, C, roi_h, roi_w)``.
    """
    feats = features[settings.min_level:settings.min_level + settings.levels]
    return multilevel_roi_sampling(feats, rois, rois_idx, img_size, settings.roi_size,
                                   settings.canonical_scale, settings.canonical_level,
                                   settings.min_level)


def predict(cls_logits, bbx_logits, proposals, proposals_idx, valid_size, settings):
    """Final detections (seamseg's ``DetectionAlgoFPN.inference`` after the head +
    ``PredictionGenerator``).

    Proposals shifted by ``bbx_logits / bbx_reg_weights`` per class, clipped to the image;
    softmax scores; per class, scores ``> score_threshold`` and non-empty boxes, NMS at
    ``nms_threshold`` (``>=``); the ``max_predictions`` best over the classes.

    Parameters
    ----------
    cls_logits, bbx_logits : torch.Tensor
        ``(P, thing + 1)``, ``(P, thing, 4)``.
    proposals, proposals_idx : torch.Tensor
        ``(P, 4)``, ``(P,)``.
    valid_size : sequence of (int, int)
    settings : ROISettings

    Returns
    -------
    bbx_pred, cls_pred, obj_pred : list
        Per image ``(D, 4)`` boxes, ``(D,)`` thing classes (0-based), ``(D,)`` scores, by
        descending score; ``None`` for an image without detections.
    """
    boxes = decode(bbx_logits, proposals.unsqueeze(1), weights=settings.bbx_reg_weights,
                   scale_clip=SCALE_CLIP)
    scores = torch.softmax(cls_logits, dim=1)
    num_thing = bbx_logits.shape[1]
    bbx_pred, cls_pred, obj_pred = [], [], []
    for i, size_i in enumerate(valid_size):
        sel = proposals_idx == i
        b = clip_boxes(boxes[sel], size_i).reshape(-1, 4)
        s = scores[sel][:, 1:].reshape(-1)
        c = torch.arange(num_thing, device=b.device).repeat(int(sel.sum()))
        keep = (s > settings.score_threshold) & (b[:, 2] > b[:, 0]) & (b[:, 3] > b[:, 1])
        b, s, c = b[keep], s[keep], c[keep]
        keep = _classwise_nms(b, s, c, settings.nms_threshold, settings.max_predictions)
        for out, values in zip((bbx_pred, cls_pred, obj_pred), (b, c, s)):
            out.append(values[keep] if keep.numel() else None)
    return bbx_pred, cls_pred, obj_pred


def _classwise_nms(boxes, scores, classes, threshold, max_output):
    """NMS class by class (``>=`` suppresses), then the ``max_output`` best by score (equal
    scores by increasing index).

    Equal to one :func:`~gluontrain.torch.ops.batched_nms` over the classes (tested)."""
    kept = classwise_nms(boxes, scores, classes, threshold, suppress_equal=True,
                         reference='seamseg')
    kept = torch.sort(kept)[0]
    order = torch.sort(scores[kept], descending=True, stable=True)[1]
    return kept[order][:max_output]

