"""The YOLOv3 recipe's hooks on MXNet: GluonCV's per-epoch preamble, and under Horovod the
BatchNorm statistics and the data shards; with the backend-neutral ones of
:mod:`gluontrain.yolo3.hooks` (the mixup schedule, the sampler's rollover leftovers)."""
import mxnet as mx

from ...core.distributed import SetEpochHook
from ...core.loop import Hook
from ...yolo3.hooks import GluonCVMixupHook, RolloverLeftoversHook
from .data import mixup_dataset

__all__ = ['GluonCVHybridizeHook', 'BroadcastRunningStatsHook', 'recipe_hooks']


class GluonCVHybridizeHook(Hook):
    """The reference's per-epoch ``mx.nd.waitall()`` and ``net.hybridize()``."""

    def __init__(self, net):
        self.net = net

    def before_epoch(self, state):
        """Wait for the engine, then hybridize (a no-op after the first epoch)."""
        mx.nd.waitall()
        self.net.hybridize()


class BroadcastRunningStatsHook(Hook):
    """Under Horovod, rank 0's BatchNorm running statistics to every rank after each epoch.

    ``hvd.DistributedTrainer`` averages gradients only: each rank's running means and
    variances follow its own shard, so the replicas' parameters would differ in them. Rank 0's
    (the ones the reference saves) are given to every rank, as ``DistributedDataParallel``'s
    ``broadcast_buffers``, before validation: the ranks then evaluate the weights rank 0
    saves, and every rank holds bit-identical parameters at each epoch's end.
    """

    def __init__(self, net, comm):
        self.comm = comm
        self.params = {name: p for name, p in net.collect_params().items()
                       if p.grad_req == 'null'}

    def after_epoch(self, state):
        """Broadcast rank 0's running statistics."""
        if self.params:
            self.comm.hvd.broadcast_parameters(
                self.params, root_rank=0, prefix='gluontrain.running_stats.{}.'.format(
                    state.epoch))
            mx.nd.waitall()


def recipe_hooks(net, train_data, args, comm=None):
    """The recipe's own hooks, in the order the reference's epoch runs them: the mixup
    schedule, ``waitall`` + ``hybridize``; under Horovod the running statistics' broadcast,
    and with a sharded loader the shard's epoch and the rank's rollover leftovers."""
    hooks = [GluonCVMixupHook(mixup_dataset(train_data), args), GluonCVHybridizeHook(net)]
    if comm is not None and hasattr(comm, 'hvd'):
        hooks.append(BroadcastRunningStatsHook(net, comm))
    shard = getattr(train_data, 'shard_sampler', None)
    if shard is not None:
        hooks += [SetEpochHook(shard),
                  RolloverLeftoversHook(getattr(train_data, '_batch_sampler', None), '_prev')]
    return hooks
