"""Time SSD300's MultiBoxLoss, NMS and Detect: ours vs straightforward loops, one run.

The straightforward versions (written here) do the same maths the way ssd.pytorch does:
``match`` per image with a Python loop over gts, the loss per batch from those targets,
greedy NMS with a ``while`` loop over kept boxes, Detect per image and class. Every pair is
checked for equal results before it is timed.

Usage: python bench/ssd_bench.py [--threads 1] [--repeats 3] [--device cpu]
"""
import argparse
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))

from gluontrain.torch.ops.nms import nms  # noqa: E402
from gluontrain.torch.ssd import config  # noqa: E402
from gluontrain.torch.ssd.box_utils import (decode, encode, jaccard, log_sum_exp,  # noqa: E402
                                            point_form)
from gluontrain.torch.ssd.detection import Detect  # noqa: E402
from gluontrain.torch.ssd.multibox_loss import MultiBoxLoss  # noqa: E402
from gluontrain.torch.ssd.prior_box import PriorBox  # noqa: E402


# ---------------------------------------------------------------- straightforward versions
def loop_match(threshold, truths, priors, variances, labels):
    overlaps = jaccard(truths, point_form(priors))
    _, best_prior_idx = overlaps.max(1)
    best_truth_overlap, best_truth_idx = overlaps.max(0)
    best_truth_overlap.index_fill_(0, best_prior_idx, 2)
    for j in range(best_prior_idx.size(0)):
        best_truth_idx[best_prior_idx[j]] = j
    conf = labels[best_truth_idx] + 1
    conf[best_truth_overlap < threshold] = 0
    return encode(truths[best_truth_idx], priors, variances), conf


def loop_loss(loc_data, conf_data, priors, targets, num_classes, threshold=0.5, ratio=3):
    num, num_priors = loc_data.shape[:2]
    loc_t = torch.zeros(num, num_priors, 4, device=loc_data.device)
    conf_t = torch.zeros(num, num_priors, dtype=torch.long, device=loc_data.device)
    for idx in range(num):
        loc_t[idx], conf_t[idx] = loop_match(threshold, targets[idx][:, :-1], priors,
                                             (0.1, 0.2), targets[idx][:, -1])
    pos = conf_t > 0
    loss_l = F.smooth_l1_loss(loc_data[pos], loc_t[pos], reduction='sum')
    batch_conf = conf_data.view(-1, num_classes)
    loss_c = log_sum_exp(batch_conf) - batch_conf.gather(1, conf_t.view(-1, 1))
    loss_c = loss_c.view(num, -1)
    loss_c[pos] = 0
    _, loss_idx = loss_c.sort(dim=1, descending=True, stable=True)
    _, idx_rank = loss_idx.sort(1)
    num_pos = pos.long().sum(1, keepdim=True)
    num_neg = torch.clamp(ratio * num_pos, max=pos.size(1) - 1)
    neg = idx_rank < num_neg.expand_as(idx_rank)
    chosen = pos | neg
    loss_c = F.cross_entropy(conf_data[chosen], conf_t[chosen], reduction='sum')
    n = num_pos.sum()
    return loss_l / n, loss_c / n


def loop_nms(boxes, scores, overlap, top_k=None):
    """Greedy NMS as ssd.pytorch writes it: one iteration per kept box."""
    x1, y1, x2, y2 = boxes.unbind(1)
    area = (x2 - x1) * (y2 - y1)
    idx = scores.sort(stable=True)[1]
    if top_k is not None:
        idx = idx[-top_k:]
    keep = []
    while idx.numel() > 0:
        i = idx[-1]
        keep.append(i)
        idx = idx[:-1]
        if idx.numel() == 0:
            break
        xx1 = torch.clamp(x1[idx], min=x1[i])
        yy1 = torch.clamp(y1[idx], min=y1[i])
        xx2 = torch.clamp(x2[idx], max=x2[i])
        yy2 = torch.clamp(y2[idx], max=y2[i])
        inter = torch.clamp(xx2 - xx1, min=0.0) * torch.clamp(yy2 - yy1, min=0.0)
        idx = idx[(inter / ((area[idx] - inter) + area[i])).le(overlap)]
    return torch.stack(keep)


def loop_detect(loc, conf, priors, num_classes, top_k=200, conf_thresh=0.01, nms_thresh=0.45):
    num = loc.size(0)
    output = torch.zeros(num, num_classes, top_k, 5, device=loc.device)
    for i in range(num):
        boxes = decode(loc[i], priors, (0.1, 0.2))
        for cl in range(1, num_classes):
            mask = conf[i, :, cl] > conf_thresh
            scores = conf[i, mask, cl]
            if scores.numel() == 0:
                continue
            ids = loop_nms(boxes[mask], scores, nms_thresh, top_k)
            output[i, cl, :ids.numel()] = torch.cat([scores[ids, None], boxes[mask][ids]], 1)
    return output


# ---------------------------------------------------------------- inputs and timing
def random_boxes(n, gen, device):
    xy = torch.rand(n, 2, generator=gen)
    wh = 0.02 + torch.rand(n, 2, generator=gen) * 0.25
    boxes = torch.cat([xy - wh / 2, xy + wh / 2], 1)
    return boxes.to(device), torch.rand(n, generator=gen).to(device)


def loss_inputs(batch, priors, gen, device, num_classes=21):
    targets = []
    for _ in range(batch):
        n = int(torch.randint(1, 6, (1,), generator=gen))
        xy = torch.rand(n, 2, generator=gen) * 0.7
        boxes = torch.cat([xy, xy + 0.05 + torch.rand(n, 2, generator=gen) * 0.25], 1)
        labels = torch.randint(0, num_classes - 1, (n, 1), generator=gen).float()
        targets.append(torch.cat([boxes, labels], 1).to(device))
    loc = torch.randn(batch, priors.shape[0], 4, generator=gen).to(device)
    conf = torch.randn(batch, priors.shape[0], num_classes, generator=gen).to(device)
    return loc, conf, targets


def timed(fn, repeats, device):
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        if device.type == 'cuda':
            torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        if device.type == 'cuda':
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--threads', type=int, default=1)
    parser.add_argument('--repeats', type=int, default=3)
    parser.add_argument('--device', default='cpu')
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    gen = torch.Generator().manual_seed(0)
    priors = PriorBox(config.voc).forward().to(device)
    rows = []

    criterion = MultiBoxLoss(21, 0.5, True, 0, True, 3, 0.5, False)
    for batch in (8, 32):
        loc, conf, targets = loss_inputs(batch, priors, gen, device)
        ours = criterion((loc, conf, priors), targets)
        ref = loop_loss(loc, conf, priors, targets, 21)
        assert all(torch.equal(a, b) for a, b in zip(ours, ref)), (ours, ref)
        rows.append(('MultiBoxLoss fwd, batch %d' % batch,
                     timed(lambda: criterion((loc, conf, priors), targets), args.repeats, device),
                     timed(lambda: loop_loss(loc, conf, priors, targets, 21), args.repeats,
                           device)))

    for n in (1000, 5000, 10000):
        boxes, scores = random_boxes(n, gen, device)
        assert torch.equal(nms(boxes, scores, 0.45), loop_nms(boxes, scores, 0.45))
        rows.append(('NMS %d boxes (all candidates)' % n,
                     timed(lambda: nms(boxes, scores, 0.45), args.repeats, device),
                     timed(lambda: loop_nms(boxes, scores, 0.45), args.repeats, device)))

    detect = Detect(21, 0, 200, 0.01, 0.45)
    loc, conf, _ = loss_inputs(8, priors, gen, device)
    conf = torch.softmax(conf * 3, -1)
    assert torch.equal(detect(loc, conf, priors), loop_detect(loc, conf, priors, 21))
    rows.append(('Detect, batch 8, 21 classes',
                 timed(lambda: detect(loc, conf, priors), args.repeats, device),
                 timed(lambda: loop_detect(loc, conf, priors, 21), args.repeats, device)))

    print('device %s, %d thread(s), median of %d runs; results checked equal first'
          % (device, args.threads, args.repeats))
    print('%-34s %12s %12s %8s' % ('case', 'ours (ms)', 'loop (ms)', 'speed-up'))
    for name, ours_s, loop_s in rows:
        print('%-34s %12.1f %12.1f %7.1fx' % (name, ours_s * 1e3, loop_s * 1e3, loop_s / ours_s))


if __name__ == '__main__':
    main()
