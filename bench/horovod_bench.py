"""YOLOv3 under Horovod: 1 process against N processes on the same total work.

Both runs train the same mobilenet0.25 YOLOv3 on the same generated VOC images for the same
epochs at the same **global** batch (``--batch-size G``: 1 process trains G images a step,
N processes G / N each, ``hvd.DistributedTrainer`` over Gloo on the CPU), launched by
``horovodrun -np {1, N} --gloo`` as a user would. Printed, from one run of this script:

- samples/s of each run: global batch x timed steps / wall time from the end of the first
  step to the end of the last (data, forward, backward, all-reduce, update, and the
  epoch-end saving between epochs, no validation; the first step's set-up is left out), and
  their ratio (the speed-up);
- communication per step: the time ``DistributedTrainer``'s gradient all-reduce takes when it
  is made blocking (``waitall`` before and after it; in a normal run it overlaps MXNet's
  asynchronous engine, so this is an upper bound of what it adds), and the loss all-reduce for
  the log (one small float64 all-reduce a step).

N processes of ``OMP_NUM_THREADS=1`` use at most min(N, cores) cores: on this machine (2
cores shared with other work) the speed-up is bounded by the cores, not by Gloo. Needs
horovod (docs/distributed.md). Run:
``python bench/horovod_bench.py [--nproc 2] [--epochs 1] [--batch-size 8] [--num-train 48]``.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def worker(out, argv):
    """One rank: the YOLOv3 recipe's ``main`` with its steps and all-reduces timed."""
    import mxnet as mx
    import gluontrain.mx  # noqa: F401  (gluoncv through the shim, before horovod)
    import horovod.mxnet as hvd
    from gluontrain.mx.distributed import HorovodComm
    from gluontrain.mx.yolo3 import step as yolo_step
    yolo_main = sys.modules['gluontrain.mx.yolo3.recipe']
    stats = {'step_end': [], 'grad_reduce': [], 'loss_reduce': []}
    real_call = yolo_step.YOLOv3Step.__call__
    real_grads = hvd.DistributedTrainer._allreduce_grads
    real_mean = HorovodComm.allreduce_mean

    def timed_step(self, batch, state=None):
        result = real_call(self, batch, state)
        mx.nd.waitall()
        stats['step_end'].append(time.perf_counter())
        return result

    def timed_grads(self):
        mx.nd.waitall()
        tic = time.perf_counter()
        real_grads(self)
        mx.nd.waitall()
        stats['grad_reduce'].append(time.perf_counter() - tic)

    def timed_mean(self, values):
        tic = time.perf_counter()
        result = real_mean(self, values)
        stats['loss_reduce'].append(time.perf_counter() - tic)
        return result

    yolo_step.YOLOv3Step.__call__ = timed_step
    hvd.DistributedTrainer._allreduce_grads = timed_grads
    HorovodComm.allreduce_mean = timed_mean
    yolo_main.main(argv)
    with open(os.path.join(out, 'rank{}.json'.format(hvd.rank())), 'w') as f:
        json.dump(stats, f)


def _launch(nproc, out, argv):
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get('PYTHONPATH', ''),
               OMP_NUM_THREADS='1', MXNET_CPU_WORKER_NTHREADS='1', MPLBACKEND='Agg')
    command = [sys.executable, os.path.abspath(__file__), '--worker', out] + argv
    # horovodrun's parser would read --network as its --network-interface: one sh -c string
    launch = ['horovodrun', '-np', str(nproc), '--gloo', 'sh', '-c',
              ' '.join("'{}'".format(a) for a in command)]
    proc = subprocess.run(launch, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True)
    if proc.returncode:
        raise SystemExit('horovodrun -np {} failed:\n{}'.format(nproc, proc.stdout[-3000:]))
    with open(os.path.join(out, 'rank0.json')) as f:
        return json.load(f)


def _mean(values):
    return sum(values) / len(values) if values else float('nan')


def main():
    if sys.argv[1:2] == ['--worker']:
        # a rank started by _launch: the rest is the recipe's command line
        worker(sys.argv[2], sys.argv[3:])
        return
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--nproc', type=int, default=2)
    parser.add_argument('--epochs', type=int, default=1)
    parser.add_argument('--batch-size', type=int, default=8, help='global batch')
    parser.add_argument('--num-train', type=int, default=48, help='training images per year')
    args = parser.parse_args()
    from gluontrain.data import synthetic
    with tempfile.TemporaryDirectory() as tmp:
        root = synthetic.write_voc(os.path.join(tmp, 'voc'), num_train=args.num_train,
                                   num_val=8, seed=0, years=(2007, 2012),
                                   classes=synthetic.DEFAULT_VOC_CLASSES,
                                   image_size=(112, 144), max_objects=6)
        results = {}
        for nproc in (1, args.nproc):
            out = os.path.join(tmp, 'np{}'.format(nproc))
            os.makedirs(out)
            argv = ['--horovod', '--network', 'mobilenet0.25', '--dataset', 'voc',
                    '--dataset-root', root, '--no-pretrained-base', '--gpus', '',
                    '--batch-size', str(args.batch_size), '-j', '0', '--data-shape', '160',
                    '--no-random-shape', '--log-interval', '0', '--epochs', str(args.epochs),
                    '--val-interval', '1000', '--save-prefix', out + '/']
            stats = _launch(nproc, out, argv)
            ends = stats['step_end']
            samples = args.batch_size * (len(ends) - 1)
            results[nproc] = dict(speed=samples / (ends[-1] - ends[0]), steps=len(ends),
                                  grad=_mean(stats['grad_reduce']),
                                  loss=_mean(stats['loss_reduce']))
    print('YOLOv3 mobilenet0.25, 160 px, {} images, global batch {}, {} epochs, CPU, Gloo'
          .format(2 * args.num_train, args.batch_size, args.epochs))
    for nproc, r in results.items():
        print('  {} process(es): {:.2f} samples/s over {} steps; gradient all-reduce (blocking) '
              '{:.1f} ms/step; loss all-reduce {}'.format(
                  nproc, r['speed'], r['steps'], 1e3 * r['grad'],
                  'none (one process)' if nproc == 1 else '{:.1f} ms/step'.format(
                      1e3 * r['loss'])))
    print('  (an all-reduce also waits for the slower rank: with 2 ranks on 2 shared cores '
          'these times include that wait)')
    print('  speed-up {} vs 1 process: {:.2f}x (cores: {})'.format(
        args.nproc, results[args.nproc]['speed'] / results[1]['speed'], os.cpu_count()))


if __name__ == '__main__':
    main()
