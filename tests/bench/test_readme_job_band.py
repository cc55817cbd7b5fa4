"""bench/readme_job_band.py: it runs README command (a)'s job as the README writes it, and a run
that does not end with a final mAP is reported as failed."""
import importlib.util
import os
import types

import pytest

BENCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'bench',
                     'readme_job_band.py')


@pytest.fixture(scope='module')
def bench():
    spec = importlib.util.spec_from_file_location('bench_readme_job_band', BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_command_is_readme_a_job(bench):
    argv = bench.readme_command()
    assert argv[0] == 'scripts/train_yolov3.py'
    with open(os.path.join(bench.ROOT, 'README.md'), encoding='utf-8') as f:
        readme = ' '.join(f.read().replace('\\\n', ' ').split())
    assert ' '.join(argv[1:]).replace("--gpus  ", "--gpus '' ") in readme
    for flag in ('--dataset', '--epochs', '--lr', '--data-shape', '--batch-size'):
        assert flag in argv


def test_rows_and_failed_runs(bench, monkeypatch, capsys, tmp_path):
    outputs = {233: 'final validation mAP: 0.5000\n', 1: 'error: something\n'}

    def fake_run(argv, **kwargs):
        seed = int(argv[argv.index('--seed') + 1])
        assert kwargs['env']['MXNET_MKLDNN_ENABLED'] == '0'
        return types.SimpleNamespace(stdout=outputs[seed], stderr='')
    monkeypatch.setattr(bench.subprocess, 'run', fake_run)
    status = bench.main(['--seeds', '233,1', '--choices', 'MXNET_MKLDNN_ENABLED=0',
                         '--out', str(tmp_path)])
    out = capsys.readouterr().out
    assert status == 1
    assert 'final mAP 0.5000' in out and 'failed' in out and '(error: something)' in out
    assert 'band: 1 runs, final mAP 0.5000 - 0.5000 (spread 0.0000); 1 failed' in out
    with pytest.raises(SystemExit):
        bench.main(['--choices', 'nope'])
