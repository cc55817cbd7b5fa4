"""Resume bookkeeping through the real default hooks: a run interrupted at any hook boundary
(before or after the metrics row, before or after the checkpoint, inside an epoch) and resumed
from its checkpoint leaves exactly one metrics row per epoch, the uninterrupted run's rows, and
the uninterrupted run's best_map.log."""
import json
import pickle

import pytest

from gluontrain.core import checkpoint as ckpt
from gluontrain.core import writers
from gluontrain.core.defaults import HookSpec, RunPaths, build_hooks
from gluontrain.core.hooks import restore_hooks_state, truncate_best_map_log, truncate_metrics
from gluontrain.core.loop import Hook, Period, TrainState, run_loop
from gluontrain.core.meters import LossMeter

EPOCHS, BATCHES = 4, 3


class _Interrupt(Hook):
    """Raises KeyboardInterrupt (Ctrl-C) at ``event`` of ``epoch`` (batch ``batch``)."""

    def __init__(self, event, epoch, batch=None):
        self.event, self.epoch, self.batch = event, epoch, batch

    def __getattribute__(self, name):
        if name == object.__getattribute__(self, 'event'):
            def fire(state):
                if state.epoch == self.epoch and self.batch in (None, state.batch):
                    raise KeyboardInterrupt
            return fire
        return object.__getattribute__(self, name)


class _Run:
    """A one-weight model trained by gradient steps, with the default hooks (validation, best
    weights, metrics, checkpoint) writing into ``folder``."""

    def __init__(self, folder):
        self.paths = RunPaths(str(folder / 'run'))
        self.model = {'w': 3.0}

    def step(self, batch, state):
        w = self.model['w']
        self.model['w'] = w - 0.1 * (w - 1.0) * (1 + batch)
        return {'losses': {'Loss': [((w - 1.0) ** 2, 1)]}, 'lr': 0.1, 'batch_size': 1}

    def validate(self):
        return ['score'], [1.0 / (1.0 + abs(self.model['w'] - 1.0))]

    def hooks(self):
        paths = self.paths

        def save_params(best, current, index, interval):
            writers.save_best_and_interval(
                lambda p: ckpt.atomic_write(p, lambda f: pickle.dump(self.model, f)), best,
                current, index, interval, paths.prefix, '.w')

        def checkpoint(state, hooks_state):
            return ckpt.save_checkpoint(paths.last_checkpoint, pickle.dumps(self.model), b'',
                                        state.epoch, state.iteration, state.best, {},
                                        extra={'hooks': hooks_state})
        return build_hooks(HookSpec(paths, LossMeter(['Loss']), validate=self.validate,
                                    period=Period(epochs=1), save_params=save_params,
                                    checkpoint=checkpoint, plots=False))

    def start(self, interrupt=None, resume=True):
        """Train (resuming from the checkpoint when there is one); returns True when the run
        was interrupted."""
        hooks, state, start = self.hooks(), None, 0
        self.model = {'w': 3.0}  # a new process: the weights are built afresh
        if resume and ckpt.os.path.exists(self.paths.last_checkpoint):
            payload = ckpt.load_checkpoint(self.paths.last_checkpoint)
            self.model = pickle.loads(payload['params'])
            restore_hooks_state(hooks, payload)
            state = TrainState(iteration=payload['iteration'],
                               resumed_from=self.paths.last_checkpoint)
            start = payload['epoch'] + 1
        if interrupt is not None:
            name, event, epoch, batch = interrupt
            at = len(hooks) if name is None else [type(h).__name__ for h in hooks].index(
                name) + 1
            hooks.insert(at, _Interrupt(event, epoch, batch))
        try:
            run_loop(self.step, range(BATCHES), hooks, start, EPOCHS, state)
        except KeyboardInterrupt:
            return True
        return False

    def rows(self):
        rows = [json.loads(line) for line in open(self.paths.metrics)]
        for row in rows:
            row.pop('time')  # wall clock
        return rows

    def best_log(self):
        return open(self.paths.best_map_log).read()


@pytest.fixture(scope='module')
def reference(tmp_path_factory):
    run = _Run(tmp_path_factory.mktemp('uninterrupted'))
    assert not run.start()
    return run.rows(), run.best_log()


# (hook after which it fires: None = last, event, epoch, batch)
BOUNDARIES = {
    'before_train': (None, 'before_train', 0, None),
    'before_epoch': (None, 'before_epoch', 2, None),
    'before_batch': ('NaNGuardHook', 'before_batch', 1, 1),
    'after_batch': (None, 'after_batch', 2, 1),
    'after_last_batch': (None, 'after_batch', 1, BATCHES - 1),
    'after_validation': ('ValidationHook', 'after_epoch', 1, None),
    'after_best_weights': ('BestCheckpointHook', 'after_epoch', 2, None),
    'after_metrics_row': ('MetricsJSONHook', 'after_epoch', 1, None),
    'after_checkpoint': ('CheckpointHook', 'after_epoch', 1, None),
    'after_last_checkpoint': ('CheckpointHook', 'after_epoch', EPOCHS - 1, None),
    'epoch_0_before_first_checkpoint': ('MetricsJSONHook', 'after_epoch', 0, None),
}


@pytest.mark.parametrize('where', sorted(BOUNDARIES))
def test_interrupt_at_each_boundary_then_resume(tmp_path, reference, where):
    run = _Run(tmp_path)
    assert run.start(BOUNDARIES[where])
    run.start()
    rows = run.rows()
    assert [r['epoch'] for r in rows] == list(range(EPOCHS))  # one row per epoch
    assert rows == reference[0]
    assert run.best_log() == reference[1]


def test_interrupted_twice_in_a_row(tmp_path, reference):
    run = _Run(tmp_path)
    assert run.start(BOUNDARIES['after_metrics_row'])
    assert run.start(BOUNDARIES['after_batch'])
    assert run.start(BOUNDARIES['after_best_weights'])
    run.start()
    assert run.rows() == reference[0] and run.best_log() == reference[1]


def test_a_fresh_run_in_a_used_folder_starts_the_files_anew(tmp_path, reference):
    run = _Run(tmp_path)
    assert run.start(BOUNDARIES['after_checkpoint'])
    run.start(resume=False)
    assert run.rows() == reference[0] and run.best_log() == reference[1]


def test_truncate_metrics_completes_a_line_a_kill_cut(tmp_path):
    path = tmp_path / 'm.jsonl'
    path.write_text('{"epoch": 0, "iteration": 3}\n{"epoch": 1, "iteration": 6}\n'
                    '{"epoch": 2, "itera')
    # the cut line is not ours to judge; what follows starts on a line of its own
    assert truncate_metrics(str(path), 3, 1) == 1
    assert path.read_text() == '{"epoch": 0, "iteration": 3}\n{"epoch": 2, "itera\n'
    writers.append_lines(str(path), ['{"epoch": 1, "iteration": 6}'])
    assert path.read_text().splitlines()[-1] == '{"epoch": 1, "iteration": 6}'


def test_truncate_best_map_log(tmp_path):
    path = tmp_path / 'b.log'
    path.write_text('0000:\t0.1000\n0002:\t0.3000\n0005:\t0.4000\nnotes\n')
    assert truncate_best_map_log(str(path), 2) == 1
    assert path.read_text() == '0000:\t0.1000\n0002:\t0.3000\nnotes\n'
    assert truncate_best_map_log(str(tmp_path / 'missing.log'), 2) == 0
