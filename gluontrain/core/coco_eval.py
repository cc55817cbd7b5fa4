"""COCO box AP as GluonCV's ``COCODetectionMetric`` computes and prints it, numpy + pycocotools.

One metric for both backends (the MXNet recipe adapts its batched NDArray ``update`` to this
per-image one). What it keeps of GluonCV's, so that the same detections print the same
table: the images are the validation split's in ``sorted(coco.getImgIds())`` order, one
``update`` per image; padding rows (label < 0), classes outside the split and scores below
``score_thresh`` (0.05) are dropped; boxes are rescaled from the network's input
``data_shape`` ``(height, width)`` to the image's own size and written as ``[x, y, x1 - x + 1,
y1 - y + 1]`` (GluonCV's ``+1`` width); ``get()`` returns the 12 summary lines of
``COCOeval.summarize()`` under ``'~~~~ Summary metrics ~~~~\\n'``, one AP[.5:.95] per class
(``'{:.1f}'`` percent, ``nan`` for a class without ground truth) and the mean AP last, as the
string GluonCV's training script turns into ``current_map`` with ``float()``. The results go
to pycocotools as a list, not through a JSON file beside ``--save-prefix`` that GluonCV writes
and deletes (docs/faithfulness.md, "COCO").
"""
import contextlib
import io
import warnings

import numpy as np

__all__ = ['COCOEvaluator', 'SUMMARY_NAME', 'mean_ap_name', 'coco_ground_truth', 'run_coco_eval']

SUMMARY_NAME = '~~~~ Summary metrics ~~~~\n'
_IOU_LO, _IOU_HI = 0.5, 0.95


def mean_ap_name(lo=_IOU_LO, hi=_IOU_HI):
    """The name of the last entry: ``'~~~~ MeanAP @ IoU=[0.50,0.95] ~~~~\\n'``."""
    return '~~~~ MeanAP @ IoU=[{:.2f},{:.2f}] ~~~~\n'.format(lo, hi)


def coco_ground_truth(dataset):
    """A pycocotools ``COCO`` of the ground-truth dict ``dataset`` (``images``,
    ``annotations``, ``categories``), indexed without its prints."""
    from pycocotools.coco import COCO  # pylint: disable=import-outside-toplevel
    gt = COCO()
    gt.dataset = dataset
    with contextlib.redirect_stdout(io.StringIO()):
        gt.createIndex()
    return gt


def run_coco_eval(gt, results, img_ids=None, summarize=True, quiet=True):
    """pycocotools' box evaluation, the one runner of every recipe's COCO AP: ``loadRes``,
    ``COCOeval(gt, results, 'bbox')`` (on ``img_ids`` when given), ``evaluate``,
    ``accumulate`` and, with ``summarize``, ``summarize``.

    Parameters
    ----------
    gt : pycocotools.coco.COCO
    results : list of dict or numpy.ndarray
        COCO result records, or ``loadRes``' ``(N, 7)`` rows.
    img_ids : sequence of int, optional
    summarize : bool
    quiet : bool
        Capture pycocotools' prints (returned) instead of letting them reach stdout.

    Returns
    -------
    (COCOeval, str)
        The evaluation (``stats`` filled when summarized) and what pycocotools printed
        (empty when not ``quiet``).
    """
    from pycocotools.cocoeval import COCOeval  # pylint: disable=import-outside-toplevel
    out = io.StringIO()
    with contextlib.redirect_stdout(out) if quiet else contextlib.nullcontext():
        coco_eval = COCOeval(gt, gt.loadRes(results), 'bbox')
        if img_ids is not None:
            coco_eval.params.imgIds = list(img_ids)
        coco_eval.evaluate()
        coco_eval.accumulate()
        if summarize:
            coco_eval.summarize()
    return coco_eval, out.getvalue()


def _data_shape(data_shape):
    if isinstance(data_shape, (tuple, list)):
        if len(data_shape) != 2:
            raise ValueError('data_shape must be (height, width), got {!r}'.format(data_shape))
        return float(data_shape[0]), float(data_shape[1])
    if not data_shape:
        return None
    raise ValueError('data_shape must be None or (height, width), got {!r}'.format(data_shape))


def _iou_index(coco_eval, thr):
    ious = coco_eval.params.iouThrs
    return int(np.where((ious > thr - 1e-5) & (ious < thr + 1e-5))[0][0])


class COCOEvaluator:
    """Accumulates one image's detections at a time, then scores them with ``COCOeval``.

    Parameters
    ----------
    dataset
        The validation split: ``coco`` (its ``pycocotools.coco.COCO``), ``classes`` and
        ``contiguous_id_to_json`` (:class:`gluontrain.yolo3.coco.COCODetection`, or GluonCV's).
    score_thresh : float
        Detections below it are not scored (GluonCV: 0.05).
    data_shape : (int, int), optional
        ``(height, width)`` of the network's input, whose boxes are rescaled to each image;
        None: the boxes are in the image's pixels already.
    """

    def __init__(self, dataset, score_thresh=0.05, data_shape=None):
        self.dataset = dataset
        self._img_ids = sorted(dataset.coco.getImgIds())
        self._score_thresh = score_thresh
        self._data_shape = _data_shape(data_shape)
        self._json_id = dict(dataset.contiguous_id_to_json)
        self.reset()

    def reset(self):
        """Forget the detections (a new pass over the split)."""
        self._current_id = 0
        self._results = []

    def update(self, det_boxes, det_scores, det_labels, *ground_truth):
        """Add the next image's detections (the ground truth is the split's own: the extra
        arguments, given by loops written for :class:`~.voc_eval.VOCEvaluator`, are unused).

        Parameters
        ----------
        det_boxes : array [D, 4]
            ``xmin, ymin, xmax, ymax`` in the input's pixels (``data_shape``).
        det_scores : array [D]
        det_labels : array [D]
            Contiguous class index; < 0 marks padding.
        """
        del ground_truth
        if self._current_id >= len(self._img_ids):
            raise ValueError('COCOEvaluator.update: more images than the {} of the split; '
                             'call reset() before a new pass'.format(len(self._img_ids)))
        labels = np.asarray(det_labels).reshape(-1)
        valid = np.where(labels >= 0)[0]
        boxes = np.asarray(det_boxes).reshape(-1, 4)[valid].astype(np.float64)
        labels = labels[valid].astype(int)
        scores = np.asarray(det_scores).reshape(-1)[valid].astype(np.float64)
        image_id = self._img_ids[self._current_id]
        self._current_id += 1
        if self._data_shape is not None:
            entry = self.dataset.coco.loadImgs(image_id)[0]
            height_scale = float(entry['height']) / self._data_shape[0]
            width_scale = float(entry['width']) / self._data_shape[1]
        else:
            height_scale = width_scale = 1.0
        for box, label, score in zip(boxes, labels, scores):
            if label not in self._json_id or score < self._score_thresh:
                continue
            box[[0, 2]] *= width_scale
            box[[1, 3]] *= height_scale
            box[2:4] -= box[:2] - 1
            self._results.append({'image_id': image_id, 'category_id': self._json_id[label],
                                  'bbox': box.tolist(), 'score': score})

    def evaluate(self):
        """``COCOeval`` of the detections so far (evaluated and accumulated)."""
        if self._current_id != len(self._img_ids):
            warnings.warn('Recorded {} out of {} validation images, incomplete results'.format(
                self._current_id, len(self._img_ids)))
        # an empty run still scores: one dummy detection of no class, as GluonCV pushes
        results = [dict(r) for r in self._results] or [
            {'image_id': self._img_ids[0], 'category_id': 0, 'bbox': [0, 0, 0, 0], 'score': 0}]
        return run_coco_eval(self.dataset.coco, results, summarize=False, quiet=False)[0]

    def get(self):
        """``(names, values)``: the summary text, AP per class, mean AP (see the module)."""
        try:
            coco_eval = self.evaluate()
        except IndexError:  # no image at all: GluonCV's answer
            return ['mAP'], ['0.0']
        lo, hi = _iou_index(coco_eval, _IOU_LO), _iou_index(coco_eval, _IOU_HI)
        # precision: (iou, recall, class, area range, max dets); area 'all', 100 detections
        precision = coco_eval.eval['precision'][lo:hi + 1, :, :, 0, 2]
        summary = io.StringIO()
        with contextlib.redirect_stdout(summary):
            coco_eval.summarize()
        names, values = [SUMMARY_NAME], [summary.getvalue().strip()]
        with warnings.catch_warnings():
            warnings.simplefilter('ignore', RuntimeWarning)  # the mean of nothing: nan
            for index, name in enumerate(self.dataset.classes):
                per_class = precision[:, :, index]
                names.append(name)
                values.append('{:.1f}'.format(100 * np.mean(per_class[per_class > -1])))
            names.append(mean_ap_name())
            values.append('{:.1f}'.format(100 * np.mean(precision[precision > -1])))
        return names, values
