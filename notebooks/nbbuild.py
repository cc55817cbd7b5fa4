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
"""
import argparse
import base64
import copy
import io
import os
import re
import struct
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
    (re.compile(r'\b(data_time|batch_time)=\d+(\.\d+)?'), r'\1=<T>'),
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
    nb.metadata = nbformat.NotebookNode({
        'kernelspec': {'name': 'python3', 'display_name': 'Python 3', 'language': 'python'},
        'language_info': {'name': 'python'}})
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
