"""VOC AP: a hand-computed case, and equality with GluonCV's VOC07MApMetric (+1 convention)."""
import math

import numpy as np
import pytest

from gluontrain.core.voc_eval import VOCEvaluator, box_iou, voc_ap


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
