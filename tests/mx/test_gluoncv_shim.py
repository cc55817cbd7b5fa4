"""gluoncv imports beside torch>=2 through the one shim, and both frameworks work in one process."""
import subprocess
import sys

import pytest


@pytest.mark.slow  # a subprocess, several processes or a live GluonCV run: over ~5 s
def test_gluoncv_and_torch_in_one_process_either_order():
    for first in ('import torch; import gluontrain.mx', 'import gluontrain.mx; import torch'):
        code = (first + '\nimport mxnet as mx, torch, gluoncv\n'
                'from gluontrain.mx import gluoncv as g\n'
                'assert g is gluoncv and g.data.VOCDetection\n'
                'a = mx.nd.array([1, 2, 3]).sum().asscalar()\n'
                'b = torch.tensor([1., 2., 3.]).sum().item()\n'
                'assert a == b == 6.0\n'
                'import sys; assert sys.modules["torch"] is torch\n'
                'print(torch.__version__, gluoncv.__version__)')
        res = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True)
        assert res.returncode == 0, res.stderr[-2000:]
        assert res.stdout.startswith('2.')


@pytest.mark.slow  # a subprocess, several processes or a live GluonCV run: over ~5 s
def test_plain_gluoncv_import_fails_beside_torch_which_is_why_the_shim_exists():
    code = 'import torch, gluoncv'
    res = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True)
    assert res.returncode != 0 and 'torch' in res.stderr


def test_the_shim_is_the_only_place_that_hides_torch():
    import pathlib
    import gluontrain
    root = pathlib.Path(gluontrain.__file__).parent
    hits = [p.relative_to(root).as_posix() for p in root.rglob('*.py')
            if "sys.modules['torch'] = None" in p.read_text()]
    assert hits == ['mx/_gluoncv.py']
