"""One YOLOv3 training step on MXNet: split across contexts, forward, losses, backward, update."""
from collections import OrderedDict

from mxnet import autograd, gluon, nd

LOSS_NAMES = ('ObjLoss', 'BoxCenterLoss', 'BoxScaleLoss', 'ClassLoss')


class YOLOv3Step:
    """Callable ``step(batch, state) -> outputs`` for :func:`gluontrain.core.loop.run_loop`.

    Parameters
    ----------
    net : gluon.HybridBlock
        YOLOv3 network; in training mode it takes the image, the ground-truth boxes and the five
        prefetched targets and returns the four losses.
    trainer : gluon.Trainer
    ctx : list of mx.Context
    batch_size : int
        What ``trainer.step`` normalises by: the reference passes the global batch size
        (``args.batch_size``), not the size of the batch at hand.

    Returns (from ``__call__``)
    ---------------------------
    dict
        ``losses``: name -> list of ``(sum, count)`` per context (the arithmetic of
        ``mx.metric.Loss``); ``lr``: the trainer's learning rate after the update;
        ``batch_size``: samples in this batch.
    """

    def __init__(self, net, trainer, ctx, batch_size):
        self.net, self.trainer, self.ctx, self.batch_size = net, trainer, ctx, batch_size

    def __call__(self, batch, state=None):
        ctx = self.ctx
        data = gluon.utils.split_and_load(batch[0], ctx_list=ctx, batch_axis=0)
        # objectness, center_targets, scale_targets, weights, class_targets
        fixed_targets = [gluon.utils.split_and_load(batch[it], ctx_list=ctx, batch_axis=0)
                         for it in range(1, 6)]
        gt_boxes = gluon.utils.split_and_load(batch[6], ctx_list=ctx, batch_axis=0)
        per_loss = [[] for _ in LOSS_NAMES]
        sum_losses = []
        with autograd.record():
            for ix, x in enumerate(data):
                losses = self.net(x, gt_boxes[ix], *[ft[ix] for ft in fixed_targets])
                sum_losses.append(losses[0] + losses[1] + losses[2] + losses[3])
                for acc, loss in zip(per_loss, losses):
                    acc.append(loss)
            autograd.backward(sum_losses)
        self.trainer.step(self.batch_size)
        out = OrderedDict()
        for name, arrays in zip(LOSS_NAMES, per_loss):
            out[name] = [(float(nd.sum(a).asscalar()), a.size) for a in arrays]
        return {'losses': out, 'lr': self.trainer.learning_rate,
                'batch_size': batch[0].shape[0]}
