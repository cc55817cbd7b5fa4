"""Hooks: GluonCV-format log lines, validation interval, NaN guard, JSON metrics, progress."""
import json
import os

from gluontrain.core.hooks import (CheckpointHook, LogHook, LossMeterHook, MetricsJSONHook,
                                   NaNGuardHook, ProgressHook, TensorBoardHook,
                                   ValidationHook, progress_enabled)
from gluontrain.core.loop import Hook, run_loop
from gluontrain.core.meters import LossMeter


def _step(values):
    it = iter(values)

    def step(batch, state):
        v = next(it)
        return {'losses': {'ObjLoss': [(v, 1)], 'ClassLoss': [(2 * v, 1)]}, 'lr': 1e-3,
                'batch_size': 4}
    return step


def test_log_lines_follow_gluoncv_format(tmp_path):
    meter = LossMeter()
    log = tmp_path / 'run_train.log'
    hooks = [LossMeterHook(meter), LogHook(meter, str(log), log_interval=2, batch_size=4,
                                          header=['Namespace(x=1)']),
             ValidationHook(lambda: (['a', 'mAP'], [0.5, 0.25]), val_interval=2)]
    run_loop(_step([1.0, 2.0, 3.0, 4.0, 5.0, 6.0]), range(3), hooks, 0, 2)
    lines = log.read_text().splitlines()
    assert lines[0] == 'Namespace(x=1)'
    assert lines[1] == 'Start training from [Epoch 0]'
    assert lines[2].startswith('[Epoch 0][Batch 1], LR: 1.00E-03, Speed: ')
    assert lines[2].endswith('samples/sec, ObjLoss=1.500, ClassLoss=3.000')
    assert lines[3].startswith('[Epoch 0] Training cost: ')
    assert lines[3].endswith('ObjLoss=2.000, ClassLoss=4.000')
    assert lines[4] == '[Epoch 0] Epoch mean: ObjLoss=2.000, ClassLoss=4.000'
    # epoch 1: running mean since epoch 0 (reference) and the epoch's own mean
    assert lines[5].startswith('[Epoch 1][Batch 1]') and lines[5].endswith('ObjLoss=3.000, ClassLoss=6.000')
    assert lines[6].endswith('ObjLoss=3.500, ClassLoss=7.000')
    assert lines[7] == '[Epoch 1] Epoch mean: ObjLoss=5.000, ClassLoss=10.000'
    # validation only on epoch 1 ((epoch + 1) % 2 == 0), reference layout
    assert lines[8:] == ['[Epoch 1] Validation: ', 'a=0.5', 'mAP=0.25']


def test_nan_guard_stops_and_names_iteration_losses_and_checkpoint(tmp_path):
    values = [1.0, 2.0, 3.0, float('nan'), 5.0, 6.0]
    saved = []
    meter = LossMeter()
    hooks = [NaNGuardHook(), LossMeterHook(meter),
             CheckpointHook(lambda st: saved.append(st.epoch) or 'run_last.ckpt')]
    state = run_loop(_step(values), range(2), hooks, 0, 3)
    assert state.should_stop and state.nonfinite
    assert state.iteration == 4 and saved == [0]
    reason = state.stop_reason
    assert 'epoch 1 batch 1 (iteration 4)' in reason and 'nan' in reason
    assert 'last good checkpoint: run_last.ckpt' in reason


def test_metrics_json_one_line_per_epoch(tmp_path):
    meter = LossMeter()
    path = tmp_path / 'm.jsonl'
    hooks = [LossMeterHook(meter), ValidationHook(lambda: (['c', 'mAP'], [float('nan'), 0.5])),
             MetricsJSONHook(str(path), meter)]
    run_loop(_step([1.0, 3.0]), range(1), hooks, 0, 2)
    recs = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r['epoch'] for r in recs] == [0, 1]
    assert recs[1]['loss_running'] == {'ObjLoss': 2.0, 'ClassLoss': 4.0}
    assert recs[1]['loss_epoch'] == {'ObjLoss': 3.0, 'ClassLoss': 6.0}
    assert recs[1]['val'] == {'c': None, 'mAP': 0.5} and recs[1]['iteration'] == 2



def test_metrics_json_writes_a_run_stopped_inside_an_epoch_as_partial(tmp_path):
    from gluontrain.core.loop import Hook
    meter = LossMeter()
    path = tmp_path / 'm.jsonl'

    class _ValidateAndStopAt5(Hook):
        """SSD's max_iter: validate after iteration 5, inside epoch 1 (3 batches an epoch)."""

        def after_batch(self, state):
            if state.iteration == 5:
                state.scores['val'] = (['mAP'], [0.75])
                state.stop('max_iter')

    run_loop(_step([1.0, 2.0, 3.0, 4.0, 5.0]), range(3),
             [LossMeterHook(meter), _ValidateAndStopAt5(), MetricsJSONHook(str(path), meter)],
             0, 10)
    recs = [json.loads(line) for line in path.read_text().splitlines()]
    assert [(r['epoch'], r['iteration'], r.get('partial', False)) for r in recs] == \
        [(0, 3, False), (1, 5, True)]
    assert recs[1]['loss_epoch'] == {'ObjLoss': 4.5, 'ClassLoss': 9.0}
    assert 'val' not in recs[0] and recs[1]['val'] == {'mAP': 0.75}

def test_progress_is_off_in_ci_and_counts_samples(monkeypatch):
    monkeypatch.setenv('CI', 'true')
    assert not progress_enabled()
    meter = LossMeter()
    hook = ProgressHook(num_batches=3, batch_size=4, enabled=True, mininterval=0, meter=meter)
    seen = []
    orig = hook.after_batch

    def after_batch(state):
        orig(state)
        seen.append((hook._bar.n, hook._bar.total, dict(hook._bar.postfix_dict
                                                       if hasattr(hook._bar, 'postfix_dict')
                                                       else {})))
    hook.after_batch = after_batch
    run_loop(_step([1.0, 2.0, 3.0]), range(3), [LossMeterHook(meter), hook], 0, 1)
    assert [n for n, _, _ in seen] == [4, 8, 12] and seen[0][1] == 12
    assert hook._bar is None


def _read_events(folder):
    """Scalars from TensorBoard event files (TFRecord framing: len, crc, data, crc)."""
    import struct
    from tensorboardX.proto import event_pb2
    out = []
    for name in sorted(os.listdir(folder)):
        data = open(os.path.join(folder, name), 'rb').read()
        pos = 0
        while pos < len(data):
            (length,) = struct.unpack('<Q', data[pos:pos + 8])
            event = event_pb2.Event.FromString(data[pos + 12:pos + 12 + length])
            pos += 12 + length + 4
            for v in event.summary.value:
                out.append((v.tag, event.step, v.simple_value))
    return out


def test_tensorboard_scalars(tmp_path):
    meter = LossMeter()
    hooks = [LossMeterHook(meter), ValidationHook(lambda: (['c', 'mAP'], [float('nan'), 0.5])),
             TensorBoardHook(str(tmp_path / 'tb'), meter, log_interval=2)]
    run_loop(_step([1.0, 3.0, 5.0, 7.0]), range(2), hooks, 0, 2)
    scalars = _read_events(str(tmp_path / 'tb'))
    assert ('train/ObjLoss', 2, 2.0) in scalars and ('train/ObjLoss', 4, 4.0) in scalars
    assert ('epoch/ClassLoss', 1, 12.0) in scalars and ('val/mAP', 1, 0.5) in scalars
    assert not [s for s in scalars if s[0] == 'val/c']  # NaN APs are left out
    assert any(t == 'train/lr' and abs(v - 1e-3) < 1e-9 for t, _, v in scalars)


def test_validation_by_iterations_logs_iter_lines_and_keeps_the_score(tmp_path):
    from gluontrain.core.loop import Period
    calls = []

    def validate():
        calls.append(len(calls))
        return ['mAP'], [[0.25, 0.5, 0.75][len(calls) - 1]]
    seen = []

    class _Probe(LossMeterHook):
        def after_batch(self, state):
            seen.append((state.iteration, state.val_iteration, state.current))
    log = tmp_path / 'train.log'
    hooks = [LogHook(LossMeter(), str(log), log_interval=0),
             ValidationHook(validate, period=Period(iterations=4, at_max_iter=True)),
             _Probe()]
    state = run_loop(_step([1.0] * 10), range(3), hooks, 0, None, max_iter=10)
    # every 4 iterations and at the budget, whatever the pass
    assert len(calls) == 3
    assert [(i, v) for i, v, _ in seen if v == i] == [(4, 4), (8, 8), (10, 10)]
    assert state.current == 0.75 and state.scores['val'] == (['mAP'], [0.75])
    text = log.read_text()
    assert [line for line in text.splitlines() if 'Validation' in line or 'mAP' in line] == [
        '[Iter 4] Validation: ', 'mAP=0.25', '[Iter 8] Validation: ', 'mAP=0.5',
        '[Iter 10] Validation: ', 'mAP=0.75']


def test_best_checkpoint_hook_owns_the_best_score_and_resumes_it():
    from gluontrain.core.hooks import BestCheckpointHook, hooks_state_dict, load_hooks_state_dict
    scores = iter([0.5, 0.25, 0.75])
    calls = []

    def save_params(best_map, current, epoch, interval):
        calls.append((epoch, current, best_map[0], interval))
        best_map[0] = max(best_map[0], current)  # GluonCV's in-place update
    hooks = [ValidationHook(lambda: (['mAP'], [next(scores)])),
             BestCheckpointHook(save_params, save_interval=5)]
    state = run_loop(_step([1.0] * 3), range(1), hooks, 0, 3)
    assert calls == [(0, 0.5, 0, 5), (1, 0.25, 0.5, 5), (2, 0.75, 0.5, 5)]
    assert state.best == 0.75
    saved = hooks_state_dict(hooks)
    assert saved == {'BestCheckpointHook': {'best': 0.75}}
    fresh = [ValidationHook(lambda: (['mAP'], [0.5])), BestCheckpointHook(save_params)]
    load_hooks_state_dict(fresh, saved)
    state = run_loop(_step([1.0]), range(1), fresh, 3, 4)
    assert calls[-1] == (3, 0.5, 0.75, 0) and state.best == 0.75


def test_best_checkpoint_after_validation_saves_once_per_validation():
    from gluontrain.core.hooks import BestCheckpointHook
    from gluontrain.core.loop import Period
    calls = []
    hooks = [ValidationHook(lambda: (['mAP'], [0.5]),
                            period=Period(iterations=3, at_max_iter=True)),
             BestCheckpointHook(lambda best, cur, index, interval: calls.append(index),
                                after='validation')]
    # validations at 3 (last batch of pass 0: after_batch, then after_epoch) and 5
    run_loop(_step([1.0] * 5), range(3), hooks, 0, None, max_iter=5)
    assert calls == [3, 5]


def test_loss_meter_state_resumes_through_hooks_state():
    from gluontrain.core.hooks import hooks_state_dict, load_hooks_state_dict
    meter = LossMeter()
    hooks = [LossMeterHook(meter)]
    run_loop(_step([1.0, 3.0]), range(2), hooks, 0, 1)
    other = LossMeter()
    load_hooks_state_dict([LossMeterHook(other)], hooks_state_dict(hooks))
    assert other.running() == meter.running() and other.running()['ObjLoss'] == 2.0


def test_no_validation_of_a_model_that_went_nan(tmp_path):
    from gluontrain.core.loop import Period
    calls = []
    hooks = [NaNGuardHook(),
             ValidationHook(lambda: calls.append(1) or (['mAP'], [0.0]),
                            period=Period(iterations=1, at_max_iter=True))]
    state = run_loop(_step([1.0, float('nan')]), range(4), hooks, 0, None, max_iter=2)
    assert calls == [1]  # after iteration 1 only
    assert state.nonfinite and 'non-finite loss' in state.stop_reason
    assert 'val' not in state.scores or state.val_iteration == 1


def test_resumed_run_marks_the_log_and_drops_the_rows_it_writes_again(tmp_path):
    from gluontrain.core.hooks import truncate_metrics
    from gluontrain.core.loop import TrainState
    meter = LossMeter()
    log, path = tmp_path / 'r_train.log', tmp_path / 'r_metrics.jsonl'
    # the interrupted run: epochs 0, 1 closed (iterations 2, 4), killed inside epoch 2
    rows = [{'epoch': 0, 'iteration': 2}, {'epoch': 1, 'iteration': 4},
            {'epoch': 2, 'iteration': 5, 'partial': True}]
    path.write_text(''.join(json.dumps(r) + '\n' for r in rows))
    state = TrainState(iteration=2, resumed_from='r_last.ckpt')  # epoch 0's checkpoint
    hooks = [LossMeterHook(meter), LogHook(meter, str(log), log_interval=0),
             MetricsJSONHook(str(path), meter)]
    run_loop(_step([1.0, 2.0, 3.0, 4.0]), range(2), hooks, 1, 3, state)
    assert 'resumed from r_last.ckpt at epoch 1, iteration 2' in log.read_text().splitlines()
    recs = [json.loads(line) for line in path.read_text().splitlines()]
    assert [(r['epoch'], r['iteration']) for r in recs] == [(0, 2), (1, 4), (2, 6)]
    # a partial row of the epoch a mid-pass resume runs again goes too; others stay
    path.write_text(''.join(json.dumps(r) + '\n' for r in rows) + 'not json\n')
    assert truncate_metrics(str(path), 5, 2) == 1
    assert path.read_text().splitlines()[-1] == 'not json'
    assert truncate_metrics(str(tmp_path / 'missing.jsonl'), 0, 0) == 0


def test_loss_meter_keeps_the_restored_part_of_a_pass_resumed_inside_it():
    from gluontrain.core.loop import TrainState

    class _Rest:
        """Two batches a pass; the first pass of the resumed run leaves out the done one."""
        def __init__(self):
            self.passes = 0

        def __iter__(self):
            self.passes += 1
            return iter([0] if self.passes == 1 else [0, 1])

    meter = LossMeter()
    meter.update({'ObjLoss': [(1.0, 1)]})  # the checkpoint's meter: batch 0 of epoch 1 done
    epochs = []

    class _Record(LossMeterHook):
        def after_epoch(self, state):
            epochs.append((state.epoch, state.batch, self.meter.epoch()['ObjLoss']))
    run_loop(_step([3.0, 5.0, 7.0]), _Rest(), [_Record(meter)], 1, 3,
             TrainState(iteration=3, resume_batch=1))
    # epoch 1 = the restored batch (1.0) + batch 1 (3.0); epoch 2 alone
    assert epochs == [(1, 1, 2.0), (2, 1, 6.0)]


def test_a_renamed_hook_reads_the_state_saved_under_its_former_name():
    from gluontrain.core.hooks import load_hooks_state_dict

    class Counter(Hook):
        former_names = ('OldCounter',)

        def __init__(self):
            self.count = 0

        def state_dict(self):
            return {'count': self.count}

        def load_state_dict(self, state_dict):
            self.count = state_dict['count']

    hooks = [Counter(), Counter()]
    # a checkpoint written before the rename: the second instance numbered as before
    load_hooks_state_dict(hooks, {'OldCounter': {'count': 3}, 'OldCounter#2': {'count': 5}})
    assert [h.count for h in hooks] == [3, 5]
    # the current name wins where a checkpoint has both
    load_hooks_state_dict(hooks, {'Counter': {'count': 7}, 'OldCounter': {'count': 1}})
    assert hooks[0].count == 7
