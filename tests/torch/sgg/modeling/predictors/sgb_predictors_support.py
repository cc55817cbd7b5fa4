"""SGB's relation predictors for ``test_sgb_equivalence.py``: loading them from the reference
checkout, the shared seeded inputs and weights, and one predictor run.

Both sides of a comparison go through :func:`run_predictor` with the same config, inputs,
random seeds and weights. The weights are not SGB's random initialisation: every parameter
and buffer is set by :func:`fixtures.reference_fill.fill_tensor` from its *name* and shape, so
our side rebuilds them from the recorded key list alone, without SGB.
"""
import atexit
import contextlib
import importlib.util
import io
import json
import os
import shutil
import sys
import tempfile

import numpy as np
import torch

from fixtures.recorded import reference_source
from fixtures.reference_fill import fill_state

CHECKOUT = 'Scene-Graph-Benchmark.pytorch'
REL = 'maskrcnn_benchmark/modeling/roi_heads/relation_head/'
FILES = ['model_motifs.py', 'utils_motifs.py', 'utils_relation.py', 'model_msg_passing.py',
         'model_transformer.py', 'model_vtranse.py', 'model_vctree.py', 'utils_vctree.py',
         'utils_treelstm.py', 'roi_relation_predictors.py']
# Minimal stand-ins for the parts of maskrcnn_benchmark that the relation-head files import.
STUBS = {
    'maskrcnn_benchmark/modeling/registry.py':
        'class _Reg(dict):\n'
        '    def register(self, name):\n'
        '        def deco(cls):\n'
        '            self[name] = cls\n'
        '            return cls\n'
        '        return deco\n'
        'ROI_RELATION_PREDICTOR = _Reg()\n',
    'maskrcnn_benchmark/modeling/make_layers.py':
        'from torch import nn\n'
        'def make_fc(dim_in, hidden_dim, use_gn=False):\n'
        '    fc = nn.Linear(dim_in, hidden_dim)\n'
        '    nn.init.kaiming_uniform_(fc.weight, a=1)\n'
        '    nn.init.constant_(fc.bias, 0)\n'
        '    return fc\n',
    'maskrcnn_benchmark/layers/__init__.py':
        'smooth_l1_loss = kl_div_loss = entropy_loss = None\n'
        'class Label_Smoothing_Regression:\n'
        '    def __init__(self, e=1.0):\n'
        '        pass\n',
    'maskrcnn_benchmark/data/__init__.py':
        'STATS = {}\n'
        'def get_dataset_statistics(cfg):\n'
        '    return STATS\n',
    REL + 'model_motifs_with_attribute.py': 'class AttributeLSTMContext:\n    pass\n',
}
GLOVE_WORDS = ['start', 'man', 'horse', 'tennis', 'racket', 'car', '__background__']


def _load_tiny():
    """The predictor tests' ``conftest.py`` builders, loaded by path under a private name
    (a conftest is not importable by name, and the recording generator runs without pytest)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'conftest.py')
    spec = importlib.util.spec_from_file_location('_sgb_predictors_tiny', path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


#: ``make_cfg``, ``make_statistics``, ``make_inputs``, ``IN_CHANNELS``... of ``conftest.py``.
TINY = _load_tiny()


def write_glove(folder):
    """Write a 6-d GloVe file covering the tiny vocabulary, so SGB never tries to download.

    Parameters
    ----------
    folder : str or path-like
        Destination folder (``cfg.GLOVE_DIR``).

    Returns
    -------
    str
        ``folder``.
    """
    g = torch.Generator().manual_seed(5)
    with open(os.path.join(str(folder), 'glove.6B.6d.txt'), 'w', encoding='utf-8') as f:
        for w in GLOVE_WORDS:
            f.write(w + ' ' + ' '.join('%.4f' % v for v in torch.randn(6, generator=g).tolist())
                    + '\n')
    return str(folder)


def _sgb_modules():
    """``{name: module}`` of every imported ``maskrcnn_benchmark*`` module."""
    return {n: m for n, m in sys.modules.items() if n.startswith('maskrcnn_benchmark')}


class SGBPredictors:
    """SGB's predictor registry, imported from the reference checkout into a temporary tree.

    The ``maskrcnn_benchmark*`` modules and the tree's ``sys.path`` entry exist only inside
    :meth:`active`, so that other test modules of the same process (maskrcnn-benchmark's
    comparisons) never meet them.
    """

    def __init__(self, root, glove_dir):
        self.root, self.glove_dir = root, glove_dir
        self._modules = {}
        with self.active():
            from maskrcnn_benchmark.modeling import registry  # pylint: disable=import-error
            import maskrcnn_benchmark.data as data  # pylint: disable=import-error
            # registers the predictors
            importlib.import_module(REL.replace('/', '.') + 'roi_relation_predictors')
            self._modules = _sgb_modules()
        self.registry, self.stats = registry.ROI_RELATION_PREDICTOR, data.STATS

    @contextlib.contextmanager
    def active(self):
        """Put SGB's tree on ``sys.path`` and its modules in ``sys.modules``; on exit both
        are removed and any ``maskrcnn_benchmark*`` modules from before (maskrcnn-benchmark's
        own, imported by another test module) are put back."""
        before = _sgb_modules()
        for name in before:
            del sys.modules[name]
        sys.path.insert(0, self.root)
        sys.modules.update(self._modules)
        try:
            yield self
        finally:
            sys.path.remove(self.root)
            for name in _sgb_modules():
                del sys.modules[name]
            sys.modules.update(before)


def load_sgb():
    """:class:`SGBPredictors` from ``$GLUONTRAIN_REFERENCES``, or None without SGB's source.

    Returns
    -------
    SGBPredictors or None
        Its temporary folder (sources, GloVe file) is removed at exit.
    """
    sources = {REL + f: reference_source(CHECKOUT, REL + f) for f in FILES}
    sources['maskrcnn_benchmark/modeling/utils.py'] = reference_source(
        CHECKOUT, 'maskrcnn_benchmark/modeling/utils.py')
    if any(v is None for v in sources.values()):
        return None
    root = tempfile.mkdtemp(prefix='sgb-predictors-')
    atexit.register(shutil.rmtree, root, True)
    for d in ('maskrcnn_benchmark', 'maskrcnn_benchmark/modeling',
              'maskrcnn_benchmark/modeling/roi_heads', REL):
        os.makedirs(os.path.join(root, d), exist_ok=True)
        with open(os.path.join(root, d, '__init__.py'), 'w', encoding='utf-8'):
            pass
    sources.update(STUBS)
    for path, text in sources.items():
        os.makedirs(os.path.dirname(os.path.join(root, path)), exist_ok=True)
        with open(os.path.join(root, path), 'w', encoding='utf-8') as f:
            f.write(text)
    glove_dir = os.path.join(root, 'glove')
    os.makedirs(glove_dir)
    return SGBPredictors(root, write_glove(glove_dir))


def make_cfg(glove_dir, name, mode, causal=None):
    """The tiny config of one comparison.

    Parameters
    ----------
    glove_dir : str
        Folder of :func:`write_glove`.
    name : str
        Predictor (``'MotifPredictor'``, ``'CausalAnalysisPredictor'``...).
    mode : str
        ``'predcls'``, ``'sgcls'`` or ``'sgdet'``.
    causal : tuple of str, optional
        ``(CONTEXT_LAYER, FUSION_TYPE, EFFECT_TYPE)`` of the causal predictor; sets
        ``EFFECT_ANALYSIS``.

    Returns
    -------
    yacs.config.CfgNode
    """
    cfg = TINY.make_cfg(glove_dir, mode=mode, predictor=name)
    cfg.MODEL.ROI_RELATION_HEAD.CONTEXT_DROPOUT_RATE = 0.2
    cfg.MODEL.ROI_ATTRIBUTE_HEAD.NUM_ATTRIBUTES = 1        # SGB asserts the attribute count
    if causal:
        c = cfg.MODEL.ROI_RELATION_HEAD.CAUSAL
        c.CONTEXT_LAYER, c.FUSION_TYPE, c.EFFECT_TYPE = causal
        c.EFFECT_ANALYSIS = True
    return cfg


def state_keys(module):
    """``[[name, shape, dtype], ...]`` of ``module.state_dict()`` in order."""
    return [[k, list(v.shape), str(v.dtype)] for k, v in module.state_dict().items()]


def filled_state(keys):
    """The deterministic state for a key list of :func:`state_keys`: ``{name: tensor}``."""
    return {k: torch.from_numpy(v) for k, v in fill_state(keys).items()}


def run_predictor(module, mode, training, steps):
    """Run ``module`` as the comparison does; its outputs of the last step.

    Steps ``0 .. steps - 1`` run in training mode (moving averages), the last one in
    ``training`` mode, each on ``TINY.make_inputs(mode, train, seed=s)`` after
    ``torch.manual_seed(100 + s)``.

    Returns
    -------
    tuple
        ``(obj_logits, rel_logits, losses)``: the concatenated logits and the loss dict.
    """
    # SGB decodes SGCls / SGDet test labels for one image per call
    images = 2 if training or mode == 'predcls' else 1
    for s in range(steps + 1):
        train = training if s == steps else True
        module.train(train)
        inp = list(TINY.make_inputs(mode, train, seed=s))
        n_obj = sum(len(p) for p in inp[0][:images])
        n_rel = sum(len(r) for r in inp[1][:images])
        inp = [inp[0][:images], inp[1][:images],
               inp[2][:images] if inp[2] else None, inp[3][:images] if inp[3] else None,
               inp[4][:n_obj], inp[5][:n_rel]]
        grad = contextlib.nullcontext() if train else torch.no_grad()
        torch.manual_seed(100 + s)
        # SGB prints; ours does not
        with contextlib.redirect_stdout(io.StringIO()), grad:
            out = module(*inp)
    return torch.cat(out[0]), torch.cat(out[1]), out[2]


def sgb_outputs(sgb, name, mode, training, causal=None, steps=0):
    """SGB's side of one comparison.

    SGB's predictor is built on :func:`make_cfg`, its whole state set by
    :func:`filled_state`, and run by :func:`run_predictor`.

    Returns
    -------
    dict
        ``keys`` (its state key list, :func:`state_keys`), ``obj``, ``rel``, ``losses``
        (``{name: 0-d tensor}``) and ``changed``: the final value of every state entry that
        differs from its filled value (the moving averages); the others are still filled.
    """
    stats = TINY.make_statistics()
    with sgb.active():
        sgb.stats.clear()
        sgb.stats.update(stats)
        cfg = make_cfg(sgb.glove_dir, name, mode, causal)
        with contextlib.redirect_stdout(io.StringIO()):
            ref = sgb.registry[name](cfg, TINY.IN_CHANNELS)
        keys = state_keys(ref)
        filled = filled_state(keys)
        ref.load_state_dict(filled, strict=True)
        obj, rel, losses = run_predictor(ref, mode, training, steps)
    changed = {k: v for k, v in ref.state_dict().items() if not torch.equal(v, filled[k])}
    return {'keys': keys, 'obj': obj, 'rel': rel, 'losses': dict(losses), 'changed': changed}


def pack_outputs(runs):
    """A case's return value from ``{label: sgb_outputs(...)}``, in a few arrays.

    One ``.npz`` member per tensor would cost more in headers than the tiny tensors hold, and
    most key lists and moving averages repeat across runs. So every distinct tensor is stored
    once, bit for bit, in ``data/<dtype>`` (the flat concatenation of all tensors of that
    dtype); ``meta`` (UTF-8 JSON bytes) holds the distinct key lists and, per run, where each
    of its tensors lies: ``[dtype, offset, shape]``. :func:`unpack_outputs` reverses it.
    """
    chunks, index = {}, {}

    def ref(value):
        arr = value.detach().cpu().numpy().copy(order='C')  # 0-d stays 0-d
        key = (arr.dtype.str, arr.shape, arr.tobytes())
        if key not in index:
            parts = chunks.setdefault(arr.dtype.name, [])
            index[key] = [arr.dtype.name, sum(p.size for p in parts), list(arr.shape)]
            parts.append(arr.ravel())
        return index[key]

    keysets, meta = [], {}
    for name, run in runs.items():
        if run['keys'] not in keysets:
            keysets.append(run['keys'])
        meta[name] = {'keyset': keysets.index(run['keys']), 'obj': ref(run['obj']),
                      'rel': ref(run['rel']),
                      'losses': {k: ref(v) for k, v in run['losses'].items()},
                      'changed': {k: ref(v) for k, v in run['changed'].items()}}
    meta = {'keysets': keysets, 'runs': meta}
    return {'meta': np.frombuffer(json.dumps(meta, sort_keys=True).encode('utf-8'),
                                  dtype=np.uint8),
            'data': {dt: np.concatenate(parts) for dt, parts in chunks.items()}}


def unpack_outputs(arrays):
    """``{label: run}`` back from a recorded case (flattened :func:`pack_outputs`).

    Returns
    -------
    dict
        ``label -> {'keys', 'obj', 'rel', 'losses', 'changed'}`` with tensors; ``losses`` and
        ``changed`` are ``{name: tensor}`` (possibly empty).
    """
    meta = json.loads(bytes(arrays['meta'].astype(np.uint8)).decode('utf-8'))

    def tensor(where):
        dtype, offset, shape = where
        flat = arrays['data/' + dtype]
        size = int(np.prod(shape, dtype=np.int64))
        return torch.from_numpy(flat[offset:offset + size].reshape(tuple(shape)).copy())

    return {name: {'keys': meta['keysets'][run['keyset']], 'obj': tensor(run['obj']),
                   'rel': tensor(run['rel']),
                   'losses': {k: tensor(v) for k, v in run['losses'].items()},
                   'changed': {k: tensor(v) for k, v in run['changed'].items()}}
            for name, run in meta['runs'].items()}


def label(mode, training, causal=None, steps=0):
    """The name of one comparison inside a case (``'sgcls-test'``, ``'gate-TDE-sgdet-test'``)."""
    parts = list(causal[1:]) if causal else []
    parts += [mode, 'train' if training else 'test']
    if steps:
        parts.append('steps%d' % steps)
    return '-'.join(parts)


def build_ours(predictors, glove_dir, name, mode, keys, causal=None):
    """Our predictor for one comparison, its state set from SGB's key list ``keys``.

    ``load_state_dict(strict=True)`` checks that our names and shapes are SGB's, as loading
    SGB's own state did.
    """
    cfg = make_cfg(glove_dir, name, mode, causal)
    kw = {'hidden_dim': 512} if name == 'IMPPredictor' else {}
    ours = predictors[name](cfg, TINY.IN_CHANNELS, TINY.make_statistics(), **kw)
    ours.load_state_dict(filled_state(keys), strict=True)   # same parameter and buffer names
    return ours
