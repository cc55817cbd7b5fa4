"""Transformer context/predictor: shapes per mode, masking per image, gradients, switches."""
import pytest
import torch

from gluontrain.torch.sgg.modeling.predictors import build_predictor
from gluontrain.torch.sgg.modeling.predictors.transformer import (TransformerEncoder,
                                                                  TransformerPredictor)


def _pred(tiny, glove_dir, mode, **kw):
    torch.manual_seed(0)
    cfg = tiny.make_cfg(glove_dir, mode=mode, predictor='TransformerPredictor', **kw)
    return cfg, build_predictor(cfg, tiny.IN_CHANNELS, tiny.make_statistics())


@pytest.mark.parametrize('mode', ['predcls', 'sgcls', 'sgdet'])
@pytest.mark.parametrize('training', [True, False])
def test_output_shapes_per_mode(tiny, glove_dir, mode, training):
    _, pred = _pred(tiny, glove_dir, mode)
    assert isinstance(pred, TransformerPredictor)
    obj_dists, rel_dists, add_losses = pred.train(training)(*tiny.make_inputs(mode, training))
    assert [tuple(d.shape) for d in obj_dists] == [(3, 5), (4, 5)]
    assert [tuple(d.shape) for d in rel_dists] == [(3, 4), (5, 4)]
    assert add_losses == {}


def test_encoder_keeps_images_apart_and_ignores_padding():
    torch.manual_seed(0)
    enc = TransformerEncoder(2, 2, 4, 4, 8, 16, dropout=0.0).eval()
    x = torch.randn(7, 8)
    out = enc(x, [3, 4])
    assert out.shape == (7, 8)
    torch.testing.assert_close(enc(x[:3], [3]), out[:3])       # image 1 alone: same output
    x2 = x.clone()
    x2[5] += 3.0
    out2 = enc(x2, [3, 4])
    torch.testing.assert_close(out2[:3], out[:3])
    assert not torch.allclose(out2[3], out[3])                 # attention within image 2


def test_gradients_reach_both_encoders(tiny, glove_dir):
    _, pred = _pred(tiny, glove_dir, 'sgcls')
    inputs = tiny.make_inputs('sgcls', True)
    obj_dists, rel_dists, _ = pred.train()(*inputs)
    labels = torch.cat([p.get_field('labels') for p in inputs[0]])
    (torch.nn.functional.cross_entropy(torch.cat(rel_dists), torch.cat(inputs[2])) +
     torch.nn.functional.cross_entropy(torch.cat(obj_dists), labels)).backward()
    ctx = pred.context_layer
    for p in (ctx.context_obj.layer_stack[0].slf_attn.w_qs.weight,
              ctx.context_edge.layer_stack[0].pos_ffn.w_1.weight, ctx.out_obj.weight,
              pred.ctx_compress.weight, pred.rel_compress.weight):
        assert p.grad is not None and p.grad.abs().sum() > 0


def test_without_vision_the_union_is_ignored(tiny, glove_dir):
    cfg, _ = _pred(tiny, glove_dir, 'predcls')
    cfg.MODEL.ROI_RELATION_HEAD.PREDICT_USE_VISION = False
    pred = TransformerPredictor(cfg, tiny.IN_CHANNELS, tiny.make_statistics()).eval()
    inputs = list(tiny.make_inputs('predcls', False))
    out = torch.cat(pred(*inputs)[1])
    inputs[5] = inputs[5] + 1.0
    torch.testing.assert_close(torch.cat(pred(*inputs)[1]), out)


def test_sgdet_labels_are_foreground(tiny, glove_dir):
    _, pred = _pred(tiny, glove_dir, 'sgdet')
    inputs = tiny.make_inputs('sgdet', False)
    with torch.no_grad():
        _, obj_preds, _ = pred.eval().context_layer(inputs[4], inputs[0])
    assert obj_preds.shape == (7,) and (obj_preds > 0).all()
