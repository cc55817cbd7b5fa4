"""The backend-neutral training loop: epochs, batches, one step per batch, hooks around it.

Everything a recipe does besides forward/loss/backward/update (LR warm-up, validation,
save_params, logging, progress) is a hook. The loop only orders the calls; it never touches a
framework, so MXNet and PyTorch recipes share it.
"""
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, List, Optional

EVENTS = ('before_train', 'before_epoch', 'before_batch', 'after_batch', 'after_epoch',
          'after_train')


@dataclass
class TrainState:
    """What the loop and its hooks share during one run.

    Attributes
    ----------
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
    should_stop : bool
        Set by any hook to end training after the current event; ``after_train`` still runs.
    stop_reason : str
        Why ``should_stop`` was set.
    """
    start_epoch: int = 0
    epochs: int = 0
    epoch: int = 0
    batch: int = 0
    iteration: int = 0
    outputs: Dict[str, Any] = field(default_factory=dict)
    scores: Dict[str, Any] = field(default_factory=dict)
    should_stop: bool = False
    stop_reason: str = ''

    def stop(self, reason):
        """Ask the loop to stop after the hooks of the current event have run."""
        self.should_stop = True
        self.stop_reason = reason


class Hook:
    """Base class: override any of the event methods; each receives the :class:`TrainState`."""

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


def _fire(hooks, event, state):
    for hook in hooks:
        getattr(hook, event)(state)
    return state.should_stop


def run_loop(step: Callable[[Any, TrainState], Dict[str, Any]], train_data: Iterable,
             hooks: List[Hook], start_epoch: int, epochs: int,
             state: Optional[TrainState] = None) -> TrainState:
    """Run ``step`` over ``train_data`` for epochs ``start_epoch .. epochs-1`` with ``hooks``.

    Parameters
    ----------
    step : callable
        ``step(batch, state) -> dict``: the backend-specific forward, loss, backward and update
        for one batch. The dict it returns becomes ``state.outputs``.
    train_data : iterable
        Re-iterated once per epoch.
    hooks : list of Hook
        Called in list order for every event; order matters (validation before saving).
    start_epoch, epochs : int
        Epoch range, as in GluonCV's scripts (``range(start_epoch, epochs)``).
    state : TrainState, optional
        A state restored from a checkpoint (keeps ``iteration``); a fresh one otherwise.

    Returns
    -------
    TrainState
        The final state; ``state.stop_reason`` says why it ended early, if it did.
    """
    state = state if state is not None else TrainState()
    state.start_epoch, state.epochs = start_epoch, epochs
    try:
        if _fire(hooks, 'before_train', state):
            return state
        for epoch in range(start_epoch, epochs):
            state.epoch = epoch
            state.scores.pop('val', None)
            if _fire(hooks, 'before_epoch', state):
                return state
            for i, batch in enumerate(train_data):
                state.batch = i
                if _fire(hooks, 'before_batch', state):
                    return state
                state.outputs = step(batch, state)
                state.iteration += 1
                if _fire(hooks, 'after_batch', state):
                    return state
            if _fire(hooks, 'after_epoch', state):
                return state
        return state
    finally:
        _fire(hooks, 'after_train', state)
