"""The MXNet backend on Python >= 3.12 (where MXNet 1.9.1 and GluonCV 0.10.5 do not run): the
training command, the eval/demo scripts and ``import gluontrain.mx`` refuse in one line.
Forced here by lowering ``registry.MXNET_MAX_PYTHON``, so that it runs on every Python; on
3.12+ (tox env torch-py313) the refusal is also this Python's own."""
import subprocess
import sys

import pytest

from gluontrain import registry


def test_the_refusal_names_the_python_and_what_to_use_instead():
    assert registry.mxnet_python_refusal((3, 11)) is None
    assert registry.mxnet_python_refusal((3, 8)) is None
    line = registry.mxnet_python_refusal((3, 13))
    assert 'needs Python <= 3.11' in line and 'this is Python 3.13' in line
    assert '--backend torch' in line and 'README command (a)' in line and '\n' not in line
    assert (registry.mxnet_python_refusal() is None) == (sys.version_info[:2] <= (3, 11))


def _run(code):
    prelude = 'import sys; import gluontrain.registry as r; r.MXNET_MAX_PYTHON = (3, 0); '
    return subprocess.run([sys.executable, '-c', prelude + code], capture_output=True,
                          text=True, timeout=120)


@pytest.mark.parametrize('code', [
    'from gluontrain.__main__ import main; sys.exit(main(["train", "yolo3", "--help"]))',
    'from gluontrain.__main__ import main; '
    'sys.exit(main(["train", "yolo3", "--backend", "mxnet", "--epochs", "1"]))',
    'from gluontrain.tool_route import script_main; sys.exit(script_main("eval", []))',
    'from gluontrain.tool_route import script_main; '
    'sys.exit(script_main("demo", ["--backend", "mxnet", "a.jpg"]))',
])
def test_the_mxnet_backend_is_one_error_line(code):
    done = _run(code)
    assert done.returncode == 1, done.stderr
    assert done.stderr.count('\n') == 1 and 'Traceback' not in done.stderr, done.stderr
    assert done.stderr.startswith('error: ') and 'needs Python <= 3.11' in done.stderr
    assert '--backend torch' in done.stderr and not done.stdout


def test_importing_gluontrain_mx_raises_that_line(monkeypatch):
    done = _run('import gluontrain.mx')
    monkeypatch.setattr(registry, 'MXNET_MAX_PYTHON', (3, 0))
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == 'ImportError: ' + \
        registry.mxnet_python_refusal()
