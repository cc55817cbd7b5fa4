"""tests/kernel_matrix.py: its rows cover the kernel choices of issue 39, its groups name tests
that exist, and a choice the processor cannot run is dropped, not run."""
import os

import pytest

import kernel_matrix as km

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_every_group_names_existing_tests():
    for group, ids in km.GROUPS.items():
        for node in ids:
            path, _, name = node.partition('::')
            assert os.path.exists(os.path.join(ROOT, path)), (group, node)
            if name:
                with open(os.path.join(ROOT, path)) as f:
                    assert 'def {}('.format(name) in f.read(), (group, node)


def test_rows_force_each_kernel_choice_of_the_issue():
    variables = {(k, v) for _, env, _ in km.rows() for k, v in env.items()}
    for choice in [('ATEN_CPU_CAPABILITY', 'default'), ('ATEN_CPU_CAPABILITY', 'avx2'),
                   ('MXNET_MKLDNN_ENABLED', '0'), ('OPENBLAS_CORETYPE', 'Haswell'),
                   ('OPENBLAS_CORETYPE', 'Zen'), ('OPENBLAS_CORETYPE', 'Sandybridge')]:
        assert choice in variables
    assert ('NPY_DISABLE_CPU_FEATURES', km.npy_features()) in variables
    # every row runs the tests its variables can change
    for name, env, groups in km.rows():
        if 'OPENBLAS_CORETYPE' in env or 'MXNET_MKLDNN_ENABLED' in env:
            assert 'mx-blas' in groups, name
        if 'ATEN_CPU_CAPABILITY' in env:
            assert 'torch' in groups, name


def test_a_choice_the_processor_cannot_run_is_dropped(monkeypatch):
    """The probe's verdict decides; an AVX-512 ATen row needs avx512f in the CPU flags."""
    outcome = {'Haswell': (True, 'runs'), 'SkylakeX': (False, 'exit status -4 ()')}
    monkeypatch.setattr(km, 'probe', lambda env, groups: outcome.get(
        env.get('OPENBLAS_CORETYPE'), (True, 'AVX2')))
    monkeypatch.setattr(km, 'cpu_flags', lambda: {'avx2'})
    rows = [('OPENBLAS_CORETYPE=Haswell', {'OPENBLAS_CORETYPE': 'Haswell'}, ('mx-blas',)),
            ('OPENBLAS_CORETYPE=SkylakeX', {'OPENBLAS_CORETYPE': 'SkylakeX'}, ('mx-blas',)),
            ('ATEN_CPU_CAPABILITY=avx512', {'ATEN_CPU_CAPABILITY': 'avx512'}, ('torch',))]
    kept, dropped = km.supported(rows)
    assert [r[0] for r in kept] == ['OPENBLAS_CORETYPE=Haswell']
    assert [r[0] for r in dropped] == ['OPENBLAS_CORETYPE=SkylakeX', 'ATEN_CPU_CAPABILITY=avx512']
    monkeypatch.setattr(km, 'cpu_flags', lambda: {'avx2', 'avx512f'})
    assert [r[0] for r in km.supported(rows)[0]][-1] == 'ATEN_CPU_CAPABILITY=avx512'


def test_unknown_group_is_refused(capsys):
    with pytest.raises(SystemExit) as exc:
        km.main(['--groups', 'mx,nope', '--list'])
    assert exc.value.code == 2
    assert 'unknown nope' in capsys.readouterr().err


def test_numpy_row_disables_only_the_features_the_processor_has():
    """numpy warns at every import for a name the processor lacks (a stderr line that broke the
    one-line-error tests under this row on an AMD EPYC): the row names only those it has."""
    epyc = {'AVX2': True, 'FMA3': True, 'F16C': True, 'AVX512F': False, 'AVX512_SKX': False}
    assert km.npy_features(available=epyc) == 'AVX2 FMA3 F16C'
    xeon = dict(epyc, AVX512F=True, AVX512CD=True, AVX512_SKX=True)
    assert km.npy_features(available=xeon) == 'AVX2 FMA3 F16C AVX512F AVX512CD AVX512_SKX'
    assert set(km.npy_features().split()) <= set(km.NPY_ALL.split())
