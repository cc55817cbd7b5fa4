"""The relation model in its three modes: training loss dicts, evaluation predictions,
frozen detector parts; with the test predictor and with the registry's predictors."""
import os
import sys

import numpy as np
import pytest
import torch

from gluontrain.torch.sgg.model import (build_relation_model, eval_modules, fix_eval_modules,
                                        frozen_norm_eval, relation_mode)

sys.path.insert(0, os.path.join(os.path.dirname(__file__), 'modeling'))
from sgg_model_helpers import TinyPredictor, make_batch, tiny_cfg  # noqa: E402


def _model(mode):
    torch.manual_seed(0)
    cfg = tiny_cfg(mode)
    return build_relation_model(cfg, predictor=TinyPredictor(cfg, 32),
                                generator=torch.Generator().manual_seed(0))


@pytest.mark.parametrize('mode', ['predcls', 'sgcls', 'sgdet'])
def test_forward_train_and_eval(mode):
    model = _model(mode)
    assert model.mode == mode
    images, targets = make_batch()
    model.train()
    fix_eval_modules(eval_modules(model))
    losses = model(images, targets)
    assert list(losses) == ['loss_rel', 'loss_refine_obj']
    sum(losses.values()).backward()
    # the frozen detector parts get no gradient, the relation head does
    assert all(p.grad is None for m in eval_modules(model) for p in m.parameters())
    assert model.roi_heads['relation'].predictor.rel.weight.grad is not None
    if mode == 'predcls':
        assert losses['loss_refine_obj'].item() == 0
    model.eval()
    with torch.no_grad():
        out = model(images, targets)
    for o, t in zip(out, targets):
        fields = set(o.fields())
        assert {'pred_labels', 'pred_scores', 'rel_pair_idxs', 'pred_rel_scores',
                'pred_rel_labels'} <= fields
        n, k = len(o), len(o.get_field('rel_pair_idxs'))
        assert o.get_field('pred_rel_scores').shape == (k, 4)
        assert o.get_field('pred_labels').shape == (n,)
        if mode != 'sgdet':
            assert torch.equal(o.bbox, t.bbox) and k == n * (n - 1)
        if mode == 'predcls':
            assert torch.equal(o.get_field('pred_labels'), t.get_field('labels'))


def test_fixed_detector_batch_norms_do_not_move():
    model = _model('sgdet')
    images, targets = make_batch()
    model.train()
    fix_eval_modules(eval_modules(model))
    bn = model.backbone.body.stem.bn1
    before = bn.running_mean.clone()
    model(images, targets)
    assert not bn.training and torch.equal(bn.running_mean, before)
    # the relation head's own batch norms (rect branch) still train
    rect_bn = model.roi_heads['relation'].union_feature_extractor.rect_conv[2]
    assert rect_bn.training


def test_untrained_detector_batch_norms_normalise_with_batch_statistics():
    # no PRETRAINED_DETECTOR_CKPT: the body's batch norms have their initial running
    # statistics (0, 1); in eval mode they would pass the BGR-255 scale through unnormalised
    model = _model('predcls')
    cfg = model.cfg
    assert cfg.MODEL.PRETRAINED_DETECTOR_CKPT == '' and frozen_norm_eval(cfg) is False
    images, targets = make_batch()
    model.train()
    fix_eval_modules(eval_modules(model), frozen_norm_eval(cfg))
    bn = model.backbone.body.stem.bn1
    assert bn.training and bn.weight.requires_grad is False
    with torch.no_grad():
        conv = model.backbone.body.stem.conv1(images[0].unsqueeze(0) * 50)
        out = bn(conv)
    # batch statistics: per channel (x - mean) / std * weight + bias (the body's norm; the
    # stem's ReLU follows it), not the raw image scale
    mean = conv.mean(dim=(0, 2, 3), keepdim=True)
    std = (conv.var(dim=(0, 2, 3), unbiased=False, keepdim=True) + bn.eps).sqrt()
    ref = (conv - mean) / std * bn.weight.view(1, -1, 1, 1) + bn.bias.view(1, -1, 1, 1)
    assert conv.var().item() > 100 and torch.allclose(out, ref, atol=1e-4)
    before = bn.running_mean.clone()
    model(images, targets)
    assert not torch.equal(bn.running_mean, before)
    cfg.MODEL.PRETRAINED_DETECTOR_CKPT = 'detector/model_final.pth'
    assert frozen_norm_eval(cfg) is True


def test_mode_switches():
    cfg = tiny_cfg('sgdet')
    cfg.MODEL.ROI_RELATION_HEAD.USE_GT_OBJECT_LABEL = True
    with pytest.raises(ValueError, match='not a mode'):
        relation_mode(cfg)
    model = _model('predcls')
    with pytest.raises(ValueError, match='targets'):
        model.train()(make_batch()[0])


def _statistics(num_obj=6, num_rel=4):
    fg = np.random.RandomState(0).randint(0, 5, (num_obj, num_obj, num_rel))
    dist = np.log(fg / np.maximum(fg.sum(2, keepdims=True), 1) + 1e-3).astype(np.float32)
    return {'fg_matrix': fg, 'pred_dist': torch.from_numpy(dist),
            'obj_classes': ['__background__'] + ['o%d' % i for i in range(num_obj - 1)],
            'rel_classes': ['__background__'] + ['r%d' % i for i in range(num_rel - 1)],
            'att_classes': []}


@pytest.mark.filterwarnings('ignore:GloVe')
@pytest.mark.parametrize('predictor', ['MotifPredictor', 'IMPPredictor',
                                       'TransformerPredictor', 'CausalAnalysisPredictor'])
@pytest.mark.parametrize('mode', ['predcls', 'sgcls', 'sgdet'])
def test_registry_predictors(predictor, mode, tmp_path):
    torch.manual_seed(0)
    cfg = tiny_cfg(mode)
    r = cfg.MODEL.ROI_RELATION_HEAD
    r.PREDICTOR = predictor
    r.CONTEXT_HIDDEN_DIM, r.CONTEXT_POOLING_DIM, r.EMBED_DIM = 16, 32, 8
    t = r.TRANSFORMER
    t.INNER_DIM, t.KEY_DIM, t.VAL_DIM, t.NUM_HEAD, t.OBJ_LAYER, t.REL_LAYER = 16, 4, 4, 2, 1, 1
    cfg.GLOVE_DIR = str(tmp_path)
    model = build_relation_model(cfg, _statistics(), generator=torch.Generator().manual_seed(0))
    images, targets = make_batch()
    model.train()
    fix_eval_modules(eval_modules(model))
    losses = model(images, targets)
    assert {'loss_rel', 'loss_refine_obj'} <= set(losses)
    assert all(torch.isfinite(v) for v in losses.values())
    sum(losses.values()).backward()
    model.eval()
    with torch.no_grad():
        out = model(images[:1], targets[:1])  # SGB's MOTIFS decoder: one image in test
    k = len(out[0].get_field('rel_pair_idxs'))
    assert out[0].get_field('pred_rel_scores').shape == (k, 4)


def test_sgdet_image_without_detections():
    model = _model('sgdet')
    # no class reaches the score threshold: the box head keeps nothing
    model.cfg.MODEL.ROI_HEADS.SCORE_THRESH = 1.0
    model.roi_heads['box'].post_processor.score_thresh = 1.0
    images, targets = make_batch()
    model.eval()
    with torch.no_grad():
        out = model(images, targets)
    assert [len(o) for o in out] == [0, 0]
    assert out[0].get_field('pred_rel_scores').shape == (0, 4)
    assert out[1].get_field('rel_pair_idxs').shape == (0, 2)
    model.train()
    losses = model(images, targets)
    assert losses['loss_rel'].item() == 0
    sum(losses.values()).backward()
    # one image with detections, one without: the other image still gets its prediction
    model.eval()
    model.roi_heads['box'].post_processor.score_thresh = 0.0
    with torch.no_grad():
        both = model(images, targets)
    dets = model.roi_heads['box']
    assert all(len(o) > 0 for o in both)
    calls = []
    real = dets.post_processor.forward

    def drop_second(*args, **kw):
        x, res = real(*args, **kw)
        calls.append(1)
        res[1] = res[1][torch.zeros(len(res[1]), dtype=torch.bool)]
        return x, res
    dets.post_processor.forward = drop_second
    with torch.no_grad():
        mixed = model(images, targets)
    assert calls and len(mixed[1]) == 0 and len(mixed[0]) == len(both[0])
    assert torch.equal(mixed[0].get_field('rel_pair_idxs'), both[0].get_field('rel_pair_idxs'))
