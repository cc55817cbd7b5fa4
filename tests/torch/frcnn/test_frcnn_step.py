"""The recipe's backend step (seamseg's forward, weighted losses, SGD update) on a stand-in
model whose losses and gradient are computed by hand."""
from collections import OrderedDict

import pytest
import torch

from gluontrain.torch.frcnn.model import LOSS_NAMES
from gluontrain.torch.frcnn.step import make_step
from gluontrain.torch.frcnn.transform import iss_collate_fn


class StandIn(torch.nn.Module):
    """Loss k (k = 1..4): ``k * (w - 1)^2 * [1, 3]``, whose ``.mean()`` is ``2k (w - 1)^2``."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.tensor(3.))
        self.calls = []

    def forward(self, img, cat, iscrowd, bbx, do_loss=False, do_prediction=True):
        self.calls.append((len(img), do_loss, do_prediction))
        d2 = (self.w - 1) ** 2
        per_item = torch.tensor([1., 3.])
        return OrderedDict((n, (k + 1) * d2 * per_item) for k, n in enumerate(LOSS_NAMES)), None


def _batch():
    item = dict(img=torch.zeros(3, 4, 4), cat=torch.tensor([1]), iscrowd=torch.tensor([0]),
                bbx=torch.tensor([[0., 0., 2., 2.]]), idx=7, size=(4, 4))
    return iss_collate_fn([item, dict(item, idx=8)])


def test_step_weights_the_mean_losses_and_reports_the_conv_group_rate():
    model = StandIn()
    # seamseg's two groups: the norm group (lr 0 with bn_frozen), then conv/linear
    optimizer = torch.optim.SGD([{'params': [], 'lr': 0.}, {'params': [model.w], 'lr': 0.1}])
    out = make_step(model, optimizer, torch.device('cpu'), (1., 2., 0., 0.))(_batch(), None)
    assert model.calls == [(2, True, False)]
    # unweighted means 2k (3 - 1)^2 = 8k
    assert out['losses'] == {n: [(pytest.approx(8. * (k + 1)), 1)]
                             for k, n in enumerate(LOSS_NAMES)}
    assert out['lr'] == 0.1 and out['batch_size'] == 2
    # total 1 * 2 (w-1)^2 + 2 * 4 (w-1)^2 = 10 (w-1)^2: gradient 20 (w - 1) = 40 at w = 3
    assert model.w.item() == pytest.approx(3. - 0.1 * 40.)
