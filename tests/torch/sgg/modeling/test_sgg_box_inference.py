"""maskrcnn-benchmark's +1 box coder and SGB's box post-processor on hand-made scores."""
import math

import torch

from gluontrain.torch.twostage.box_inference import BoxCoder, BoxPostProcessor
from gluontrain.torch.twostage.structures import BoxList


def test_coder_plus_one_values_and_round_trip():
    coder = BoxCoder((10., 10., 5., 5.))
    prop = torch.tensor([[0., 0., 9., 9.]])     # w = h = 10, centre 5
    gt = torch.tensor([[2., 2., 13., 13.]])     # w = h = 12, centre 8
    d = coder.encode(gt, prop)
    want = [10 * 3 / 10, 10 * 3 / 10, 5 * math.log(1.2), 5 * math.log(1.2)]
    assert torch.allclose(d, torch.tensor([want]))
    assert torch.allclose(coder.decode(d, prop), gt, atol=1e-5)
    # several classes per row decode against the same proposal
    two = coder.decode(torch.cat([torch.zeros(1, 4), d], 1), prop)
    assert torch.allclose(two, torch.tensor([[0., 0., 9., 9., 2., 2., 13., 13.]]), atol=1e-5)


def test_coder_clamps_size_deltas():
    coder = BoxCoder((1., 1., 1., 1.))
    out = coder.decode(torch.tensor([[0., 0., 100., 0.]]), torch.tensor([[0., 0., 15., 15.]]))
    # w = 16 * exp(log(1000 / 16)) = 1000 around centre 8
    assert torch.allclose(out[0, [0, 2]], torch.tensor([8. - 500., 8. + 500. - 1.]))


def _case():
    props = BoxList(torch.tensor([[0., 0., 9., 9.], [0., 0., 9., 8.], [50., 50., 60., 60.]]),
                    (100, 100))
    p = torch.tensor([[0.1, 0.6, 0.3], [0.1, 0.5, 0.4], [0.1, 0.45, 0.45]])
    feats = torch.arange(3.).view(3, 1)
    return props, p.log(), torch.zeros(3, 12), feats


def test_postprocessor_nms_and_filter_duplicates():
    props, logits, reg, feats = _case()
    pp = BoxPostProcessor(score_thresh=0.05, nms=0.3, nms_filter_duplicates=True,
                          detections_per_img=100)
    x, (res,) = pp((feats, logits, reg), [props])
    # class 1: p0 (0.6) suppresses p1 (IoU 0.9), p2 kept (0.45); class 2: p1 (0.4) suppresses
    # p0, p2 kept (0.45); one class per proposal: p0 -> 1, p1 -> 2, p2 -> 1 (first max)
    assert res.get_field('pred_labels').tolist() == [1, 2, 1]
    assert torch.allclose(res.get_field('pred_scores'), torch.tensor([0.6, 0.4, 0.45]))
    assert x.view(-1).tolist() == [0., 1., 2.]
    assert torch.allclose(res.bbox, props.bbox)


def test_postprocessor_per_class_and_cap():
    props, logits, reg, feats = _case()
    pp = BoxPostProcessor(score_thresh=0.05, nms=0.3, nms_filter_duplicates=False,
                          detections_per_img=3)
    _, (res,) = pp((feats, logits, reg), [props])
    # per class: (p0, 1, .6), (p2, 1, .45), (p1, 2, .4), (p2, 2, .45) -> best 3 by kthvalue
    assert sorted(zip(res.get_field('pred_scores').tolist(),
                      res.get_field('pred_labels').tolist()), reverse=True) == \
        sorted([(0.6000000238418579, 1), (0.44999998807907104, 1),
                (0.44999998807907104, 2)], reverse=True)


def test_relation_mode_fields():
    props, logits, reg, feats = _case()
    props.add_field('labels', torch.tensor([1, 0, 2]))
    props.add_field('predict_logits', logits)
    pp = BoxPostProcessor(score_thresh=0.05, nms=0.3)
    _, (res,) = pp((feats, logits, reg), [props], relation_mode=True)
    assert res.get_field('labels').tolist() == [1, 0, 2]
    assert res.get_field('boxes_per_cls').shape == (3, 3, 4)
    assert torch.equal(res.get_field('predict_logits'), logits)
