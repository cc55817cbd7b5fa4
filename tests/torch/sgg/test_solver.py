"""SGB's make_optimizer, both LR schedules (hand-computed sequences, and SGB's own classes run
from the mirror when it is present) and clip_grad_norm."""
import io
import logging
import os
import subprocess
import types

import pytest
import torch

from gluontrain.torch.sgg.config import get_cfg
from gluontrain.torch.sgg.solver import (WarmupMultiStepLR, WarmupReduceLROnPlateau,
                                         clip_grad_norm, make_lr_scheduler, make_optimizer)

# The git directory of a Scene-Graph-Benchmark checkout under $GLUONTRAIN_REFERENCES
# (docs/testing.md); '' (tests skip) when it is not set.
_REFS = os.environ.get('GLUONTRAIN_REFERENCES', '')
MIRROR = os.path.join(_REFS, 'Scene-Graph-Benchmark.pytorch', '.git') if _REFS else ''


def _opt(lr=1.0, n=1):
    params = [torch.nn.Parameter(torch.zeros(1)) for _ in range(n)]
    return torch.optim.SGD([{'params': [p], 'lr': lr} for p in params], lr=lr)


def _sgb_lr_scheduler():
    """SGB's solver/lr_scheduler.py from the bare mirror, or None."""
    if not os.path.isdir(MIRROR):
        return None
    src = subprocess.run(['git', '--git-dir', MIRROR, 'show',
                          'HEAD:maskrcnn_benchmark/solver/lr_scheduler.py'],
                         capture_output=True, text=True, check=False).stdout
    if not src:
        return None
    mod = types.ModuleType('sgb_lr_scheduler')
    exec(compile(src, 'sgb_lr_scheduler.py', 'exec'), mod.__dict__)  # pylint: disable=exec-used
    return mod


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


def _plateau(opt):
    return WarmupReduceLROnPlateau(opt, gamma=0.5, warmup_factor=0.5, warmup_iters=2,
                                   patience=2, threshold=0.01, cooldown=1)


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


def test_schedules_equal_sgb_source():
    sgb = _sgb_lr_scheduler()
    if sgb is None:
        pytest.skip("GLUONTRAIN_REFERENCES not set: needs SGB's source (docs/testing.md)")
    ours_opt, ref_opt = _opt(0.3, 2), _opt(0.3, 2)
    ours = WarmupMultiStepLR(ours_opt, (5, 9), 0.2, 0.1, 7)
    ref = sgb.WarmupMultiStepLR(ref_opt, (5, 9), 0.2, 0.1, 7)
    for _ in range(12):
        assert [g['lr'] for g in ours_opt.param_groups] == \
            pytest.approx([g['lr'] for g in ref_opt.param_groups], rel=0, abs=0)
        ours_opt.step()
        ref_opt.step()
        ours.step()
        ref.step()
    ours_opt, ref_opt = _opt(), _opt()
    ours, ref = _plateau(ours_opt), sgb.WarmupReduceLROnPlateau(
        ref_opt, gamma=0.5, warmup_factor=0.5, warmup_iters=2, patience=2, threshold=0.01,
        cooldown=1)
    for it, m in enumerate(PLATEAU_METRICS * 2, 1):
        ours.step(m, epoch=it)
        ref.step(m, epoch=it)
        assert ours_opt.param_groups[0]['lr'] == ref_opt.param_groups[0]['lr']
        assert (ours.stage_count, ours.best, ours.num_bad_epochs, ours.under_cooldown) == \
            (ref.stage_count, ref.best, ref.num_bad_epochs, ref.under_cooldown)


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
