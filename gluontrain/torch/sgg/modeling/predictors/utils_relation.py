"""Pair geometry, per-class NMS and initialisations shared by the predictors (SGB's
``utils_relation.py``).

Pixel convention is maskrcnn-benchmark's (``+1`` inclusive sides).
"""
import numpy as np
import torch
from torch.nn import functional as F

from ....ops import box_iou
from ....twostage.box_head import make_fc  # maskrcnn-benchmark's, one copy with the box head

__all__ = ['get_box_info', 'get_box_pair_info', 'nms_overlaps', 'obj_prediction_nms',
           'layer_init', 'make_fc']

def get_box_info(boxes, need_norm=True, proposal=None):
    """``(x1, y1, x2, y2, cx, cy, w, h)``, divided by ``max(W, H, 100)`` when ``need_norm``.

    Parameters
    ----------
    boxes : torch.Tensor
        ``(N, 4)``.
    need_norm : bool
    proposal : BoxList, optional
        Gives the image size when ``need_norm``.

    Returns
    -------
    torch.Tensor
        ``(N, 8)``.
    """
    wh = boxes[:, 2:] - boxes[:, :2] + 1.0
    info = torch.cat((boxes, boxes[:, :2] + 0.5 * wh, wh), 1)
    if need_norm:
        info = info / float(max(max(proposal.size[0], proposal.size[1]), 100))
    return info


def get_box_pair_info(box1, box2):
    """32-d pair code: both boxes' infos, then union and intersection infos (unnormalised).

    Parameters
    ----------
    box1, box2 : torch.Tensor
        ``(R, 8)`` from :func:`get_box_info`.

    Returns
    -------
    torch.Tensor
        ``(R, 32)``; the intersection part is zero for disjoint pairs.
    """
    first, second = box1[:, :4], box2[:, :4]
    union = torch.cat((torch.min(first[:, :2], second[:, :2]),
                       torch.max(first[:, 2:], second[:, 2:])), 1)
    inter = torch.cat((torch.max(first[:, :2], second[:, :2]),
                       torch.min(first[:, 2:], second[:, 2:])), 1)
    inter_info = get_box_info(inter, need_norm=False)
    disjoint = (inter[:, 2] < inter[:, 0]) | (inter[:, 3] < inter[:, 1])
    inter_info = inter_info.masked_fill(disjoint[:, None], 0.0)
    return torch.cat((box1, box2, get_box_info(union, need_norm=False), inter_info), 1)


# ------------------------------------------------------------------------------ per-class NMS
def nms_overlaps(boxes):
    """Per-class IoU (``+1`` convention) between every pair of objects.

    Parameters
    ----------
    boxes : torch.Tensor
        ``(N, C, 4)`` one box per object and class.

    Returns
    -------
    torch.Tensor
        ``(N, N, C)``.
    """
    if boxes.dim() != 3:
        raise ValueError('nms_overlaps expects (N, C, 4) boxes, got {}'.format(
            tuple(boxes.shape)))
    per_class = boxes.transpose(0, 1)                      # (C, N, 4)
    return box_iou(per_class, per_class, plus_one=True).permute(1, 2, 0)


def obj_prediction_nms(boxes_per_cls, pred_logits, nms_thresh=0.3, bg_value=0.0):
    """Greedy label assignment with per-class NMS (SGB's SGDet object decoding).

    Repeatedly take the highest (object, class) probability, give the object that class,
    zero the class for objects overlapping it by ``>= nms_thresh`` and retire the object.

    Parameters
    ----------
    boxes_per_cls : torch.Tensor
        ``(N, C, 4)``.
    pred_logits : torch.Tensor
        ``(N, C)``.
    nms_thresh : float
        ``cfg.TEST.RELATION.LATER_NMS_PREDICTION_THRES``.
    bg_value : float
        Probability written into the background column before the search: ``0.0`` in SGB's
        MOTIFS decoder and ``obj_prediction_nms`` (an object whose classes were all
        suppressed can then get label 0), ``-1.0`` in its Transformer (it gets class 1).

    Returns
    -------
    torch.Tensor
        ``(N,)`` int64 labels.
    """
    num_obj = pred_logits.shape[0]
    if boxes_per_cls.shape[0] != num_obj:
        raise ValueError('obj_prediction_nms: {} boxes for {} logits'.format(
            boxes_per_cls.shape[0], num_obj))
    is_overlap = (nms_overlaps(boxes_per_cls) >= nms_thresh).cpu().numpy()
    prob = F.softmax(pred_logits.detach(), 1).cpu().numpy()
    prob[:, 0] = bg_value
    labels = np.zeros(num_obj, dtype=np.int64)
    for _ in range(num_obj):
        box_ind, cls_ind = np.unravel_index(prob.argmax(), prob.shape)
        labels[box_ind] = cls_ind
        prob[is_overlap[box_ind, :, cls_ind], cls_ind] = 0.0
        prob[box_ind] = -1.0  # retired
    return torch.as_tensor(labels, device=pred_logits.device)


# ---------------------------------------------------------------------------- initialisations
def layer_init(layer, init_para=0.1, normal=False, xavier=True):
    """SGB's ``layer_init``: ``N(0, init_para)`` when ``normal`` else Xavier-normal; bias 0.

    Parameters
    ----------
    layer : torch.nn.Linear
    init_para : float
        Standard deviation for ``normal``.
    normal : bool
    xavier : bool
        Ignored, as in SGB (``normal=False`` always means Xavier).
    """
    if normal:
        torch.nn.init.normal_(layer.weight, mean=0, std=init_para)
    else:
        torch.nn.init.xavier_normal_(layer.weight, gain=1.0)
    torch.nn.init.constant_(layer.bias, 0)
