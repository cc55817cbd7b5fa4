"""Every PyTorch recipe on one device, as a user runs it, in one go: images/s, time waiting
for data, peak GPU memory, AMP off and on; then the ops against torchvision's compiled ones and
the test-suite tests with CUDA branches.

Sections (each in its own try/except, skipped once the wall-clock ``--budget`` is spent):

- ``recipes``: generated data in the real on-disk formats (VOC, COCO, Visual Genome), then
  ``gluontrain train <recipe> ...`` (the CLI's ``main``, what the scripts call) in a child
  process per run: ``ssd`` (fp32, ``--amp``), ``frcnn`` (no AMP switch in seamseg),
  ``sgg-detector`` and ``sgg`` PredCls (``DTYPE float32`` and ``"float16"``, SGB's apex O1),
  ``yolo3 --backend torch`` (fp32, ``--amp``, ``--amp --amp-dtype bfloat16``, each step's
  synchronizing CUDA calls counted under ``torch.cuda.set_sync_debug_mode('warn')``: they
  should come only at the log's batch lines and each pass's end), each ending with one
  validation pass. The child times every ``DataLoader`` ``__next__``
  (a wrapper on the iterator's class; the recipes are not touched): the training loader is the
  one that gives the most batches; after ``--warmup`` iterations, an iteration is the time
  between two consecutive batches of one pass (step, hooks and the next fetch), images/s =
  images / those times, data fraction = time inside ``__next__`` / those times. Peak GPU
  memory: ``torch.cuda.max_memory_allocated`` while training, and over the whole run.
  The two-stage runs in fp32 (``frcnn``, ``sgg-detector``, ``sgg``) run once per
  ``--ops-backends`` value (``GLUONTRAIN_TORCH_OPS``: plain torch, then torchvision's NMS and
  ROIAlign where they give the reference's output; the torchvision run writes to its own
  folder, the PredCls one starts from the first detector); the AMP runs take the default.
- ``ops``: ``bench/cuda_ops.py`` (ours vs ``torchvision.ops``: equal outputs, then medians).
- ``tests``: pytest on the test files whose code takes a CUDA branch when a GPU is present.

Results: ``results.json`` and ``results.md`` in ``--out`` (default ``$OUT``, else
``bench_out``). Check it end to end on a CPU: ``python bench/cuda_recipes.py --device cpu
--quick --out DIR`` (tiny shipped CPU configs, a few iterations, no AMP).

Usage: python bench/cuda_recipes.py [--device cuda] [--quick] [--budget 360] [--workers 12]
           [--sections recipes,ops,tests] [--recipes frcnn,sgg-detector,sgg]
           [--ops-backends torch,torchvision] [--out DIR]
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)

import recipe_runs  # noqa: E402  (the command lines and the analysis of the timings)
from gluontrain.torch.ops import compiled  # noqa: E402

# the recipes whose NMS / ROIAlign may run on torchvision's kernels, and each one's output flag
TWO_STAGE = {'frcnn': '--log_dir', 'sgg-detector': 'OUTPUT_DIR', 'sgg': 'OUTPUT_DIR'}

START = time.time()

# test files with code that goes another way when torch.cuda.is_available()
# (tests/torch/test_parallel.py has one too but imports gluoncv, absent beside CUDA torch)
CUDA_TESTS = ['tests/torch/ssd/test_ssd_recipe.py', 'tests/torch/test_step.py',
              'tests/torch/sgg/test_config.py', 'tests/torch/test_distributed.py']


def log(msg):
    print('[{:6.1f}s] {}'.format(time.time() - START, msg), flush=True)


def left(budget):
    return budget - (time.time() - START)


def environment():
    import numpy  # pylint: disable=import-outside-toplevel
    import torch  # pylint: disable=import-outside-toplevel
    env = {'python': platform.python_version(), 'torch': torch.__version__,
           'numpy': numpy.__version__, 'cuda': torch.version.cuda,
           'cudnn': torch.backends.cudnn.version() if torch.cuda.is_available() else None,
           'gpu': torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
           'cpu_count': os.cpu_count(), 'host': platform.node()}
    try:
        import torchvision  # pylint: disable=import-outside-toplevel
        env['torchvision'] = torchvision.__version__
    except ImportError:
        env['torchvision'] = None
    return env


def section_recipes(args, results):
    """Generate the data once, then every recipe run in a child process."""
    data = tempfile.mkdtemp(prefix='gt_cuda_bench_')
    log('generating data in {}'.format(data))
    tic = time.time()
    roots = recipe_runs.make_data(data, args.quick)
    results['data'] = {'seconds': time.time() - tic, 'sizes': recipe_runs.data_sizes(args.quick)}
    log('data ready ({:.1f}s)'.format(time.time() - tic))
    results['recipes'] = []
    runs = recipe_runs.plan(roots, data, args.device, args.quick, args.workers)
    if args.recipes:
        runs = [r for r in runs if r['recipe'] in args.recipes.split(',')]
    for run in with_ops_backends(runs, [b for b in args.ops_backends.split(',') if b]):
        if run.get('skipped'):
            log('SKIP {} ({})'.format(run['name'], run['skipped']))
            results['recipes'].append(run)
            continue
        if left(args.budget) < run['min_seconds']:
            log('SKIP {} (budget: {:.0f}s left)'.format(run['name'], left(args.budget)))
            results['recipes'].append({'name': run['name'], 'skipped': 'budget'})
            continue
        if run.get('needs') and not os.path.exists(run['needs']):
            run['argv'] = run['argv_without']
        log('RUN {}: gluontrain train {} {}'.format(run['name'], run['recipe'],
                                                    ' '.join(run['argv'])))
        row = {'name': run['name'], 'recipe': run['recipe'], 'argv': run['argv']}
        try:
            row.update(child(run, args))
        except Exception as e:  # pylint: disable=broad-except
            row['error'] = '{}: {}'.format(type(e).__name__, e)
        results['recipes'].append(row)
        log('  -> {}'.format(recipe_runs.summary(row)))
        write(results, args.out)


def with_ops_backends(runs, backends):
    """Each fp32 two-stage run once per ops backend, named after it, with its
    ``GLUONTRAIN_TORCH_OPS``; after the first, each writes to its own folder. A torchvision run
    where torchvision does not load comes back as skipped (its reason)."""
    version = compiled.torchvision_version()
    out = []
    for run in runs:
        if run['recipe'] not in TWO_STAGE or run['amp'] or not backends:
            out.append(run)
            continue
        for k, name in enumerate(backends):
            twin = dict(run, name='{} · ops {}'.format(run['name'], name),
                        env={compiled.ENV: name})
            if k:
                flag = TWO_STAGE[run['recipe']]
                for key in ('argv', 'argv_without'):
                    if key in twin:
                        argv = list(twin[key])
                        argv[argv.index(flag) + 1] += '_' + name
                        twin[key] = argv
            if name == 'torchvision' and version is None:
                twin = {'name': twin['name'], 'skipped': 'torchvision does not load here'}
            out.append(twin)
    return out


def ops_backend_lines(results):
    """images/s of each two-stage run per ops backend, and the ratio to the first backend."""
    rows = {}
    for r in results.get('recipes', []):
        if ' · ops ' in r['name']:
            base, name = r['name'].split(' · ops ')
            rows.setdefault(base, []).append((name, r.get('images_per_s')))
    if not rows:
        return ''
    lines = ['', '| run | ' + ' | '.join('images/s ops {}'.format(n) for n, _ in
                                         next(iter(rows.values()))) + ' | ratio |',
             '|---|' + '---|' * (len(next(iter(rows.values()))) + 1)]
    for base, values in rows.items():
        speeds = [v for _, v in values]
        ratio = ('{:.2f}x'.format(speeds[-1] / speeds[0]) if len(speeds) > 1 and
                 all(speeds) else '-')
        lines.append('| {} | {} | {} |'.format(base, ' | '.join(
            '-' if v is None else '{:.1f}'.format(v) for v in speeds), ratio))
    return '\n'.join(lines) + '\n'


def child(run, args):
    """Run one recipe in a child process (timed DataLoader), return its analysed figures."""
    with tempfile.NamedTemporaryFile(suffix='.json', delete=False) as f:
        events = f.name
    cmd = [sys.executable, os.path.join(HERE, 'recipe_runs.py'), '--events', events,
           '--device', args.device] + run.get('child', []) + [run['recipe']] + run['argv']
    env = dict(os.environ, MPLBACKEND='Agg', PYTHONPATH=os.pathsep.join(
        [ROOT] + [p for p in os.environ.get('PYTHONPATH', '').split(os.pathsep) if p]),
        **run.get('env', {}))
    timeout = max(10., min(run['timeout'], left(args.budget)))
    tic = time.time()
    try:
        proc = subprocess.run(cmd, env=env, cwd=ROOT, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, timeout=timeout, check=False)
        out, rc = proc.stdout.decode('utf-8', 'replace'), proc.returncode
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b'').decode('utf-8', 'replace')
        rc = 'timeout after {:.0f}s'.format(timeout)
    wall = time.time() - tic
    for line in out.splitlines()[-6:]:
        log('  | ' + line[:200])
    row = {'rc': rc, 'wall_s': wall, 'log_tail': out[-2500:]}
    if os.path.exists(events) and os.path.getsize(events):
        with open(events) as f:
            row.update(recipe_runs.analyse(json.load(f), run['warmup']))
        os.unlink(events)
    return row


def section_ops(args, results):
    import cuda_ops  # pylint: disable=import-outside-toplevel
    results['ops'] = cuda_ops.run(args.device, args.quick, log=log)


def section_tests(args, results):
    """pytest on the files with CUDA branches (one process, quiet)."""
    timeout = max(10., left(args.budget))
    cmd = [sys.executable, '-m', 'pytest', '-q', '-p', 'no:cacheprovider', '-x',
           '-o', 'addopts=-ra'] + CUDA_TESTS
    env = dict(os.environ, MPLBACKEND='Agg', PYTHONHASHSEED='0', PYTHONPATH=os.pathsep.join(
        [ROOT] + [p for p in os.environ.get('PYTHONPATH', '').split(os.pathsep) if p]))
    log('RUN pytest ' + ' '.join(CUDA_TESTS))
    tic = time.time()
    try:
        proc = subprocess.run(cmd, env=env, cwd=ROOT, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, timeout=timeout, check=False)
        out, rc = proc.stdout.decode('utf-8', 'replace'), proc.returncode
    except subprocess.TimeoutExpired as e:
        out, rc = (e.stdout or b'').decode('utf-8', 'replace'), 'timeout'
    lines = out.strip().splitlines()
    results['tests'] = {'files': CUDA_TESTS, 'rc': rc, 'seconds': time.time() - tic,
                        'summary': lines[-1] if lines else '', 'tail': out[-4000:]}
    log('  -> rc {} {}'.format(rc, results['tests']['summary']))


SECTIONS = {'recipes': section_recipes, 'ops': section_ops, 'tests': section_tests}


def write(results, out):
    """results.json and results.md in ``out``, atomically."""
    os.makedirs(out, exist_ok=True)
    results['elapsed_s'] = time.time() - START
    for name, text in (('results.json', json.dumps(results, indent=1, default=str)),
                       ('results.md', recipe_runs.markdown(results)
                        + ops_backend_lines(results))):
        tmp = os.path.join(out, '.' + name + '.tmp')
        with open(tmp, 'w') as f:
            f.write(text)
        os.replace(tmp, os.path.join(out, name))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--device', default='cuda', choices=('cuda', 'cpu'))
    p.add_argument('--quick', action='store_true',
                   help='tiny configs and few iterations (the CPU check of the whole script)')
    p.add_argument('--budget', type=float, default=360.,
                   help='wall-clock seconds; sections and runs that would start later are '
                        'skipped (default 360)')
    p.add_argument('--workers', type=int, default=None,
                   help='DataLoader workers per run (default: 12 on cuda, 1 with --quick)')
    p.add_argument('--sections', default='ops,recipes,tests')
    p.add_argument('--recipes', default='',
                   help='only these recipes (comma-separated, e.g. frcnn,sgg-detector,sgg)')
    p.add_argument('--ops-backends', default='torch,torchvision',
                   help='GLUONTRAIN_TORCH_OPS values the fp32 two-stage runs are repeated '
                        'with (empty: once, the default backend)')
    p.add_argument('--out', default=os.environ.get('OUT') or 'bench_out')
    args = p.parse_args(argv)
    if args.workers is None:
        args.workers = 1 if args.quick else min(12, max(1, (os.cpu_count() or 2) - 2))
    results = {'args': vars(args), 'sections': {}}
    try:
        results['environment'] = environment()
        log('environment: {}'.format(results['environment']))
    except Exception as e:  # pylint: disable=broad-except
        results['environment'] = {'error': repr(e)}
    if args.device == 'cuda' and not (results['environment'].get('gpu')):
        log('no CUDA device: nothing to measure (use --device cpu --quick for a check)')
    for name in args.sections.split(','):
        if left(args.budget) < 5:
            results['sections'][name] = 'skipped: budget spent'
            log('SKIP section {} (budget)'.format(name))
            continue
        log('SECTION {}'.format(name))
        tic = time.time()
        try:
            SECTIONS[name](args, results)
            results['sections'][name] = 'ok ({:.1f}s)'.format(time.time() - tic)
        except Exception:  # pylint: disable=broad-except
            results['sections'][name] = 'failed: ' + traceback.format_exc()[-1500:]
            log('section {} FAILED:\n{}'.format(name, traceback.format_exc()))
        write(results, args.out)
    write(results, args.out)
    log('done; results in {}'.format(os.path.abspath(args.out)))
    print(recipe_runs.markdown(results) + ops_backend_lines(results), flush=True)
    return 0


if __name__ == '__main__':
    sys.exit(main())
