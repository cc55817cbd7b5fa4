"""ISSTransform sizes/flip/normalisation, boxes from masks, collate."""
import random

import numpy as np
import pytest
import torch
from PIL import Image

from gluontrain.torch.frcnn.transform import (ISSTransform, PackedSequence, extract_boxes,
                                              iss_collate_fn)


def test_extract_boxes_by_hand():
    m = torch.zeros(5, 6, dtype=torch.long)
    m[1:3, 2:5] = 1   # rows 1-2, cols 2-4
    m[4, 0] = 3       # id 2 absent
    b = extract_boxes(m, 4)
    assert b.tolist() == [[0, 0, 5, 6], [1, 2, 3, 5], [-1, -1, -1, -1], [4, 0, 5, 1]]
    two = torch.stack([m, torch.zeros_like(m)])
    two[1, 0, 5] = 1  # a second mask channel extends instance 1
    assert extract_boxes(two, 2)[1].tolist() == [0, 2, 3, 6]


@pytest.mark.parametrize('w, h, target, expected', [
    (200, 100, 50, (100, 50)),       # shortest side -> 50
    (100, 300, 50, (50, 150)),
    (1000, 100, 50, (300, 30)),      # 500 > 300: longest side capped at 300
    (333, 250, 100, (133, 100)),     # int() truncation: 333 * 0.4 = 133.2
])
def test_sizes(w, h, target, expected):
    t = ISSTransform(target, 300)
    assert t.output_size(w, h) == expected
    out = t(Image.new('RGB', (w, h)), [Image.new('L', (w, h))], [255], [0])
    assert tuple(out['img'].shape[1:]) == expected[::-1]


def test_random_scale_draws_like_seamseg():
    t = ISSTransform(100, 1000, random_flip=True, random_scale=(0.8, 1.0))
    random.seed(5)
    random.random()  # the flip draw comes first
    target = int(random.uniform(80., 100.))
    random.seed(5)
    out = t(Image.new('RGB', (200, 100)), [Image.new('L', (200, 100))], [255], [0])
    assert out['img'].shape[1:] == (target, 2 * target)
    discrete = ISSTransform(100, 1000, random_scale=(0.5, 1.0, 2.0))
    random.seed(1)
    expected = int(random.choice([50., 100., 200.]))
    random.seed(1)
    assert discrete.random_target_size() == expected


def test_flip_normalisation_and_compaction():
    img = np.zeros((4, 6, 3), np.uint8)
    img[:, 0] = (255, 0, 0)
    msk = np.zeros((4, 6), np.uint8)
    msk[1:3, 0:2] = 3  # ids 1, 2 absent: compacted away
    t = ISSTransform(4, 100, rgb_mean=(0.5, 0.5, 0.5), rgb_std=(0.5, 0.25, 1.0),
                     random_flip=True)
    random.seed(0)
    flips = random.random() < 0.5
    random.seed(0)
    out = t(Image.fromarray(img), [Image.fromarray(msk)], [255, 7, 8, 9], [0, 0, 1, 1])
    assert out['cat'].tolist() == [255, 9] and out['iscrowd'].tolist() == [0, 1]
    assert out['cat'].dtype == torch.long and out['iscrowd'].dtype == torch.uint8
    col = 5 if flips else 0
    assert out['img'][:, 0, col].tolist() == [(1 - .5) / .5, (0 - .5) / .25, (0 - .5) / 1.]
    x0, x1 = (4, 6) if flips else (0, 2)
    assert out['bbx'][1].tolist() == [1, x0, 3, x1]
    with pytest.raises(ValueError, match='instance id 3'):
        t(Image.fromarray(img), [Image.fromarray(msk)], [255, 7], [0, 0])


def test_apply_boxes_matches_mask_boxes_when_scale_is_exact():
    rng = np.random.default_rng(0)
    msk = np.zeros((40, 60), np.uint8)
    msk[10:20, 30:50] = 1
    img = Image.fromarray(rng.integers(0, 255, (40, 60, 3), dtype=np.uint8))
    t = ISSTransform(80, 1000, random_flip=True)  # scale 2 exactly
    for seed in range(4):
        random.seed(seed)
        a = t(img, [Image.fromarray(msk)], [255, 3], [0, 0])
        random.seed(seed)
        b = t.apply_boxes(img, [[10., 30., 20., 50.]], [3], [0])
        assert torch.equal(a['img'], b['img'])
        assert a['bbx'][1].tolist() == b['bbx'][0].tolist()


def test_collate_and_packed_sequence():
    items = [{'img': torch.zeros(3, 2, 2), 'bbx': torch.ones(2, 4), 'idx': 'a'},
             {'img': torch.zeros(3, 4, 2), 'bbx': torch.ones(1, 4) * 2, 'idx': 'b'}]
    batch = iss_collate_fn(items)
    assert isinstance(batch['img'], PackedSequence) and batch['idx'] == ['a', 'b']
    rows, owner = batch['bbx'].contiguous
    assert rows.shape == (3, 4) and owner.tolist() == [0, 0, 1]
    assert PackedSequence([None, None]).contiguous == (None, None)
    with pytest.raises(ValueError, match='compatible'):
        batch['img'].contiguous  # pylint: disable=pointless-statement
    assert iss_collate_fn([]) == {}
