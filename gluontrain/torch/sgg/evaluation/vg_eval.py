"""Visual Genome evaluation as Scene-Graph-Benchmark's ``do_vg_evaluation`` (``vg_eval.py``).

Detection AP@0.5 through pycocotools on a COCO object built in memory from the ground truth
(SGB's "fauxcoco"), then the relation metrics of :mod:`.sgg_eval` image by image, SGB's
evaluation block logged, ``eval_results.pytorch`` / ``visual_info.json`` /
``result_dict.pytorch`` written in ``output_folder`` (staged writes), and R@100 of the mode
returned (SGB's validation score).

Differences from SGB (docs/faithfulness.md): the zero-shot triplets are an argument, not a
file read from SGB's source tree; an image with ground-truth relations but no predicted pair
counts recall 0 (SGB skips it, inflating every recall; ``skip_images_without_predictions=True``
restores that); COCO annotation ids start at 1 (SGB's id 0 makes the dataset's first
ground-truth box unmatchable; ``coco_ids_from_zero=True`` restores that); no detection at
all gives mAP 0.0 (SGB's ``loadRes`` fails on it); the caller's ``predictions`` list is not
overwritten with the resized boxes.
"""
import json
import logging
import os

import numpy as np

from ....core.checkpoint import atomic_write
from ....core.coco_eval import coco_ground_truth, run_coco_eval
from ...checkpoint import save_file
from ..config_values import relation_mode
from .sgg_eval import (SGMeanRecall, SGNGMeanRecall, SGNGZeroShotRecall, SGNoGraphConstraintRecall,
                       SGPairAccuracy, SGRecall, SGZeroShotRecall, TOP_KS, mean_or_nan, to_numpy as _np)
from .zeroshot import load_zeroshot_triplets

__all__ = ['MODES', 'do_vg_evaluation', 'evaluate_detection', 'build_evaluators',
           'evaluate_relations', 'evaluate_relation_of_one_image', 'save_output',
           'relation_metrics']

MODES = ('predcls', 'sgcls', 'sgdet', 'phrdet')
RULE = '=' * 100 + '\n'


def evaluate_detection(groundtruths, predictions, ind_to_classes, mode,
                       coco_ids_from_zero=False):
    """COCO AP at IoU 0.5 of the object detections, as SGB's fauxcoco block.

    Parameters
    ----------
    groundtruths, predictions : list of BoxList
        Same image sizes; predictions carry ``pred_labels`` / ``pred_scores`` (PredCls:
        ``labels`` with score 1, as SGB).
    ind_to_classes : list of str
        Background first.
    mode : str
    coco_ids_from_zero : bool
        SGB numbers the ground-truth annotations from 0; pycocotools records a match as the
        matched annotation's id and reads id 0 as "no match", so a detection of the first
        ground-truth box of the dataset is always a false positive there. Annotation ids
        start at 1 here; ``True`` restores SGB's numbering (and numbers).

    Returns
    -------
    (float, str)
        ``coco_eval.stats[1]`` and pycocotools' summary table.
    """
    anns = []
    for image_id, gt in enumerate(groundtruths):
        for cls, box in zip(_np(gt.get_field('labels')).tolist(),
                            _np(gt.convert('xyxy').bbox).tolist()):
            w, h = box[2] - box[0] + 1, box[3] - box[1] + 1
            anns.append({'area': w * h, 'bbox': [box[0], box[1], w, h], 'category_id': cls,
                         'id': len(anns) + (0 if coco_ids_from_zero else 1),
                         'image_id': image_id, 'iscrowd': 0})
    fauxcoco = coco_ground_truth({
        'info': {'description': 'use coco script for vg detection evaluation'},
        'images': [{'id': i} for i in range(len(groundtruths))],
        'categories': [{'supercategory': 'person', 'id': i, 'name': name}
                       for i, name in enumerate(ind_to_classes) if name != '__background__'],
        'annotations': anns,
    })
    rows = []
    for image_id, pred in enumerate(predictions):
        box = _np(pred.convert('xywh').bbox)
        if mode == 'predcls':
            label = _np(pred.get_field('labels') if pred.has_field('labels')
                        else pred.get_field('pred_labels'))
            score = np.ones(label.shape[0])
        else:
            label, score = _np(pred.get_field('pred_labels')), _np(pred.get_field('pred_scores'))
        if not len(label) == len(score) == len(box):
            raise ValueError('prediction {}: {} boxes, {} labels, {} scores'.format(
                image_id, len(box), len(label), len(score)))
        rows.append(np.column_stack((np.full(len(box), image_id), box, score, label)))
    rows = np.concatenate(rows, 0) if rows else np.zeros((0, 7))
    if len(rows) == 0:
        return 0.0, 'no detections: mAP 0.0\n'
    coco_eval, printed = run_coco_eval(fauxcoco, rows, img_ids=range(len(groundtruths)))
    return float(coco_eval.stats[1]), printed


def build_evaluators(result_dict, mode, num_rel_category, ind_to_predicates):
    """SGB's evaluator dict (``eval_recall``, ``eval_nog_recall``, ``eval_zeroshot_recall``,
    ``eval_ng_zeroshot_recall``, ``eval_pair_accuracy``, ``eval_mean_recall``,
    ``eval_ng_mean_recall``), containers registered for ``mode``."""
    mean_args = (result_dict, num_rel_category, ind_to_predicates)
    evaluator = {
        'eval_recall': SGRecall(result_dict),
        'eval_nog_recall': SGNoGraphConstraintRecall(result_dict),
        'eval_zeroshot_recall': SGZeroShotRecall(result_dict),
        'eval_ng_zeroshot_recall': SGNGZeroShotRecall(result_dict),
        'eval_pair_accuracy': SGPairAccuracy(result_dict),
        'eval_mean_recall': SGMeanRecall(*mean_args, print_detail=True),
        'eval_ng_mean_recall': SGNGMeanRecall(*mean_args, print_detail=True),
    }
    for e in evaluator.values():
        e.register_container(mode)
    return evaluator


def _check_pairs(pairs, num_boxes, what, field='rel_pair_idxs'):
    if pairs.size and (pairs.min() < 0 or pairs.max() >= num_boxes):
        raise ValueError('{} points at box {} but the image has {} {} boxes'.format(
            field, int(pairs.max()) if pairs.max() >= num_boxes else int(pairs.min()),
            num_boxes, what))


def evaluate_relation_of_one_image(groundtruth, prediction, global_container, evaluator):
    """Run every evaluator on one image (SGB's function of this name).

    ``global_container`` holds ``mode``, ``iou_thres``, ``zeroshot_triplet`` and
    ``skip_images_without_predictions``. An image without ground-truth relation adds
    nothing to any metric.
    """
    mode = global_container['mode']
    local = {'gt_rels': _np(groundtruth.get_field('relation_tuple'), np.int64).reshape(-1, 3)}
    if len(local['gt_rels']) == 0:
        return
    local['gt_boxes'] = _np(groundtruth.convert('xyxy').bbox)
    local['gt_classes'] = _np(groundtruth.get_field('labels'), np.int64)
    _check_pairs(local['gt_rels'][:, :2], len(local['gt_boxes']), 'ground-truth', 'relation_tuple')
    local['pred_rel_inds'] = _np(prediction.get_field('rel_pair_idxs'), np.int64).reshape(-1, 2)
    local['rel_scores'] = _np(prediction.get_field('pred_rel_scores'))
    if local['rel_scores'].ndim != 2 or len(local['rel_scores']) != len(local['pred_rel_inds']):
        raise ValueError('pred_rel_scores must be (#rel_pair_idxs, num_rel) = ({}, ...), got {}'
                         .format(len(local['pred_rel_inds']), local['rel_scores'].shape))
    local['pred_boxes'] = _np(prediction.convert('xyxy').bbox)
    local['pred_classes'] = _np(prediction.get_field('pred_labels'), np.int64)
    local['obj_scores'] = _np(prediction.get_field('pred_scores'))

    if mode != 'sgdet':
        evaluator['eval_pair_accuracy'].prepare_gtpair(local)
    evaluator['eval_zeroshot_recall'].prepare_zeroshot(global_container, local)
    evaluator['eval_ng_zeroshot_recall'].prepare_zeroshot(global_container, local)

    if mode == 'predcls':
        _check_pairs(local['pred_rel_inds'], len(local['gt_boxes']), 'ground-truth (PredCls)')
        local.update(pred_boxes=local['gt_boxes'], pred_classes=local['gt_classes'],
                     obj_scores=np.ones(local['gt_classes'].shape[0]))
    elif mode == 'sgcls':
        if local['gt_boxes'].shape[0] != local['pred_boxes'].shape[0]:
            logging.getLogger(__name__).warning(
                'Num of GT boxes is not matching with num of pred boxes in SGCLS')
    elif mode not in ('sgdet', 'phrdet'):
        raise ValueError('invalid mode {!r}: one of {}'.format(mode, MODES))
    if mode != 'predcls':
        _check_pairs(local['pred_rel_inds'], len(local['pred_boxes']), 'predicted')
    if len(local['pred_rel_inds']) == 0 and global_container.get(
            'skip_images_without_predictions', False):
        return
    # graph-constrained recall first: it fills gt_triplets and pred_to_gt for the others
    local = evaluator['eval_recall'].calculate_recall(global_container, local, mode)
    evaluator['eval_nog_recall'].calculate_recall(global_container, local, mode)
    evaluator['eval_pair_accuracy'].calculate_recall(global_container, local, mode)
    evaluator['eval_mean_recall'].collect_mean_recall_items(global_container, local, mode)
    evaluator['eval_ng_mean_recall'].collect_mean_recall_items(global_container, local, mode)
    evaluator['eval_zeroshot_recall'].calculate_recall(global_container, local, mode)
    evaluator['eval_ng_zeroshot_recall'].calculate_recall(global_container, local, mode)


def evaluate_relations(groundtruths, predictions, mode, num_rel_category, ind_to_predicates,
                       zeroshot_triplet=None, iou_thres=0.5, use_gt_box=None,
                       skip_images_without_predictions=False):
    """All relation metrics over a dataset.

    Parameters
    ----------
    groundtruths, predictions : list of BoxList
        Per image, boxes in the same image size. Ground truth: ``labels``,
        ``relation_tuple`` (#rel, 3). Predictions: ``pred_labels``, ``pred_scores``,
        ``rel_pair_idxs`` (#pred, 2, best first), ``pred_rel_scores`` (#pred, num_rel).
    mode : {'predcls', 'sgcls', 'sgdet', 'phrdet'}
    num_rel_category : int
        Predicates including background.
    ind_to_predicates : list of str
    zeroshot_triplet : array (Z, 3), optional
        ``(sub_class, obj_class, predicate)`` rows; none: zR / ng-zR are ``nan``.
    iou_thres : float
    use_gt_box : bool, optional
        Print the A@K line (SGB: when ``USE_GT_BOX``); default: ``mode`` is not sgdet/phrdet.
    skip_images_without_predictions : bool
        SGB's behaviour: an image with no predicted pair adds nothing (instead of recall 0).

    Returns
    -------
    (dict, str)
        SGB's ``result_dict`` and the relation part of its evaluation block.
    """
    if mode not in MODES:
        raise ValueError('invalid mode {!r}: one of {}'.format(mode, MODES))
    if len(groundtruths) != len(predictions):
        raise ValueError('{} ground truths but {} predictions'.format(
            len(groundtruths), len(predictions)))
    result_dict = {}
    evaluator = build_evaluators(result_dict, mode, num_rel_category, ind_to_predicates)
    zeroshot = np.zeros((0, 3), np.int64) if zeroshot_triplet is None else \
        np.asarray(zeroshot_triplet, np.int64).reshape(-1, 3)
    global_container = {'zeroshot_triplet': zeroshot, 'result_dict': result_dict, 'mode': mode,
                        'num_rel_category': num_rel_category, 'iou_thres': iou_thres,
                        'skip_images_without_predictions': skip_images_without_predictions}
    for gt, pred in zip(groundtruths, predictions):
        evaluate_relation_of_one_image(gt, pred, global_container, evaluator)
    evaluator['eval_mean_recall'].calculate_mean_recall(mode)
    evaluator['eval_ng_mean_recall'].calculate_mean_recall(mode)
    text = ''.join(evaluator[name].generate_print_string(mode) for name in (
        'eval_recall', 'eval_nog_recall', 'eval_zeroshot_recall', 'eval_ng_zeroshot_recall',
        'eval_mean_recall', 'eval_ng_mean_recall'))
    if use_gt_box or (use_gt_box is None and mode in ('predcls', 'sgcls')):
        text += evaluator['eval_pair_accuracy'].generate_print_string(mode)
    return result_dict, text + RULE


def relation_metrics(result_dict, mode):
    """Flat ``{'R@20': ..., 'ngR@20': ..., 'zR@20', 'ng-zR@20', 'mR@20', 'ng-mR@20',
    'A@20', ...}`` of a ``result_dict`` (means over images; ``nan`` where nothing counted),
    for metric logs."""
    out = {'{}@{}'.format(name, k): value(result_dict[mode + key][k]) for name, key, value in (
        ('R', '_recall', mean_or_nan), ('ngR', '_recall_nogc', mean_or_nan), ('zR', '_zeroshot_recall', mean_or_nan),
        ('ng-zR', '_ng_zeroshot_recall', mean_or_nan), ('mR', '_mean_recall', float),
        ('ng-mR', '_ng_mean_recall', float)) for k in TOP_KS}
    for k in TOP_KS:
        hit, count = result_dict[mode + '_accuracy_hit'][k], \
            result_dict[mode + '_accuracy_count'][k]
        out['A@{}'.format(k)] = float(np.sum(hit) / np.sum(count)) if np.sum(count) else \
            float('nan')
    return out


def save_output(output_folder, groundtruths, predictions, dataset):
    """``eval_results.pytorch`` (``{'groundtruths', 'predictions'}``) and
    ``visual_info.json`` (image file, ``[x0, y0, x1, y1, class name]`` per box), as SGB."""
    if not output_folder:
        return
    save_file(os.path.join(output_folder, 'eval_results.pytorch'),
              {'groundtruths': groundtruths, 'predictions': predictions})
    names = getattr(dataset, 'categories', None) or dict(enumerate(dataset.ind_to_classes))
    filenames = getattr(dataset, 'filenames', None)

    def named_boxes(boxlist, field):
        return [b + [names[int(c)]] for b, c in zip(_np(boxlist.convert('xyxy').bbox).tolist(),
                                                    _np(boxlist.get_field(field)).tolist())]
    visual_info = [{
        'img_file': os.path.abspath(filenames[image_id]) if filenames is not None else None,
        'groundtruth': named_boxes(gt, 'labels'), 'prediction': named_boxes(pred, 'pred_labels'),
    } for image_id, (gt, pred) in enumerate(zip(groundtruths, predictions))]
    atomic_write(os.path.join(output_folder, 'visual_info.json'),
                 lambda f: json.dump(visual_info, f), mode='w')


def do_vg_evaluation(cfg, dataset, predictions, output_folder, logger, iou_types,
                     zeroshot_triplet=None, mode=None, skip_images_without_predictions=False,
                     coco_ids_from_zero=False, return_result_dict=False):
    """SGB's Visual Genome evaluation: detection AP, relation metrics, the logged block.

    Parameters
    ----------
    cfg : yacs CfgNode
        Reads ``MODEL.ROI_RELATION_HEAD.{USE_GT_BOX, USE_GT_OBJECT_LABEL, NUM_CLASSES}`` and
        ``TEST.RELATION.IOU_THRESHOLD``.
    dataset : VGDataset-like
        ``get_img_info(i)`` (``width``, ``height``), ``get_groundtruth(i, evaluation=True)``,
        ``ind_to_classes``, ``ind_to_predicates`` (``filenames``, ``categories`` optional).
    predictions : list of BoxList
        One per dataset image in order, in the network's input size (resized here to the
        original image size as SGB does).
    output_folder : str or None
        Where ``eval_results.pytorch``, ``visual_info.json`` and ``result_dict.pytorch``
        go; nothing is written when empty.
    logger : logging.Logger or None
    iou_types : sequence of str
        ``'bbox'`` and/or ``'relations'``.
    zeroshot_triplet : str or array (Z, 3), optional
        A zero-shot triplet file (:func:`.zeroshot.save_zeroshot_triplets`, or SGB's
        ``zeroshot_triplet.pytorch``) or the array; none: zR and ng-zR print ``nan``.
    mode : str, optional
        Overrides the mode read from ``cfg`` (``'phrdet'`` is reachable only this way).
    skip_images_without_predictions : bool
        SGB's behaviour for images without predicted pairs (see module docstring).
    coco_ids_from_zero : bool
        SGB's annotation numbering (see :func:`evaluate_detection`).
    return_result_dict : bool
        Also return the ``result_dict`` (``None`` without ``'relations'``).

    Returns
    -------
    float or (float, dict)
        R@100 of the mode with ``'relations'`` (SGB), else the detection mAP@0.5, else -1.
    """
    logger = logger or logging.getLogger(__name__)
    mode = mode or relation_mode(cfg)
    if mode not in MODES:
        raise ValueError('invalid mode {!r}: one of {}'.format(mode, MODES))
    if len(predictions) > len(dataset):
        raise ValueError('{} predictions for a dataset of {} images'.format(
            len(predictions), len(dataset)))
    if isinstance(zeroshot_triplet, (str, os.PathLike)):
        zeroshot_triplet = load_zeroshot_triplets(zeroshot_triplet)
    groundtruths, resized = [], []
    for image_id, prediction in enumerate(predictions):
        info = dataset.get_img_info(image_id)
        resized.append(prediction.resize((info['width'], info['height'])))
        groundtruths.append(dataset.get_groundtruth(image_id, evaluation=True))
    save_output(output_folder, groundtruths, resized, dataset)

    result_str = '\n' + RULE
    m_ap, result_dict = None, None
    if 'bbox' in iou_types:
        m_ap, table = evaluate_detection(groundtruths, resized, dataset.ind_to_classes, mode,
                                         coco_ids_from_zero)
        logger.info(table)
        result_str += 'Detection evaluation mAp=%.4f\n' % m_ap + RULE
    if 'relations' in iou_types:
        result_dict, text = evaluate_relations(
            groundtruths, resized, mode, cfg.MODEL.ROI_RELATION_HEAD.NUM_CLASSES,
            dataset.ind_to_predicates, zeroshot_triplet, cfg.TEST.RELATION.IOU_THRESHOLD,
            use_gt_box=bool(cfg.MODEL.ROI_RELATION_HEAD.USE_GT_BOX),
            skip_images_without_predictions=skip_images_without_predictions)
        result_str += text
    logger.info(result_str)

    if result_dict is not None:
        if output_folder:
            save_file(os.path.join(output_folder, 'result_dict.pytorch'), result_dict)
        score = mean_or_nan(result_dict[mode + '_recall'][100])
    elif m_ap is not None:
        score = float(m_ap)
    else:
        score = -1
    return (score, result_dict) if return_result_dict else score
