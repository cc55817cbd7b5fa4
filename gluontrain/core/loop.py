"""The backend-neutral training loop: epochs, batches, one step per batch, hooks around it.

Everything a recipe does besides forward/loss/backward/update (LR warm-up, validation,
save_params, logging, progress) is a hook. The loop only orders the calls; it never touches a
framework, so MXNet and PyTorch recipes share it.

A run is bounded by epochs (GluonCV's ``range(start_epoch, epochs)``), by an iteration budget
(``max_iter``, as detectron2's ``train(start_iter, max_iter)`` and ssd.pytorch), or by both.
"""
import itertools
import logging
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, List, Optional

EVENTS = ('before_train', 'before_epoch', 'before_batch', 'after_batch', 'after_epoch',
          'after_train')


@dataclass
class TrainState:
    """What the loop and its hooks share during one run.

    Every field has one writer (named below); hooks that read a field must come after its
    writer in the hook list (see :func:`gluontrain.core.defaults.build_hooks`).

    Attributes
    ----------
    start_epoch, epochs : int
        The epoch range of this run (``epochs`` is None for a run bounded by ``max_iter`` only).
    max_iter : int or None
        The iteration budget (None: epochs only). Written by :func:`run_loop`.
    epoch : int
        The current epoch (the first is ``start_epoch``).
    batch : int
        Index of the current batch within its epoch.
    iteration : int
        Number of finished steps since the very first epoch (restored on resume).
    outputs : dict
        What the step returned for the last batch (losses, batch size, lr, ...).
    scores : dict
        Named results hooks publish for others. ``scores['val']`` (``(names, values)``, main
        metric last) is the validation of the current epoch only: the loop clears it when an
        epoch starts, so hooks never see an earlier epoch's score as this one's.
    current : float
        Main metric of the validation that ran in this event, 0.0 on epochs without one (what
        GluonCV passes to ``save_params``). Written by ``ValidationHook``.
    val_iteration : int
        ``iteration`` at the last validation (-1: none yet). Written by ``ValidationHook``.
    best : float
        Best validation score so far. Written by ``BestCheckpointHook`` (restored on resume);
        in a distributed run on rank 0 only, the rank that saves the best weights (the other
        ranks know ``current``: validation runs on all of them).
    epoch_time : float or None
        Seconds the last finished epoch took. Written by ``LogHook``.
    last_checkpoint : str or None
        The last full checkpoint written. Written by ``CheckpointHook``.
    nonfinite : bool
        A step returned a NaN or infinite loss. Written by ``NaNGuardHook``; the recipe raises
        after ``after_train`` ran.
    should_stop : bool
        Set by any hook (or the iteration budget) to end training after the current event;
        ``after_train`` still runs.
    stop_reason : str
        Why ``should_stop`` was first set (a later stop, e.g. the budget after a NaN stop,
        keeps it).
    resumed_from : str or None
        The checkpoint this run resumed from (None: a fresh run). Written by the recipe when it
        restores; ``LogHook`` marks the resume point in the log, ``MetricsJSONHook`` drops the
        rows the interrupted run wrote after it.
    resume_batch : int
        Batches of ``start_epoch`` a mid-pass checkpoint had already trained (0: the run
        starts at a pass boundary). The loop numbers that epoch's batches from it; the train
        data must leave those batches out (``gluontrain.torch.passes``). Written by the
        recipe on restore.
    resume_changes : list of str
        The arguments this resumed run changed from the checkpoint's (``'--epochs: 2 -> 4'``),
        honoured by the recipe; ``LogHook`` logs them as ``changed on resume: ...``.
    rank, world_size : int
        This process's place in a distributed run (0 and 1 alone). Written by :func:`run_loop`
        from its ``comm`` (or by the recipe); hooks with ``main_process_only`` run on rank 0
        only (:mod:`gluontrain.core.distributed`).
    """
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
        """Ask the loop to stop after the hooks of the current event have run.

        The first reason wins: a NaN stop followed by the iteration budget still reads as the
        NaN stop.
        """
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
    """Base class: override any of the event methods; each receives the :class:`TrainState`.

    A hook that keeps state a resumed run needs (meters, best score, curve history) returns it
    from :meth:`state_dict` and takes it back in :meth:`load_state_dict`, as detectron2's
    ``HookBase``; :func:`gluontrain.core.hooks.hooks_state_dict` collects them into the
    checkpoint.

    A hook that writes files or displays something sets the class attribute
    ``main_process_only = True``: in a distributed run :func:`run_loop` gives it to rank 0
    only. The others (meters, LR schedule, validation, NaN guard) run on every rank.
    """
    main_process_only = False

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
    batch_period)``); 0 disables a kind.

    Attributes
    ----------
    epochs : int
        Due at the end of epochs ``e`` with ``(e + 1) % epochs == 0`` (GluonCV's
        ``val_interval``).
    iterations : int
        Due after the step that makes ``iteration % iterations == 0``.
    at_max_iter : bool
        Also due after the step that exhausts ``state.max_iter`` (a final validation).
    """
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
    """``after_train`` of every hook, even when one of them fails (log files still close).

    While the loop unwinds from an error (``unwinding``), that error wins: a hook's failure
    here (a full disk while it writes its last line) is logged, not raised in its place.
    Otherwise the first hook failure is raised once every hook has run.
    """
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
    ``state.iteration`` reaches ``max_iter``, with ``hooks``.

    Parameters
    ----------
    step : callable
        ``step(batch, state) -> dict``: the backend-specific forward, loss, backward and update
        for one batch. The dict it returns becomes ``state.outputs``.
    train_data : iterable
        Re-iterated once per epoch (a pass over the data, for iteration-based recipes).
    hooks : list of Hook
        Called in list order for every event; order matters (validation before saving).
    start_epoch, epochs : int
        Epoch range, as in GluonCV's scripts (``range(start_epoch, epochs)``); ``epochs=None``
        runs passes until ``max_iter``.
    state : TrainState, optional
        A state restored from a checkpoint (keeps ``iteration``); a fresh one otherwise.
    max_iter : int, optional
        Iteration budget: stop after the step that makes ``state.iteration == max_iter``
        (``stop_reason`` ``'max_iter N reached'``). When that step is the last batch of its
        epoch, the epoch is closed first (``after_epoch`` runs: epoch line, metrics, checkpoint).
        A run that starts at or past the budget stops before its first epoch.
    comm : gluontrain.core.distributed.Comm, optional
        A distributed run's communicator: ``state.rank`` and ``state.world_size`` are taken
        from it. Whatever set them, on every rank but 0 the hooks with
        ``main_process_only`` are left out (they write files and draw; rank 0 does that for
        the job).

    Returns
    -------
    TrainState
        The final state; ``state.stop_reason`` says why it ended early, if it did.

    Raises
    ------
    BaseException
        Whatever a step or hook raised (Ctrl-C included), with the loop's state attached as
        ``error.train_state`` (the CLI names the position and the last checkpoint from it);
        ``after_train`` ran first, and its own failures do not replace that error.
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


def fit(step: Callable[[Any, TrainState], Dict[str, Any]], train_data: Iterable,
        hooks: List[Hook], start_epoch: int = 0, epochs: Optional[int] = None,
        state: Optional[TrainState] = None, max_iter: Optional[int] = None,
        comm: Any = None) -> TrainState:
    """:func:`run_loop`, then every recipe's contract for a diverged run: a run the NaN guard
    stopped (``state.nonfinite``) raises ``FloatingPointError(state.stop_reason)``, which the
    command line prints as one line naming the position and the last good checkpoint.

    Returns
    -------
    TrainState
        The final state of a run that did not diverge.
    """
    state = run_loop(step, train_data, hooks, start_epoch, epochs, state, max_iter, comm)
    if state.nonfinite:
        raise FloatingPointError(state.stop_reason)
    return state


def _epoch_complete(index, num_batches, batches):
    """Whether batch ``index`` was the epoch's last: by ``len`` when the data has one, else by
    asking the iterator for one more batch (only once no step will run any more)."""
    if num_batches is not None:
        return index == num_batches - 1
    return next(batches, _END) is _END


_END = object()
