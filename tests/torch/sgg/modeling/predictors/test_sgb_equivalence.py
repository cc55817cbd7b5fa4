"""The predictors against Scene-Graph-Benchmark's own code: same weights, same inputs, same
random streams -> bit-identical logits, losses and moving averages (live, on one machine;
against the recording, made on another CPU, within float32 noise: ``RTOL``).

Each test runs twice (``fixtures.recorded.SOURCES``): against the committed recording of SGB's
outputs (``tests/fixtures/recorded/sgb_predictors.npz``, everywhere) and live against SGB's
relation-head files from ``$GLUONTRAIN_REFERENCES`` (skipped without it), imported behind
minimal stand-ins for the rest of maskrcnn_benchmark (``sgb_predictors_support``). Regenerate
the recording with ``tests/fixtures/make_recorded_fixtures.py sgb_predictors``.

Both predictors get every parameter and buffer from ``fixtures.reference_fill`` by name and
shape (not SGB's random initialisation), so our side rebuilds SGB's weights from the recorded
key list alone; loading them with ``strict=True`` checks that the names and shapes match.
"""
import itertools

import pytest
import torch

from fixtures.recorded import SOURCES, Recorder, assert_close_to_recording
from gluontrain.torch.sgg.modeling.predictors import PREDICTORS
from sgb_predictors_support import (build_ours, filled_state, label, load_sgb, pack_outputs,
                                    run_predictor, sgb_outputs, unpack_outputs, write_glove)

# SGB's own VCTree code calls float() on a tensor that requires grad
pytestmark = pytest.mark.filterwarnings('ignore:Converting a tensor with requires_grad')

SGB = Recorder('sgb_predictors', load_sgb, "SGB's relation-head source")
NAMES = ['MotifPredictor', 'IMPPredictor', 'TransformerPredictor', 'VCTreePredictor']
CONTEXTS = ['motifs', 'vtranse', 'vctree']
#: float32 outputs against a recording made on another CPU (its LSTM / matmul kernels sum in
#: another order), as a fraction of each array's largest magnitude. Measured between the first
#: recording machine and an AVX2-only EPYC Zen 1 (CI's, which recorded the file since):
#: MotifPredictor's and causal-motifs' object logits off by 5.6e-8 / 4.4e-8 (one
#: ulp), everything else equal; 1e-5 leaves room for other ISAs and stays orders of magnitude
#: below what a changed formula, weight or random draw does to a logit.
RTOL = 1e-5


def _predictor_runs():
    """``(mode, training)`` of every plain-predictor comparison."""
    return list(itertools.product(['predcls', 'sgcls', 'sgdet'], [True, False]))


def _causal_runs(context):
    """``(mode, training, causal, steps)`` of every causal comparison: three training steps
    (moving averages) then each effect at test time, and two steps then a training step."""
    runs = [(mode, False, (context, fusion, effect), 3) for fusion, effect, mode in
            itertools.product(['sum', 'gate'], ['TDE', 'NIE', 'TE', 'none'],
                              ['predcls', 'sgcls', 'sgdet'])]
    return runs + [('sgdet', True, (context, 'sum', 'TDE'), 2)]


@SGB.case(params=NAMES)
def predictor(sgb, name):
    """SGB's ``name`` in each mode, training and test: logits, losses, final state."""
    return pack_outputs({label(mode, training): sgb_outputs(sgb, name, mode, training)
                         for mode, training in _predictor_runs()})


@SGB.case(params=CONTEXTS)
def causal(sgb, context):
    """SGB's CausalAnalysisPredictor on ``context``: every fusion, effect and mode."""
    return pack_outputs({label(mode, training, c, steps):
                         sgb_outputs(sgb, 'CausalAnalysisPredictor', mode, training, c, steps)
                         for mode, training, c, steps in _causal_runs(context)})


@pytest.fixture(scope='module')
def glove(tmp_path_factory):
    """A GloVe file covering the tiny vocabulary (the one SGB's side was built with)."""
    return write_glove(tmp_path_factory.mktemp('glove'))


def _compare(ref, glove, name, mode, training, causal=None, steps=0, source='live'):
    """Our ``name`` against SGB's recorded or live run ``ref`` (see ``sgb_outputs``).

    Live (SGB's code run here, now): bit for bit. Recorded (on another CPU): the key list and
    the state entries SGB left at their filled values exactly, the float32 logits, losses and
    moving averages within ``RTOL`` of each array's largest magnitude (kernels sum in another
    order there; see ``assert_close_to_recording``).
    """
    def same(want, got, what):
        if source == 'live':
            assert torch.equal(want, got), what
        else:
            assert_close_to_recording(want.numpy(), got, rtol=RTOL, what=what)

    ours = build_ours(PREDICTORS, glove, name, mode, ref['keys'], causal)
    obj, rel, losses = run_predictor(ours, mode, training, steps)
    same(ref['obj'], obj, 'obj')
    same(ref['rel'], rel, 'rel')
    assert ref['losses'].keys() == losses.keys()
    for k in ref['losses']:
        same(ref['losses'][k], losses[k].detach(), k)
    # SGB's final state: its changed entries as recorded, the others still filled (exactly:
    # the fill is NumPy's, the same on every machine)
    filled = filled_state(ref['keys'])
    for (k, _, _), b in zip(ref['keys'], ours.state_dict().values()):
        if k in ref['changed']:
            same(ref['changed'][k], b, k)
        else:
            assert torch.equal(filled[k], b), k


@pytest.mark.parametrize('source', SOURCES)
@pytest.mark.parametrize('name', NAMES)
def test_predictor_equals_sgb(glove, name, source):
    runs = unpack_outputs(SGB.outputs('predictor[%s]' % name, source))
    assert sorted(runs) == sorted(label(*r) for r in _predictor_runs())
    for mode, training in _predictor_runs():
        _compare(runs[label(mode, training)], glove, name, mode, training, source=source)


@pytest.mark.parametrize('source', SOURCES)
@pytest.mark.parametrize('context', CONTEXTS)
def test_causal_effects_equal_sgb(glove, context, source):
    """Three training steps (moving averages), then each effect at test time."""
    runs = unpack_outputs(SGB.outputs('causal[%s]' % context, source))
    assert sorted(runs) == sorted(label(*r) for r in _causal_runs(context))
    for mode, training, c, steps in _causal_runs(context):
        _compare(runs[label(mode, training, c, steps)], glove, 'CausalAnalysisPredictor',
                 mode, training, c, steps, source)
