"""Our detector and relation models against the state_dicts of Scene-Graph-Benchmark's and
maskrcnn-benchmark's own models (recorded by ``tests/fixtures/make_reference_fixtures.py`` from
their source): every key, in order, with its shape, and the parameter counts.

Models are built on the ``meta`` device (shapes only), so the full-size X-101-32x8d-FPN
(162 M values) costs nothing. The configs are built from :data:`CONFIG_OPTS`, the
state-dict-relevant keys of the reference's yaml files; with ``GLUONTRAIN_REFERENCES`` set,
``test_opts_are_the_reference_configs`` checks them against the files themselves, and the
models are also built from the yaml files unchanged.
"""
import json
import os

import numpy as np
import pytest
import torch

from gluontrain.torch.sgg.config import get_cfg, load_cfg
from gluontrain.torch.sgg.modeling.detector import build_detector
from gluontrain.torch.sgg.model import build_relation_model

FIXTURES = os.path.join(os.path.dirname(__file__), '..', '..', '..', 'fixtures', 'references')
REFS = os.environ.get('GLUONTRAIN_REFERENCES')

#: SGB configs/e2e_relation_detector_X_101_32_8_FPN_1x.yaml, the keys that shape the model.
_SGB_X101 = ['MODEL.BACKBONE.CONV_BODY', 'R-101-FPN',
             'MODEL.RESNETS.BACKBONE_OUT_CHANNELS', 256, 'MODEL.RESNETS.STRIDE_IN_1X1', False,
             'MODEL.RESNETS.NUM_GROUPS', 32, 'MODEL.RESNETS.WIDTH_PER_GROUP', 8,
             'MODEL.RPN.USE_FPN', True, 'MODEL.RPN.ANCHOR_SIZES', (32, 64, 128, 256, 512),
             'MODEL.RPN.ANCHOR_STRIDE', (4, 8, 16, 32, 64),
             'MODEL.RPN.ASPECT_RATIOS', (0.23232838, 0.63365731, 1.28478321, 3.15089189),
             'MODEL.RPN.RPN_MID_CHANNEL', 256, 'MODEL.ROI_HEADS.USE_FPN', True,
             'MODEL.ROI_BOX_HEAD.POOLER_RESOLUTION', 7,
             'MODEL.ROI_BOX_HEAD.POOLER_SAMPLING_RATIO', 2,
             'MODEL.ROI_BOX_HEAD.POOLER_SCALES', (0.25, 0.125, 0.0625, 0.03125),
             'MODEL.ROI_BOX_HEAD.FEATURE_EXTRACTOR', 'FPN2MLPFeatureExtractor',
             'MODEL.ROI_BOX_HEAD.PREDICTOR', 'FPNPredictor',
             'MODEL.ROI_BOX_HEAD.NUM_CLASSES', 151, 'MODEL.ROI_BOX_HEAD.MLP_HEAD_DIM', 4096]
_R_FPN = ['MODEL.RESNETS.NUM_GROUPS', 1, 'MODEL.RESNETS.WIDTH_PER_GROUP', 64,
          'MODEL.RESNETS.STRIDE_IN_1X1', True]
#: SGB configs/e2e_relation_X_101_32_8_FPN_1x.yaml adds (ROI_RELATION_HEAD).
_SGB_RELATION = ['MODEL.ROI_RELATION_HEAD.NUM_CLASSES', 51,
                 'MODEL.ROI_RELATION_HEAD.CONTEXT_POOLING_DIM', 4096,
                 'MODEL.ROI_RELATION_HEAD.CONTEXT_HIDDEN_DIM', 512,
                 'MODEL.ROI_RELATION_HEAD.POOLING_ALL_LEVELS', True,
                 'MODEL.ROI_RELATION_HEAD.FEATURE_EXTRACTOR', 'RelationFeatureExtractor',
                 'MODEL.ROI_RELATION_HEAD.CONTEXT_OBJ_LAYER', 1,
                 'MODEL.ROI_RELATION_HEAD.CONTEXT_REL_LAYER', 1,
                 'MODEL.ROI_RELATION_HEAD.CAUSAL.EFFECT_TYPE', 'none',
                 'MODEL.ROI_RELATION_HEAD.CAUSAL.FUSION_TYPE', 'sum',
                 'MODEL.ROI_RELATION_HEAD.CAUSAL.SEPARATE_SPATIAL', False,
                 'MODEL.ROI_RELATION_HEAD.CAUSAL.CONTEXT_LAYER', 'motifs',
                 'MODEL.ROI_RELATION_HEAD.CAUSAL.SPATIAL_FOR_VISION', True,
                 'MODEL.ROI_RELATION_HEAD.CAUSAL.EFFECT_ANALYSIS', True,
                 'MODEL.ROI_RELATION_HEAD.TRANSFORMER.DROPOUT_RATE', 0.1,
                 'MODEL.ROI_RELATION_HEAD.TRANSFORMER.OBJ_LAYER', 4,
                 'MODEL.ROI_RELATION_HEAD.TRANSFORMER.REL_LAYER', 2,
                 'MODEL.ROI_RELATION_HEAD.TRANSFORMER.NUM_HEAD', 8,
                 'MODEL.ROI_RELATION_HEAD.TRANSFORMER.KEY_DIM', 64,
                 'MODEL.ROI_RELATION_HEAD.TRANSFORMER.VAL_DIM', 64,
                 'MODEL.ROI_RELATION_HEAD.TRANSFORMER.INNER_DIM', 2048]
#: maskrcnn-benchmark's defaults where SGB's differ (its RPN head has no RPN_MID_CHANNEL: the
#: 3x3 conv is as wide as the FPN; COCO's 81 classes; a 1024-wide box head).
_MRCNN_DEFAULTS = ['MODEL.RPN.RPN_MID_CHANNEL', 256, 'MODEL.ROI_BOX_HEAD.NUM_CLASSES', 81,
                   'MODEL.ROI_BOX_HEAD.MLP_HEAD_DIM', 1024]
#: maskrcnn-benchmark configs/e2e_faster_rcnn_{R_50,X_101_32x8d}_FPN_1x.yaml.
_MRCNN = _MRCNN_DEFAULTS + ['MODEL.RESNETS.BACKBONE_OUT_CHANNELS', 256, 'MODEL.RPN.USE_FPN', True,
          'MODEL.RPN.ANCHOR_STRIDE', (4, 8, 16, 32, 64), 'MODEL.ROI_HEADS.USE_FPN', True,
          'MODEL.ROI_BOX_HEAD.POOLER_RESOLUTION', 7,
          'MODEL.ROI_BOX_HEAD.POOLER_SCALES', (0.25, 0.125, 0.0625, 0.03125),
          'MODEL.ROI_BOX_HEAD.FEATURE_EXTRACTOR', 'FPN2MLPFeatureExtractor',
          'MODEL.ROI_BOX_HEAD.PREDICTOR', 'FPNPredictor']

CONFIG_OPTS = {
    'sgb_detector_X-101-32x8d-FPN': (
        'Scene-Graph-Benchmark.pytorch/configs/e2e_relation_detector_X_101_32_8_FPN_1x.yaml',
        _SGB_X101),
    'sgb_detector_R-101-FPN': (None, _SGB_X101 + _R_FPN),
    'sgb_detector_R-50-FPN': (None, _SGB_X101 + _R_FPN + ['MODEL.BACKBONE.CONV_BODY',
                                                          'R-50-FPN']),
    'maskrcnn_benchmark_faster_rcnn_R-50-FPN': (
        'maskrcnn-benchmark/configs/e2e_faster_rcnn_R_50_FPN_1x.yaml',
        _MRCNN + ['MODEL.BACKBONE.CONV_BODY', 'R-50-FPN']),
    'maskrcnn_benchmark_faster_rcnn_X-101-32x8d-FPN': (
        'maskrcnn-benchmark/configs/e2e_faster_rcnn_X_101_32x8d_FPN_1x.yaml',
        _MRCNN + ['MODEL.BACKBONE.CONV_BODY', 'R-101-FPN', 'MODEL.RESNETS.STRIDE_IN_1X1', False,
                  'MODEL.RESNETS.NUM_GROUPS', 32, 'MODEL.RESNETS.WIDTH_PER_GROUP', 8]),
}
PREDICTORS = ['MotifPredictor', 'VCTreePredictor', 'TransformerPredictor', 'IMPPredictor',
              'CausalAnalysisPredictor']


def _fixture(name):
    path = os.path.join(FIXTURES, name + '.json')
    with open(path) as f:
        return json.load(f)


def _cfg(opts, relation=False, predictor=None):
    cfg = get_cfg()
    flat = []
    for key, value in zip(opts[::2], opts[1::2]):
        flat += [key, repr(value) if not isinstance(value, str) else value]
    cfg.merge_from_list(flat)
    cfg.MODEL.DEVICE = 'cpu'
    cfg.MODEL.RELATION_ON = relation
    if relation:
        cfg.MODEL.ROI_RELATION_HEAD.USE_GT_BOX = True
        cfg.MODEL.ROI_RELATION_HEAD.USE_GT_OBJECT_LABEL = True
        cfg.MODEL.ROI_RELATION_HEAD.PREDICTOR = predictor
    return cfg


def _statistics(num_obj=151, num_rel=51):
    return {'fg_matrix': np.zeros((num_obj, num_obj, num_rel), np.int64),
            'pred_dist': np.zeros((num_obj, num_obj, num_rel), np.float32),
            'obj_classes': ['__background__'] + ['o%d' % i for i in range(1, num_obj)],
            'rel_classes': ['__background__'] + ['r%d' % i for i in range(1, num_rel)],
            'att_classes': ['__background__'] + ['a%d' % i for i in range(1, 201)]}


def _assert_layout(model, fixture):
    state = model.state_dict()
    ours = [(k, list(v.shape)) for k, v in state.items()]
    theirs = [(k, s) for k, s, _ in fixture['keys']]
    missing = [k for k, _ in theirs if k not in state]
    extra = [k for k, _ in ours if k not in dict(theirs)]
    assert not missing and not extra, (missing[:5], extra[:5])
    assert ours == theirs  # same names, same shapes, same order
    assert sum(p.numel() for p in model.parameters()) == fixture['num_parameters']
    assert sum(v.numel() for v in state.values()) == fixture['num_elements']


@pytest.mark.parametrize('name', sorted(CONFIG_OPTS))
def test_detector_state_dict_is_the_references(name):
    fixture = _fixture(name)
    with torch.device('meta'):
        model = build_detector(_cfg(CONFIG_OPTS[name][1]))
    _assert_layout(model, fixture)
    body = sum(v.numel() for k, v in model.state_dict().items()
               if k.startswith('backbone.body.'))
    assert body == fixture['body_num_elements']


@pytest.mark.parametrize('predictor', PREDICTORS)
def test_relation_state_dict_is_the_references(predictor):
    name = 'sgb_relation_' + predictor
    if not os.path.exists(os.path.join(FIXTURES, name + '.json')):
        pytest.fail('fixture {}.json is missing: run tests/fixtures/make_reference_fixtures.py'
                    .format(name))
    fixture = _fixture(name)
    cfg = _cfg(_SGB_X101 + _SGB_RELATION, relation=True, predictor=predictor)
    ref_cfg = dict(zip(fixture['opts'][::2], fixture['opts'][1::2]))
    assert ref_cfg['MODEL.ROI_RELATION_HEAD.PREDICTOR'] == predictor
    with torch.device('meta'):
        model = build_relation_model(cfg, _statistics())
    _assert_layout(model, fixture)


def _need_refs():
    if not REFS:
        pytest.skip('GLUONTRAIN_REFERENCES not set: the live comparison with the reference '
                    'yaml files needs their checkouts (docs/testing.md)')


@pytest.mark.live_reference
@pytest.mark.parametrize('name', [n for n, (f, _) in sorted(CONFIG_OPTS.items()) if f])
def test_opts_are_the_reference_configs(name):
    """The keys above are the reference yaml's, and the yaml builds the same model unchanged."""
    _need_refs()
    path, opts = CONFIG_OPTS[name]
    defaults = [str(v) for v in _MRCNN_DEFAULTS] if name.startswith('maskrcnn') else []
    cfg = load_cfg(os.path.join(REFS, path), ['MODEL.DEVICE', 'cpu', 'MODEL.RELATION_ON',
                                             'False'] + defaults)
    want = _cfg(opts)
    for key in opts[::2]:
        node_a, node_b = cfg, want
        for part in key.split('.'):
            node_a, node_b = node_a[part], node_b[part]
        assert node_a == node_b, key
    with torch.device('meta'):
        model = build_detector(cfg)
    _assert_layout(model, _fixture(name))


@pytest.mark.live_reference
def test_relation_opts_are_the_reference_config():
    _need_refs()
    path = os.path.join(REFS, 'Scene-Graph-Benchmark.pytorch/configs/'
                              'e2e_relation_X_101_32_8_FPN_1x.yaml')
    cfg = load_cfg(path, ['MODEL.DEVICE', 'cpu'])
    want = _cfg(_SGB_X101 + _SGB_RELATION, relation=True, predictor='MotifPredictor')
    for key in (_SGB_X101 + _SGB_RELATION)[::2]:
        node_a, node_b = cfg, want
        for part in key.split('.'):
            node_a, node_b = node_a[part], node_b[part]
        assert node_a == node_b, key


@pytest.mark.parametrize('arch, opts', [('X-101-32x8d-FPN', _SGB_X101),
                                        ('R-50-FPN', CONFIG_OPTS['sgb_detector_R-50-FPN'][1])])
def test_backbone_outputs_equal_sgbs(arch, opts):
    """Body (C2..C5) and FPN (P2..P6) outputs equal those SGB's own ``build_backbone`` gave
    with the same name-seeded weights (``fill_tensor``) on the same input."""
    from fixtures.reference_fill import fill_tensor, fixed_input
    from gluontrain.torch.sgg.modeling.detector import build_backbone
    with np.load(os.path.join(FIXTURES, 'sgb_backbone_outputs_{}.npz'.format(arch))) as f:
        want = dict(f)
    backbone = build_backbone(_cfg(opts)).eval()
    state = {k: torch.from_numpy(fill_tensor('backbone.' + k, v.shape,
                                             str(v.dtype).replace('torch.', '')))
             for k, v in backbone.state_dict().items()}
    backbone.load_state_dict(state)
    x = torch.from_numpy(fixed_input((1, 3, 64, 96)))
    with torch.no_grad():
        body = list(backbone.body(x).values())[1:]
        fpn = backbone(x)
    for prefix, feats in (('C', body), ('P', fpn)):
        for level, f in enumerate(feats, start=2):
            got = f.numpy()
            scale = float(np.abs(want['%s%d_mean' % (prefix, level)]).max())
            np.testing.assert_allclose(got[0].mean(axis=(1, 2)),
                                       want['%s%d_mean' % (prefix, level)], rtol=1e-4,
                                       atol=1e-5 * scale)
            if '%s%d' % (prefix, level) in want:
                np.testing.assert_allclose(got, want['%s%d' % (prefix, level)], rtol=1e-4,
                                           atol=1e-5 * float(np.abs(got).max()))


@pytest.mark.parametrize('name', ['maskrcnn_benchmark_faster_rcnn_R-50-FPN',
                                  'sgb_detector_R-50-FPN'])
def test_r50_fpn_configs_train_and_infer(name):
    """maskrcnn-benchmark's own R-50-FPN config leaves POOLER_SAMPLING_RATIO at its default 0
    (adaptive ROIAlign; SGB's sets 2): a training step and an inference pass both run on the
    full-size network (small images, fewer proposals to keep it quick)."""
    from sgg_model_helpers import make_batch
    opts = CONFIG_OPTS[name][1] + ['MODEL.RPN.PRE_NMS_TOP_N_TRAIN', 200,
                                   'MODEL.RPN.POST_NMS_TOP_N_TRAIN', 100,
                                   'MODEL.RPN.FPN_POST_NMS_TOP_N_TRAIN', 100,
                                   'MODEL.RPN.PRE_NMS_TOP_N_TEST', 200,
                                   'MODEL.RPN.FPN_POST_NMS_TOP_N_TEST', 50,
                                   'MODEL.ROI_HEADS.BATCH_SIZE_PER_IMAGE', 32,
                                   'DATALOADER.SIZE_DIVISIBILITY', 32]
    cfg = _cfg(opts)
    want_ratio = 0 if name.startswith('maskrcnn') else 2
    assert cfg.MODEL.ROI_BOX_HEAD.POOLER_SAMPLING_RATIO == want_ratio
    torch.manual_seed(0)
    model = build_detector(cfg)
    images, targets = make_batch()
    model.train()
    losses = model(images, targets)
    total = sum(losses.values())
    assert set(losses) == {'loss_objectness', 'loss_rpn_box_reg', 'loss_classifier',
                           'loss_box_reg'} and torch.isfinite(total)
    total.backward()
    grad = model.roi_heads['box'].feature_extractor.fc6.weight.grad
    assert grad is not None and float(grad.abs().sum()) > 0
    model.eval()
    with torch.no_grad():
        result = model(images)
    assert len(result) == 2 and all(r.bbox.shape[1] == 4 for r in result)


@pytest.mark.slow
def test_x101_detector_loads_an_sgb_checkpoint_and_trains(tmp_path):
    """The full X-101-32x8d-FPN detector of SGB's e2e_relation_detector config: an SGB-layout
    checkpoint (DetectronCheckpointer's ``{"model", "optimizer", "scheduler", "iteration"}``,
    DDP ``module.`` keys, every tensor name-seeded from the recorded key list) loads through
    the recipe's ``MODEL.WEIGHT`` loader with 0 missing and 0 unexpected keys, the backbone then
    gives SGB's recorded outputs, and one SGD step at reduced input size (96x128 images, 32
    ROIs) runs and changes only trainable weights. About 15 s and 3 GB on 2 CPU cores."""
    from fixtures.reference_fill import fill_tensor, fixed_input
    from sgg_model_helpers import make_batch
    from gluontrain.torch.sgg.checkpoint import FIX_WEIGHT, Checkpointer
    fixture = _fixture('sgb_detector_X-101-32x8d-FPN')
    state = {'module.' + k: torch.from_numpy(fill_tensor(k, s, d.replace('torch.', '')))
             for k, s, d in fixture['keys']}
    path = tmp_path / 'model_final.pth'
    torch.save({'model': state, 'optimizer': {}, 'scheduler': {}, 'iteration': 50000}, path)
    del state
    cfg = _cfg(_SGB_X101 + ['MODEL.RPN.PRE_NMS_TOP_N_TRAIN', 200,
                            'MODEL.RPN.FPN_POST_NMS_TOP_N_TRAIN', 64,
                            'MODEL.ROI_HEADS.BATCH_SIZE_PER_IMAGE', 32,
                            'DATALOADER.SIZE_DIVISIBILITY', 32])
    model = build_detector(cfg)
    assert sum(p.numel() for p in model.parameters()) == fixture['num_parameters']
    checkpointer = Checkpointer(cfg, model, save_dir=str(tmp_path / 'out'))
    checkpointer.load(str(path), with_optim=False, what='MODEL.WEIGHT', fix=FIX_WEIGHT)
    report = checkpointer.last_report
    assert len(report.loaded) == report.total == fixture['num_tensors']
    assert not report.missing and not report.unexpected and not report.mismatched
    with np.load(os.path.join(FIXTURES, 'sgb_backbone_outputs_X-101-32x8d-FPN.npz')) as f:
        p6 = f['P6']
    model.eval()
    with torch.no_grad():
        got = model.backbone(torch.from_numpy(fixed_input((1, 3, 64, 96))))[-1].numpy()
    np.testing.assert_allclose(got, p6, rtol=1e-4, atol=1e-5 * float(np.abs(p6).max()))
    model.train()
    trainable = [p for p in model.parameters() if p.requires_grad]
    frozen = model.backbone.body.stem.conv1.weight  # FREEZE_CONV_BODY_AT 2 (SGB's default)
    assert not frozen.requires_grad
    before_frozen = frozen.detach().clone()
    fc6 = model.roi_heads['box'].feature_extractor.fc6.weight
    before_fc6 = fc6.detach().clone()
    optimizer = torch.optim.SGD(trainable, lr=0.01, momentum=0.9)
    images, targets = make_batch()
    losses = model(images, targets)
    total = sum(losses.values())
    assert torch.isfinite(total)
    optimizer.zero_grad()
    total.backward()
    optimizer.step()
    assert torch.equal(frozen, before_frozen) and not torch.equal(fc6, before_fc6)
