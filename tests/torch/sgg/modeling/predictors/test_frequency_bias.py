"""FrequencyBias: rows equal SGB's pred_dist table for hand-given pairs."""
import numpy as np
import pytest
import torch

from gluontrain.torch.sgg.modeling.predictors.frequency_bias import FrequencyBias


def _stats():
    fg = np.zeros((3, 3, 4))
    fg[1, 2] = [0, 3, 1, 0]          # man-horse: 3x "on", 1x "riding"
    fg[2, 1] = [0, 0, 0, 2]
    with np.errstate(invalid='ignore', divide='ignore'):
        pred_dist = np.log(fg / fg.sum(2)[:, :, None] + 1e-3)
    pred_dist[np.isnan(pred_dist)] = np.log(1e-3)   # pairs never seen (0 / 0)
    return {'pred_dist': torch.from_numpy(pred_dist).float()}


def test_rows_are_pred_dist_for_label_pairs():
    fb = FrequencyBias(None, _stats())
    out = fb(torch.tensor([[1, 2], [2, 1]]))
    np.testing.assert_allclose(out[0].detach().numpy(),
                               np.log([1e-3, 0.75 + 1e-3, 0.25 + 1e-3, 1e-3]), rtol=1e-6)
    np.testing.assert_allclose(out[1].detach().numpy(),
                               np.log([1e-3, 1e-3, 1e-3, 1 + 1e-3]), rtol=1e-6)
    assert fb.num_objs == 3 and fb.num_rels == 4
    # row s * C + o of the embedding
    torch.testing.assert_close(fb.obj_baseline.weight[1 * 3 + 2], out[0])


def test_index_with_probability_is_the_expected_row():
    fb = FrequencyBias(None, _stats())
    probs = torch.zeros(1, 3, 2)
    probs[0, 1, 0] = 1.0             # subject surely "man"
    probs[0, 2, 1] = 0.25            # object a quarter "horse"; no mass elsewhere
    expected = 0.25 * fb(torch.tensor([[1, 2]]))
    torch.testing.assert_close(fb.index_with_probability(probs), expected)


def test_table_is_learnable_and_shape_checked():
    fb = FrequencyBias(None, _stats())
    fb(torch.tensor([[1, 2]])).sum().backward()
    assert fb.obj_baseline.weight.grad[5].abs().sum() > 0
    assert fb.obj_baseline.weight.grad[4].abs().sum() == 0
    with pytest.raises(ValueError, match='pred_dist'):
        FrequencyBias(None, {'pred_dist': torch.zeros(3, 4, 2)})
