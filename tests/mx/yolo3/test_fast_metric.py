"""FastVOC07MApMetric: GluonCV's VOC07MApMetric values exactly (ties, difficult, padding)."""
import numpy as np
import pytest

import gluontrain.mx  # noqa: F401  (imports gluoncv through the shim)
import mxnet as mx
from gluoncv.utils.metrics.voc_detection import VOC07MApMetric

from gluontrain.mx.yolo3.fast_metric import FastVOC07MApMetric

CLASSES = ['a', 'b', 'c', 'd', 'e']


def random_batch(rng, batch=4, dets=30, gts=5):
    gxy = rng.uniform(0, 100, (batch, gts, 2))
    gt = np.concatenate([gxy, gxy + rng.uniform(5, 50, (batch, gts, 2))], 2)
    glab = rng.randint(0, len(CLASSES), (batch, gts)).astype(np.float32)
    glab[rng.rand(batch, gts) < 0.3] = -1
    gt[glab < 0] = -1
    gdiff = (rng.rand(batch, gts) < 0.2).astype(np.float32)
    pick = rng.randint(0, gts, (batch, dets))
    boxes = np.take_along_axis(gt, pick[..., None].repeat(4, 2), 1) + \
        rng.normal(0, 5, (batch, dets, 4))
    labels = np.where(rng.rand(batch, dets) < 0.7, np.take_along_axis(glab, pick, 1),
                      rng.randint(0, len(CLASSES), (batch, dets))).astype(np.float32)
    labels[labels < 0] = 0
    labels[:, -5:] = -1  # NMS padding
    # coarse scores: many ties inside an image and a class, and across images
    scores = np.round(rng.rand(batch, dets), 1).astype(np.float32)
    return [boxes.astype(np.float32), labels[..., None], scores[..., None],
            gt.astype(np.float32), glab[..., None], gdiff[..., None]]


@pytest.mark.parametrize('seed', range(6))
def test_same_values_as_gluoncv(seed):
    rng = np.random.RandomState(seed)
    ref = VOC07MApMetric(iou_thresh=0.5, class_names=CLASSES)
    ours = FastVOC07MApMetric(iou_thresh=0.5, class_names=CLASSES)
    for _ in range(30):
        batch = random_batch(rng)
        as_nd = rng.rand() < 0.5
        if as_nd:
            batch = [mx.nd.array(a) for a in batch]
        if rng.rand() < 0.3:  # the recipe passes lists over devices
            batch = [[a[:2], a[2:]] for a in batch]
        ref.update(*batch)
        ours.update(*batch)
    ref_names, ref_values = ref.get()
    names, values = ours.get()
    assert names == ref_names
    assert np.array_equal(values, ref_values, equal_nan=True)
    assert 0.05 < values[-1] < 0.95


def test_reset_and_missing_difficult_flags():
    rng = np.random.RandomState(9)
    ref = VOC07MApMetric(iou_thresh=0.7, class_names=CLASSES)
    ours = FastVOC07MApMetric(iou_thresh=0.7, class_names=CLASSES)
    ours.update(*random_batch(rng))
    ours.reset()
    for _ in range(5):
        batch = random_batch(rng)[:5]
        ref.update(*batch)
        ours.update(*batch)
    assert np.array_equal(ours.get()[1], ref.get()[1], equal_nan=True)
    assert np.array_equal(ours.get()[1], ref.get()[1], equal_nan=True)  # get is repeatable


@pytest.mark.parametrize('seed', range(4))
def test_long_tied_classes_replayed_or_skipped_give_gluoncv_values(seed):
    """Classes of 20-80 detections per image with coarse scores: many tied runs longer than
    insertion sort's 16, some with mixed matches (replayed), some uniform (left in order)."""
    rng = np.random.RandomState(100 + seed)
    ref = VOC07MApMetric(iou_thresh=0.5, class_names=CLASSES)
    ours = FastVOC07MApMetric(iou_thresh=0.5, class_names=CLASSES)
    for _ in range(8):
        batch = random_batch(rng, batch=2, dets=int(rng.randint(40, 160)), gts=3)
        batch[2] = np.round(batch[2] * 4) / 4  # scores 0, .25, .5, .75, 1
        ref.update(*batch)
        ours.update(*batch)
    assert np.array_equal(ours.get()[1], ref.get()[1], equal_nan=True)
