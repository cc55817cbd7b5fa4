"""The relation post-processor, Scene-Graph-Benchmark's ``PostProcessor``
(``roi_heads/relation_head/inference.py``) and ``obj_prediction_nms``
(``relation_head/utils_relation.py``), attributes off.

Per image: object probabilities ``softmax(refine_logits)`` with background 0; object labels
and scores the best foreground class (PredCls / SGCls) or, in SGDet, the greedy per-class NMS
labelling of ``obj_prediction_nms`` on the per-class boxes (``boxes_per_cls``; the boxes of
the result are each object's box of its chosen class). Relation scores
``max_{c >= 1} softmax(rel_logits)_c * score_head * score_tail`` sort the pairs (descending).
Fields as SGB: ``pred_labels``, ``pred_scores``, ``rel_pair_idxs``, ``pred_rel_scores``
(the full predicate distribution, background included), ``pred_rel_labels``.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from ..structures import BoxList

__all__ = ['nms_overlaps', 'obj_prediction_nms', 'PostProcessor',
           'make_roi_relation_post_processor']


def nms_overlaps(boxes):
    """``(N, N, C)`` IoU (``+1`` convention) of every two objects' boxes of the same class.

    Parameters
    ----------
    boxes : torch.Tensor
        ``(N, C, 4)``.
    """
    n, nc = boxes.shape[:2]
    max_xy = torch.min(boxes[:, None, :, 2:].expand(n, n, nc, 2),
                       boxes[None, :, :, 2:].expand(n, n, nc, 2))
    min_xy = torch.max(boxes[:, None, :, :2].expand(n, n, nc, 2),
                       boxes[None, :, :, :2].expand(n, n, nc, 2))
    inter = torch.clamp(max_xy - min_xy + 1.0, min=0)
    inters = inter[..., 0] * inter[..., 1]
    flat = boxes.reshape(-1, 4)
    areas = ((flat[:, 2] - flat[:, 0] + 1.0) * (flat[:, 3] - flat[:, 1] + 1.0)).view(n, nc)
    return inters / (-inters + areas[None] + areas[:, None])


def obj_prediction_nms(boxes_per_cls, pred_logits, nms_thresh=0.3):
    """SGB's greedy object labelling for SGDet.

    Repeatedly take the highest (object, class) probability (background excluded); the
    object gets that class unless already labelled; every object overlapping it by
    ``>= nms_thresh`` in that class loses that class; the object is retired.

    Parameters
    ----------
    boxes_per_cls : torch.Tensor
        ``(N, C, 4)``.
    pred_logits : torch.Tensor
        ``(N, C)``.
    nms_thresh : float

    Returns
    -------
    torch.Tensor
        ``(N,)`` int64 labels.
    """
    num_obj = pred_logits.shape[0]
    if num_obj != boxes_per_cls.shape[0]:
        raise ValueError('obj_prediction_nms: {} logits rows for {} boxes'.format(
            num_obj, boxes_per_cls.shape[0]))
    is_overlap = (nms_overlaps(boxes_per_cls).cpu().numpy() >= nms_thresh)
    prob = F.softmax(pred_logits, 1).detach().cpu().numpy()
    prob[:, 0] = 0
    labels = np.zeros(num_obj, dtype=np.int64)
    for _ in range(num_obj):
        box_ind, cls_ind = np.unravel_index(prob.argmax(), prob.shape)
        if labels[box_ind] <= 0:
            labels[box_ind] = cls_ind
        prob[is_overlap[box_ind, :, cls_ind], cls_ind] = 0.0
        prob[box_ind] = -1.0
    return torch.as_tensor(labels, device=pred_logits.device)


class PostProcessor(nn.Module):
    """SGB's relation ``PostProcessor``.

    Parameters
    ----------
    use_gt_box : bool
    later_nms_pred_thres : float
        ``TEST.RELATION.LATER_NMS_PREDICTION_THRES`` (SGDet's object labelling).
    """

    def __init__(self, use_gt_box=False, later_nms_pred_thres=0.3):
        super().__init__()
        self.use_gt_box = use_gt_box
        self.later_nms_pred_thres = later_nms_pred_thres

    def forward(self, x, rel_pair_idxs, boxes):
        """``x = (relation_logits, refine_logits)`` per image -> list of BoxList."""
        relation_logits, refine_logits = x
        results = []
        for rel_logit, obj_logit, pairs, box in zip(relation_logits, refine_logits,
                                                     rel_pair_idxs, boxes):
            obj_prob = F.softmax(obj_logit, -1)
            obj_prob[:, 0] = 0
            num_obj, num_cls = obj_prob.shape
            if self.use_gt_box:
                obj_scores, obj_pred = obj_prob[:, 1:].max(dim=1)
                obj_pred = obj_pred + 1
                boxlist = box
            else:
                obj_pred = obj_prediction_nms(box.get_field('boxes_per_cls'), obj_logit,
                                              self.later_nms_pred_thres)
                idx = torch.arange(num_obj, device=obj_logit.device) * num_cls + obj_pred
                obj_scores = obj_prob.view(-1)[idx]
                per_cls = box.get_field('boxes_per_cls')
                boxlist = BoxList(per_cls[torch.arange(num_obj, device=per_cls.device),
                                          obj_pred], box.size, 'xyxy')
            boxlist.add_field('pred_labels', obj_pred)
            boxlist.add_field('pred_scores', obj_scores)
            rel_prob = F.softmax(rel_logit, -1)
            rel_scores, rel_class = rel_prob[:, 1:].max(dim=1)
            rel_class = rel_class + 1
            triple = rel_scores * obj_scores[pairs[:, 0]] * obj_scores[pairs[:, 1]]
            # SGB's torch.sort is not stable; a stable sort orders tied triplets by index
            order = torch.sort(triple.view(-1), dim=0, descending=True, stable=True)[1]
            boxlist.add_field('rel_pair_idxs', pairs[order])
            boxlist.add_field('pred_rel_scores', rel_prob[order])
            boxlist.add_field('pred_rel_labels', rel_class[order])
            results.append(boxlist)
        return results


def make_roi_relation_post_processor(cfg):
    """SGB's factory: ``MODEL.ROI_RELATION_HEAD.USE_GT_BOX``,
    ``TEST.RELATION.LATER_NMS_PREDICTION_THRES``.

    Returns
    -------
    PostProcessor
    """
    if cfg.MODEL.ATTRIBUTE_ON:
        raise ValueError('MODEL.ATTRIBUTE_ON is not supported by the scene-graph recipe')
    return PostProcessor(cfg.MODEL.ROI_RELATION_HEAD.USE_GT_BOX,
                         cfg.TEST.RELATION.LATER_NMS_PREDICTION_THRES)
