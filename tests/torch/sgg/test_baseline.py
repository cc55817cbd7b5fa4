"""The frequency-bias-only baseline: softmax of pred_dist[subject label, object label]."""
import math

import pytest
import torch

from gluontrain.torch.sgg.baseline import frequency_baseline
from gluontrain.torch.twostage.structures import BoxList


def test_frequency_baseline_by_hand():
    p = BoxList(torch.zeros(3, 4), (10, 10))
    p.add_field('pred_labels', torch.tensor([1, 2, 1]))
    p.add_field('rel_pair_idxs', torch.tensor([[0, 1], [1, 2]]))
    p.add_field('pred_rel_scores', torch.zeros(2, 3))
    pred_dist = torch.zeros(3, 3, 3)
    pred_dist[1, 2] = torch.tensor([0.0, math.log(3.0), 0.0])   # (1 -> 2): predicate 1
    pred_dist[2, 1] = torch.tensor([math.log(2.0), 0.0, math.log(4.0)])  # (2 -> 1): 2
    out = frequency_baseline([p], pred_dist)[0]
    scores = out.get_field('pred_rel_scores')
    assert scores[0].tolist() == pytest.approx([0.2, 0.6, 0.2])
    assert scores[1].tolist() == pytest.approx([2 / 7, 1 / 7, 4 / 7])
    assert out.get_field('pred_rel_labels').tolist() == [1, 2]
    assert p.get_field('pred_rel_scores').abs().sum() == 0   # the input is not changed
