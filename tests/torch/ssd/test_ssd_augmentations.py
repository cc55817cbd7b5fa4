"""ssd.pytorch's augmentations: the reference's random draws, box validity and geometry."""
import warnings

import cv2
import numpy as np

from gluontrain.torch.ssd import augmentations as A

MEAN = (104, 117, 123)
# distinct from each other, from black and from MEAN, so each box is findable by colour
COLOURS = [(255, 255, 255), (255, 0, 0), (0, 255, 0), (0, 0, 255)]


def boxes_image(h=90, w=120):
    """Black image with 4 non-overlapping coloured boxes (integer pixel corners)."""
    boxes = np.array([[5, 8, 40, 50], [50, 10, 110, 30], [60, 40, 75, 85], [10, 60, 45, 80]],
                     dtype=np.float64)
    img = np.zeros((h, w, 3), np.uint8)
    for (x1, y1, x2, y2), c in zip(boxes.astype(int), COLOURS):
        img[y1:y2, x1:x2] = c
    return img, boxes, np.arange(len(boxes), dtype=np.float64)


def colour_mask(img, colour):
    return np.all(np.abs(img - np.array(colour, np.float32)) < 0.5, axis=2)


def check_boxes_are_their_pixels(img, boxes, labels):
    """Every kept box covers exactly the visible pixels of the colour of its label."""
    assert len(boxes) == len(labels) > 0
    for box, label in zip(boxes, labels):
        assert np.all(box == np.round(box))  # integer offsets keep integer corners
        x1, y1, x2, y2 = box.astype(int)
        assert 0 <= x1 < x2 <= img.shape[1] and 0 <= y1 < y2 <= img.shape[0]
        mask = colour_mask(img, COLOURS[int(label)])
        assert mask[y1:y2, x1:x2].all()
        assert mask.sum() == (x2 - x1) * (y2 - y1)


def test_ssd_augment_mode_draw_is_reference_choice():
    # the reference drew `random.choice(sample_options)`; choice of n items draws randint(n)
    options = (None, (0.1, None), (0.3, None), (0.7, None), (0.9, None), (None, None))
    for seed in range(5):
        np.random.seed(seed)
        with warnings.catch_warnings():
            warnings.simplefilter('ignore')
            try:  # works (with a warning) on numpy < 1.24 only: what the reference did
                ref = [np.random.choice(options) for _ in range(20)]
            except ValueError:
                ref = [options[np.random.choice(6)] for _ in range(20)]
        np.random.seed(seed)
        ours = [options[np.random.randint(6)] for _ in range(20)]
        assert ref == ours


def test_ssd_augment_expand_replays_reference_draws():
    img, boxes, labels = boxes_image()
    h, w = img.shape[:2]
    expanded = 0
    for seed in range(12):
        np.random.seed(seed)
        keep = np.random.randint(2)
        if not keep:
            ratio = np.random.uniform(1, 4)
            left = np.random.uniform(0, w * ratio - w)
            top = np.random.uniform(0, h * ratio - h)
        np.random.seed(seed)
        out, out_boxes, out_labels = A.Expand(MEAN)(img.astype(np.float32), boxes.copy(), labels)
        if keep:
            assert out.shape == img.shape and np.array_equal(out_boxes, boxes)
            continue
        expanded += 1
        assert out.shape == (int(h * ratio), int(w * ratio), 3)
        np.testing.assert_array_equal(
            out_boxes, boxes + [int(left), int(top), int(left), int(top)])
        assert np.array_equal(out[int(top):int(top) + h, int(left):int(left) + w], img)
        # the rest is the mean
        assert colour_mask(out, MEAN).sum() == out.shape[0] * out.shape[1] - h * w
        check_boxes_are_their_pixels(out, out_boxes, out_labels)
    assert 3 <= expanded <= 9


def test_ssd_augment_geometry_keeps_boxes_on_their_pixels():
    img, boxes, labels = boxes_image()
    geometric = A.Compose([A.ConvertFromInts(), A.Expand(MEAN), A.RandomSampleCrop(),
                           A.RandomMirror()])
    shapes = set()
    dropped = 0
    for seed in range(150):
        np.random.seed(seed)
        out, out_boxes, out_labels = geometric(img, boxes.copy(), labels.copy())
        check_boxes_are_their_pixels(out, out_boxes, out_labels)
        shapes.add(out.shape)
        dropped += len(out_boxes) < len(boxes)
    assert len(shapes) > 50 and dropped > 10  # crops and expansions did happen


def test_ssd_augment_crop_keeps_centres_inside():
    img = np.zeros((100, 100, 3), np.float32)
    img[20:40, 30:70] = 255
    boxes = np.array([[30., 20., 70., 40.]])
    for seed in range(60):
        np.random.seed(seed)
        out, b, l = A.RandomSampleCrop()(img, boxes.copy(), np.array([0.]))
        check_boxes_are_their_pixels(out, b, l)
        h, w = out.shape[:2]
        # the crop is 0.3-1x each side with 0.5 <= h/w <= 2 (integer corners)
        assert 29 <= w <= 100 and 29 <= h <= 100 and 0.45 <= h / w <= 2.1


def test_ssd_augment_full_pipeline_boxes_valid_over_seeds():
    rng = np.random.RandomState(0)
    aug = A.SSDAugmentation(300, MEAN)
    counts = []
    for seed in range(200):
        h, w = rng.randint(40, 120, size=2)
        img = rng.randint(0, 256, size=(h, w, 3)).astype(np.uint8)
        n = rng.randint(1, 6)
        xy = rng.uniform(0, 0.7, size=(n, 2))
        wh = rng.uniform(0.05, 0.3, size=(n, 2))
        boxes = np.hstack([xy, xy + wh])
        labels = rng.randint(0, 20, size=n).astype(np.float64)
        np.random.seed(seed)
        out, b, l = aug(img, boxes.copy(), labels.copy())
        assert out.shape == (300, 300, 3) and out.dtype == np.float32
        assert b.shape == (len(l), 4) and len(l) >= 1
        assert np.all(b[:, 0] >= 0) and np.all(b[:, 1] >= 0)
        assert np.all(b[:, 2] <= 1) and np.all(b[:, 3] <= 1)
        assert np.all(b[:, 0] < b[:, 2]) and np.all(b[:, 1] < b[:, 3])
        assert set(l.tolist()) <= set(labels.tolist())
        counts.append(len(l) / n)
        # the same seed gives the same sample: the reference's global numpy stream
        np.random.seed(seed)
        out2, b2, l2 = aug(img, boxes.copy(), labels.copy())
        assert np.array_equal(out, out2) and np.array_equal(b, b2) and np.array_equal(l, l2)
    assert min(counts) < 1  # some crops dropped boxes


def test_ssd_augment_empty_boxes_pass_through():
    img = np.full((50, 60, 3), 7, np.uint8)
    for seed in range(20):
        np.random.seed(seed)
        out, b, l = A.SSDAugmentation(300, MEAN)(img, np.zeros((0, 4)), np.zeros(0))
        assert out.shape == (300, 300, 3) and b.shape == (0, 4) and l.shape == (0,)


def test_ssd_augment_photometric_changes_only_colours():
    rng = np.random.RandomState(1)
    img = rng.randint(0, 256, size=(30, 40, 3)).astype(np.float32)
    boxes = np.array([[1., 2., 10., 20.]])
    labels = np.array([3.])
    changed = 0
    for seed in range(40):
        np.random.seed(seed)
        before = img.copy()
        out, b, l = A.PhotometricDistort()(img, boxes, labels)
        assert np.array_equal(img, before)  # works on a copy
        assert b is boxes and l is labels and np.array_equal(b, [[1., 2., 10., 20.]])
        assert out.shape == img.shape and out.dtype == np.float32
        changed += not np.allclose(out, img, atol=1e-3)
    assert changed > 20


def test_ssd_augment_brightness_contrast_swap_ranges():
    img = np.random.RandomState(2).uniform(0, 255, size=(8, 9, 3)).astype(np.float32)
    for seed in range(30):
        np.random.seed(seed)
        apply = np.random.randint(2)
        delta = np.random.uniform(-32, 32) if apply else 0.0
        np.random.seed(seed)
        out = A.RandomBrightness()(img.copy())[0]
        np.testing.assert_allclose(out - img, delta, atol=1e-3)

        np.random.seed(seed)
        apply = np.random.randint(2)
        alpha = np.random.uniform(0.5, 1.5) if apply else 1.0
        np.random.seed(seed)
        out = A.RandomContrast()(img.copy())[0]
        np.testing.assert_allclose(out, img * alpha, rtol=1e-5)

        out = A.RandomLightingNoise()(img)[0]
        perms = [p for p in A.RandomLightingNoise().perms if np.array_equal(out, img[:, :, p])]
        assert perms


def test_ssd_augment_hsv_ops_on_known_colour():
    # pure blue BGR (255, 0, 0): hue 240, saturation 1, value 255
    hsv = A.ConvertColor('BGR', 'HSV')(np.full((2, 2, 3), (255, 0, 0), np.float32))[0]
    np.testing.assert_allclose(hsv[0, 0], [240, 1, 255], atol=1e-3)
    for seed in range(20):
        np.random.seed(seed)
        out = A.RandomHue()(hsv.copy())[0]
        shift = out[0, 0, 0] - 240
        assert abs(shift) <= 18 and np.array_equal(out[..., 1:], hsv[..., 1:])
        np.random.seed(seed)
        out = A.RandomSaturation()(hsv.copy())[0]
        assert 0.5 <= out[0, 0, 1] <= 1.5 and np.array_equal(out[..., ::2], hsv[..., ::2])
    wrap = np.full((1, 1, 3), (355, 1, 1), np.float32)
    np.random.seed(next(s for s in range(100) if _hue_shift(s) > 5))
    assert 0 <= A.RandomHue()(wrap)[0][0, 0, 0] < 18


def _hue_shift(seed):
    np.random.seed(seed)
    return np.random.uniform(-18, 18) if np.random.randint(2) else 0


def test_ssd_augment_mirror_and_coords():
    img = np.zeros((10, 20, 3), np.float32)
    img[2:5, 3:8] = 255
    boxes = np.array([[3., 2., 8., 5.]])
    seed = next(s for s in range(10) if (np.random.seed(s) or np.random.randint(2)))
    np.random.seed(seed)
    out, b, _ = A.RandomMirror()(img, boxes, None)
    np.testing.assert_array_equal(b, [[12., 2., 17., 5.]])
    assert out[2:5, 12:17].min() == 255 and out.sum() == img.sum()
    rel = A.ToPercentCoords()(img, boxes.copy())[1]
    np.testing.assert_allclose(rel, [[0.15, 0.2, 0.4, 0.5]])
    np.testing.assert_allclose(A.ToAbsoluteCoords()(img, rel)[1], boxes)


def bilinear_resize(img, size):
    """OpenCV's INTER_LINEAR written out: half-pixel centres, edge clamped."""
    h, w = img.shape[:2]

    def axis(n_in):
        src = (np.arange(size) + 0.5) * n_in / size - 0.5
        src = np.clip(src, 0, None)
        i0 = np.minimum(np.floor(src).astype(int), n_in - 1)
        i1 = np.minimum(i0 + 1, n_in - 1)
        return i0, i1, src - i0

    y0, y1, fy = axis(h)
    x0, x1, fx = axis(w)
    f = img.astype(np.float64)
    top = f[y0][:, x0] * (1 - fx)[None, :, None] + f[y0][:, x1] * fx[None, :, None]
    bot = f[y1][:, x0] * (1 - fx)[None, :, None] + f[y1][:, x1] * fx[None, :, None]
    return top * (1 - fy)[:, None, None] + bot * fy[:, None, None]


def test_ssd_augment_base_transform_by_hand():
    flat = np.empty((37, 53, 3), np.uint8)
    flat[:] = (10, 200, 130)
    out, b, l = A.BaseTransform(300, MEAN)(flat, 'boxes', 'labels')
    assert out.shape == (300, 300, 3) and out.dtype == np.float32 and (b, l) == ('boxes',
                                                                               'labels')
    assert np.array_equal(out, np.broadcast_to(np.float32([10 - 104, 200 - 117, 130 - 123]),
                                               out.shape))
    img = np.random.RandomState(3).randint(0, 256, size=(37, 53, 3)).astype(np.uint8)
    out = A.BaseTransform(300, MEAN)(img)[0]
    expected = bilinear_resize(img, 300) - np.array(MEAN)
    # cv2 resizes uint8 in 11-bit fixed point: at most one grey level off
    assert np.abs(out - expected).max() <= 1.0
    assert np.array_equal(out, cv2.resize(img, (300, 300)).astype(np.float32) -
                          np.float32(MEAN))


def test_ssd_augment_iou_constraint_reference_and_fixed():
    img = np.zeros((100, 100, 3), np.float32)
    boxes = np.array([[5., 5., 95., 95.]])

    def ious(crop):
        crop.sample_options = ((0.7, None),)  # always the min-IoU-0.7 mode
        res = []
        for seed in range(40):
            np.random.seed(seed)
            out, b, _ = crop(img, boxes.copy(), np.array([0.]))
            h, w = out.shape[:2]
            # in crop coordinates the crop is [0, 0, w, h] and b the clipped box
            inter = (b[0, 2] - b[0, 0]) * (b[0, 3] - b[0, 1])
            res.append(inter / (90 * 90 + w * h - inter))
        return np.array(res)

    # the reference's `and` never rejects a crop when max_iou is inf (documented, kept)
    assert ious(A.RandomSampleCrop()).min() < 0.5
    assert ious(A.RandomSampleCrop(fix_iou_constraint=True)).min() >= 0.7
