"""maskrcnn-benchmark's box coder (``modeling/box_coder.py``) and SGB's box post-processor
(``roi_heads/box_head/inference.py``).

The coder is maskrcnn-benchmark's ``+1`` parametrisation: a box ``[x0, x1]`` is
``x1 - x0 + 1`` wide, its centre ``x0 + w / 2``; decoding subtracts the 1 again from the far
corner. It is :func:`gluontrain.torch.ops.encode` / ``decode`` with ``plus_one=True``.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..ops import classwise_nms, decode, encode, maskrcnn_nms_options
from .structures import BoxList

__all__ = ['BoxCoder', 'BoxPostProcessor', 'BBOX_XFORM_CLIP']

#: maskrcnn-benchmark's clamp of the size deltas before ``exp``.
BBOX_XFORM_CLIP = math.log(1000. / 16)


class BoxCoder:
    """maskrcnn-benchmark's ``BoxCoder(weights, bbox_xform_clip=log(1000/16))``.

    Parameters
    ----------
    weights : sequence of 4 float
        ``(wx, wy, ww, wh)``: ``(10, 10, 5, 5)`` for the box head, ``(1, 1, 1, 1)`` for the RPN.
    bbox_xform_clip : float
    """

    def __init__(self, weights, bbox_xform_clip=BBOX_XFORM_CLIP):
        self.weights = tuple(float(w) for w in weights)
        self.bbox_xform_clip = bbox_xform_clip

    def encode(self, reference_boxes, proposals):
        """Deltas ``(N, 4)`` of ``reference_boxes`` (targets) relative to ``proposals``."""
        return encode(reference_boxes, proposals, weights=self.weights, plus_one=True)

    def encode_matched(self, targets, matched, proposals):
        """Deltas ``(N, 4)`` of each proposal's matched target (a negative ``matched`` reads
        target 0, as maskrcnn-benchmark's ``clamp(min=0)``); zeros without targets."""
        if targets.shape[0] == 0:
            return proposals.new_zeros(proposals.shape[0], 4)
        return self.encode(targets[matched.clamp(min=0)], proposals)

    def decode(self, rel_codes, boxes):
        """Boxes ``(N, 4 K)`` from deltas ``(N, 4 K)`` relative to ``boxes`` ``(N, 4)``."""
        boxes = boxes.to(rel_codes.dtype)
        n = rel_codes.shape[0]
        deltas = rel_codes.reshape(n, -1, 4)
        out = decode(deltas, boxes[:, None], weights=self.weights,
                     scale_clip=self.bbox_xform_clip, plus_one=True)
        return out.reshape(n, -1)


class BoxPostProcessor(nn.Module):
    """SGB's box ``PostProcessor``.

    Per image: softmax scores, per-class decoded boxes clipped to the image; per class
    ``j >= 1`` the boxes with score ``> score_thresh``, NMS at ``nms`` (``+1`` IoU ``>``
    suppresses) keeping ``post_nms_per_cls_topn``; with ``nms_filter_duplicates`` each
    proposal keeps only its best surviving class; at most ``detections_per_img`` by score
    (``kthvalue`` threshold: ties at the threshold all stay).

    Parameters
    ----------
    score_thresh, nms : float
    post_nms_per_cls_topn : int
    nms_filter_duplicates : bool
    detections_per_img : int
    box_coder : BoxCoder
    cls_agnostic_bbox_reg : bool
    custum_eval : bool
        SGB's ``TEST.CUSTUM_EVAL`` (no ground-truth labels on the detections).
    """

    def __init__(self, score_thresh=0.05, nms=0.5, post_nms_per_cls_topn=300,
                 nms_filter_duplicates=True, detections_per_img=100, box_coder=None,
                 cls_agnostic_bbox_reg=False, custum_eval=False):
        super().__init__()
        self.score_thresh, self.nms = score_thresh, nms
        self.post_nms_per_cls_topn = post_nms_per_cls_topn
        self.nms_filter_duplicates = nms_filter_duplicates
        self.detections_per_img = detections_per_img
        self.box_coder = box_coder or BoxCoder((10., 10., 5., 5.))
        self.cls_agnostic_bbox_reg = cls_agnostic_bbox_reg
        self.custum_eval = custum_eval

    def forward(self, x, boxes, relation_mode=False):
        """``x = (features, class_logits, box_regression)``; ``boxes`` the proposals.

        Returns
        -------
        features : torch.Tensor
            The features of the kept detections, all images concatenated.
        results : list of BoxList
            ``pred_scores``, ``pred_labels`` (and in relation mode ``labels``,
            ``attributes`` unless ``custum_eval``, ``predict_logits``, ``boxes_per_cls``).
        """
        features, class_logits, box_regression = x
        class_prob = F.softmax(class_logits, -1)
        per_image = [len(b) for b in boxes]
        concat = torch.cat([b.bbox for b in boxes], dim=0)
        if self.cls_agnostic_bbox_reg:
            box_regression = box_regression[:, -4:]
        decoded = self.box_coder.decode(box_regression.reshape(sum(per_image), -1), concat)
        if self.cls_agnostic_bbox_reg:
            decoded = decoded.repeat(1, class_prob.shape[1])
        num_classes = class_prob.shape[1]
        results, feats = [], []
        for i, (prob, dec, feat) in enumerate(zip(class_prob.split(per_image),
                                                  decoded.split(per_image),
                                                  features.split(per_image))):
            # a copy: clip_to_image clamps in place (split() views may not be modified)
            boxlist = BoxList(dec.reshape(-1, 4).clone(), boxes[i].size, 'xyxy')
            boxlist.add_field('pred_scores', prob.reshape(-1))
            boxlist = boxlist.clip_to_image(remove_empty=False)
            result, orig_inds, boxes_per_cls = self.filter_results(boxlist, num_classes)
            src = boxes[i]
            if src.has_field('predict_logits'):
                result.add_field('predict_logits', src.get_field('predict_logits')[orig_inds])
            if relation_mode:
                if not self.custum_eval:
                    result.add_field('labels', src.get_field('labels')[orig_inds])
                    if src.has_field('attributes'):
                        result.add_field('attributes', src.get_field('attributes')[orig_inds])
                result.add_field('boxes_per_cls', boxes_per_cls)
            results.append(result)
            feats.append(feat[orig_inds])
        return torch.cat(feats, dim=0), results

    def filter_results(self, boxlist, num_classes):
        """SGB's ``filter_results``: -> ``(result, orig_inds, boxes_per_cls[orig_inds])``."""
        boxes_per_cls = boxlist.bbox.reshape(-1, num_classes, 4)
        scores = boxlist.get_field('pred_scores').reshape(-1, num_classes)
        # (proposal, class) candidates; proposal-major, so each class's come in SGB's order
        inds, labels = torch.nonzero(scores[:, 1:] > self.score_thresh).unbind(1)
        labels = labels + 1
        keep = classwise_nms(boxes_per_cls[inds, labels], scores[inds, labels], labels,
                             self.nms, self.post_nms_per_cls_topn
                             if self.post_nms_per_cls_topn > 0 else None,
                             **maskrcnn_nms_options(boxes_per_cls.device))
        orig_inds, labels = inds[keep], labels[keep]
        if self.nms_filter_duplicates:
            kept = torch.zeros_like(scores, dtype=torch.bool)
            kept[orig_inds, labels] = True
            scores_pre, labels = (scores * kept.to(scores.dtype)).max(1)
            orig_inds = torch.nonzero(scores_pre).squeeze(1)
            labels = labels[orig_inds]
        result = BoxList(boxes_per_cls[orig_inds, labels], boxlist.size, 'xyxy')
        result.add_field('pred_scores', scores[orig_inds, labels])
        result.add_field('pred_labels', labels)
        n = len(result)
        if n > self.detections_per_img > 0:
            s = result.get_field('pred_scores')
            thresh, _ = torch.kthvalue(s.cpu(), n - self.detections_per_img + 1)
            keep = torch.nonzero(s >= thresh.item()).squeeze(1)
            result = result[keep]
            orig_inds = orig_inds[keep]
        return result, orig_inds, boxes_per_cls[orig_inds]
