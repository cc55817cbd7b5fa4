"""gluontrain.mx.distributed: HorovodComm over two real processes, and a missing horovod."""
import importlib.util
import json
import os
import subprocess
import sys

import pytest

from gluontrain.__main__ import main as cli_main
from gluontrain.mx.distributed import HOROVOD_BUILD, HorovodMissingError, import_horovod
from launch import horovod_env, horovod_failure_report, horovodrun_command  # tests/launch.py

HAVE_HOROVOD = importlib.util.find_spec('horovod') is not None
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.skipif(not HAVE_HOROVOD, reason='horovod is not installed (docs/distributed.md)')
@pytest.mark.slow  # a subprocess, several processes or a live GluonCV run: over ~5 s
def test_horovod_comm_collectives_on_two_processes(tmp_path):
    env = horovod_env(PYTHONPATH=REPO + os.pathsep + os.environ.get('PYTHONPATH', ''))
    worker = os.path.join(os.path.dirname(__file__), 'hvd_comm_worker.py')
    proc = subprocess.run(horovodrun_command([sys.executable, worker, str(tmp_path)]), env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=240)
    assert proc.returncode == 0, horovod_failure_report(proc.stdout)
    results = []
    for rank in (0, 1):
        with open(tmp_path / 'rank{}.json'.format(rank)) as f:
            results.append(json.load(f))
    for rank, r in enumerate(results):
        assert (r['rank'], r['world_size']) == (rank, 2)
        # mean of {a: 0, b: 1} and {a: 10, b: 2}, in the caller's order of names
        assert r['mean'] == ({'a': 5.0, 'b': 1.5} if rank == 0 else {'b': 1.5, 'a': 5.0})
        assert list(r['mean']) == (['a', 'b'] if rank == 0 else ['b', 'a'])
        assert r['gathered'] == [[0, 256, [0, 1, 2, 254, 255]], [1, 512, [0, 1, 2, 254, 255]]]
        assert r['broadcast'] == {'from': 1, 'list': [1, 1, 1]}


def test_missing_horovod_names_the_build_command(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, 'horovod.mxnet', None)  # the import raises ImportError
    with pytest.raises(HorovodMissingError) as info:
        import_horovod()
    assert HOROVOD_BUILD in str(info.value) and isinstance(info.value, ValueError)
    # at the command line: one error line with the command, exit status 1, no traceback
    assert cli_main(['train', 'yolo3', '--horovod', '--gpus', '']) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith('error: --horovod needs horovod')
    assert HOROVOD_BUILD in err[0] and 'Traceback' not in err[0]
