"""Test support for the scene-graph evaluation: a tiny fake VGDataset, prediction builders,
and a loader for Scene-Graph-Benchmark's OWN evaluation code (reference outputs).

``load_sgb_modules(tmpdir)`` writes SGB's ``sgg_eval.py``, ``vg_eval.py``, ``bounding_box.py``,
``boxlist_ops.py``, ``miscellaneous.py`` and ``comm.py`` from the checkout under
``$GLUONTRAIN_REFERENCES`` (``SGB_MIRROR``, ``git show HEAD:<path>``) into ``tmpdir`` at run
time, with empty stubs for the compiled parts they import (``maskrcnn_benchmark.layers``,
``.data``), imports them and takes them out of ``sys.modules`` again (``installed`` puts them
back for code that pickles SGB's classes). ``load_live_sgb`` is the ``load_live`` of the
recorders of test_vg_eval.py and test_inference.py (``fixtures.recorded``): their comparisons
run against SGB's outputs recorded in ``tests/fixtures/recorded/`` everywhere and against SGB's
code itself when the checkout is there. Nothing of SGB's source is stored in this repository.
``python sgg_eval_support.py`` checks that SGB's evaluation loads.
"""
import atexit
import contextlib
import functools
import importlib
import os
import shutil
import subprocess
import sys
import tempfile
import types

import numpy as np
import torch

from gluontrain.torch.twostage.structures import BoxList

# bench/sgg_bench.py imports this module, then test_vg_eval.py (which imports
# fixtures.recorded), with only this folder on sys.path: make tests/ reachable there too
# (appended, and a no-op under pytest, where tests/ is already on sys.path)
_TESTS = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
if not any(os.path.abspath(p) == _TESTS for p in sys.path if p):
    sys.path.append(_TESTS)

# The git directory of the Scene-Graph-Benchmark checkout under $GLUONTRAIN_REFERENCES
# (docs/testing.md; as fixtures.recorded.references_dir, which bench/sgg_bench.py cannot
# import); '' when it is not set. A module global: bench/sgg_bench.py points it elsewhere.
_REFS = os.environ.get('GLUONTRAIN_REFERENCES', '')
SGB_MIRROR = os.path.join(_REFS, 'Scene-Graph-Benchmark.pytorch', '.git') if _REFS else ''
SGB_FILES = ('maskrcnn_benchmark/data/datasets/evaluation/vg/sgg_eval.py',
             'maskrcnn_benchmark/data/datasets/evaluation/vg/vg_eval.py',
             'maskrcnn_benchmark/structures/bounding_box.py',
             'maskrcnn_benchmark/structures/boxlist_ops.py',
             'maskrcnn_benchmark/utils/miscellaneous.py',
             'maskrcnn_benchmark/utils/comm.py')
SGB_ZEROSHOT = 'maskrcnn_benchmark/data/datasets/evaluation/vg/zeroshot_triplet.pytorch'
STUBS = {'maskrcnn_benchmark/layers/__init__.py': 'nms = None\n',
         'maskrcnn_benchmark/data/__init__.py': 'get_dataset_statistics = None\n'}

CLASSES = ['__background__', 'man', 'horse', 'hat', 'tree', 'dog']
PREDICATES = ['__background__', 'on', 'has', 'near', 'wearing']


def sgb_available():
    """Whether the SGB mirror can be read with git."""
    return bool(SGB_MIRROR) and os.path.isdir(SGB_MIRROR) and subprocess.run(
        ['git', '--git-dir', SGB_MIRROR, 'cat-file', '-e', 'HEAD:' + SGB_FILES[0]],
        capture_output=True, check=False).returncode == 0


def sgb_bytes(path):
    """Bytes of ``path`` at HEAD of the SGB mirror (binary files too: ``reference_source``
    reads text)."""
    return subprocess.run(['git', '--git-dir', SGB_MIRROR, 'show', 'HEAD:' + path],
                          capture_output=True, check=True).stdout


_show = sgb_bytes   # the old name


def _sgb_entries():
    return {n: m for n, m in sys.modules.items() if n.split('.')[0] == 'maskrcnn_benchmark'}


@contextlib.contextmanager
def installed(modules):
    """Put ``modules`` (name -> module) in ``sys.modules`` for the ``with`` block (pickle
    finds SGB's classes by module name), then restore the entries found before.

    Parameters
    ----------
    modules : dict of str to module
        Typically ``load_sgb_modules(...).modules``.
    """
    saved = _sgb_entries()
    for name in saved:
        del sys.modules[name]
    sys.modules.update(modules)
    try:
        yield
    finally:
        for name in _sgb_entries():
            del sys.modules[name]
        sys.modules.update(saved)


def load_sgb_modules(tmpdir):
    """Import SGB's evaluation modules from a copy written in ``tmpdir``.

    ``sys.modules`` and ``sys.path`` are left as found: other ``maskrcnn_benchmark``
    packages (maskrcnn-benchmark's, imported by other test modules) are not disturbed.

    Parameters
    ----------
    tmpdir : str
        Empty folder that outlives the modules.

    Returns
    -------
    types.SimpleNamespace
        ``sgg_eval``, ``vg_eval``, ``bounding_box`` (modules), ``modules`` (every
        ``maskrcnn_benchmark*`` module imported, for :func:`installed`) and ``dir``.
    """
    tmpdir = str(tmpdir)
    for path in SGB_FILES:
        full = os.path.join(tmpdir, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, 'wb') as f:
            f.write(sgb_bytes(path))
    for path, text in STUBS.items():
        os.makedirs(os.path.dirname(os.path.join(tmpdir, path)), exist_ok=True)
        with open(os.path.join(tmpdir, path), 'w') as f:
            f.write(text)
    pkg = os.path.join(tmpdir, 'maskrcnn_benchmark')
    for root, _, files in os.walk(pkg):
        if '__init__.py' not in files:
            open(os.path.join(root, '__init__.py'), 'w').close()
    with installed({}):
        sys.path.insert(0, tmpdir)
        try:
            base = 'maskrcnn_benchmark.data.datasets.evaluation.vg.'
            importlib.invalidate_caches()
            out = types.SimpleNamespace(
                sgg_eval=importlib.import_module(base + 'sgg_eval'),
                vg_eval=importlib.import_module(base + 'vg_eval'),
                bounding_box=importlib.import_module('maskrcnn_benchmark.structures.bounding_box'),
                modules=_sgb_entries(), dir=tmpdir)
        finally:
            sys.path.remove(tmpdir)
    return out


def write_zeroshot(folder, zeroshot=None):
    """Write the zero-shot file SGB's ``do_vg_evaluation`` reads (a path relative to the
    cwd) under ``folder``: ``zeroshot`` (Z, 3) as SGB's format, or SGB's shipped file."""
    zs = os.path.join(str(folder), SGB_ZEROSHOT)
    os.makedirs(os.path.dirname(zs), exist_ok=True)
    if zeroshot is None:
        with open(zs, 'wb') as f:
            f.write(sgb_bytes(SGB_ZEROSHOT))
    else:
        torch.save(torch.as_tensor(np.asarray(zeroshot, np.int64).reshape(-1, 3)), zs)


@contextlib.contextmanager
def sgb_workdir(zeroshot=None):
    """A temporary cwd holding SGB's zero-shot file (see :func:`write_zeroshot`) for the
    ``with`` block; yields its path, removed afterwards."""
    cwd, folder = os.getcwd(), tempfile.mkdtemp(prefix='sgb-cwd-')
    try:
        write_zeroshot(folder, zeroshot)
        os.chdir(folder)
        yield folder
    finally:
        os.chdir(cwd)
        shutil.rmtree(folder, ignore_errors=True)


def load_sgb(tmpdir, zeroshot=None):
    """SGB's ``sgg_eval`` and ``vg_eval`` modules from a copy written in ``tmpdir``, with
    ``zeroshot`` (Z, 3; default SGB's shipped file) as the zero-shot file there (call
    ``do_vg_evaluation`` with ``tmpdir`` as cwd)."""
    sgb = load_sgb_modules(tmpdir)
    write_zeroshot(tmpdir, zeroshot)
    return sgb.sgg_eval, sgb.vg_eval


@functools.lru_cache(maxsize=None)
def load_live_sgb():
    """SGB's evaluation (:func:`load_sgb_modules`, in a temporary folder removed at exit),
    or None without the checkout: the ``load_live`` of the recorders."""
    if not sgb_available():
        return None
    tmpdir = tempfile.mkdtemp(prefix='sgb-eval-')
    atexit.register(shutil.rmtree, tmpdir, True)
    return load_sgb_modules(tmpdir)


class FakeVG:
    """The part of VGDataset the evaluation reads, on fixed in-memory ground truth.

    Parameters
    ----------
    images : list of dict
        ``width``, ``height``, ``boxes`` (N, 4 xyxy), ``labels`` (N,), ``rels`` (R, 3).
    """

    def __init__(self, images, classes=CLASSES, predicates=PREDICATES):
        self.images = images
        self.ind_to_classes = list(classes)
        self.ind_to_predicates = list(predicates)
        self.categories = dict(enumerate(self.ind_to_classes))
        self.filenames = ['img{}.jpg'.format(i) for i in range(len(images))]

    def __len__(self):
        return len(self.images)

    def get_img_info(self, index):
        im = self.images[index]
        return {'width': im['width'], 'height': im['height']}

    def get_groundtruth(self, index, evaluation=False, flip_img=False):
        im = self.images[index]
        gt = BoxList(torch.tensor(im['boxes'], dtype=torch.float32).reshape(-1, 4),
                     (im['width'], im['height']), 'xyxy')
        gt.add_field('labels', torch.tensor(im['labels'], dtype=torch.int64))
        gt.add_field('relation_tuple',
                     torch.tensor(im['rels'], dtype=torch.int64).reshape(-1, 3))
        return gt


def make_prediction(boxes, size, pred_labels, pred_scores, rel_pairs, rel_scores,
                    labels=None):
    """A prediction BoxList with SGB's fields (``pred_rel_labels`` from the scores)."""
    p = BoxList(torch.tensor(boxes, dtype=torch.float32).reshape(-1, 4), size, 'xyxy')
    p.add_field('pred_labels', torch.tensor(pred_labels, dtype=torch.int64))
    p.add_field('pred_scores', torch.tensor(pred_scores, dtype=torch.float32))
    if labels is not None:
        p.add_field('labels', torch.tensor(labels, dtype=torch.int64))
    rel_scores = torch.tensor(rel_scores, dtype=torch.float32)
    rel_scores = rel_scores.reshape(len(rel_pairs), -1) if len(rel_pairs) else \
        torch.zeros(0, len(PREDICATES))
    p.add_field('rel_pair_idxs', torch.tensor(rel_pairs, dtype=torch.int64).reshape(-1, 2))
    p.add_field('pred_rel_scores', rel_scores)
    p.add_field('pred_rel_labels', rel_scores[:, 1:].argmax(1) + 1 if len(rel_pairs)
                else torch.zeros(0, dtype=torch.int64))
    return p


def random_case(seed, num_images=6, mode='sgdet', num_classes=len(CLASSES),
                num_rel=len(PREDICATES), scale=1.0):
    """A random dataset and predictions (jittered GT boxes, random labels and scores,
    every ordered pair, sorted by triplet score as SGB's post-processor), predictions in
    an input size ``scale`` times the image size."""
    rng = np.random.RandomState(seed)
    images, preds = [], []
    for _ in range(num_images):
        w, h = int(rng.randint(60, 120)), int(rng.randint(60, 120))
        n = int(rng.randint(2, 7))
        xy = rng.randint(0, 40, size=(n, 2))
        wh = rng.randint(5, 20, size=(n, 2))
        boxes = np.column_stack((xy, xy + wh)).astype(np.float32)
        labels = rng.randint(1, num_classes, size=n)
        nrel = int(rng.randint(1, 6))
        rels = np.column_stack((rng.randint(0, n, nrel), rng.randint(0, n, nrel),
                                rng.randint(1, num_rel, nrel)))
        rels = rels[rels[:, 0] != rels[:, 1]]
        if len(rels) and rng.rand() < 0.5:
            rels = np.concatenate((rels, rels[:1]))   # a duplicate GT triplet
        images.append({'width': w, 'height': h, 'boxes': boxes.tolist(),
                       'labels': labels.tolist(), 'rels': rels.tolist()})
        if mode == 'sgdet':
            m = n + int(rng.randint(0, 3))
            src = rng.randint(0, n, m)
            pboxes = boxes[src] + rng.randint(-3, 4, size=(m, 4))
            plabels = np.where(rng.rand(m) < 0.7, labels[src], rng.randint(1, num_classes, m))
        else:
            m, pboxes = n, boxes.copy()
            plabels = np.where(rng.rand(m) < 0.7, labels, rng.randint(1, num_classes, m))
        pscores = rng.rand(m).astype(np.float32)
        pairs = np.array([(i, j) for i in range(m) for j in range(m) if i != j])
        rs = rng.rand(len(pairs), num_rel).astype(np.float32)
        rs /= rs.sum(1, keepdims=True)
        order = np.argsort(-(rs[:, 1:].max(1) * pscores[pairs[:, 0]] * pscores[pairs[:, 1]]),
                           kind='stable')
        pw, ph = w * scale, h * scale
        preds.append(make_prediction(pboxes * scale, (pw, ph), plabels, pscores,
                                     pairs[order], rs[order], labels=labels))
    return FakeVG(images), preds


if __name__ == '__main__':
    with tempfile.TemporaryDirectory() as d:
        sgg, _ = load_sgb(d)
        print('SGB sgg_eval loaded from', SGB_MIRROR, [c for c in dir(sgg) if c.startswith('SG')])
