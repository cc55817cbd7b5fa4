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



# ------------------------------------- pipeline and training step vs ssd.pytorch's own code
# ssd.pytorch is not a dependency: pass a checkout with --ssd-pytorch PATH (or the env var
# SSD_PYTORCH). Two patches, applied in memory only, let its code run on today's stack:
#  * utils/augmentations.py imports torchvision.transforms and never uses it: a stub module
#    stands in when torchvision is absent;
#  * data/coco.py opens ~/data/coco/coco_labels.txt at import (a default argument): HOME
#    points at a temporary folder holding the label file the checkout ships while importing;
#  * layers/modules/multibox_loss.py indexes the [B*P, 1] loss with a [B, P] mask
#    (``loss_c[pos] = 0``), an error since PyTorch 0.4; the reshape it does one line later
#    is moved before it (the fix every fork applies).
def import_ssd_pytorch(path):
    """ssd.pytorch's (SSDAugmentation, detection_collate, build_ssd, MultiBoxLoss)."""
    import importlib.util
    import types
    path = os.path.abspath(os.path.expanduser(path))
    if not os.path.isfile(os.path.join(path, 'ssd.py')):
        raise FileNotFoundError('--ssd-pytorch {}: no ssd.py there; give a checkout of '
                                'github.com/amdegroot/ssd.pytorch'.format(path))
    if importlib.util.find_spec('torchvision') is None:
        stub = types.ModuleType('torchvision')
        stub.transforms = types.ModuleType('torchvision.transforms')
        sys.modules.setdefault('torchvision', stub)
        sys.modules.setdefault('torchvision.transforms', stub.transforms)
    sys.path.insert(0, path)
    import shutil
    import tempfile
    home, fake_home = os.environ.get('HOME'), tempfile.mkdtemp()
    os.makedirs(os.path.join(fake_home, 'data', 'coco'))
    shutil.copy(os.path.join(path, 'data', 'coco_labels.txt'),
                os.path.join(fake_home, 'data', 'coco'))
    os.environ['HOME'] = fake_home
    try:
        import data as ref_data  # noqa: E402  (ssd.pytorch's package of that name)
    finally:
        if home is None:
            del os.environ['HOME']
        else:
            os.environ['HOME'] = home
    from utils.augmentations import SSDAugmentation as RefAugmentation
    import layers.modules.multibox_loss as ref_loss_module
    source = open(ref_loss_module.__file__).read()
    patched = source.replace('        loss_c[pos] = 0  # filter out pos boxes for now\n'
                             '        loss_c = loss_c.view(num, -1)\n',
                             '        loss_c = loss_c.view(num, -1)\n'
                             '        loss_c[pos] = 0  # filter out pos boxes for now\n')
    if patched == source:
        raise RuntimeError('ssd.pytorch multibox_loss.py is not the version this bench patches')
    exec(compile(patched, ref_loss_module.__file__, 'exec'),  # pylint: disable=exec-used
         ref_loss_module.__dict__)
    from ssd import build_ssd as ref_build_ssd
    return (RefAugmentation, ref_data.detection_collate, ref_build_ssd,
            ref_loss_module.MultiBoxLoss)


def pipeline_samples(n, seed=0):
    """BGR uint8 images of VOC-like sizes with relative boxes and labels."""
    import numpy as np
    rng = np.random.RandomState(seed)
    out = []
    for _ in range(n):
        h, w = rng.randint(300, 500), rng.randint(300, 500)
        img = rng.randint(0, 256, (h, w, 3)).astype(np.uint8)
        m = rng.randint(1, 6)
        xy = rng.uniform(0, 0.7, (m, 2))
        boxes = np.concatenate([xy, xy + rng.uniform(0.05, 0.3, (m, 2))], 1)
        out.append((img, boxes, rng.randint(0, 20, m).astype(np.float64)))
    return out


def run_pipeline(augment, collate, samples, seed):
    """ssd.pytorch's pull_item (augment, BGR->RGB, CHW tensor) for each sample, then collate."""
    import numpy as np
    np.random.seed(seed)
    batch = []
    for img, boxes, labels in samples:
        out, b, l = augment(img, boxes.copy(), labels.copy())
        out = out[:, :, (2, 1, 0)]
        batch.append((torch.from_numpy(out).permute(2, 0, 1),
                      np.hstack((b, np.expand_dims(l, axis=1)))))
    return collate(batch)


def compare_with_ssd_pytorch(path, step_batch, repeats):
    """Rows (name, ours s, reference s) for the pipeline and one training step."""
    from gluontrain.torch.ssd.augmentations import SSDAugmentation
    from gluontrain.torch.ssd.data import detection_collate
    from gluontrain.torch.ssd.model import build_ssd
    ref_aug, ref_collate, ref_build, ref_loss = import_ssd_pytorch(path)
    samples = pipeline_samples(32)
    ours = run_pipeline(SSDAugmentation(300), detection_collate, samples, 0)
    ref = run_pipeline(ref_aug(300), ref_collate, samples, 0)
    assert torch.equal(ours[0], ref[0]) and all(
        torch.equal(a, b) for a, b in zip(ours[1], ref[1])), 'pipelines differ'
    device = torch.device('cpu')
    rows = [('SSDAugmentation+collate, 32 images',
             timed(lambda: run_pipeline(SSDAugmentation(300), detection_collate, samples, 0),
                   repeats, device),
             timed(lambda: run_pipeline(ref_aug(300), ref_collate, samples, 0), repeats,
                   device))]
    # one SGD step on the same weights and batch
    torch.manual_seed(0)
    ref_net = ref_build('train', 300, 21)
    our_net = build_ssd('train', 300, 21)
    our_net.load_state_dict(ref_net.state_dict())
    images, targets = run_pipeline(SSDAugmentation(300), detection_collate,
                                   pipeline_samples(step_batch, seed=1), 1)
    criterion = MultiBoxLoss(21, 0.5, True, 0, True, 3, 0.5, False)
    ref_criterion = ref_loss(21, 0.5, True, 0, True, 3, 0.5, False, use_gpu=False)
    states = {id(our_net): our_net.state_dict(), id(ref_net): ref_net.state_dict()}
    states = {k: {n: t.clone() for n, t in v.items()} for k, v in states.items()}

    def step(net, crit):
        net.load_state_dict(states[id(net)])
        opt = torch.optim.SGD(net.parameters(), lr=1e-3, momentum=0.9, weight_decay=5e-4)
        out = net(images)
        opt.zero_grad()
        loss_l, loss_c = crit(out, targets)
        (loss_l + loss_c).backward()
        opt.step()
        return float(loss_l), float(loss_c)

    # the first call of each is both the check and the timing (a batch-32 VGG step takes
    # minutes on a CPU); --repeats > 1 adds runs and takes the median
    step_times = {'ours': [], 'ref': []}
    for _ in range(max(1, repeats)):
        for key, net, crit in (('ours', our_net, criterion), ('ref', ref_net, ref_criterion)):
            tic = time.perf_counter()
            losses = step(net, crit)
            step_times[key].append(time.perf_counter() - tic)
            if key == 'ours':
                ours_losses = losses
            else:
                ref_losses = losses
        assert ours_losses == ref_losses, (ours_losses, ref_losses)
    print('one step at batch {}: losses ours (loc {:.6f}, conf {:.6f}), ssd.pytorch '
          '(loc {:.6f}, conf {:.6f})'.format(step_batch, *ours_losses, *ref_losses))
    rows.append(('train step (fwd+loss+bwd+SGD), batch %d' % step_batch,
                 statistics.median(step_times['ours']), statistics.median(step_times['ref'])))
    return rows


def main_vs_reference(argv=None):
    """Entry point of the appended section: ``--ssd-pytorch PATH [--step-batch 32]``."""
    parser = argparse.ArgumentParser(description='SSD pipeline and step vs ssd.pytorch')
    parser.add_argument('--ssd-pytorch', default=os.environ.get('SSD_PYTORCH', ''))
    parser.add_argument('--step-batch', type=int, default=32)
    parser.add_argument('--threads', type=int, default=1)
    parser.add_argument('--repeats', type=int, default=1)
    args, _ = parser.parse_known_args(argv)
    if not args.ssd_pytorch:
        print('ssd.pytorch comparison skipped: give a checkout of '
              'github.com/amdegroot/ssd.pytorch with --ssd-pytorch PATH or SSD_PYTORCH')
        return
    torch.set_num_threads(args.threads)
    rows = compare_with_ssd_pytorch(args.ssd_pytorch, args.step_batch, args.repeats)
    print('vs ssd.pytorch, %d thread(s), median of %d runs; outputs checked equal first'
          % (args.threads, args.repeats))
    print('%-42s %12s %12s %8s' % ('case', 'ours (ms)', 'ssd.pytorch', 'speed-up'))
    for name, ours_s, ref_s in rows:
        print('%-42s %12.1f %12.1f %7.2fx' % (name, ours_s * 1e3, ref_s * 1e3, ref_s / ours_s))


if __name__ == '__main__':
    if '--ssd-pytorch' in sys.argv or os.environ.get('SSD_PYTORCH'):
        main_vs_reference()
    else:
        main()
        main_vs_reference([])
