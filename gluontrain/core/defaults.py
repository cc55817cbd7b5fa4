"""What every recipe's ``train()`` assembles the same way: :class:`RunPaths`, the default
hook list (:func:`build_hooks`) and the run (:func:`fit`) (docs/recipes.md, "The engine API").
"""
import os
from dataclasses import dataclass
from typing import Optional

from .hooks import (BestCheckpointHook, CheckpointHook, LogHook, LossMeterHook, MetricsJSONHook,
                    NaNGuardHook, ProgressHook, TensorBoardHook, ValidationHook,
                    hooks_state_dict, restore_hooks_state)
from .distributed import BarrierHook, RankStateHook
from .loop import Period, TrainState, run_loop
from .memory import ReleaseMemoryHook
from .plots import CurvesHook


def _named(suffix, doc):
    """A read-only :class:`RunPaths` attribute: the prefix followed by ``suffix``."""
    return property(lambda self: self.prefix + suffix, doc=doc)


@dataclass(frozen=True)
class RunPaths:
    """The files one run writes, named from one prefix (GluonCV's ``--save-prefix``, e.g.
    ``'weights/ssd300_VOC'``)."""
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


#: Where a recipe hook may sit among the default hooks (its ``slot`` attribute).
SLOTS = ('recipe', 'after_validation', 'after_best')


def build_hooks(paths, meter, *, header=(), batch_size=1, log_interval=0, num_batches=None,
                recipe_hooks=(), validate_fn=None, val_period=None, save_params_fn=None,
                save_interval=0, best_after='epoch', checkpoint_fn=None, samples_hook=None,
                curves_title=None, tensorboard='', tensorboard_interval=None, plots=True,
                comm=None, rank_state=(None, None)):
    """The default hook list of a recipe, in dependency order (the order and why:
    docs/recipes.md, "The engine API", ``build_hooks``; with several ranks: "Several
    processes").

    Parameters
    ----------
    paths : RunPaths
    meter : LossMeter
    header : list of str
        First log lines (GluonCV logs the args Namespace).
    batch_size, log_interval, num_batches : int
        For the log's Speed figure, batch lines (0: none) and the progress bar.
    recipe_hooks : list of Hook
        Placed by their ``slot`` (:data:`SLOTS`), in list order within a slot.
    validate_fn : callable, optional
        ``() -> (names, values)``; None: no validation.
    val_period : Period, optional
        When to validate (default every epoch).
    save_params_fn : callable, optional
        ``(best_map, current, index, save_interval)``: the recipe's bound ``save_params``.
    save_interval : int
    best_after : {'epoch', 'validation'}
    checkpoint_fn : callable, optional
        ``(state, hooks_state) -> path``: the full checkpoint, ``hooks_state`` in its ``extra``.
    samples_hook : Hook, optional
        The recipe's :class:`~gluontrain.core.plots.SamplesHook`.
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
        The backend's per-rank state (torch's generators) for ``RankStateHook``.

    Returns
    -------
    list of Hook
    """
    unknown = [h for h in recipe_hooks if h.slot not in SLOTS]
    if unknown:
        raise ValueError('hook slot {!r} is not one of {}'.format(unknown[0].slot, SLOTS))
    hooks = [NaNGuardHook(), LossMeterHook(meter)]
    hooks += [h for h in recipe_hooks if h.slot == 'recipe']
    hooks.append(LogHook(meter, log_file=paths.train_log, log_interval=log_interval,
                         batch_size=batch_size, header=list(header)))
    if validate_fn is not None:
        hooks.append(ValidationHook(validate_fn, period=val_period or Period(epochs=1)))
    hooks += [h for h in recipe_hooks if h.slot == 'after_validation']
    if save_params_fn is not None:
        hooks.append(BestCheckpointHook(save_params_fn, save_interval, after=best_after,
                                        log_path=paths.best_map_log))
    hooks += [h for h in recipe_hooks if h.slot == 'after_best']
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


@dataclass
class Restored:
    """A checkpoint a backend restored: its ``path``, the saved ``payload`` (``'epoch'``,
    ``extra['hooks']``) and the loop ``state`` at it; where :func:`fit` resumes from."""
    path: str
    payload: dict
    state: TrainState


def fit(step, train_data, hooks, start_epoch=0, epochs=None, state=None, max_iter=None,
        comm=None, restored: Optional[Restored] = None) -> TrainState:
    """Every recipe's run: resume from ``restored``, :func:`~gluontrain.core.loop.run_loop`,
    then ``FloatingPointError(state.stop_reason)`` for a run the NaN guard stopped
    (docs/recipes.md, "The engine API", ``fit``). The other arguments are ``run_loop``'s."""
    if restored is not None:
        state = restored.state
        restore_hooks_state(hooks, restored.payload)
        state.resumed_from = state.last_checkpoint = restored.path
        if epochs is not None:
            start_epoch = restored.payload['epoch'] + 1
        else:
            start_epoch, state.resume_batch = divmod(state.iteration, max(len(train_data), 1))
    state = run_loop(step, train_data, hooks, start_epoch, epochs, state, max_iter, comm)
    if state.nonfinite:
        raise FloatingPointError(state.stop_reason)
    return state
