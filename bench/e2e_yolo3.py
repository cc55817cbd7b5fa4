"""The whole YOLOv3 run beside GluonCV's own ``train_yolo3.py`` (issues 24 and 25): CPU time,
wall time and peak memory of each process, pair by pair, after checking that the logged
losses agree.

    GLUONTRAIN_REFERENCES=DIR python bench/e2e_yolo3.py [--pairs 3] [--backends mxnet,torch]
        [--backends mxnet,mxnet+no-plots,torch,torch+no-plots]

Each pair runs, one after the other and each in its own child process: GluonCV's script from
the ``gluon-cv`` checkout in ``GLUONTRAIN_REFERENCES`` (run as ``tests/mx/yolo3/test_faithful.py``
runs it: torch hidden from gluoncv's probe, ``pretrained_base=False``, the data where it looks
for VOC), then ``scripts/train_yolov3.py`` with the same arguments on each ``--backend``
(and ``--no-pretrained-base``, what the runner forces on GluonCV's side). All
start from one ``.params`` file drawn as Gluon's ``initialize()`` draws (``--resume``), under
the pinned environment of the faithfulness test (one thread, MKL-DNN off). The settings
(``--settings``) are issue 25's: mobilenet0.25, 320 px, batch 4, 2 epochs, ``-j 0``, no random
shape, validation and weights every epoch; or README command (a)'s, the main job (``readme``:
64 px, batch 8, 30 epochs, validation every 5, no batch logged, so the end-of-epoch losses are
compared) on data generated as the embedded set is (its five classes are VOC names; both
sides read VOC's 20).

Before any timing counts, every run must log GluonCV's batches, and on MXNet the losses of
every batch equal to the last printed digit. On PyTorch the first batch's losses are compared
(printed as the largest relative difference): its float32 kernels differ from MXNet's, and
from the first update on this from-scratch start drifts as PyTorch float32 drifts from
float64 (docs/faithfulness.md, "YOLOv3 on PyTorch"). Prints a markdown table: per backend the
median over the pairs of ours / GluonCV's CPU time (user + system), wall time and peak
resident memory (``ru_maxrss`` of the child).
"""
import argparse
import importlib.util
import os
import re
import statistics
import sys
import tempfile

from child_usage import timed  # bench/child_usage.py

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LOSSES = re.compile(r'\[Epoch (\d+)\]\[Batch (\d+)\].*ObjLoss=(\S+), BoxCenterLoss=(\S+), '
                    r'BoxScaleLoss=(\S+), ClassLoss=(\S+)')
# The end-of-epoch line (the README job logs no batch: --log-interval 0); batch -1 there.
EPOCH_LOSSES = re.compile(r'\[Epoch (\d+)\] Training cost: \S+, ObjLoss=(\S+), '
                          r'BoxCenterLoss=(\S+), BoxScaleLoss=(\S+), ClassLoss=(\S+)')
# Issue 25's settings, and README command (a)'s (the main job) on data of the embedded set's
# kind: 100 + 100 trainval and 50 test images of 160-256 px, the same five VOC classes (GluonCV's
# script reads VOC's 20, so both sides build the 20-class head of `--dataset voc`).
SETTINGS = {
    'issue25': ['--batch-size', '4', '--data-shape', '320', '--val-interval', '1',
                '--save-interval', '1', '--log-interval', '1'],
    'readme': ['--batch-size', '8', '--data-shape', '64', '--lr', '0.004', '--warmup-epochs', '3',
               '--lr-decay-epoch', '25', '--log-interval', '0', '--val-interval', '5',
               '--save-interval', '0'],
}
NETWORK = 'mobilenet0.25'


def _logs_recorder():
    """``tests/fixtures/make_yolo3_logs.py``: GluonCV's runner, script path and pinned env."""
    path = os.path.join(ROOT, 'tests', 'fixtures', 'make_yolo3_logs.py')
    spec = importlib.util.spec_from_file_location('make_yolo3_logs', path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def initial_params(path, seed=0):
    """Write Gluon's default initialisation of the VOC mobilenet0.25 YOLOv3 to ``path``."""
    sys.path.insert(0, ROOT)
    # pylint: disable=import-outside-toplevel
    from gluontrain.core import mxparams
    from gluontrain.torch.yolo3.model import get_yolov3
    from gluontrain.torch.yolo3.weights import gluon_arrays
    from gluontrain.yolo3.init_weights import gluon_default_arrays
    arrays = gluon_arrays(get_yolov3('yolo3_{}_voc'.format(NETWORK)))
    constants = {k: v for k, v in arrays.items() if k.endswith(('.anchors', '.offsets'))}
    mxparams.write_params(path, gluon_default_arrays(
        {k: v.shape for k, v in arrays.items()}, constants, seed))


def losses(log_file):
    """``[(epoch, batch, (obj, center, scale, class) as printed)]`` of a train log: its batch
    lines, or its end-of-epoch lines (batch -1) when it logged no batch."""
    with open(log_file) as f:
        lines = f.readlines()
    batches = [(int(m.group(1)), int(m.group(2)), m.groups()[2:])
               for m in map(LOSSES.search, lines) if m]
    return batches or [(int(m.group(1)), -1, m.groups()[1:])
                       for m in map(EPOCH_LOSSES.search, lines) if m]


def check_losses(ref, ours, backend):
    """Refuse a run that did not log GluonCV's batches, or (MXNet) not its losses to the
    printed digit; returns the largest relative difference of the first batch's losses."""
    if [r[:2] for r in ref] != [o[:2] for o in ours] or not ref:
        raise SystemExit('{}: logged batches differ from GluonCV\'s'.format(backend))
    if backend == 'mxnet' and [o[2] for o in ours] != [r[2] for r in ref]:
        first = next(i for i, (o, r) in enumerate(zip(ours, ref)) if o[2] != r[2])
        raise SystemExit('mxnet: losses differ from GluonCV\'s from epoch {} batch {} on '
                         '({} vs {})'.format(*ours[first][:2], ours[first][2], ref[first][2]))
    return max(abs(float(a) - float(b)) / abs(float(b)) for a, b in zip(ours[0][2], ref[0][2]))


def main(argv=None):
    """Command line; prints the table."""
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('--pairs', type=int, default=3)
    p.add_argument('--backends', default='mxnet,torch',
                   help="comma-separated; a backend followed by '+no-plots' runs ours with "
                   '--no-plots too (the same work as GluonCV\'s script, which draws nothing)')
    p.add_argument('--settings', choices=sorted(SETTINGS), default='issue25',
                   help='issue25: 320 px, batch 4, validation and weights every epoch, VOC-like '
                        '300-500 px images; readme: README command (a), the main job (64 px, '
                        'batch 8, 30 epochs, validation every 5) on the embedded set\'s kind '
                        'of data')
    p.add_argument('--epochs', type=int, help='default 2 (issue25), 30 (readme)')
    p.add_argument('--num-train', type=int, help='trainval images per year; default 32 '
                   '(issue25), 100 (readme)')
    args = p.parse_args(argv)
    readme = args.settings == 'readme'
    epochs = args.epochs or (30 if readme else 2)
    refs = os.environ.get('GLUONTRAIN_REFERENCES')
    logs = _logs_recorder()
    script = os.path.join(refs or '', logs.SCRIPT)
    if not os.path.isfile(script):
        raise SystemExit('needs GluonCV\'s {} : set GLUONTRAIN_REFERENCES to the folder holding '
                         'the gluon-cv checkout (docs/testing.md)'.format(logs.SCRIPT))
    common = ['--network', NETWORK, '--dataset', 'voc', '--gpus', '', '-j', '0',
              '--no-random-shape', '--epochs', str(epochs)] + SETTINGS[args.settings]
    backends = [b for b in args.backends.split(',') if b]
    rows = {b: [] for b in backends}
    with tempfile.TemporaryDirectory() as work:
        sys.path.insert(0, ROOT)
        from gluontrain.data import synthetic  # pylint: disable=import-outside-toplevel
        if readme:
            data = synthetic.write_voc(os.path.join(work, 'data'), **dict(
                synthetic.DEFAULT_VOC_PARAMS, num_train=args.num_train or 100))
        else:
            data = synthetic.write_voc(os.path.join(work, 'data'), num_train=args.num_train or 32,
                                       num_val=16, seed=0, years=(2007, 2012), classes=None,
                                       image_size=(300, 500), max_objects=8)
        datasets = os.path.join(work, 'home', '.mxnet', 'datasets')
        os.makedirs(datasets)
        os.symlink(data, os.path.join(datasets, 'voc'))
        init = os.path.join(work, 'init.params')
        initial_params(init)
        env = dict(os.environ, HOME=os.path.join(work, 'home'), **logs.pinned_env())
        env.pop('PYTHONPATH', None)
        ours_env = dict(env, PYTHONPATH=ROOT)
        log_name = 'yolo3_{}_voc_train.log'.format(NETWORK)
        for pair in range(args.pairs):
            run = os.path.join(work, 'gluoncv{}'.format(pair))
            os.makedirs(run)
            ref, _ = timed([sys.executable, '-c', logs.RUNNER, script] + common +
                        ['--resume', init, '--save-prefix', 'out/'], run, env)
            ref_losses = losses(os.path.join(run, 'out', log_name))
            for backend in backends:
                run = os.path.join(work, '{}{}'.format(backend, pair))
                os.makedirs(run)
                # 'mxnet+no-plots': the same run without its pictures (GluonCV draws none)
                name, _, variant = backend.partition('+')
                ours, _ = timed([sys.executable, os.path.join(ROOT, 'scripts', 'train_yolov3.py'),
                              '--backend', name, '--no-pretrained-base'] + common +
                             ['--dataset-root', data, '--resume', init, '--save-prefix', 'out/'] +
                             (['--' + variant] if variant else []), run, ours_env)
                worst = check_losses(ref_losses, losses(os.path.join(run, 'out', log_name)),
                                     name)
                rows[backend].append((ref, ours, worst, len(ref_losses)))
                print('pair {} {}: GluonCV {:.1f} s CPU {:.1f} s wall {:.0f} MiB; ours {:.1f} s '
                      'CPU {:.1f} s wall {:.0f} MiB; first batch losses max rel diff {:.1e}'.format(
                          pair, backend, *ref, *ours, worst), flush=True)
    print('\n| backend | batches | CPU ours / GluonCV | wall | peak RSS ours / GluonCV (MiB) |')
    print('|---|---|---|---|---|')
    for backend, pairs in rows.items():
        cpu, wall, rss = (statistics.median(o[i] / r[i] for r, o, _, _ in pairs)
                          for i in range(3))
        print('| {} | {} | {:.2f}x | {:.2f}x | {:.0f} / {:.0f} ({:.2f}x) |'.format(
            backend, pairs[0][3], cpu, wall, statistics.median(o[2] for _, o, _, _ in pairs),
            statistics.median(r[2] for r, _, _, _ in pairs), rss))


if __name__ == '__main__':
    main()
