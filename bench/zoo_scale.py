"""YOLOv3 at zoo scale: GluonCV's train pipeline on real-size JPEGs, on each backend.

Data: the project's generators at one real size, VOC-like 500 x 375 (VOC format) and
COCO-like 640 x 480 (COCO format), 2-8 objects an image (both draws fixed here). Sections:

* ``loader``: per configuration (dataset; random shapes 320-608 every 10 batches or fixed
  416 / 608; mixup; network) the MXNet and PyTorch recipes' train loaders against GluonCV's
  own (``train_yolo3.py``'s: the MXNet recipe's ``--reference-transform``). First the
  identity at ``-j 0``, same seeds: every array of the first K batches ``np.array_equal``
  (PyTorch: all but the images, within OpenCV's resize rounding). Then ``--repeats`` passes
  of each loader per ``-j``, alternating, seeded alike: medians of images/s (first batch
  excluded) and of the CPU ms per image of the main process and of the workers (/proc,
  ``RUSAGE_CHILDREN``). Images/s per worker = 1000 / the workers' CPU ms per image (``-j 0``:
  the main process's). Each network's outputs on zeros are computed once per size
  (``yolo3_pipeline.LayoutOnce``); the per-image work is unchanged.
* ``stages``: CPU ms per image of each stage of the MXNet recipe's loader, 416 px, -j 0.
* ``step``: ``gluontrain train yolo3`` as a user runs it, one child process per run, every
  batch fetch timed (``bench/recipe_runs.py``'s analysis): training images/s, the share of
  an iteration waiting for data, step median, peak memory (RSS; CUDA:
  ``max_memory_allocated``). CPU: mobilenet0.25, one short epoch, MXNet with our loader and
  GluonCV's, PyTorch. ``--device cuda``: PyTorch fp32 / ``--amp`` float16 / bfloat16.
* ``zoo``: each zoo run's hours (docs/zoo.md) beside epochs x images / rate: loader-bound
  (images/s per worker x the run's ``-j``), on CUDA training-bound (fp32 images/s x 8 GPUs,
  linear); loader cores per GPU at ``--gpu-rate`` images/s (default: docs/performance.md's
  H100 darknet53 416 px figure).

Usage: python bench/zoo_scale.py [--quick] [--device cpu|cuda] [--datasets voc,coco]
    [--shapes random,416,608] [--mixup off,on] [--networks darknet53,mobilenet1.0]
    [--backends mxnet,torch] [--workers 0,1] [--repeats 3] [--sections ...] [--out DIR]
"""
import argparse
import contextlib
import importlib
import io
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402

from gluontrain.data import shapes, synthetic  # noqa: E402

# docs/zoo.md (dmlc/web-data gluoncv/logs/detection/, recorded in tests/fixtures/zoo_logs/):
# network, dataset, epochs, training images, the run's -j, median "Training cost" s/epoch on
# 8 GPUs. (The mobilenet1.0 COCO log's first epochs took 1,100-1,175 s, issue 44's figure.)
ZOO = {'darknet53_voc': ('darknet53', 'voc', 200, 16551, 16, 560),
       'mobilenet1.0_voc': ('mobilenet1.0', 'voc', 200, 16551, 32, 141),
       'darknet53_coco': ('darknet53', 'coco', 280, 117266, 48, 2178),
       'mobilenet1.0_coco': ('mobilenet1.0', 'coco', 280, 117266, 32, 1339)}
SIZES = {'voc': (500, 375), 'coco': (640, 480)}
SIDES = ('gluoncv', 'mxnet', 'torch')
SIDES_ON = list(SIDES)
#: the PyTorch recipe's loader rebuilt with persistent workers: its dataset, sampler and
#: collate, the workers forked once (the recipe forks them every pass: 8 batches here, a
#: zoo epoch 250-1,800 per GPU)
PERSISTENT = 'torch, workers kept'


def log(msg):
    print(msg, flush=True)


def _f(v, fmt='{:.1f}'):
    return '-' if v is None else fmt.format(v)


@contextlib.contextmanager
def real_size(width, height, min_objects=2):
    """The generators at one image size, ``min_objects`` .. max objects an image."""
    size_for, count = shapes.image_size_for, shapes._count  # pylint: disable=protected-access
    shapes.image_size_for = lambda rng, image_size: (width, height)
    shapes._count = lambda rng, most: int(rng.integers(min_objects, most + 1))
    try:
        yield
    finally:
        shapes.image_size_for, shapes._count = size_for, count


def make_data(folder, datasets, images, val=4):
    roots = {}
    for name in datasets:
        w, h = SIZES[name]
        write = synthetic.write_voc if name == 'voc' else synthetic.write_coco
        with real_size(w, h):  # VOC: VOC2007 + VOC2012 trainval, as --dataset voc reads
            roots[name] = write(os.path.join(folder, name), images // (2 if name == 'voc' else 1),
                                val, seed=0, image_size=(h, w), max_objects=8)
    return roots


# ---------------------------------------------------------------------------- loaders
def recipe_args(name, root, network, shape, batch, workers, mixup, reference=False):
    from gluontrain.yolo3.args import parse_args  # pylint: disable=import-outside-toplevel
    argv = ['--network', network, '--dataset', name, '--dataset-root', root, '--gpus', '',
            '--no-pretrained-base', '--batch-size', str(batch), '-j', str(workers),
            '--data-shape', str(416 if shape == 'random' else shape),
            '--save-prefix', os.path.join(tempfile.mkdtemp(), '')]
    argv += ([] if shape == 'random' else ['--no-random-shape']) + (['--mixup'] if mixup else [])
    return parse_args(argv + (['--reference-transform', '--reference-mixup'] if reference else []))


class Loaders:
    """Builds the sides' train loaders; networks (and layouts, per size) built once."""

    def __init__(self, roots):
        self.roots, self.nets = roots, {}
        if 'torch' in SIDES_ON:
            from gluontrain.torch.yolo3 import data as tdata  # noqa: E501  pylint: disable=import-outside-toplevel
            layout, memo = tdata.network_layout, {}

            def network_layout(net, width, height):
                if (id(net), width, height) not in memo:
                    memo[id(net), width, height] = layout(net, width, height)
                return memo[id(net), width, height]
            tdata.network_layout = network_layout

    def net(self, side, name, network):
        key = (side == 'torch', name, network)
        if key not in self.nets:
            args = recipe_args(name, self.roots[name], network, 416, 1, 0, False)
            if side == 'torch':
                import torch  # pylint: disable=import-outside-toplevel
                from gluontrain.torch.yolo3 import recipe  # noqa: E501  pylint: disable=import-outside-toplevel
                self.nets[key] = recipe.get_net(args, [torch.device('cpu')])[1]
            else:
                import yolo3_pipeline  # pylint: disable=import-outside-toplevel
                self.nets[key] = yolo3_pipeline.LayoutOnce(args)
        return self.nets[key]

    def build(self, side, name, shape, mixup, network, batch, workers):
        args = recipe_args(name, self.roots[name], network, shape, batch, workers, mixup,
                           reference=side == 'gluoncv')
        data = importlib.import_module('gluontrain.{}.yolo3.data'.format(
            'torch' if side == 'torch' else 'mx'))
        with contextlib.redirect_stdout(io.StringIO()):  # pycocotools' lines
            if side == 'gluoncv' and name == 'coco':  # train_yolo3.py's own COCO reader
                from gluoncv import data as gdata  # noqa: E501  pylint: disable=import-outside-toplevel
                train = val = gdata.COCODetection(root=args.dataset_root, use_crowd=False,
                                                  splits='instances_train2017')
                train = data.MixupDetection(train) if mixup else train
            else:
                train, val, _ = data.get_dataset(name, args)
        if mixup:  # before the loader forks its workers (GluonCV's switch stays in the parent)
            train.set_mixup(np.random.beta, 1.5, 1.5)
        return data.get_dataloader(self.net(side, name, network), train, val, args.data_shape,
                                   batch, workers, args)[0]


def seeded_batches(loader, count, seed=1):
    """The first ``count`` batches at the seeds, as numpy (whole passes: a GluonCV loader
    left mid-pass breaks its workers' pipes)."""
    random.seed(seed)
    np.random.seed(seed)
    out = []
    while len(out) < count:
        for b in loader:
            if len(out) < count:
                out.append([a.asnumpy() if hasattr(a, 'asnumpy') else a.numpy() for a in b])
    return out


def identity(reference, ours, exact):
    """(equal arrays, arrays, largest image difference); any other difference raises."""
    equal = total = 0
    worst = 0.0
    for k, (r, o) in enumerate(zip(reference, ours)):
        for i, (a, b) in enumerate(zip(r, o)):
            total += 1
            if a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b):
                equal += 1
            elif exact or i != 0 or a.shape != b.shape:
                raise SystemExit('identity check FAILED: batch {} array {} differs'.format(k, i))
            else:
                worst = max(worst, float(np.abs(a - b).max()))
    return equal, total, worst


def _cpu():
    """(main, workers) CPU seconds: this process; its live children plus the joined ones."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    workers, ticks, me = usage.ru_utime + usage.ru_stime, os.sysconf('SC_CLK_TCK'), str(os.getpid())
    for pid in (p for p in os.listdir('/proc') if p.isdigit()):
        try:
            with open('/proc/{}/stat'.format(pid)) as f:
                fields = f.read().rsplit(')', 1)[1].split()
        except OSError:
            continue
        if fields[1] == me:
            workers += (int(fields[11]) + int(fields[12])) / ticks
    return sum(os.times()[:2]), workers


def one_pass(loader, seed):
    """images/s (first batch excluded), CPU ms per image of the main process and workers."""
    random.seed(seed)
    np.random.seed(seed)
    cpu0, tic, first, count = _cpu(), None, 0, 0
    for b in loader:
        if tic is None:
            tic, first = time.perf_counter(), b[0].shape[0]
        else:
            count += b[0].shape[0]
    wall, cpu1, n = time.perf_counter() - tic, _cpu(), count + first
    return count / wall, (cpu1[0] - cpu0[0]) / n * 1e3, (cpu1[1] - cpu0[1]) / n * 1e3


def same_layout(loaders, name, networks):
    """Per further network: whether its targets layout (anchors, offsets, feature maps at
    every size 320-608) is the first's, i.e. its loaders do the same work (PyTorch's)."""
    from gluontrain.torch.yolo3.data import network_layout  # noqa: E501  pylint: disable=import-outside-toplevel

    def layout(n, s):
        lay = network_layout(loaders.net('torch', name, n), s, s)
        return [np.asarray(a) for k in ('anchors', 'offsets') for a in lay[k]] + \
            [np.asarray(lay['feat_maps'])]
    first = [layout(networks[0], x * 32) for x in range(10, 20)]
    return {n: all(len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b))
                   for a, b in zip(first, (layout(n, x * 32) for x in range(10, 20))))
            for n in networks[1:]}


def section_loader(a, roots, results):
    loaders = Loaders(roots)
    rows = results.setdefault('loader', [])
    for name in a.datasets:
        shared = same_layout(loaders, name, a.networks) \
            if len(a.networks) > 1 and 'torch' in SIDES_ON else {n: False for n in a.networks[1:]}
        for n, same in shared.items():
            log('{} {}: {} targets layout as {} at every size{}'.format(
                name, n, 'the same' if same else 'NOT the same', a.networks[0],
                ' (its loaders do the same work: not timed again)' if same else ''))
        for shape in a.shapes:
            for mixup in a.mixup:
                for network in a.networks[:1] + [n for n, same in shared.items() if not same]:
                    rows.append(loader_config(a, loaders, name, shape, mixup, network))
                    write(results, a.out)


def loader_config(a, loaders, name, shape, mixup, network):
    row = {'dataset': name, 'shape': shape, 'mixup': mixup, 'network': network,
           'batch': a.batch_size, 'sides': {s: {} for s in SIDES_ON}}
    log('\n== {} {} px, mixup {}, {}, batch {}'.format(name, shape, 'on' if mixup else 'off',
                                                      network, a.batch_size))
    runs = {}
    for workers in a.workers:
        built = {s: loaders.build(s, name, shape, mixup, network, a.batch_size, workers)
                 for s in SIDES_ON}
        if workers == 0 and 'gluoncv' in built:
            ref = seeded_batches(built['gluoncv'], a.identity_batches)
            for side in SIDES_ON[1:]:
                eq, total, worst = identity(ref, seeded_batches(built[side], a.identity_batches),
                                            exact=side == 'mxnet')
                row['sides'][side]['identity'] = '{}/{} arrays equal{}'.format(
                    eq, total, '' if eq == total else ', images within {:.1e}'.format(worst))
                log('identity {}: {} to GluonCV\'s ({} batches, -j 0, same seeds)'.format(
                    side, row['sides'][side]['identity'], a.identity_batches))
        if workers and 'torch' in built:  # the recipe's loader, its workers forked once
            import torch  # pylint: disable=import-outside-toplevel
            t = built['torch']
            built[PERSISTENT] = torch.utils.data.DataLoader(
                t.dataset, batch_sampler=t.batch_sampler, collate_fn=t.collate_fn,
                num_workers=workers, persistent_workers=True)
        for rep in range(a.repeats):
            for side, loader in built.items():
                runs.setdefault((workers, side), []).append(one_pass(loader, seed=rep))
        del built
    for (workers, side), values in sorted(runs.items()):
        med = [statistics.median(v[k] for v in values) for k in range(3)]
        row['sides'].setdefault(side, {})[str(workers)] = {
            'images_per_s': med[0], 'cpu_ms_main': med[1], 'cpu_ms_workers': med[2],
            'images_per_s_per_worker': 1e3 / (med[2] if workers else med[1]), 'runs': values}
    ref = row['sides'].get('gluoncv', {})
    log('| loader | ' + ' | '.join('-j {0} images/s | -j {0} CPU ms/image main + workers | '
                                   '-j {0} images/s per worker'.format(w) for w in a.workers)
        + ' | identity |\n|---|' + '---|---|---|' * len(a.workers) + '---|')
    for side, s in row['sides'].items():
        cells = []
        for w in map(str, a.workers):
            f, r = s.get(w), ref.get(w)
            x = ['' if side == 'gluoncv' or not r or not f else ' ({:.2f}x)'.format(f[k] / r[k])
                 for k in ('images_per_s', 'images_per_s_per_worker')]
            cells.append('- | - | -' if not f else '{:.1f}{} | {:.1f} + {:.1f} | {:.1f}{}'.format(
                f['images_per_s'], x[0], f['cpu_ms_main'], f['cpu_ms_workers'],
                f['images_per_s_per_worker'], x[1]))
        log('| {} | {} | {} |'.format(side, ' | '.join(cells), s.get('identity', '')))
    return row


def section_stages(a, roots, results):
    import yolo3_pipeline  # pylint: disable=import-outside-toplevel
    name, loaders = a.datasets[0], Loaders(roots)
    spent, total, count = yolo3_pipeline.stage_times(
        lambda: loaders.build('mxnet', name, 416, False, a.networks[0], a.batch_size, 0),
        a.batch_size * 16)
    ms = {k: v / count * 1e3 for k, v in spent.items()}
    results['stages'] = {'dataset': name, 'images': count, 'ms': ms,
                         'total_ms': total / count * 1e3}
    log('\n| MXNet recipe\'s loader, {} 416 px, -j 0, {} images: stage | CPU ms per image |\n'
        '|---|---|'.format(name, count))
    for k, v in list(ms.items()) + [('the rest', total / count * 1e3 - sum(ms.values())),
                                    ('whole loader', total / count * 1e3)]:
        log('| {} | {:.2f} |'.format(k, v))


# ---------------------------------------------------------------------------- step
def child_main(events, argv):
    """One ``gluontrain train yolo3 ARGV`` with its loaders timed; the figures into EVENTS."""
    record, cuda = {}, False
    if argv[argv.index('--backend') + 1] == 'torch':
        import recipe_runs  # pylint: disable=import-outside-toplevel
        import torch  # pylint: disable=import-outside-toplevel
        recipe_runs.instrument(record)
        cuda = torch.cuda.is_available() and argv[argv.index('--gpus') + 1] != ''
    else:
        import yolo3_pipeline  # pylint: disable=import-outside-toplevel
        yolo3_pipeline.time_gluon_fetches(record)
    from gluontrain.__main__ import main  # pylint: disable=import-outside-toplevel
    tic, rc, error = time.perf_counter(), None, None
    try:
        rc = main(['train', 'yolo3'] + argv)
    except SystemExit as e:
        rc = e.code
    except Exception as e:  # pylint: disable=broad-except
        error = '{}: {}'.format(type(e).__name__, e)
    with open('/proc/self/status') as f:  # the peak since exec (ru_maxrss keeps the parent's)
        rss = next(int(line.split()[1]) for line in f if line.startswith('VmHWM')) / 1024.0
    out = {'rc': rc if rc is None or isinstance(rc, int) else str(rc), 'error': error,
           'seconds': time.perf_counter() - tic, 'events': record, 'peak_rss_mib': rss,
           'peak_mem_run': torch.cuda.max_memory_allocated() if cuda else None,
           'peak_reserved_run': torch.cuda.max_memory_reserved() if cuda else None}
    with open(events, 'w') as f:
        json.dump(out, f)
    return 0 if error is None and rc in (0, None) else 1


def step_plan(a, roots, folder):
    name = 'coco' if a.device == 'cuda' else a.datasets[0]
    runs = []
    if a.device == 'cpu':
        shape = ['--data-shape', '128', '--no-random-shape'] if a.quick else ['--data-shape',
                                                                              '416']
        for backend, label, extra in (('mxnet', 'MXNet, our loader', []),
                                      ('mxnet', 'MXNet, GluonCV\'s loader (--reference-transform)',
                                       ['--reference-transform']), ('torch', 'PyTorch', [])):
            if backend in a.backends and not (a.quick and runs):  # quick: one run
                runs.append((label, 'mobilenet0.25', ['--backend', backend, '--gpus', ''] +
                             shape + extra))
    else:
        for net in a.networks:
            for label, extra in (('fp32', []), ('--amp float16', ['--amp']),
                                 ('--amp bfloat16', ['--amp', '--amp-dtype', 'bfloat16'])):
                runs.append(('PyTorch {} {}'.format(net, label), net,
                             ['--backend', 'torch', '--gpus', '0', '--data-shape', '416'] + extra))
    return [(label, net, argv + [
        '--dataset', name, '--dataset-root', roots[name], '--no-pretrained-base', '--epochs', '1',
        '--log-interval', '0', '--save-interval', '0', '--no-plots', '--network', net,
        '--lr', '1e-4',  # from scratch, no warm-up: the default 1e-3 can go NaN in 20 steps
        '--batch-size', str(a.step_batch), '-j', str(a.step_workers),
        '--save-prefix', os.path.join(folder, 'step{}'.format(i), '')])
        for i, (label, net, argv) in enumerate(runs)]


def section_step(a, roots, results):
    import recipe_runs  # pylint: disable=import-outside-toplevel
    folder, rows = tempfile.mkdtemp(prefix='step_'), results.setdefault('step', [])
    log('\n| run | network | batch | -j | training images/s | data wait | step ms (median) | '
        'peak {} | exit |\n|---|---|---|---|---|---|---|---|---|'.format(
            'GPU MiB' if a.device == 'cuda' else 'RSS MiB'))
    for label, net, argv in step_plan(a, roots, folder):
        events = os.path.join(folder, 'events{}.json'.format(len(rows)))
        proc = subprocess.run([sys.executable, os.path.abspath(__file__), '--child', events,
                               '--'] + argv, env=dict(os.environ, MPLBACKEND='Agg'), cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False,
                              timeout=a.step_timeout)
        row = {'run': label, 'network': net, 'argv': argv, 'rc': proc.returncode}
        if os.path.exists(events):
            with open(events) as f:
                child = json.load(f)
            row.update(recipe_runs.analyse(child, warmup=2 if a.quick else 3),
                       peak_rss_mib=child['peak_rss_mib'])
        rows.append(row)
        log('| {} | {} | {} | {} | {} | {} | {} | {} | {} |'.format(
            label, net, a.step_batch, a.step_workers, _f(row.get('images_per_s')),
            _f(row.get('data_wait_fraction'), '{:.1%}'), _f(row.get('step_ms_median')),
            _f(row.get('peak_mem_train_mib' if a.device == 'cuda' else 'peak_rss_mib'),
               '{:.0f}'), row['rc']))
        if row['rc']:
            log(proc.stdout.decode('utf-8', 'replace')[-1500:])
        write(results, a.out)


# ---------------------------------------------------------------------------- zoo
def section_zoo(a, results):
    """The zoo runs' logged hours beside the projections; loader processes per GPU."""
    def rates(shape):  # (dataset, side) -> the last -j timed (mixup off)
        out = {}
        for row in results.get('loader', []):
            if row['shape'] == shape and not row['mixup']:
                for side, s in row['sides'].items():
                    w = [str(w) for w in a.workers if str(w) in s][-1:]
                    if w:
                        out[row['dataset'], side] = s[w[0]]
        return out
    shape = 'random' if 'random' in a.shapes else a.shapes[0]
    per_worker = rates(shape)
    train = {r['network']: r['images_per_s'] for r in results.get('step', [])
             if a.device == 'cuda' and r.get('images_per_s') and r['run'].endswith('fp32')}
    log('\n| zoo run | epochs x images | log: hours (median epoch) | log images/s (8 GPUs) | '
        'loader-bound hours ({} px, the run\'s -j, one core each): GluonCV / MXNet recipe / '
        'PyTorch recipe | training-bound hours (8 GPUs) |\n|---|---|---|---|---|---|'.format(
            shape))
    results['zoo'] = []
    for entry, (network, name, epochs, images, workers, epoch_s) in ZOO.items():
        bound = [None if (name, side) not in per_worker else epochs * images / (
            per_worker[name, side]['images_per_s_per_worker'] * workers) / 3600 for side in SIDES]
        hours = None if network not in train else epochs * images / (train[network] * 8) / 3600
        results['zoo'].append({'entry': entry, 'log_hours': epochs * epoch_s / 3600,
                               'loader_bound_hours': dict(zip(SIDES, bound)),
                               'train_hours': hours})
        log('| {} | {} x {:,} | {:.1f} ({:,} s) | {:.1f} | {} (-j {}) | {} |'.format(
            entry, epochs, images, epochs * epoch_s / 3600, epoch_s, images / epoch_s,
            ' / '.join(_f(h) for h in bound), workers, _f(hours)))
    shape = 416 if 416 in a.shapes else shape
    log('\nLoader cores per GPU training at {} images/s ({} px; workers\' + main process\'s '
        'CPU per image x rate):'.format(a.gpu_rate, shape))
    for (name, side), f in sorted(rates(shape).items()):
        cores = a.gpu_rate * (f['cpu_ms_workers'] + f['cpu_ms_main']) / 1e3
        results.setdefault('cores_per_gpu', {})['{} {}'.format(name, side)] = cores
        log('  {} {}: {:.1f} cores ({:.1f} images/s per worker)'.format(
            name, side, cores, f['images_per_s_per_worker']))


# ---------------------------------------------------------------------------- main
def write(results, out):
    if out:
        os.makedirs(out, exist_ok=True)
        with open(os.path.join(out, 'zoo_scale.json'), 'w') as f:
            json.dump(results, f, indent=1, default=str)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    for flag, default, what in (
            ('--device', 'cpu', 'cpu or cuda'), ('--datasets', None, 'voc,coco (cuda: coco)'),
            ('--shapes', None, 'random,416,608 (cuda: random,416)'),
            ('--mixup', None, 'off,on (cuda: off)'), ('--networks', 'darknet53,mobilenet1.0', ''),
            ('--backends', 'mxnet,torch', ''), ('--workers', '0,1', 'loader -j values timed'),
            ('--sections', 'loader,stages,step,zoo', ''), ('--out', None, 'for zoo_scale.json')):
        p.add_argument(flag, default=default, help=what)
    for flag, default, what in (
            ('--batch-size', None, 'loader batch (8; cuda 32)'), ('--repeats', 3, ''),
            ('--images', None, 'training images (64; cuda 640)'), ('--identity-batches', 12, ''),
            ('--step-batch', None, 'cpu 4, cuda 32'), ('--step-workers', None, 'cpu 1, cuda cores - 2'),
            ('--step-timeout', 600, ''), ('--gpu-rate', 218.0, 'images/s for the cores per GPU')):
        p.add_argument(flag, type=float if flag == '--gpu-rate' else int, default=default,
                       help=what)
    p.add_argument('--quick', action='store_true', help='a CPU check in well under a minute')
    a = p.parse_args(argv)
    cuda = a.device == 'cuda'
    a.datasets = a.datasets or ('coco' if cuda else 'voc,coco')
    a.shapes = a.shapes or ('random,416' if cuda else 'random,416,608')
    a.mixup = a.mixup or ('off' if cuda else 'off,on')
    if a.quick:
        a.datasets, a.shapes, a.mixup, a.networks = 'voc', '416', 'off', 'mobilenet1.0'
        a.images, a.repeats, a.identity_batches, a.sections = 16, 1, 2, 'loader,step,zoo'
    for k in ('datasets', 'shapes', 'mixup', 'networks', 'backends', 'workers', 'sections'):
        setattr(a, k, [v for v in getattr(a, k).split(',') if v])
    a.shapes = [s if s == 'random' else int(s) for s in a.shapes]
    a.mixup, a.workers = [m == 'on' for m in a.mixup], [int(w) for w in a.workers]
    a.batch_size, a.images = a.batch_size or (32 if cuda else 8), a.images or (640 if cuda else 64)
    a.step_batch = a.step_batch or (32 if cuda else 4)
    if a.step_workers is None:
        a.step_workers = max(1, (os.cpu_count() or 2) - 2) if cuda else 1
    try:
        importlib.import_module('gluontrain.mx')  # before gluoncv
    except ImportError:
        log('MXNet / GluonCV not importable: the PyTorch loader only, no GluonCV comparison')
        a.backends = [b for b in a.backends if b == 'torch']
    SIDES_ON[:] = [s for s in SIDES if s in a.backends or (s == 'gluoncv' and 'mxnet' in
                                                           a.backends)]
    with tempfile.TemporaryDirectory(prefix='zoo_scale_') as work:
        tempfile.tempdir = work  # data, loaders' and runs' files: all removed at the end
        try:
            return run(a, cuda)
        finally:
            tempfile.tempdir = None


def run(a, cuda):
    start = time.time()
    log('{} CPU threads, OMP_NUM_THREADS={}, load average {}; {}'.format(
        os.cpu_count(), os.environ.get('OMP_NUM_THREADS', 'unset'),
        ' '.join('%.1f' % x for x in os.getloadavg()), vars(a)))
    datasets = sorted(set(a.datasets) | ({'coco'} if cuda and 'step' in a.sections else set()))
    roots = make_data(tempfile.mkdtemp(prefix='data_'), datasets, a.images)
    log('data: {} training images per dataset ({}) in {:.0f} s'.format(a.images, ', '.join(
        '{} {}x{}'.format(d, *SIZES[d]) for d in datasets), time.time() - start))
    results = {'args': vars(a), 'sides': SIDES_ON}
    sections = {'loader': section_loader, 'stages': section_stages, 'step': section_step}
    for name in a.sections:
        if name == 'zoo':
            section_zoo(a, results)
        elif name != 'stages' or 'mxnet' in SIDES_ON:
            sections[name](a, roots, results)
    results['seconds'] = time.time() - start
    write(results, a.out)
    log('load average at the end: {}; {:.0f} s'.format(
        ' '.join('%.1f' % x for x in os.getloadavg()), results['seconds']))
    return 0

if __name__ == '__main__':
    if len(sys.argv) > 2 and sys.argv[1] == '--child':
        sys.exit(child_main(sys.argv[2], sys.argv[4:]))
    sys.exit(main())
