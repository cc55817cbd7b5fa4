"""Time the YOLOv3 pipeline on this machine and print a table.

Measures, on generated VOC data:
  * the train transform per sample (YOLO3DefaultTrainTransform incl. target generation),
  * forward+backward+update per step (YOLOv3Step) for mobilenet0.25 and darknet53,
  * the cost gluontrain's loop and per-batch hooks add: steps through ``run_loop`` divided by
    bare ``YOLOv3Step`` calls on the same batches (the reference's loop body is those calls),
  * the full checkpoint gluontrain writes once per epoch.

Usage: python bench/yolo3_pipeline.py [--data-shape 320] [--batch-size 4] [--steps 3]
       [--networks mobilenet0.25,darknet53]
"""
import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))

import mxnet as mx  # noqa: E402

from gluontrain.data import synthetic  # noqa: E402
from gluontrain.core.hooks import LogHook, LossMeterHook, NaNGuardHook, ProgressHook  # noqa: E402
from gluontrain.core.loop import run_loop  # noqa: E402
from gluontrain.core.meters import LossMeter  # noqa: E402
from gluontrain.mx.yolo3 import get_dataloader, get_dataset, get_net, parse_args  # noqa: E402
from gluontrain.mx.yolo3.data import YOLO3DefaultTrainTransform  # noqa: E402
from gluontrain.mx.yolo3.step import LOSS_NAMES, YOLOv3Step  # noqa: E402
from gluontrain.mx.yolo3.train import save_checkpoint  # noqa: E402


def _args(root, network, shape, batch, prefix, epochs=1):
    return parse_args(['--network', network, '--dataset', 'voc', '--dataset-root', root,
                       '--no-pretrained-base', '--gpus', '', '--batch-size', str(batch), '-j', '0',
                       '--data-shape', str(shape), '--no-random-shape', '--epochs', str(epochs),
                       '--log-interval', '0', '--save-prefix', prefix, '--save-interval', '0'])


def time_transform(root, shape, n):
    args = _args(root, 'mobilenet0.25', shape, 1, os.path.join(tempfile.mkdtemp(), ''))
    train_ds, _, _ = get_dataset('voc', args)
    net, _ = get_net(args, [mx.cpu()])
    t = YOLO3DefaultTrainTransform(shape, shape, net)
    samples = [train_ds[i % len(train_ds)] for i in range(n)]
    t(*samples[0])  # warm-up
    tic = time.perf_counter()
    for img, label in samples:
        t(img, label)
    return (time.perf_counter() - tic) / n


def time_steps(root, network, shape, batch, steps):
    prefix = os.path.join(tempfile.mkdtemp(), '')
    args = _args(root, network, shape, batch, prefix)
    ctx = [mx.cpu()]
    train_ds, val_ds, metric = get_dataset('voc', args)
    net, async_net = get_net(args, ctx)
    train_data, val_data = get_dataloader(async_net, train_ds, val_ds, shape, batch, 0, args)
    batches = [b for _, b in zip(range(steps + 1), train_data)]
    trainer = mx.gluon.Trainer(net.collect_params(), 'sgd', {'learning_rate': 1e-4})
    step = YOLOv3Step(net, trainer, ctx, batch)
    net.hybridize()
    step(batches[0])  # warm-up: graph construction
    tic = time.perf_counter()
    for b in batches[1:]:
        step(b)
    bare = (time.perf_counter() - tic) / steps
    # the same batches through gluontrain's loop with the per-batch hooks train() installs
    meter = LossMeter(LOSS_NAMES)
    hooks = [NaNGuardHook(), LossMeterHook(meter),
             LogHook(meter, log_interval=1, batch_size=batch), ProgressHook(enabled=False)]
    tic = time.perf_counter()
    state = run_loop(step, batches[1:], hooks, 0, 1)
    looped = (time.perf_counter() - tic) / state.iteration
    # the per-epoch full checkpoint (params + trainer state), written atomically
    tic = time.perf_counter()
    save_checkpoint(prefix + 'bench_last.ckpt', net, trainer, meter, batches, state, [0], args)
    ckpt = time.perf_counter() - tic
    size = os.path.getsize(prefix + 'bench_last.ckpt') / 2 ** 20
    return bare, looped, ckpt, size


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--data-shape', type=int, default=320)
    p.add_argument('--batch-size', type=int, default=4)
    p.add_argument('--steps', type=int, default=3)
    p.add_argument('--samples', type=int, default=20)
    p.add_argument('--networks', default='mobilenet0.25,darknet53')
    a = p.parse_args()
    root = synthetic.write_voc(tempfile.mkdtemp(), num_train=16, num_val=4, seed=0)
    print('machine: {} CPU threads (OMP_NUM_THREADS={}), mxnet {}'.format(
        os.cpu_count(), os.environ.get('OMP_NUM_THREADS', 'unset'), mx.__version__))
    tr = time_transform(root, a.data_shape, a.samples)
    print('\n| measurement | value |\n|---|---|')
    print('| train transform + targets @{} | {:.1f} ms/sample |'.format(a.data_shape, tr * 1e3))
    for network in a.networks.split(','):
        bare, looped, ckpt, size = time_steps(root, network, a.data_shape, a.batch_size,
                                              a.steps)
        print('| {} step @{} batch {} (forward+backward+update) | {:.3f} s/step |'.format(
            network, a.data_shape, a.batch_size, bare))
        print('| {} loop+hooks per step / bare step (same batches) | {:.3f} |'.format(
            network, looped / bare))
        print('| {} full checkpoint per epoch ({:.0f} MiB) | {:.2f} s |'.format(
            network, size, ckpt))


if __name__ == '__main__':
    main()
