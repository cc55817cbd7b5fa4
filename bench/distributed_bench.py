"""SSD300 under torchrun: 1 process against N processes on the same total work.

Both runs train the same tiny SSD (``--width_mult``) on the same generated VOC images for the
same number of steps at the same **global** batch (``--batch_size G``: 1 process loads G
images a step, N processes G / N each, DistributedDataParallel over gloo on the CPU), launched by
``torchrun --nproc_per_node {1, N} ...`` exactly as a user would. Printed, from one run of this
script:

- samples/s of each run (global batch x timed steps / wall time from the end of the first
  step to the end of the last: data loading, forward, backward, all-reduce, update and the
  pass-end checkpoint; the first step's lazy set-up and the final validation are left out),
  and their ratio (the speed-up);
- communication per step, two ways: the wall time DistributedDataParallel's gradient
  all-reduces take from launch to completion (a timing comm hook; they overlap the backward
  pass, so this is an upper bound of what they add), and one blocking all-reduce of a buffer
  the size of all the gradients (the pure cost of moving them, nothing to overlap with);
- the loss all-reduce for the log (one float64 all-reduce a step).

On a machine with C cores, N processes of ``OMP_NUM_THREADS=1`` use at most min(N, C) of
them: the speed-up is bounded by the cores (here the machine has 2, shared with other work),
not by gloo. A smaller per-process batch can also run faster per sample on a CPU (caches),
so a ratio above N is possible and says nothing about gloo. Run:
``python bench/distributed_bench.py [--nproc 2] [--steps 8] [--repeats 2]``.
"""
import argparse
import importlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


def worker(out, argv):
    """One rank: train with gluontrain's SSD recipe, timing steps and all-reduces."""
    import torch
    import torch.distributed as dist
    from gluontrain.torch.ssd import recipe
    from gluontrain.torch.ssd.step import SSDStep
    torch.set_num_threads(1)
    stats = {'step_end': [], 'comm': [0.0], 'loss_reduce': []}
    real_call, real_wrap = SSDStep.__call__, recipe.wrap_ddp
    real_reduce = importlib.import_module('gluontrain.torch.step').all_reduce_mean

    def timed_step(self, batch, state=None):
        result = real_call(self, batch, state)
        stats['step_end'].append(time.perf_counter())
        return result

    def timed_reduce(values):
        tic = time.perf_counter()
        result = real_reduce(values)
        stats['loss_reduce'].append(time.perf_counter() - tic)
        return result

    def comm_hook(state, bucket):
        tic = time.perf_counter()
        world = dist.get_world_size()
        fut = dist.all_reduce(bucket.buffer(), async_op=True).get_future()

        def done(f):
            stats['comm'][-1] += time.perf_counter() - tic
            return f.value()[0] / world
        return fut.then(done)

    def wrap(net, device, **kw):
        model = real_wrap(net, device, **kw)
        if isinstance(model, torch.nn.parallel.DistributedDataParallel):
            model.register_comm_hook(None, comm_hook)
        stats['numel'] = sum(p.numel() for p in net.parameters())
        return model

    def step_and_mark(self, batch, state=None):
        stats['comm'].append(0.0)
        return timed_step(self, batch, state)

    blocking = [None]
    real_cleanup = recipe.cleanup

    def measure_then_cleanup():
        # before the recipe leaves the process group
        buffer = torch.zeros(stats['numel'])
        times = []
        for _ in range(10):
            dist.barrier()
            tic = time.perf_counter()
            dist.all_reduce(buffer)
            times.append(time.perf_counter() - tic)
        blocking[0] = sorted(times)[len(times) // 2]
        real_cleanup()

    SSDStep.__call__ = step_and_mark
    recipe.wrap_ddp = wrap
    importlib.import_module('gluontrain.torch.step').all_reduce_mean = timed_reduce
    recipe.cleanup = measure_then_cleanup
    recipe.main(argv)
    blocking = blocking[0]
    rank = int(os.environ.get('RANK', '0'))
    ends = stats['step_end']
    # the comm hook's times accumulate into the slot opened when the step started
    comm = stats['comm'][2:len(ends) + 1]
    with open(os.path.join(out, 'rank{}.json'.format(rank)), 'w') as f:
        json.dump({'timed_s': ends[-1] - ends[0], 'timed_steps': len(ends) - 1,
                   'comm_per_step': sum(comm) / max(len(comm), 1),
                   'loss_reduce_per_step': sum(stats['loss_reduce'][1:]) /
                   max(len(stats['loss_reduce']) - 1, 1),
                   'blocking_allreduce': blocking, 'numel': stats['numel']}, f)


def launch(nproc, out, root, global_batch, steps, width):
    """``torchrun --nproc_per_node nproc`` this file as the worker; returns rank 0's stats."""
    env = dict(os.environ, OMP_NUM_THREADS='1', PYTHONPATH=REPO)
    for name in ('RANK', 'WORLD_SIZE', 'LOCAL_RANK', 'MASTER_ADDR', 'MASTER_PORT'):
        env.pop(name, None)
    os.makedirs(out, exist_ok=True)
    cmd = [sys.executable, '-m', 'torch.distributed.run', '--nnodes', '1',
           '--nproc_per_node', str(nproc), '--rdzv-backend', 'static', '--master-addr',
           '127.0.0.1', '--master-port', str(_free_port()), '--max-restarts', '0',
           os.path.abspath(__file__), '--worker', out,
           '--dataset_root', root, '--basenet', '', '--cuda', 'false',
           '--batch_size', str(global_batch), '--num_workers', '0',
           '--width_mult', str(width), '--seed', '0', '--log_interval', '0',
           '--save_interval', '0', '--max_iter', str(steps),
           '--save_folder', os.path.join(out, 'run') + '/']
    res = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if res.returncode != 0:
        raise RuntimeError('torchrun --nproc_per_node {} failed:\n{}'.format(
            nproc, (res.stdout + res.stderr)[-3000:]))
    ranks = [json.load(open(os.path.join(out, 'rank{}.json'.format(r)))) for r in range(nproc)]
    # the job is as fast as its slowest rank
    stats = max(ranks, key=lambda r: r['timed_s'])
    stats['samples_per_s'] = global_batch * stats['timed_steps'] / stats['timed_s']
    return stats


def main(argv=None):
    """Run both configurations and print the comparison."""
    if argv is None:
        argv = sys.argv[1:]
    if argv and argv[0] == '--worker':
        return worker(argv[1], argv[2:])
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--nproc', type=int, default=2)
    p.add_argument('--global-batch', type=int, default=8)
    p.add_argument('--steps', type=int, default=8)
    p.add_argument('--width-mult', type=float, default=0.25)
    p.add_argument('--repeats', type=int, default=2,
                   help='alternate 1 and N processes this many times; the fastest of each '
                        'counts (other load on a shared machine only slows a run down)')
    args = p.parse_args(argv)
    if args.global_batch % args.nproc:
        p.error('--global-batch must be a multiple of --nproc')
    from gluontrain.data import synthetic  # pylint: disable=import-outside-toplevel
    with tempfile.TemporaryDirectory() as tmp:
        root = synthetic.write_voc(os.path.join(tmp, 'data'), num_train=8, num_val=2, seed=0,
                                   classes=synthetic.DEFAULT_VOC_CLASSES,
                                   image_size=(240, 320))
        ones, manys = [], []
        for i in range(args.repeats):
            ones.append(launch(1, os.path.join(tmp, 'one{}'.format(i)), root,
                               args.global_batch, args.steps, args.width_mult))
            manys.append(launch(args.nproc, os.path.join(tmp, 'many{}'.format(i)), root,
                                args.global_batch, args.steps, args.width_mult))
        one = max(ones, key=lambda r: r['samples_per_s'])
        many = max(manys, key=lambda r: r['samples_per_s'])
        print('samples/s of every repeat: 1 process {}, {} processes {}'.format(
            ['{:.2f}'.format(r['samples_per_s']) for r in ones], args.nproc,
            ['{:.2f}'.format(r['samples_per_s']) for r in manys]))
    print('SSD300 width_mult {}, {} parameters, global batch {}, {} steps ({} timed), '
          '{} CPU cores visible, OMP_NUM_THREADS=1 per process'.format(
              args.width_mult, one['numel'], args.global_batch, args.steps,
              one['timed_steps'], os.cpu_count()))
    print('{:<34}{:>12}{:>12}'.format('', '1 process', '{} processes'.format(args.nproc)))
    print('{:<34}{:>12.2f}{:>12.2f}'.format('samples/s', one['samples_per_s'],
                                            many['samples_per_s']))
    print('{:<34}{:>12.3f}{:>12.3f}'.format('s per step', one['timed_s'] / one['timed_steps'],
                                            many['timed_s'] / many['timed_steps']))
    print('{:<34}{:>12}{:>12.4f}'.format('DDP all-reduce wall s/step', '-',
                                         many['comm_per_step']))
    print('{:<34}{:>12}{:>12.4f}'.format('blocking all-reduce of grads, s', '-',
                                         many['blocking_allreduce']))
    print('{:<34}{:>12.5f}{:>12.5f}'.format('loss all-reduce s/step',
                                            one['loss_reduce_per_step'],
                                            many['loss_reduce_per_step']))
    speedup = many['samples_per_s'] / one['samples_per_s']
    step_many = many['timed_s'] / many['timed_steps']
    print('speed-up {:.2f}x with {} processes (ideal {}x; bounded by min(processes, cores) = '
          '{}); DDP all-reduce wall time = {:.1%} of a step, blocking gradient all-reduce '
          '= {:.1%} of a step'.format(speedup, args.nproc, args.nproc,
                                      min(args.nproc, os.cpu_count() or 1),
                                      many['comm_per_step'] / step_many,
                                      many['blocking_allreduce'] / step_many))
    return 0


if __name__ == '__main__':
    sys.exit(main())
