"""What every recipe's ``train()`` assembles the same way: :class:`RunPaths`, the default
hook list (:class:`HookSpec`, :func:`build_hooks`) and the run (:func:`fit`) (docs/recipes.md,
"The engine API").
"""
import os
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence

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


@dataclass(frozen=True)
class HookSpec:
    """What the default hooks of :func:`build_hooks` need from a recipe; only ``paths`` and
    ``meter`` are required (the defaults: no validation, best weights, checkpoint, samples or
    TensorBoard).

    Attributes
    ----------
    paths : RunPaths
        The run's files.
    meter : LossMeter
        The loss meter the log, metrics, curves and TensorBoard hooks read.
    header : list of str
        First log lines (GluonCV logs the args Namespace).
    batch_size : int
        For the log's Speed figure and the progress bar.
    num_batches : int, optional
        Batches per pass, for the progress bar.
    log_interval : int
        Batches between the log's batch lines (0: none).
    validate : callable, optional
        ``() -> (names, values)``; None: no validation.
    period : Period, optional
        When to validate (default every epoch).
    best_after : {'epoch', 'validation'}
        When :class:`~gluontrain.core.hooks.BestCheckpointHook` reads the score.
    save_params : callable, optional
        ``(best_map, current, index, save_interval)``: the recipe's bound ``save_params``.
    save_interval : int
        Passed to ``save_params`` (GluonCV's interval files).
    checkpoint : callable, optional
        ``(state, hooks_state) -> path``: the full checkpoint, ``hooks_state`` in its ``extra``.
    samples_hook : Hook, optional
        The recipe's :class:`~gluontrain.core.plots.SamplesHook`.
    curves_title : str, optional
        The curves picture's title.
    tensorboard : str
        TensorBoard log folder; '' for none.
    tensorboard_interval : int, optional
        Steps between TensorBoard scalar points (default ``log_interval``).
    plots : bool
        Draw the curves and samples pictures.
    """
    paths: RunPaths
    meter: Any
    header: Sequence[str] = ()
    batch_size: int = 1
    num_batches: Optional[int] = None
    log_interval: int = 0
    validate: Optional[Callable] = None
    period: Optional[Period] = None
    best_after: str = 'epoch'
    save_params: Optional[Callable] = None
    save_interval: int = 0
    checkpoint: Optional[Callable] = None
    samples_hook: Any = None
    curves_title: Optional[str] = None
    tensorboard: str = ''
    tensorboard_interval: Optional[int] = None
    plots: bool = True


def build_hooks(spec, recipe_hooks=(), comm=None, rank_state=(None, None)):
    """The default hook list of a recipe, in dependency order (the order and why:
    docs/recipes.md, "The engine API", ``build_hooks``; with several ranks: "Several
    processes").

    Parameters
    ----------
    spec : HookSpec
        What the default hooks need (files, meter, validation, saving, display).
    recipe_hooks : list of Hook
        Placed by their ``slot`` (:data:`SLOTS`), in list order within a slot.
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
    paths, meter, checkpoint_fn = spec.paths, spec.meter, spec.checkpoint
    hooks = [NaNGuardHook(), LossMeterHook(meter)]
    hooks += [h for h in recipe_hooks if h.slot == 'recipe']
    hooks.append(LogHook(meter, log_file=paths.train_log, log_interval=spec.log_interval,
                         batch_size=spec.batch_size, header=list(spec.header)))
    if spec.validate is not None:
        hooks.append(ValidationHook(spec.validate, period=spec.period or Period(epochs=1)))
    hooks += [h for h in recipe_hooks if h.slot == 'after_validation']
    if spec.save_params is not None:
        hooks.append(BestCheckpointHook(spec.save_params, spec.save_interval,
                                        after=spec.best_after, log_path=paths.best_map_log))
    hooks += [h for h in recipe_hooks if h.slot == 'after_best']
    hooks.append(MetricsJSONHook(paths.metrics, meter))
    if spec.plots:
        hooks.append(CurvesHook(paths.curves, meter, history=paths.metrics,
                                title=spec.curves_title))
        if spec.samples_hook is not None:
            hooks.append(spec.samples_hook)
    distributed = comm is not None and comm.world_size > 1
    if checkpoint_fn is not None:
        if distributed:
            hooks.append(RankStateHook(comm, hooks, *rank_state))
        # the list is complete when the hook fires, so every hook's state is saved
        hooks.append(CheckpointHook(lambda state: checkpoint_fn(state, hooks_state_dict(hooks))))
    hooks.append(ProgressHook(num_batches=spec.num_batches, batch_size=spec.batch_size,
                              meter=meter))
    if spec.tensorboard:
        hooks.append(TensorBoardHook(spec.tensorboard, meter, spec.log_interval
                                     if spec.tensorboard_interval is None
                                     else spec.tensorboard_interval))
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
