"""Time gluontrain.torch.ops against straightforward versions, one run: batched per-class
NMS, seamseg's ROI sampling and maskrcnn-benchmark's ROIAlign (forward + backward).

The straightforward versions (written here) are what one writes first:

- NMS: a Python loop over classes, each a greedy ``while`` loop that keeps the best box and
  drops those overlapping it (one vectorised IoU row per kept box);
- ROI ops: a Python loop over ROIs, each sampled with ``torch.nn.functional.grid_sample``
  (``align_corners=False``, border padding; for ROIAlign, times the reference's
  ``[-1, H] x [-1, W]`` validity mask and averaged over the 2x2 samples of each bin), an
  independent implementation of the same maths.

Every pair is checked for equal results before it is timed; ratios are loop / ours.

Usage: python bench/ops_bench.py [--threads 1] [--repeats 3] [--device cpu]
"""
import argparse
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))

from gluontrain.torch.ops import batched_nms, box_iou, roi_align, roi_sampling  # noqa: E402
from timing import median_seconds  # noqa: E402  (bench/timing.py)


def loop_batched_nms(boxes, scores, labels, thr):
    kept = []
    for c in labels.unique().tolist():
        idx = torch.nonzero(labels == c).view(-1)
        order = idx[torch.sort(scores[idx], descending=True, stable=True)[1]]
        while order.numel():
            i = order[0]
            kept.append(i.item())
            iou = box_iou(boxes[i][None], boxes[order[1:]])[0]
            order = order[1:][~(iou >= thr)]
    return sorted(kept, key=lambda i: (-scores[i].item(), i))


def _grid(ys, xs, h, w):
    """grid_sample coordinates of pixel positions (pixel centres at integer + 0.5)."""
    gy, gx = 2 * ys / h - 1, 2 * xs / w - 1
    return torch.stack(torch.broadcast_tensors(gx[None, :], gy[:, None]), -1)[None]


def loop_roi_sampling(x, boxes, idx, size):
    h, w = x.shape[-2:]
    out = []
    for box, n in zip(boxes, idx):
        ys = (torch.arange(size[0], dtype=x.dtype) + .5) / size[0] * (box[2] - box[0]) + box[0]
        xs = (torch.arange(size[1], dtype=x.dtype) + .5) / size[1] * (box[3] - box[1]) + box[1]
        out.append(F.grid_sample(x[n:n + 1], _grid(ys, xs, h, w), 'bilinear', 'border',
                                 align_corners=False))
    return torch.cat(out)


def loop_roi_align(x, boxes, idx, size, scale, ratio):
    h, w = x.shape[-2:]
    out = []
    for box, n in zip(boxes * scale, idx):
        rw, rh = max(box[2] - box[0], 1.), max(box[3] - box[1], 1.)
        it = (torch.arange(size[0] * ratio, dtype=x.dtype) + .5) / ratio
        ys, xs = box[1] + it * rh / size[0], box[0] + it * rw / size[1]
        valid = ((ys >= -1) & (ys <= h))[:, None] & ((xs >= -1) & (xs <= w))[None, :]
        # the reference reads pixel p at continuous p (grid_sample: p + 0.5)
        s = F.grid_sample(x[n:n + 1], _grid(ys + .5, xs + .5, h, w), 'bilinear', 'border',
                          align_corners=False) * valid
        out.append(F.avg_pool2d(s, ratio))
    return torch.cat(out)




def fwd_bwd(op, x):
    def run():
        x.grad = None
        out = op(x)
        out.backward(torch.ones_like(out))
        return out, x.grad.clone()
    return run


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--threads', type=int, default=1)
    p.add_argument('--repeats', type=int, default=3)
    p.add_argument('--device', default='cpu')
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    gen = torch.Generator().manual_seed(0)
    dev = torch.device(args.device)
    rows = []

    # batched NMS: 3000 detections over 20 classes (seamseg's inference, class-wise 0.3, >=)
    lo = torch.rand(3000, 2, generator=gen) * 600
    boxes = torch.cat([lo, lo + 20 + torch.rand(3000, 2, generator=gen) * 150], 1).to(dev)
    scores = torch.rand(3000, generator=gen).to(dev)
    labels = torch.randint(0, 20, (3000,), generator=gen).to(dev)
    ours = lambda: batched_nms(boxes, scores, labels, 0.3, suppress_equal=True)  # noqa: E731
    loop = lambda: loop_batched_nms(boxes, scores, labels, 0.3)  # noqa: E731
    assert ours().tolist() == loop()
    rows.append(('batched NMS (3000 boxes, 20 classes)',
                 median_seconds(loop, args.repeats), median_seconds(ours, args.repeats)))

    # ROI ops on one FPN level: 2 images, 256 channels, 512 ROIs
    x = torch.randn(2, 256, 50, 68, generator=gen).to(dev).requires_grad_()
    lo = torch.rand(512, 2, generator=gen) * torch.tensor([45., 60.]) - 2
    yx = torch.cat([lo, lo + 1 + torch.rand(512, 2, generator=gen) * 20], 1).to(dev)
    idx = torch.randint(0, 2, (512,), generator=gen).to(dev)
    ours = fwd_bwd(lambda t: roi_sampling(t, yx, idx, (14, 14)), x)
    loop = fwd_bwd(lambda t: loop_roi_sampling(t, yx, idx, (14, 14)), x)
    (a, ga), (b, gb) = ours(), loop()
    assert torch.allclose(a, b, atol=1e-4) and torch.allclose(ga, gb, atol=1e-3)
    rows.append(('roi_sampling 14x14 fwd+bwd (512 ROIs, C=256)',
                 median_seconds(loop, args.repeats), median_seconds(ours, args.repeats)))

    xy = yx[:, [1, 0, 3, 2]] * 4  # image pixels at stride 4
    ours = fwd_bwd(lambda t: roi_align(t, xy, idx, (7, 7), 0.25, 2), x)
    loop = fwd_bwd(lambda t: loop_roi_align(t, xy, idx, (7, 7), 0.25, 2), x)
    (a, ga), (b, gb) = ours(), loop()
    assert torch.allclose(a, b, atol=1e-4) and torch.allclose(ga, gb, atol=1e-3)
    rows.append(('roi_align 7x7 sr2 fwd+bwd (512 ROIs, C=256)',
                 median_seconds(loop, args.repeats), median_seconds(ours, args.repeats)))

    print('device {}, {} thread(s), median of {} runs; results checked equal first'
          .format(dev, args.threads, args.repeats))
    print('{:<48} {:>10} {:>10} {:>8}'.format('op', 'loop s', 'ours s', 'ratio'))
    for name, t_loop, t_ours in rows:
        print('{:<48} {:>10.4f} {:>10.4f} {:>7.1f}x'.format(name, t_loop, t_ours, t_loop / t_ours))


if __name__ == '__main__':
    main()
