"""The numerics-sensitive tests under every kernel choice this processor can be forced into.

numpy, MXNet (OpenBLAS 0.3.13, oneDNN), numpy's own OpenBLAS (0.3.20) and torch (MKL, oneDNN,
ATen's vectorised loops) each pick their kernels at run time by the processor's instruction
set, and the last bits of a float result follow the kernel. A tolerance or a recorded number
fitted to one processor's kernels fails on another (issue 39: an AVX-512 Intel machine). This
script runs the tests that compare floats across frameworks, code paths or recordings once per
kernel choice that can be forced here with environment variables, so that such a fit shows up
on the contributor's own machine::

    python tests/kernel_matrix.py              # every row (about 20 minutes on 2 cores)
    python tests/kernel_matrix.py --list       # the rows this processor supports, nothing run
    python tests/kernel_matrix.py --rows openblas   # rows whose name contains 'openblas'
    tox -e kernels                             # the same in the test environment

A row's choice is probed first (a child importing the libraries of the row's tests and running
one product in each under it): a value the processor cannot run (an ``OPENBLAS_CORETYPE`` of an instruction set it
lacks dies with SIGILL) is listed as not supported and skipped. The summary prints, per row,
the variables, the test groups and passed / failed; the exit status is 1 if any row failed.
docs/testing.md ("The kernel matrix") lists what each group checks and the rows measured.
"""
import argparse
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: Test groups: what each compares, as node ids relative to the repository root.
GROUPS = {
    # the YOLOv3 train pipeline's one BLAS call (the hue product) and what it feeds
    'mx-blas': ['tests/mx/yolo3/test_fast_transform.py',
                'tests/mx/yolo3/test_data.py::test_fast_loader_gives_the_reference_loaders_batches'],
    # numpy / MXNet floats compared with GluonCV's code on the same machine
    'mx': ['tests/mx/yolo3/test_fast_targets.py', 'tests/mx/yolo3/test_fast_metric.py',
           'tests/mx/yolo3/test_yolo3_eval_reference.py', 'tests/mx/yolo3/test_yolo3_weights.py',
           'tests/yolo3'],
    # torch floats against recordings made on another machine, or against GluonCV's network
    'torch': ['tests/torch/backbone/test_backbone_resnet.py',
              'tests/torch/sgg/modeling/predictors/test_sgb_equivalence.py',
              'tests/torch/sgg/modeling/test_sgg_against_sgb.py',
              'tests/torch/sgg/test_inference.py', 'tests/torch/sgg/evaluation/test_vg_eval.py',
              'tests/torch/ssd/test_ssd_model.py', 'tests/torch/ops/test_ops_roi.py',
              'tests/torch/yolo3/test_yolo3_torch_model.py',
              'tests/torch/yolo3/test_yolo3_torch_weights.py',
              'tests/torch/yolo3/test_yolo3_torch_training.py'],
    # training runs from random weights to a threshold (chaotic: the kernel changes the run)
    'learn': ['tests/mx/yolo3/test_learnability.py', 'tests/torch/sgg/test_sgg_learnability.py',
              'tests/torch/frcnn/test_frcnn_learnability.py',
              'tests/torch/ssd/test_ssd_learnability.py'],
}

#: OpenBLAS 0.3.13 / 0.3.20 core names for x86-64; each is tried, the ones this processor
#: runs are kept (Bulldozer's family needs FMA4, SkylakeX / Cooperlake AVX-512).
CORETYPES = ('Prescott', 'Core2', 'Penryn', 'Dunnington', 'Nehalem', 'Atom', 'Opteron',
             'Barcelona', 'Bobcat', 'Sandybridge', 'Haswell', 'Zen', 'Bulldozer', 'Piledriver',
             'Steamroller', 'Excavator', 'SkylakeX', 'Cooperlake')
#: numpy's dispatchable features above its baseline; a row disables those of them this
#: processor has (:func:`npy_features`)
NPY_ALL = ('AVX2 FMA3 F16C AVX512F AVX512CD AVX512_KNL AVX512_KNM AVX512_SKX AVX512_CLX '
           'AVX512_CNL AVX512_ICL')


def npy_features(names=NPY_ALL, available=None):
    """The features of ``names`` this processor has, by numpy's own detection (``available``:
    its ``__cpu_features__``, read here when not given). numpy warns on stderr at every import
    for a disabled name the processor lacks, and the tests that read a child process's stderr
    as one ``error:`` line then see three (the AVX-512 names on an AMD EPYC, 2026-11-29)."""
    if available is None:
        try:
            from numpy.core._multiarray_umath import __cpu_features__ as available
        except ImportError:  # numpy 2
            from numpy._core._multiarray_umath import __cpu_features__ as available
    return ' '.join(n for n in names.split() if available.get(n))


def rows():
    """``(name, environment, groups)`` of every kernel choice, the processor not yet asked."""
    out = [('ATEN_CPU_CAPABILITY=default', {'ATEN_CPU_CAPABILITY': 'default'},
            ('torch', 'learn')),
           ('ATEN_CPU_CAPABILITY=avx2', {'ATEN_CPU_CAPABILITY': 'avx2'}, ('torch',)),
           ('ATEN_CPU_CAPABILITY=avx512', {'ATEN_CPU_CAPABILITY': 'avx512'}, ('torch',)),
           ('oneDNN + MKL at SSE4', {'ONEDNN_MAX_CPU_ISA': 'SSE41', 'DNNL_MAX_CPU_ISA': 'SSE41',
                                     'MKL_ENABLE_INSTRUCTIONS': 'SSE4_2'}, ('torch', 'mx')),
           ('MXNET_MKLDNN_ENABLED=0', {'MXNET_MKLDNN_ENABLED': '0'}, ('mx', 'mx-blas')),
           ('NPY_DISABLE_CPU_FEATURES=AVX2..AVX512',
            {'NPY_DISABLE_CPU_FEATURES': npy_features()},
            ('mx', 'mx-blas', 'torch'))]
    out += [('OPENBLAS_CORETYPE=' + c, {'OPENBLAS_CORETYPE': c}, ('mx-blas',))
            for c in CORETYPES]
    return out


#: A child's check that the processor runs a choice: the libraries the row's tests use, one
#: product each; it prints what ATen runs (the last line).
_PROBES = {
    'numpy': 'import numpy as np; a = np.ones((64, 3), np.float32); np.dot(a, a.T)',
    'mxnet': 'import mxnet as mx; a = mx.nd.ones((64, 3)); mx.nd.dot(a, a.T).asnumpy()',
    'torch': 'import torch; torch.nn.functional.conv2d(torch.ones(1, 3, 8, 8), '
             'torch.ones(4, 3, 3, 3)); print(torch.backends.cpu.get_cpu_capability())',
}
_GROUP_LIBS = {'mx-blas': ('numpy', 'mxnet'), 'mx': ('numpy', 'mxnet'),
               'torch': ('numpy', 'torch'), 'learn': ('numpy', 'mxnet', 'torch')}


def probe(env, groups):
    """What the processor does under ``env``: ``(runs, ATen's capability or the error)``."""
    libs = sorted({lib for g in groups for lib in _GROUP_LIBS[g]})
    code = '\n'.join([_PROBES[lib] for lib in libs] + ["print('ran')"])
    out = subprocess.run([sys.executable, '-c', code], env=dict(os.environ, **env),
                         capture_output=True, text=True, check=False)
    if out.returncode:
        return False, 'exit status {} ({})'.format(out.returncode,
                                                   (out.stderr.strip().splitlines() or [''])[-1])
    lines = out.stdout.split()
    return True, lines[-2] if len(lines) > 1 else 'runs'


def cpu_flags():
    """The processor's feature flags (Linux), empty where unknown."""
    try:
        with open('/proc/cpuinfo') as f:
            return set(next(line for line in f if line.startswith('flags')).split()[2:])
    except (OSError, StopIteration):
        return set()


def supported(all_rows):
    """The rows this processor runs, each with a note. An ATen capability above the processor's
    counts as not supported: ATen then runs the best it has (and still reports the variable's
    value), which the row without the variable covers."""
    kept, dropped = [], []
    avx512 = 'avx512f' in cpu_flags()
    for name, env, groups in all_rows:
        runs, what = probe(env, groups)
        if runs and env.get('ATEN_CPU_CAPABILITY') == 'avx512' and not avx512:
            runs, what = False, 'no avx512f in /proc/cpuinfo'
        (kept if runs else dropped).append((name, env, groups, what))
    return kept, dropped


def run_row(env, groups, pytest_args):
    """pytest on the row's groups under its variables; returns (exit status, seconds)."""
    ids = [i for g in groups for i in GROUPS[g]]
    cmd = [sys.executable, '-m', 'pytest', '-q', '-p', 'no:cacheprovider'] + pytest_args + ids
    start = time.time()
    status = subprocess.run(cmd, cwd=ROOT, env=dict(os.environ, **env), check=False).returncode
    return status, time.time() - start


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--list', action='store_true', help='probe and list the rows, run none')
    parser.add_argument('--rows', default='', help='only rows whose name contains this text')
    parser.add_argument('--groups', default='', help='comma-separated groups to keep ({})'
                        .format(', '.join(GROUPS)))
    parser.add_argument('pytest_args', nargs='*', help='passed to pytest (after --)')
    args = parser.parse_args(argv)
    keep = set(args.groups.split(',')) - {''}
    unknown = keep - set(GROUPS)
    if unknown:
        parser.error('--groups: unknown {}; choose from {}'.format(
            ', '.join(sorted(unknown)), ', '.join(GROUPS)))
    chosen = [(n, e, tuple(g for g in gs if not keep or g in keep)) for n, e, gs in rows()
              if args.rows.lower() in n.lower()]
    chosen = [r for r in chosen if r[2]]
    kept, dropped = supported(chosen)
    for name, _, _, why in dropped:
        print('not supported here: {} ({})'.format(name, why))
    results = []
    for name, env, groups, what in kept:
        print('\n=== {}  [{}]  (probe: {})'.format(name, ', '.join(groups), what), flush=True)
        if args.list:
            continue
        status, seconds = run_row(env, groups, ['-n', 'auto', '--dist', 'load'] + args.pytest_args)
        results.append((name, groups, status, seconds))
    if args.list:
        return 0
    print('\nkernel matrix:')
    for name, groups, status, seconds in results:
        print('  {:<42} {:<24} {:>6.0f} s  {}'.format(name, ','.join(groups), seconds,
                                                       'passed' if status == 0 else 'FAILED'))
    return int(any(status for _, _, status, _ in results))


if __name__ == '__main__':
    sys.exit(main())
