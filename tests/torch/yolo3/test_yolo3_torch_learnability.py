"""The PyTorch YOLOv3 learns, and fine-tuning from a model of other classes (``--transfer``)
learns faster than training from scratch.

Marked slow; it runs in the default suite. Model A: mobilenet0.25 from scratch on generated
VOC-format data with classes car and dog (160 training images, 8 epochs at 64 px, batch 8,
lr 0.004). Dataset B names other classes, bus and cat (60 training images, 40 held out), drawn
as the generator draws a set's first and second classes, i.e. the shapes A learnt under other
names; the names match nothing, so GluonCV's ``reset_class`` draws the whole prediction
convolution afresh and only the body and the detection blocks carry over. Three epochs on B:

    seed   A (val mAP)   B from A (--transfer)   --transfer --keep-box-rows   B from scratch
    233    0.147         0.062                   0.041                        0.000
    1      0.124         0.051                   0.024                        0.000
    2      0.238         0.096                   0.232                        0.000

(about 75 s of CPU for A and 10 s for each B run here). Thresholds: A above 0.05 (the
untrained network scores 0.000), B from A above 0.02 (less than half the lowest measured)
and above B from scratch. The ImageNet base cannot be compared here (no download on these
machines; docs/zoo.md).
"""
import os
import random

import numpy as np
import pytest
import torch

from gluontrain.data import synthetic
from gluontrain.torch.yolo3 import main

SEED = 233


def _run(root, out, epochs, *extra):
    argv = ['--network', 'mobilenet0.25', '--dataset', 'custom', '--dataset-root', root,
            '--no-pretrained-base', '--gpus', '', '--batch-size', '8', '-j', '0',
            '--data-shape', '64', '--no-random-shape', '--epochs', str(epochs),
            '--warmup-epochs', '1', '--lr', '0.004', '--lr-decay-epoch', str(epochs - 1),
            '--log-interval', '0', '--save-interval', '0', '--no-plots', '--seed', str(SEED),
            '--save-prefix', out + os.sep] + list(extra)
    random.seed(SEED)
    np.random.seed(SEED)
    torch.manual_seed(SEED)
    return main(argv).current


@pytest.mark.slow
def test_fine_tuning_from_other_classes_beats_training_from_scratch(tmp_path):
    kw = dict(years=(2007,), image_size=(96, 128), max_objects=3, object_size=(0.2, 0.6))
    a = synthetic.write_voc(str(tmp_path / 'A'), num_train=160, num_val=20, seed=SEED,
                            classes=('car', 'dog'), **kw)
    b = synthetic.write_voc(str(tmp_path / 'B'), num_train=60, num_val=40, seed=SEED + 100,
                            classes=('bus', 'cat'), **kw)
    assert _run(a, str(tmp_path / 'a'), 8) > 0.05
    params = str(tmp_path / 'a' / 'yolo3_mobilenet0.25_custom_best.params')
    transferred = _run(b, str(tmp_path / 'bt'), 3, '--transfer', params, '--transfer-classes',
                       'car,dog')
    scratch = _run(b, str(tmp_path / 'bs'), 3)
    assert transferred > 0.02 and transferred > scratch, (transferred, scratch)
