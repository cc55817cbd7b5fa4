"""gluontrain.data.vg_scenes: the predicate rules by hand, and what one drawn scene holds."""
import numpy as np

from gluontrain.data.vg_scenes import ATTRIBUTES, OBJECT_CLASSES, PREDICATES, draw_scene, predicate


def test_predicate_rules_hand_cases():
    w = h = 100
    assert predicate((20, 20, 30, 30), (10, 10, 50, 50), True, w, h) == 'in'
    assert predicate((10, 10, 50, 50), (20, 20, 30, 30), False, w, h) == 'has'
    assert predicate((20, 40, 30, 52), (10, 50, 60, 80), True, w, h) == 'on'
    assert predicate((10, 50, 60, 80), (20, 40, 30, 52), False, w, h) == 'under'
    assert predicate((0, 0, 30, 30), (20, 20, 50, 50), True, w, h) == 'in front of'
    assert predicate((0, 0, 30, 30), (20, 20, 50, 50), False, w, h) == 'behind'
    assert predicate((0, 0, 30, 10), (10, 60, 50, 90), False, w, h) == 'above'
    assert predicate((0, 0, 10, 30), (60, 10, 90, 50), False, w, h) == 'left of'
    assert predicate((0, 0, 10, 10), (15, 15, 30, 30), False, w, h) == 'near'
    assert predicate((0, 0, 10, 10), (60, 60, 90, 90), False, w, h) == 'far from'


def test_a_drawn_scene_has_boxes_in_the_image_and_relations_between_its_objects():
    image, width, height, objects, rels = draw_scene(np.random.default_rng(0), (96, 128))
    assert image.size == (width, height) and 96 <= min(width, height) <= max(width, height) <= 128
    assert objects and all(o['label'] in OBJECT_CLASSES for o in objects)
    for obj in objects:
        x1, y1, x2, y2 = obj['box']
        assert 0 <= x1 < x2 <= width and 0 <= y1 < y2 <= height
        assert set(obj['attributes']) <= set(ATTRIBUTES)
    for s, o, pred in rels:
        assert s != o and 0 <= s < len(objects) and 0 <= o < len(objects)
        assert pred in PREDICATES
