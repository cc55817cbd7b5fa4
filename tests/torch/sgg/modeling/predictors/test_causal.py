"""CausalAnalysisPredictor: shapes, auxiliary losses, moving averages, TDE/NIE/TE formulas."""
import pytest
import torch
from torch.nn import functional as F

from gluontrain.torch.sgg.modeling.predictors import build_predictor
from gluontrain.torch.sgg.modeling.predictors.causal import CausalAnalysisPredictor
from gluontrain.torch.sgg.modeling.predictors.utils_relation import get_box_info


def _cfg(tiny, glove_dir, mode='predcls', effect='TDE', fusion='sum', context='motifs'):
    cfg = tiny.make_cfg(glove_dir, mode=mode, predictor='CausalAnalysisPredictor')
    c = cfg.MODEL.ROI_RELATION_HEAD.CAUSAL
    c.EFFECT_ANALYSIS = effect is not None
    c.EFFECT_TYPE = effect or 'none'
    c.FUSION_TYPE = fusion
    c.CONTEXT_LAYER = context
    return cfg


def _trained(tiny, glove_dir, steps=3, **kw):
    """A predictor after a few training forwards (so the untreated averages are non-zero)."""
    torch.manual_seed(0)
    cfg = _cfg(tiny, glove_dir, **kw)
    pred = build_predictor(cfg, tiny.IN_CHANNELS, tiny.make_statistics())
    mode = kw.get('mode', 'predcls')
    pred.train()
    for s in range(steps):
        pred(*tiny.make_inputs(mode, True, seed=s))
    return pred.eval()


@pytest.mark.parametrize('mode', ['predcls', 'sgcls', 'sgdet'])
@pytest.mark.parametrize('context', ['motifs', 'vtranse', 'vctree'])
@pytest.mark.parametrize('fusion', ['sum', 'gate'])
def test_shapes_and_auxiliary_losses(tiny, glove_dir, mode, context, fusion):
    torch.manual_seed(0)
    cfg = _cfg(tiny, glove_dir, mode=mode, fusion=fusion, context=context)
    pred = build_predictor(cfg, tiny.IN_CHANNELS, tiny.make_statistics())
    assert isinstance(pred, CausalAnalysisPredictor)
    inputs = tiny.make_inputs(mode, True)
    obj_dists, rel_dists, losses = pred.train()(*inputs)
    assert [tuple(d.shape) for d in obj_dists] == [(3, 5), (4, 5)]
    assert [tuple(d.shape) for d in rel_dists] == [(3, 4), (5, 4)]
    expected = {'auxiliary_ctx'} if fusion == 'gate' else {'auxiliary_ctx', 'auxiliary_vis',
                                                           'auxiliary_frq'}
    if context == 'vctree':
        expected.add('binary_loss')                      # the tree scores' loss
    assert set(losses) == expected
    total = sum(losses.values()) + F.cross_entropy(torch.cat(rel_dists), torch.cat(inputs[2]))
    total.backward()
    assert pred.ctx_compress.weight.grad.abs().sum() > 0
    assert pred.post_emb.weight.grad.abs().sum() > 0
    _, rel_eval, losses = pred.eval()(*tiny.make_inputs(mode, False))
    assert [tuple(d.shape) for d in rel_eval] == [(3, 4), (5, 4)] and losses == {}


def test_auxiliary_losses_are_branch_cross_entropies(tiny, glove_dir):
    torch.manual_seed(0)
    cfg = _cfg(tiny, glove_dir, effect=None)
    stats = tiny.make_statistics()
    pred = CausalAnalysisPredictor(cfg, tiny.IN_CHANNELS, stats).train()
    inputs = tiny.make_inputs('predcls', True)
    _, _, losses = pred(*inputs)
    labels = torch.cat(inputs[2])
    lab = [p.get_field('labels') for p in inputs[0]]
    pairs = torch.cat([torch.stack((l[r[:, 0]], l[r[:, 1]]), 1) for l, r in zip(lab, inputs[1])])
    torch.testing.assert_close(losses['auxiliary_frq'], F.cross_entropy(
        stats['pred_dist'][pairs[:, 0], pairs[:, 1]], labels))
    torch.testing.assert_close(losses['auxiliary_vis'],
                               F.cross_entropy(pred.vis_compress(inputs[5]), labels))
    # one step from zero: average = 0.0005 * batch mean
    torch.testing.assert_close(pred.untreated_feat, 0.0005 * inputs[5].mean(0))


def _factual_and_average(pred, inputs):
    proposals, pairs = inputs[0], inputs[1]
    num_objs = [len(p) for p in proposals]
    boxes = [get_box_info(p.bbox, True, p) for p in proposals]
    with torch.no_grad():
        fact = pred.pair_feature_generate(inputs[4], proposals, pairs, num_objs, boxes)
        avg = pred.pair_feature_generate(inputs[4], proposals, pairs, num_objs, boxes,
                                         ctx_average=True)
    return fact, avg


def test_tde_is_context_difference_for_sum_fusion(tiny, glove_dir):
    """sum fusion: TDE = ctx(x) - ctx(x_avg) = W_ctx (x - x_avg): vision and frequency cancel."""
    pred = _trained(tiny, glove_dir, effect='TDE')
    inputs = tiny.make_inputs('predcls', False)
    with torch.no_grad():
        _, rel, _ = pred(*inputs)
    fact, avg = _factual_and_average(pred, inputs)
    expected = (fact[0] - avg[0]) @ pred.ctx_compress.weight.t()
    torch.testing.assert_close(torch.cat(rel), expected, rtol=1e-4, atol=1e-5)
    assert (fact[0] - avg[0]).abs().sum() > 0      # the averages changed the context
    # the factual (effect 'none') output differs: it adds vision, frequency and biases
    pred.effect_type = 'none'
    with torch.no_grad():
        factual = torch.cat(pred(*inputs)[1])
    lab = [p.get_field('labels') for p in inputs[0]]
    pairs = torch.cat([torch.stack((l[r[:, 0]], l[r[:, 1]]), 1) for l, r in zip(lab, inputs[1])])
    freq = pred.freq_bias.index_with_labels(pairs)
    torch.testing.assert_close(factual, pred.vis_compress(inputs[5]) +
                               pred.ctx_compress(fact[0]) + freq, rtol=1e-4, atol=1e-5)
    assert not torch.allclose(factual, torch.cat(rel))
    # and the union features do not matter to the TDE
    pred.effect_type = 'TDE'
    moved = list(inputs)
    moved[5] = inputs[5] * 3.0 + 1.0
    with torch.no_grad():
        torch.testing.assert_close(torch.cat(pred(*moved)[1]), torch.cat(rel))


def test_nie_and_te_in_predcls(tiny, glove_dir):
    """PredCls class probabilities are one-hot in both worlds: NIE = 0 and TE = TDE."""
    out = {}
    for effect in ('TDE', 'NIE', 'TE'):
        pred = _trained(tiny, glove_dir, effect=effect)
        with torch.no_grad():
            out[effect] = torch.cat(pred(*tiny.make_inputs('predcls', False))[1])
    torch.testing.assert_close(out['NIE'], torch.zeros_like(out['NIE']))
    torch.testing.assert_close(out['TE'], out['TDE'])


def test_tde_gate_fusion_formula(tiny, glove_dir):
    pred = _trained(tiny, glove_dir, effect='TDE', fusion='gate')
    inputs = tiny.make_inputs('predcls', False)
    fact, avg = _factual_and_average(pred, inputs)
    with torch.no_grad():
        rel = torch.cat(pred(*inputs)[1])
        vis = pred.vis_compress(inputs[5])
        frq = pred.freq_bias.index_with_probability(fact[3])

        def gate(ctx):
            return pred.ctx_compress(ctx) * torch.sigmoid(vis + frq + pred.ctx_gate_fc(ctx))
        torch.testing.assert_close(rel, gate(fact[0]) - gate(avg[0]), rtol=1e-4, atol=1e-5)


def test_sgcls_tde_uses_soft_class_probabilities(tiny, glove_dir):
    pred = _trained(tiny, glove_dir, mode='sgcls', effect='NIE')
    inputs = tiny.make_inputs('sgcls', False)
    fact, avg = _factual_and_average(pred, inputs)
    with torch.no_grad():
        rel = torch.cat(pred(*inputs)[1])
        expected = pred.freq_bias.index_with_probability(fact[3]) - \
            pred.freq_bias.index_with_probability(avg[3])
    # sum fusion: NIE = frq(p) - frq(p_avg), p_avg from the averaged decoder input
    torch.testing.assert_close(rel, expected, rtol=1e-4, atol=1e-5)
    assert expected.abs().sum() > 0


def test_spatial_options(tiny, glove_dir):
    """SPATIAL_FOR_VISION multiplies the context by spt_emb(32-d pair box code) and averages
    the code; SEPARATE_SPATIAL takes (union, spatial) and averages the spatial part."""
    torch.manual_seed(0)
    cfg = _cfg(tiny, glove_dir, effect='TDE')
    cfg.MODEL.ROI_RELATION_HEAD.CAUSAL.SPATIAL_FOR_VISION = True
    cfg.MODEL.ROI_RELATION_HEAD.CAUSAL.SEPARATE_SPATIAL = True
    pred = CausalAnalysisPredictor(cfg, tiny.IN_CHANNELS, tiny.make_statistics()).train()
    inputs = list(tiny.make_inputs('predcls', True))
    spatial = torch.rand(8, tiny.MLP_DIM)
    inputs[5] = (inputs[5], spatial)
    pred(*inputs)
    torch.testing.assert_close(pred.untreated_conv_spt, 0.0005 * spatial.mean(0))
    assert pred.untreated_spt.abs().sum() > 0 and pred.spt_emb[0].in_features == 32
    inputs = list(tiny.make_inputs('predcls', False))
    inputs[5] = (inputs[5], spatial)
    _, rel, _ = pred.eval()(*inputs)
    assert [tuple(d.shape) for d in rel] == [(3, 4), (5, 4)]


def test_config_errors(tiny, glove_dir):
    cfg = _cfg(tiny, glove_dir, effect='TIE')
    with pytest.raises(ValueError, match='EFFECT_TYPE'):
        CausalAnalysisPredictor(cfg, tiny.IN_CHANNELS, tiny.make_statistics())
    cfg = _cfg(tiny, glove_dir, fusion='mul')
    with pytest.raises(ValueError, match='FUSION_TYPE'):
        CausalAnalysisPredictor(cfg, tiny.IN_CHANNELS, tiny.make_statistics())
    cfg = _cfg(tiny, glove_dir)
    cfg.MODEL.ROI_RELATION_HEAD.CONTEXT_POOLING_DIM = 10
    with pytest.raises(ValueError, match='MLP_HEAD_DIM'):
        CausalAnalysisPredictor(cfg, tiny.IN_CHANNELS, tiny.make_statistics())
    cfg = _cfg(tiny, glove_dir, context='treelstm')
    with pytest.raises(ValueError, match='CONTEXT_LAYER'):
        CausalAnalysisPredictor(cfg, tiny.IN_CHANNELS, tiny.make_statistics())
