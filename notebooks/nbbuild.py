"""Write, execute and compare the walkthrough notebooks (used by ``build_*.py`` and the tests).

A notebook is committed *executed*: ``python notebooks/build_<name>.py --execute`` writes its
cells, runs it headless with nbclient (``OMP_NUM_THREADS=1``, in a temporary folder) and stores
it with its outputs, so GitHub shows the numbers and pictures. Without ``--execute`` the script
writes the cells only (outputs dropped), for editing.

Freshness: :func:`comparable` reduces a notebook to what must not change silently and is
deterministic on one software stack: every cell's type and source, and for code cells the
sequence of outputs with their text (stdout, results, errors) after :data:`VOLATILE` masks
(working-folder paths, wall-clock timings, speeds) and, for pictures, only their presence and
pixel size. stderr is not stored (tqdm progress bars and library warnings, full of timings)
and PNG bytes are not compared (font rasterisation may differ between machines); pictures
are stored shrunk (:func:`shrink_png`) to keep the files small. The printed losses, mAPs
and LRs are part of the comparison, so a change of the engine that moves any number makes
the committed notebook stale until it is rebuilt.

Other machines: a seeded training run repeats bit for bit only where the CPU kernels sum in
the same order, and another instruction set (AVX-512 / AVX2) changes that order; the run then
drifts within a few steps (ROI sampling flips at a threshold). So :func:`execute` stores the
:func:`float_fingerprint` of the machine that ran the notebook in its metadata; where a
re-execution's fingerprint differs, :func:`compare_across_machines` replaces the exact
comparison: every text exactly, every number before the training run within float noise, the
numbers of the training run and after it counted but not compared.
"""
import argparse
import base64
import copy
import hashlib
import io
import os
import re
import struct
import subprocess
import sys
import tempfile

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

# (pattern, replacement) applied to every text output before comparing
VOLATILE = [
    # tempfile.mkdtemp folders (the notebooks print their working folder)
    (re.compile(re.escape(tempfile.gettempdir()) + r"/[^\s'\"/]+"), '<TMP>'),
    (re.compile(r'working folder: \S+'), 'working folder: <TMP>'),
    # wall-clock durations and speeds
    (re.compile(r'(in|cost:?|took|time:?) \d+(\.\d+)? ?(s|sec|seconds)\b'), r'\1 <T> s'),
    (re.compile(r'Training cost: \d+(\.\d+)?'), 'Training cost: <T>'),
    (re.compile(r'Speed: \d+(\.\d+)? samples/sec'), 'Speed: <S> samples/sec'),
    (re.compile(r'\d+(\.\d+)? ?(s/it|it/s|samples/s)\b'), r'<S> \2'),
    # seamseg's log lines time data loading and batches
    (re.compile(r'\b(data_time|batch_time)=\d+(\.\d+)?( \(\d+(\.\d+)?\))?'), r'\1=<T>'),
    # TensorBoard event files are named after the wall clock and the host
    (re.compile(r'events\.out\.tfevents\.\d+\.[^\s\'"]+'), 'events.out.tfevents.<T>'),
]


def write_notebook(cells, path, outputs_from=None):
    """Write ``cells`` (``('md' | 'code', source)`` pairs) as a notebook to ``path``.

    Parameters
    ----------
    cells : list of (str, str)
        ``'md'`` or ``'code'`` with the cell source.
    path : str
        Output ``.ipynb``.
    outputs_from : nbformat.NotebookNode, optional
        An executed notebook of the same cells whose outputs are kept; without it the cells
        are written without outputs.

    Returns
    -------
    str
        ``path``.
    """
    nb = outputs_from if outputs_from is not None else new_notebook(cells=[
        new_markdown_cell(src) if kind == 'md' else new_code_cell(src) for kind, src in cells])
    _fix_metadata(nb)
    nbformat.validate(nb)
    nbformat.write(nb, path)
    return path


def _fix_metadata(nb):
    # nbformat draws random cell ids and the kernel records its versions: fixed values keep the
    # file the same from one rebuild to the next
    kept = {k: nb.metadata[k] for k in ('gluontrain',) if k in nb.metadata}
    nb.metadata = nbformat.NotebookNode(dict({
        'kernelspec': {'name': 'python3', 'display_name': 'Python 3', 'language': 'python'},
        'language_info': {'name': 'python'}}, **kept))
    for i, cell in enumerate(nb.cells):
        cell['id'] = 'cell-{:02d}'.format(i)
        cell.metadata = nbformat.NotebookNode()


def execute(cells, timeout=600):
    """Run the cells headless and return the executed notebook.

    Raises nbclient's ``CellExecutionError``, naming the cell, on the first error or failed
    assert. The kernel gets ``OMP_NUM_THREADS=1`` and a fresh temporary working folder.
    """
    import nbclient  # pylint: disable=import-outside-toplevel
    nb = new_notebook(cells=[new_markdown_cell(src) if kind == 'md' else new_code_cell(src)
                             for kind, src in cells])
    saved = os.environ.get('OMP_NUM_THREADS')
    os.environ['OMP_NUM_THREADS'] = '1'  # the kernel inherits it
    try:
        with tempfile.TemporaryDirectory(prefix='nb_run_') as run_dir:
            nbclient.NotebookClient(nb, timeout=timeout, kernel_name='python3',
                                    record_timing=False,
                                    resources={'metadata': {'path': run_dir}}).execute()
    finally:
        if saved is None:
            os.environ.pop('OMP_NUM_THREADS', None)
        else:
            os.environ['OMP_NUM_THREADS'] = saved
    nb.metadata['gluontrain'] = nbformat.NotebookNode({'float_fingerprint': float_fingerprint()})
    _fix_metadata(nb)
    for cell in nb.cells:
        if cell.cell_type == 'code':
            cell.outputs = [_stored(o) for o in cell.outputs
                            if not (o.output_type == 'stream' and o.name == 'stderr')]
    return nb


def _stored(output):
    """The output as committed: pictures shrunk to at most STORED_PNG_SIDE pixels a side and
    MAX_COLOURS colours (a few tens of kB each instead of up to 800 kB)."""
    data = output.get('data', {})
    if 'image/png' in data:
        data['image/png'] = shrink_png(data['image/png'])
        output.get('metadata', {}).pop('image/png', None)
    return output


STORED_PNG_SIDE = 640
MAX_COLOURS = 128


def shrink_png(b64):
    """Downscale (longest side STORED_PNG_SIDE) and palette-quantise a base64 PNG; the result
    is a function of the input pixels only."""
    from PIL import Image as PILImage  # pylint: disable=import-outside-toplevel
    img = PILImage.open(io.BytesIO(base64.b64decode(b64))).convert('RGB')
    scale = STORED_PNG_SIDE / max(img.size)
    if scale < 1:
        img = img.resize((max(1, round(img.width * scale)), max(1, round(img.height * scale))),
                         PILImage.LANCZOS)
    img = img.quantize(colors=MAX_COLOURS, method=PILImage.Quantize.MEDIANCUT,
                       dither=PILImage.Dither.NONE)
    buf = io.BytesIO()
    img.save(buf, format='PNG', optimize=True)
    return base64.b64encode(buf.getvalue()).decode('ascii')


def _mask(text):
    for pattern, repl in VOLATILE:
        text = pattern.sub(repl, text)
    return text


def png_size(b64):
    """``(width, height)`` of a base64 PNG, read from its IHDR chunk."""
    head = base64.b64decode(b64[:44])
    return struct.unpack('>II', head[16:24])


def comparable(nb):
    """The deterministic content of a notebook, as nested lists (see the module docstring)."""
    out = []
    for cell in nb.cells:
        entry = [cell.cell_type, cell.source]
        if cell.cell_type == 'code':
            outputs = []
            for o in cell.get('outputs', []):
                kind = o.get('output_type')
                if kind == 'stream':
                    if o.get('name') == 'stdout':
                        outputs.append(['stdout', _mask(o.get('text', ''))])
                elif kind == 'error':
                    outputs.append(['error', o.get('ename'), _mask(o.get('evalue', ''))])
                else:
                    data = o.get('data', {})
                    if 'image/png' in data:
                        outputs.append(['png', list(png_size(data['image/png']))])
                    elif 'text/plain' in data:
                        outputs.append([kind, _mask(data['text/plain'])])
            # consecutive stdout chunks are split wherever the kernel flushed
            merged = []
            for o in outputs:
                if merged and o[0] == 'stdout' and merged[-1][0] == 'stdout':
                    merged[-1] = ['stdout', merged[-1][1] + o[1]]
                else:
                    merged.append(o)
            entry.append(merged)
        out.append(entry)
    return out


# float32 results of the kernels a training run leans on (convolution forward and backward,
# batch norm, matrix product, exp, sigmoid), one thread; run in a fresh interpreter so that the
# caller's imports (MXNet beside torch) and thread settings do not matter
_FINGERPRINT = """
import hashlib, torch
torch.set_num_threads(1)
g = torch.Generator().manual_seed(0)
x = torch.randn(2, 8, 24, 24, generator=g, requires_grad=True)
w = torch.randn(16, 8, 3, 3, generator=g, requires_grad=True)
y = torch.nn.functional.conv2d(x, w, padding=1, stride=2)
z = torch.nn.functional.batch_norm(y, None, None, training=True).flatten(1)
m = z @ torch.randn(z.shape[1], 10, generator=g)
(torch.sigmoid(m).sum() + (m / 100).exp().mean()).backward()
h = hashlib.sha256(torch.__version__.encode())
h.update(torch.backends.cpu.get_cpu_capability().encode())
for t in (y, m, x.grad, w.grad):
    h.update(t.detach().numpy().tobytes())
print('fingerprint', h.hexdigest())
"""
_FINGERPRINT_CACHE = []


def float_fingerprint():
    """16 hex digits naming how this machine's torch CPU kernels round: equal on two machines
    whose kernels sum in the same order (same torch, same instruction-set path), where a
    seeded single-threaded notebook repeats bit for bit; cached per process.

    The probe's own numbers are too small to tell every kernel apart (an AMD processor with
    AVX-512 printed the same as one without, and its training runs drifted), so the hash also
    holds ATen's CPU capability, the instruction set oneDNN reports and the code path MKL
    names in its first verbose line (Intel's per instruction set, one for other vendors),
    its clock speed cut (docs/notebooks.md)."""
    if not _FINGERPRINT_CACHE:
        env = dict(os.environ, OMP_NUM_THREADS='1', ONEDNN_VERBOSE='1', MKL_VERBOSE='1')
        out = subprocess.run([sys.executable, '-c', _FINGERPRINT], env=env, check=True,
                             capture_output=True, text=True).stdout.splitlines()
        probe = [line.split()[1] for line in out if line.startswith('fingerprint ')]
        isa = [line.split('isa:', 1)[1] for line in out if ',info,cpu,isa:' in line]
        mkl = [re.sub(r', Lnx [0-9.]+GHz', ',', line) for line in out
               if line.startswith('MKL_VERBOSE') and ' Lnx ' in line]
        text = '\n'.join(probe[-1:] + isa[:1] + mkl[:1])
        _FINGERPRINT_CACHE.append(hashlib.sha256(text.encode()).hexdigest()[:16])
    return _FINGERPRINT_CACHE[0]


def executed_here(nb):
    """Whether ``nb`` was executed on a machine with this one's :func:`float_fingerprint`
    (False for a notebook that records none)."""
    return nb.metadata.get('gluontrain', {}).get('float_fingerprint') == float_fingerprint()


# a number in printed text: digits not glued to a name or a point (mod1, v1.9 stay text)
NUMBER = re.compile(r'(?<![\w.])[-+]?(?:\d+\.\d+|\d+)(?:[eE][-+]?\d+)?(?!\w|\.\d)')


def numbers_agree(want, got, rtol):
    """Two printed numbers: equal text, or both decimals (a point or an exponent) within
    ``rtol`` of the larger plus one unit of the last printed digit (a value near a rounding
    boundary prints either way). Integers (counts, sizes, labels, epochs) must be equal."""
    if want == got:
        return True
    if not any(c in t for t in (want, got) for c in '.eE'):
        return False
    unit = 0.0
    if 'e' not in (want + got).lower():
        unit = 10.0 ** -min(len(t.partition('.')[2]) for t in (want, got))
    x, y = float(want), float(got)
    return abs(x - y) <= rtol * max(abs(x), abs(y)) + unit * (1 + 1e-9)


def compare_across_machines(want, got, numbers_until, rtol=1e-5):
    """Compare two :func:`comparable` lists of one notebook run on machines whose float
    kernels differ.

    Cell types, sources, the number, kinds and picture sizes of outputs, and every output's
    text with its numbers taken out must be equal. Numbers of cells before ``numbers_until``
    (the first cell that trains) must agree within float noise (:func:`numbers_agree`); a
    training run's numbers (that cell and the later ones) depend on its whole trajectory,
    which drifts on another CPU, so they are only counted.

    Returns
    -------
    (list of str, int)
        The differences found (empty: the notebook is fresh) and how many numbers were not
        compared.
    """
    problems, skipped = [], 0
    if len(want) != len(got):
        problems.append('{} cells, fresh run {}'.format(len(want), len(got)))
    for i, (w, g) in enumerate(zip(want, got)):
        if w[:2] != g[:2]:
            problems.append('cell {}: type or source differs'.format(i))
            continue
        if w[0] != 'code':
            continue
        if [o[0] for o in w[2]] != [o[0] for o in g[2]]:
            problems.append('cell {}: outputs {} vs {}'.format(
                i, [o[0] for o in w[2]], [o[0] for o in g[2]]))
            continue
        for wo, go in zip(w[2], g[2]):
            if wo[0] == 'png' or not isinstance(wo[-1], str):
                if wo != go:
                    problems.append('cell {}: {} vs {}'.format(i, wo, go))
                continue
            wn, gn = NUMBER.findall(wo[-1]), NUMBER.findall(go[-1])
            if NUMBER.sub('<N>', wo[-1]) != NUMBER.sub('<N>', go[-1]) or len(wn) != len(gn) \
                    or wo[:-1] != go[:-1]:
                problems.append('cell {}: text differs'.format(i))
            elif i >= numbers_until:
                skipped += sum(a != b for a, b in zip(wn, gn))
            else:
                bad = [(a, b) for a, b in zip(wn, gn) if not numbers_agree(a, b, rtol)]
                if bad:
                    problems.append('cell {}: numbers differ: {}'.format(i, bad[:5]))
    return problems, skipped


def images(nb):
    """Every PNG a notebook displays, base64, in cell order."""
    return [o['data']['image/png'] for c in nb.cells if c.cell_type == 'code'
            for o in c.get('outputs', []) if 'image/png' in o.get('data', {})]


def main(cells, path, argv=None):
    """Command line of the ``build_*.py`` scripts: write ``path`` (``--execute``: run it and
    keep its outputs)."""
    parser = argparse.ArgumentParser(description='Write {} from its cells.'.format(
        os.path.basename(path)))
    parser.add_argument('--execute', action='store_true',
                        help='run it headless and store it with its outputs (as committed)')
    args = parser.parse_args(argv)
    nb = execute(copy.deepcopy(cells)) if args.execute else None
    print(write_notebook(cells, path, outputs_from=nb))
