"""VOC AP: a hand-computed case, and equality with GluonCV's VOC07MApMetric (+1 convention)."""
import math

import numpy as np
import pytest

from gluontrain.core.voc_eval import VOCEvaluator, best_overlap, box_iou, greedy_match, voc_ap


def test_hand_computed_11_point_ap_with_duplicate_and_difficult():
    ev = VOCEvaluator(['a', 'b'])
    # image 0: one gt; a good detection and a duplicate of it (false positive)
    ev.update([[0, 0, 10, 10], [1, 1, 10, 10]], [0.9, 0.8], [0, 0], [[0, 0, 10, 10]], [0])
    # image 1: a difficult gt and a normal one; the match on the difficult one counts as nothing
    ev.update([[20, 20, 30, 30], [0, 0, 10, 10]], [0.7, 0.6], [0, 0],
              [[0, 0, 10, 10], [20, 20, 30, 30]], [0, 0], [1, 0])
    names, values = ev.get()
    # sorted: tp, fp, tp, (ignored) -> rec .5 .5 1 1, prec 1 .5 2/3 2/3
    # 11-point: t = 0..0.5 -> 1 (6 points), t = 0.6..1 -> 2/3 (5 points)
    assert names == ['a', 'b', 'mAP']
    assert values[0] == pytest.approx((6 + 5 * 2 / 3) / 11)
    assert math.isnan(values[1]) and values[2] == values[0]  # no gt for 'b': left out


def test_class_with_ground_truth_but_no_detection_scores_zero_not_minus_one():
    ev = VOCEvaluator(['a', 'b'])
    ev.update([[0, 0, 10, 10]], [0.9], [0], [[0, 0, 10, 10], [5, 5, 9, 9]], [0, 1])
    assert ev.get()[1] == pytest.approx([1.0, 0.0, 0.5])


def test_iou_conventions_and_area_metric():
    b = np.array([[0., 0., 9., 9.]])
    assert box_iou(np.array([0., 0., 9., 9.]), b)[0] == 1.0
    assert box_iou(np.array([0., 0., 4., 9.]), b)[0] == pytest.approx(36 / 81)
    assert box_iou(np.array([0., 0., 4., 9.]), b, plus_one=True)[0] == pytest.approx(50 / 100)
    rec, prec = np.array([0.5, 1.0]), np.array([1.0, 0.5])
    assert voc_ap(rec, prec, use_07_metric=False) == pytest.approx(0.5 * 1 + 0.5 * 0.5)


def test_equals_gluoncv_voc07_metric_on_random_detections():
    from gluontrain.mx import gluoncv  # noqa: F401  (the shim; imports mxnet)
    import mxnet as mx
    from gluoncv.utils.metrics.voc_detection import VOC07MApMetric
    rng = np.random.RandomState(0)
    classes = ['x', 'y', 'z']
    ours = VOCEvaluator(classes, plus_one=True)
    ref = VOC07MApMetric(iou_thresh=0.5, class_names=classes)
    for _ in range(12):
        g = rng.randint(1, 5)
        gxy = rng.uniform(0, 80, (g, 2))
        gt = np.hstack([gxy, gxy + rng.uniform(10, 40, (g, 2))])
        glab = rng.randint(0, 3, g)
        gdiff = (rng.rand(g) < 0.2).astype(float)
        d = rng.randint(0, 8)
        # detections near the ground truth (some hits) and random ones
        src = gt[rng.randint(0, g, d)] + rng.normal(0, 4, (d, 4))
        dlab = np.where(rng.rand(d) < 0.7, glab[rng.randint(0, g, d)], rng.randint(0, 3, d))
        scores = rng.rand(d)
        ours.update(src, scores, dlab, gt, glab, gdiff)
        ref.update(mx.nd.array(src[None]), mx.nd.array(dlab[None, :, None]),
                   mx.nd.array(scores[None, :, None]), mx.nd.array(gt[None]),
                   mx.nd.array(glab[None, :, None]), mx.nd.array(gdiff[None, :, None]))
    names, values = ours.get()
    ref_names, ref_values = ref.get()
    assert names == ref_names
    np.testing.assert_allclose(values, ref_values, rtol=1e-12)
    assert 0.1 < values[-1] < 0.9  # a non-trivial case


def _devkit_aps(images, n_cls, plus_one, use_07_metric):
    """The devkit's per-detection loop (ssd.pytorch's voc_eval), the vectorised one's reference."""
    aps = []
    for cls in range(n_cls):
        npos = sum(int((~d[l == cls]).sum()) for _, _, _, _, l, d in images)
        if npos == 0:
            aps.append(float('nan'))
            continue
        dets = [(i, float(s), b) for i, (bb, ss, ll, _, _, _) in enumerate(images)
                for b, s, lab in zip(bb, ss, ll) if lab == cls]
        if not dets:
            aps.append(0.0)
            continue
        used = [np.zeros(len(l), bool) for *_, l, _ in images]
        tp, fp = np.zeros(len(dets)), np.zeros(len(dets))
        for rank, k in enumerate(np.argsort(-np.array([d[1] for d in dets]), kind='stable')):
            i, _, box = dets[k]
            _, _, _, gb, gl, gd = images[i]
            keep = np.flatnonzero(gl == cls)
            if len(keep) == 0:
                fp[rank] = 1
                continue
            ov = box_iou(box, gb[keep], plus_one)
            j = int(np.argmax(ov))
            if ov[j] > 0.5:
                if gd[keep[j]]:
                    continue
                if not used[i][keep[j]]:
                    tp[rank], used[i][keep[j]] = 1, True
                else:
                    fp[rank] = 1
            else:
                fp[rank] = 1
        tp, fp = np.cumsum(tp), np.cumsum(fp)
        aps.append(voc_ap(tp / npos, tp / np.maximum(tp + fp, np.finfo(np.float64).eps),
                          use_07_metric))
    return aps


@pytest.mark.parametrize('seed', range(6))
def test_vectorised_matching_equals_the_devkit_loop(seed):
    """Bit-equal APs on crowded images with tied scores, difficult boxes, degenerate
    (zero-area: NaN IoU) boxes, duplicates and labels outside the classes."""
    rng = np.random.RandomState(seed)
    n_cls, plus_one, use_07 = 4, bool(seed % 2), seed < 4
    images = []
    for _ in range(rng.randint(1, 30)):
        g = rng.randint(0, 9)
        xy = rng.randint(0, 60, (g, 2)).astype(float)
        gb = np.hstack([xy, xy + rng.randint(0, 30, (g, 2))])  # some zero-size boxes
        gl = rng.randint(-1, n_cls, g)
        gd = rng.rand(g) < 0.2
        d = rng.randint(0, 40)
        src = gb[rng.randint(0, g, d)] if g else rng.uniform(0, 60, (d, 4))
        bb = np.round(src + rng.normal(0, 3, (d, 4)) * (rng.rand(d, 1) < 0.7))
        ll = np.where(rng.rand(d) < 0.7, gl[rng.randint(0, g, d)] if g else 0,
                      rng.randint(-1, n_cls + 1, d))
        ss = np.round(rng.rand(d), 1)  # many ties
        images.append((bb, ss, ll, gb, gl, gd))
    ev = VOCEvaluator(['c%d' % c for c in range(n_cls)], plus_one=plus_one,
                      use_07_metric=use_07)
    for bb, ss, ll, gb, gl, gd in images:
        ev.update(bb, ss, ll, gb, gl, gd)
    with np.errstate(invalid='ignore', divide='ignore'):
        ref = _devkit_aps(images, n_cls, plus_one, use_07)
    assert np.array_equal(ev.get()[1][:-1], ref, equal_nan=True)


def test_best_overlap_and_greedy_match_by_hand():
    iou = np.array([[0.6, 0.7, 0.9], [np.nan, 0.8, 0.2], [0.5, 0.5, 0.1], [0.7, 0.2, 0.3]])
    valid = np.array([[1, 1, 0], [1, 1, 1], [1, 1, 1], [0, 0, 0]], bool)
    index, hit = best_overlap(iou, valid, 0.5)
    # masked 0.9 loses; the first NaN wins argmax but is no hit; ties: the first; no box: none
    assert index.tolist()[:3] == [1, 0, 0] and hit.tolist() == [True, False, False, False]
    index, hit = best_overlap(iou, valid, 0.5, strict=False)  # GluonCV: >=, NaN counts
    assert hit.tolist() == [True, True, True, False]
    match = greedy_match(np.array([3, 3, 5, 7, 3]), np.array([1, 1, 1, 0, 1], bool),
                         np.array([0, 0, 1, 0, 0], bool))
    assert match.tolist() == [1, 0, -1, 0, 0]


def test_blocked_iou_gives_the_same_values(monkeypatch):
    """Crowded images are matched in blocks of rows; tiny blocks change nothing."""
    import gluontrain.core.voc_eval as voc_eval
    rng = np.random.RandomState(7)
    images = []
    for _ in range(10):
        xy = rng.randint(0, 60, (12, 2)).astype(float)
        gt = np.hstack([xy, xy + rng.randint(5, 30, (12, 2))])
        gl = rng.randint(0, 2, 12)
        boxes = gt[rng.randint(0, 12, 30)] + rng.normal(0, 3, (30, 4))
        images.append((boxes, np.round(rng.rand(30), 1), rng.randint(0, 2, 30), gt, gl,
                       rng.rand(12) < 0.2))
    values = []
    for block in (voc_eval._BLOCK, 5):
        monkeypatch.setattr(voc_eval, '_BLOCK', block)
        ev = VOCEvaluator(['a', 'b'])
        for image in images:
            ev.update(*image)
        values.append(ev.get()[1])
    assert values[0] == values[1] and 0.0 < values[0][-1] < 1.0


def _eval_py_ap(records, cls):
    """ssd.pytorch eval.py's ``voc_eval`` for class ``cls``, written out as it does it: the
    class's detections in record order, ``np.argsort(-confidence)``, IoU without +1, ``>
    0.5``, the greedy devkit match, the 11-point AP."""
    image_ids, conf, bb, gts = [], [], [], {}
    for i, (boxes, scores, labels, gt_boxes, gt_labels) in enumerate(records):
        mine = gt_labels == cls
        gts[i] = {'bbox': gt_boxes[mine], 'det': [False] * int(mine.sum())}
        for box, score, label in zip(boxes, scores, labels):
            if label == cls:
                image_ids.append(i), conf.append(score), bb.append(box)
    npos = sum(len(g['det']) for g in gts.values())
    order = np.argsort(-np.array(conf))
    tp, fp = np.zeros(len(order)), np.zeros(len(order))
    for d, k in enumerate(order):
        g = gts[image_ids[k]]
        overlaps = box_iou(np.array(bb[k]), np.asarray(g['bbox'], float).reshape(-1, 4))
        best = overlaps.argmax() if len(overlaps) else -1
        if best >= 0 and overlaps[best] > 0.5 and not g['det'][best]:
            tp[d], g['det'][best] = 1, True
        else:
            fp[d] = 1
    tp, fp = np.cumsum(tp), np.cumsum(fp)
    return voc_ap(tp / npos, tp / np.maximum(tp + fp, np.finfo(np.float64).eps), True)


def test_numpy_score_sort_ranks_ties_as_ssd_pytorch_eval_py():
    # 3 decimals make ties (eval.py reads its scores back from '%.3f' text); beyond 16
    # detections numpy's default argsort is not stable, and the tie order moves the AP
    rng = np.random.RandomState(3)
    records = []
    for _ in range(6):
        gt = rng.uniform(0, 60, (3, 2))
        gt = np.hstack([gt, gt + 30])
        labels = rng.randint(0, 2, 3)
        boxes = np.vstack([gt[rng.randint(0, 3, 9)] + rng.normal(0, 3, (9, 4)),
                           rng.uniform(0, 90, (3, 4))])
        records.append((boxes, rng.choice([0.2, 0.4, 0.6], 12), rng.randint(0, 2, 12), gt,
                        labels))
    aps = {}
    for sort in ('numpy', 'stable'):
        ev = VOCEvaluator(['a', 'b'], score_sort=sort)
        for boxes, scores, labels, gt, glab in records:
            ev.update(boxes, scores, labels, gt, glab)
        aps[sort] = ev.get()[1][:2]
    assert aps['numpy'] == [_eval_py_ap(records, c) for c in (0, 1)]
    assert aps['numpy'] != aps['stable']
    with pytest.raises(ValueError, match='score_sort'):
        VOCEvaluator(['a'], score_sort='quick')
