"""The PREDICTORS registry, build_predictor and slow_heads (the package's __init__)."""
import pytest
import torch

from gluontrain.torch.sgg.modeling import predictors as P

NAMES = ['MotifPredictor', 'IMPPredictor', 'TransformerPredictor', 'VCTreePredictor',
         'CausalAnalysisPredictor']


def test_registry_holds_sgbs_names():
    assert sorted(P.PREDICTORS) == sorted(NAMES)
    assert P.PREDICTORS['MotifPredictor'] is P.MotifPredictor


@pytest.mark.parametrize('name', NAMES)
def test_build_by_name_and_forward(tiny, glove_dir, name):
    torch.manual_seed(0)
    cfg = tiny.make_cfg(glove_dir, 'sgcls', predictor=name)
    pred = P.build_predictor(cfg, tiny.IN_CHANNELS, tiny.make_statistics())
    assert type(pred) is P.PREDICTORS[name]
    obj, rel, losses = pred.eval()(*tiny.make_inputs('sgcls', False))
    assert [tuple(r.shape) for r in rel] == [(3, 4), (5, 4)]
    assert isinstance(losses, dict)
    inputs = list(tiny.make_inputs('sgcls', False))
    inputs[1] = inputs[1][:1]
    with pytest.raises(ValueError, match='2 images of proposals but 1 rel_pair_idxs'):
        pred(*inputs)


def test_slow_heads_per_predictor(tiny, glove_dir):
    for name in NAMES:
        cfg = tiny.make_cfg(glove_dir, predictor=name)
        expected = (['roi_heads.relation.box_feature_extractor',
                     'roi_heads.relation.union_feature_extractor.feature_extractor']
                    if name == 'IMPPredictor' else [])
        assert P.slow_heads(cfg) == expected, name


def test_errors_name_the_key(tiny, glove_dir):
    cfg = tiny.make_cfg(glove_dir, 'predcls', predictor='NoSuchPredictor')
    with pytest.raises(ValueError, match="PREDICTOR 'NoSuchPredictor' is not one of"):
        P.build_predictor(cfg, tiny.IN_CHANNELS, tiny.make_statistics())
    cfg = tiny.make_cfg(glove_dir, 'predcls')
    cfg.MODEL.ROI_BOX_HEAD.NUM_CLASSES = 151
    with pytest.raises(ValueError, match='ROI_BOX_HEAD.NUM_CLASSES is 151 but the dataset '
                                         'has 5 classes'):
        P.build_predictor(cfg, tiny.IN_CHANNELS, tiny.make_statistics())
    cfg = tiny.make_cfg(glove_dir, 'predcls')
    cfg.MODEL.ROI_RELATION_HEAD.NUM_CLASSES = 51
    with pytest.raises(ValueError, match='ROI_RELATION_HEAD.NUM_CLASSES is 51'):
        P.build_predictor(cfg, tiny.IN_CHANNELS, tiny.make_statistics())
    cfg = tiny.make_cfg(glove_dir, 'predcls')
    cfg.MODEL.ATTRIBUTE_ON = True
    with pytest.raises(NotImplementedError, match='ATTRIBUTE_ON'):
        P.build_predictor(cfg, tiny.IN_CHANNELS, tiny.make_statistics())
