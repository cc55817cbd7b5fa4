"""PriorBox: count, order and values of ssd.pytorch's SSD300 priors."""
import copy
import itertools
import math

import pytest
import torch

from gluontrain.torch.ssd import config
from gluontrain.torch.ssd.prior_box import PriorBox


def naive_priors(cfg):
    """The reference's per-cell Python loop (written independently for the test)."""
    mean = []
    for k, f in enumerate(cfg['feature_maps']):
        f_k = cfg['min_dim'] / cfg['steps'][k]
        s_k = cfg['min_sizes'][k] / cfg['min_dim']
        s_kp = math.sqrt(s_k * (cfg['max_sizes'][k] / cfg['min_dim']))
        for i, j in itertools.product(range(f), repeat=2):
            cx, cy = (j + 0.5) / f_k, (i + 0.5) / f_k
            mean += [cx, cy, s_k, s_k, cx, cy, s_kp, s_kp]
            for ar in cfg['aspect_ratios'][k]:
                mean += [cx, cy, s_k * math.sqrt(ar), s_k / math.sqrt(ar)]
                mean += [cx, cy, s_k / math.sqrt(ar), s_k * math.sqrt(ar)]
    out = torch.tensor(mean, dtype=torch.float32).view(-1, 4)
    return out.clamp(0, 1) if cfg['clip'] else out


@pytest.mark.parametrize('cfg', [config.voc, config.coco], ids=['voc', 'coco'])
def test_count_dtype_and_bit_equality_with_loop(cfg):
    priors = PriorBox(cfg).forward()
    assert priors.shape == (8732, 4)
    assert priors.dtype == torch.float32
    assert torch.equal(priors, naive_priors(cfg))


def test_first_cells_of_map0_hand_computed():
    p = PriorBox(config.voc).forward()
    c0 = 0.5 / 37.5  # f_0 = 300 / 8
    r2 = math.sqrt(2)
    # VOC map 0 has aspect ratios [2]: 4 priors per cell; cell (0, 0) then cell (0, 1)
    expected = [[c0, c0, 0.1, 0.1],
                [c0, c0, math.sqrt(0.1 * 0.2), math.sqrt(0.1 * 0.2)],  # sqrt(30*60)/300
                [c0, c0, 0.1 * r2, 0.1 / r2],
                [c0, c0, 0.1 / r2, 0.1 * r2],
                [1.5 / 37.5, c0, 0.1, 0.1],  # next column: cx moves, cy stays
                [1.5 / 37.5, c0, math.sqrt(0.02), math.sqrt(0.02)]]
    assert torch.allclose(p[:6], torch.tensor(expected), rtol=0, atol=1e-7)
    # row-major: cell (1, 0) starts after the 38 cells of row 0
    assert torch.allclose(p[38 * 4, :2], torch.tensor([c0, 1.5 / 37.5]), atol=1e-7)


def test_first_prior_of_map1_and_last_cell():
    p = PriorBox(config.voc).forward()
    first = p[38 * 38 * 4]
    c1 = 0.5 / 18.75  # f_1 = 300 / 16
    assert torch.allclose(first, torch.tensor([c1, c1, 0.2, 0.2]), atol=1e-7)
    assert torch.allclose(p[38 * 38 * 4 + 1, 2], torch.tensor(math.sqrt(0.2 * 111 / 300)))
    # map 1 has ars [2, 3]: 6 priors per cell, the last one is (s/sqrt3, s*sqrt3)
    assert torch.allclose(p[38 * 38 * 4 + 5, 2:],
                          torch.tensor([0.2 / math.sqrt(3), 0.2 * math.sqrt(3)]))
    # last map: one cell at the centre, s = 264/300, ar 2 width 0.88*sqrt2 > 1 clipped
    assert torch.allclose(p[-4:, :2], torch.full((4, 2), 0.5))
    assert p[-2, 2].item() == 1.0
    assert p[-2, 3].item() == pytest.approx(0.88 / math.sqrt(2), abs=1e-7)


def test_clip_behaviour():
    cfg = copy.deepcopy(config.voc)
    cfg['clip'] = False
    raw = PriorBox(cfg).forward()
    clipped = PriorBox(config.voc).forward()
    assert raw.max().item() == pytest.approx(0.88 * math.sqrt(2), abs=1e-6)
    assert clipped.min().item() >= 0 and clipped.max().item() == 1.0
    assert torch.equal(raw.clamp(0, 1), clipped)
    # map 2 is 10x10 but f_2 = 300/32 = 9.375: its last column's centre is past the image
    # edge, and clipping moves it to 1 (the reference clamps centres, not only sizes)
    last_col = 5776 + 2166 + 9 * 6  # map 2, cell (0, 9), first prior
    assert raw[last_col, 0].item() == pytest.approx(9.5 / 9.375)
    assert clipped[last_col, 0].item() == 1.0
    assert raw[last_col, 1].item() == clipped[last_col, 1].item() == pytest.approx(0.5 / 9.375)
    changed = (raw != clipped).any(1)
    assert not changed[:5776 + 2166].any()  # maps 0 and 1 fit in the image


def test_rejects_non_positive_variance():
    cfg = copy.deepcopy(config.voc)
    cfg['variance'] = [0.1, 0.0]
    with pytest.raises(ValueError):
        PriorBox(cfg)
