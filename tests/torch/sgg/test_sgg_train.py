"""The training pieces of relation_train_net: SGGStep (clip + per-parameter log, frozen
modules), ScheduleHook (both schedules, MAX_DECAY_STEP), PeriodicCheckpointHook (files),
SGBLogHook (SGB's line)."""
import logging
from collections import OrderedDict

import pytest
import torch

from gluontrain.core.loop import TrainState
from gluontrain.torch.sgg.checkpoint import Checkpointer
from gluontrain.torch.sgg.config import get_cfg
from gluontrain.torch.sgg.solver import WarmupMultiStepLR, WarmupReduceLROnPlateau
from gluontrain.torch.sgg.train import (PeriodicCheckpointHook, ScheduleHook, SGBLogHook,
                                        SGGStep)


class Images:
    def __init__(self, t):
        self.t = t

    def to(self, device):
        return self


class Target(list):
    def to(self, device):
        return self


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = torch.nn.Linear(1, 1, bias=False)
        self.head = torch.nn.Linear(1, 1, bias=False)
        self.backbone.weight.data.fill_(1.0)
        self.head.weight.data.fill_(1.0)

    def forward(self, images, targets):
        x = self.backbone(images.t)
        return OrderedDict(loss_a=(self.head(x) * 10).sum(), loss_b=self.head.weight.sum())


def test_step_clips_logs_and_keeps_frozen_modules_frozen(caplog):
    cfg = get_cfg()
    cfg.SOLVER.GRAD_NORM_CLIP, cfg.SOLVER.PRINT_GRAD_FREQ = 1.0, 2
    net = Net()
    opt = torch.optim.SGD([net.head.weight], lr=0.1)
    step = SGGStep(net, opt, cfg, torch.device('cpu'), eval_modules=(net.backbone,),
                   logger=logging.getLogger('sgg-step'))
    batch = (Images(torch.ones(1, 1)), [Target([1])], [0])
    with caplog.at_level(logging.INFO, logger='sgg-step'):
        out = step(batch, TrainState(iteration=0))
    # d(10 w + w)/dw = 11 -> clipped to norm 1: w = 1 - 0.1 * 11 / (11 + 1e-6)
    assert net.head.weight.item() == pytest.approx(1 - 0.1 * 11 / (11 + 1e-6))
    assert net.backbone.weight.requires_grad is False and net.backbone.weight.item() == 1.0
    assert out['losses']['loss'][0][0] == pytest.approx(11.0)
    assert out['losses']['loss_a'][0][0] == pytest.approx(10.0)
    assert out['lr'] == 0.1 and out['batch_size'] == 1
    assert any(r.getMessage().startswith('---Total norm 11.00000') for r in caplog.records)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger='sgg-step'):
        step(batch, TrainState(iteration=2))   # iteration 3: not a PRINT_GRAD_FREQ multiple
    assert not caplog.records
    with caplog.at_level(logging.INFO, logger='sgg-step'):
        step(batch, TrainState(iteration=3))   # iteration 4
    assert caplog.records


def test_step_with_loss_scaling_clips_the_unscaled_gradient():
    """``DTYPE "float16"`` (apex O1): the scaler's factor never reaches the clip or the
    update; the forward runs under the given autocast."""
    cfg = get_cfg()
    cfg.SOLVER.GRAD_NORM_CLIP = 1.0
    net = Net()
    opt = torch.optim.SGD([net.head.weight], lr=0.1)
    entered = []

    class Autocast:
        def __enter__(self):
            entered.append(torch.is_autocast_enabled('cpu'))

        def __exit__(self, *exc):
            return False

    scaler = torch.amp.GradScaler('cpu', init_scale=1024.0)
    step = SGGStep(net, opt, cfg, torch.device('cpu'), eval_modules=(net.backbone,),
                   logger=logging.getLogger('sgg-step'), autocast=Autocast, scaler=scaler)
    step((Images(torch.ones(1, 1)), [Target([1])], [0]), TrainState(iteration=0))
    assert entered == [False]
    # the same update as without scaling: the gradient 11, clipped to norm 1
    assert net.head.weight.item() == pytest.approx(1 - 0.1 * 11 / (11 + 1e-6))
    assert scaler.get_scale() == 1024.0


def test_relation_model_step_runs_under_autocast():
    """The model's ops (ROIAlign, box coding, NMS, the predictors) run under autocast: CPU
    bfloat16 here stands in for CUDA float16, which this machine cannot run."""
    import sys
    import os
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), 'modeling'))
    from sgg_model_helpers import make_batch, tiny_cfg  # pylint: disable=import-outside-toplevel
    from gluontrain.torch.sgg.modeling.model import build_relation_model
    torch.manual_seed(0)
    cfg = tiny_cfg('sgdet')
    cfg.MODEL.ROI_RELATION_HEAD.PREDICTOR = 'MotifPredictor'
    stats = {'fg_matrix': torch.zeros(6, 6, 4).long().numpy(),
             'pred_dist': torch.zeros(6, 6, 4).numpy(),
             'obj_classes': ['bg'] + ['o%d' % i for i in range(5)],
             'rel_classes': ['bg'] + ['r%d' % i for i in range(3)], 'att_classes': []}
    model = build_relation_model(cfg, stats)
    model.train()
    images, targets = make_batch()
    with torch.autocast('cpu', dtype=torch.bfloat16):
        losses = model(images, targets)
    total = sum(v.float() for v in losses.values())
    assert torch.isfinite(total)
    total.backward()


def _opt():
    return torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)


def test_schedule_hook_multistep_after_each_iteration():
    cfg = get_cfg()
    opt = _opt()
    hook = ScheduleHook(WarmupMultiStepLR(opt, (2,), warmup_iters=0), cfg)
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
    hook = ScheduleHook(WarmupMultiStepLR(opt, (1,), warmup_iters=0), get_cfg(), before=True)
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
    hook = ScheduleHook(sched, cfg)
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
    net = Net()
    ckpt = Checkpointer(get_cfg(), net, _opt(), None, str(tmp_path))
    cfg = get_cfg()
    cfg.SOLVER.SCHEDULE.TYPE = 'WarmupReduceLROnPlateau'
    sched_hook = ScheduleHook(None, cfg)
    hook = PeriodicCheckpointHook(ckpt, 2, 5, sched_hook)
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
