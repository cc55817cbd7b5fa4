"""Relation pair sampling: counts hand-computed from SGB's rules."""
import numpy as np
import torch

from gluontrain.torch.sgg.modeling.sampling import RelationSampling
from gluontrain.torch.twostage.structures import BoxList


def _sampler(batch=8, fraction=0.25, use_gt_box=True, require_overlap=False, per_gt=4,
             test_overlap=True, seed=0):
    return RelationSampling(0.5, require_overlap, per_gt, batch, fraction, use_gt_box,
                            test_overlap, torch.Generator().manual_seed(seed),
                            np.random.RandomState(seed))


def _gt(n=4, rels=((0, 1, 2), (1, 2, 1), (3, 0, 3))):
    boxes = torch.tensor([[0., 0., 9., 9.], [5., 5., 20., 20.], [30., 30., 40., 40.],
                          [0., 30., 10., 45.]])[:n]
    t = BoxList(boxes, (50, 50))
    t.add_field('labels', torch.arange(1, n + 1))
    rel = torch.zeros(n, n, dtype=torch.long)
    for h, tl, p in rels:
        rel[h, tl] = p
    t.add_field('relation', rel, is_triplet=True)
    return t


def _pairs(t):
    return [tuple(p) for p in t.tolist()]


def test_gtbox_fg_capped_bg_fills_batch():
    # 4 boxes, 3 GT pairs; batch 8 x 0.25 -> at most 2 fg; 8 - 2 = 6 bg of the 12 - 3 = 9
    gt = _gt()
    _, labels, pairs, binary = _sampler(batch=8).gtbox_relsample([gt], [gt])
    labels, pairs = labels[0], pairs[0]
    assert labels.shape == (8,) and pairs.shape == (8, 2)
    gt_pairs = {(0, 1): 2, (1, 2): 1, (3, 0): 3}
    fg = _pairs(pairs[:2])
    assert all(p in gt_pairs for p in fg)
    assert [gt_pairs[p] for p in fg] == labels[:2].tolist()
    assert labels[2:].tolist() == [0] * 6
    bg = _pairs(pairs[2:])
    # background: no GT pair (not even the one dropped by the cap), no self pair, no repeat
    assert not set(bg) & set(gt_pairs)
    assert all(h != t for h, t in bg)
    assert len(set(bg)) == 6 and len(set(fg)) == 2
    expect = torch.zeros(4, 4, dtype=torch.long)
    for h, t in gt_pairs:
        expect[h, t] = expect[t, h] = 1
    assert torch.equal(binary[0], expect)


def test_gtbox_all_pairs_when_batch_is_large():
    # batch 64 x 0.25 = 16 >= 3 fg; all 9 background candidates
    gt = _gt()
    _, labels, pairs, _ = _sampler(batch=64).gtbox_relsample([gt], [gt])
    assert labels[0].shape == (12,)
    assert sorted(labels[0][:3].tolist()) == [1, 2, 3]
    assert len(set(_pairs(pairs[0]))) == 12  # every ordered pair i != j exactly once


def test_gtbox_same_seed_same_pairs():
    gt = _gt()
    a = _sampler(seed=3).gtbox_relsample([gt], [gt])[2][0]
    b = _sampler(seed=3).gtbox_relsample([gt], [gt])[2][0]
    assert torch.equal(a, b)


def _detection_case():
    # targets A (label 1) -> B (label 2), predicate 3
    tgt = BoxList(torch.tensor([[0., 0., 9., 9.], [20., 0., 29., 9.]]), (60, 60))
    tgt.add_field('labels', torch.tensor([1, 2]))
    rel = torch.zeros(2, 2, dtype=torch.long)
    rel[0, 1] = 3
    tgt.add_field('relation', rel, is_triplet=True)
    # p0 = A, p1 ~ A (IoU 0.9), p2 = B, p3 ~ B, p4 background, p5 = A's box with label 2
    prp = BoxList(torch.tensor([[0., 0., 9., 9.], [0., 0., 9., 8.], [20., 0., 29., 9.],
                                [20., 0., 29., 8.], [40., 40., 49., 49.], [0., 0., 9., 9.]]),
                  (60, 60))
    prp.add_field('labels', torch.tensor([1, 1, 2, 2, 0, 2]))
    return prp, tgt


def test_detect_fg_pairs_and_background():
    prp, tgt = _detection_case()
    _, labels, pairs, binary = _sampler(batch=64, use_gt_box=False).detect_relsample(
        [prp], [tgt])
    labels, pairs = labels[0], _pairs(pairs[0])
    # fg: heads {p0, p1} x tails {p2, p3}; bg: ordered pairs of the 5 labelled proposals
    # (20) minus the 4 fg; num_neg = min(64 - 4, 16)
    assert labels[:4].tolist() == [3] * 4
    assert sorted(pairs[:4]) == [(0, 2), (0, 3), (1, 2), (1, 3)]
    assert labels[4:].tolist() == [0] * 16
    assert all(4 not in p and p[0] != p[1] for p in pairs)
    assert len(set(pairs)) == 20
    assert binary[0][0, 2] == 1 and binary[0][2, 0] == 1 and binary[0][0, 1] == 0


def test_detect_require_overlap_and_per_gt_cap():
    prp, tgt = _detection_case()
    s = _sampler(batch=64, use_gt_box=False, require_overlap=True, per_gt=2)
    _, labels, pairs, _ = s.detect_relsample([prp], [tgt])
    pairs = _pairs(pairs[0])
    # 2 of the 4 fg pairs; bg only 0 < IoU < 1: (0,1), (1,0), (1,5), (5,1), (2,3), (3,2)
    assert labels[0].tolist() == [3, 3] + [0] * 6
    assert set(pairs[:2]) <= {(0, 2), (0, 3), (1, 2), (1, 3)} and len(set(pairs[:2])) == 2
    assert sorted(pairs[2:]) == [(0, 1), (1, 0), (1, 5), (2, 3), (3, 2), (5, 1)]


def test_detect_fg_cap_and_self_pair_placeholder():
    prp, tgt = _detection_case()
    # batch 4 x 0.25 = 1 fg pair, 3 bg
    _, labels, _, _ = _sampler(batch=4, use_gt_box=False).detect_relsample([prp], [tgt])
    assert labels[0].tolist() == [3, 0, 0, 0]
    # two GT boxes matched by the same single proposal: the only pair is a self pair
    tgt = BoxList(torch.tensor([[0., 0., 9., 9.], [0., 0., 9., 9.]]), (60, 60))
    tgt.add_field('labels', torch.tensor([1, 1]))
    rel = torch.zeros(2, 2, dtype=torch.long)
    rel[0, 1] = 2
    tgt.add_field('relation', rel, is_triplet=True)
    one = BoxList(torch.tensor([[0., 0., 9., 9.]]), (60, 60))
    one.add_field('labels', torch.tensor([1]))
    _, labels, pairs, _ = _sampler(use_gt_box=False).detect_relsample([one], [tgt])
    assert labels[0].tolist() == [0] and pairs[0].tolist() == [[0, 0]]


def test_prepare_test_pairs():
    gt = _gt(3, ((0, 1, 2),))
    pairs = _sampler().prepare_test_pairs('cpu', [gt, _gt(1, ())])
    assert pairs[0].tolist() == [[0, 1], [0, 2], [1, 0], [1, 2], [2, 0], [2, 1]]
    assert pairs[1].tolist() == [[0, 0]]
    # SGDet with TEST.RELATION.REQUIRE_OVERLAP: only boxes 0 and 1 overlap
    sgdet = _sampler(use_gt_box=False, test_overlap=True).prepare_test_pairs('cpu', [gt])
    assert sgdet[0].tolist() == [[0, 1], [1, 0]]
