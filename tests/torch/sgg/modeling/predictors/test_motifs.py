"""MOTIFS context and predictor: SGB's output shapes per mode, label decoding, gradients."""
import pytest
import torch

from gluontrain.torch.sgg.modeling.predictors import build_predictor
from gluontrain.torch.sgg.modeling.predictors.motifs import LSTMContext, MotifPredictor

MODES = ('predcls', 'sgcls', 'sgdet')


def _build(tiny, glove_dir, mode, **kw):
    torch.manual_seed(0)
    cfg = tiny.make_cfg(glove_dir, mode=mode, **kw)
    return cfg, build_predictor(cfg, tiny.IN_CHANNELS, tiny.make_statistics())


@pytest.mark.parametrize('mode', MODES)
@pytest.mark.parametrize('training', [True, False])
def test_output_shapes_per_mode(tiny, glove_dir, mode, training):
    cfg, pred = _build(tiny, glove_dir, mode)
    assert isinstance(pred, MotifPredictor)
    pred.train(training)
    inputs = tiny.make_inputs(mode, training)
    obj_dists, rel_dists, add_losses = pred(*inputs)
    assert [tuple(d.shape) for d in obj_dists] == [(3, 5), (4, 5)]
    assert [tuple(d.shape) for d in rel_dists] == [(3, 4), (5, 4)]
    assert add_losses == {}
    if mode == 'predcls':
        # PredCls object logits are SGB's one-hot +-1000 of the GT labels
        labels = torch.cat([p.get_field('labels') for p in inputs[0]])
        assert torch.equal(torch.cat(obj_dists).argmax(1), labels)
        assert set(torch.cat(obj_dists).unique().tolist()) == {-1000.0, 1000.0}


@pytest.mark.parametrize('mode', MODES)
def test_gradients_reach_context_and_bias(tiny, glove_dir, mode):
    _, pred = _build(tiny, glove_dir, mode)
    pred.train()
    inputs = list(tiny.make_inputs(mode, True))
    inputs[4].requires_grad_(True)
    obj_dists, rel_dists, _ = pred(*inputs)
    loss = torch.nn.functional.cross_entropy(torch.cat(rel_dists), torch.cat(inputs[2]))
    if mode != 'predcls':
        labels = torch.cat([p.get_field('labels') for p in inputs[0]])
        loss = loss + torch.nn.functional.cross_entropy(torch.cat(obj_dists), labels)
    loss.backward()
    assert inputs[4].grad.abs().sum() > 0
    ctx = pred.context_layer
    for p in (ctx.obj_ctx_rnn.weight_ih_l0, ctx.edge_ctx_rnn.weight_ih_l0,
              pred.post_emb.weight, pred.rel_compress.weight,
              pred.freq_bias.obj_baseline.weight):
        assert p.grad is not None and p.grad.abs().sum() > 0
    dec = ctx.decoder_rnn.out_obj.weight.grad
    assert (dec is not None and dec.abs().sum() > 0) == (mode != 'predcls')


def test_frequency_bias_and_vision_switches(tiny, glove_dir):
    """USE_BIAS adds exactly the pred_dist row of the pair's labels; no vision -> no union."""
    torch.manual_seed(0)
    cfg = tiny.make_cfg(glove_dir, 'predcls')
    stats = tiny.make_statistics()
    with_bias = MotifPredictor(cfg, tiny.IN_CHANNELS, stats).eval()
    cfg.MODEL.ROI_RELATION_HEAD.PREDICT_USE_BIAS = False
    no_bias = MotifPredictor(cfg, tiny.IN_CHANNELS, stats).eval()
    no_bias.load_state_dict({k: v for k, v in with_bias.state_dict().items()
                             if not k.startswith('freq_bias')})
    inputs = tiny.make_inputs('predcls', False)
    with torch.no_grad():
        diff = torch.cat(with_bias(*inputs)[1]) - torch.cat(no_bias(*inputs)[1])
    labels = [p.get_field('labels') for p in inputs[0]]
    pairs = torch.cat([torch.stack((lab[r[:, 0]], lab[r[:, 1]]), 1)
                       for lab, r in zip(labels, inputs[1])])
    torch.testing.assert_close(diff, stats['pred_dist'][pairs[:, 0], pairs[:, 1]])
    cfg.MODEL.ROI_RELATION_HEAD.PREDICT_USE_VISION = False
    blind = MotifPredictor(cfg, tiny.IN_CHANNELS, stats).eval()
    out1 = torch.cat(blind(*inputs)[1])
    inputs = list(inputs)
    inputs[5] = inputs[5] * 7.0
    torch.testing.assert_close(torch.cat(blind(*inputs)[1]), out1)


def test_pooling_dim_mismatch_adds_up_dim(tiny, glove_dir):
    _, pred = _build(tiny, glove_dir, 'predcls', pooling_dim=10)
    assert pred.union_single_not_match and pred.up_dim.weight.shape == (10, tiny.MLP_DIM)
    _, rel_dists, _ = pred.eval()(*tiny.make_inputs('predcls', False))
    assert [tuple(d.shape) for d in rel_dists] == [(3, 4), (5, 4)]


def test_sgdet_test_labels_come_from_nms_and_are_foreground(tiny, glove_dir):
    _, pred = _build(tiny, glove_dir, 'sgdet')
    pred.eval()
    inputs = tiny.make_inputs('sgdet', False)
    ctx = pred.context_layer
    with torch.no_grad():
        obj_dists, obj_preds, edge_ctx, _ = ctx(inputs[4], inputs[0], inputs[1])
    assert obj_preds.shape == (7,) and edge_ctx.shape == (7, 8)
    # boxes_per_cls of one image barely overlap across objects (IoU < 0.3 except image 2's
    # objects 1 and 3): the greedy NMS then keeps every object's own foreground argmax
    probs = torch.softmax(obj_dists, 1)[:, 1:]
    own = probs.argmax(1) + 1
    assert torch.equal(obj_preds[:4], own[:4])
    assert (obj_preds > 0).all()


def test_decoder_replaces_background_labels_in_training(tiny, glove_dir):
    _, pred = _build(tiny, glove_dir, 'sgdet')
    pred.train()
    inputs = tiny.make_inputs('sgdet', True)
    inputs[0][0].get_field('labels')[1] = 0          # an unmatched proposal
    with torch.no_grad():
        obj_dists, obj_preds, _, _ = pred.context_layer(inputs[4], inputs[0], inputs[1])
    assert obj_preds[1] == obj_dists[1, 1:].argmax() + 1
    keep = [0, 2, 3, 4, 5, 6]
    labels = torch.cat([p.get_field('labels') for p in inputs[0]])
    assert torch.equal(obj_preds[keep], labels[keep])


@pytest.mark.parametrize('sort_mode', ['leftright', 'size', 'confidence'])
def test_sort_modes_give_same_shapes(tiny, glove_dir, sort_mode):
    torch.manual_seed(0)
    cfg = tiny.make_cfg(glove_dir, 'sgcls')
    pred = MotifPredictor(cfg, tiny.IN_CHANNELS, tiny.make_statistics(), sort_mode=sort_mode)
    _, rel_dists, _ = pred.eval()(*tiny.make_inputs('sgcls', False))
    assert [tuple(d.shape) for d in rel_dists] == [(3, 4), (5, 4)]
    with pytest.raises(ValueError, match='sort mode'):
        MotifPredictor(cfg, tiny.IN_CHANNELS, tiny.make_statistics(), sort_mode='random')(
            *tiny.make_inputs('sgcls', False))


def test_effect_analysis_buffers_move_by_sgb_ratio(tiny, glove_dir):
    cfg = tiny.make_cfg(glove_dir, 'predcls')
    cfg.MODEL.ROI_RELATION_HEAD.CAUSAL.EFFECT_ANALYSIS = True
    ctx = LSTMContext(cfg, tiny.OBJ_CLASSES, tiny.REL_CLASSES, tiny.IN_CHANNELS).train()
    inputs = tiny.make_inputs('predcls', True)
    ctx(inputs[4], inputs[0], inputs[1])
    labels = torch.cat([p.get_field('labels') for p in inputs[0]])
    edg = torch.cat((ctx.obj_embed2(labels), inputs[4]), -1).mean(0)
    torch.testing.assert_close(ctx.untreated_edg_feat, 0.0005 * edg.detach())
    assert 'untreated_obj_feat' in dict(ctx.named_buffers())
