"""Time the two-stage detector's inference pieces against seamseg's loops, one run.

- predictions: :func:`gluontrain.torch.twostage.algos.predict` (seamseg's ``PredictionGenerator``
  structure: a loop over classes, each filtered and passed to NMS, then the top
  ``max_predictions``) vs the same with one :func:`gluontrain.torch.ops.batched_nms` over all
  classes: why ``predict`` loops over classes;
- the training step of the shipped ``synthetic_cpu.ini`` network on a batch of 4 generated
  images: forward with losses, and forward + backward, to show where the time goes.

The two prediction paths are checked to give the same detections before they are timed;
the ratio is batched / ours.

Usage: python bench/frcnn_bench.py [--threads 1] [--repeats 3] [--proposals 1000] [--classes 80]
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))

from gluontrain.torch.twostage import algos  # noqa: E402
from timing import median_seconds  # noqa: E402  (bench/timing.py)
from gluontrain.torch.frcnn.config import DEFAULTS_FILE, load_config  # noqa: E402
from gluontrain.torch.frcnn.model import make_model  # noqa: E402
from gluontrain.torch.ops import batched_nms, decode  # noqa: E402


def batched_predict(cls_logits, bbx_logits, proposals, size, s):
    """Predictions of one image with one batched NMS over the classes."""
    boxes = decode(bbx_logits, proposals.unsqueeze(1), weights=s.bbx_reg_weights,
                   scale_clip=algos.SCALE_CLIP)
    h, w = size
    boxes = torch.stack([boxes[..., 0].clamp(0, h), boxes[..., 1].clamp(0, w),
                         boxes[..., 2].clamp(0, h), boxes[..., 3].clamp(0, w)], -1)
    b = boxes.reshape(-1, 4)
    sc = torch.softmax(cls_logits, 1)[:, 1:].reshape(-1)
    c = torch.arange(bbx_logits.shape[1]).repeat(bbx_logits.shape[0])
    keep = (sc > s.score_threshold) & (b[:, 2] > b[:, 0]) & (b[:, 3] > b[:, 1])
    b, c, sc = b[keep], c[keep], sc[keep]
    keep = batched_nms(b, sc, c, s.nms_threshold, suppress_equal=True,
                       max_output=s.max_predictions, reference='seamseg')
    return b[keep], c[keep], sc[keep]




def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--threads', type=int, default=1)
    parser.add_argument('--repeats', type=int, default=3)
    parser.add_argument('--proposals', type=int, default=1000)
    parser.add_argument('--classes', type=int, default=80)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    g = torch.Generator().manual_seed(0)
    n, k = args.proposals, args.classes
    y0, x0 = torch.rand(n, generator=g) * 400, torch.rand(n, generator=g) * 600
    props = torch.stack([y0, x0, y0 + 16 + torch.rand(n, generator=g) * 200,
                         x0 + 16 + torch.rand(n, generator=g) * 200], 1)
    cls_logits = torch.randn(n, k + 1, generator=g) * 3
    bbx_logits = torch.randn(n, k, 4, generator=g)
    s = algos.ROISettings()
    ours = algos.predict(cls_logits, bbx_logits, props, torch.zeros(n, dtype=torch.long),
                         [(600, 800)], s)
    ref = batched_predict(cls_logits, bbx_logits, props, (600, 800), s)
    assert all(torch.equal(a[0], b) for a, b in zip(ours, ref)), 'predictions differ'
    rows = [('predict: {} proposals x {} classes'.format(n, k),
             median_seconds(lambda: batched_predict(cls_logits, bbx_logits, props, (600, 800),
                                                    s), args.repeats),
             median_seconds(lambda: algos.predict(cls_logits, bbx_logits, props,
                                                  torch.zeros(n, dtype=torch.long), [(600, 800)],
                                                  s), args.repeats))]
    print('{} thread(s), median of {} runs; results checked equal first'.format(
        args.threads, args.repeats))
    print('{:<44} {:>10} {:>10} {:>8}'.format('op', 'batched s', 'ours s', 'ratio'))
    for name, t_loop, t_ours in rows:
        print('{:<44} {:>10.4f} {:>10.4f} {:>7.1f}x'.format(name, t_loop, t_ours,
                                                            t_loop / t_ours))

    config = load_config(os.path.join(os.path.dirname(DEFAULTS_FILE), 'synthetic_cpu.ini'))
    model = make_model(config, num_thing=10).train()
    imgs = [torch.randn(3, 192, 256, generator=g) for _ in range(4)]
    cat = [torch.tensor([0, 3, 5]) for _ in imgs]
    crowd = [torch.zeros(3, dtype=torch.long) for _ in imgs]
    bbx = [torch.tensor([[10., 20, 80, 90], [50, 100, 150, 200], [0, 0, 60, 40]]) for _ in imgs]

    def fwd():
        return model(img=imgs, cat=cat, iscrowd=crowd, bbx=bbx, do_loss=True,
                     do_prediction=False)[0]

    def fwd_bwd():
        model.zero_grad()
        sum(fwd().values()).backward()
    t_f, t_fb = median_seconds(fwd, args.repeats), median_seconds(fwd_bwd, args.repeats)
    print('synthetic_cpu network, batch 4 of 192x256: forward+losses {:.3f} s, '
          '+backward {:.3f} s (backward/forward {:.1f}x)'.format(t_f, t_fb, (t_fb - t_f) / t_f))


if __name__ == '__main__':
    main()
