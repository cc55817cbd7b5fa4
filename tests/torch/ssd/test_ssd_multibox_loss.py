"""MultiBoxLoss: a hand-computed case, an independent per-prior loop, target forms, fixes."""
import math

import numpy as np
import pytest
import torch

from gluontrain.torch.batchify import Pad
from gluontrain.torch.ssd.multibox_loss import MultiBoxLoss, pad_targets


def criterion(num_classes=3):
    return MultiBoxLoss(num_classes, 0.5, True, 0, True, 3, 0.5, False)  # train.py's call


def naive_loss(loc, conf, priors, targets, thr=0.5, ratio=3, var=(0.1, 0.2)):
    """SSD loss one prior at a time in Python floats (an independent re-derivation)."""
    loc, conf, priors = loc.tolist(), conf.tolist(), priors.tolist()
    total_l = total_c = 0.0
    num_pos_total = 0
    for b, rows in enumerate(targets):
        rows = rows.tolist()
        n_p = len(priors)
        if not rows:
            continue  # all background, no positive, so no negative is mined
        pf = [[cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2] for cx, cy, w, h in priors]

        def iou(g, p):
            iw = max(min(g[2], p[2]) - max(g[0], p[0]), 0)
            ih = max(min(g[3], p[3]) - max(g[1], p[1]), 0)
            inter = iw * ih
            return inter / ((g[2] - g[0]) * (g[3] - g[1]) + (p[2] - p[0]) * (p[3] - p[1]) - inter)

        ov = [[iou(g, p) for p in pf] for g in rows]
        best_g = [max(range(len(rows)), key=lambda g: (ov[g][p], -g)) for p in range(n_p)]
        best_ov = [ov[best_g[p]][p] for p in range(n_p)]
        for g in range(len(rows)):  # later gts overwrite: the last one wins
            bp = max(range(n_p), key=lambda p: (ov[g][p], -p))
            best_g[bp], best_ov[bp] = g, 2.0
        target = [int(rows[best_g[p]][4]) + 1 if best_ov[p] >= thr else 0 for p in range(n_p)]
        ce = [math.log(sum(math.exp(v) for v in conf[b][p])) - conf[b][p][target[p]]
              for p in range(n_p)]
        pos = [p for p in range(n_p) if target[p] > 0]
        for p in pos:
            g = rows[best_g[p]]
            cx, cy, w, h = priors[p]
            t = [((g[0] + g[2]) / 2 - cx) / (var[0] * w), ((g[1] + g[3]) / 2 - cy) / (var[0] * h),
                 math.log((g[2] - g[0]) / w) / var[1], math.log((g[3] - g[1]) / h) / var[1]]
            for d, tv in zip(loc[b][p], t):
                x = abs(d - tv)
                total_l += 0.5 * x * x if x < 1 else x - 0.5
        ranked = sorted(range(n_p), key=lambda p: -(0.0 if target[p] > 0 else ce[p]))
        negs = ranked[:min(ratio * len(pos), n_p - 1)]
        total_c += sum(ce[p] for p in set(pos) | set(negs))
        num_pos_total += len(pos)
    n = max(num_pos_total, 1)
    return total_l / n, total_c / n


def hand_case():
    # p0 is exactly the gt; p1..p5 lie elsewhere (IoU 0)
    priors = torch.tensor([[0.375, 0.375, 0.25, 0.25]] +
                          [[0.85, 0.1 + 0.15 * k, 0.1, 0.1] for k in range(5)])
    loc = torch.zeros(1, 6, 4)
    loc[0, 0] = torch.tensor([0.5, -2.0, 0.0, 0.0])
    conf = torch.zeros(1, 6, 3)
    conf[0, 1:, 0] = torch.tensor([0.0, 2.0, -1.0, 1.0, 3.0])  # background logits
    targets = [torch.tensor([[0.25, 0.25, 0.5, 0.5, 1.0]])]
    return loc, conf, priors, targets


def test_hand_computed_case():
    loc, conf, priors, targets = hand_case()
    loc.requires_grad_(True)
    conf.requires_grad_(True)
    loss_l, loss_c = criterion()((loc, conf, priors), targets)
    # target of p0 is 0: smooth L1 of 0.5 and -2 -> 0.125 + 1.5; N = 1
    assert loss_l.item() == pytest.approx(1.625)
    # 1 positive -> 3 negatives: the largest background CEs, log(e^a + 2) - a for
    # a = -1 (p3), 0 (p1), 1 (p4); p2 (a = 2) and p5 (a = 3) are left out
    expected = (math.log(3) + (math.log(math.exp(-1) + 2) + 1) + math.log(3)
                + (math.log(math.e + 2) - 1))
    assert loss_c.item() == pytest.approx(expected, rel=1e-6)
    (loss_l + loss_c).backward()
    touched = conf.grad.abs().sum(-1)[0].ne(0).tolist()
    assert touched == [True, True, False, True, True, False]
    assert loc.grad[0, 1:].eq(0).all() and loc.grad[0, 0].ne(0).any()


def random_batch(seed, counts, num_priors=40, num_classes=3):
    gen = torch.Generator().manual_seed(seed)
    pxy = torch.rand(num_priors, 2, generator=gen)
    priors = torch.cat([pxy, 0.1 + torch.rand(num_priors, 2, generator=gen) * 0.4], 1)
    targets = []
    for n in counts:
        xy = torch.rand(n, 2, generator=gen) * 0.6
        boxes = torch.cat([xy, xy + 0.1 + torch.rand(n, 2, generator=gen) * 0.3], 1)
        labels = torch.randint(0, num_classes - 1, (n, 1), generator=gen).float()
        targets.append(torch.cat([boxes, labels], 1))
    loc = torch.randn(len(counts), num_priors, 4, generator=gen)
    conf = torch.randn(len(counts), num_priors, num_classes, generator=gen) * 2
    return loc, conf, priors, targets


@pytest.mark.parametrize('seed,counts', [(0, [2]), (1, [1, 3]), (2, [4, 2]), (3, [3, 0])])
def test_equals_naive_per_prior_loop(seed, counts):
    loc, conf, priors, targets = random_batch(seed, counts)
    loss_l, loss_c = criterion()((loc, conf, priors), targets)
    want_l, want_c = naive_loss(loc, conf, priors, targets)
    assert loss_l.item() == pytest.approx(want_l, rel=1e-5)
    assert loss_c.item() == pytest.approx(want_c, rel=1e-5)


def test_list_and_padded_targets_agree():
    loc, conf, priors, targets = random_batch(4, [1, 3, 2])
    padded = Pad(pad_val=-1)([t.numpy() for t in targets])
    assert padded.shape == (3, 3, 5)
    from_list = criterion()((loc, conf, priors), targets)
    from_pad = criterion()((loc, conf, priors), padded)
    assert torch.equal(from_list[0], from_pad[0]) and torch.equal(from_list[1], from_pad[1])
    # float64 padding (Pad of Python floats) is brought to the priors' dtype
    pad64 = Pad(pad_val=-1)([t.double().numpy() for t in targets])
    assert torch.equal(criterion()((loc, conf, priors), pad64)[1], from_list[1])


def test_pad_targets_marks_padding():
    padded, valid = pad_targets([torch.ones(2, 5), torch.ones(0, 5)])
    assert padded.shape == (2, 2, 5) and valid.tolist() == [[True, True], [False, False]]
    assert padded[1].eq(-1).all()


def test_no_positive_batch_is_finite_and_zero():
    loc, conf, priors, _ = random_batch(5, [0, 0])
    loc.requires_grad_(True)
    conf.requires_grad_(True)
    empty = [torch.zeros(0, 5), torch.zeros(0, 5)]
    for targets in (empty, torch.full((2, 1, 5), -1.0)):
        loss_l, loss_c = criterion()((loc, conf, priors), targets)
        # reference: 0 / 0 = nan (or a crash on the empty image); num_neg = 3 * 0 mines nothing
        assert loss_l.item() == 0.0 and loss_c.item() == 0.0
        (loss_l + loss_c).backward()
        assert torch.isfinite(conf.grad).all()


def test_image_without_objects_contributes_nothing():
    loc, conf, priors, targets = random_batch(6, [3, 0])
    both = criterion()((loc, conf, priors), targets)
    alone = criterion()((loc[:1], conf[:1], priors), targets[:1])
    assert torch.allclose(both[0], alone[0]) and torch.allclose(both[1], alone[1])


def test_degenerate_gt_gives_finite_loss():
    loc, conf, priors, targets = random_batch(7, [2])
    targets[0][1, 2] = targets[0][1, 0]  # zero width: the reference's encode gives -inf
    loss_l, loss_c = criterion()((loc, conf, priors), targets)
    assert math.isfinite(loss_l.item()) and math.isfinite(loss_c.item())


def test_tied_negatives_mined_by_prior_index():
    loc, conf, priors, targets = hand_case()
    conf = torch.zeros(1, 6, 3, requires_grad=True)  # every negative has CE log 3
    loss_l, loss_c = criterion()((loc, conf, priors), targets)
    assert loss_c.item() == pytest.approx(4 * math.log(3))
    loss_c.backward()
    touched = np.flatnonzero(conf.grad.abs().sum(-1)[0].numpy()).tolist()
    assert touched == [0, 1, 2, 3]  # the positive and the three lowest-index negatives


def test_num_neg_capped_at_num_priors_minus_one():
    loc, conf, priors, targets = hand_case()
    targets = [torch.tensor([[0.25, 0.25, 0.5, 0.5, 1.0], [0.8, 0.05, 0.9, 0.15, 0.0]])]
    conf = torch.zeros(1, 6, 3, requires_grad=True)
    _, loss_c = criterion()((loc, conf, priors), targets)
    # 2 positives -> min(6, 5) = 5 "negatives": every prior gets a CE of log 3
    assert loss_c.item() == pytest.approx(6 * math.log(3) / 2)


def test_first_ranked_equals_double_argsort():
    from gluontrain.torch.ssd.multibox_loss import _first_ranked
    gen = torch.Generator().manual_seed(8)
    loss = torch.randint(0, 6, (5, 300), generator=gen).float()  # heavy ties
    loss[3] = torch.rand(300, generator=gen)  # and a row without ties
    count = torch.tensor([[0], [1], [37], [120], [299]])
    _, order = loss.sort(dim=1, descending=True, stable=True)
    _, rank = order.sort(1)
    assert torch.equal(_first_ranked(loss, count), rank < count)


def test_fractional_neg_pos_ratio():
    loc, conf, priors, targets = hand_case()
    ratio = MultiBoxLoss(3, 0.5, True, 0, True, 2.5, 0.5, False)
    # 1 positive: rank < 2.5 admits 3 negatives, as with neg_pos = 3
    assert torch.equal(ratio((loc, conf, priors), targets)[1],
                       criterion()((loc, conf, priors), targets)[1])
