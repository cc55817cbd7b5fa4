"""base: SGB's moving average, VCTree's per-image binary loss, the shared pair context."""
import math

import torch

from gluontrain.torch.sgg.modeling.predictors import build_predictor
from gluontrain.torch.sgg.modeling.predictors.base import binary_loss, moving_average


def test_moving_average():
    torch.testing.assert_close(moving_average(torch.ones(2), torch.tensor([[3., 5.]]), 0.5),
                               torch.tensor([2., 3.]))


def test_binary_loss_is_mean_of_per_image_means():
    # image 1: logits 0 -> log 2 per entry; image 2: logit ln 3 on a relation -> log(4/3)
    binarys = [torch.tensor([[0., 2.], [0., 0.]]), torch.tensor([[1.]])]
    preds = [torch.zeros(2, 2), torch.tensor([[math.log(3.0)]])]
    expected = (math.log(2.0) + math.log(4.0 / 3.0)) / 2
    assert abs(binary_loss(binarys, preds).item() - expected) < 1e-6


def test_pair_context_gathers_head_of_subject_and_tail_of_object(tiny, glove_dir):
    cfg = tiny.make_cfg(glove_dir, 'predcls', 'MotifPredictor')
    pred = build_predictor(cfg, tiny.IN_CHANNELS, tiny.make_statistics())
    proposals, pairs = tiny.make_proposals('predcls', False), tiny.make_pairs()
    edge_ctx = torch.randn(7, 8)
    obj_preds = torch.tensor([1, 2, 3, 4, 1, 2, 1])
    prod, pair_pred, edge_rep = pred.pair_context(edge_ctx, obj_preds, proposals, pairs)
    emb = pred.post_emb(edge_ctx)
    # second image, pair (3, 2): object 3 + 3 = 6's head half, object 5's tail half
    torch.testing.assert_close(prod[3 + 2], torch.cat((emb[6, :8], emb[5, 8:])))
    assert pair_pred[3 + 2].tolist() == [1, 2] and edge_rep.shape == (7, 2, 8)
    diff, _, _ = pred.pair_context(edge_ctx, obj_preds, proposals, pairs, relu=True,
                                   difference=True)
    relu = torch.relu(emb)
    torch.testing.assert_close(diff[3 + 2], relu[6, :8] - relu[5, 8:])
