"""Time the YOLOv3 pipeline on this machine and print a table.

Measures, on generated VOC data (500x375 images, as VOC's):
  * identity first: gluontrain's FastYOLO3TrainTransform and GluonCV's YOLO3DefaultTrainTransform
    give equal arrays (np.array_equal) on every sample with the same seeds; the targets alone
    (FastYOLOV3TargetGenerator vs YOLOV3PrefetchTargetGenerator) likewise;
  * targets per sample, ours vs GluonCV's, on the same boxes (the ratio);
  * the full train transform per sample, ours vs GluonCV's, on the same samples (the ratio);
  * the recipe's random-shape train loader, ours vs --reference-transform: the batches of both
    at -j 0 with the same seeds equal (np.array_equal, every array of every batch), then the
    throughput (images/s) with -j 0 and -j 2 and the CPU time per image of the main process
    and its workers (steadier than images/s where other jobs share the cores), the two
    loaders alternating, median of ``--repeats`` runs each (the load average is printed);
  * the CPU time per image of each stage of our loader at -j 0 (decode, colour, crop, ...);
  * forward+backward+update per step (YOLOv3Step) for mobilenet0.25 and darknet53,
  * the cost gluontrain's loop and per-batch hooks add: steps through ``run_loop`` divided by
    bare ``YOLOv3Step`` calls on the same batches (the reference's loop body is those calls),
  * the full checkpoint gluontrain writes once per epoch.

Usage: python bench/yolo3_pipeline.py [--data-shape 320] [--batch-size 4] [--steps 3]
       [--networks mobilenet0.25,darknet53] [--samples 20] [--loader-batches 20]
       [--workers 0,2] [--repeats 3] [--parts transform,loader,stages,steps]
"""
import argparse
import os
import random
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))

import mxnet as mx  # noqa: E402
import numpy as np  # noqa: E402

from gluontrain.data import synthetic  # noqa: E402
from gluontrain.core.hooks import LogHook, LossMeterHook, NaNGuardHook, ProgressHook  # noqa: E402
from gluontrain.core.loop import run_loop  # noqa: E402
from gluontrain.core.meters import LossMeter  # noqa: E402
from gluontrain.mx.yolo3 import get_dataloader, get_dataset, get_net, parse_args  # noqa: E402
from gluontrain.mx.yolo3.data import YOLO3DefaultTrainTransform  # noqa: E402
from gluontrain.mx.yolo3.fast_transform import FastYOLO3TrainTransform  # noqa: E402
from gluontrain.mx.yolo3.recipe import save_checkpoint  # noqa: E402
from gluontrain.mx.yolo3.step import LOSS_NAMES, YOLOv3Step  # noqa: E402


def _args(root, network, shape, batch, prefix, epochs=1):
    return parse_args(['--network', network, '--dataset', 'voc', '--dataset-root', root,
                       '--no-pretrained-base', '--gpus', '', '--batch-size', str(batch), '-j', '0',
                       '--data-shape', str(shape), '--no-random-shape', '--epochs', str(epochs),
                       '--log-interval', '0', '--save-prefix', prefix, '--save-interval', '0'])


def _mx_outputs(args, queue):
    """In a forked child (MXNet's CPU memory pool keeps every activation size it has
    allocated: ten sizes of darknet53 are gigabytes): the classes and the train-mode outputs
    GluonCV's transform reads (anchors, offsets, feature maps) at every size 320-608."""
    net, out = get_net(args, [mx.cpu()])[1], {}
    with mx.autograd.train_mode():
        for side in range(320, 609, 32):
            got = net(mx.nd.zeros((1, 3, side, side)))
            out[side, side] = [[a.asnumpy() for a in got[k]] for k in (1, 2, 3)]
    queue.put((list(net.classes), out))


class LayoutOnce:
    """The MXNet network as GluonCV's train transform reads it: ``classes``, parameters on
    the CPU, the outputs on zeros (computed once per size, in a child process), for building
    many loaders of one network (``bench/zoo_scale.py``)."""

    class Params(dict):
        def reset_ctx(self, ctx):
            pass

    def __init__(self, args):
        import multiprocessing  # pylint: disable=import-outside-toplevel
        queue = multiprocessing.get_context('fork').SimpleQueue()
        child = multiprocessing.get_context('fork').Process(target=_mx_outputs,
                                                            args=(args, queue))
        child.start()
        self.classes, outputs = queue.get()
        child.join()
        self.outputs = {k: [None] + [[mx.nd.array(a, dtype=a.dtype) for a in v] for v in vs] +
                        [None] * 4 for k, vs in outputs.items()}
        param = type('Param', (), {'list_ctx': lambda self: [mx.cpu()]})()
        self.params = self.Params(p=param)

    def collect_params(self):
        return self.params

    def __call__(self, x):
        return self.outputs[x.shape[2:]]


def time_transform(root, shape, n):
    args = _args(root, 'mobilenet0.25', shape, 1, os.path.join(tempfile.mkdtemp(), ''))
    train_ds, _, _ = get_dataset('voc', args)
    net, _ = get_net(args, [mx.cpu()])
    t = FastYOLO3TrainTransform(shape, shape, net)
    samples = [train_ds[i % len(train_ds)] for i in range(n)]
    t(*samples[0])  # warm-up
    tic = time.perf_counter()
    for img, label in samples:
        t(img, label)
    return (time.perf_counter() - tic) / n


def _seeded(fn, seed, *args):
    random.seed(seed)
    np.random.seed(seed)
    return fn(*args)


def _numpy(outputs):
    return [o.asnumpy() if hasattr(o, 'asnumpy') else o for o in outputs]


def compare_transforms(root, shape, n):
    """Identity checks, then ms/sample of GluonCV's and our targets and full transforms."""
    args = _args(root, 'mobilenet0.25', shape, 1, os.path.join(tempfile.mkdtemp(), ''))
    train_ds, _, _ = get_dataset('voc', args)
    net, _ = get_net(args, [mx.cpu()])
    ref, ours = YOLO3DefaultTrainTransform(shape, shape, net), \
        FastYOLO3TrainTransform(shape, shape, net)
    samples = [train_ds[i % len(train_ds)] for i in range(n)]
    boxes = []
    for i, (img, label) in enumerate(samples):
        r, o = _numpy(_seeded(ref, i, img, label)), _seeded(ours, i, img, label)
        if not all(a.dtype == b.dtype and np.array_equal(a, b) for a, b in zip(r, o)):
            raise SystemExit('identity check FAILED: transform outputs differ on sample %d' % i)
        boxes.append(r[-1])
    # the targets alone, on the boxes the transform produced
    gen_ref = ref._target_generator  # pylint: disable=protected-access
    gen_ours = ours._numpy.targets  # pylint: disable=protected-access
    feats, anchors, offsets = ref._feat_maps, ref._anchors, ref._offsets
    fake = mx.nd.zeros((1, 3, shape, shape))
    nd_boxes = [(mx.nd.array(b[None]), mx.nd.array(np.zeros((1, len(b), 1)))) for b in boxes]

    def run_ref():
        return [[t[0].asnumpy() for t in gen_ref(fake, feats, anchors, offsets, b, c)]
                for b, c in nd_boxes]

    def run_ours():
        return [gen_ours(b, np.zeros((len(b), 1), np.float32)) for b in boxes]

    for r, o in zip(run_ref(), run_ours()):
        if not all(np.array_equal(a, b) for a, b in zip(r, o)):
            raise SystemExit('identity check FAILED: targets differ')
    # wall and CPU (process) time: on a shared machine the CPU time is the steadier one
    times = {}
    for name, fn in (('targets_ref', run_ref), ('targets_ours', run_ours)):
        tic, cpu = time.perf_counter(), time.process_time()
        fn()
        times[name] = ((time.perf_counter() - tic) / n, (time.process_time() - cpu) / n)
    for name, t in (('transform_ref', ref), ('transform_ours', ours)):
        tic, cpu = time.perf_counter(), time.process_time()
        for i, (img, label) in enumerate(samples):
            _seeded(t, i, img, label)
        times[name] = ((time.perf_counter() - tic) / n, (time.process_time() - cpu) / n)
    return times


def _loader(root, shape, batch, workers, reference):
    """The recipe's random-shape train loader (ours, or with --reference-transform)."""
    argv = ['--network', 'mobilenet0.25', '--dataset', 'voc', '--dataset-root', root,
            '--no-pretrained-base', '--gpus', '', '--batch-size', str(batch),
            '-j', str(workers), '--data-shape', str(shape),
            '--save-prefix', os.path.join(tempfile.mkdtemp(), '')]
    args = parse_args(argv + (['--reference-transform'] if reference else []))
    train_ds, val_ds, _ = get_dataset('voc', args)
    _, async_net = get_net(args, [mx.cpu()])
    return get_dataloader(async_net, train_ds, val_ds, shape, batch, workers, args)[0]


def loader_identity(root, shape, batch, batches):
    """-j 0, the same seeds: every array of the first ``batches`` batches (shape changes
    every 10) of ours and the reference loader equal. Returns the number of arrays compared."""
    out = []
    for reference in (True, False):
        loader = _loader(root, shape, batch, 0, reference)
        random.seed(1)
        np.random.seed(1)
        arrays = []
        while len(arrays) < batches:
            arrays += [[a.asnumpy() for a in b] for b in loader][:batches - len(arrays)]
        out.append(arrays)
    count = 0
    for k, (ref, ours) in enumerate(zip(*out)):
        for r, o in zip(ref, ours):
            if not (r.dtype == o.dtype and r.shape == o.shape and np.array_equal(r, o)):
                raise SystemExit('identity check FAILED: loader batch %d differs' % k)
            count += 1
    return count


def _cpu_seconds():
    """CPU seconds (user + system) of this process and its children alive now (the loader's
    worker pool), from /proc; None where there is no /proc."""
    ticks = os.sysconf('SC_CLK_TCK')
    total, me, found = 0.0, str(os.getpid()), False
    try:
        pids = [p for p in os.listdir('/proc') if p.isdigit()]
    except OSError:
        return None
    for pid in pids:
        try:
            with open('/proc/{}/stat'.format(pid)) as f:
                fields = f.read().rsplit(')', 1)[1].split()
        except OSError:
            continue
        if pid == me or fields[1] == me:  # fields[1]: the parent's pid
            total += (int(fields[11]) + int(fields[12])) / ticks
            found |= pid == me
    return total if found else None


def loader_throughput(root, shape, batch, workers, batches, reference):
    """Images/s through the recipe's random-shape train loader (transforms + batchify), and
    the CPU milliseconds per image of the main process and its workers (None without /proc)."""
    train_data = _loader(root, shape, batch, workers, reference)
    # whole epochs only: abandoning a GluonCV loader mid-epoch breaks its workers' pipes
    tic, count, cpu = None, 0, None
    while count < batch * batches:
        for b in train_data:
            if tic is None:
                # worker start-up and the first batch excluded
                tic, cpu = time.perf_counter(), _cpu_seconds()
                continue
            count += b[0].shape[0]
    wall, end = time.perf_counter() - tic, _cpu_seconds()
    return count / wall, (None if cpu is None or end is None else (end - cpu) / count * 1e3)


# what the default loader's time per image is spent on: (name, module, attribute) patched
# with a CPU timer before the loader is built (the transforms bind the resize when built)
_STAGES = (('decode (cv2)', 'gluontrain.mx.yolo3.data', 'imread_rgb'),
           ('colour distortion', 'gluontrain.yolo3.transform', 'random_color_distort'),
           ('constrained crop (draws + IoU)', 'gluontrain.yolo3.transform',
            'random_crop_with_constraints'),
           ('expansion window', 'gluontrain.yolo3.transform', '_expanded_window'),
           ('resize (MXNet OpenCV)', 'gluontrain.mx.yolo3.fast_transform', '_imresize'),
           ('to_tensor + normalize', 'gluontrain.yolo3.transform', 'to_chw'),
           ('targets', 'gluontrain.yolo3.targets', 'FastYOLOV3TargetGenerator.__call__'),
           ('batchify', 'gluontrain.mx.yolo3.batchify', 'TrainBatchify.__call__'))


def stage_times(make_loader, images):
    """CPU seconds of each of ``_STAGES`` over whole passes of ``make_loader()`` (built after
    the timers are in place) until ``images`` have passed; returns (spent by stage name, the
    loader's whole CPU seconds, images)."""
    import importlib  # pylint: disable=import-outside-toplevel
    spent, restore = {}, []

    def timed(name, fn):
        def wrapper(*args, **kwargs):
            tic = time.process_time()
            try:
                return fn(*args, **kwargs)
            finally:
                spent[name] = spent.get(name, 0.0) + time.process_time() - tic
        return wrapper

    for name, module, attr in _STAGES:
        owner = importlib.import_module(module)
        if '.' in attr:
            cls, attr = attr.split('.')
            owner = getattr(owner, cls)
        restore.append((owner, attr, owner.__dict__[attr]))
        setattr(owner, attr, timed(name, owner.__dict__[attr]))
    try:
        loader = make_loader()
        tic, count = time.process_time(), 0
        while count < images:
            count += sum(b[0].shape[0] for b in loader)
        total = time.process_time() - tic
    finally:
        for owner, attr, fn in restore:
            setattr(owner, attr, fn)
    return {name: spent.get(name, 0.0) for name, _, _ in _STAGES}, total, count


def loader_stages(root, a):
    """CPU ms per image of each stage of the default loader at -j 0 (random shapes)."""
    spent, total, count = stage_times(
        lambda: _loader(root, a.data_shape, a.batch_size, 0, False),
        a.batch_size * a.loader_batches)
    print('\n| default loader, -j 0, {} images: stage | CPU ms per image |\n|---|---|'.format(
        count))
    for name, _, _ in _STAGES:
        print('| {} | {:.2f} |'.format(name, spent[name] / count * 1e3))
    print('| the rest (sampler, bookkeeping, box operations, flip) | {:.2f} |'.format(
        (total - sum(spent.values())) / count * 1e3))
    print('| whole loader | {:.2f} |'.format(total / count * 1e3))


def time_gluon_fetches(record):
    """Time every batch fetch of Gluon's DataLoader and GluonCV's random-shape loader into
    ``record``, in ``bench/recipe_runs.py``'s event format (``bench/zoo_scale.py``'s step)."""
    from gluoncv.data.dataloader import RandomTransformDataLoader  # noqa: E501  pylint: disable=import-outside-toplevel
    for cls in (mx.gluon.data.DataLoader, RandomTransformDataLoader):
        def timed_iter(self, original=cls.__iter__):
            events = record.setdefault('gluon@{}'.format(id(self)), {}).setdefault(
                str(time.perf_counter()), [])
            it = original(self)
            while True:
                tic = time.perf_counter()
                try:
                    batch = next(it)
                except StopIteration:
                    return
                events.append((tic, time.perf_counter(), int(batch[0].shape[0]), 0))
                yield batch
        cls.__iter__ = timed_iter


def loader_table(root, a):
    """Median images/s (and CPU ms per image) of both loaders per -j value, the runs
    alternating."""
    runs = {}
    for _ in range(a.repeats):
        for workers in [int(w) for w in a.workers.split(',') if w != '']:
            for reference in (True, False):
                runs.setdefault((workers, reference), []).append(loader_throughput(
                    root, a.data_shape, a.batch_size, workers, a.loader_batches, reference))
    for workers in sorted({w for w, _ in runs}):
        ref, ours = ([np.median([np.nan if r[k] is None else r[k] for r in runs[workers, side]])
                      for k in (0, 1)] for side in (True, False))
        print('| train loader -j {} random shapes, batch {} (images/s, median of {}) | {:.1f} | '
              '{:.1f} | {:.2f}x |'.format(workers, a.batch_size, a.repeats, ref[0], ours[0],
                                          ours[0] / ref[0]))
        if not np.isnan(ref[1]) and not np.isnan(ours[1]):
            print('| train loader -j {}: CPU ms per image, main process + workers (median) | '
                  '{:.1f} | {:.1f} | {:.2f}x |'.format(workers, ref[1], ours[1], ref[1] / ours[1]))
    for (workers, reference), values in sorted(runs.items()):
        print('<!-- -j {} {}: images/s {}; CPU ms/image {} -->'.format(
            workers, 'GluonCV' if reference else 'gluontrain',
            ' '.join('%.1f' % v[0] for v in values),
            ' '.join('%.1f' % v[1] if v[1] is not None else 'n/a' for v in values)))


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
    p.add_argument('--loader-batches', type=int, default=20)
    p.add_argument('--workers', default='0,2', help='loader -j values to time')
    p.add_argument('--repeats', type=int, default=3, help='loader runs per -j value and side')
    p.add_argument('--parts', default='transform,loader,stages,steps',
                   help='what to time: transform (targets and transform ratios), loader, '
                        'stages (the default loader per stage), steps (step, loop overhead, '
                        'checkpoint)')
    a = p.parse_args()
    parts = set(a.parts.split(','))
    root = synthetic.write_voc(tempfile.mkdtemp(), num_train=32, num_val=4, seed=0,
                               image_size=(375, 500))
    print('machine: {} CPU threads (OMP_NUM_THREADS={}), mxnet {}, load average {}'.format(
        os.cpu_count(), os.environ.get('OMP_NUM_THREADS', 'unset'), mx.__version__,
        ' '.join('%.1f' % x for x in os.getloadavg())))
    if 'transform' in parts:
        times = compare_transforms(root, a.data_shape, a.samples)
        print('identity: transform and targets arrays equal to GluonCV on all {} samples'.format(
            a.samples))
    if 'loader' in parts:
        print('identity: {} loader arrays (12 batches, -j 0, same seeds) equal to GluonCV\'s'
              .format(loader_identity(root, a.data_shape, a.batch_size, 12)))
    print('\n| measurement | GluonCV | gluontrain | ratio |\n|---|---|---|---|')
    if 'transform' in parts:
        for what in ('targets', 'transform'):
            ref, ours = times[what + '_ref'], times[what + '_ours']
            label = 'targets only' if what == 'targets' else 'full train transform + targets'
            for k, clock in enumerate(('wall', 'CPU')):
                print('| {} @{} ({} ms/sample) | {:.1f} | {:.1f} | {:.1f}x |'.format(
                    label, a.data_shape, clock, ref[k] * 1e3, ours[k] * 1e3, ref[k] / ours[k]))
    if 'loader' in parts:
        loader_table(root, a)
    if 'stages' in parts:
        loader_stages(root, a)
    print('load average at the end: {}'.format(' '.join('%.1f' % x for x in os.getloadavg())))
    if 'steps' not in parts:
        return
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
