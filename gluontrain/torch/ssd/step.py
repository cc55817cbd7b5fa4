"""The SSD300 recipe's step: ssd.pytorch's loop body as a ``LossDictStep``."""
import torch

from ..step import LossDictStep, mixed_precision, to_device

__all__ = ['LOSS_NAMES', 'SSDStep']

LOSS_NAMES = ('loc_loss', 'conf_loss')


class SSDStep(LossDictStep):
    """One SSD step (forward, MultiBoxLoss, backward, SGD update): a
    :class:`gluontrain.torch.step.LossDictStep` over :meth:`forward`, one value per loss and
    step (as ssd.pytorch's counters); ``amp``: :func:`gluontrain.torch.step.mixed_precision`."""

    def __init__(self, net, criterion, optimizer, device, amp=False, cpu_bf16=False):
        self.net, self.criterion, self.device = net, criterion, device
        autocast, scaler = mixed_precision(device, amp, cpu_bf16)
        super().__init__(self.forward, optimizer, scaler=scaler, autocast=autocast)

    def forward(self, batch):
        """``({'loc_loss', 'conf_loss'}, batch size)`` of one batch."""
        # pinned host batches copy asynchronously to the GPU
        images, targets = to_device(batch, self.device,
                                    non_blocking=torch.device(self.device).type == 'cuda')
        loss_l, loss_c = self.criterion(self.net(images), targets)
        return dict(zip(LOSS_NAMES, (loss_l, loss_c))), images.shape[0]
