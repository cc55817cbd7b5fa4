"""Pascal VOC detection AP (11-point VOC07 or area under the curve), numpy only.

The matching is the VOC devkit's, as ssd.pytorch's ``eval.py`` and GluonCV's
``VOC07MApMetric`` implement it: per class, detections of all images sorted by score; each
takes the ground truth it overlaps most in its image; a match above ``iou_thresh`` on an
unmatched, non-difficult box is a true positive; matches on difficult boxes count as
neither. ssd.pytorch computes IoU without the +1 pixel (``plus_one=False``), GluonCV with it.
The matching is vectorised (:func:`best_overlap`, :func:`greedy_match`, shared with the
YOLOv3 recipe's ``FastVOC07MApMetric``; docs/faithfulness.md, "Fast train transform, targets
and VOC metric", "Core VOC evaluator")."""
import numpy as np

# rows x competing boxes per IoU block: bounds the memory of a pathological crowded image
_BLOCK = 1 << 21


def voc_ap(rec, prec, use_07_metric=True):
    """Average precision from cumulative recall and precision arrays in score order: 11-point
    VOC07 AP, or (``use_07_metric=False``) the VOC10+ area under the interpolated curve."""
    if use_07_metric:
        prec = np.nan_to_num(prec)
        ap = 0.0
        for t in np.arange(0.0, 1.1, 0.1):
            above = rec >= t
            p = np.max(prec[above]) if np.sum(above) else 0.0
            ap += p / 11.0
        return ap
    mrec = np.concatenate(([0.0], rec, [1.0]))
    mpre = np.concatenate(([0.0], np.nan_to_num(prec), [0.0]))
    mpre = np.maximum.accumulate(mpre[::-1])[::-1]
    i = np.where(mrec[1:] != mrec[:-1])[0]
    return float(np.sum((mrec[i + 1] - mrec[i]) * mpre[i + 1]))


def box_iou(box, boxes, plus_one=False):
    """IoU ``[N]`` of one ``[x1, y1, x2, y2]`` box with each row of ``boxes`` ``[N, 4]`` (or
    ``[..., N, 4]`` against ``box`` ``[..., 1, 4]``); ``plus_one``: GluonCV's ``+1`` pixel."""
    one = 1.0 if plus_one else 0.0
    iw = np.maximum(np.minimum(boxes[..., 2], box[..., 2]) -
                    np.maximum(boxes[..., 0], box[..., 0]) + one, 0.)
    ih = np.maximum(np.minimum(boxes[..., 3], box[..., 3]) -
                    np.maximum(boxes[..., 1], box[..., 1]) + one, 0.)
    inter = iw * ih
    union = ((box[..., 2] - box[..., 0] + one) * (box[..., 3] - box[..., 1] + one)
             + (boxes[..., 2] - boxes[..., 0] + one) * (boxes[..., 3] - boxes[..., 1] + one)
             - inter)
    return inter / union


def best_overlap(iou, valid, iou_thresh, strict=True):
    """Each detection's most-overlapping competing box and whether it is a hit.

    ``iou`` ``[K, M]``: each detection (row) with the boxes of its image; ``valid`` ``[K, M]``
    bool: the boxes that compete (same class, not padding); ``strict``: ``IoU > iou_thresh``
    (the devkit, ssd.pytorch) or "not below" (GluonCV's ``>=``, a NaN IoU a hit).

    Returns
    -------
    index : array [K] of int
        The box ``np.argmax`` picks (the first of ties, the first NaN).
    hit : array [K] of bool
    """
    with np.errstate(invalid='ignore'):
        iou = np.where(valid, iou, -np.inf)
        index = iou.argmax(axis=1)
        rows = np.arange(len(index))
        best = iou[rows, index]
        above = best > iou_thresh if strict else ~(best < iou_thresh)
    return index, valid[rows, index] & above


def greedy_match(box_id, hit, difficult):
    """The VOC greedy assignment of detections in score order: ``int32 [K]``, 1 true positive
    (first hit on a non-difficult box), -1 hit on a difficult box (neither), 0 false positive.
    ``box_id``: a unique id of each detection's most-overlapping box (any value where not
    ``hit``); ``difficult``: whether that box is difficult."""
    match = np.zeros(len(hit), np.int32)
    match[hit & difficult] = -1
    easy = np.flatnonzero(hit & ~difficult)
    _, first = np.unique(box_id[easy], return_index=True)
    match[easy[first]] = 1
    return match


def _score_order(scores, labels, n_cls, score_sort):
    """Detection indices grouped by class, each class by descending score (see
    :class:`VOCEvaluator`'s ``score_sort``)."""
    if score_sort == 'stable':
        # the devkit's order: per class, by score, ties in record order; a stable sort by
        # score then a stable (radix) sort by class
        order = np.argsort(-scores, kind='stable')
        return order[np.argsort(labels[order].astype(np.min_scalar_type(n_cls)),
                                kind='stable')]
    # eval.py sorts each class's file (record order) with numpy's default kind
    by_class = np.argsort(labels, kind='stable')
    bounds = np.searchsorted(labels[by_class], np.arange(n_cls + 1))
    parts = [by_class[a:b][np.argsort(-scores[by_class[a:b]])]
             for a, b in zip(bounds[:-1], bounds[1:])]
    return np.concatenate(parts) if parts else np.zeros(0, np.int64)


class VOCEvaluator:
    """Accumulates detections and ground truth image by image, then computes per-class AP.

    Parameters
    ----------
    class_names : sequence of str
        Foreground classes; labels are indices into it.
    iou_thresh : float
        A detection matches when IoU > ``iou_thresh`` (strictly, as the devkit).
    use_07_metric : bool
        11-point VOC07 AP (both references' default) or the area under the curve.
    plus_one : bool
        ``+1`` in widths and heights (GluonCV) or not (ssd.pytorch).
    score_sort : {'stable', 'numpy'}
        Order of a class's equal scores: record order (the devkit's), or numpy's default
        ``argsort`` as ssd.pytorch's ``eval.py`` (not stable beyond 16 detections).

    ``get()`` returns ``(class_names + ['mAP'], values)`` like GluonCV's metrics; a class
    without ground truth is NaN and left out of the mean, one without detections has AP 0
    (docs/faithfulness.md, "SSD300", "Deliberate differences").
    """

    def __init__(self, class_names, iou_thresh=0.5, use_07_metric=True, plus_one=False,
                 score_sort='stable'):
        if score_sort not in ('stable', 'numpy'):
            raise ValueError("VOCEvaluator: score_sort must be 'stable' or 'numpy', got "
                             '{!r}'.format(score_sort))
        self.class_names = list(class_names)
        self.iou_thresh, self.use_07_metric, self.plus_one = iou_thresh, use_07_metric, plus_one
        self.score_sort = score_sort
        self.reset()

    def reset(self):
        """Forget everything accumulated."""
        self._dets = []   # per image: (boxes, scores, labels)
        self._gts = []    # per image: (boxes, labels, difficult)

    def update(self, det_boxes, det_scores, det_labels, gt_boxes, gt_labels, gt_difficult=None):
        """Add one image's detections (``[D, 4]`` boxes, ``[D]`` scores and int labels into
        ``class_names``) and ground truth (``[G, 4]``, ``[G]`` labels, optional difficult)."""
        gt_boxes = np.asarray(gt_boxes, dtype=np.float64).reshape(-1, 4)
        gt_labels = np.asarray(gt_labels).reshape(-1).astype(int)
        difficult = np.zeros(len(gt_labels), bool) if gt_difficult is None \
            else np.asarray(gt_difficult).reshape(-1).astype(bool)
        self._gts.append((gt_boxes, gt_labels, difficult))
        det_boxes = np.asarray(det_boxes, dtype=np.float64).reshape(-1, 4)
        scores = np.asarray(det_scores).reshape(-1).astype(np.float64)
        labels = np.asarray(det_labels).reshape(-1).astype(int)
        if not len(det_boxes) == len(scores) == len(labels):
            raise ValueError('VOCEvaluator.update: det_boxes, det_scores and det_labels must '
                             'have one entry per detection, got {}, {} and {}'.format(
                                 len(det_boxes), len(scores), len(labels)))
        self._dets.append((det_boxes, scores, labels))

    def _matches(self):
        """Per class: the match of each detection (1, 0, -1) in score order (stable), and the
        number of non-difficult boxes."""
        n_cls, n_img = len(self.class_names), len(self._gts)
        n_det = [len(d[1]) for d in self._dets]
        n_gt = [len(g[1]) for g in self._gts]
        det_img = np.repeat(np.arange(n_img), n_det)
        boxes = np.concatenate([d[0] for d in self._dets] or [np.zeros((0, 4))])
        scores = np.concatenate([d[1] for d in self._dets] or [np.zeros(0)])
        labels = np.concatenate([d[2] for d in self._dets] or [np.zeros(0, int)])
        gt_img = np.repeat(np.arange(n_img), n_gt)
        gt_boxes = np.concatenate([g[0] for g in self._gts] or [np.zeros((0, 4))])
        gt_labels = np.concatenate([g[1] for g in self._gts] or [np.zeros(0, int)])
        gt_diff = np.concatenate([g[2] for g in self._gts] or [np.zeros(0, bool)])
        keep = (labels >= 0) & (labels < n_cls)
        det_img, boxes, scores, labels = det_img[keep], boxes[keep], scores[keep], labels[keep]
        keep = (gt_labels >= 0) & (gt_labels < n_cls)
        gt_img, gt_boxes, gt_labels, gt_diff = (gt_img[keep], gt_boxes[keep], gt_labels[keep],
                                                gt_diff[keep])
        npos = np.bincount(gt_labels[~gt_diff], minlength=n_cls)
        # ground truth grouped by (image, class), each group in its original order (argmax
        # ties); a dense table of the groups, as there are only images x classes of them
        gt_key = gt_img * n_cls + gt_labels
        by_key = np.argsort(gt_key, kind='stable')
        gt_boxes, gt_diff = gt_boxes[by_key], gt_diff[by_key]
        count = np.bincount(gt_key, minlength=n_img * n_cls)
        first = np.cumsum(count) - count
        key = det_img * n_cls + labels
        first, count = first[key], count[key]
        # IoU and argmax are per detection: computed in record order, grouped by the number of
        # competing boxes (no padding), in blocks
        index = np.zeros(len(key), np.int64)
        hit = np.zeros(len(key), bool)
        for width in np.unique(count[count > 0]):
            rows = np.flatnonzero(count == width)
            cols = np.arange(width)
            step = max(1, _BLOCK // int(width))
            for s in range(0, len(rows), step):
                r = rows[s:s + step]
                with np.errstate(invalid='ignore', divide='ignore'):  # 0/0 of empty boxes
                    iou = box_iou(boxes[r, None], gt_boxes[first[r, None] + cols], self.plus_one)
                index[r], hit[r] = best_overlap(iou, np.ones(iou.shape, bool), self.iou_thresh)
        order = _score_order(scores, labels, n_cls, self.score_sort)
        hit = hit[order]
        box_id = np.where(hit, (first + index)[order], 0)
        match = greedy_match(box_id, hit, gt_diff[box_id] & hit)
        starts = np.searchsorted(labels[order], np.arange(n_cls + 1))
        return starts, match, npos

    def get(self):
        """``(class_names + ['mAP'], values)``: AP per class (NaN without non-difficult ground
        truth, left out of the mean) and the mean."""
        starts, match, npos = self._matches()
        aps = []
        for c in range(len(self.class_names)):
            if npos[c] == 0:
                aps.append(float('nan'))
                continue
            m = match[starts[c]:starts[c + 1]]
            if len(m) == 0:
                aps.append(0.0)
                continue
            tp, fp = np.cumsum(m == 1).astype(np.float64), np.cumsum(m == 0).astype(np.float64)
            rec = tp / float(npos[c])
            prec = tp / np.maximum(tp + fp, np.finfo(np.float64).eps)
            aps.append(voc_ap(rec, prec, self.use_07_metric))
        valid = [a for a in aps if a == a]
        return self.class_names + ['mAP'], aps + [float(np.mean(valid)) if valid else 0.0]
