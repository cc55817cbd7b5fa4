"""The walkthrough notebook runs headless from top to bottom, and is committed without outputs."""
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOTEBOOK = os.path.join(ROOT, 'notebooks', 'yolov3_walkthrough.ipynb')

nbformat = pytest.importorskip('nbformat')


def test_notebook_is_committed_without_outputs():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    code = [c for c in nb.cells if c.cell_type == 'code']
    assert len(code) >= 10
    assert all(not c.outputs and c.execution_count is None for c in code)


@pytest.mark.slow
@pytest.mark.timeout(660)
def test_yolov3_walkthrough_executes_without_errors(tmp_path):
    """About a minute on 2 CPU cores; its cells assert the numbers they show."""
    nbclient = pytest.importorskip('nbclient')
    nb = nbformat.read(NOTEBOOK, as_version=4)
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
    # augmentation, curves, validation detections
    assert len(images) == 3
