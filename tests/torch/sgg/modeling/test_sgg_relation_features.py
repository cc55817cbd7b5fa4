"""Union features: the rect masks on a known pair, shapes, the separate-spatial variant."""
import torch

from sgg_model_helpers import tiny_cfg
from gluontrain.torch.sgg.modeling.relation_features import RelationFeatureExtractor, rect_masks
from gluontrain.torch.twostage.structures import BoxList


def test_rect_masks_known_pair():
    # a 100 x 50 image -> 27 x 27: x scaled by 0.27, y by 0.54
    head = BoxList(torch.tensor([[0., 0., 49., 24.]]), (100, 50))
    tail = BoxList(torch.tensor([[50., 25., 99., 49.]]), (100, 50))
    m = rect_masks(head, tail, 27)
    assert m.shape == (1, 2, 27, 27) and m.dtype == torch.float32
    # head -> (0, 0, 13.23, 12.96): x in [0, 14], y in [0, 13]
    expect = torch.zeros(27, 27)
    expect[0:14, 0:15] = 1
    assert torch.equal(m[0, 0], expect)
    # tail -> (13.5, 13.5, 26.73, 26.46): x in [13, 27] -> 13..26, y in [13, 27] -> 13..26
    expect = torch.zeros(27, 27)
    expect[13:, 13:] = 1
    assert torch.equal(m[0, 1], expect)
    assert m[0, 0].sum() == 14 * 15 and m[0, 1].sum() == 14 * 14


def _inputs():
    feats = [torch.randn(2, 16, 64 // s, 64 // s) for s in (4, 8, 16, 32, 64)]
    props = []
    for _ in range(2):
        b = BoxList(torch.tensor([[0., 0., 20., 30.], [10., 5., 60., 40.],
                                  [30., 30., 63., 63.]]), (64, 64))
        props.append(b)
    pairs = [torch.tensor([[0, 1], [1, 2], [2, 0]]), torch.tensor([[1, 0]])]
    return feats, props, pairs


def test_union_feature_shapes_and_rect_branch():
    cfg = tiny_cfg()
    ext = RelationFeatureExtractor(cfg, 16)
    assert ext.rect_size == 27
    feats, props, pairs = _inputs()
    out = ext(feats, props, pairs)
    assert out.shape == (4, 32)
    # the rect branch reaches the pooled union feature's shape (16 x 7 x 7)
    rect = ext.rect_conv(torch.zeros(4, 2, 27, 27))
    assert rect.shape == (4, 16, 7, 7)
    # all-level pooling: 4 levels concatenated, reduced back to 16 channels
    assert ext.feature_extractor.pooler.reduce_channel[0].in_channels == 64


def test_separate_spatial():
    cfg = tiny_cfg()
    cfg.MODEL.ROI_RELATION_HEAD.CAUSAL.SEPARATE_SPATIAL = True
    ext = RelationFeatureExtractor(cfg, 16)
    feats, props, pairs = _inputs()
    region, spatial = ext(feats, props, pairs)
    assert region.shape == (4, 32) and spatial.shape == (4, 32)
