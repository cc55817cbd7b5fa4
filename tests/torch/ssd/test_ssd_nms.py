"""Block-vectorised NMS against naive greedy loops, including exact IoU ties."""
import pytest
import torch

from gluontrain.torch.ops.nms import batched_ssd_nms, nms, ssd_nms
from ssd_reference_loops import reference_nms


def naive_nms(boxes, scores, thr, top_k=None, suppress_equal=False, plus_one=False):
    """Greedy NMS one box at a time, visiting equal scores by increasing index."""
    order = sorted(range(len(scores)), key=lambda i: -scores[i].item())
    if top_k is not None:
        order = order[:top_k]
    one = 1.0 if plus_one else 0.0
    keep = []
    for j in order:  # one decision per box, against every box kept so far
        if keep:
            a, b = boxes[keep], boxes[j]
            w = torch.clamp(torch.min(a[:, 2], b[2]) - torch.max(a[:, 0], b[0]) + one, min=0)
            h = torch.clamp(torch.min(a[:, 3], b[3]) - torch.max(a[:, 1], b[1]) + one, min=0)
            inter = w * h
            area_a = (a[:, 2] - a[:, 0] + one) * (a[:, 3] - a[:, 1] + one)
            area_b = (b[2] - b[0] + one) * (b[3] - b[1] + one)
            iou = inter / ((area_b - inter) + area_a)
            below = iou < thr if suppress_equal else iou <= thr
            if not below.all():
                continue
        keep.append(j)
    return keep


def grid_boxes(n, seed, grid=12):
    """Integer boxes on a small grid: many exact IoU ties (1/2, 1/3, ...) and equal scores."""
    gen = torch.Generator().manual_seed(seed)
    xy = torch.randint(0, grid, (n, 2), generator=gen)
    wh = torch.randint(1, 5, (n, 2), generator=gen)
    boxes = torch.cat([xy, xy + wh], 1).float()
    scores = torch.randint(0, 50, (n,), generator=gen).float() / 50
    # and, away from the rest, one pair at IoU exactly 0.5 in each convention (no +1: 2/4,
    # +1: 4/8), the better box of each pair scoring first
    ties = torch.tensor([[100., 100., 103., 101.], [101., 100., 104., 101.],
                         [200., 200., 202., 201.], [201., 200., 203., 201.]])
    return torch.cat([ties, boxes])[:n], torch.cat([torch.tensor([1., .99, 1., .99]), scores])[:n]


def iou_matrix(boxes, plus_one):
    one = 1.0 if plus_one else 0.0
    lt = torch.max(boxes[:, None, :2], boxes[None, :, :2])
    rb = torch.min(boxes[:, None, 2:], boxes[None, :, 2:])
    inter = (rb - lt + one).clamp(min=0).prod(-1)
    area = (boxes[:, 2:] - boxes[:, :2] + one).prod(-1)
    return inter / ((area[None] - inter) + area[:, None])


def test_hand_built_tie_at_threshold():
    boxes = torch.tensor([[0., 0., 3., 1.], [1., 0., 4., 1.]])  # inter 2, union 4: IoU 0.5
    scores = torch.tensor([0.9, 0.8])
    assert nms(boxes, scores, 0.5).tolist() == [0, 1]  # IoU == thr is kept
    assert nms(boxes, scores, 0.5, suppress_equal=True).tolist() == [0]
    # +1 convention: [0, 2] and [1, 3] are 3 pixels wide, share 2: IoU 0.5 again
    px = torch.tensor([[0., 0., 2., 0.], [1., 0., 3., 0.]])
    assert nms(px, scores, 0.5, plus_one=True).tolist() == [0, 1]
    assert nms(px, scores, 0.5, plus_one=True, suppress_equal=True).tolist() == [0]
    # without +1 both are zero-area: IoU 0/0 = nan counts as overlapping (ssd.pytorch's le)
    assert torch.isnan(iou_matrix(px, False)[0, 1])
    assert nms(px, scores, 0.5).tolist() == [0]


@pytest.mark.parametrize('n', [10, 300, 2000])
@pytest.mark.parametrize('suppress_equal,plus_one', [(False, False), (True, False),
                                                     (False, True), (True, True)])
def test_nms_equals_naive_greedy(n, suppress_equal, plus_one):
    boxes, scores = grid_boxes(n, seed=n)
    thr = 0.5
    ious = iou_matrix(boxes, plus_one)
    assert (ious == thr).any()  # the data contains exact ties at the threshold
    block = 64 if n == 2000 else 512  # several blocks for the large case
    got = nms(boxes, scores, thr, suppress_equal=suppress_equal, plus_one=plus_one,
              block_size=block)
    assert got.tolist() == naive_nms(boxes, scores, thr, None, suppress_equal, plus_one)


def test_nms_top_k_and_small_blocks():
    boxes, scores = grid_boxes(300, seed=7)
    for top_k in (1, 50, 1000):
        for block in (1, 7, 512):
            got = nms(boxes, scores, 1 / 3, top_k=top_k, block_size=block)
            assert got.tolist() == naive_nms(boxes, scores, 1 / 3, top_k)


def test_nms_empty_and_descending_order():
    assert nms(torch.zeros(0, 4), torch.zeros(0), 0.5).numel() == 0
    boxes, scores = grid_boxes(100, seed=3)
    kept = nms(boxes, scores, 0.5)
    assert (scores[kept][1:] <= scores[kept][:-1]).all()


def test_ssd_nms_tie_order_larger_index_first():
    boxes = torch.tensor([[0., 0., 1., 1.]] * 3 + [[5., 5., 6., 6.]])
    scores = torch.tensor([0.5, 0.5, 0.5, 0.5])
    keep, count = ssd_nms(boxes, scores, 0.5, 200)
    # equal scores are visited from the largest index; the three copies keep index 2
    assert count == 2 and keep[:2].tolist() == [3, 2]
    assert keep.shape == (4,) and keep[2:].tolist() == [0, 0]


@pytest.mark.parametrize('n,top_k', [(10, 200), (300, 200), (2000, 200), (300, 0),
                                     (300, 17)])
def test_ssd_nms_equals_reference_loop(n, top_k):
    gen = torch.Generator().manual_seed(n + top_k)
    xy = torch.rand(n, 2, generator=gen)
    boxes = torch.cat([xy, xy + torch.rand(n, 2, generator=gen) * 0.3], 1)
    scores = torch.rand(n, generator=gen)  # continuous: no ties, any sort agrees
    keep, count = ssd_nms(boxes, scores, 0.45, top_k)
    ref_keep, ref_count = reference_nms(boxes, scores, 0.45, top_k, stable=False)
    assert count == ref_count and torch.equal(keep, ref_keep)


@pytest.mark.parametrize('n', [10, 300, 2000])
def test_ssd_nms_equals_reference_loop_with_ties(n):
    # grid boxes: equal scores and IoU exactly 0.5; the reference loop with a stable sort
    boxes, scores = grid_boxes(n, seed=n + 1)
    keep, count = ssd_nms(boxes, scores, 0.5, 200)
    ref_keep, ref_count = reference_nms(boxes, scores, 0.5, 200, stable=True)
    assert count == ref_count and torch.equal(keep, ref_keep)


def test_ssd_nms_degenerate_boxes_follow_reference():
    # two zero-area boxes: IoU 0/0 = nan, the reference's ``le`` drops the second one
    boxes = torch.tensor([[1., 1., 1., 1.], [3., 3., 3., 3.], [0., 0., 2., 2.]])
    scores = torch.tensor([0.9, 0.8, 0.1])
    keep, count = ssd_nms(boxes, scores)
    ref_keep, ref_count = reference_nms(boxes, scores)
    assert (count, keep.tolist()) == (ref_count, ref_keep.tolist()) == (2, [0, 2, 0])


def test_ssd_nms_empty():
    keep, count = ssd_nms(torch.zeros(0, 4), torch.zeros(0))
    assert count == 0 and keep.numel() == 0


def test_batched_ssd_nms_equals_per_group():
    boxes, scores = grid_boxes(400, seed=11)
    gen = torch.Generator().manual_seed(12)
    scores = torch.stack([scores, torch.rand(400, generator=gen), scores.flip(0)])
    valid = scores > 0.3
    valid[2] = False  # a group without candidates
    order, keep, cand = batched_ssd_nms(boxes.expand(3, 400, 4), scores, valid, 0.5, 50)
    assert order.shape == keep.shape == (3, 50) and cand.shape == (3, 50, 4)
    for g in range(3):
        sub = valid[g].nonzero().flatten()
        ref_keep, ref_count = ssd_nms(boxes[sub], scores[g][sub], 0.5, 50)
        assert order[g][keep[g]].tolist() == sub[ref_keep[:ref_count]].tolist()
    assert not keep[2].any()


@pytest.mark.parametrize('suppress_equal,plus_one', [(False, False), (True, True)])
def test_nms_equals_naive_greedy_sparse_many_kept(suppress_equal, plus_one):
    # spread-out continuous boxes: hundreds survive, so kept boxes from earlier blocks
    # must suppress later blocks
    gen = torch.Generator().manual_seed(5)
    xy = torch.rand(2000, 2, generator=gen) * 100
    boxes = torch.cat([xy, xy + 1 + torch.rand(2000, 2, generator=gen) * 9], 1)
    scores = torch.rand(2000, generator=gen)
    got = nms(boxes, scores, 0.3, suppress_equal=suppress_equal, plus_one=plus_one,
              block_size=128)
    want = naive_nms(boxes, scores, 0.3, None, suppress_equal, plus_one)
    assert len(want) > 500 and got.tolist() == want
