"""Anchor / proposal matching and sampling against seamseg's logic written as plain loops,
hand-built cases, sampling counts and seeded draws."""
import numpy as np
import pytest
import torch

from gluontrain.torch.ops import (NEGATIVE, VOID, match_anchors, match_proposals,
                                  sample_proposals, subsample_anchors)


def iou(a, b):
    inter = max(min(a[2], b[2]) - max(a[0], b[0]), 0) * max(min(a[3], b[3]) - max(a[1], b[1]), 0)
    area = lambda t: (t[2] - t[0]) * (t[3] - t[1])
    return inter / (area(a) + area(b) - inter)


def ioa(a, b):
    inter = max(min(a[2], b[2]) - max(a[0], b[0]), 0) * max(min(a[3], b[3]) - max(a[1], b[1]), 0)
    return inter / ((a[2] - a[0]) * (a[3] - a[1]))


def naive_match_anchors(anchors, gts, crowds, size, pos=.7, neg=.3, void=.7):
    A, G = anchors.tolist(), gts.tolist()
    valid = [a[0] >= 0 and a[1] >= 0 and a[2] <= size[0] and a[3] <= size[1]
             and (not crowds.shape[0] or max(ioa(a, c) for c in crowds.tolist()) < void)
             for a in A]
    vidx = [i for i, v in enumerate(valid) if v]
    match = [VOID] * len(A)
    for i in vidx:
        if not G:
            match[i] = NEGATIVE
            continue
        ious = [iou(A[i], g) for g in G]
        best = max(ious)
        if best >= pos:
            match[i] = ious.index(best)
        elif best < neg:
            match[i] = NEGATIVE
    for k, g in enumerate(G):  # later gts overwrite: the last one wins a shared anchor
        if not vidx:
            break
        ious = [iou(A[i], g) for i in vidx]
        if max(ious) > 0:
            match[vidx[ious.index(max(ious))]] = k
    return match


def random_scene(seed, n_anchor=200, n_gt=5, n_crowd=1):
    gen = torch.Generator().manual_seed(seed)
    lo = torch.rand(n_anchor, 2, generator=gen) * 70 - 10
    anchors = torch.cat([lo, lo + 8 + torch.rand(n_anchor, 2, generator=gen) * 30], 1)
    lo = torch.rand(n_gt, 2, generator=gen) * 50
    gts = torch.cat([lo, lo + 5 + torch.rand(n_gt, 2, generator=gen) * 25], 1)
    gts = torch.cat([gts, anchors[:2]])  # exact copies: IoU 1
    lo = torch.rand(n_crowd, 2, generator=gen) * 50
    crowds = torch.cat([lo, lo + 20], 1)
    return anchors, gts, crowds


@pytest.mark.parametrize('seed,n_gt,n_crowd', [(0, 5, 1), (1, 1, 0), (2, 12, 2), (3, 0, 1)])
def test_match_anchors_equals_naive_loop(seed, n_gt, n_crowd):
    anchors, gts, crowds = random_scene(seed, n_gt=n_gt, n_crowd=n_crowd)
    if n_gt == 0:
        gts = gts[:0]
    got = match_anchors(anchors, gts, crowds, (60, 64))
    assert got.tolist() == naive_match_anchors(anchors, gts, crowds, (60, 64))
    assert ((got >= 0).sum() > 0) == (n_gt > 0)


def test_match_anchors_hand_built():
    anchors = torch.tensor([[0., 0., 10., 10.],   # = gt 0: positive
                            [0., 0., 10., 11.],   # IoU 10/11 with gt 0: positive
                            [20., 20., 30., 30.],  # no overlap: negative
                            [0., 0., 10., 20.],   # IoU .5: void (between .3 and .7)
                            [-1., 0., 9., 10.],   # outside the image: void
                            [40., 40., 50., 50.],  # inside a crowd: void
                            [30., 0., 50., 5.]])   # best anchor of gt 1 (IoU .1): forced
    gts = torch.tensor([[0., 0., 10., 10.], [30., 0., 40., 1.]])
    crowd = torch.tensor([[38., 38., 60., 60.]])
    got = match_anchors(anchors, gts, crowd, (60, 60))
    assert got.tolist() == [0, 0, NEGATIVE, VOID, VOID, VOID, 1]
    assert match_anchors(anchors, None, crowd, (60, 60)).tolist() == \
        [NEGATIVE, NEGATIVE, NEGATIVE, NEGATIVE, VOID, VOID, NEGATIVE]
    assert match_anchors(anchors, gts, crowd, (1, 1)).tolist() == [VOID] * 7
    assert match_anchors(anchors[:0], gts, None, (60, 60)).numel() == 0


def seamseg_subsample(match, num_samples, pos_ratio):
    """seamseg AnchorMatcher._subsample verbatim in behaviour (global torch RNG)."""
    num_pos = int(num_samples * pos_ratio)
    pos_idx = torch.nonzero(match >= 0).view(-1)
    if pos_idx.numel() > num_pos:
        match[pos_idx[torch.randperm(pos_idx.numel(), dtype=torch.long)[num_pos:]]] = -2
    else:
        num_pos = pos_idx.numel()
    neg_idx = torch.nonzero(match == -1).view(-1)
    if neg_idx.numel() > num_samples - num_pos:
        match[neg_idx[torch.randperm(neg_idx.numel(), dtype=torch.long)[num_samples - num_pos:]]] = -2
    return match


@pytest.mark.parametrize('n_pos,n_neg', [(300, 600), (10, 600), (0, 50), (5, 3)])
def test_subsample_anchors_counts_and_seamseg_draws(n_pos, n_neg):
    match = torch.tensor([3] * n_pos + [NEGATIVE] * n_neg + [VOID] * 7)
    match = match[torch.randperm(match.numel(), generator=torch.Generator().manual_seed(0))]
    torch.manual_seed(11)
    got = subsample_anchors(match, 256, .5)
    torch.manual_seed(11)
    want = seamseg_subsample(match.clone(), 256, .5)
    assert torch.equal(got, want)
    kept_pos = min(n_pos, 128)
    assert (got >= 0).sum().item() == kept_pos
    assert (got == NEGATIVE).sum().item() == min(n_neg, 256 - kept_pos)
    assert (match >= 0).sum().item() == n_pos  # input untouched


def test_sample_proposals_counts_and_draws():
    pos = torch.zeros(100, dtype=torch.bool)
    pos[:50] = True
    pos_idx, neg_idx = sample_proposals(pos, ~pos, 128, .25, np.random.RandomState(0))
    assert pos_idx.numel() == 32 and neg_idx.numel() == 50
    rs = np.random.RandomState(0)
    assert pos_idx.tolist() == rs.permutation(50)[:32].tolist()
    assert neg_idx.tolist() == (50 + rs.permutation(50)).tolist()
    few, _ = sample_proposals(pos[:52] & (torch.arange(52) < 3), ~pos[:52], 128, .25,
                              np.random.RandomState(0))
    assert sorted(few.tolist()) == [0, 1, 2]


def test_match_proposals_hand_built():
    gts = torch.tensor([[0., 0., 10., 10.], [20., 20., 30., 30.]])
    props = torch.tensor([[0., 0., 10., 12.],    # IoU 10/12 with gt 0: positive
                          [20., 20., 30., 40.],   # IoU .5 with gt 1: positive (>=)
                          [50., 50., 60., 60.],   # IoU 0: negative (lo threshold 0)
                          [70., 70., 80., 80.]])  # in the crowd: dropped
    crowd = torch.tensor([[65., 65., 90., 90.]])
    rois, match = match_proposals(props, gts, crowd, rng=np.random.RandomState(0))
    assert rois.shape == (5, 4) and match.tolist()[4] == NEGATIVE
    pos = {tuple(r) for r in rois[:4].tolist()}
    assert pos == {(0., 0., 10., 10.), (20., 20., 30., 30.), (0., 0., 10., 12.),
                   (20., 20., 30., 40.)}
    for r, m in zip(rois[:4].tolist(), match[:4].tolist()):
        assert m == (0 if r[0] == 0 else 1)
    assert rois[4].tolist() == [50., 50., 60., 60.]


def test_match_proposals_empty_cases():
    props = torch.tensor([[0., 0., 5., 5.]])
    rois, match = match_proposals(None, None, None)
    assert rois.shape == (0, 4) and match.shape == (0,) and match.dtype == torch.long
    rois, match = match_proposals(props, None, None, rng=np.random.RandomState(0))
    assert rois.tolist() == props.tolist() and match.tolist() == [NEGATIVE]
    rois, match = match_proposals(props, torch.zeros(0, 4), torch.tensor([[0., 0., 9., 9.]]))
    assert rois.shape == (0, 4) and match.numel() == 0  # the only proposal is in a crowd


def naive_match_proposals(props, gts, crowds, rs, num=128, ratio=.25):
    """seamseg ProposalMatcher.__call__ as loops (same numpy draws)."""
    P = torch.cat([gts, props]).tolist()
    P = [p for p in P if max(ioa(p, c) for c in crowds.tolist()) < .7]
    best = [max(range(len(gts)), key=lambda k: (iou(p, gts[k].tolist()), -k)) for p in P]
    biou = [iou(p, gts[b].tolist()) for p, b in zip(P, best)]
    pos = [i for i, v in enumerate(biou) if v >= .5]
    neg = [i for i, v in enumerate(biou) if 0 <= v < .5]
    sel_pos = [pos[j] for j in rs.permutation(len(pos))[:min(int(num * ratio), len(pos))]] \
        if pos else []
    sel_neg = [neg[j] for j in rs.permutation(len(neg))[:min(num - len(sel_pos), len(neg))]] \
        if neg else []
    return [P[i] for i in sel_pos + sel_neg], [best[i] for i in sel_pos] + [-1] * len(sel_neg)


@pytest.mark.parametrize('seed', [0, 1, 2])
def test_match_proposals_equals_naive_loop(seed):
    anchors, gts, crowds = random_scene(seed, n_anchor=300, n_gt=6)
    rois, match = match_proposals(anchors, gts, crowds, rng=np.random.RandomState(seed))
    want_rois, want_match = naive_match_proposals(anchors, gts, crowds,
                                                  np.random.RandomState(seed))
    assert torch.allclose(rois, torch.tensor(want_rois)) and match.tolist() == want_match
