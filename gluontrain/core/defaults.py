"""What every recipe's ``train()`` assembles the same way: the run's file names
(:class:`RunPaths`) and the default hook list (:func:`build_hooks`, detectron2's
``build_hooks``).

A recipe writes only its step, its recipe-specific hooks (LR schedule, mixup switch, ...),
``validate``, ``save_params`` and the backend's checkpoint functions; this module orders them.
"""
import os
from dataclasses import dataclass

from .hooks import (BestCheckpointHook, CheckpointHook, LogHook, LossMeterHook, MetricsJSONHook,
                    NaNGuardHook, ProgressHook, TensorBoardHook, ValidationHook,
                    hooks_state_dict)
from .distributed import BarrierHook, RankStateHook
from .loop import Period
from .memory import ReleaseMemoryHook
from .plots import CurvesHook


def _named(suffix, doc):
    """A read-only :class:`RunPaths` attribute: the prefix followed by ``suffix``."""
    return property(lambda self: self.prefix + suffix, doc=doc)


@dataclass(frozen=True)
class RunPaths:
    """The files one run writes, all named from one prefix (GluonCV's ``--save-prefix``).

    Attributes
    ----------
    prefix : str
        E.g. ``'yolo3_darknet53_voc'`` or ``'weights/ssd300_VOC'``.
    """
    prefix: str

    train_log = _named('_train.log', '``{prefix}_train.log``: the GluonCV-format text log.')
    metrics = _named('_metrics.jsonl', '``{prefix}_metrics.jsonl``: one JSON line per epoch.')
    curves = _named('_curves.png', '``{prefix}_curves.png``.')
    val_samples = _named('_val_samples.png', '``{prefix}_val_samples.png``.')
    last_checkpoint = _named('_last.ckpt', '``{prefix}_last.ckpt``: the full checkpoint of the '
                             'last finished epoch.')
    best_map_log = _named('_best_map.log', "``{prefix}_best_map.log``: GluonCV's "
                          "``'{epoch:04d}:\\t{map:.4f}'`` lines.")

    def best(self, ext):
        """``{prefix}_best{ext}`` (``ext`` ``'.params'`` or ``'.pth'``)."""
        return '{}_best{}'.format(self.prefix, ext)

    def interval(self, index, score, ext):
        """``{prefix}_{index:04d}_{score:.4f}{ext}``: GluonCV's interval file."""
        return '{}_{:04d}_{:.4f}{}'.format(self.prefix, index, score, ext)

    def makedirs(self):
        """Create the prefix's folder (nothing for a bare prefix)."""
        folder = os.path.dirname(self.prefix)
        if folder:
            os.makedirs(folder, exist_ok=True)
        return self


def build_hooks(paths, meter, *, header=(), batch_size=1, log_interval=0, num_batches=None,
                recipe_hooks=(), validate_fn=None, val_period=None, save_params_fn=None,
                save_interval=0, best_after='epoch', checkpoint_fn=None, samples_hook=None,
                curves_title=None, tensorboard='', tensorboard_interval=None, plots=True,
                comm=None, rank_state=(None, None)):
    """The default hook list of a recipe, in the order the hooks depend on each other.

    Order, and why:

    1. ``NaNGuardHook`` first: a non-finite step stops before any hook logs or records it.
    2. ``LossMeterHook``: every later reader (log, metrics, curves, progress) sees this step.
    3. ``recipe_hooks`` (LR schedule, mixup switch, iteration logging): they act on the step
       before it runs, or log before validation does.
    4. ``LogHook``: its epoch line precedes the validation block (GluonCV's log order) and it
       writes ``state.epoch_time`` that the metrics line reads.
    5. ``ValidationHook``: writes ``scores['val']``, ``state.current``, ``val_iteration``.
    6. ``BestCheckpointHook``: reads ``state.current`` (so after validation), writes
       ``state.best``.
    7. ``MetricsJSONHook``, ``CurvesHook``, samples: read the epoch's validation; curves
       come before the checkpoint so that the checkpoint carries this epoch's record.
    8. ``CheckpointHook``: after every hook whose state it saves has updated it; writes
       ``state.last_checkpoint`` (NaNGuard's message names it).
    9. ``ProgressHook``, ``TensorBoardHook``: display only.
    10. ``ReleaseMemoryHook`` after every hook that frees memory: what the step and the hooks
        freed goes back to the system before the next step (:mod:`gluontrain.core.memory`).

    In a distributed run (``comm`` of more than one rank) the list is the same on every rank;
    ``run_loop(..., comm=comm)`` leaves the hooks with ``main_process_only`` (log, metrics,
    curves, samples, weights, checkpoint, progress, TensorBoard) to rank 0. Two hooks are
    added: a :class:`~gluontrain.core.distributed.RankStateHook` just before the checkpoint
    (every rank's generators and data position go into rank 0's checkpoint) and a
    :class:`~gluontrain.core.distributed.BarrierHook` last (no rank runs ahead of rank 0's
    saving). Validation runs on every rank: ``validate_fn`` splits the split and gathers
    (every rank gets the same score).

    Parameters
    ----------
    paths : RunPaths
    meter : LossMeter
    header : list of str
        First log lines (GluonCV logs the args Namespace).
    batch_size, log_interval, num_batches : int
        For the log's Speed figure, batch lines (0: none) and the progress bar.
    recipe_hooks : list of Hook
    validate_fn : callable, optional
        ``() -> (names, values)``; None: no validation.
    val_period : Period, optional
        When to validate (default every epoch).
    save_params_fn : callable, optional
        ``(best_map, current, index, save_interval)``: the recipe's GluonCV ``save_params``
        with net and prefix bound (see :class:`~gluontrain.core.hooks.BestCheckpointHook`).
    save_interval : int
    best_after : {'epoch', 'validation'}
    checkpoint_fn : callable, optional
        ``(state, hooks_state) -> path``: writes the full checkpoint with ``hooks_state`` (a
        dict for :func:`~gluontrain.core.hooks.load_hooks_state_dict`) in its ``extra``.
    samples_hook : Hook, optional
        The recipe's sample-picture hook (a :class:`~gluontrain.core.plots.SamplesHook`).
    curves_title : str, optional
    tensorboard : str
        Log folder; '' for none.
    tensorboard_interval : int, optional
        Steps between scalar points (default ``log_interval``).
    plots : bool
        Curves and samples pictures.
    comm : gluontrain.core.distributed.Comm, optional
        The run's communicator (None or a world of one: a single-process list).
    rank_state : (collect_fn, restore_fn)
        The backend's per-rank state for :class:`~gluontrain.core.distributed.RankStateHook`
        (torch's generators), used with ``comm`` of more than one rank.

    Returns
    -------
    list of Hook
    """
    hooks = [NaNGuardHook(), LossMeterHook(meter)]
    hooks += list(recipe_hooks)
    hooks.append(LogHook(meter, log_file=paths.train_log, log_interval=log_interval,
                         batch_size=batch_size, header=list(header)))
    if validate_fn is not None:
        hooks.append(ValidationHook(validate_fn, period=val_period or Period(epochs=1)))
    if save_params_fn is not None:
        hooks.append(BestCheckpointHook(save_params_fn, save_interval, after=best_after,
                                        log_path=paths.best_map_log))
    hooks.append(MetricsJSONHook(paths.metrics, meter))
    if plots:
        hooks.append(CurvesHook(paths.curves, meter, history=paths.metrics, title=curves_title))
        if samples_hook is not None:
            hooks.append(samples_hook)
    distributed = comm is not None and comm.world_size > 1
    if checkpoint_fn is not None:
        if distributed:
            hooks.append(RankStateHook(comm, hooks, *rank_state))
        # the list is complete when the hook fires, so every hook's state is saved
        hooks.append(CheckpointHook(lambda state: checkpoint_fn(state, hooks_state_dict(hooks))))
    hooks.append(ProgressHook(num_batches=num_batches, batch_size=batch_size, meter=meter))
    if tensorboard:
        hooks.append(TensorBoardHook(tensorboard, meter, log_interval if tensorboard_interval
                                     is None else tensorboard_interval))
    hooks.append(ReleaseMemoryHook())
    if distributed:
        hooks.append(BarrierHook(comm))
    return hooks
