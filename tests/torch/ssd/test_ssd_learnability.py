"""SSD300 learns the generated shapes: held-out VOC07 mAP far above the untrained network's.

Bounded (about 2.5 minutes of one core) and marked slow; it runs in the default suite.
No ImageNet VGG can be downloaded here, so the base is trained from scratch: SSD300 at 1/8 of
the channels with a BatchNorm VGG (``--batch_norm true --basenet ''``), ssd.pytorch's SGD
defaults but the rate (momentum 0.9, weight decay 5e-4, gamma 0.1; lr 2e-3), 100 iterations of
batch 8 on 200 generated training images of two classes (car and dog: the embedded default's
generator with up to six objects of 10-60 % of the side), the rate divided at iteration 80,
evaluated on the 50 held-out test images, on one thread.

Trimmed (2026-11-26, the whole suite over its 15 minutes): was 300 iterations at
ssd.pytorch's lr 1e-3 (divided at 240) on the five default classes, on two threads: 278 s
CPU alone, 793 s in the suite, where its two threads fought the other xdist worker for two
cores; then 150 iterations at lr 2e-3 on one thread (216-233 s CPU; seeds 0 / 1 / 2: 0.108 /
0.146 / 0.058). Now (CPU seconds of train + validation, one thread; held-out mAP, untrained
0.0001-0.0008): seeds 0 / 1 / 2 reach 0.302 / 0.110 / 0.047 in 149-154 s. Cheaper runs did
not learn robustly: 70 iterations 0.108 / 0.042; five classes at 100 iterations 0.008 /
0.069, at batch 4 for 150 iterations 0.010 / 0.039, at width 3/32 0.019 / 0.029. The old run
reached 0.366, and 600 iterations 0.554. Without BatchNorm the budget stays below 0.003
(the loss learns the background, not the boxes), which is why the switch exists. The
threshold is 0.03 (was 0.15, then 0.04): 300 times the untrained net.
"""
import numpy as np
import pytest
import torch

from gluontrain.data import synthetic
from gluontrain.torch.ssd.recipe import get_dataloader, get_dataset, get_net, parse_args
from gluontrain.torch.ssd.recipe import train, validate


@pytest.mark.slow
def test_ssd_training_on_generated_shapes_beats_untrained_by_far(tmp_path):
    # the embedded default's generator with two of its classes and the harder objects (up to
    # 6 of 10-60 % of the side instead of 3 of 20-60 %): two classes learn in a third of the
    # iterations five need
    devkit = synthetic.default_voc_root(str(tmp_path / 'data'), max_objects=6,
                                        object_size=(0.1, 0.6), classes=('car', 'dog'))
    args = parse_args(['--dataset_root', devkit, '--basenet', '', '--batch_norm', 'true',
                       '--width_mult', '0.125', '--cuda', 'false', '--batch_size', '8',
                       '--num_workers', '0', '--max_iter', '100', '--lr_steps', '80',
                       '--lr', '2e-3',
                       '--save_interval', '0', '--log_interval', '0', '--seed', '0',
                       '--save_folder', str(tmp_path / 'run') + '/'])
    # as main() does: the outcome of 100 steps from scratch depends on the initial weights
    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    ctx = [torch.device('cpu')]
    train_ds, val_ds, metric = get_dataset(args.dataset, args)
    assert len(train_ds) == 200 and len(val_ds) == 50
    net, async_net = get_net(args, ctx)
    train_data, val_data = get_dataloader(async_net, train_ds, val_ds, 300, 8, 0, args)
    untrained = validate(net, val_data, ctx, metric)[1][-1]
    state = train(net, train_data, val_data, metric, ctx, args)
    names, values = state.scores['val']
    present = {n: v for n, v in zip(names, values) if v == v}
    print('untrained mAP {:.4f}, trained mAP {:.4f}, per class {}'.format(
        untrained, values[-1], present))
    assert state.iteration == 100
    assert set(present) == {'car', 'dog', 'mAP'}
    assert untrained < 0.01
    assert values[-1] > 0.03 and values[-1] > 20 * untrained
