"""The notebooks run headless from top to bottom, and are committed without outputs."""
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# notebook -> pictures it shows (each cell asserts the numbers it prints)
NOTEBOOKS = {
    # augmentation, curves, validation detections
    'yolov3_walkthrough.ipynb': 3,
    # priors, matched priors, augmentations, curves, detections
    'ssd_pytorch.ipynb': 5,
    # anchors, matched anchors, proposals before/after NMS, sampled ROIs, curves, detections
    'twostage_walkthrough.ipynb': 6,
}

nbformat = pytest.importorskip('nbformat')


@pytest.mark.parametrize('name', sorted(NOTEBOOKS))
def test_notebook_is_committed_without_outputs(name):
    nb = nbformat.read(os.path.join(ROOT, 'notebooks', name), as_version=4)
    code = [c for c in nb.cells if c.cell_type == 'code']
    assert len(code) >= 8
    assert all(not c.outputs and c.execution_count is None for c in code)


@pytest.mark.parametrize('name', sorted(NOTEBOOKS))
def test_notebook_is_what_its_build_script_writes(name, tmp_path):
    """The committed notebook equals the build script's cells (edit the script, rebuild)."""
    import importlib.util
    import sys
    script = os.path.join(ROOT, 'notebooks', 'build_' + {
        'yolov3_walkthrough.ipynb': 'yolov3_walkthrough',
        'ssd_pytorch.ipynb': 'ssd_pytorch',
        'twostage_walkthrough.ipynb': 'twostage_walkthrough'}[name] + '.py')
    sys.path.insert(0, os.path.dirname(script))
    try:
        spec = importlib.util.spec_from_file_location('build_nb_' + name[:-6], script)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(os.path.dirname(script))
    committed = nbformat.read(os.path.join(ROOT, 'notebooks', name), as_version=4)
    assert [(c.cell_type, c.source) for c in committed.cells] == \
        [('markdown' if kind == 'md' else 'code', src) for kind, src in module.CELLS]


@pytest.mark.slow
@pytest.mark.timeout(660)
@pytest.mark.parametrize('name', sorted(NOTEBOOKS))
def test_notebook_executes_without_errors(name, tmp_path):
    """About a minute each on 2 CPU cores."""
    nbclient = pytest.importorskip('nbclient')
    nb = nbformat.read(os.path.join(ROOT, 'notebooks', name), as_version=4)
    env_threads = os.environ.get('OMP_NUM_THREADS')
    os.environ['OMP_NUM_THREADS'] = '1'  # the kernel inherits it
    try:
        # raises CellExecutionError, naming the cell, on the first error or failed assert
        nbclient.NotebookClient(nb, timeout=600, kernel_name='python3',
                                resources={'metadata': {'path': str(tmp_path)}}).execute()
    finally:
        if env_threads is None:
            os.environ.pop('OMP_NUM_THREADS', None)
        else:
            os.environ['OMP_NUM_THREADS'] = env_threads
    images = [o for c in nb.cells if c.cell_type == 'code' for o in c.outputs
              if o.get('output_type') == 'display_data' and 'image/png' in o.get('data', {})]
    assert len(images) == NOTEBOOKS[name]
