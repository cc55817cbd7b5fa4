"""gluontrain.yolo3.transform: GluonCV's box operations, interpolation choice, normalisation."""
import numpy as np

from gluontrain.yolo3.transform import (MEAN, STD, bbox_crop, bbox_flip, bbox_resize,
                                        bbox_translate, interp_method, val_transform)


def test_box_operations_by_hand():
    box = np.array([[10., 20., 50., 60., 3.]])
    assert np.array_equal(bbox_translate(box, 5, 7)[0, :4], [15, 27, 55, 67])
    assert np.array_equal(bbox_flip(box, (100, 80), flip_x=True)[0, :4], [50, 20, 90, 60])
    resized = bbox_resize(box, (100, 80), (50, 160))
    assert resized.dtype == np.float64 and np.array_equal(resized[0, :4], [5, 40, 25, 120])
    # clipped into the crop, in its coordinates; a box whose centre is outside is dropped
    assert np.array_equal(bbox_crop(box, (30, 0, 40, 100))[0, :4], [0, 20, 20, 60])
    assert len(bbox_crop(box, (40, 0, 40, 100), allow_outside_center=False)) == 0


def test_interp_9_is_cubic_up_area_down_else_bilinear():
    assert interp_method(9, (10, 10, 20, 20)) == 2
    assert interp_method(9, (10, 10, 5, 5)) == 3
    assert interp_method(9, (10, 10, 20, 5)) == 1
    assert interp_method(4, (10, 10, 20, 20)) == 4


def test_val_transform_normalises_and_scales_the_boxes():
    img = np.full((8, 16, 3), 255, np.uint8)
    out, label = val_transform(img, np.array([[0., 0., 16., 8., 1., 0.]]), 4, 4,
                               lambda a, w, h, i: np.full((h, w, 3), a[0, 0], a.dtype))
    assert out.shape == (3, 4, 4) and out.dtype == np.float32
    assert np.allclose(out[:, 0, 0], (1 - np.array(MEAN)) / np.array(STD), atol=1e-6)
    assert label.dtype == np.float32 and np.array_equal(label[0, :4], [0, 0, 4, 4])
