"""Hooks for :func:`gluontrain.core.loop.run_loop`: everything around the training step, with
GluonCV's log lines (docs/recipes.md, "The engine API")."""
import json
import logging
import math
import numbers
import os
import sys
import time

from .loop import Hook, Period, resuming
from .meters import LossMeter
from .writers import (EventFile, LogFileHandler,  # noqa: F401  (public here too)
                      TensorBoardHook, append_lines, filter_lines, jsonable as _jsonable)

LOGGER_NAME = 'gluontrain'


def get_logger():
    """The logger every gluontrain hook writes to (``logging.getLogger('gluontrain')``)."""
    logger = logging.getLogger(LOGGER_NAME)
    logger.setLevel(logging.INFO)
    return logger


def _fmt_losses(means):
    return ', '.join('{}={:.3f}'.format(k, v) for k, v in means.items())


def batch_logged(state, log_interval):
    """True after a step GluonCV's log writes a batch line for: ``(batch + 1) %
    log_interval == 0`` (``log_interval`` 0: never)."""
    return bool(log_interval) and not (state.batch + 1) % log_interval


def read_due(state, log_interval, num_batches=None):
    """True after a step at which the numbers a step left on its device are read: a batch
    log line (:func:`batch_logged`), the last batch of a pass of ``num_batches``, the
    ``max_iter`` budget's last step. Between two such steps nothing waits for the device
    (docs/performance.md, "The step on the GPU")."""
    return (batch_logged(state, log_interval)
            or (num_batches is not None and state.batch + 1 >= num_batches)
            or (state.max_iter is not None and state.iteration >= state.max_iter))


class LossMeterHook(Hook):
    """Feeds ``state.outputs['losses']`` into a :class:`LossMeter` after every step; epoch
    means restart each epoch, except the first of a mid-pass resume."""

    def __init__(self, meter=None):
        self.meter = meter if meter is not None else LossMeter()

    def before_epoch(self, state):
        if state.resume_batch and state.epoch == state.start_epoch:
            return  # a mid-pass resume: the restored meter already holds this pass's part
        self.meter.reset_epoch()

    def after_batch(self, state):
        self.meter.update(state.outputs['losses'])

    def state_dict(self):
        return {'meter': self.meter.state_dict()}

    def load_state_dict(self, state_dict):
        self.meter.load_state_dict(state_dict['meter'])


class LogHook(Hook):
    """Console + ``{prefix}_train.log`` lines in GluonCV's format, plus per-epoch means.

    Parameters
    ----------
    meter : LossMeter
    log_file : str or None
        Text log, appended to.
    log_interval : int
        Log every ``log_interval`` batches (0: no batch lines).
    batch_size : int
        Samples per step, for the Speed figure (as GluonCV: since the previous batch ended).
    header : list of str
        Lines logged first (GluonCV logs the args Namespace).
    """
    main_process_only = True  # writes the log and the console

    def __init__(self, meter, log_file=None, log_interval=100, batch_size=1, header=()):
        self.meter, self.log_file = meter, log_file
        self.log_interval, self.batch_size = log_interval, batch_size
        self.header = list(header)
        self.logger = get_logger()
        self._handlers = []
        self._tic = self._btic = 0.0

    def before_train(self, state):
        console = logging.StreamHandler(sys.stdout)
        console.setFormatter(logging.Formatter('%(message)s'))
        self._handlers = [console]
        if self.log_file:
            os.makedirs(os.path.dirname(self.log_file) or os.curdir, exist_ok=True)
            self._handlers.append(LogFileHandler(self.log_file))
        for h in self._handlers:
            self.logger.addHandler(h)
        # the gluontrain logger owns its handlers; propagating would print every line twice
        self.logger.propagate = False
        for line in self.header:
            self.logger.info(line)
        if state.resumed_from:
            # the interrupted run's lines after this point stay above: this line says where
            # the file's story continues
            self.logger.info('resumed from {} at epoch {}, iteration {}'.format(
                state.resumed_from, state.start_epoch, state.iteration))
            for change in state.resume_changes:
                self.logger.info('changed on resume: {}'.format(change))
        self.logger.info('Start training from [Epoch {}]'.format(state.start_epoch))

    def before_epoch(self, state):
        self._tic = self._btic = time.time()

    def after_batch(self, state):
        if batch_logged(state, self.log_interval):
            speed = self.batch_size / max(time.time() - self._btic, 1e-12)
            self.logger.info('[Epoch {}][Batch {}], LR: {:.2E}, Speed: {:.3f} samples/sec, {}'
                             .format(state.epoch, state.batch, state.outputs.get('lr', 0.0),
                                     speed, _fmt_losses(self.meter.running())))
        self._btic = time.time()

    def after_epoch(self, state):
        cost = time.time() - self._tic
        state.epoch_time = cost
        self.logger.info('[Epoch {}] Training cost: {:.3f}, {}'.format(
            state.epoch, cost, _fmt_losses(self.meter.running())))
        # the reference's line above averages since epoch 0; this one is the epoch alone
        self.logger.info('[Epoch {}] Epoch mean: {}'.format(
            state.epoch, _fmt_losses(self.meter.epoch())))

    def after_train(self, state):
        if state.stop_reason:
            self.logger.info('Training stopped: {}'.format(state.stop_reason))
        for h in self._handlers:
            self.logger.removeHandler(h)
        handlers, self._handlers = self._handlers, []
        for h in handlers:
            h.close()


class ValidationHook(Hook):
    """Runs ``validate_fn() -> (names, values)`` (main metric last) every ``val_interval``
    epochs, or on ``period`` (a :class:`Period`), and sets ``scores['val']``, ``current`` and
    ``val_iteration``."""

    def __init__(self, validate_fn, val_interval=1, period=None):
        self.validate_fn = validate_fn
        self.period = period if period is not None else Period(epochs=val_interval)
        self.logger = get_logger()

    def _validate(self, state, where):
        if state.nonfinite:
            # the NaN guard stopped this step: the weights are garbage, not worth a score
            return
        names, values = self.validate_fn()
        # GluonCV's validation block: one name=value line per metric
        self.logger.info('[{}] Validation: \n{}'.format(
            where, '\n'.join('{}={}'.format(k, v) for k, v in zip(names, values))))
        state.scores['val'] = (list(names), list(values))
        state.current = float(values[-1])
        state.val_iteration = state.iteration

    def after_batch(self, state):
        if self.period.iteration_due(state):
            self._validate(state, 'Iter {}'.format(state.iteration))

    def after_epoch(self, state):
        if self.period.epoch_due(state):
            self._validate(state, 'Epoch {}'.format(state.epoch))
        elif state.val_iteration != state.iteration:
            state.current = 0.0


class BestCheckpointHook(Hook):
    """Owns the best score and calls the recipe's GluonCV-style
    ``save_fn(best_map, current, index, save_interval)`` with it (docs/recipes.md, "The engine
    API"); ``log_path``, the ``{prefix}_best_map.log``, first loses the lines this run rewrites.
    """
    main_process_only = True  # writes weights files; state.best is rank 0's

    def __init__(self, save_fn, save_interval=0, after='epoch', log_path=None):
        if after not in ('epoch', 'validation'):
            raise ValueError("BestCheckpointHook(after={!r}): choose 'epoch' or 'validation'"
                             .format(after))
        self.save_fn, self.save_interval, self.after = save_fn, save_interval, after
        self.log_path = log_path
        self.best_map = [0]
        self._saved_at = -1

    def before_train(self, state):
        state.best = self.best_map[0]
        if self.log_path:
            # the lines of the epochs (iterations) this run writes again; a fresh run in a
            # used folder starts the file anew, as the best weights
            last = state.start_epoch - 1 if self.after == 'epoch' else state.iteration
            truncate_best_map_log(self.log_path, last)

    def _save(self, state, index):
        self.save_fn(self.best_map, state.current, index, self.save_interval)
        state.best = self.best_map[0]

    def after_batch(self, state):
        if self.after == 'validation' and state.val_iteration == state.iteration:
            self._saved_at = state.iteration
            self._save(state, state.iteration)

    def after_epoch(self, state):
        if state.nonfinite:
            return  # the NaN guard's epoch-end check failed: no weights from this state
        if self.after == 'epoch':
            self._save(state, state.epoch)
        elif state.val_iteration == state.iteration != self._saved_at:
            self._saved_at = state.iteration
            self._save(state, state.iteration)

    def state_dict(self):
        return {'best': self.best_map[0]}

    def load_state_dict(self, state_dict):
        self.best_map[0] = state_dict['best']


class CheckpointHook(Hook):
    """Writes the full checkpoint (``save_fn(state) -> path``) at the end of every epoch and
    publishes its path as ``state.last_checkpoint``."""
    main_process_only = True  # writes the checkpoint

    def __init__(self, save_fn):
        self.save_fn = save_fn

    def after_epoch(self, state):
        if state.nonfinite:
            return  # the NaN guard's epoch-end check failed: no checkpoint of this state
        state.last_checkpoint = self.save_fn(state)


def truncate_best_map_log(path, last_index):
    """Drop (atomically) the lines of a ``{prefix}_best_map.log`` whose index is past
    ``last_index``; returns how many."""
    def keep(line):
        try:
            return int(line.split(':', 1)[0]) <= last_index
        except ValueError:
            return True  # not a line of ours
    return filter_lines(path, keep)


def _hook_keys(hooks):
    """A stable name per hook: its class name, numbered from the second of a class on."""
    seen, keys = {}, []
    for hook in hooks:
        name = type(hook).__name__
        seen[name] = seen.get(name, 0) + 1
        keys.append(name if seen[name] == 1 else '{}#{}'.format(name, seen[name]))
    return keys


def hooks_state_dict(hooks):
    """``{hook name: hook.state_dict()}`` for the hooks that have state (for the checkpoint's
    ``extra['hooks']``)."""
    return {key: hook.state_dict() for key, hook in zip(_hook_keys(hooks), hooks)
            if hook.state_dict()}


def load_hooks_state_dict(hooks, states):
    """Give every hook its entry of :func:`hooks_state_dict`'s output (hooks without one keep
    their fresh state); a renamed hook lists its old class names in ``former_names``."""
    for key, hook in zip(_hook_keys(hooks), hooks):
        number = key[len(type(hook).__name__):]
        names = (type(hook).__name__,) + tuple(getattr(hook, 'former_names', ()))
        found = [name + number for name in names if name + number in states]
        if found:
            hook.load_state_dict(states[found[0]])


def restore_hooks_state(hooks, payload):
    """Give ``hooks`` their state from a checkpoint payload (``extra['hooks']``, or older
    checkpoints' ``extra['meter']`` and ``best_score``)."""
    extra = payload.get('extra') or {}
    if 'hooks' in extra:
        load_hooks_state_dict(hooks, extra['hooks'])
        return
    legacy = {'BestCheckpointHook': {'best': payload['best_score']}}
    if 'meter' in extra:
        legacy['LossMeterHook'] = {'meter': extra['meter']}
    load_hooks_state_dict(hooks, legacy)


def unfinished_epoch(state, last_closed_epoch, meter):
    """True when the run stopped after some steps of ``state.epoch`` but before its
    ``after_epoch``, so a hook that recorded up to ``last_closed_epoch`` records this partial
    one in ``after_train`` (``meter`` holds a finite epoch mean once a step of it ran)."""
    return (bool(state.outputs) and last_closed_epoch != state.epoch
            and any(v == v for v in meter.epoch().values()))


def epoch_record(state, meter):
    """The record of ``state.epoch`` that metrics.jsonl and the curves picture hold: epoch,
    iteration, lr, time, the running and epoch loss means and, on a validated epoch, ``val``
    (name -> :func:`~gluontrain.core.writers.jsonable` value)."""
    record = {'epoch': state.epoch, 'iteration': state.iteration,
              'lr': (state.outputs or {}).get('lr'), 'time': state.epoch_time,
              'loss_running': dict(meter.running()), 'loss_epoch': dict(meter.epoch())}
    if 'val' in state.scores:
        names, values = state.scores['val']
        record['val'] = {n: _jsonable(v) for n, v in zip(names, values)}
    return record


class MetricsJSONHook(Hook):
    """Appends one JSON line per epoch to ``path`` (``"partial": true`` for an epoch the run
    stopped inside), after dropping the rows this run writes again (:func:`truncate_metrics`;
    docs/recipes.md, "Checkpoints"). Each row is an atomic rewrite: never half a line.
    """
    main_process_only = True  # writes metrics.jsonl

    def __init__(self, path, meter):
        self.path, self.meter = path, meter
        self._last_epoch = None

    def before_train(self, state):
        self._last_epoch = None
        # a fresh run in a used folder (or GluonCV's --start-epoch after loading weights)
        # writes the rows of its epochs anew, as it writes the checkpoint and weights anew
        truncate_metrics(self.path, state.iteration if resuming(state) else None,
                         state.start_epoch)

    def _write(self, state, partial=False):
        record = epoch_record(state, self.meter)
        if partial:
            record['partial'] = True
        self._last_epoch = state.epoch  # one try per epoch, also when the disk is full
        append_lines(self.path, [json.dumps(record)])

    def after_epoch(self, state):
        self._write(state)

    def after_train(self, state):
        if unfinished_epoch(state, self._last_epoch, self.meter):
            self._write(state, partial=True)


def truncate_metrics(path, iteration, start_epoch):
    """Drop (atomically) the rows of a metrics.jsonl that a run resuming at ``iteration`` and
    ``start_epoch`` writes again: rows past ``iteration`` and partial rows from ``start_epoch``
    on (``iteration`` None: every row from ``start_epoch`` on). Returns how many."""
    def keep(line):
        try:
            row = json.loads(line)
            if iteration is None:
                return not row['epoch'] >= start_epoch
            return not (row['iteration'] > iteration
                        or (row.get('partial') and row['epoch'] >= start_epoch))
        except (ValueError, KeyError, TypeError):
            return True  # not ours to judge: keep it
    return filter_lines(path, keep)


def device_values(losses):
    """The sums in a step's losses (``name -> [(sum, count)]``) that are values left on a
    device (not numbers): what :class:`DeviceNaNGuardHook` reads, :class:`NaNGuardHook` never."""
    return [total for parts in losses.values() for total, _ in parts
            if not isinstance(total, numbers.Real)]


def _stop_nonfinite(state, where=''):
    values = {k: [float(t) for t, _ in parts]
              for k, parts in state.outputs.get('losses', {}).items()}
    state.nonfinite = True
    state.stop('non-finite loss at epoch {} batch {} (iteration {}{}): {}; last good '
               'checkpoint: {}'.format(state.epoch, state.batch, state.iteration, where, values,
                                       state.last_checkpoint or 'none yet'))
    get_logger().error(state.stop_reason)


class NaNGuardHook(Hook):
    """Stops at the first NaN/infinite loss, naming the position, the values and the last good
    checkpoint, and sets ``state.nonfinite`` (:func:`~gluontrain.core.defaults.fit` raises).
    Checks the losses a step returns as numbers; those it leaves on its device are
    :class:`DeviceNaNGuardHook`'s (never read here: no wait for the device)."""

    def after_batch(self, state):
        losses = state.outputs.get('losses', {})
        if not all(math.isfinite(total) for parts in losses.values() for total, _ in parts
                   if isinstance(total, numbers.Real)):
            _stop_nonfinite(state)


class DeviceNaNGuardHook(Hook):
    """The NaN guard of a step that leaves its losses on the device (docs/performance.md,
    "The step on the GPU"): their sum is kept there and read at :func:`read_due` steps (a
    batch log line every ``log_interval``, the last of a pass of ``num_batches``) and at the
    end of each epoch and of the run. A NaN is seen at most ``log_interval`` steps late, and
    always before the epoch's checkpoint and best weights, which are not written from a
    state whose check failed. A recipe hook (its ``'recipe'`` slot comes before them)."""

    def __init__(self, log_interval, num_batches=None):
        self.log_interval, self.num_batches = log_interval, num_batches
        self._sum = None    # the device-side sum of the losses since the last read
        self._since = None  # the iteration of the first step in it

    def after_batch(self, state):
        for total in device_values(state.outputs.get('losses', {})):
            if self._sum is None:
                self._sum, self._since = total, state.iteration
            else:
                self._sum = self._sum + total
        if read_due(state, self.log_interval, self.num_batches):
            self._check(state)

    def after_epoch(self, state):
        self._check(state)

    def after_train(self, state):
        if not state.nonfinite:
            self._check(state)

    def _check(self, state):
        total, since = self._sum, self._since
        self._sum = self._since = None
        # a sum of losses is finite only when each is (inf - inf is NaN)
        if total is not None and not math.isfinite(float(total)):
            _stop_nonfinite(state, '; read every {} steps and at the end of each pass: '
                                   'non-finite at this step or one of the steps since '
                                   'iteration {}'.format(self.log_interval or '(no)', since))


def progress_enabled():
    """Progress bars only on an interactive terminal or notebook, never in CI logs."""
    if os.environ.get('CI'):
        return False
    try:
        return sys.stdout.isatty() or 'ipykernel' in sys.modules
    except (AttributeError, ValueError):
        return False


class ProgressHook(Hook):
    """A ``tqdm.auto`` bar per epoch (samples, speed, ETA, losses), at most every
    ``mininterval`` seconds; off unless on a terminal or in a notebook."""
    main_process_only = True  # draws on the terminal

    def __init__(self, num_batches=None, batch_size=1, enabled=None, mininterval=1.0,
                 meter=None):
        self.num_batches, self.batch_size = num_batches, batch_size
        self.mininterval, self.meter = mininterval, meter
        self.enabled = progress_enabled() if enabled is None else enabled
        self._bar = None

    def before_epoch(self, state):
        if not self.enabled:
            return
        from tqdm.auto import tqdm  # pylint: disable=import-outside-toplevel
        total = self.num_batches * self.batch_size if self.num_batches else None
        self._bar = tqdm(total=total, desc='epoch {}'.format(state.epoch), unit='samples',
                         mininterval=self.mininterval, leave=False)

    def after_batch(self, state):
        if self._bar is None:
            return
        self._bar.update(state.outputs.get('batch_size', self.batch_size))
        # losses left on a device are shown once the log has read them (never a wait here)
        if self.meter is not None and not getattr(self.meter, 'pending', False):
            self._bar.set_postfix(self.meter.running(), refresh=False)

    def after_epoch(self, state):
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    after_train = after_epoch
