"""core.defaults: RunPaths file names, build_hooks order and slots, fit (the resume, the NaN
stop as an error), and a budget ending on a pass boundary closing that pass through the whole
default hook set."""
import dataclasses
import json

import pytest

from gluontrain.core.defaults import HookSpec, Restored, RunPaths, build_hooks, fit
from gluontrain.core.hooks import (BestCheckpointHook, CheckpointHook, LogHook, LossMeterHook,
                                   MetricsJSONHook, NaNGuardHook, ProgressHook, ValidationHook,
                                   load_hooks_state_dict)
from gluontrain.core.loop import Hook, Period, TrainState, run_loop
from gluontrain.core.memory import ReleaseMemoryHook
from gluontrain.core.meters import LossMeter
from gluontrain.core.plots import CurvesHook, SamplesHook
from gluontrain.core.writers import TensorBoardHook


def _step(batch, state):
    return {'losses': {'Loss': [(1.0 + state.iteration, 1)]}, 'lr': 0.1, 'batch_size': 2}


def test_run_paths_name_every_file():
    paths = RunPaths('out/ssd300_VOC')
    assert (paths.train_log, paths.metrics, paths.curves, paths.val_samples,
            paths.last_checkpoint, paths.best_map_log) == (
        'out/ssd300_VOC_train.log', 'out/ssd300_VOC_metrics.jsonl', 'out/ssd300_VOC_curves.png',
        'out/ssd300_VOC_val_samples.png', 'out/ssd300_VOC_last.ckpt',
        'out/ssd300_VOC_best_map.log')
    assert paths.best('.pth') == 'out/ssd300_VOC_best.pth'
    assert paths.interval(3, 0.5, '.params') == 'out/ssd300_VOC_0003_0.5000.params'


def test_build_hooks_order(tmp_path):
    class _Recipe(Hook):
        pass
    hooks = build_hooks(HookSpec(RunPaths(str(tmp_path / 'p')), LossMeter(),
                                 validate=lambda: (['mAP'], [0.5]),
                                 save_params=lambda *a: None, checkpoint=lambda st, h: 'x'),
                        recipe_hooks=[_Recipe()])
    assert [type(h) for h in hooks] == [NaNGuardHook, LossMeterHook, _Recipe, LogHook,
                                        ValidationHook, BestCheckpointHook, MetricsJSONHook,
                                        CurvesHook, CheckpointHook, ProgressHook,
                                        ReleaseMemoryHook]
    bare = build_hooks(HookSpec(RunPaths(str(tmp_path / 'p')), LossMeter(), plots=False))
    assert [type(h) for h in bare] == [NaNGuardHook, LossMeterHook, LogHook, MetricsJSONHook,
                                       ProgressHook, ReleaseMemoryHook]


def test_a_full_hook_spec_gives_the_keyword_call_hook_list(tmp_path):
    """Issue 43: every value the 20 keywords of the former ``build_hooks`` took, given as one
    HookSpec, gives the hooks (types, order, arguments) that call gave."""
    class _Recipe(Hook):
        pass
    samples, period = SamplesHook(lambda title: None), Period(iterations=3)
    spec = HookSpec(RunPaths(str(tmp_path / 'p')), LossMeter(), header=['args'], batch_size=4,
                    num_batches=7, log_interval=2, validate=lambda: (['mAP'], [0.5]),
                    period=period, best_after='validation', save_params=lambda *a: None,
                    save_interval=5, checkpoint=lambda st, h: 'x', samples_hook=samples,
                    curves_title='t', tensorboard=str(tmp_path / 'tb'), plots=True)
    hooks = build_hooks(spec, [_Recipe()])
    assert [type(h) for h in hooks] == [NaNGuardHook, LossMeterHook, _Recipe, LogHook,
                                        ValidationHook, BestCheckpointHook, MetricsJSONHook,
                                        CurvesHook, SamplesHook, CheckpointHook, ProgressHook,
                                        TensorBoardHook, ReleaseMemoryHook]
    assert hooks[8] is samples and hooks[4].period is period
    assert (hooks[5].save_interval, hooks[5].after) == (5, 'validation')
    assert (hooks[11].logdir, hooks[11].log_interval) == (str(tmp_path / 'tb'), 2)
    assert hooks[10].num_batches == 7
    interval = build_hooks(dataclasses.replace(spec, tensorboard_interval=9))
    assert interval[-2].log_interval == 9


def test_budget_on_a_pass_boundary_closes_the_pass(tmp_path):
    # 3 batches per pass, max_iter 6: pass 1 ends with the budget and must be closed as any
    # other: epoch line, a full (not partial) metrics line, a checkpoint
    paths, meter, saved = RunPaths(str(tmp_path / 'run')), LossMeter(['Loss']), []

    def checkpoint(state, hooks_state):
        saved.append((state.epoch, state.iteration, hooks_state))
        return paths.last_checkpoint
    hooks = build_hooks(HookSpec(paths, meter, validate=lambda: (['mAP'], [0.5]),
                                 period=Period(iterations=6, at_max_iter=True),
                                 save_params=lambda best, cur, i, n: best.__setitem__(0, cur),
                                 best_after='validation', checkpoint=checkpoint, plots=True))
    state = run_loop(_step, range(3), hooks, 0, None, max_iter=6)
    assert state.iteration == 6 and state.stop_reason == 'max_iter 6 reached'
    assert state.last_checkpoint == paths.last_checkpoint and state.best == 0.5
    log = open(paths.train_log).read()
    assert '[Epoch 0] Training cost' in log and '[Epoch 1] Training cost' in log
    records = [json.loads(line) for line in open(paths.metrics)]
    assert [(r['epoch'], r['iteration'], r.get('partial', False)) for r in records] == [
        (0, 3, False), (1, 6, False)]
    assert records[1]['val'] == {'mAP': 0.5} and records[1]['time'] is not None
    assert [(e, i) for e, i, _ in saved] == [(0, 3), (1, 6)]
    # the checkpoint carries every stateful hook's state, this pass included
    hooks_state = saved[-1][2]
    assert hooks_state['BestCheckpointHook'] == {'best': 0.5}
    assert [r['epoch'] for r in hooks_state['CurvesHook']['records']] == [0, 1]
    assert hooks_state['LossMeterHook']['meter'] == meter.state_dict()
    # ... which a fresh hook set takes back
    fresh_meter = LossMeter(['Loss'])
    fresh = build_hooks(HookSpec(RunPaths(str(tmp_path / 'again')), fresh_meter,
                                 save_params=lambda *a: None))
    load_hooks_state_dict(fresh, hooks_state)
    assert fresh_meter.running() == meter.running()
    assert fresh[3].best_map == [0.5]


def test_fit_raises_on_a_run_the_nan_guard_stopped_and_returns_the_others():
    class Guard(Hook):
        def after_batch(self, state):
            if state.outputs['loss'] != state.outputs['loss']:
                state.nonfinite = True
                state.stop('non-finite loss at iteration {}'.format(state.iteration))

    losses = iter([1.0, float('nan'), 3.0])
    with pytest.raises(FloatingPointError, match='non-finite loss at iteration 2'):
        fit(lambda batch, state: {'loss': next(losses)}, [0, 1, 2], [Guard()], 0, 1)
    done = fit(lambda batch, state: {'loss': 1.0}, [0, 1, 2], [Guard()], 0, 2)
    assert done.iteration == 6 and not done.nonfinite


def test_recipe_hooks_take_their_slot(tmp_path):
    """A hook declares its place: 'after_validation' sits between the validation and the best
    score, 'after_best' right after the best score, 'recipe' before the log; list order
    within a slot; an unknown slot is refused."""
    def hook(slot):
        made = type('Hook_' + slot, (Hook,), {'slot': slot})()
        return made
    late, sched, snap, early = (hook('after_best'), hook('after_validation'),
                                hook('after_best'), hook('recipe'))
    hooks = build_hooks(HookSpec(RunPaths(str(tmp_path / 'p')), LossMeter(),
                                 validate=lambda: (['mAP'], [0.5]), save_params=lambda *a: None,
                                 plots=False),
                        recipe_hooks=[late, sched, snap, early])
    kinds = [type(h) for h in hooks]
    assert hooks[2] is early and kinds[3] is LogHook
    assert kinds[4] is ValidationHook and hooks[5] is sched
    assert kinds[6] is BestCheckpointHook and hooks[7:9] == [late, snap]
    with pytest.raises(ValueError, match="hook slot 'nowhere'"):
        build_hooks(HookSpec(RunPaths(str(tmp_path / 'p')), LossMeter()),
                    recipe_hooks=[hook('nowhere')])


class _Counter(Hook):
    """Counts its batches; its count is its checkpointed state."""

    def __init__(self):
        self.count, self.epochs = 0, []

    def before_epoch(self, state):
        self.epochs.append((state.epoch, state.resume_batch))

    def after_batch(self, state):
        self.count += 1

    def state_dict(self):
        return {'count': self.count}

    def load_state_dict(self, sd):
        self.count = sd['count']


def test_fit_resumes_an_epoch_run_after_the_saved_epoch():
    counter = _Counter()
    payload = {'epoch': 1, 'extra': {'hooks': {'_Counter': {'count': 8}}}}
    state = fit(lambda b, s: {}, [0, 1, 2, 3], [counter], 0, 4,
                restored=Restored('run_last.ckpt', payload, TrainState(iteration=8)))
    # epochs 2 and 3 ran (4 batches each) on top of the restored count and iteration
    assert counter.epochs == [(2, 0), (3, 0)] and counter.count == 16
    assert state.iteration == 16
    assert state.resumed_from == state.last_checkpoint == 'run_last.ckpt'


def test_fit_resumes_an_iteration_run_inside_its_pass():
    counter, seen = _Counter(), []
    payload = {'epoch': 2, 'extra': {'hooks': {'_Counter': {'count': 7}}}}
    state = fit(lambda b, s: seen.append(b) or {}, [0, 1, 2], [counter], max_iter=10,
                restored=Restored('ck', payload, TrainState(iteration=7)))
    # iteration 7 of passes of 3: pass 2 at its batch 1; the loop numbers batches from there
    assert counter.epochs[0] == (2, 1) and state.iteration == 10
    assert counter.count == 10 and len(seen) == 3
