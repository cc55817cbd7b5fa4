"""SSD300 learns the generated shapes: held-out VOC07 mAP far above the untrained network's.

Bounded (about 3.5 minutes of one core) and marked slow; it runs in the default suite.
No ImageNet VGG can be downloaded here, so the base is trained from scratch: SSD300 at 1/8 of
the channels with a BatchNorm VGG (``--batch_norm true --basenet ''``), ssd.pytorch's SGD
defaults but the rate (momentum 0.9, weight decay 5e-4, gamma 0.1; lr 2e-3), 150 iterations of
batch 8 on 200 generated training images (the embedded default's generator with up to six
objects of 10-60 % of the side), the rate divided at iteration 120, evaluated on the 50
held-out test images, on one thread.

Trimmed (2026-11-26): was 300 iterations at ssd.pytorch's lr 1e-3 (divided at 240) on two
threads: 278 s CPU alone, 793 s in the suite, where its two threads fought the other xdist
worker for two cores. Now (CPU seconds of train + validation, one thread): seeds 0 / 1 / 2
reach 0.108 / 0.146 / 0.058 (untrained 0.0001-0.0002) in 216-233 s; at lr 1e-3 the same 150
iterations reach only 0.024 (seed 0), at 3e-3 0.076. The old run reached 0.366, and 600
iterations 0.554; the threshold is 0.04 (was 0.15). Without BatchNorm the budget stays below
0.003 (the loss learns the background, not the boxes), which is why the switch exists.
"""
import numpy as np
import pytest
import torch

from gluontrain.data import synthetic
from gluontrain.torch.ssd.recipe import get_dataloader, get_dataset, get_net, parse_args
from gluontrain.torch.ssd.train import train, validate


@pytest.mark.slow
def test_ssd_training_on_generated_shapes_beats_untrained_by_far(tmp_path):
    # the dataset these numbers were measured on: the embedded default before the main job's
    # easier one (up to 6 objects of 10-60 % of the side instead of 3 of 20-60 %)
    devkit = synthetic.default_voc_root(str(tmp_path / 'data'), max_objects=6,
                                        object_size=(0.1, 0.6))
    args = parse_args(['--dataset_root', devkit, '--basenet', '', '--batch_norm', 'true',
                       '--width_mult', '0.125', '--cuda', 'false', '--batch_size', '8',
                       '--num_workers', '0', '--max_iter', '150', '--lr_steps', '120',
                       '--lr', '2e-3',
                       '--save_interval', '0', '--log_interval', '0', '--seed', '0',
                       '--save_folder', str(tmp_path / 'run') + '/'])
    # as main() does: the outcome of 150 steps from scratch depends on the initial weights
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
    assert state.iteration == 150
    assert set(present) == {'bus', 'car', 'cat', 'dog', 'person', 'mAP'}
    assert untrained < 0.01
    assert values[-1] > 0.04 and values[-1] > 20 * untrained
