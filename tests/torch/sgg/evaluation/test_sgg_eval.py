"""SGB's scene-graph metrics on small fixed cases whose numbers are worked out by hand below.

Classes: 1 man, 2 horse, 3 hat, 4 tree, 5 dog. Predicates: 1 on, 2 has, 3 near, 4 wearing
(num_rel = 5 with background). The same cases run through SGB's own code in
test_vg_eval.py::test_hand_cases_equal_sgb (mirror available) and give the same result_dict.
"""
import numpy as np
import pytest

from gluontrain.torch.sgg.evaluation.sgg_eval import (SGAccumulateRecall, SGRecall,
                                                      compute_pred_matches, bbox_overlaps,
                                                      intersect_2d, matched_gt)
from gluontrain.torch.sgg.evaluation.vg_eval import evaluate_relations, relation_metrics
from sgg_eval_support import PREDICATES, FakeVG, make_prediction

NUM_REL = len(PREDICATES)
ZEROSHOT = np.array([[1, 3, 4]])          # (man, hat, wearing): sub_class, obj_class, pred


def case_duplicates():
    """PredCls. GT: man-on-horse twice (duplicate rows) and man-wearing-hat (zero-shot).

    Graph constrained (best predicate per pair): (0,1) on -> hits GT 0 AND 1, (0,2) has ->
    miss, (1,0) near -> miss: R@K = 2/3. No graph constraint: all 12 (pair, predicate)
    candidates are in the top 20, (0,2) wearing hits GT 2: ngR@K = 3/3.
    zR = 0/1 (wearing missed), ng-zR = 1/1. mR = (on 1 + has 0 + near 0 + wearing 0) / 4
    = 0.25 (has and near never appear in the GT and count 0); ng-mR = (1 + 0 + 0 + 1) / 4.
    A@K: predictions on GT pairs (0,1), (0,2) hit GT {0, 1}: 2 / 3.
    """
    gt = {'width': 50, 'height': 50, 'labels': [1, 2, 3],
          'boxes': [[0, 0, 9, 9], [20, 20, 39, 39], [0, 0, 4, 4]],
          'rels': [[0, 1, 1], [0, 1, 1], [0, 2, 4]]}
    pred = make_prediction(gt['boxes'], (50, 50), [1, 2, 3], [1, 1, 1],
                           [[0, 1], [0, 2], [1, 0]],
                           [[0, .6, .1, .3, 0], [0, .1, .5, 0, .4], [0, 0, 0, .9, .1]],
                           labels=[1, 2, 3])
    return gt, pred


def case_truncation():
    """PredCls, 6 boxes, 30 ordered pairs; GT (4,5) on. Pair (4,5) is the 25th prediction
    (on .9), the 29 others say has .95: R@20 = 0, R@50 = R@100 = 1. No graph constraint:
    29 has-candidates at .95 come first, (4,5) on is the 30th: ngR@20 = 0, ngR@50 = 1.
    A@K keeps only predictions on GT pairs, then their first K: (4,5) alone, A@20 = 1."""
    boxes = [[10 * i, 0, 10 * i + 8, 8] for i in range(6)]
    gt = {'width': 60, 'height': 10, 'labels': [1, 2, 3, 4, 5, 1], 'boxes': boxes,
          'rels': [[4, 5, 1]]}
    pairs = [(i, j) for i in range(6) for j in range(6) if i != j and (i, j) != (4, 5)]
    pairs.insert(24, (4, 5))
    scores = [[0, .9, .1, 0, 0] if p == (4, 5) else [0, .05, .95, 0, 0] for p in pairs]
    return gt, make_prediction(boxes, (60, 10), gt['labels'], [1] * 6, pairs, scores,
                               labels=gt['labels'])


def case_iou_boundary():
    """SGDet, GT man [0,0,9,9] near tree [20,0,29,9]. Predicted man boxes: [0,0,8,4] with the
    +1 convention overlaps 9*5 / 10*10 = 0.45 (miss), [0,0,9,4] 10*5 / 100 = 0.5 exactly
    (hit; without +1 it would be 36 / 81 = 0.44). Pairs: (0,1) first (miss), (2,1) hit."""
    gt = {'width': 40, 'height': 20, 'labels': [1, 4], 'boxes': [[0, 0, 9, 9], [20, 0, 29, 9]],
          'rels': [[0, 1, 3]]}
    pred = make_prediction([[0, 0, 8, 4], [20, 0, 29, 9], [0, 0, 9, 4]], (40, 20), [1, 4, 1],
                           [.9, .8, .7], [[0, 1], [2, 1]],
                           [[0, 0, 0, .9, .1], [0, 0, 0, .8, .2]])
    return gt, pred


def run(cases, mode, **kw):
    ds = FakeVG([g for g, _ in cases])
    gts = [ds.get_groundtruth(i, evaluation=True) for i in range(len(ds))]
    return evaluate_relations(gts, [p for _, p in cases], mode, NUM_REL, PREDICATES,
                              zeroshot_triplet=ZEROSHOT, **kw)


def test_duplicate_gt_zero_shot_unseen_predicates_and_graph_constraint():
    rd, _ = run([case_duplicates()], 'predcls')
    for k in (20, 50, 100):
        assert rd['predcls_recall'][k] == [pytest.approx(2 / 3)]
        assert rd['predcls_recall_nogc'][k] == [1.0]
        assert rd['predcls_zeroshot_recall'][k] == [0.0]
        assert rd['predcls_ng_zeroshot_recall'][k] == [1.0]
        assert rd['predcls_mean_recall'][k] == 0.25
        assert rd['predcls_mean_recall_list'][k] == [1.0, 0.0, 0.0, 0.0]
        assert rd['predcls_ng_mean_recall'][k] == 0.5
        assert rd['predcls_ng_mean_recall_list'][k] == [1.0, 0.0, 0.0, 1.0]
        # index 0 collects all predicates of the image; unseen predicates collect nothing
        assert rd['predcls_mean_recall_collect'][k] == [[pytest.approx(2 / 3)], [1.0], [], [],
                                                        [0.0]]
        assert rd['predcls_accuracy_hit'][k] == [2.0]
        assert rd['predcls_accuracy_count'][k] == [3.0]
    m = relation_metrics(rd, 'predcls')
    assert m['R@50'] == pytest.approx(2 / 3) and m['ngR@50'] == 1.0 and m['mR@50'] == 0.25
    assert m['A@100'] == pytest.approx(2 / 3) and m['ng-zR@20'] == 1.0 and m['zR@20'] == 0.0


def test_top_k_truncation_and_pair_accuracy_after_filtering():
    rd, _ = run([case_truncation()], 'predcls')
    assert rd['predcls_recall'] == {20: [0.0], 50: [1.0], 100: [1.0]}
    assert rd['predcls_recall_nogc'] == {20: [0.0], 50: [1.0], 100: [1.0]}
    assert rd['predcls_accuracy_hit'] == {20: [1.0], 50: [1.0], 100: [1.0]}
    # no zero-shot triplet in this image: zR collects nothing (prints nan)
    assert rd['predcls_zeroshot_recall'] == {20: [], 50: [], 100: []}


def test_images_are_averaged_and_mean_recall_averages_per_predicate_over_images():
    rd, _ = run([case_duplicates(), case_truncation()], 'predcls')
    assert rd['predcls_recall'][20] == [pytest.approx(2 / 3), 0.0]
    # on: image 1 -> 2/2, image 2 -> 0/1 at K=20; wearing: 0/1 -> mR@20 = (0.5 + 0) / 4
    assert rd['predcls_mean_recall'][20] == pytest.approx(0.125)
    assert rd['predcls_mean_recall'][50] == pytest.approx(0.25)
    m = relation_metrics(rd, 'predcls')
    # A = summed hits / summed counts: (2 + 1) / (3 + 1)
    assert m['A@20'] == pytest.approx(0.75)


def test_iou_exactly_half_with_plus_one_is_a_hit():
    assert bbox_overlaps([[0, 0, 9, 9]], [[0, 0, 9, 4], [0, 0, 8, 4]]).tolist() == \
        [[0.5, pytest.approx(0.45)]]
    gt, pred = case_iou_boundary()
    rd, _ = run([(gt, pred)], 'sgdet')
    assert rd['sgdet_recall'] == {20: [1.0], 50: [1.0], 100: [1.0]}
    trip = np.array([[1, 3, 4], [1, 3, 4]])
    gt_box = np.array([[0, 0, 9, 9, 20, 0, 29, 9]], dtype=np.float32)
    boxes = np.array([[0, 0, 8, 4, 20, 0, 29, 9], [0, 0, 9, 4, 20, 0, 29, 9]], np.float32)
    assert compute_pred_matches(trip[:1], trip, gt_box, boxes, 0.5) == [[], [0]]
    assert compute_pred_matches(trip[:1], trip, gt_box, boxes, 0.5001) == [[], []]
    # phrase detection: the union boxes [0,0,29,9] of both pairs equal the GT's
    assert compute_pred_matches(trip[:1], trip, gt_box, boxes, 0.5, phrdet=True) == [[0], [0]]
    # a wrong class never matches, whatever the boxes
    assert compute_pred_matches(trip[:1], np.array([[1, 3, 2]] * 2), gt_box, boxes, 0.5) == \
        [[], []]


def test_sgdet_has_no_pair_accuracy_and_ranks_no_graph_constraint_by_object_scores():
    gt, pred = case_iou_boundary()
    rd, text = run([(gt, pred)], 'sgdet')
    assert rd['sgdet_accuracy_hit'][20] == [] and 'A @' not in text
    # candidates: (0,1) near .9*.8*.9=.648, (2,1) near .8*.7*.8=.448, (0,1) wearing .072 ...
    assert rd['sgdet_recall_nogc'][20] == [1.0]


def test_images_without_gt_relations_add_nothing_and_empty_predictions_count_zero():
    gt, pred = case_iou_boundary()
    no_rel = dict(gt, rels=[])
    empty = make_prediction([[0, 0, 9, 9]], (40, 20), [1], [.9], [], [])
    rd, _ = run([(no_rel, pred), (gt, empty)], 'sgdet')
    assert rd['sgdet_recall'][20] == [0.0]
    assert rd['sgdet_mean_recall_collect'][20][3] == [0.0]
    # SGB's behaviour: the image without predicted pairs is skipped
    rd, _ = run([(no_rel, pred), (gt, empty)], 'sgdet', skip_images_without_predictions=True)
    assert rd['sgdet_recall'][20] == []


def test_oracle_every_recall_is_one():
    """Ground-truth triplets as predictions (one-hot predicate scores, GT boxes and labels,
    every predicate present): every recall, mean recall and accuracy is 1.0."""
    images = [
        {'width': 50, 'height': 50, 'labels': [1, 2, 3, 5],
         'boxes': [[0, 0, 9, 9], [20, 20, 39, 39], [0, 0, 4, 4], [30, 0, 45, 12]],
         'rels': [[0, 1, 1], [0, 1, 1], [0, 2, 4], [3, 0, 3]]},
        {'width': 30, 'height': 30, 'labels': [2, 4], 'boxes': [[0, 0, 9, 9], [5, 5, 20, 25]],
         'rels': [[0, 1, 2], [1, 0, 3]]},
    ]
    for mode in ('predcls', 'sgcls', 'sgdet', 'phrdet'):
        cases = []
        for im in images:
            rels = np.array(im['rels'])
            pairs, first = np.unique(rels[:, :2], axis=0, return_index=True)
            scores = np.eye(NUM_REL)[rels[first, 2]]
            cases.append((im, make_prediction(im['boxes'], (im['width'], im['height']),
                                              im['labels'], [1.0] * len(im['labels']), pairs,
                                              scores, labels=im['labels'])))
        rd, _ = run(cases, mode)
        m = relation_metrics(rd, mode)
        for name, value in m.items():
            if name.startswith('A@') and mode == 'sgdet':
                assert np.isnan(value)   # SGB collects A@K in every mode but sgdet
            else:
                assert value == 1.0, (mode, name)


def test_print_strings_are_sgb_format():
    _, text = run([case_duplicates()], 'predcls')
    lines = text.split('\n')
    assert lines[0] == ('SGG eval:     R @ 20: 0.6667;     R @ 50: 0.6667;     R @ 100: 0.6667;'
                        '  for mode=predcls, type=Recall(Main).')
    assert lines[1] == ('SGG eval:  ng-R @ 20: 1.0000;  ng-R @ 50: 1.0000;  ng-R @ 100: 1.0000;'
                        '  for mode=predcls, type=No Graph Constraint Recall(Main).')
    assert lines[2] == ('SGG eval:    zR @ 20: 0.0000;    zR @ 50: 0.0000;    zR @ 100: 0.0000;'
                        '  for mode=predcls, type=Zero Shot Recall.')
    assert lines[3].startswith('SGG eval: ng-zR @ 20: 1.0000; ng-zR @ 50: 1.0000;')
    assert lines[4] == ('SGG eval:    mR @ 20: 0.2500;    mR @ 50: 0.2500;    mR @ 100: 0.2500;'
                        '  for mode=predcls, type=Mean Recall.')
    assert lines[5] == '----------------------- Details ------------------------'
    assert lines[6] == '(on:1.0000) (has:0.0000) (near:0.0000) (wearing:0.0000) '
    assert lines[8].startswith('SGG eval: ng-mR @ 20: 0.5000; ng-mR @ 50: 0.5000;')
    assert lines[10] == '(on:1.0000) (has:0.0000) (near:0.0000) (wearing:1.0000) '
    assert lines[12] == ('SGG eval:     A @ 20: 0.6667;     A @ 50: 0.6667;     A @ 100: 0.6667;'
                         '  for mode=predcls, type=TopK Accuracy.')
    assert lines[13] == '=' * 100 and lines[14] == ''
    _, text = run([case_truncation()], 'predcls')
    assert 'zR @ 20: nan;' in text


def test_accumulate_recall_sums_over_images():
    rd = {}
    acc, rec = SGAccumulateRecall(rd), SGRecall(rd)
    acc.register_container('predcls')
    rec.register_container('predcls')
    assert 'predcls_recall_hit' in rd
    for gt, pred in (case_duplicates(), case_truncation()):
        g = FakeVG([gt]).get_groundtruth(0, evaluation=True)
        local = {'gt_rels': g.get_field('relation_tuple').numpy(),
                 'gt_classes': g.get_field('labels').numpy(), 'gt_boxes': g.bbox.numpy(),
                 'pred_rel_inds': pred.get_field('rel_pair_idxs').numpy(),
                 'rel_scores': pred.get_field('pred_rel_scores').numpy(),
                 'pred_boxes': pred.bbox.numpy(), 'pred_classes': g.get_field('labels').numpy(),
                 'obj_scores': np.ones(len(pred))}
        rec.calculate_recall({'iou_thres': 0.5}, local, 'predcls')
        acc.accumulate_items({}, local, 'predcls')
    acc.calculate_accumulate('predcls')
    # (2 + 0) / (3 + 1) at K=20, (2 + 1) / 4 at K=50 (per-image mean would be 1/3 and 5/6)
    assert rd['predcls_accumulate_recall'][20] == pytest.approx(0.5)
    assert rd['predcls_accumulate_recall'][50] == pytest.approx(0.75)
    assert acc.generate_print_string('predcls').startswith('SGG eval:    aR @ 20: 0.5000;')


def test_helpers():
    assert intersect_2d(np.array([[1, 2], [3, 4]]), np.array([[3, 4], [1, 2], [1, 2]])).tolist() \
        == [[False, True, True], [True, False, False]]
    assert matched_gt([[0, 2], [], [2, 1]], 2) == [0, 2]
    assert matched_gt([], 20) == []
    with pytest.raises(ValueError, match='same columns|equal columns'):
        intersect_2d(np.zeros((2, 3)), np.zeros((2, 2)))


def test_predicate_outside_num_rel_is_a_clear_error():
    gt, pred = case_duplicates()
    ds = FakeVG([gt])
    with pytest.raises(ValueError, match='NUM_CLASSES'):
        evaluate_relations([ds.get_groundtruth(0)], [pred], 'predcls', 4, PREDICATES[:4])
