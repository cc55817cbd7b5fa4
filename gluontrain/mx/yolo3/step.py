"""One YOLOv3 training step on MXNet: split across contexts, forward, losses, backward, update."""
from collections import OrderedDict

from mxnet import autograd, gluon, nd

LOSS_NAMES = ('ObjLoss', 'BoxCenterLoss', 'BoxScaleLoss', 'ClassLoss')


class YOLOv3Step:
    """Callable ``step(batch, state) -> outputs`` for :func:`gluontrain.core.loop.run_loop`.

    Parameters
    ----------
    net : gluon.HybridBlock
        YOLOv3 in training mode: (image, gt boxes, five targets) -> the four losses.
    trainer : gluon.Trainer
    ctx : list of mx.Context
    batch_size : int
        What ``trainer.step`` normalises by: the global batch (the reference's), per rank
        under Horovod.
    comm : gluontrain.core.distributed.Comm, optional
        With several ranks the returned losses are the means over all ranks.

    Returns (from ``__call__``)
    ---------------------------
    dict
        ``losses``: name -> ``(sum, count)`` per context; ``lr`` after the update;
        ``batch_size``.
    """

    def __init__(self, net, trainer, ctx, batch_size, comm=None):
        self.net, self.trainer, self.ctx, self.batch_size = net, trainer, ctx, batch_size
        self.comm = comm if comm is not None and comm.world_size > 1 else None

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
        if self.comm is not None:
            out = self._mean_over_ranks(out)
        return {'losses': out, 'lr': self.trainer.learning_rate,
                'batch_size': batch[0].shape[0]}

    def _mean_over_ranks(self, out):
        # every rank has the same number of samples per step, so the mean of the ranks'
        # sums over the mean count is the global batch's mean loss
        local = {}
        for name, pairs in out.items():
            local[name + '.sum'] = sum(p[0] for p in pairs)
            local[name + '.count'] = sum(p[1] for p in pairs)
        mean = self.comm.allreduce_mean(local)
        return OrderedDict((name, [(mean[name + '.sum'], int(round(mean[name + '.count'])))])
                           for name in out)
