"""Pictures of a YOLOv3 run: curves and validation samples after a tiny training, box scaling."""
import os

import mxnet as mx
import numpy as np
import pytest

from gluontrain.mx.yolo3 import main
from gluontrain.mx.yolo3.plots import (val_samples_hook, detect, draw_val_samples,
                                       raw_val_dataset)

PNG_SIGNATURE = b'\x89PNG\r\n\x1a\n'


def _size(path):
    from PIL import Image
    with open(path, 'rb') as f:
        assert f.read(8) == PNG_SIGNATURE
    with Image.open(path) as im:
        im.load()  # decodes the whole picture
        return im.size


def test_tiny_run_writes_curves_and_val_samples(voc_root, argv_for):
    """At 64 px instead of conftest's 160 (the pictures' sizes do not depend on it): 14.9 ->
    7.6 s CPU."""
    argv = argv_for(voc_root, '--epochs', '2', '--val-interval', '2', '--data-shape', '64',
                    plots=True)
    main(argv)
    prefix = argv[argv.index('--save-prefix') + 1] + 'yolo3_mobilenet0.25_voc'
    assert _size(prefix + '_curves.png') == (800, 600)
    # four validation images in a 2 x 2 grid of 4-inch cells at 100 dpi
    assert _size(prefix + '_val_samples.png') == (800, 800)
    # the hooks logged nothing: args, start, 8 batch lines + cost + mean per epoch, and one
    # validation (header + 20 classes + mAP)
    lines = open(prefix + '_train.log').read().splitlines()
    assert len(lines) == 2 + 2 * (8 + 2) + 22
    assert not any('png' in line for line in lines[1:])


class _FixedNet:
    """Returns one box [16, 16, 80, 80] (network-input pixels) of class 1, score 0.9, and an
    NMS padding row."""

    def __call__(self, x):
        assert x.shape == (1, 3, 160, 160)
        ids = mx.nd.array([[[1], [-1]]])
        scores = mx.nd.array([[[0.9], [-1]]])
        boxes = mx.nd.array([[[16, 16, 80, 80], [-1, -1, -1, -1]]])
        return ids, scores, boxes


def test_detect_scales_boxes_back_to_the_image_per_axis():
    img = mx.nd.zeros((80, 320, 3), dtype='uint8')  # h=80, w=320
    ids, scores, boxes = detect(_FixedNet(), img, mx.cpu(), 160)
    assert ids.tolist() == [1] and scores.tolist() == pytest.approx([0.9])
    # x scales by 320/160, y by 80/160
    assert boxes.tolist() == [[32.0, 8.0, 160.0, 40.0]]


class _ListDataset:
    def __init__(self, n):
        self.items = [(mx.nd.full((60 + 10 * i, 90, 3), 40 * i, dtype='uint8'),
                       np.array([[5, 5, 40, 30, i % 2, 0], [-1, -1, -1, -1, -1, -1]],
                                'float32')) for i in range(n)]

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]


@pytest.mark.parametrize('num,size', [(1, (400, 400)), (3, (800, 800)), (4, (800, 800))])
def test_sample_grid_size_follows_the_image_count(tmp_path, num, size):
    path = str(tmp_path / 's.png')
    draw_val_samples(_FixedNet(), _ListDataset(5), ['a', 'b'], path, mx.cpu(), 160, num=num)
    assert _size(path) == size


def test_hook_draws_only_after_validation_and_raw_dataset_is_found(tmp_path, voc_root):
    from gluontrain.mx.yolo3.data import get_dataloader, get_dataset
    from gluontrain.mx.yolo3.args import parse_args
    from gluontrain.core.loop import TrainState
    args = parse_args(['--dataset-root', voc_root, '--no-random-shape', '--data-shape', '160'])
    train_ds, val_ds, _ = get_dataset('voc', args)
    loader = get_dataloader(None, train_ds, val_ds, 160, 2, 0, args)[1]
    assert raw_val_dataset(loader) is val_ds
    assert raw_val_dataset(object()) is None
    path = str(tmp_path / 'v.png')
    hook = val_samples_hook(_FixedNet(), raw_val_dataset(loader), val_ds.classes, path,
                          [mx.cpu()], 160)
    hook.min_interval_s = 0  # every validation (core.plots.REDRAW_INTERVAL_S would wait 20 s)
    hook.after_epoch(TrainState(scores={'current': 0.0}))
    assert not os.path.exists(path)
    hook.after_epoch(TrainState(scores={'val': (['mAP'], [0.5])}))
    assert _size(path) == (800, 800)
