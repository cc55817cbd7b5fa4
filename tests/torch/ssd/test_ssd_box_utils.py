"""Box utilities: hand-built jaccard / match cases and equality with the reference loops."""
import math

import pytest
import torch

from gluontrain.torch.ssd import box_utils as bu

VAR = (0.1, 0.2)


def centre(point_boxes):
    b = torch.tensor(point_boxes, dtype=torch.float32)
    return torch.cat([(b[:, :2] + b[:, 2:]) / 2, b[:, 2:] - b[:, :2]], 1)


def naive_match(threshold, truths, priors, variances, labels):
    """The reference's ``match`` with its Python loop over gts (written for the test)."""
    overlaps = bu.jaccard(truths, bu.point_form(priors))
    _, best_prior_idx = overlaps.max(1)
    best_truth_overlap, best_truth_idx = overlaps.max(0)
    best_truth_overlap.index_fill_(0, best_prior_idx, 2)
    for j in range(best_prior_idx.size(0)):
        best_truth_idx[best_prior_idx[j]] = j
    conf = labels[best_truth_idx] + 1
    conf[best_truth_overlap < threshold] = 0
    m = truths[best_truth_idx]
    g_cxcy = ((m[:, :2] + m[:, 2:]) / 2 - priors[:, :2]) / (variances[0] * priors[:, 2:])
    g_wh = torch.log((m[:, 2:] - m[:, :2]) / priors[:, 2:]) / variances[1]
    return torch.cat([g_cxcy, g_wh], 1), conf.long()


def random_case(gen, num_gt, num_priors=60):
    xy = torch.rand(num_gt, 2, generator=gen) * 0.6
    truths = torch.cat([xy, xy + 0.05 + torch.rand(num_gt, 2, generator=gen) * 0.35], 1)
    pxy = torch.rand(num_priors, 2, generator=gen)
    priors = torch.cat([pxy, 0.05 + torch.rand(num_priors, 2, generator=gen) * 0.5], 1)
    labels = torch.randint(0, 5, (num_gt,), generator=gen).float()
    return truths, priors, labels


def test_point_form_center_size_round_trip():
    cs = torch.tensor([[0.5, 0.5, 0.2, 0.4], [0.1, 0.3, 0.2, 0.2]])
    pf = bu.point_form(cs)
    assert torch.allclose(pf, torch.tensor([[0.4, 0.3, 0.6, 0.7], [0.0, 0.2, 0.2, 0.4]]))
    assert torch.allclose(bu.center_size(pf), cs)  # broken in the reference, fixed here


def test_intersect_and_jaccard_hand_built():
    a = torch.tensor([[0., 0., 2., 2.], [0., 0., 4., 4.]])
    b = torch.tensor([[1., 1., 3., 3.], [0., 0., 2., 2.], [5., 5., 6., 6.]])
    assert torch.equal(bu.intersect(a, b), torch.tensor([[1., 4., 0.], [4., 4., 0.]]))
    expected = torch.tensor([[1 / 7, 1., 0.], [4 / 16, 4 / 16, 0.]])
    assert torch.allclose(bu.jaccard(a, b), expected)
    # batched leading dimension gives the per-image numbers
    assert torch.equal(bu.jaccard(torch.stack([a, a]), b)[1], bu.jaccard(a, b))


def test_encode_decode_round_trip():
    gen = torch.Generator().manual_seed(0)
    truths, priors, _ = random_case(gen, 50, 50)
    enc = bu.encode(truths, priors, VAR)
    assert torch.allclose(bu.decode(enc, priors, VAR), truths, atol=1e-6)


def test_encode_valid_boxes_bit_identical_to_formula():
    gen = torch.Generator().manual_seed(1)
    m, priors, _ = random_case(gen, 40, 40)
    g_cxcy = (m[:, :2] + m[:, 2:]) / 2 - priors[:, :2]
    g_cxcy /= (VAR[0] * priors[:, 2:])
    g_wh = torch.log((m[:, 2:] - m[:, :2]) / priors[:, 2:]) / VAR[1]
    assert torch.equal(bu.encode(m, priors, VAR), torch.cat([g_cxcy, g_wh], 1))


def test_encode_degenerate_box_is_finite():
    priors = centre([[0., 0., 0.5, 0.5]])
    flat = torch.tensor([[0.1, 0.1, 0.1, 0.3]])  # zero width: the reference gives -inf
    enc = bu.encode(flat, priors, VAR)
    assert torch.isfinite(enc).all()
    assert enc[0, 2].item() == pytest.approx(math.log(bu.ENCODE_EPS) / 0.2, rel=1e-5)


def test_decode_hand_computed():
    priors = torch.tensor([[0.5, 0.5, 0.2, 0.4]])
    loc = torch.tensor([[1.0, -1.0, 0.0, 5 * math.log(2)]])
    # cx = 0.5 + 1*0.1*0.2, cy = 0.5 - 0.1*0.4, w = 0.2, h = 0.4 * 2
    expected = torch.tensor([[0.52 - 0.1, 0.46 - 0.4, 0.52 + 0.1, 0.46 + 0.4]])
    assert torch.allclose(bu.decode(loc, priors, VAR), expected, atol=1e-6)


def hand_case():
    # p0..p4 are four quadrants and a centre box; p5 is p0 stretched down
    priors = centre([[0, 0, .5, .5], [.5, 0, 1, .5], [0, .5, .5, 1], [.5, .5, 1, 1],
                     [.25, .25, .75, .75], [0, 0, .5, .6]])
    truths = torch.tensor([[0, 0, .5, .5],        # g0: IoU 1 with p0, 0.833 with p5
                           [.05, .05, .45, .45],  # g1: best prior also p0 (IoU 0.64)
                           [.6, .6, .7, .7]])     # g2: best prior p3 with IoU 0.04 only
    labels = torch.tensor([4., 7., 0.])
    return truths, priors, labels


def test_match_hand_built():
    truths, priors, labels = hand_case()
    loc_t = torch.zeros(2, 6, 4)
    conf_t = torch.zeros(2, 6, dtype=torch.long)
    bu.match(0.5, truths, priors, VAR, labels, loc_t, conf_t, 1)
    # p0: best of g0 and of g1 -> the later gt (g1, label 7) wins -> 8
    # p3: forced to g2 although IoU 0.04 < 0.5 -> label 0 + 1
    # p5: IoU 0.833 with g0 (label 4) -> 5; p4 (IoU 1/7 with g0), p1, p2: background
    assert conf_t[1].tolist() == [8, 0, 0, 1, 0, 5]
    assert conf_t[0].tolist() == [0] * 6  # other rows untouched
    assert torch.equal(loc_t[1, 0], bu.encode(truths[1:2], priors[0:1], VAR)[0])
    assert torch.equal(loc_t[1, 3], bu.encode(truths[2:3], priors[3:4], VAR)[0])
    assert torch.equal(loc_t[1, 5], bu.encode(truths[0:1], priors[5:6], VAR)[0])


def test_match_threshold_boundary():
    truths, priors, labels = hand_case()
    conf_t = torch.zeros(1, 6, dtype=torch.long)
    loc_t = torch.zeros(1, 6, 4)
    # IoU(g0, p5) = 0.25 / 0.3: positive at that threshold (not below), background above it
    iou = bu.jaccard(truths[:1], bu.point_form(priors[5:6])).item()
    bu.match(iou, truths, priors, VAR, labels, loc_t, conf_t, 0)
    assert conf_t[0, 5].item() == 5
    above = torch.nextafter(torch.tensor(iou), torch.tensor(1.0)).item()  # next float32
    bu.match(above, truths, priors, VAR, labels, loc_t, conf_t, 0)
    assert conf_t[0, 5].item() == 0 and conf_t[0, 0].item() == 8


def test_match_equals_reference_loop_random():
    gen = torch.Generator().manual_seed(2)
    for num_gt in (1, 2, 5, 12):
        truths, priors, labels = random_case(gen, num_gt)
        # duplicate gts force shared best priors (the later-gt-wins rule)
        truths = torch.cat([truths, truths[:1]])
        labels = torch.cat([labels, labels[:1] + 1])
        loc_t = torch.zeros(1, 60, 4)
        conf_t = torch.zeros(1, 60, dtype=torch.long)
        bu.match(0.5, truths, priors, VAR, labels, loc_t, conf_t, 0)
        ref_loc, ref_conf = naive_match(0.5, truths, priors, VAR, labels)
        assert torch.equal(conf_t[0], ref_conf)
        assert torch.equal(loc_t[0], ref_loc)


def test_match_batch_equals_per_image_match():
    gen = torch.Generator().manual_seed(3)
    counts = [3, 0, 1, 6]  # includes an image without objects
    cases = [random_case(gen, n) for n in counts]
    priors = cases[0][1]
    width = max(counts)
    truths = torch.full((len(counts), width, 4), -1.0)
    labels = torch.full((len(counts), width), -1.0)
    for i, (t, _, lab) in enumerate(cases):
        truths[i, :len(t)], labels[i, :len(t)] = t, lab
    loc_b, conf_b = bu.match_batch(0.5, truths, priors, VAR, labels, labels >= 0)
    loc_t = torch.zeros(len(counts), 60, 4)
    conf_t = torch.zeros(len(counts), 60, dtype=torch.long)
    for i, (t, _, lab) in enumerate(cases):
        bu.match(0.5, t, priors, VAR, lab, loc_t, conf_t, i)
    assert torch.equal(conf_b, conf_t)
    assert conf_b[1].eq(0).all()
    real = torch.tensor(counts) > 0
    assert torch.equal(loc_b[real], loc_t[real])


def test_log_sum_exp_matches_logsumexp():
    x = torch.randn(50, 21, generator=torch.Generator().manual_seed(4)) * 5
    assert torch.allclose(bu.log_sum_exp(x), torch.logsumexp(x, 1, keepdim=True), atol=1e-5)
    # shifted by the global maximum: huge values do not overflow
    assert torch.isfinite(bu.log_sum_exp(x + 1000)).all()
