"""The predictors against Scene-Graph-Benchmark's own code: same weights, same inputs, same
random streams -> bit-identical logits, losses and moving averages.

SGB's relation-head files are read from a local bare mirror at test time (never stored in
this repository) and imported behind minimal stand-ins for the rest of maskrcnn_benchmark
(registry, ``make_fc``, ``get_dataset_statistics``). Skipped when the mirror is absent; point
``SGB_MIRROR`` at a bare clone of KaihuaTang/Scene-Graph-Benchmark.pytorch to run it elsewhere.
"""
import contextlib
import io
import itertools
import os
import shutil
import subprocess
import sys

import pytest
import torch

from gluontrain.torch.sgg.modeling.predictors import PREDICTORS

# SGB's own VCTree code calls float() on a tensor that requires grad
pytestmark = pytest.mark.filterwarnings('ignore:Converting a tensor with requires_grad')

# The git directory of a Scene-Graph-Benchmark checkout under $GLUONTRAIN_REFERENCES
# (docs/testing.md); '' (tests skip) when it is not set.
_REFS = os.environ.get('GLUONTRAIN_REFERENCES', '')
MIRROR = os.path.join(_REFS, 'Scene-Graph-Benchmark.pytorch', '.git') if _REFS else ''
REL = 'maskrcnn_benchmark/modeling/roi_heads/relation_head/'
FILES = ['model_motifs.py', 'utils_motifs.py', 'utils_relation.py', 'model_msg_passing.py',
         'model_transformer.py', 'model_vtranse.py', 'model_vctree.py', 'utils_vctree.py',
         'utils_treelstm.py', 'roi_relation_predictors.py']
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


def _git_show(path):
    return subprocess.run(['git', '--git-dir', MIRROR, 'show', 'HEAD:' + path], check=True,
                          capture_output=True).stdout


@pytest.fixture(scope='module')
def sgb(tmp_path_factory):
    """SGB's predictor registry, imported from the mirror."""
    if not os.path.isdir(MIRROR) or shutil.which('git') is None:
        pytest.skip("GLUONTRAIN_REFERENCES not set: needs SGB's source (docs/testing.md)")
    root = tmp_path_factory.mktemp('sgb')
    for d in ('maskrcnn_benchmark', 'maskrcnn_benchmark/modeling',
              'maskrcnn_benchmark/modeling/roi_heads', REL):
        os.makedirs(root / d, exist_ok=True)
        (root / d / '__init__.py').write_text('')
    for f in FILES:
        (root / REL / f).write_bytes(_git_show(REL + f))
    (root / 'maskrcnn_benchmark/modeling/utils.py').write_bytes(
        _git_show('maskrcnn_benchmark/modeling/utils.py'))
    for path, text in STUBS.items():
        os.makedirs((root / path).parent, exist_ok=True)
        (root / path).write_text(text)
    sys.path.insert(0, str(root))
    try:
        from maskrcnn_benchmark.modeling import registry
        import maskrcnn_benchmark.data as data
        from maskrcnn_benchmark.modeling.roi_heads.relation_head import \
            roi_relation_predictors  # noqa: F401  (registers the predictors)
        yield registry.ROI_RELATION_PREDICTOR, data.STATS
    finally:
        sys.path.remove(str(root))
        for name in [m for m in sys.modules if m.startswith('maskrcnn_benchmark')]:
            del sys.modules[name]


@pytest.fixture(scope='module')
def glove(tmp_path_factory):
    """A GloVe file covering the tiny vocabulary, so SGB never tries to download."""
    folder = tmp_path_factory.mktemp('glove')
    g = torch.Generator().manual_seed(5)
    with open(folder / 'glove.6B.6d.txt', 'w') as f:
        for w in ['start', 'man', 'horse', 'tennis', 'racket', 'car', '__background__']:
            f.write(w + ' ' + ' '.join('%.4f' % v for v in torch.randn(6, generator=g).tolist())
                    + '\n')
    return folder


def _compare(sgb, tiny, glove, name, mode, training, causal=None, steps=0):
    registry, stats_holder = sgb
    stats = tiny.make_statistics()
    stats_holder.clear()
    stats_holder.update(stats)
    cfg = tiny.make_cfg(glove, mode=mode, predictor=name)
    cfg.MODEL.ROI_RELATION_HEAD.CONTEXT_DROPOUT_RATE = 0.2
    cfg.MODEL.ROI_ATTRIBUTE_HEAD.NUM_ATTRIBUTES = 1        # SGB asserts the attribute count
    if causal:
        c = cfg.MODEL.ROI_RELATION_HEAD.CAUSAL
        c.CONTEXT_LAYER, c.FUSION_TYPE, c.EFFECT_TYPE = causal
        c.EFFECT_ANALYSIS = True
    with contextlib.redirect_stdout(io.StringIO()):
        ref = registry[name](cfg, tiny.IN_CHANNELS)
    kw = {'hidden_dim': 512} if name == 'IMPPredictor' else {}
    ours = PREDICTORS[name](cfg, tiny.IN_CHANNELS, stats, **kw)
    ours.load_state_dict(ref.state_dict(), strict=True)   # same parameter and buffer names
    # SGB decodes SGCls / SGDet test labels for one image per call
    images = 2 if training or mode == 'predcls' else 1
    for s in range(steps + 1):
        train = training if s == steps else True
        ref.train(train)
        ours.train(train)
        inp = list(tiny.make_inputs(mode, train, seed=s))
        n_obj = sum(len(p) for p in inp[0][:images])
        n_rel = sum(len(r) for r in inp[1][:images])
        inp = [inp[0][:images], inp[1][:images],
               inp[2][:images] if inp[2] else None, inp[3][:images] if inp[3] else None,
               inp[4][:n_obj], inp[5][:n_rel]]
        grad = contextlib.nullcontext() if train else torch.no_grad()
        torch.manual_seed(100 + s)
        with contextlib.redirect_stdout(io.StringIO()), grad:
            r = ref(*inp)
        torch.manual_seed(100 + s)
        with grad:
            o = ours(*inp)
    assert torch.equal(torch.cat(r[0]), torch.cat(o[0]))
    assert torch.equal(torch.cat(r[1]), torch.cat(o[1]))
    assert r[2].keys() == o[2].keys()
    for k in r[2]:
        assert torch.equal(r[2][k], o[2][k]), k
    for (k, a), b in zip(ref.state_dict().items(), ours.state_dict().values()):
        assert torch.equal(a, b), k


@pytest.mark.parametrize('name', ['MotifPredictor', 'IMPPredictor', 'TransformerPredictor',
                                  'VCTreePredictor'])
def test_predictor_equals_sgb(sgb, tiny, glove, name):
    for mode, training in itertools.product(['predcls', 'sgcls', 'sgdet'], [True, False]):
        _compare(sgb, tiny, glove, name, mode, training)


@pytest.mark.parametrize('context', ['motifs', 'vtranse', 'vctree'])
def test_causal_effects_equal_sgb(sgb, tiny, glove, context):
    """Three training steps (moving averages), then each effect at test time."""
    for fusion, effect, mode in itertools.product(['sum', 'gate'], ['TDE', 'NIE', 'TE', 'none'],
                                                  ['predcls', 'sgcls', 'sgdet']):
        _compare(sgb, tiny, glove, 'CausalAnalysisPredictor', mode, False,
                 causal=(context, fusion, effect), steps=3)
    _compare(sgb, tiny, glove, 'CausalAnalysisPredictor', 'sgdet', True,
             causal=(context, 'sum', 'TDE'), steps=2)
