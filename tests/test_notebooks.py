"""The notebooks are committed executed, run headless without errors, and are not stale.

Freshness (see notebooks/nbbuild.py): re-executing a notebook must give the committed
notebook's sources and outputs, compared by ``nbbuild.comparable`` (stdout, results and errors
with timings and temporary paths masked; pictures by count and pixel size; stderr not stored).
When it fails, rebuild: ``python notebooks/build_<name>.py --execute``.

Exact where the committed notebook was executed on a machine with this one's float fingerprint
(``nbbuild.float_fingerprint``, stored in the notebook's metadata). Elsewhere the CPU kernels
sum in another order and the seeded training run drifts within a few steps, so the comparison
is ``nbbuild.compare_across_machines``: every source and every output text exactly, numbers
before the notebook's training cell (``TRAINING_CELL``) within float noise, the training run's
numbers counted and reported as a warning, not compared.
"""
import warnings
import importlib.util
import os
import re
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
    # curves, the two backends' detections side by side
    'yolov3_torch.ipynb': 2,
    # detections after reset_class, curves, detections after fine-tuning
    'yolov3_finetune.ipynb': 3,
}
# notebook -> its first cell that trains: from there on its numbers depend on a training run's
# whole trajectory, which repeats bit for bit only on a machine whose kernels round the same
TRAINING_CELL = {
    'yolov3_walkthrough.ipynb': 15,
    'ssd_pytorch.ipynb': 11,
    'twostage_walkthrough.ipynb': 13,
    'scene_graph.ipynb': 9,
    'yolov3_torch.ipynb': 9,
    'yolov3_finetune.ipynb': 3,
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
    # executed by nbbuild.execute, which records the machine it ran on
    assert len(nb.metadata.get('gluontrain', {}).get('float_fingerprint', '')) == 16, \
        _rebuild_hint(name)
    # TRAINING_CELL still names the cell that runs the training loop
    training = nb.cells[TRAINING_CELL[name]].source
    assert re.search(r'state = (recipe\.|trainer\.|yolo3\.)?(do_)?train\(', training), \
        'TRAINING_CELL[{!r}] is not the training cell'.format(name)


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


def test_comparable_masks_seamseg_timings_with_their_running_means():
    nbb = _nbbuild()
    from nbformat.v4 import new_code_cell, new_notebook, new_output

    def notebook(times):
        text = ('[1/2] [ 5/30]\tloss=0.830 (2.621)\tdata_time={} ({})\tbatch_time={} ({})\n'
                .format(*times))
        cell = new_code_cell('x', outputs=[new_output('stream', name='stdout', text=text)])
        return new_notebook(cells=[cell])

    a, b = notebook((0.002, 0.003, 0.181, 0.186)), notebook((0.004, 0.005, 0.25, 0.3))
    assert nbb.comparable(a) == nbb.comparable(b)
    # the loss and its running mean stay compared
    moved = notebook((0.002, 0.003, 0.181, 0.186))
    moved.cells[0].outputs[0].text = moved.cells[0].outputs[0].text.replace('(2.621)', '(2.622)')
    assert nbb.comparable(moved) != nbb.comparable(a)


def test_compare_across_machines_keeps_text_and_tolerates_float_noise_only():
    nbb = _nbbuild()

    def notebook(setup, trained):
        return [['markdown', 'intro'],
                ['code', 'setup()', [['stdout', setup]]],
                ['code', 'train()', [['stdout', trained], ['png', [640, 213]]]]]

    base = notebook('20 positive; box 51.43925094604492, lr 0.0104\n', 'loss=1.146 mAP 0.1527\n')
    assert nbb.compare_across_machines(base, base, 2) == ([], 0)
    noise = notebook('20 positive; box 51.43925094604493, lr 0.0104\n', 'loss=1.280 mAP 0.1660\n')
    assert nbb.compare_across_machines(base, noise, 2) == ([], 2)
    # before the training cell: a count, a number beyond float noise, any text
    for setup in ('21 positive; box 51.43925094604492, lr 0.0104\n',
                  '20 positive; box 51.44925094604492, lr 0.0104\n',
                  '20 positive; box 51.43925094604492, lr 0.0106\n',
                  '20 positives; box 51.43925094604492, lr 0.0104\n'):
        assert nbb.compare_across_machines(base, notebook(setup, 'loss=1.146 mAP 0.1527\n'),
                                           2)[0], setup
    # in and after it: text, the count of numbers and pictures still exactly
    for trained in ('loss=1.146 AP 0.1527\n', 'loss=1.146 mAP 0.1527 0.2\n'):
        assert nbb.compare_across_machines(base, notebook(base[1][2][0][1], trained), 2)[0]
    other_picture = notebook(base[1][2][0][1], 'loss=1.146 mAP 0.1527\n')
    other_picture[2][2][1] = ['png', [640, 480]]
    assert nbb.compare_across_machines(base, other_picture, 2)[0]
    assert nbb.compare_across_machines(base, base[:2], 2)[0]


def test_float_fingerprint_tells_kernel_choices_apart(monkeypatch):
    """ATen's AVX2 kernels forced: the same fingerprint as by default exactly where torch then
    reports the same CPU capability (an AVX2 processor), another where it does not (AVX-512).
    The probe's numbers alone did not tell an AVX-512 processor from an AVX2 one (2026-11-30,
    AMD EPYC Zen 5: the same hash, and every notebook's training run differed there)."""
    import subprocess
    nbb = _nbbuild()
    monkeypatch.delenv('ATEN_CPU_CAPABILITY', raising=False)
    seen = {}
    for capability in (None, 'avx2'):
        if capability is not None:
            monkeypatch.setenv('ATEN_CPU_CAPABILITY', capability)
        reported = subprocess.run([sys.executable, '-c', 'import torch; print(torch.backends.'
                                   'cpu.get_cpu_capability())'], capture_output=True, text=True,
                                  check=True).stdout.strip()
        del nbb._FINGERPRINT_CACHE[:]  # pylint: disable=protected-access
        seen[capability] = (reported, nbb.float_fingerprint())
    (native, native_fp), (forced, forced_fp) = seen[None], seen['avx2']
    assert (native_fp == forced_fp) == (native == forced), seen


def test_float_fingerprint_is_recorded_by_execute_and_kept_on_write(tmp_path):
    nbb = _nbbuild()
    from nbformat.v4 import new_code_cell, new_notebook
    fp = nbb.float_fingerprint()
    assert len(fp) == 16 and int(fp, 16) >= 0
    nb = new_notebook(cells=[new_code_cell('1')])
    assert not nbb.executed_here(nb)
    nb.metadata['gluontrain'] = {'float_fingerprint': fp}
    path = nbb.write_notebook([('code', '1')], str(tmp_path / 'x.ipynb'), outputs_from=nb)
    assert nbb.executed_here(nbformat.read(path, as_version=4))
    nb.metadata['gluontrain'] = {'float_fingerprint': '0' * 16}
    assert not nbb.executed_here(nb)


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
    committed = _committed(name)
    want, got = nbb.comparable(committed), nbb.comparable(fresh)
    if nbb.executed_here(committed):
        for i, (w, g) in enumerate(zip(want, got)):
            assert w == g, 'cell {} differs from the committed notebook; {}'.format(
                i, _rebuild_hint(name))
        assert len(want) == len(got), _rebuild_hint(name)
        return
    problems, skipped = nbb.compare_across_machines(want, got, TRAINING_CELL[name])
    assert not problems, '{}; {}'.format('; '.join(problems), _rebuild_hint(name))
    if skipped:
        warnings.warn('{} was executed on a machine whose float kernels round otherwise (float '
                      'fingerprint {}, here {}): {} numbers of its training run were not '
                      'compared; {} to compare them exactly'.format(
                          name, committed.metadata.get('gluontrain', {}).get(
                              'float_fingerprint', 'not recorded'),
                          nbb.float_fingerprint(), skipped, _rebuild_hint(name)))
