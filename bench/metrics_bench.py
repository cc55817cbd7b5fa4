"""Validation metrics at validation scale: values identical to the references, time ratios.

VOC07: GluonCV's ``VOC07MApMetric`` vs gluontrain's ``FastVOC07MApMetric`` (the YOLOv3
recipe's default) and the backend-neutral ``core.voc_eval.VOCEvaluator`` (the SSD recipe's),
on the same detections: ``--images`` images with ``--dets`` detections each (float32, as the
networks output them), 20 classes, a few ground truths per image, some difficult, in batches
of ``--batch`` images (64: the recipe's default ``--batch-size``, its validation batch).
COCO: pycocotools' ``COCOeval`` vs faster-coco-eval's on the same ground truth and results;
the twelve stats must be identical.

Usage: python bench/metrics_bench.py [--images 5000] [--dets 100] [--batch 64] [--skip-core]
Times are wall and CPU (`time.process_time`) seconds: the machine may be shared.
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))

import numpy as np  # noqa: E402

import gluontrain.mx  # noqa: E402,F401  (imports gluoncv through the shim)
from gluoncv.utils.metrics.voc_detection import VOC07MApMetric  # noqa: E402

from gluontrain.core.voc_eval import VOCEvaluator  # noqa: E402
from gluontrain.mx.yolo3.fast_metric import FastVOC07MApMetric  # noqa: E402

CLASSES = ['c%d' % i for i in range(20)]


def detections(images, dets, seed=0, batch=8):
    """Batches of (boxes, labels, scores, gt boxes, gt labels, difficult), float32, -1 padded."""
    rng = np.random.RandomState(seed)
    out = []
    for start in range(0, images, batch):
        b = min(batch, images - start)
        g = 6
        gxy = rng.uniform(0, 400, (b, g, 2))
        gt = np.concatenate([gxy, gxy + rng.uniform(10, 200, (b, g, 2))], 2)
        glab = rng.randint(0, 20, (b, g)).astype(np.float32)
        glab[rng.rand(b, g) < 0.5] = -1  # 0-6 ground truths per image
        gt[glab < 0] = -1
        gdiff = (rng.rand(b, g) < 0.1).astype(np.float32)
        pick = rng.randint(0, g, (b, dets))
        near = np.take_along_axis(gt, pick[..., None].repeat(4, 2), 1) + \
            rng.normal(0, 8, (b, dets, 4))
        lab = np.where(rng.rand(b, dets) < 0.6, np.take_along_axis(glab, pick, 1),
                       rng.randint(0, 20, (b, dets))).astype(np.float32)
        lab[lab < 0] = rng.randint(0, 20)
        scores = rng.rand(b, dets).astype(np.float32)
        scores[:, -10:] = 0.01  # post-NMS tails tie in score
        out.append((near.astype(np.float32), lab, scores, gt.astype(np.float32), glab, gdiff))
    return out


def run_voc(metric, batches):
    """(names, values, wall s, CPU s) of updating and reading ``metric``."""
    tic, cpu = time.perf_counter(), time.process_time()
    metric.reset()
    for p, l, s, g, gl, gd in batches:
        metric.update(p, l, s, g, gl, gd)
    names, values = metric.get()
    return names, values, time.perf_counter() - tic, time.process_time() - cpu


def per_image(batches):
    """The batches as the per-image, unpadded arrays ``VOCEvaluator.update`` takes."""
    out = []
    for p, l, s, g, gl, gd in batches:
        for i in range(len(p)):
            keep, gk = l[i] >= 0, gl[i] >= 0
            out.append((p[i][keep], s[i][keep], l[i][keep], g[i][gk], gl[i][gk], gd[i][gk]))
    return out


def run_core(images, evaluator=VOCEvaluator):
    """The same for the per-image ``VOCEvaluator`` interface (the SSD recipe's)."""
    tic, cpu = time.perf_counter(), time.process_time()
    ev = evaluator(CLASSES, iou_thresh=0.5, use_07_metric=True, plus_one=True)
    for image in images:
        ev.update(*image)
    names, values = ev.get()
    return names, values, time.perf_counter() - tic, time.process_time() - cpu


def row(name, ref, ours, values):
    """A table row: wall and CPU seconds of both and their ratios."""
    print('| {} | {:.2f} / {:.2f} | {:.2f} / {:.2f} | {:.1f}x / {:.1f}x | {} |'.format(
        name, ref[2], ref[3], ours[2], ours[3], ref[2] / ours[2], ref[3] / ours[3], values))


def coco_inputs(images, dets, seed=1):
    rng = np.random.RandomState(seed)
    gt = {'images': [], 'annotations': [], 'categories': [{'id': c + 1, 'name': 'c%d' % c}
                                                           for c in range(20)]}
    res = []
    for i in range(images):
        gt['images'].append({'id': i + 1, 'width': 640, 'height': 480})
        n = rng.randint(1, 8)
        xy = rng.uniform(0, 400, (n, 2))
        wh = rng.uniform(4, 200, (n, 2))
        cats = rng.randint(1, 21, n)
        for k in range(n):
            gt['annotations'].append({'id': len(gt['annotations']) + 1, 'image_id': i + 1,
                                      'category_id': int(cats[k]), 'iscrowd': 0,
                                      'bbox': [float(v) for v in (*xy[k], *wh[k])],
                                      'area': float(wh[k, 0] * wh[k, 1])})
        pick = rng.randint(0, n, dets)
        box = np.concatenate([xy[pick], wh[pick]], 1) + rng.normal(0, 6, (dets, 4))
        box[:, 2:] = np.abs(box[:, 2:]) + 1
        cat = np.where(rng.rand(dets) < 0.6, cats[pick], rng.randint(1, 21, dets))
        score = np.round(rng.rand(dets), 3)
        for k in range(dets):
            res.append({'image_id': i + 1, 'category_id': int(cat[k]),
                        'bbox': [round(float(v), 2) for v in box[k]], 'score': float(score[k])})
    return gt, res


def run_coco(module, gt, res):
    import contextlib
    import io
    if module == 'pycocotools':
        from pycocotools.coco import COCO
        from pycocotools.cocoeval import COCOeval
    else:
        from faster_coco_eval import COCO, COCOeval_faster as COCOeval
    with contextlib.redirect_stdout(io.StringIO()):
        coco = COCO()
        coco.dataset = gt
        coco.createIndex()
        tic = time.perf_counter()
        dt = coco.loadRes(res)
        ev = COCOeval(coco, dt, 'bbox')
        ev.evaluate()
        ev.accumulate()
        ev.summarize()
    return np.array(ev.stats), time.perf_counter() - tic


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--images', type=int, default=5000)
    p.add_argument('--dets', type=int, default=100)
    p.add_argument('--batch', type=int, default=64)
    p.add_argument('--coco-images', type=int, default=5000)
    p.add_argument('--skip-core', action='store_true')
    a = p.parse_args()
    batches = detections(a.images, a.dets, batch=a.batch)
    ref = run_voc(VOC07MApMetric(iou_thresh=0.5, class_names=CLASSES), batches)
    fast = run_voc(FastVOC07MApMetric(iou_thresh=0.5, class_names=CLASSES), batches)
    same = ref[0] == fast[0] and np.array_equal(ref[1], fast[1], equal_nan=True)
    print('VOC07 mAP, {} images x {} detections, batches of {}: GluonCV {:.6f}'.format(
        a.images, a.dets, a.batch, ref[1][-1]))
    print('\n| metric | reference wall / CPU (s) | gluontrain wall / CPU (s) | ratio wall / CPU '
          '| values |\n|---|---|---|---|---|')
    row('VOC07MApMetric vs FastVOC07MApMetric', ref, fast, 'identical' if same else 'DIFFER')
    if not a.skip_core:
        core = run_core(per_image(batches))
        diff = np.nanmax(np.abs(np.array(core[1]) - np.array(ref[1])))
        # the devkit's own tie order and float64 IoU: not GluonCV's numbers bit for bit
        row('VOC07MApMetric vs core.voc_eval.VOCEvaluator(plus_one)', ref, core,
            'max diff to GluonCV {:.1e} (ties, float64 IoU)'.format(diff))
    gt, res = coco_inputs(a.coco_images, a.dets)
    stats_ref, t_ref = run_coco('pycocotools', gt, res)
    try:
        stats_fast, t_fast = run_coco('faster_coco_eval', gt, res)
    except ImportError:
        print('| COCOeval: faster-coco-eval not installed (pip install faster-coco-eval) |')
    else:
        same = np.array_equal(stats_ref, stats_fast)
        print('| COCOeval bbox ({} images): pycocotools vs faster-coco-eval | {:.2f} | {:.2f} | '
              '{:.1f}x | {} |'.format(a.coco_images, t_ref, t_fast, t_ref / t_fast,
                                      'identical' if same else 'DIFFER: max {:.1e}'.format(
                                          np.abs(stats_ref - stats_fast).max())))
    if not same:
        sys.exit(1)


if __name__ == '__main__':
    main()
