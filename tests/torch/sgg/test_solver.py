"""SGB's make_optimizer, both LR schedules (hand-computed sequences, and SGB's own classes: their
recorded outputs everywhere, live from $GLUONTRAIN_REFERENCES when set) and clip_grad_norm."""
import io
import logging

import pytest
import torch

from fixtures.recorded import SOURCES, Recorder, reference_source, source_module
from gluontrain.torch.sgg.config import get_cfg
from gluontrain.torch.sgg.solver import (WarmupMultiStepLR, WarmupReduceLROnPlateau,
                                         clip_grad_norm, make_lr_scheduler, make_optimizer)


def _opt(lr=1.0, n=1):
    params = [torch.nn.Parameter(torch.zeros(1)) for _ in range(n)]
    return torch.optim.SGD([{'params': [p], 'lr': lr} for p in params], lr=lr)


def _sgb_lr_scheduler():
    """SGB's solver/lr_scheduler.py as a module, or None without it."""
    src = reference_source('Scene-Graph-Benchmark.pytorch',
                           'maskrcnn_benchmark/solver/lr_scheduler.py')
    return source_module('sgb_lr_scheduler', src) if src else None


SGB = Recorder('sgb_solver', _sgb_lr_scheduler, "SGB's solver/lr_scheduler.py")


def _plateau(opt, cls=None):
    return (cls or WarmupReduceLROnPlateau)(opt, gamma=0.5, warmup_factor=0.5, warmup_iters=2,
                                            patience=2, threshold=0.01, cooldown=1)


def _multistep_lrs(cls):
    opt = _opt(0.3, 2)
    sched = cls(opt, (5, 9), 0.2, 0.1, 7)
    lrs = []
    for _ in range(12):
        lrs.append([g['lr'] for g in opt.param_groups])
        opt.step()
        sched.step()
    return lrs


def _plateau_states(cls):
    opt = _opt()
    sched = _plateau(opt, cls)
    states = []
    for it, m in enumerate(PLATEAU_METRICS * 2, 1):
        sched.step(m, epoch=it)
        states.append([opt.param_groups[0]['lr'], sched.stage_count, sched.best,
                       sched.num_bad_epochs, sched.under_cooldown])
    return states


@SGB.case
def schedules(sgb):
    """SGB's two schedules on a fixed sequence: the LRs of both parameter groups for 12 steps
    of WarmupMultiStepLR, then (lr, stage_count, best, num_bad_epochs, under_cooldown) after
    each plateau step."""
    return {'multistep_lrs': _multistep_lrs(sgb.WarmupMultiStepLR),
            'plateau_states': _plateau_states(sgb.WarmupReduceLROnPlateau)}


def test_make_optimizer_groups_as_sgb():
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Linear(2, 2)
            self.slow = torch.nn.Linear(2, 2)
            self.frozen = torch.nn.Linear(2, 2)
            self.frozen.weight.requires_grad = False
            self.frozen.bias.requires_grad = False
    cfg = get_cfg()
    cfg.SOLVER.BASE_LR, cfg.SOLVER.BIAS_LR_FACTOR = 0.1, 2
    cfg.SOLVER.WEIGHT_DECAY, cfg.SOLVER.WEIGHT_DECAY_BIAS = 1e-4, 0.0
    cfg.SOLVER.MOMENTUM = 0.9
    opt = make_optimizer(cfg, Net(), slow_heads=['slow'], slow_ratio=10.0, rl_factor=4.0)
    # one group per trainable parameter: a.weight, a.bias, slow.weight, slow.bias
    assert [len(g['params']) for g in opt.param_groups] == [1, 1, 1, 1]
    assert [g['lr'] for g in opt.param_groups] == pytest.approx([0.4, 0.8, 0.04, 0.08])
    assert [g['weight_decay'] for g in opt.param_groups] == [1e-4, 0.0, 1e-4, 0.0]
    assert all(g['momentum'] == 0.9 for g in opt.param_groups)


def test_warmup_multistep_hand_computed():
    opt = _opt()
    sched = WarmupMultiStepLR(opt, (6, 8), gamma=0.1, warmup_factor=0.1, warmup_iters=4)
    lrs = [opt.param_groups[0]['lr']]
    for _ in range(9):
        sched.step()
        lrs.append(opt.param_groups[0]['lr'])
    # last_epoch 0..9: linear warmup 0.1 -> 1 over 4, then x0.1 at 6 and at 8
    assert lrs == pytest.approx([0.1, 0.325, 0.55, 0.775, 1.0, 1.0, 0.1, 0.1, 0.01, 0.01])


def test_warmup_constant_method():
    opt = _opt(2.0)
    sched = WarmupMultiStepLR(opt, (), warmup_factor=0.25, warmup_iters=2,
                              warmup_method='constant')
    seq = [opt.param_groups[0]['lr']]
    for _ in range(2):
        sched.step()
        seq.append(opt.param_groups[0]['lr'])
    assert seq == pytest.approx([0.5, 0.5, 2.0])


PLATEAU_METRICS = [None, 0.5, 0.505, 0.4, 0.3, 0.3, 0.3, 0.9, None]
# construction: SGB's step(0) -> last_epoch 1 (warmup 0.75), best 0.0, cooldown used up;
# it 2: best 0.5; it 3: 0.505 < 0.5 + 0.01 -> bad 1; it 4: bad 2 -> decay (0.5), cooldown 1;
# it 5: bad reset by cooldown; it 6: bad 1; it 7: bad 2 -> decay (0.25); it 8: best 0.9.
PLATEAU_LRS = [0.75, 0.75, 1.0, 1.0, 0.5, 0.5, 0.5, 0.25, 0.25, 0.25]


def test_warmup_plateau_hand_computed():
    opt = _opt()
    sched = _plateau(opt)
    assert sched.last_epoch == 1 and sched.best == 0.0 and sched.under_cooldown == 0
    lrs = [opt.param_groups[0]['lr']]
    for it, m in enumerate(PLATEAU_METRICS, 1):
        sched.step(m, epoch=it)
        lrs.append(opt.param_groups[0]['lr'])
    assert lrs == pytest.approx(PLATEAU_LRS)
    assert sched.stage_count == 2


@pytest.mark.parametrize('source', SOURCES)
def test_schedules_equal_sgb_source(source):
    ref = SGB.outputs('schedules', source)
    assert _multistep_lrs(WarmupMultiStepLR) == ref['multistep_lrs'].tolist()  # exactly
    assert _plateau_states(WarmupReduceLROnPlateau) == ref['plateau_states'].tolist()


@pytest.mark.parametrize('kind', ['multistep', 'plateau'])
def test_state_dict_resumes_the_sequence(kind):
    """The fix: a schedule restored from its state_dict continues where it stopped (SGB never
    saves it, so a resumed run restarts warmup and forgets its decays)."""
    def build(opt):
        if kind == 'multistep':
            return WarmupMultiStepLR(opt, (3, 6), 0.1, 0.5, 2)
        return _plateau(opt)

    def advance(sched, it):
        if kind == 'multistep':
            sched.step()
        else:
            sched.step(PLATEAU_METRICS[it - 1], epoch=it)

    opt = _opt()
    sched = build(opt)
    full = []
    for it in range(1, 10):
        advance(sched, it)
        full.append(opt.param_groups[0]['lr'])
    opt = _opt()
    sched = build(opt)
    for it in range(1, 5):
        advance(sched, it)
    buf = io.BytesIO()
    torch.save(sched.state_dict(), buf)
    opt2 = _opt()
    sched2 = build(opt2)
    sched2.load_state_dict(torch.load(io.BytesIO(buf.getvalue()), weights_only=True))
    assert opt2.param_groups[0]['lr'] == full[3]
    resumed = []
    for it in range(5, 10):
        advance(sched2, it)
        resumed.append(opt2.param_groups[0]['lr'])
    assert resumed == full[4:]


def test_make_lr_scheduler_by_type():
    cfg = get_cfg()
    cfg.SOLVER.SCHEDULE.TYPE = 'WarmupReduceLROnPlateau'
    sched = make_lr_scheduler(cfg, _opt(0.002))
    assert isinstance(sched, WarmupReduceLROnPlateau) and sched.gamma == 0.5
    cfg.SOLVER.SCHEDULE.TYPE = 'Cosine'
    with pytest.raises(ValueError, match='SOLVER.SCHEDULE.TYPE'):
        make_lr_scheduler(cfg, _opt())


def test_clip_grad_norm_hand_computed(caplog):
    a = torch.nn.Parameter(torch.zeros(2))
    b = torch.nn.Parameter(torch.zeros(1))
    c = torch.nn.Parameter(torch.zeros(1))  # no grad: skipped
    a.grad = torch.tensor([3.0, 0.0])
    b.grad = torch.tensor([4.0])
    logger = logging.getLogger('sgg-test')
    with caplog.at_level(logging.INFO, logger='sgg-test'):
        total = clip_grad_norm([('a', a), ('b', b), ('c', c)], 1.0, logger, clip=True,
                               verbose=True)
    assert float(total) == pytest.approx(5.0)
    coef = 1.0 / (5.0 + 1e-6)
    assert a.grad.tolist() == pytest.approx([3.0 * coef, 0.0])
    assert b.grad.tolist() == pytest.approx([4.0 * coef])
    lines = [r.getMessage() for r in caplog.records]
    assert lines[0].startswith('---Total norm 5.00000 clip coef 0.20000')
    assert lines[1].startswith('b') and lines[2].startswith('a')  # largest norm first
    # under the threshold nothing changes
    a.grad = torch.tensor([0.3, 0.0])
    clip_grad_norm([('a', a)], 1.0, clip=True)
    assert a.grad.tolist() == pytest.approx([0.3, 0.0])
