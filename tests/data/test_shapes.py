"""Rendering primitives: class styles, polygons, clipping, RLE."""
import numpy as np
import pytest
from PIL import Image, ImageDraw

from gluontrain.data import shapes


def test_class_styles_are_distinct():
    styles = [shapes.class_style(i) for i in range(80)]
    assert len({(s, c) for s, c, _ in styles}) == 80
    first8 = styles[:8]
    assert len({s for s, _, _ in first8}) == 8 and len({c for _, c, _ in first8}) == 8
    assert styles[0][:2] == ('circle', 'red') and styles[8][:2] == ('circle', 'purple')
    with pytest.raises(ValueError):
        shapes.class_style(80)


@pytest.mark.parametrize('shape', shapes.SHAPES)
def test_polygon_spans_its_box(shape):
    poly = shapes.shape_polygon(shape, (10, 20, 40, 36))
    # extreme vertices on the centres of the first and last covered pixels
    assert poly[:, 0].min() == 10 and poly[:, 0].max() == 39
    assert poly[:, 1].min() == 20 and poly[:, 1].max() == 35
    mask = Image.new('L', (60, 60))
    ImageDraw.Draw(mask).polygon([tuple(p) for p in poly.tolist()], fill=255)
    assert mask.getbbox() == (10, 20, 40, 36)
    edges = shapes.shape_polygon(shape, (10, 20, 40, 36), pixel_centres=False)
    assert edges.min(0).tolist() == [10, 20] and edges.max(0).tolist() == [40, 36]


def test_clip_polygon_square():
    square = np.array([[-5.0, -5.0], [5.0, -5.0], [5.0, 5.0], [-5.0, 5.0]])
    clipped = shapes.clip_polygon(square, 20, 20)
    assert clipped.min(0).tolist() == [0.0, 0.0] and clipped.max(0).tolist() == [5.0, 5.0]
    assert len(shapes.clip_polygon(square + 100, 20, 20)) == 0


def test_mask_to_rle_hand_example():
    mask = np.array([[0, 1, 1],
                     [0, 1, 0]], dtype=bool)
    # column-major: 0 0 | 1 1 | 1 0 -> runs 2 zeros, 3 ones, 1 zero
    assert shapes.mask_to_rle(mask) == {'counts': [2, 3, 1], 'size': [2, 3]}
    assert shapes.mask_to_rle(np.ones((2, 2), bool))['counts'] == [0, 4]


def test_mask_to_rle_decodes_with_pycocotools():
    from pycocotools import mask as mask_utils
    rng = np.random.default_rng(0)
    mask = rng.random((13, 17)) > 0.6
    rle = mask_utils.frPyObjects(shapes.mask_to_rle(mask), 13, 17)
    np.testing.assert_array_equal(mask_utils.decode(rle).astype(bool), mask)


def test_image_size_spec():
    rng = np.random.default_rng(1)
    assert shapes.image_size_for(rng, 64) == (64, 64)
    sizes = {shapes.image_size_for(rng, (64, 96)) for _ in range(20)}
    assert len(sizes) > 5 and all(64 <= w <= 96 and 64 <= h <= 96 for w, h in sizes)
    with pytest.raises(ValueError):
        shapes.parse_image_size(16)


def test_layout_respects_limits():
    rng = np.random.default_rng(2)
    for _ in range(30):
        layout = shapes.random_layout(rng, 120, 100, num_classes=3, max_objects=8)
        assert 1 <= len(layout) <= 8
        boxes = [shapes.clip_box(b, 120, 100) for _, b in layout]
        for i, a in enumerate(boxes):
            assert a[2] - a[0] >= 6 and a[3] - a[1] >= 6
            for b in boxes[i + 1:]:
                assert shapes.overlap_small(a, b) <= 0.45
        assert all(0 <= c < 3 for c, _ in layout)
