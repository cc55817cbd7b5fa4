"""The two-stage recipe's step: a :class:`gluontrain.torch.step.LossDictStep` around seamseg's
``model(**batch, do_loss=True, do_prediction=False)`` (docs/recipes.md, "The recipes")."""
from collections import OrderedDict

from ..step import LossDictStep
from .model import LOSS_NAMES, NETWORK_INPUTS

__all__ = ['upload', 'forward_fn', 'make_step']


def upload(batch, device):
    """The network's inputs (:data:`.model.NETWORK_INPUTS`) of a batch of
    :func:`.transform.iss_collate_fn`, on ``device``."""
    return {k: batch[k].to(device, non_blocking=True) for k in NETWORK_INPUTS}


def forward_fn(model, device):
    """``forward(batch) -> (losses, batch size)`` for :class:`LossDictStep`: seamseg's
    ``model(**batch, do_loss=True, do_prediction=False)`` with each loss ``.mean()``."""
    def forward(batch):
        losses, _ = model(**upload(batch, device), do_loss=True, do_prediction=False)
        return OrderedDict((k, v.mean()) for k, v in losses.items()), len(batch['img'])
    return forward


def make_step(net, optimizer, device, loss_weights):
    """The loop's step: :class:`LossDictStep` over :func:`forward_fn` with ``loss_weights``
    (``[optimizer] loss_weights``, :data:`.model.LOSS_NAMES` order), reporting the last
    (conv/linear) group's learning rate (seamseg logs the norm group's: :func:`.optim.current_lr`).
    """
    return LossDictStep(forward_fn(net, device), optimizer,
                        loss_weights=dict(zip(LOSS_NAMES, loss_weights)), lr_group=-1)
