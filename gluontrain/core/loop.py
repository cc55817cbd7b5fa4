"""The backend-neutral training loop: epochs and/or an iteration budget, one step per batch,
hooks around it (docs/recipes.md, "Data flow" and "The engine API")."""
import itertools
import logging
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, List, Optional

EVENTS = ('before_train', 'before_epoch', 'before_batch', 'after_batch', 'after_epoch',
          'after_train')


@dataclass
class TrainState:
    """What the loop and its hooks share during one run. Each field has one writer, and its
    readers come after that writer in the hook list (docs/recipes.md, "The engine API": the
    ``TrainState`` table)."""
    start_epoch: int = 0
    epochs: Optional[int] = 0
    max_iter: Optional[int] = None
    epoch: int = 0
    batch: int = 0
    iteration: int = 0
    outputs: Dict[str, Any] = field(default_factory=dict)
    scores: Dict[str, Any] = field(default_factory=dict)
    current: float = 0.0
    val_iteration: int = -1
    best: float = 0.0
    epoch_time: Optional[float] = None
    last_checkpoint: Optional[str] = None
    nonfinite: bool = False
    should_stop: bool = False
    stop_reason: str = ''
    resumed_from: Optional[str] = None
    resume_batch: int = 0
    resume_changes: List[str] = field(default_factory=list)
    rank: int = 0
    world_size: int = 1

    @property
    def is_main(self):
        """True on rank 0 (and alone): the process that logs and writes files."""
        return self.rank == 0

    def stop(self, reason):
        """Ask the loop to stop after the hooks of the current event; the first reason wins."""
        if not self.should_stop:
            self.stop_reason = reason
        self.should_stop = True


def resuming(state):
    """True when ``state`` continues an earlier run: the recipe restored a checkpoint
    (``state.resumed_from``) or at least a step count (seamseg's snapshot), so the files of
    the interrupted run may hold rows past the restored position. (A start epoch alone,
    GluonCV's ``--start-epoch`` after loading weights, restores no position to cut at.)"""
    return bool(state.resumed_from) or state.iteration > 0


class Hook:
    """Base class: override any event method; each receives the :class:`TrainState`.

    ``state_dict``/``load_state_dict``: what a resumed run needs (docs/recipes.md, "The engine
    API", "Hook state"). ``main_process_only = True``: a hook that writes or draws, run on rank
    0 only (docs/recipes.md, "Several processes"). ``slot``: its place in
    :func:`gluontrain.core.defaults.build_hooks` (:data:`gluontrain.core.defaults.SLOTS`).
    """
    main_process_only = False
    slot = 'recipe'

    def before_train(self, state):
        """Called once before the first epoch."""

    def before_epoch(self, state):
        """Called at the start of every epoch."""

    def before_batch(self, state):
        """Called before every step."""

    def after_batch(self, state):
        """Called after every step; ``state.outputs`` holds what the step returned."""

    def after_epoch(self, state):
        """Called after the last batch of every epoch (validation and saving hooks live here)."""

    def after_train(self, state):
        """Called once at the end, also when training stopped early or raised."""

    def state_dict(self):
        """What a resumed run must get back (picklable plain data); ``{}`` for none."""
        return {}

    def load_state_dict(self, state_dict):
        """Take back what :meth:`state_dict` returned."""


@dataclass(frozen=True)
class Period:
    """"Every N epochs" and/or "every N iterations" (MXNet's ``ValidationHandler(epoch_period,
    batch_period)``); 0 disables a kind; ``at_max_iter`` also after the budget's last step."""
    epochs: int = 0
    iterations: int = 0
    at_max_iter: bool = False

    def epoch_due(self, state):
        """True at the end of an epoch this period covers."""
        return bool(self.epochs) and (state.epoch + 1) % self.epochs == 0

    def iteration_due(self, state):
        """True after a step this period covers."""
        if self.iterations and state.iteration % self.iterations == 0:
            return True
        return (self.at_max_iter and state.max_iter is not None
                and state.iteration >= state.max_iter)


def _fire(hooks, event, state):
    for hook in hooks:
        getattr(hook, event)(state)
    return state.should_stop


def _fire_after_train(hooks, state, unwinding):
    """``after_train`` of every hook even when one fails; while unwinding from an error that
    error wins and hook failures are logged, otherwise the first is raised at the end."""
    first = None
    for hook in hooks:
        try:
            hook.after_train(state)
        except Exception as e:  # pylint: disable=broad-except
            if unwinding:
                try:  # the log file may be what failed: this line must not raise in turn
                    logging.getLogger('gluontrain').error(
                        '%s.after_train failed while the run was stopping on an earlier '
                        'failure: %s: %s', type(hook).__name__, type(e).__name__, e)
                except Exception:  # pylint: disable=broad-except
                    pass
            elif first is None:
                first = e
    if first is not None:
        raise first


def _length(data):
    try:
        return len(data)
    except TypeError:
        return None


def run_loop(step: Callable[[Any, TrainState], Dict[str, Any]], train_data: Iterable,
             hooks: List[Hook], start_epoch: int = 0, epochs: Optional[int] = None,
             state: Optional[TrainState] = None, max_iter: Optional[int] = None,
             comm: Any = None) -> TrainState:
    """Run ``step`` over ``train_data`` for epochs ``start_epoch .. epochs-1`` and/or until
    ``state.iteration`` reaches ``max_iter``, with ``hooks`` (docs/recipes.md, "The engine API").

    Parameters
    ----------
    step : callable
        ``step(batch, state) -> dict``; the dict becomes ``state.outputs``.
    train_data : iterable
        Re-iterated once per epoch (a pass over the data).
    hooks : list of Hook
        Called in list order for every event.
    start_epoch, epochs : int
        ``range(start_epoch, epochs)``; ``epochs=None`` runs passes until ``max_iter``.
    state : TrainState, optional
        A restored state (keeps ``iteration``); a fresh one otherwise.
    max_iter : int, optional
        Stop after the step that makes ``state.iteration == max_iter``.
    comm : gluontrain.core.distributed.Comm, optional
        Sets ``state.rank``/``world_size``; off rank 0 ``main_process_only`` hooks are left out.

    Returns
    -------
    TrainState
        The final state; ``state.stop_reason`` says why it ended early.

    Raises
    ------
    BaseException
        Whatever a step or hook raised, with ``error.train_state`` attached.
    """
    if epochs is None and max_iter is None:
        raise ValueError('run_loop needs epochs or max_iter (or both)')
    state = state if state is not None else TrainState()
    state.start_epoch, state.epochs, state.max_iter = start_epoch, epochs, max_iter
    if comm is not None:
        state.rank, state.world_size = int(comm.rank), int(comm.world_size)
    if not state.is_main:
        hooks = [h for h in hooks if not getattr(h, 'main_process_only', False)]
    num_batches = _length(train_data)
    unwinding = False
    try:
        if max_iter is not None and state.iteration >= max_iter:
            state.stop('max_iter {} already reached'.format(max_iter))
        if _fire(hooks, 'before_train', state):
            return state
        for epoch in (range(start_epoch, epochs) if epochs is not None
                      else itertools.count(start_epoch)):
            state.epoch = epoch
            state.scores.pop('val', None)
            if _fire(hooks, 'before_epoch', state):
                return state
            batches = iter(train_data)
            first = state.resume_batch if epoch == start_epoch else 0
            for i, batch in enumerate(batches, first):
                state.batch = i
                if _fire(hooks, 'before_batch', state):
                    return state
                state.outputs = step(batch, state)
                state.iteration += 1
                if _fire(hooks, 'after_batch', state):
                    return state
                if max_iter is not None and state.iteration >= max_iter:
                    state.stop('max_iter {} reached'.format(max_iter))
                    if _epoch_complete(i, num_batches, batches):
                        _fire(hooks, 'after_epoch', state)
                    return state
            if _fire(hooks, 'after_epoch', state):
                return state
        return state
    except BaseException as e:
        unwinding = True
        try:
            e.train_state = state
        except AttributeError:  # an exception type with __slots__
            pass
        raise
    finally:
        _fire_after_train(hooks, state, unwinding)


def _epoch_complete(index, num_batches, batches):
    """Whether batch ``index`` was the epoch's last: by ``len`` when the data has one, else by
    asking the iterator for one more batch (only once no step will run any more)."""
    if num_batches is not None:
        return index == num_batches - 1
    return next(batches, _END) is _END


_END = object()
