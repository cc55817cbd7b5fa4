"""The YOLOv3 recipe's hooks that both backends use, and its hook list (numpy only).

* :class:`GluonCVMixupHook`: the reference's per-epoch mixup schedule;
* :class:`RolloverLeftoversHook`: the batch sampler's ``rollover`` leftovers as hook state,
  so that a resumed run's first batch is the one the uninterrupted run would have drawn;
* :func:`gluoncv_hooks`: :func:`gluontrain.core.defaults.build_hooks` with what the
  command line fixes (log and save intervals, validation period, TensorBoard, plots).
"""
import os

import numpy as np

from ..core.defaults import HookSpec, build_hooks
from ..core.loop import Hook, Period

__all__ = ['GluonCVMixupHook', 'RolloverLeftoversHook', 'gluoncv_hooks']


class GluonCVMixupHook(Hook):
    """GluonCV's mixup schedule: with ``--mixup``, Beta(1.5, 1.5) mixing from the first epoch,
    switched off for the last ``--no-mixup-epochs`` epochs.

    Parameters
    ----------
    dataset : object with ``set_mixup(sampler, *args)``, or None
        The mixup wrapper behind the training loader (None: nothing to switch).
    args : argparse.Namespace
        Uses ``mixup``, ``epochs``, ``no_mixup_epochs``.
    """

    def __init__(self, dataset, args):
        self.dataset, self.args = dataset, args

    def before_epoch(self, state):
        """Switch mixup on, or off for the last epochs, before the epoch's first batch."""
        args, dataset = self.args, self.dataset
        if args.mixup and dataset is not None and hasattr(dataset, 'set_mixup'):
            dataset.set_mixup(np.random.beta, 1.5, 1.5)
            if state.epoch >= args.epochs - args.no_mixup_epochs:
                dataset.set_mixup(None)


class RolloverLeftoversHook(Hook):
    """The indices a ``rollover`` batch sampler carries into the next pass, as hook state.

    Under ``--horovod`` / ``torchrun`` every rank has its own leftovers; the engine's
    ``RankStateHook`` saves each rank's part into rank 0's checkpoint and hands it back on
    resume.

    Parameters
    ----------
    sampler : object or None
        The batch sampler (Gluon's ``BatchSampler``, :class:`~.data.RolloverBatchSampler`).
    attr : str
        Its attribute holding the leftover indices (Gluon's ``_prev``, ours ``prev``).
    """
    # the names of checkpoints written before issue #23 (torch recipe, MXNet recipe)
    former_names = ('SamplerPosition', '_DataPosition')

    def __init__(self, sampler, attr='prev'):
        self.sampler, self.attr = sampler, attr

    def state_dict(self):
        """``{'prev': [...]}``."""
        return {'prev': [int(i) for i in getattr(self.sampler, self.attr, None) or []]}

    def load_state_dict(self, state_dict):
        """Put the leftovers back (a sampler without them is left alone)."""
        if self.sampler is not None and hasattr(self.sampler, self.attr):
            setattr(self.sampler, self.attr, [int(i) for i in state_dict.get('prev', [])])


def gluoncv_hooks(args, paths, meter, header, num_batches, recipe_hooks, validate, save_params,
                  checkpoint_fn, samples_hook, comm=None, rank_state=(None, None)):
    """The recipe's hook list: :func:`gluontrain.core.defaults.build_hooks` with the
    intervals, validation period, TensorBoard folder and plots of ``args``.

    ``validate() -> (names, values)`` and ``save_params(best_map, current_map, epoch,
    save_interval, prefix)`` are the recipe's (the network bound); ``num_batches`` is for the
    progress bar; the other parameters are :func:`~gluontrain.core.defaults.build_hooks`'.

    Returns
    -------
    list of Hook
    """
    spec = HookSpec(
        paths, meter, header=header, batch_size=args.batch_size,
        log_interval=args.log_interval, num_batches=num_batches,
        validate=validate, period=Period(epochs=args.val_interval),
        save_params=lambda best, current, epoch, interval: save_params(
            best, current, epoch, interval, paths.prefix),
        save_interval=args.save_interval, checkpoint=checkpoint_fn,
        samples_hook=samples_hook, curves_title=os.path.basename(paths.prefix),
        tensorboard=getattr(args, 'tensorboard', ''), plots=getattr(args, 'plots', True))
    return build_hooks(spec, recipe_hooks, comm=comm, rank_state=rank_state)
