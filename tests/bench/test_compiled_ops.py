"""bench/compiled_ops.py without the compiled references: it skips with the build command, and
its checks refuse to time pairs whose outputs differ."""
import importlib.util
import os
import sys

import pytest
import torch

BENCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'bench',
                     'compiled_ops.py')


@pytest.fixture(scope='module')
def bench():
    saved = list(sys.path)
    spec = importlib.util.spec_from_file_location('bench_compiled_ops', BENCH)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path[:] = saved  # the bench puts the repository and tests/fixtures first
    return module


def test_without_references_it_prints_the_build_command_and_exits_0(bench, monkeypatch, capsys):
    monkeypatch.delenv('GLUONTRAIN_REFERENCES', raising=False)
    assert bench.main([]) == 0
    out = capsys.readouterr().out
    assert out.startswith('skipped: ') and 'GLUONTRAIN_REFERENCES is not set' in out
    assert bench.BUILD_COMMAND in out
    assert 'tests/fixtures/build_reference_ops.py' in bench.BUILD_COMMAND


def test_without_the_build_it_names_the_missing_modules(bench, monkeypatch, capsys, tmp_path):
    monkeypatch.setenv('GLUONTRAIN_REFERENCES', str(tmp_path))
    assert bench.main([]) == 0
    out = capsys.readouterr().out
    assert ('maskrcnn_benchmark._C, seamseg.utils.nms._backend, '
            'seamseg.utils.roi_sampling._backend' in out)
    assert bench.compiled_paths(str(tmp_path)) == {
        'maskrcnn_benchmark._C': None, 'seamseg.utils.nms._backend': None,
        'seamseg.utils.roi_sampling._backend': None}


def test_pairs_that_differ_are_not_timed(bench):
    with pytest.raises(SystemExit, match='nms: outputs differ'):
        bench.assert_equal('nms', torch.tensor([0, 2, 5]), torch.tensor([0, 5, 2]))
    bench.assert_equal('nms', torch.tensor([0, 2]), torch.tensor([0, 2]))
    a = torch.zeros(3, 2)
    with pytest.raises(SystemExit, match=r'max abs 0.001'):
        bench.assert_close('roi', a, a + 1e-3)
    with pytest.raises(SystemExit, match='shapes'):
        bench.assert_close('roi', a, a[:2])
    with pytest.raises(SystemExit):
        bench.assert_close('roi', a, a + float('nan'))
    assert bench.assert_close('roi', a, a + 1e-6) == pytest.approx(1e-6)


def test_reference_and_ours_run_alternately(bench):
    calls = []
    t_ref, t_ours = bench.timed_pair(lambda: calls.append('ref'), lambda: calls.append('ours'), 3)
    assert calls == ['ref', 'ours'] * 3
    assert t_ref >= 0 and t_ours >= 0


def test_seamseg_layout(bench):
    xyxy = torch.tensor([[1., 2., 3., 4.]])
    assert bench.yx(xyxy).tolist() == [[2., 1., 4., 3.]]
