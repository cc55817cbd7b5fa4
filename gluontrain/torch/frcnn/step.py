"""The backend step of the two-stage recipe, called by :func:`gluontrain.core.loop.run_loop`
once per batch: seamseg's ``model(**batch, do_loss=True, do_prediction=False)``, each loss
``.mean()``, the sum weighted by ``[optimizer] loss_weights``, backward and the SGD update
(:class:`gluontrain.torch.step.LossDictStep`).
"""
from collections import OrderedDict

from ..step import LossDictStep
from .model import LOSS_NAMES, NETWORK_INPUTS
from .optim import current_lr

__all__ = ['upload', 'forward_fn', 'make_step']


def upload(batch, device):
    """The network's inputs of a collated batch (:data:`.model.NETWORK_INPUTS`), on
    ``device``.

    Parameters
    ----------
    batch : dict
        From :func:`.transform.iss_collate_fn`.
    device : torch.device

    Returns
    -------
    dict
    """
    return {k: batch[k].to(device, non_blocking=True) for k in NETWORK_INPUTS}


def forward_fn(model, device):
    """``forward(batch) -> (losses, batch size)`` for :class:`LossDictStep`: seamseg's
    ``model(**batch, do_loss=True, do_prediction=False)`` with each loss ``.mean()``."""
    def forward(batch):
        losses, _ = model(**upload(batch, device), do_loss=True, do_prediction=False)
        return OrderedDict((k, v.mean()) for k, v in losses.items()), len(batch['img'])
    return forward


def make_step(net, optimizer, device, loss_weights):
    """The loop's ``step(batch, state) -> dict``: :class:`LossDictStep` over
    :func:`forward_fn`, reporting the conv/linear group's learning rate.

    Parameters
    ----------
    net : DetectionNet or DistributedDataParallel
    optimizer : torch.optim.Optimizer
        From :func:`.optim.make_optimizer`.
    device : torch.device
    loss_weights : sequence of float
        ``[optimizer] loss_weights``, in the order of :data:`.model.LOSS_NAMES`.

    Returns
    -------
    callable
    """
    loss_step = LossDictStep(forward_fn(net, device), optimizer,
                             loss_weights=dict(zip(LOSS_NAMES, loss_weights)))

    def step(batch, state):
        # LossDictStep reports group 0's rate, here the norm group (0 with bn_frozen)
        return dict(loss_step(batch, state), lr=current_lr(optimizer))
    return step
