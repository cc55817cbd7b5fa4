"""Where a training run's time goes, hook by hook (issue 25, item 2): the README main job's
settings (YOLOv3 mobilenet0.25 on the embedded dataset, 64 px, batch 8, ``-j 0``, validation
every 5 epochs), timed inside one process.

    python bench/hook_costs.py [--backend mxnet|torch] [--epochs 5]

The loop is the one every recipe runs (``gluontrain.core.loop.run_loop``); the bench wraps, for
the run's duration only, the step, the loader's ``next`` and every hook method the loop calls,
and prints one markdown table: per hook and event the calls, seconds and milliseconds per
call, and, per iteration, the engine's overhead: what the hooks of ``before_batch`` /
``after_batch`` and the loop's own bookkeeping cost beside the step (forward, loss, backward,
update). The per-epoch hooks (validation, checkpoints, curves and sample pictures, metrics)
are shown beside the whole run. Wall seconds of ``time.perf_counter``; one process on one
thread (``OMP_NUM_THREADS=1``), so the figures are also CPU seconds on a quiet machine.
"""
import argparse
import collections
import os
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README_JOB = ['--network', 'mobilenet0.25', '--dataset', 'synthetic', '--classes', 'car,dog',
              '--gpus', '', '--no-pretrained-base', '--batch-size', '8', '-j', '0',
              '--data-shape', '64', '--no-random-shape', '--lr', '0.004', '--wd', '5e-5',
              '--warmup-epochs', '3',
              '--lr-decay-epoch', '25', '--log-interval', '0', '--val-interval', '5',
              '--save-interval', '0']
PER_ITERATION = ('before_batch', 'after_batch')


class Timings:
    """Seconds and calls per key, and the wrappers that collect them."""

    def __init__(self):
        self.seconds = collections.defaultdict(float)
        self.calls = collections.Counter()

    def add(self, key, seconds):
        """Count one call of ``key`` that took ``seconds``."""
        self.seconds[key] += seconds
        self.calls[key] += 1

    def fire(self, hooks, event, state):
        """``gluontrain.core.loop._fire`` with each hook's call timed."""
        for hook in hooks:
            tic = time.perf_counter()
            getattr(hook, event)(state)
            self.add((type(hook).__name__, event), time.perf_counter() - tic)
        return state.should_stop

    def loop(self, run_loop):
        """``run_loop`` with its step and its loader's ``next`` timed."""
        timings = self

        def step_timed(step):
            def call(batch, state):
                tic = time.perf_counter()
                out = step(batch, state)
                timings.add(('step', 'forward/backward/update'), time.perf_counter() - tic)
                return out
            return call

        class Loader:
            def __init__(self, data):
                self.data = data

            def __len__(self):
                return len(self.data)

            def __iter__(self):
                it = iter(self.data)
                while True:
                    tic = time.perf_counter()
                    try:
                        batch = next(it)
                    except StopIteration:
                        return
                    timings.add(('data', 'next batch'), time.perf_counter() - tic)
                    yield batch

        def wrapped(step, train_data, hooks, *args, **kwargs):
            tic = time.perf_counter()
            try:
                return run_loop(step_timed(step), Loader(train_data), hooks, *args, **kwargs)
            finally:
                timings.add(('loop', 'whole run_loop'), time.perf_counter() - tic)
        return wrapped


def table(t):
    """The markdown table of :class:`Timings` ``t`` and the overhead line."""
    step = t.seconds[('step', 'forward/backward/update')]
    iters = t.calls[('step', 'forward/backward/update')]
    whole = t.seconds[('loop', 'whole run_loop')]
    rows = ['| what | event | calls | seconds | ms per call | % of the steps |',
            '|---|---|---|---|---|---|']
    small = [k for k in t.seconds if k[0] != 'loop' and t.seconds[k] < 0.001]
    for key in sorted(t.seconds, key=lambda k: -t.seconds[k]):
        if key[0] == 'loop' or key in small:
            continue
        sec, n = t.seconds[key], t.calls[key]
        rows.append('| {} | {} | {} | {:.3f} | {:.2f} | {:.2f} |'.format(
            key[0], key[1], n, sec, 1000 * sec / n, 100 * sec / step))
    sec = sum(t.seconds[k] for k in small)
    rows.append('| {} other hook methods (under 1 ms each in all) | | {} | {:.3f} | | {:.2f} |'
                .format(len(small), sum(t.calls[k] for k in small), sec, 100 * sec / step))
    hooks_per_iter = sum(s for k, s in t.seconds.items() if k[1] in PER_ITERATION)
    accounted = sum(s for k, s in t.seconds.items() if k[0] != 'loop')
    bookkeeping = whole - accounted  # the loop's own lines between the timed calls
    per_epoch = sum(s for k, s in t.seconds.items()
                    if k[0] not in ('loop', 'step', 'data') and k[1] not in PER_ITERATION)
    rows.append('')
    rows.append('{} iterations; run_loop {:.2f} s: steps {:.2f} s, data {:.2f} s, hooks of '
                'every iteration {:.3f} s, loop bookkeeping {:.3f} s, hooks of epochs and the run '
                '{:.2f} s'.format(iters, whole, step, t.seconds[('data', 'next batch')],
                                  hooks_per_iter, bookkeeping, per_epoch))
    rows.append('engine overhead per iteration (hooks of every iteration + bookkeeping) / '
                'step: {:.2f} %'.format(100 * (hooks_per_iter + bookkeeping) / step))
    return '\n'.join(rows)


def main(argv=None):
    """Run the README main job for ``--epochs`` with the loop timed; print the table."""
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('--backend', choices=('mxnet', 'torch'), default='mxnet')
    p.add_argument('--epochs', type=int, default=5)
    args = p.parse_args(argv)
    sys.path.insert(0, ROOT)
    # pylint: disable=import-outside-toplevel
    from gluontrain.core import loop
    if args.backend == 'mxnet':
        from gluontrain.mx.yolo3 import recipe
    else:
        from gluontrain.torch.yolo3 import recipe
    timings = Timings()
    saved_fire, saved_loop = loop._fire, recipe.run_loop
    loop._fire, recipe.run_loop = timings.fire, timings.loop(saved_loop)
    try:
        with tempfile.TemporaryDirectory(prefix='hook_costs_') as tmp:
            recipe.main(README_JOB + ['--epochs', str(args.epochs), '--backend', args.backend,
                                      '--save-prefix', os.path.join(tmp, 'run') + os.sep])
    finally:
        loop._fire, recipe.run_loop = saved_fire, saved_loop
    print('\n## {} backend, {} epochs of the README main job\n'.format(args.backend,
                                                                       args.epochs))
    print(table(timings))
    return 0


if __name__ == '__main__':
    sys.exit(main())
