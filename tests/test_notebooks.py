"""The notebooks are committed executed, run headless without errors, and are not stale.

Freshness (see notebooks/nbbuild.py): re-executing a notebook must give the committed
notebook's sources and outputs, compared by ``nbbuild.comparable`` (stdout, results and errors
with timings and temporary paths masked; pictures by count and pixel size; stderr not stored).
When it fails, rebuild: ``python notebooks/build_<name>.py --execute``.
"""
import importlib.util
import os
import sys
import tempfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NB_DIR = os.path.join(ROOT, 'notebooks')
# notebook -> pictures it shows (each cell asserts the numbers it prints)
NOTEBOOKS = {
    # augmentation, curves, validation detections
    'yolov3_walkthrough.ipynb': 3,
    # priors, matched priors, augmentations, curves, detections
    'ssd_pytorch.ipynb': 5,
    # anchors, matched anchors, proposals before/after NMS, sampled ROIs, curves, detections
    'twostage_walkthrough.ipynb': 6,
    # ground-truth graphs, frequency statistics, curves, predicted graphs
    'scene_graph.ipynb': 4,
}
# a committed notebook stays small enough to read on GitHub and in a diff
MAX_NOTEBOOK_BYTES = 800 * 1024

nbformat = pytest.importorskip('nbformat')


def _module(path, name):
    sys.path.insert(0, NB_DIR)
    try:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(NB_DIR)
    return module


def _nbbuild():
    return _module(os.path.join(NB_DIR, 'nbbuild.py'), 'nbbuild')


def _build_script(name):
    return _module(os.path.join(NB_DIR, 'build_' + name[:-len('.ipynb')] + '.py'),
                   'build_nb_' + name[:-len('.ipynb')])


def _committed(name):
    return nbformat.read(os.path.join(NB_DIR, name), as_version=4)


def _rebuild_hint(name):
    return 'rebuild it: python notebooks/build_{} --execute'.format(name.replace('.ipynb', '.py'))


@pytest.mark.parametrize('name', sorted(NOTEBOOKS))
def test_notebook_is_committed_executed_with_small_pictures(name):
    nbb = _nbbuild()
    nb = _committed(name)
    code = [c for c in nb.cells if c.cell_type == 'code']
    assert len(code) >= 8
    assert [c.execution_count for c in code] == list(range(1, len(code) + 1)), \
        'not executed top to bottom; ' + _rebuild_hint(name)
    outputs = [o for c in code for o in c.outputs]
    assert not [o for o in outputs if o.output_type == 'error']
    assert not [o for o in outputs if o.output_type == 'stream' and o.name == 'stderr']
    pictures = nbb.images(nb)
    assert len(pictures) == NOTEBOOKS[name]
    assert all(max(nbb.png_size(p)) <= nbb.STORED_PNG_SIDE for p in pictures)
    assert os.path.getsize(os.path.join(NB_DIR, name)) < MAX_NOTEBOOK_BYTES
    # what the build script writes: fixed cell ids and metadata, so rebuilds diff cleanly
    assert [c.id for c in nb.cells] == ['cell-{:02d}'.format(i) for i in range(len(nb.cells))]


@pytest.mark.parametrize('name', sorted(NOTEBOOKS))
def test_notebook_cells_are_what_its_build_script_writes(name):
    """The committed cells equal the build script's (edit the script, then rebuild)."""
    module = _build_script(name)
    committed = _committed(name)
    assert [(c.cell_type, c.source) for c in committed.cells] == \
        [('markdown' if kind == 'md' else 'code', src) for kind, src in module.CELLS], \
        _rebuild_hint(name)


def test_comparable_masks_volatile_text_and_keeps_numbers():
    nbb = _nbbuild()
    from nbformat.v4 import new_code_cell, new_notebook, new_output

    def notebook(text, size):
        png = nbb.shrink_png(_png_b64(size))
        cell = new_code_cell('x', outputs=[
            new_output('stream', name='stdout', text=text[:7]),
            new_output('stream', name='stdout', text=text[7:]),
            new_output('stream', name='stderr', text='progress 3.1it/s'),
            new_output('display_data', data={'image/png': png})])
        return new_notebook(cells=[cell])

    tmp = tempfile.gettempdir()
    log = ('working folder {}\ntrained in {} s; mAP {}\n[Epoch 0] Training cost: {}, ObjLoss=245.505\n'
           "loss=0.583\tdet_map=0.153\tdata_time={}\tbatch_time={}\n['events.out.tfevents.{}.vm']\n")
    a = notebook(log.format(os.path.join(tmp, 'yolov3_ab12cd'), 130, '0.0112', 12.509, 0.006, 0.27,
                            1795435360), (900, 300))
    b = notebook(log.format(os.path.join(tmp, 'ssd_walk_zz9'), 7, '0.0112', 3.001, 0.007, 0.303,
                            1795435490), (900, 300))
    assert nbb.comparable(a) == nbb.comparable(b)
    assert nbb.comparable(a)[0][2][-1] == ['png', [640, 213]]
    moved = notebook(log.format(os.path.join(tmp, 'yolov3_ab12cd'), 130, '0.0113', 12.509, 0.006,
                                0.27, 1795435360), (900, 300))
    assert nbb.comparable(moved) != nbb.comparable(a)
    other_picture = notebook(log.format(os.path.join(tmp, 'yolov3_ab12cd'), 130, '0.0112',
                                        12.509, 0.006, 0.27, 1795435360), (800, 600))
    assert nbb.comparable(other_picture) != nbb.comparable(a)


def _png_b64(size):
    import base64
    import io

    import numpy as np
    from PIL import Image
    pixels = (np.arange(size[0] * size[1] * 3) % 251).astype(np.uint8)
    buf = io.BytesIO()
    Image.fromarray(pixels.reshape(size[1], size[0], 3)).save(buf, format='PNG')
    return base64.b64encode(buf.getvalue()).decode('ascii')


@pytest.mark.slow
@pytest.mark.timeout(660)
@pytest.mark.parametrize('name', sorted(NOTEBOOKS))
def test_notebook_executes_and_matches_its_committed_outputs(name):
    """About two minutes each on 2 CPU cores; raises CellExecutionError on any cell error."""
    pytest.importorskip('nbclient')
    nbb = _nbbuild()
    fresh = nbb.execute(_build_script(name).CELLS)
    assert len(nbb.images(fresh)) == NOTEBOOKS[name]
    want, got = nbb.comparable(_committed(name)), nbb.comparable(fresh)
    for i, (w, g) in enumerate(zip(want, got)):
        assert w == g, 'cell {} differs from the committed notebook; {}'.format(
            i, _rebuild_hint(name))
    assert len(want) == len(got), _rebuild_hint(name)
