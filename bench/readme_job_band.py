"""README command (a)'s main job for several seeds under several kernel choices: the band of
its final validation mAP (issue 39, item 6).

The job's command is read from README.md itself (the ``python scripts/train_yolov3.py`` line of
block (a)), so this measures exactly what a new user runs; each run adds ``--seed S`` and its
own ``--save-prefix``. A kernel choice is a set of environment variables (the rows of
``tests/kernel_matrix.py`` that change MXNet's and numpy's kernels)::

    python bench/readme_job_band.py                       # seeds 233, 1, 2 x every choice
    python bench/readme_job_band.py --seeds 233 --choices default --jobs 2

It prints one line per run (seed, choice, final mAP, wall seconds) and the band: min, max and
spread of the final mAP over all runs. docs/install.md records the measured band.
"""
import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PINNED = os.path.join(ROOT, 'tests', 'mx', 'yolo3', 'reference', 'pinned_env.json')


def readme_command():
    """The argv of README block (a)'s training job (after ``python``)."""
    with open(os.path.join(ROOT, 'README.md'), encoding='utf-8') as f:
        text = f.read()
    block = text[text.index('**(a)'):]
    block = block[block.index('```bash') + 7:]
    block = block[:block.index('```')].replace('\\\n', ' ')
    job = block[block.index('python scripts/train_yolov3.py'):]
    return shlex.split(job.split('&&')[0])[1:]


def choices():
    """``{name: environment}`` of the kernel choices."""
    with open(PINNED) as f:
        pinned = json.load(f)
    return {'default': {},
            'MXNET_MKLDNN_ENABLED=0': {'MXNET_MKLDNN_ENABLED': '0'},
            'OPENBLAS_CORETYPE=Sandybridge': {'OPENBLAS_CORETYPE': 'Sandybridge'},
            'pinned_env.json': pinned}


def run(command, seed, name, env, folder):
    """One job of ``command`` (:func:`readme_command`); returns (seed, choice, final mAP or
    None, seconds, last line of output)."""
    argv = [sys.executable] + command + [
        '--seed', str(seed), '--save-prefix', os.path.join(folder, '{}_{}/'.format(
            re.sub(r'\W+', '_', name), seed))]
    start = time.time()
    out = subprocess.run(argv, cwd=ROOT, env=dict(os.environ, **env), capture_output=True,
                         text=True, check=False)
    found = re.findall(r'final validation mAP: ([0-9.]+)', out.stdout + out.stderr)
    tail = (out.stdout + out.stderr).strip().splitlines()[-1:] or ['']
    return seed, name, float(found[-1]) if found else None, time.time() - start, tail[0]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--seeds', default='233,1,2', help='comma-separated seeds')
    parser.add_argument('--choices', default=','.join(choices()),
                        help='comma-separated kernel choices: ' + ', '.join(choices()))
    parser.add_argument('--jobs', type=int, default=1, help='runs at the same time')
    parser.add_argument('--out', default='', help='folder for the runs (default: a temporary one)')
    args = parser.parse_args(argv)
    table = choices()
    wanted = [c for c in args.choices.split(',') if c]
    unknown = [c for c in wanted if c not in table]
    if unknown:
        parser.error('--choices: unknown {}'.format(', '.join(unknown)))
    folder = args.out or tempfile.mkdtemp(prefix='readme_band_')
    command = readme_command()
    print('command: python ' + ' '.join(shlex.quote(a) for a in command), flush=True)
    tasks = [(command, int(s), c, table[c], folder) for c in wanted
             for s in args.seeds.split(',') if s]
    results = []
    with ThreadPoolExecutor(max(1, args.jobs)) as pool:
        for seed, name, value, seconds, tail in pool.map(lambda t: run(*t), tasks):
            results.append(value)
            print('seed {:>4}  {:<30} final mAP {:<8} {:>5.0f} s{}'.format(
                seed, name, 'failed' if value is None else '{:.4f}'.format(value), seconds,
                '' if value is not None else '  (' + tail + ')'), flush=True)
    done = [v for v in results if v is not None]
    if done:
        print('band: {} runs, final mAP {:.4f} - {:.4f} (spread {:.4f}); {} failed'.format(
            len(done), min(done), max(done), max(done) - min(done), len(results) - len(done)))
    return int(len(done) < len(results))


if __name__ == '__main__':
    sys.exit(main())
