import pytest
import torch

from gluontrain.torch.twostage.structures import (FLIP_LEFT_RIGHT, FLIP_TOP_BOTTOM, BoxList,
                                             boxlist_intersection, boxlist_iou, boxlist_union,
                                             cat_boxlist)


def _boxes():
    b = BoxList([[0, 0, 9, 9], [5, 5, 14, 14], [20, 0, 29, 4]], (40, 30))
    b.add_field('labels', torch.tensor([1, 2, 3]))
    rel = torch.zeros(3, 3, dtype=torch.int64)
    rel[0, 1] = 4
    rel[2, 0] = 7
    b.add_field('relation', rel, is_triplet=True)
    return b


def test_area_and_iou_are_pixel_inclusive():
    b = _boxes()
    assert b.area().tolist() == [100., 100., 50.]
    iou = boxlist_iou(b, b)
    # boxes 0 and 1 overlap on a 5x5 pixel square: 25 / (100 + 100 - 25)
    assert iou[0, 1].item() == pytest.approx(25 / 175)
    assert iou[0, 2].item() == 0


def test_getitem_indexes_triplet_fields_on_both_axes():
    b = _boxes()[torch.tensor([2, 0])]
    assert b.get_field('labels').tolist() == [3, 1]
    assert b.get_field('relation').tolist() == [[0, 7], [0, 0]]


def test_flip_and_resize_follow_maskrcnn_benchmark():
    b = _boxes()
    f = b.transpose(FLIP_LEFT_RIGHT)
    assert f.bbox[0].tolist() == [40 - 9 - 1, 0, 40 - 0 - 1, 9]
    v = b.transpose(FLIP_TOP_BOTTOM)
    assert v.bbox[2].tolist() == [20, 30 - 4, 29, 30]
    r = b.resize((80, 60))
    assert r.bbox[1].tolist() == [10, 10, 28, 28]
    assert r.size == (80, 60) and r.get_field('relation')[2, 0] == 7
    r2 = b.resize((80, 30))
    assert r2.bbox[1].tolist() == [10, 5, 28, 14]


def test_convert_roundtrip_and_clip():
    b = _boxes()
    w = b.convert('xywh')
    assert w.bbox[2].tolist() == [20, 0, 10, 5]
    assert torch.equal(w.convert('xyxy').bbox, b.bbox)
    c = BoxList([[-5, 2, 50, 2], [1, 1, 3, 3]], (40, 30))
    c.add_field('labels', torch.tensor([1, 2]))
    kept = c.clip_to_image(remove_empty=True)
    assert len(kept) == 1 and kept.get_field('labels').tolist() == [2]


def test_union_intersection_and_cat():
    b = _boxes()
    u = boxlist_union(b[torch.tensor([0, 0])], b[torch.tensor([1, 2])])
    assert u.bbox.tolist() == [[0, 0, 14, 14], [0, 0, 29, 9]]
    i = boxlist_intersection(b[torch.tensor([0, 0])], b[torch.tensor([1, 2])])
    assert i.bbox.tolist() == [[5, 5, 9, 9], [0, 0, 0, 0]]
    c = cat_boxlist([b, b[torch.tensor([0])]])
    assert len(c) == 4 and c.get_field('relation').shape == (4, 4)
    assert c.get_field('relation')[0, 1] == 4 and c.get_field('relation')[3].sum() == 0
    with pytest.raises(ValueError, match='different images'):
        boxlist_iou(b, BoxList([[0, 0, 1, 1]], (10, 10)))
