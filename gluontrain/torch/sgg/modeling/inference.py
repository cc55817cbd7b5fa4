"""The relation post-processor, Scene-Graph-Benchmark's ``PostProcessor``
(``roi_heads/relation_head/inference.py``) and ``obj_prediction_nms``
(``relation_head/utils_relation.py``, in :mod:`.predictors.utils_relation`), attributes off.

Per image: object probabilities ``softmax(refine_logits)`` with background 0; object labels
and scores the best foreground class (PredCls / SGCls) or, in SGDet, the greedy per-class NMS
labelling of ``obj_prediction_nms`` on the per-class boxes (``boxes_per_cls``; the boxes of
the result are each object's box of its chosen class). Relation scores
``max_{c >= 1} softmax(rel_logits)_c * score_head * score_tail`` sort the pairs (descending).
Fields as SGB: ``pred_labels``, ``pred_scores``, ``rel_pair_idxs``, ``pred_rel_scores``
(the full predicate distribution, background included), ``pred_rel_labels``.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

from ...twostage.structures import BoxList
from .predictors.utils_relation import obj_prediction_nms

__all__ = ['PostProcessor', 'make_roi_relation_post_processor']


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
            if self.use_gt_box:
                obj_scores, obj_pred = obj_prob[:, 1:].max(dim=1)
                obj_pred = obj_pred + 1
                boxlist = box
            else:
                per_cls = box.get_field('boxes_per_cls')
                obj_pred = obj_prediction_nms(per_cls, obj_logit, self.later_nms_pred_thres)
                rows = torch.arange(len(obj_pred), device=obj_pred.device)
                obj_scores = obj_prob[rows, obj_pred]
                boxlist = BoxList(per_cls[rows, obj_pred], box.size, 'xyxy')
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
    return PostProcessor(cfg.MODEL.ROI_RELATION_HEAD.USE_GT_BOX,
                         cfg.TEST.RELATION.LATER_NMS_PREDICTION_THRES)
