"""Pascal VOC detection AP (11-point VOC07 or area under the curve), numpy only.

The matching is the VOC devkit's, as ssd.pytorch's ``eval.py`` and GluonCV's
``VOC07MApMetric`` implement it: per class, detections of all images sorted by score; each
takes the ground truth it overlaps most in its image; a match above ``iou_thresh`` on an
unmatched, non-difficult box is a true positive; matches on difficult boxes count as
neither. ssd.pytorch computes IoU without the +1 pixel (``plus_one=False``), GluonCV with it.
"""
import numpy as np


def voc_ap(rec, prec, use_07_metric=True):
    """Average precision from recall/precision arrays (VOC07 11-point, or the VOC10+ area)."""
    if use_07_metric:
        ap = 0.0
        for t in np.arange(0.0, 1.1, 0.1):
            p = np.max(np.nan_to_num(prec)[rec >= t]) if np.sum(rec >= t) else 0.0
            ap += p / 11.0
        return ap
    mrec = np.concatenate(([0.0], rec, [1.0]))
    mpre = np.concatenate(([0.0], np.nan_to_num(prec), [0.0]))
    mpre = np.maximum.accumulate(mpre[::-1])[::-1]
    i = np.where(mrec[1:] != mrec[:-1])[0]
    return float(np.sum((mrec[i + 1] - mrec[i]) * mpre[i + 1]))


def box_iou(box, boxes, plus_one=False):
    """IoU of one ``[x1, y1, x2, y2]`` box with each row of ``boxes``."""
    one = 1.0 if plus_one else 0.0
    iw = np.maximum(np.minimum(boxes[:, 2], box[2]) - np.maximum(boxes[:, 0], box[0]) + one, 0.)
    ih = np.maximum(np.minimum(boxes[:, 3], box[3]) - np.maximum(boxes[:, 1], box[1]) + one, 0.)
    inter = iw * ih
    union = ((box[2] - box[0] + one) * (box[3] - box[1] + one)
             + (boxes[:, 2] - boxes[:, 0] + one) * (boxes[:, 3] - boxes[:, 1] + one) - inter)
    return inter / union


class VOCEvaluator:
    """Accumulates detections and ground truth image by image, then computes per-class AP.

    Parameters
    ----------
    class_names : sequence of str
        Foreground classes; labels are indices into it.
    iou_thresh : float
        A detection matches when IoU > ``iou_thresh`` (strictly, as the devkit).
    use_07_metric : bool
        11-point VOC07 AP (the default of both references) or the area under the curve.
    plus_one : bool
        ``+1`` in widths and heights (GluonCV) or not (ssd.pytorch).

    ``get()`` returns ``(class_names + ['mAP'], values)`` like GluonCV's metrics: a class
    without ground truth is NaN and left out of the mean; a class with ground truth but no
    detection has AP 0 (ssd.pytorch's eval.py gives it -1 and averages that in).
    """

    def __init__(self, class_names, iou_thresh=0.5, use_07_metric=True, plus_one=False):
        self.class_names = list(class_names)
        self.iou_thresh, self.use_07_metric, self.plus_one = iou_thresh, use_07_metric, plus_one
        self.reset()

    def reset(self):
        """Forget everything accumulated."""
        self._dets = []   # (image index, class, score, box)
        self._gts = []    # per image: (boxes, labels, difficult)

    def update(self, det_boxes, det_scores, det_labels, gt_boxes, gt_labels, gt_difficult=None):
        """Add one image's detections and ground truth.

        Parameters
        ----------
        det_boxes : array [D, 4]
        det_scores : array [D]
        det_labels : array [D] of int (index into ``class_names``)
        gt_boxes : array [G, 4]
        gt_labels : array [G] of int
        gt_difficult : array [G] of bool/int, optional
        """
        image = len(self._gts)
        gt_boxes = np.asarray(gt_boxes, dtype=np.float64).reshape(-1, 4)
        gt_labels = np.asarray(gt_labels).reshape(-1).astype(int)
        difficult = np.zeros(len(gt_labels), bool) if gt_difficult is None \
            else np.asarray(gt_difficult).reshape(-1).astype(bool)
        self._gts.append((gt_boxes, gt_labels, difficult))
        det_boxes = np.asarray(det_boxes, dtype=np.float64).reshape(-1, 4)
        for box, score, label in zip(det_boxes, np.asarray(det_scores).reshape(-1),
                                     np.asarray(det_labels).reshape(-1)):
            self._dets.append((image, int(label), float(score), box))

    def _class_ap(self, cls):
        gts = {}
        npos = 0
        for image, (boxes, labels, difficult) in enumerate(self._gts):
            keep = labels == cls
            gts[image] = (boxes[keep], difficult[keep], np.zeros(int(keep.sum()), bool))
            npos += int((~difficult[keep]).sum())
        if npos == 0:
            return float('nan')
        dets = [d for d in self._dets if d[1] == cls]
        if not dets:
            return 0.0
        order = np.argsort(-np.array([d[2] for d in dets]), kind='stable')
        tp, fp = np.zeros(len(dets)), np.zeros(len(dets))
        for rank, k in enumerate(order):
            image, _, _, box = dets[k]
            boxes, difficult, used = gts[image]
            if len(boxes) == 0:
                fp[rank] = 1.0
                continue
            overlaps = box_iou(box, boxes, self.plus_one)
            j = int(np.argmax(overlaps))
            if overlaps[j] > self.iou_thresh:
                if difficult[j]:
                    continue
                if not used[j]:
                    tp[rank], used[j] = 1.0, True
                else:
                    fp[rank] = 1.0
            else:
                fp[rank] = 1.0
        tp, fp = np.cumsum(tp), np.cumsum(fp)
        rec = tp / float(npos)
        prec = tp / np.maximum(tp + fp, np.finfo(np.float64).eps)
        return voc_ap(rec, prec, self.use_07_metric)

    def get(self):
        """``(class_names + ['mAP'], values)``; NaN classes are left out of the mean."""
        aps = [self._class_ap(c) for c in range(len(self.class_names))]
        valid = [a for a in aps if a == a]
        return self.class_names + ['mAP'], aps + [float(np.mean(valid)) if valid else 0.0]
