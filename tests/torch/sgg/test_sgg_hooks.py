"""SGB's training hooks: SGBScheduleHook (both schedules, MAX_DECAY_STEP), SGBCheckpointHook
(files), SGBLogHook (SGB's line)."""
import logging

import pytest
import torch

from gluontrain.core.loop import TrainState
from gluontrain.torch.sgg.checkpoint import Checkpointer
from gluontrain.torch.sgg.config import get_cfg
from gluontrain.torch.sgg.hooks import SGBCheckpointHook, SGBLogHook, SGBScheduleHook
from gluontrain.torch.sgg.solver import WarmupMultiStepLR, WarmupReduceLROnPlateau


def _opt():
    return torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)


def test_schedule_hook_multistep_after_each_iteration():
    cfg = get_cfg()
    opt = _opt()
    hook = SGBScheduleHook(WarmupMultiStepLR(opt, (2,), warmup_iters=0), cfg)
    state = TrainState()
    seen = []
    for it in range(1, 4):
        seen.append(opt.param_groups[0]['lr'])
        state.iteration = it
        hook.before_batch(state)
        hook.after_batch(state)
    assert seen == pytest.approx([1.0, 1.0, 0.1])  # iteration i trains at lr(i - 1)


def test_schedule_hook_detector_steps_before_the_forward():
    opt = _opt()
    hook = SGBScheduleHook(WarmupMultiStepLR(opt, (1,), warmup_iters=0), get_cfg(), before=True)
    state = TrainState(iteration=0)
    hook.before_batch(state)
    assert opt.param_groups[0]['lr'] == pytest.approx(0.1)  # iteration 1 trains at lr(1)
    state.iteration = 1
    hook.after_batch(state)
    assert opt.param_groups[0]['lr'] == pytest.approx(0.1)


def test_schedule_hook_plateau_reads_this_iterations_validation_and_stops():
    cfg = get_cfg()
    cfg.SOLVER.SCHEDULE.TYPE = 'WarmupReduceLROnPlateau'
    cfg.SOLVER.SCHEDULE.MAX_DECAY_STEP = 1
    opt = _opt()
    sched = WarmupReduceLROnPlateau(opt, 0.5, warmup_iters=0, patience=1, cooldown=0,
                                    threshold=0.5)
    hook = SGBScheduleHook(sched, cfg)
    state = TrainState(iteration=1)
    state.current, state.val_iteration = 0.9, 0   # an older validation: not this iteration's
    hook.after_batch(state)
    assert sched.best == 0.0 and not state.should_stop
    state.iteration, state.val_iteration, state.current = 2, 2, 0.2  # 0.2 < 0 + 0.5: bad
    hook.after_batch(state)
    assert sched.stage_count == 1 and state.should_stop and hook.decay_stopped
    assert 'MAX_DECAY_STEP 1' in state.stop_reason
    assert opt.param_groups[0]['lr'] == pytest.approx(0.5)


def test_periodic_checkpoints_and_final(tmp_path):
    net = torch.nn.Linear(1, 1)
    ckpt = Checkpointer(get_cfg(), net, _opt(), None, str(tmp_path))
    cfg = get_cfg()
    cfg.SOLVER.SCHEDULE.TYPE = 'WarmupReduceLROnPlateau'
    sched_hook = SGBScheduleHook(None, cfg)
    hook = SGBCheckpointHook(ckpt, 2, 5, sched_hook)
    state = TrainState()
    for it in range(1, 6):
        state.iteration = it
        hook.after_batch(state)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ['last_checkpoint', 'model_0000002.pth', 'model_0000004.pth',
                     'model_final.pth']
    assert state.last_checkpoint.endswith('model_final.pth')
    sched_hook.decay_stopped = True   # the fix: a MAX_DECAY_STEP stop writes model_final
    (tmp_path / 'model_final.pth').unlink()
    state.iteration = 3
    hook.after_batch(state)
    assert torch.load(str(tmp_path / 'model_final.pth'), weights_only=True)['iteration'] == 3


def test_sgb_log_line(caplog):
    opt = _opt()
    hook = SGBLogHook(opt, max_iter=3, logger=logging.getLogger('sgg-log'), period=2)
    state = TrainState()
    with caplog.at_level(logging.INFO, logger='sgg-log'):
        for it, loss in enumerate((3.0, 1.0, 2.0), 1):
            state.iteration = it
            state.outputs = {'losses': {'loss': [(loss, 1)]}}
            hook.before_batch(state)
            hook.after_batch(state)
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2   # iteration 2 (period) and 3 (max_iter)
    assert 'iter: 2' in lines[0] and 'loss: 1.0000 (2.0000)' in lines[0]
    assert 'iter: 3' in lines[1] and 'loss: 2.0000 (2.0000)' in lines[1]
    assert 'lr: 1.000000' in lines[1] and lines[1].startswith('eta: 0:00:00')
