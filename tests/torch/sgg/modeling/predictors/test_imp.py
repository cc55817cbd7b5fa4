"""IMP: shapes per mode, message passing reaches every parameter, SGB's slow heads."""
import pytest
import torch

from gluontrain.torch.sgg.modeling.predictors import build_predictor, slow_heads
from gluontrain.torch.sgg.modeling.predictors.imp import IMPContext, IMPPredictor


def _pred(tiny, glove_dir, mode, **kw):
    torch.manual_seed(0)
    cfg = tiny.make_cfg(glove_dir, mode=mode, predictor='IMPPredictor', **kw)
    return cfg, IMPPredictor(cfg, tiny.IN_CHANNELS, tiny.make_statistics(), hidden_dim=8)


@pytest.mark.parametrize('mode', ['predcls', 'sgcls', 'sgdet'])
@pytest.mark.parametrize('training', [True, False])
def test_output_shapes_per_mode(tiny, glove_dir, mode, training):
    _, pred = _pred(tiny, glove_dir, mode)
    obj_dists, rel_dists, add_losses = pred.train(training)(*tiny.make_inputs(mode, training))
    assert [tuple(d.shape) for d in obj_dists] == [(3, 5), (4, 5)]
    assert [tuple(d.shape) for d in rel_dists] == [(3, 4), (5, 4)]
    assert add_losses == {}


def test_build_by_name_keeps_sgb_hidden_512(tiny, glove_dir):
    cfg = tiny.make_cfg(glove_dir, predictor='IMPPredictor')
    pred = build_predictor(cfg, tiny.IN_CHANNELS, tiny.make_statistics())
    assert isinstance(pred, IMPPredictor) and pred.context_layer.hidden_dim == 512
    assert pred.context_layer.num_iter == 3 and not pred.use_bias


def test_gradients_and_messages(tiny, glove_dir):
    _, pred = _pred(tiny, glove_dir, 'sgcls')
    inputs = tiny.make_inputs('sgcls', True)
    obj_dists, rel_dists, _ = pred.train()(*inputs)
    labels = torch.cat([p.get_field('labels') for p in inputs[0]])
    loss = (torch.nn.functional.cross_entropy(torch.cat(rel_dists), torch.cat(inputs[2])) +
            torch.nn.functional.cross_entropy(torch.cat(obj_dists), labels))
    loss.backward()
    for name, p in pred.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name
    # a relation's logits depend on the features of objects it does not touch (3 rounds)
    pred.eval()
    base = torch.cat(pred(*inputs)[1])
    roi = inputs[4].clone()
    roi[2] += 5.0                       # object 2 of image 1 is in pair (2, 1) only
    changed = torch.cat(pred(*inputs[:4], roi, inputs[5])[1])
    assert not torch.allclose(changed[0], base[0])          # pair (0, 1): via object 1
    torch.testing.assert_close(changed[3:], base[3:])       # image 2 untouched


def test_slow_heads_are_sgbs(tiny, glove_dir):
    cfg = tiny.make_cfg(glove_dir, predictor='IMPPredictor')
    assert slow_heads(cfg) == ['roi_heads.relation.box_feature_extractor',
                               'roi_heads.relation.union_feature_extractor.feature_extractor']
    assert IMPPredictor.SLOW_RATIO == 10.0
    cfg.MODEL.ROI_RELATION_HEAD.PREDICTOR = 'MotifPredictor'
    assert slow_heads(cfg) == []


def test_union_up_dim_and_frequency_option(tiny, glove_dir):
    cfg, _ = _pred(tiny, glove_dir, 'predcls')
    cfg.MODEL.ROI_RELATION_HEAD.CONTEXT_POOLING_DIM = 10
    stats = tiny.make_statistics()
    pred = IMPPredictor(cfg, tiny.IN_CHANNELS, stats, use_bias=True, hidden_dim=8).eval()
    assert pred.context_layer.edge_unary.in_features == 10
    inputs = tiny.make_inputs('predcls', False)
    _, rel, _ = pred(*inputs)
    plain = pred.context_layer(inputs[4], inputs[0], pred.up_dim(inputs[5]), inputs[1])[1]
    lab = inputs[0][0].get_field('labels')
    pairs = inputs[1][0]
    torch.testing.assert_close(rel[0] - plain[:3],
                               stats['pred_dist'][lab[pairs[:, 0]], lab[pairs[:, 1]]])
    assert isinstance(pred.context_layer, IMPContext)
