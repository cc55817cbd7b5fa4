"""maskrcnn-benchmark's transforms: resize arithmetic, flips, BGR-255 normalisation.

``get_size`` is compared with SGB's against the recording ``sgb_data_transforms`` and, with
``GLUONTRAIN_REFERENCES`` set, live against SGB's source."""
import random

import numpy as np
import pytest
import torch
from PIL import Image

from fixtures.recorded import SOURCES, Recorder
from gluontrain.torch.sgg.config import get_cfg
from gluontrain.torch.sgg.data import transforms as T
from gluontrain.torch.twostage.structures import BoxList

try:
    from . import sgb_reference
except ImportError:  # imported outside the package by tests/fixtures/make_recorded_fixtures.py
    import sgb_reference  # pylint: disable=import-error

SGB = Recorder('sgb_data_transforms', sgb_reference.load, "SGB's data/transforms")


@pytest.mark.parametrize('size,want', [
    ((1000, 500), (500, 1000)),   # 1000/500*600 > 1000: shorter side round(1000*500/1000)
    ((640, 480), (600, 800)),     # shorter side 600, longer int(600*640/480)
    ((333, 500), (900, 600)),     # longer side int(600*500/333) = int(900.9)
    ((600, 900), (900, 600)),     # already there: returned as is
    ((100, 1000), (1000, 100)),   # cap: round(1000*100/1000) = 100 == w
    ((407, 1223), (1000, 333)),   # cap: round(332.79) = 333, longer int(333*1223/407) = 1000
])
def test_resize_get_size(size, want):
    assert T.Resize(600, 1000).get_size(size) == want


def test_resize_image_and_boxes():
    img = Image.new('RGB', (40, 20))
    target = BoxList(torch.tensor([[0., 0, 10, 5]]), (40, 20))
    out, t = T.Resize(30, 1000)(img, target)
    assert out.size == (60, 30) and t.size == (60, 30)
    torch.testing.assert_close(t.bbox, torch.tensor([[0., 0, 15, 7.5]]))
    random.seed(3)
    choices = {T.Resize((10, 20), None).get_size((40, 40))[0] for _ in range(20)}
    assert choices == {10, 20}


def test_flips_move_image_and_boxes():
    array = np.zeros((2, 4, 3), np.uint8)
    array[0, 0] = 255
    img = Image.fromarray(array)
    target = BoxList(torch.tensor([[0., 0, 1, 1]]), (4, 2))
    out, t = T.RandomHorizontalFlip(1.0)(img, target)
    assert np.asarray(out)[0, 3, 0] == 255
    torch.testing.assert_close(t.bbox, torch.tensor([[2., 0, 3, 1]]))  # x -> W - x - 1
    out, t = T.RandomVerticalFlip(1.0)(img, target)
    assert np.asarray(out)[1, 0, 0] == 255
    out, t = T.RandomHorizontalFlip(0.0)(img, target)
    assert out is img and t is target


def test_to_tensor_and_normalize_bgr255():
    img = Image.new('RGB', (3, 2), (10, 20, 30))
    tensor, _ = T.ToTensor()(img, None)
    assert tensor.shape == (3, 2, 3) and tensor.dtype == torch.float32
    torch.testing.assert_close(tensor[:, 0, 0], torch.tensor([10., 20, 30]) / 255)
    mean = [102.9801, 115.9465, 122.7717]
    out, t = T.Normalize(mean, [1., 1., 1.], to_bgr255=True)(tensor, "target")
    assert t == "target"
    torch.testing.assert_close(out[:, 1, 2], torch.tensor([30 - 102.9801, 20 - 115.9465,
                                                           10 - 122.7717]), atol=1e-4, rtol=0)
    out = T.Normalize([0.5, 0.5, 0.5], [0.25, 0.5, 1.0], to_bgr255=False)(tensor)
    torch.testing.assert_close(out[:, 0, 0], (torch.tensor([10., 20, 30]) / 255 - 0.5)
                               / torch.tensor([0.25, 0.5, 1.0]))


def test_build_transforms_from_sgb_keys():
    cfg = get_cfg()
    cfg.INPUT.MIN_SIZE_TRAIN = (600,)
    cfg.INPUT.MAX_SIZE_TRAIN = 1000
    cfg.INPUT.MIN_SIZE_TEST = 600
    cfg.INPUT.MAX_SIZE_TEST = 1000
    train = T.build_transforms(cfg, is_train=True)
    kinds = [type(t).__name__ for t in train.transforms]
    assert kinds == ['Resize', 'RandomHorizontalFlip', 'RandomVerticalFlip', 'ToTensor',
                     'Normalize']
    assert train.transforms[0].min_size == (600,) and train.transforms[0].max_size == 1000
    assert train.transforms[1].prob == 0.5 and train.transforms[2].prob == 0.0
    cfg.INPUT.FLIP_PROB_TRAIN = 0.0  # ours: no flips for left/right predicates
    assert T.build_transforms(cfg, is_train=True).transforms[1].prob == 0.0
    cfg.INPUT.FLIP_PROB_TRAIN = 0.5
    test = T.build_transforms(cfg, is_train=False)
    assert test.transforms[1].prob == 0.0 and test.transforms[0].min_size == (600,)
    img = Image.new('RGB', (640, 480), (10, 20, 30))
    target = BoxList(torch.tensor([[0., 0, 639, 479]]), (640, 480))
    out, t = test(img, target)
    assert out.shape == (3, 600, 800) and t.size == (800, 600)
    torch.testing.assert_close(out[:, 100, 100], torch.tensor([30 - 102.9801, 20 - 115.9465,
                                                               10 - 122.7717]), atol=1e-3, rtol=0)
    cfg.INPUT.BRIGHTNESS = 0.5
    assert type(T.build_transforms(cfg).transforms[0]).__name__ == 'ColorJitter'
    cfg.INPUT.HUE = 0.1
    with pytest.raises(ValueError, match='INPUT.HUE'):
        T.build_transforms(cfg)


def test_color_jitter_factor_range():
    img = Image.new('RGB', (4, 4), (100, 100, 100))
    torch.manual_seed(0)
    values = {np.asarray(T.ColorJitter(brightness=0.5)(img, None)[0])[0, 0, 0]
              for _ in range(20)}
    assert len(values) > 5 and min(values) >= 50 and max(values) <= 150


#: ``(min_size, max_size)`` of the get_size comparison.
GET_SIZE_SETTINGS = (((600,), 1000), ((480, 512, 600), 1000), ((800,), 1333), ((64,), 100),
                     ((600,), None))


def _get_sizes(resize_class):
    """``get_size`` of ``resize_class(min_size, max_size)`` for each of
    :data:`GET_SIZE_SETTINGS` on 300 random (w, h) (NumPy seed 0), Python's ``random`` seeded
    with the call's number before each call (the drawn ``min_size``); shape (5, 300, 2)."""
    rng = np.random.default_rng(0)
    out, call = [], 0
    for min_size, max_size in GET_SIZE_SETTINGS:
        resize, sizes = resize_class(min_size, max_size), []
        for _ in range(300):
            size = tuple(int(v) for v in rng.integers(20, 2000, 2))
            random.seed(call)
            call += 1
            sizes.append(resize.get_size(size))
        out.append(sizes)
    return np.array(out, np.int64)


@SGB.case
def get_size(sgb):
    """SGB's ``Resize.get_size`` on the sizes of :func:`_get_sizes`."""
    return {'sizes': _get_sizes(sgb.transforms.Resize)}


@pytest.mark.parametrize('source', SOURCES)
def test_get_size_same_as_sgb(source):
    """Our get_size against SGB's, size for size, the same ``random`` state before each call
    (recorded, and live from the mirror)."""
    want = SGB.outputs('get_size', source)['sizes']
    np.testing.assert_array_equal(_get_sizes(T.Resize), want)
