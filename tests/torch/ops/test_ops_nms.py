"""Per-group NMS against a per-class loop, and seamseg's and maskrcnn-benchmark's NMS against
their C++ loops written out."""
import numpy as np
import pytest
import torch

from gluontrain.torch.ops import (batched_nms, box_nms, classwise_nms, maskrcnn_nms_options, nms,
                                  proposal_nms)
from gluontrain.torch.ops.nms import _pairwise_iou  # pylint: disable=protected-access


def seamseg_nms_loop(boxes, scores, thr, n_max=-1):
    """seamseg's src/nms/nms_cpu.cpp: IoU with clamped areas, ``>=`` suppression, greedy."""
    def area(b):
        return max(b[2] - b[0], 0.0) * max(b[3] - b[1], 0.0)
    b = boxes.tolist()
    order = sorted(range(len(b)), key=lambda i: -scores[i].item())  # ties: increasing index
    cand, sel = list(order), []
    while cand and (n_max <= 0 or len(sel) < n_max):
        i = cand.pop(0)
        sel.append(i)
        keep = []
        for j in cand:
            lo, hi = min(i, j), max(i, j)
            p, q = b[lo], b[hi]
            inter = area([max(p[0], q[0]), max(p[1], q[1]), min(p[2], q[2]), min(p[3], q[3])])
            union = area(p) + area(q) - inter
            iou = inter / union if union != 0 else float('nan')
            if not iou >= thr:
                keep.append(j)
        cand = keep
    return sel


def random_case(n, seed, classes=3, grid=False):
    gen = torch.Generator().manual_seed(seed)
    if grid:  # integer boxes and scores: many exact IoU and score ties
        xy = torch.randint(0, 10, (n, 2), generator=gen).float()
        boxes = torch.cat([xy, xy + torch.randint(0, 5, (n, 2), generator=gen)], 1)
        scores = torch.randint(0, 10, (n,), generator=gen).float()
    else:
        xy = torch.rand(n, 2, generator=gen) * 60
        boxes = torch.cat([xy, xy + torch.rand(n, 2, generator=gen) * 30], 1)
        scores = torch.rand(n, generator=gen)
    return boxes, scores, torch.randint(0, classes, (n,), generator=gen)


def per_class_loop(boxes, scores, labels, thr, **kw):
    kept = []
    for c in labels.unique().tolist():
        idx = torch.nonzero(labels == c).view(-1)
        kept += idx[nms(boxes[idx], scores[idx], thr, **kw)].tolist()
    # merge by descending score, equal scores by increasing index (the stable sort's order)
    return sorted(kept, key=lambda i: (-scores[i].item(), i))


@pytest.mark.parametrize('n', [1, 2, 17, 300])
@pytest.mark.parametrize('grid', [False, True])
@pytest.mark.parametrize('suppress_equal,reference', [(False, 'ssd'), (True, 'seamseg')])
def test_batched_nms_equals_per_class_loop(n, grid, suppress_equal, reference):
    boxes, scores, labels = random_case(n, n, grid=grid)
    got = batched_nms(boxes, scores, labels, 0.3, suppress_equal=suppress_equal,
                      reference=reference, block_size=64)
    want = per_class_loop(boxes, scores, labels, 0.3, suppress_equal=suppress_equal,
                          reference=reference)
    assert got.tolist() == want


def test_batched_nms_hand_case_and_max_output():
    boxes = torch.tensor([[0., 0., 10., 10.], [1., 1., 10., 10.], [0., 0., 10., 10.]])
    scores = torch.tensor([.9, .8, .7])
    labels = torch.tensor([0, 0, 1])
    # box 1 overlaps box 0 (IoU .81) and is removed; box 2 is identical to box 0 but of
    # another class, so it stays
    assert batched_nms(boxes, scores, labels, 0.5).tolist() == [0, 2]
    assert batched_nms(boxes, scores, labels, 0.5, max_output=1).tolist() == [0]
    assert nms(boxes, scores, 0.5).tolist() == [0]


def test_batched_nms_empty():
    out = batched_nms(torch.zeros(0, 4), torch.zeros(0), torch.zeros(0, dtype=torch.long), .5)
    assert out.dtype == torch.long and out.numel() == 0


@pytest.mark.parametrize('n,grid', [(5, True), (60, True), (400, False)])
def test_seamseg_reference_equals_its_cpp_loop(n, grid):
    boxes, scores, _ = random_case(n, 100 + n, grid=grid)
    if grid:  # inverted and empty boxes: clamped areas, NaN IoU does not suppress
        boxes[:3, 2:] = boxes[:3, :2] - torch.tensor([[1., 0.], [0., 0.], [2., 3.]])
    got = nms(boxes, scores, 0.5, suppress_equal=True, reference='seamseg', block_size=32)
    assert got.tolist() == seamseg_nms_loop(boxes, scores, 0.5)
    got = nms(boxes, scores, 0.5, suppress_equal=True, reference='seamseg', max_output=3)
    assert got.tolist() == seamseg_nms_loop(boxes, scores, 0.5, n_max=3)


def test_seamseg_suppresses_at_equal_iou_and_keeps_empty_pairs():
    boxes = torch.tensor([[0., 0., 1., 3.], [0., 1., 1., 4.]])  # inter 2, union 4: IoU 0.5
    scores = torch.tensor([.9, .8])
    assert nms(boxes, scores, 0.5, suppress_equal=True, reference='seamseg').tolist() == [0]
    assert nms(boxes, scores, 0.5, reference='seamseg').tolist() == [0, 1]
    points = torch.tensor([[2., 2., 2., 2.], [2., 2., 2., 2.]])  # 0 / 0
    assert nms(points, scores, 0.5, suppress_equal=True, reference='seamseg').tolist() == [0, 1]
    assert nms(points, scores, 0.5).tolist() == [0]  # ssd.pytorch: NaN suppresses


def maskrcnn_nms_cpu(boxes, scores, thr):
    """maskrcnn-benchmark's csrc/cpu/nms_cpu.cpp in float32: ``+1`` areas, ``ovr = inter /
    (iarea + areas[j] - inter)``, ``ovr >= threshold`` suppresses; kept by descending score."""
    b = boxes.numpy().astype(np.float32)
    one, zero, t = np.float32(1), np.float32(0), np.float32(thr)
    area = (b[:, 2] - b[:, 0] + one) * (b[:, 3] - b[:, 1] + one)
    order = sorted(range(len(b)), key=lambda i: -scores[i].item())
    suppressed, keep = set(), []
    for a, i in enumerate(order):
        if i in suppressed:
            continue
        keep.append(i)
        for j in order[a + 1:]:
            w = max(zero, min(b[i, 2], b[j, 2]) - max(b[i, 0], b[j, 0]) + one)
            h = max(zero, min(b[i, 3], b[j, 3]) - max(b[i, 1], b[j, 1]) + one)
            inter = np.float32(w * h)
            if inter / np.float32(np.float32(area[i] + area[j]) - inter) >= t:
                suppressed.add(j)
    return keep


@pytest.mark.parametrize('n,grid', [(5, True), (80, True), (400, False)])
def test_maskrcnn_reference_on_the_cpu_equals_its_cpp_loop(n, grid):
    boxes, scores, _ = random_case(n, 200 + n, grid=grid)
    opts = maskrcnn_nms_options(boxes.device)
    assert opts == {'plus_one': True, 'suppress_equal': True, 'reference': 'maskrcnn'}
    for thr in (0.3, 0.5, 0.7):
        assert nms(boxes, scores, thr, block_size=32, **opts).tolist() == \
            maskrcnn_nms_cpu(boxes, scores, thr)


def test_maskrcnn_ties_at_the_threshold_follow_the_device():
    # +1 areas 100 and 70, intersection 70: IoU 0.7 exactly, as float32 holds 0.7
    boxes = torch.tensor([[0., 0., 9., 9.], [0., 0., 9., 6.]])
    scores = torch.tensor([.9, .8])
    cpu = maskrcnn_nms_options('cpu')
    assert nms(boxes, scores, 0.7, **cpu).tolist() == [0]  # nms_cpu.cpp: ovr >= threshold
    assert maskrcnn_nms_cpu(boxes, scores, 0.7) == [0]
    cuda = maskrcnn_nms_options('cuda')  # nms.cu: devIoU(...) > nms_overlap_thresh
    assert cuda['suppress_equal'] is False
    assert nms(boxes, scores, 0.7, **cuda).tolist() == [0, 1]
    # the RPN's and the box head's NMS take the same flags
    kept, _ = proposal_nms(boxes, scores, (20, 20), 0, 0.7, **cpu)
    assert kept.tolist() == [[0., 0., 9., 9.]]
    assert classwise_nms(boxes, scores, torch.tensor([1, 1]), 0.7, **cpu).tolist() == [0]


def test_union_first_rounding_decides_a_tie_the_ssd_rounding_does_not():
    """Where ``(a + b) - i`` and ``(b - i) + a`` round apart in float32, 'maskrcnn' follows
    the C++ loop's IoU and 'ssd' may not: a search over seeded float boxes finds such pairs
    and the loop written out agrees with 'maskrcnn' on every one."""
    gen = torch.Generator().manual_seed(0)
    xy = torch.rand(4000, 2, generator=gen) * 500
    boxes = torch.cat([xy, xy + 1 + torch.rand(4000, 2, generator=gen) * 300], 1)
    differ = 0
    for k in range(0, 4000, 2):
        pair, scores = boxes[k:k + 2], torch.tensor([.9, .8])
        want = maskrcnn_nms_cpu(pair, scores, 0.0)  # thr 0: '>=' removes even a disjoint pair
        ious = []
        for ref in ('maskrcnn', 'ssd'):
            ious.append(_pairwise_iou(pair[:1], pair[1:], True, ref).item())
        if ious[0] != ious[1]:
            differ += 1
            thr = ious[0]  # a threshold exactly at the C++ loop's IoU
            assert nms(pair, scores, thr, **maskrcnn_nms_options('cpu')).tolist() == \
                maskrcnn_nms_cpu(pair, scores, thr)
        assert nms(pair, scores, 0.0, **maskrcnn_nms_options('cpu')).tolist() == want
    assert differ > 0


def test_unknown_reference_is_refused():
    with pytest.raises(ValueError, match='reference'):
        nms(torch.zeros(1, 4), torch.ones(1), 0.5, reference='torchvision')


# ------------------------------------------------------------------ MXNet's box_nms
def _rows(*rows):
    return torch.tensor([list(r) for r in rows], dtype=torch.float32)[None]


def test_box_nms_hand_computed_per_class_topk_and_padding():
    """Rows (id, score, x1, y1, x2, y2). IoU of boxes 0 and 1 is 50/150 = 1/3."""
    data = _rows((0, .9, 0, 0, 10, 10), (0, .8, 5, 0, 15, 10), (1, .7, 0, 0, 10, 10),
                 (0, .005, 0, 0, 1, 1), (0, .8, 20, 20, 30, 30))
    out = box_nms(data, overlap_thresh=0.3, valid_thresh=0.01, topk=-1, id_index=0)
    # row 1 suppressed by row 0 (same class, 1/3 > 0.3); row 2 is another class; row 3 is
    # below valid_thresh; equal scores .8 keep their row order (row 1 before row 4)
    expect = _rows((0, .9, 0, 0, 10, 10), (0, .8, 20, 20, 30, 30), (1, .7, 0, 0, 10, 10),
                   (-1,) * 6, (-1,) * 6)
    torch.testing.assert_close(out, expect)
    # IoU exactly 1/3 at threshold 1/3 (as float32) is kept: suppression is strictly above
    kept = box_nms(data, overlap_thresh=1 / 3, valid_thresh=0.01, id_index=0)
    assert kept[0, :4, 1].tolist() == pytest.approx([.9, .8, .8, .7])
    # force_suppress: the class-1 box goes too; topk 2 keeps only the two best candidates
    forced = box_nms(data, 0.3, 0.01, id_index=0, force_suppress=True)
    assert forced[0, :, 1].tolist() == pytest.approx([.9, .8, -1, -1, -1])
    top2 = box_nms(data, 0.3, 0.01, topk=2, id_index=0)
    assert top2[0, :, 1].tolist() == pytest.approx([.9, -1, -1, -1, -1])
    assert torch.equal(box_nms(data, 0.3, 0.01, topk=0, id_index=0), data)  # MXNet: as is


def test_box_nms_equals_mxnet_on_random_rows_with_ties():
    mx = pytest.importorskip('mxnet')
    rng = np.random.RandomState(0)
    for trial in range(60):
        n = rng.randint(1, 50)
        ids = rng.randint(0, 3, n).astype('f4')
        scores = (rng.choice([0.005, 0.2, 0.5, 0.9], n) if trial % 2 else rng.rand(n)).astype('f4')
        xy = rng.randint(0, 20, (n, 2)).astype('f4')
        wh = rng.randint(-2, 15, (n, 2)).astype('f4')
        data = np.concatenate([ids[:, None], scores[:, None], xy, xy + wh], 1)[None]
        for force in (False, True):
            for topk in (-1, 5):
                thr = (0.3, 0.5, 1 / 3)[trial % 3]
                ref = mx.nd.contrib.box_nms(
                    mx.nd.array(data), overlap_thresh=thr, valid_thresh=0.01, topk=topk,
                    id_index=0, score_index=1, coord_start=2, force_suppress=force).asnumpy()
                got = box_nms(torch.from_numpy(data), thr, 0.01, topk, 2, 1, 0, force)
                np.testing.assert_array_equal(got.numpy(), ref)
