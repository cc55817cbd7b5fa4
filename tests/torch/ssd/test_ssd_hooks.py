"""SSD hooks: ssd.pytorch's LR rule, its log line and its periodic weights files."""
import logging

import pytest
import torch

from gluontrain.core.loop import TrainState
from gluontrain.torch.ssd.hooks import SSDCheckpointHook, SSDLogHook, SSDScheduleHook


def _reference_lrs(n, base, gamma, lr_steps):
    """The reference loop's arithmetic: step_index grows when ``iteration in lr_steps``."""
    lrs, step_index = [], 0
    for iteration in range(n):
        if iteration in lr_steps:
            step_index += 1
        lrs.append(base * gamma ** step_index)
    return lrs


def _hook_lrs(iterations, base, gamma, lr_steps, groups=1):
    """The rate of each param group that SSDScheduleHook sets before each step."""
    params = [torch.nn.Parameter(torch.zeros(1)) for _ in range(groups)]
    opt = torch.optim.SGD([{'params': [p]} for p in params], lr=1.0)
    hook, state, lrs = SSDScheduleHook(opt, base, gamma, lr_steps), TrainState(), []
    for it in iterations:
        state.iteration = it
        hook.before_batch(state)
        lrs.append([g['lr'] for g in opt.param_groups])
    return lrs


def test_lr_follows_the_reference_counter():
    steps = (3, 5, 9)
    got = [lr for (lr,) in _hook_lrs(range(12), 1e-3, 0.1, steps)]
    assert got == pytest.approx(_reference_lrs(12, 1e-3, 0.1, steps), rel=1e-12)
    # resuming at iteration 6: the reference restarts step_index at 0 (lr 1e-3); we do not
    assert _hook_lrs([6], 1e-3, 0.1, steps) == [[pytest.approx(1e-5)]]


def _steps(hook, n, losses=(1.0, 0.25)):
    """Run ``hook.after_batch`` as the loop does after steps 1..n (``state.iteration``
    counts finished steps)."""
    state = TrainState()
    for it in range(1, n + 1):
        state.iteration = it
        state.outputs = {'losses': {'loc_loss': [(losses[0], 1)], 'conf_loss': [(losses[1], 1)]}}
        hook.after_batch(state)


def test_log_hook_writes_the_reference_line_at_its_0_based_indices(caplog):
    caplog.set_level(logging.INFO, logger='gluontrain')
    _steps(SSDLogHook(3), 8)
    # the reference logs at loop index i with i % log_interval == 0, the sum of both losses
    assert [r.getMessage() for r in caplog.records] == [
        'iter {} || Loss: 1.2500 ||'.format(i) for i in (0, 3, 6)]
    caplog.clear()
    _steps(SSDLogHook(0), 4)  # 0: never
    assert not caplog.records


def test_checkpoint_hook_saves_at_the_reference_s_indices_but_not_the_first():
    saved = []
    _steps(SSDCheckpointHook(3, saved.append), 10)
    assert saved == [3, 6, 9]  # i != 0 and i % save_interval == 0, 0-based
    saved.clear()
    _steps(SSDCheckpointHook(0, saved.append), 4)
    assert saved == []


def test_schedule_hook_sets_every_group_before_each_step():
    iterations = (0, 2, 3, 4, 5, 6)
    want = _reference_lrs(7, 1e-3, 0.1, (3, 5))
    for it, lrs in zip(iterations, _hook_lrs(iterations, 1e-3, 0.1, (3, 5), groups=2)):
        assert lrs == [pytest.approx(want[it], rel=1e-12)] * 2
