"""SGB's checkpoint alignment: mapping, longest-suffix matching, strict load."""
from collections import OrderedDict

import pytest
import torch

from sgg_model_helpers import TinyPredictor, tiny_cfg
from gluontrain.torch.sgg.modeling import build_detector, build_relation_model
from gluontrain.torch.sgg.modeling.load_mapping import (RELATION_LOAD_MAPPING,
                                                        align_and_update_state_dicts,
                                                        load_state_dict_with_mapping,
                                                        strip_prefix_if_present)


def _t(v):
    return torch.tensor([float(v)])


def test_mapping_and_longest_suffix():
    model = OrderedDict((k, _t(0)) for k in [
        'backbone.body.conv1.weight',
        'roi_heads.box.feature_extractor.fc6.weight',
        'roi_heads.relation.box_feature_extractor.fc6.weight',
        'roi_heads.relation.union_feature_extractor.feature_extractor.fc6.weight',
        'roi_heads.relation.union_feature_extractor.feature_extractor.pooler.'
        'reduce_channel.0.weight',
        'roi_heads.relation.predictor.rel.weight'])
    loaded = OrderedDict([('conv1.weight', _t(1)), ('body.conv1.weight', _t(2)),
                          ('roi_heads.box.feature_extractor.fc6.weight', _t(3)),
                          ('fc6.weight', _t(4))])
    matched = align_and_update_state_dicts(model, loaded, RELATION_LOAD_MAPPING)
    assert model['backbone.body.conv1.weight'].item() == 2  # the longer suffix wins
    assert model['roi_heads.box.feature_extractor.fc6.weight'].item() == 3
    # both relation extractors are mapped onto the box head's extractor
    assert model['roi_heads.relation.box_feature_extractor.fc6.weight'].item() == 3
    assert model['roi_heads.relation.union_feature_extractor.feature_extractor.fc6.weight'
                 ].item() == 3
    # no loaded key is a suffix of these: they keep their values
    assert model['roi_heads.relation.predictor.rel.weight'].item() == 0
    assert model['roi_heads.relation.union_feature_extractor.feature_extractor.pooler.'
                 'reduce_channel.0.weight'].item() == 0
    assert len(matched) == 4
    # without the mapping the relation extractors fall back to the short 'fc6.weight'
    model2 = OrderedDict([('roi_heads.relation.box_feature_extractor.fc6.weight', _t(0))])
    align_and_update_state_dicts(model2, loaded, {})
    assert model2['roi_heads.relation.box_feature_extractor.fc6.weight'].item() == 4


def test_strip_prefix_only_when_all_keys_have_it():
    assert list(strip_prefix_if_present({'module.a': 1, 'module.b': 2}, 'module.')) == ['a', 'b']
    assert list(strip_prefix_if_present({'module.a': 1, 'b': 2}, 'module.')) == ['module.a', 'b']


def test_detector_checkpoint_into_relation_model():
    torch.manual_seed(0)
    det = build_detector(tiny_cfg(relation_on=False))
    cfg = tiny_cfg('predcls')
    model = build_relation_model(cfg, predictor=TinyPredictor(cfg, 32))
    ckpt = {'module.' + k: v for k, v in det.state_dict().items()}
    load_state_dict_with_mapping(model, ckpt, RELATION_LOAD_MAPPING)
    fc6 = det.roi_heads['box'].feature_extractor.fc6.weight
    rel = model.roi_heads['relation']
    assert torch.equal(rel.box_feature_extractor.fc6.weight, fc6)
    assert torch.equal(rel.union_feature_extractor.feature_extractor.fc7.bias,
                       det.roi_heads['box'].feature_extractor.fc7.bias)
    assert torch.equal(model.backbone.fpn.fpn_layer2.weight, det.backbone.fpn.fpn_layer2.weight)
    # a detector of another width does not load silently
    cfg2 = tiny_cfg(relation_on=False)
    cfg2.MODEL.ROI_BOX_HEAD.MLP_HEAD_DIM = 16
    with pytest.raises(ValueError, match='other shapes'):
        load_state_dict_with_mapping(model, build_detector(cfg2).state_dict(),
                                     RELATION_LOAD_MAPPING)
