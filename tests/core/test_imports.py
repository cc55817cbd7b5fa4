"""The core imports neither framework (it must run on a machine without MXNet or PyTorch)."""
import subprocess
import sys


def test_core_imports_no_framework():
    code = ('import sys, gluontrain, gluontrain.core.loop, gluontrain.core.hooks, '
            'gluontrain.core.checkpoint, gluontrain.core.meters, gluontrain.core.devices, '
            'gluontrain.core.lr_scheduler, gluontrain.core.voc_eval; '
            'bad = [m for m in ("mxnet", "torch", "gluoncv") if m in sys.modules]; '
            'print(bad); sys.exit(1 if bad else 0)')
    res = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr
