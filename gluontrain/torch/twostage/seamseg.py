"""The seamseg flavour of the two-stage detector, as seamseg's ``DetectionNet``
(``seamseg/models/detection.py``).

``DetectionNet`` holds seamseg's three snapshot modules, ``body`` (:class:`~.fpn.FPNBody`:
ResNet + FPN), ``rpn_head`` (:class:`~.rpn.RPNHead`) and ``roi_head``
(:class:`~.box_head.FPNROIHead`). :meth:`DetectionNet.forward` is seamseg's
``DetectionNet.forward`` (losses and predictions, :mod:`.algos`);
:meth:`DetectionNet.head_outputs` runs the network up to the raw head outputs.
"""
from collections import OrderedDict

import torch
import torch.nn as nn

from ..ops import fast_rcnn_loss, fpn_anchors
from . import algos
from .images import pad_images
from .rpn import flatten_rpn_outputs

__all__ = ['DetectionNet', 'prepare_inputs']


def prepare_inputs(cat, iscrowd, bbx, num_stuff):
    """seamseg's ``DetectionNet._prepare_inputs``: per image, the ground truth of the
    detector and the crowd regions it treats as void.

    Things are ``num_stuff <= cat != 255``. Per image: ``cat`` and ``bbx`` of the non-crowd
    things (``None`` when there are none) and the boxes of the crowd things (``None`` when
    there are none). seamseg computes ``thing & ~iscrowd`` on uint8 (``~1 = 254``, correct only
    by way of the ``& 1``) and returns an empty crowd tensor when only stuff is crowd; here the
    masks are boolean and that case is ``None``.

    Parameters
    ----------
    cat, iscrowd, bbx : sequence of torch.Tensor
        Per image: ``(K,)`` classes, ``(K,)`` crowd flags, ``(K, 4)`` boxes.
    num_stuff : int

    Returns
    -------
    tuple of list
        ``(cat, crowd_bbx, bbx)`` per image, entries a tensor or ``None``.
    """
    cat_out, crowd_out, bbx_out = [], [], []
    for cat_i, crowd_i, bbx_i in zip(cat, iscrowd, bbx):
        thing = (cat_i >= num_stuff) & (cat_i != 255)
        crowd_i = crowd_i.bool()
        valid = thing & ~crowd_i
        cat_out.append(cat_i[valid] if valid.any() else None)
        bbx_out.append(bbx_i[valid] if valid.any() else None)
        crowd_thing = crowd_i & thing
        crowd_out.append(bbx_i[crowd_thing] if crowd_thing.any() else None)
    return cat_out, crowd_out, bbx_out


class DetectionNet(nn.Module):
    """``body`` + ``rpn_head`` + ``roi_head`` (seamseg's module and snapshot names).

    Parameters
    ----------
    body : FPNBody
    rpn_head : RPNHead
    roi_head : FPNROIHead
    classes : dict
        ``{'total', 'stuff', 'thing'}``.
    rpn_levels : (int, int)
        ``(fpn_min_level, fpn_levels)`` of ``[rpn]``.
    rpn_settings : algos.RPNSettings, optional
        Default: seamseg's defaults.
    roi_settings : algos.ROISettings, optional
        Default: seamseg's defaults.
    """

    def __init__(self, body, rpn_head, roi_head, classes, rpn_levels=(0, 4), rpn_settings=None,
                 roi_settings=None):
        super().__init__()
        self.num_stuff = classes['stuff']
        self.classes = dict(classes)
        self.rpn_levels = tuple(rpn_levels)
        self.rpn_settings = rpn_settings or algos.RPNSettings()
        self.roi_settings = roi_settings or algos.ROISettings()
        self.body = body
        self.rpn_head = rpn_head
        self.roi_head = roi_head

    def forward(self, img, cat=None, iscrowd=None, bbx=None, do_loss=False, do_prediction=True):
        """seamseg's ``DetectionNet.forward``.

        With ``do_loss``: anchor targets and the RPN losses, proposals (train or val counts
        by ``self.training``), sampled ROIs with the ground truth prepended and the ROI
        losses. With ``do_prediction``: detections of the proposals (those of the loss pass
        when ``do_loss``, else the RPN's inference). Random draws use torch's (anchors) and
        NumPy's (ROIs) global generators, as seamseg.

        Parameters
        ----------
        img : torch.Tensor or sequence of torch.Tensor
            ``(N, 3, H, W)`` or the images to pad.
        cat, iscrowd, bbx : sequence of torch.Tensor, optional
            Per image classes, crowd flags and ``(y0, x0, y1, x1)`` boxes (needed with
            ``do_loss``).
        do_loss, do_prediction : bool

        Returns
        -------
        losses : OrderedDict
            ``obj_loss, bbx_loss, roi_cls_loss, roi_bbx_loss`` (0-d tensors, ``None``
            without ``do_loss``).
        pred : OrderedDict
            ``bbx_pred, cls_pred, obj_pred``: per image lists (``None`` entries for images
            without detections; the values ``None`` without ``do_prediction``).
        """
        out = self.head_outputs(img)
        feats, valid_size, img_size = out['features'], out['valid_size'], out['img_size']
        obj_logits, bbx_logits = out['obj_logits'], out['bbx_logits']
        rpn = self.rpn_settings
        losses = OrderedDict((k, None) for k in
                             ('obj_loss', 'bbx_loss', 'roi_cls_loss', 'roi_bbx_loss'))
        pred = OrderedDict((k, None) for k in ('bbx_pred', 'cls_pred', 'obj_pred'))
        if not (do_loss or do_prediction):
            return losses, pred
        with torch.no_grad():
            anchors = fpn_anchors(out['level_sizes'], rpn.strides, rpn.anchor_scale,
                                  rpn.anchor_ratios, bbx_logits.dtype, bbx_logits.device)
            proposals = algos.generate_proposals(obj_logits, bbx_logits, anchors, valid_size,
                                                 rpn, self.training)
        if do_loss:
            cat, crowd, bbx = prepare_inputs(cat, iscrowd, bbx, self.num_stuff)
            with torch.no_grad():
                obj_lbl, bbx_lbl = algos.rpn_targets(anchors, bbx, crowd, valid_size, rpn)
            losses['obj_loss'], losses['bbx_loss'] = algos.rpn_loss(
                obj_logits, bbx_logits, obj_lbl, bbx_lbl, rpn.sigma)
            losses['roi_cls_loss'], losses['roi_bbx_loss'] = self._roi_losses(
                feats, proposals, bbx, cat, crowd, img_size)
        if do_prediction:
            pred.update(zip(pred, self._predict(feats, proposals, valid_size, img_size)))
        return losses, pred

    def _roi_losses(self, feats, proposals, bbx, cat, crowd, img_size):
        roi = self.roi_settings
        rois = None
        # seamseg skips the ROI head when no image has a proposal (ground truth alone is
        # not enough), with a zero loss that keeps the graph connected
        if any(p is not None for p in proposals):
            with torch.no_grad():
                rois, rois_idx, cls_lbl, bbx_lbl = algos.roi_targets(
                    proposals, bbx, cat, crowd, self.num_stuff, roi)
        if rois is None:
            zero = sum(f.sum() for f in feats[roi.min_level:roi.min_level + roi.levels]) * 0
            return zero, zero
        cls_logits, bbx_logits = self.roi_head(
            algos.roi_features(feats, rois, rois_idx, img_size, roi))
        return fast_rcnn_loss(cls_logits, bbx_logits, cls_lbl, bbx_lbl, roi.sigma)

    def _predict(self, feats, proposals, valid_size, img_size):
        none = [None] * len(valid_size)
        kept = [(p, i) for i, p in enumerate(proposals) if p is not None]
        if not kept:
            return none, list(none), list(none)
        rois = torch.cat([p for p, _ in kept])
        rois_idx = torch.cat([torch.full((p.shape[0],), i, dtype=torch.long,
                                         device=p.device) for p, i in kept])
        cls_logits, bbx_logits = self.roi_head(
            algos.roi_features(feats, rois, rois_idx, img_size, self.roi_settings))
        return algos.predict(cls_logits, bbx_logits, rois, rois_idx, valid_size,
                             self.roi_settings)

    def head_outputs(self, img):
        """Raw outputs of the body and the RPN head.

        Parameters
        ----------
        img : torch.Tensor or sequence of torch.Tensor
            A padded ``(N, 3, H, W)`` batch, or the images to pad (:func:`pad_images`).

        Returns
        -------
        dict
            ``features`` (FPN outputs, finest first), ``obj_logits (N, A_total)``,
            ``bbx_logits (N, A_total, 4)``, ``level_sizes`` (per RPN level), ``valid_size``
            (per image), ``img_size`` (padded ``(H, W)``).
        """
        if isinstance(img, torch.Tensor):
            valid_size = [tuple(img.shape[-2:])] * img.shape[0]
        else:
            img, valid_size = pad_images(img)
        features = self.body(img)
        lo, n = self.rpn_levels
        obj, bbx, sizes = flatten_rpn_outputs(self.rpn_head, features[lo:lo + n])
        return {'features': features, 'obj_logits': obj, 'bbx_logits': bbx,
                'level_sizes': sizes, 'valid_size': valid_size,
                'img_size': tuple(img.shape[-2:])}
