"""Scene-graph recall metrics with Scene-Graph-Benchmark's semantics (``sgg_eval.py``).

Each evaluator writes into one shared ``result_dict`` under SGB's keys
(``<mode>_recall``, ``<mode>_recall_nogc``, ``<mode>_zeroshot_recall``,
``<mode>_ng_zeroshot_recall``, ``<mode>_accuracy_hit`` / ``_accuracy_count``,
``<mode>_mean_recall`` / ``_collect`` / ``_list``, ``<mode>_ng_mean_recall`` / ...) and prints
SGB's lines (``generate_print_string``). Per image, ``local_container`` holds numpy arrays:
``gt_rels`` (#gt, 3) ``(sub, obj, predicate)``, ``gt_boxes``, ``gt_classes``,
``pred_rel_inds`` (#pred, 2) sorted by score (top-K = the first K rows), ``rel_scores``
(#pred, #predicates incl. background), ``pred_boxes``, ``pred_classes``, ``obj_scores``.

A predicted triplet hits a ground-truth triplet when subject class, predicate and object
class are equal and both boxes overlap by IoU >= ``iou_thres`` in the ``+1`` pixel
convention, computed in float32 as SGB's ``boxlist_iou`` (``phrdet``: the union boxes of the
two pairs). One prediction hits every equal ground-truth triplet, duplicates included.
"""
import numpy as np
import torch

from ...ops import box_iou

__all__ = ['SceneGraphEvaluation', 'SGRecall', 'SGNoGraphConstraintRecall', 'SGZeroShotRecall',
           'SGNGZeroShotRecall', 'SGPairAccuracy', 'SGMeanRecall', 'SGNGMeanRecall',
           'SGAccumulateRecall', 'TOP_KS', 'intersect_2d', 'argsort_desc', 'bbox_overlaps',
           'matched_gt', 'ratio_or_nan', 'mean_or_nan', 'triplet', 'compute_pred_matches']

TOP_KS = (20, 50, 100)


# -- numpy helpers ------------------------------------------------------------------------
def to_numpy(x, dtype=None):
    """A tensor (on any device) or array-like as a numpy array, cast to ``dtype`` if given."""
    x = x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)
    return x.astype(dtype) if dtype is not None else x


def class_triplets(relations, labels):
    """``(sub_class, obj_class, predicate)`` rows (the order of SGB's zero-shot file) of
    relations ``(sub, obj, predicate)`` over boxes of class ``labels``."""
    rels = to_numpy(relations, np.int64).reshape(-1, 3)
    labels = to_numpy(labels, np.int64).reshape(-1)
    return np.column_stack((labels[rels[:, 0]], labels[rels[:, 1]], rels[:, 2])).reshape(-1, 3)


def intersect_2d(x1, x2):
    """``(m1, m2)`` bool: row ``i`` of ``x1`` equals row ``j`` of ``x2``.

    Parameters
    ----------
    x1 : ndarray (m1, n)
    x2 : ndarray (m2, n)
    """
    x1, x2 = np.asarray(x1), np.asarray(x2)
    if x1.ndim != 2 or x2.ndim != 2 or x1.shape[1] != x2.shape[1]:
        raise ValueError('intersect_2d needs two 2-d arrays with equal columns, got shapes '
                         '{} and {}'.format(x1.shape, x2.shape))
    return (x1[:, None, :] == x2[None, :, :]).all(-1)


def argsort_desc(scores):
    """``(numel, ndim)`` indices of ``scores`` from the highest to the lowest value.

    numpy's default ``argsort`` kind, as SGB, so ties fall the same way.
    """
    order = np.argsort(-scores.ravel())
    return np.column_stack(np.unravel_index(order, scores.shape))


def bbox_overlaps(boxes1, boxes2):
    """``(m, n)`` IoU of ``x0, y0, x1, y1`` boxes, pixel-inclusive (``+1``), in float32.

    SGB wraps the numpy boxes in float32 ``BoxList`` and calls ``boxlist_iou``; the same
    arithmetic here keeps decisions at IoU == threshold identical.
    """
    a = torch.as_tensor(np.asarray(boxes1, dtype=np.float32).reshape(-1, 4))
    b = torch.as_tensor(np.asarray(boxes2, dtype=np.float32).reshape(-1, 4))
    return box_iou(a, b, plus_one=True).numpy()


def matched_gt(pred_to_gt, k):
    """Sorted ground-truth indices hit by the first ``k`` predictions (SGB's
    ``reduce(np.union1d, pred_to_gt[:k])``, also defined for no prediction)."""
    return sorted(set().union(*pred_to_gt[:k]))


def ratio_or_nan(num, den):
    """``num / den`` as float, ``nan`` for ``den == 0`` (SGB: mean of an empty list)."""
    return float(num) / float(den) if den else float('nan')


def mean_or_nan(values):
    # np.mean([]) is nan with a RuntimeWarning in SGB; same value, no warning
    return float(np.mean(values)) if len(values) else float('nan')


def triplet(relations, classes, boxes):
    """Relations ``(sub_id, ob_id, pred_label)`` as class triplets and box pairs (SGB's
    ``_triplet`` without its scores, which no recall reads).

    Parameters
    ----------
    relations : ndarray (#rel, 3)
    classes : ndarray (#obj,)
    boxes : ndarray (#obj, 4)

    Returns
    -------
    triplets : ndarray (#rel, 3)
        ``(sub_label, pred_label, ob_label)``.
    triplet_boxes : ndarray (#rel, 8)
        Subject box then object box.
    """
    relations = np.asarray(relations).reshape(-1, 3)
    sub_id, ob_id, pred_label = relations[:, 0], relations[:, 1], relations[:, 2]
    triplets = np.column_stack((classes[sub_id], pred_label, classes[ob_id]))
    return triplets, np.column_stack((boxes[sub_id], boxes[ob_id])).reshape(-1, 8)


def _union_box(pairs):
    pairs = pairs.reshape(-1, 2, 4)
    return np.concatenate((pairs.min(1)[:, :2], pairs.max(1)[:, 2:]), 1)


def compute_pred_matches(gt_triplets, pred_triplets, gt_boxes, pred_boxes, iou_thres,
                          phrdet=False):
    """For each prediction, the list of ground-truth triplets it hits.

    Parameters
    ----------
    gt_triplets, pred_triplets : ndarray (#gt, 3), (#pred, 3)
    gt_boxes, pred_boxes : ndarray (#gt, 8), (#pred, 8)
    iou_thres : float
        A hit needs IoU >= this for subject and object (``phrdet``: for the union boxes).
    phrdet : bool

    Returns
    -------
    list of list of int
        ``pred_to_gt[i]``: ground-truth indices (ascending) prediction ``i`` hits.
    """
    pred_to_gt = [[] for _ in range(len(pred_boxes))]
    same = intersect_2d(gt_triplets, pred_triplets)
    for gt_ind in np.where(same.any(1))[0]:
        cand = np.where(same[gt_ind])[0]
        gt_box, boxes = gt_boxes[gt_ind], pred_boxes[cand]
        if phrdet:
            ok = bbox_overlaps(_union_box(gt_box), _union_box(boxes))[0] >= iou_thres
        else:
            ok = ((bbox_overlaps(gt_box[:4], boxes[:, :4])[0] >= iou_thres)
                  & (bbox_overlaps(gt_box[4:], boxes[:, 4:])[0] >= iou_thres))
        for i in cand[ok]:
            pred_to_gt[i].append(int(gt_ind))
    return pred_to_gt


# -- evaluators ---------------------------------------------------------------------------
class SceneGraphEvaluation:
    """One metric family writing into the shared ``result_dict``.

    Parameters
    ----------
    result_dict : dict
        Shared by all evaluators of one evaluation.
    """

    def __init__(self, result_dict):
        self.result_dict = result_dict

    def register_container(self, mode):
        """Create this metric's entries in ``result_dict`` for ``mode``."""
        raise NotImplementedError

    def generate_print_string(self, mode):
        """SGB's one-line summary (``'SGG eval: ...\\n'``)."""
        raise NotImplementedError

    def _line(self, key, fmt, mode, kind, value=mean_or_nan):
        text = 'SGG eval: '
        for k, v in self.result_dict[mode + key].items():
            text += fmt % (k, value(v))
        return text + ' for mode=%s, type=%s.\n' % (mode, kind)

    def _match_and_append(self, key, rels, local_container, global_container, mode):
        """Match predicted relations ``rels`` ``(sub, obj, predicate)`` (ranked) with this
        image's ground-truth triplets and append its recall per K to ``<mode><key>``.

        Returns
        -------
        list of list of int
            ``pred_to_gt`` (:func:`compute_pred_matches`).
        """
        triplets, boxes = triplet(rels, local_container['pred_classes'],
                                   local_container['pred_boxes'])
        pred_to_gt = compute_pred_matches(local_container['gt_triplets'], triplets,
                                           local_container['gt_triplet_boxes'], boxes,
                                           global_container['iou_thres'], phrdet=mode == 'phrdet')
        num_gt = float(local_container['gt_rels'].shape[0])
        for k in self.result_dict[mode + key]:
            self.result_dict[mode + key][k].append(len(matched_gt(pred_to_gt, k)) / num_gt)
        return pred_to_gt


class SGRecall(SceneGraphEvaluation):
    """Graph-constrained R@K: one predicate per pair (the best non-background one),
    recall = hit ground truth / all ground truth of the image, averaged over images."""

    def register_container(self, mode):
        """``<mode>_recall``: ``{K: [per-image recall]}``."""
        self.result_dict[mode + '_recall'] = {k: [] for k in TOP_KS}

    def generate_print_string(self, mode):
        """``SGG eval:     R @ 20: 0.xxxx; ...  for mode=..., type=Recall(Main).``"""
        return self._line('_recall', '    R @ %d: %.4f; ', mode, 'Recall(Main)')

    def calculate_recall(self, global_container, local_container, mode):
        """Match this image's predictions; stores ``gt_triplets``, ``gt_triplet_boxes`` and
        ``pred_to_gt`` in ``local_container`` (the later evaluators read them)."""
        rel_scores = local_container['rel_scores']
        pred_rels = np.column_stack((local_container['pred_rel_inds'],
                                     1 + rel_scores[:, 1:].argmax(1))).reshape(-1, 3)
        gt_triplets, gt_triplet_boxes = triplet(
            local_container['gt_rels'], local_container['gt_classes'], local_container['gt_boxes'])
        local_container['gt_triplets'] = gt_triplets
        local_container['gt_triplet_boxes'] = gt_triplet_boxes
        local_container['pred_to_gt'] = self._match_and_append(
            '_recall', pred_rels, local_container, global_container, mode)
        return local_container


class SGNoGraphConstraintRecall(SceneGraphEvaluation):
    """ngR@K: every (pair, predicate) is a candidate, ranked by
    ``obj_score_sub * obj_score_obj * predicate_score``; the top 100 are matched."""

    def register_container(self, mode):
        """``<mode>_recall_nogc``: ``{K: [per-image recall]}``."""
        self.result_dict[mode + '_recall_nogc'] = {k: [] for k in TOP_KS}

    def generate_print_string(self, mode):
        """``SGG eval:  ng-R @ 20: ...  type=No Graph Constraint Recall(Main).``"""
        return self._line('_recall_nogc', ' ng-R @ %d: %.4f; ', mode,
                          'No Graph Constraint Recall(Main)')

    def calculate_recall(self, global_container, local_container, mode):
        """Stores ``nogc_pred_to_gt`` in ``local_container``; run after :class:`SGRecall`."""
        pred_rel_inds = local_container['pred_rel_inds'].reshape(-1, 2)
        rel_scores = local_container['rel_scores']
        obj_scores = local_container['obj_scores']
        overall = obj_scores[pred_rel_inds].prod(1)[:, None] * rel_scores[:, 1:]
        top = argsort_desc(overall)[:100]
        nogc_rels = np.column_stack((pred_rel_inds[top[:, 0]], top[:, 1] + 1)).reshape(-1, 3)
        local_container['nogc_pred_to_gt'] = self._match_and_append(
            '_recall_nogc', nogc_rels, local_container, global_container, mode)
        return local_container


class SGZeroShotRecall(SceneGraphEvaluation):
    """zR@K: recall over the ground-truth triplets whose ``(sub_class, obj_class, predicate)``
    is in ``global_container['zeroshot_triplet']``; images without one add nothing."""

    key, match_key = '_zeroshot_recall', 'pred_to_gt'

    def register_container(self, mode):
        """``<mode>_zeroshot_recall``: ``{K: [per-image recall]}``."""
        self.result_dict[mode + self.key] = {k: [] for k in TOP_KS}
        self.zeroshot_idx = []

    def generate_print_string(self, mode):
        """``SGG eval:    zR @ 20: ...  type=Zero Shot Recall.``"""
        return self._line(self.key, '   zR @ %d: %.4f; ', mode, 'Zero Shot Recall')

    def prepare_zeroshot(self, global_container, local_container):
        """Find this image's zero-shot ground-truth rows (``self.zeroshot_idx``)."""
        zeroshot = np.asarray(global_container['zeroshot_triplet']).reshape(-1, 3)
        gt_triplets = class_triplets(local_container['gt_rels'], local_container['gt_classes'])
        self.zeroshot_idx = np.where(intersect_2d(gt_triplets, zeroshot).any(-1))[0].tolist()

    def calculate_recall(self, global_container, local_container, mode):
        """Append this image's zero-shot recall per K (only if it has zero-shot triplets)."""
        if not self.zeroshot_idx:
            return
        pred_to_gt = local_container[self.match_key]
        for k in self.result_dict[mode + self.key]:
            hit = set(matched_gt(pred_to_gt, k)) & set(self.zeroshot_idx)
            self.result_dict[mode + self.key][k].append(len(hit) / float(len(self.zeroshot_idx)))


class SGNGZeroShotRecall(SGZeroShotRecall):
    """ng-zR@K: :class:`SGZeroShotRecall` on the no-graph-constraint matches."""

    key, match_key = '_ng_zeroshot_recall', 'nogc_pred_to_gt'

    def generate_print_string(self, mode):
        """``SGG eval: ng-zR @ 20: ...  type=No Graph Constraint Zero Shot Recall.``"""
        return self._line(self.key, 'ng-zR @ %d: %.4f; ', mode,
                          'No Graph Constraint Zero Shot Recall')


class SGPairAccuracy(SceneGraphEvaluation):
    """A@K (PredCls/SGCls): among the predictions whose (subject, object) pair is a
    ground-truth pair, the first K; accuracy = sum of hits / sum of ground truth."""

    def register_container(self, mode):
        """``<mode>_accuracy_hit`` and ``<mode>_accuracy_count``: ``{K: [per image]}``."""
        self.result_dict[mode + '_accuracy_hit'] = {k: [] for k in TOP_KS}
        self.result_dict[mode + '_accuracy_count'] = {k: [] for k in TOP_KS}
        self.pred_pair_in_gt = np.zeros(0, dtype=bool)

    def generate_print_string(self, mode):
        """``SGG eval:     A @ 20: ...  type=TopK Accuracy.`` (mean hit / mean count)."""
        text = 'SGG eval: '
        for k, v in self.result_dict[mode + '_accuracy_hit'].items():
            text += '    A @ %d: %.4f; ' % (k, ratio_or_nan(
                mean_or_nan(v), mean_or_nan(self.result_dict[mode + '_accuracy_count'][k])))
        return text + ' for mode=%s, type=TopK Accuracy.\n' % mode

    def prepare_gtpair(self, local_container):
        """Mark the predictions whose pair is a ground-truth pair."""
        # exact pair equality; SGB encodes pairs as sub * 1024 + obj (same for < 1024 boxes)
        self.pred_pair_in_gt = intersect_2d(local_container['pred_rel_inds'].reshape(-1, 2),
                                            local_container['gt_rels'][:, :2]).any(1)

    def calculate_recall(self, global_container, local_container, mode):
        """Append hits and counts per K (nothing in ``sgdet``)."""
        if mode == 'sgdet':
            return
        pred_to_gt = local_container['pred_to_gt']
        on_gt_pairs = [p for p, flag in zip(pred_to_gt, self.pred_pair_in_gt) if flag]
        for k in self.result_dict[mode + '_accuracy_hit']:
            self.result_dict[mode + '_accuracy_hit'][k].append(
                float(len(matched_gt(on_gt_pairs, k))))
            self.result_dict[mode + '_accuracy_count'][k].append(
                float(local_container['gt_rels'].shape[0]))


class SGMeanRecall(SceneGraphEvaluation):
    """mR@K: per predicate, the mean over images (that have it) of that predicate's recall;
    then the mean over ALL ``num_rel - 1`` predicates, a predicate absent from the
    evaluated ground truth counting 0.0 (SGB's convention).

    Parameters
    ----------
    result_dict : dict
    num_rel : int
        Predicate classes including background (``ROI_RELATION_HEAD.NUM_CLASSES``).
    ind_to_predicates : list of str
        Names, background first.
    print_detail : bool
        Add the per-predicate R@100 lines to the print string.
    """

    key, match_key, label = '_mean_recall', 'pred_to_gt', '   mR @ %d: %.4f; '
    kind = 'Mean Recall'

    def __init__(self, result_dict, num_rel, ind_to_predicates, print_detail=False):
        super().__init__(result_dict)
        self.num_rel, self.print_detail = int(num_rel), print_detail
        self.rel_name_list = list(ind_to_predicates)[1:]

    def register_container(self, mode):
        """``<mode><key>`` (``{K: float}``), ``..._collect`` (``{K: [[per-image] per
        predicate]}``, index 0 = all predicates) and ``..._list`` (``{K: [per predicate]}``)."""
        self.result_dict[mode + self.key] = {k: 0.0 for k in TOP_KS}
        self.result_dict[mode + self.key + '_collect'] = {
            k: [[] for _ in range(self.num_rel)] for k in TOP_KS}
        self.result_dict[mode + self.key + '_list'] = {k: [] for k in TOP_KS}

    def generate_print_string(self, mode):
        """SGB's line, plus the per-predicate ``(name:R@100)`` details when asked."""
        text = self._line(self.key, self.label, mode, self.kind, value=float)
        if self.print_detail:
            text += '----------------------- Details ------------------------\n'
            for name, r in zip(self.rel_name_list,
                               self.result_dict[mode + self.key + '_list'][100]):
                text += '({}:{:.4f}) '.format(str(name), r)
            text += '\n--------------------------------------------------------\n'
        return text

    def collect_mean_recall_items(self, global_container, local_container, mode):
        """Append this image's recall of each predicate present in its ground truth."""
        gt_labels = local_container['gt_rels'][:, 2].astype(np.int64)
        if gt_labels.size and (gt_labels.min() < 0 or gt_labels.max() >= self.num_rel):
            raise ValueError('ground-truth predicate {} outside [0, {}): num_rel (MODEL.'
                             'ROI_RELATION_HEAD.NUM_CLASSES) does not fit the dataset'
                             .format(int(gt_labels.max()), self.num_rel))
        count = np.bincount(gt_labels, minlength=self.num_rel)
        count[0] = len(gt_labels)
        collect = self.result_dict[mode + self.key + '_collect']
        for k in collect:
            hit_rows = matched_gt(local_container[self.match_key], k)
            hit = np.bincount(gt_labels[hit_rows], minlength=self.num_rel)
            hit[0] = len(hit_rows)
            for n in np.where(count > 0)[0]:
                collect[k][n].append(float(hit[n] / count[n]))

    def calculate_mean_recall(self, mode):
        """Fill ``<mode><key>`` and ``..._list`` from the collected per-image recalls."""
        collect = self.result_dict[mode + self.key + '_collect']
        for k in self.result_dict[mode + self.key]:
            per_pred = [float(np.mean(c)) if c else 0.0 for c in collect[k][1:]]
            self.result_dict[mode + self.key + '_list'][k] = per_pred
            self.result_dict[mode + self.key][k] = sum(per_pred) / float(self.num_rel - 1)


class SGNGMeanRecall(SGMeanRecall):
    """ng-mR@K: :class:`SGMeanRecall` on the no-graph-constraint matches."""

    key, match_key, label = '_ng_mean_recall', 'nogc_pred_to_gt', 'ng-mR @ %d: %.4f; '
    kind = 'No Graph Constraint Mean Recall'


class SGAccumulateRecall(SceneGraphEvaluation):
    """aR@K: hits over ground truth summed over the whole dataset (not per image).

    SGB's class reads ``<mode>_recall_hit`` / ``_recall_count``, which nothing fills (their
    registration is commented out), so it fails with ``KeyError``; here it keeps those
    totals itself (:meth:`accumulate_items`). SGB's ``do_vg_evaluation`` does not use it.
    """

    def register_container(self, mode):
        """``<mode>_accumulate_recall`` (``{K: float}``) and the ``_recall_hit`` /
        ``_recall_count`` totals (``{K: [total]}``, SGB's index-0 layout)."""
        self.result_dict[mode + '_accumulate_recall'] = {k: 0.0 for k in TOP_KS}
        self.result_dict[mode + '_recall_hit'] = {k: [0] for k in TOP_KS}
        self.result_dict[mode + '_recall_count'] = {k: [0] for k in TOP_KS}

    def generate_print_string(self, mode):
        """``SGG eval:    aR @ 20: ...  type=Accumulate Recall.``"""
        return self._line('_accumulate_recall', '   aR @ %d: %.4f; ', mode,
                          'Accumulate Recall', value=float)

    def accumulate_items(self, global_container, local_container, mode):
        """Add this image's hits and ground-truth count (after :class:`SGRecall`)."""
        for k in TOP_KS:
            self.result_dict[mode + '_recall_hit'][k][0] += len(
                matched_gt(local_container['pred_to_gt'], k))
            self.result_dict[mode + '_recall_count'][k][0] += int(
                local_container['gt_rels'].shape[0])

    def calculate_accumulate(self, mode):
        """``hit / (count + 1e-10)`` per K, as SGB."""
        for k in self.result_dict[mode + '_accumulate_recall']:
            self.result_dict[mode + '_accumulate_recall'][k] = (
                float(self.result_dict[mode + '_recall_hit'][k][0])
                / float(self.result_dict[mode + '_recall_count'][k][0] + 1e-10))
