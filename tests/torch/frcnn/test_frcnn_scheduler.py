"""seamseg's schedules at every step of a short run (burn-in then poly)."""
from functools import partial

import pytest
import torch

from gluontrain.core.lr_scheduler import poly_factor
from gluontrain.torch.frcnn import scheduler as S
from gluontrain.torch.frcnn.config import load_config


def _optimizer(norm_lr=0.0, lr=0.01):
    a, b = torch.nn.Parameter(torch.zeros(1)), torch.nn.Parameter(torch.zeros(1))
    return torch.optim.SGD([{'params': [a], 'lr': norm_lr}, {'params': [b], 'lr': lr}], lr=lr)


def _config(tmp_path, text):
    p = tmp_path / 's.ini'
    p.write_text('[scheduler]\n' + text)
    return load_config(str(p))['scheduler']


def test_burn_in_then_poly_every_step(tmp_path):
    # 2 epochs x 5 batches: count 10; burn-in 3 steps from 0.333; poly gamma 0.9
    conf = _config(tmp_path, 'epochs = 2\nburn_in_steps = 3\n')
    opt = _optimizer()
    sch = S.scheduler_from_config(conf, opt, epoch_length=5)
    lrs = [opt.param_groups[1]['lr']]  # after construction: lr(0)
    for global_step in range(1, 11):  # train(): global_step += 1; scheduler.step(global_step)
        sch.step(global_step)
        lrs.append(opt.param_groups[1]['lr'])
        assert opt.param_groups[0]['lr'] == 0.0  # bn_frozen group stays at 0
    expected = [0.01 * 0.333,
                0.01 * (0.333 + 0.667 * 1 / 3),
                0.01 * (0.333 + 0.667 * 2 / 3),
                0.01 * 1.0,                           # it == steps: still burn-in, factor 1
                0.01 * (1 - 4 / 10) ** 0.9,           # poly at the same it, not shifted
                0.01 * (1 - 5 / 10) ** 0.9,
                0.01 * (1 - 6 / 10) ** 0.9,
                0.01 * (1 - 7 / 10) ** 0.9,
                0.01 * (1 - 8 / 10) ** 0.9,
                0.01 * (1 - 9 / 10) ** 0.9,
                0.0]                                  # the last step runs at lr 0
    assert lrs == pytest.approx(expected, rel=1e-12, abs=1e-15)
    assert sch.get_lr()[0] == 0.0  # what seamseg logs as "lr": the norm group


def _run(sch, opt, steps):
    out = []
    for g in steps:
        sch.step(g)
        out.append(opt.param_groups[1]['lr'])
    return out


def test_reference_lag_reproduces_seamseg_order(tmp_path):
    """seamseg computes the rate before advancing the wrapped counter: after the burn-in,
    step g runs at poly(g - 1)."""
    conf = _config(tmp_path, 'epochs = 2\nburn_in_steps = 3\n')
    opt = _optimizer()
    sch = S.scheduler_from_config(conf, opt, 5, reference_lag=True)
    got = _run(sch, opt, range(1, 11))
    assert got[:3] == pytest.approx([0.01 * (0.333 + 0.667 * k / 3) for k in (1, 2, 3)])
    assert got[3:] == pytest.approx([0.01 * (1 - (g - 1) / 10) ** 0.9 for g in range(4, 11)])
    # After a resume (schedulers rebuilt, counter at 0) the first step runs at poly(0) = lr.
    opt2 = _optimizer()
    resumed = S.scheduler_from_config(conf, opt2, 5, reference_lag=True)
    assert _run(resumed, opt2, [7]) == pytest.approx([0.01])
    fixed_opt = _optimizer()
    fixed = S.scheduler_from_config(conf, fixed_opt, 5)
    assert _run(fixed, fixed_opt, [7]) == pytest.approx([0.01 * (1 - 7 / 10) ** 0.9])


def test_construction_state():
    opt = _optimizer(lr=0.1)
    base = S.LambdaLR(opt, partial(poly_factor, count=100, gamma=0.9))
    assert base.last_epoch == -1 and opt.param_groups[1]['lr'] == pytest.approx(0.1)
    burn = S.BurnInLR(base, 10, 0.5)
    assert burn.last_epoch == -1 and base.last_epoch == 0
    assert opt.param_groups[1]['lr'] == pytest.approx(0.05)
    assert [g['initial_lr'] for g in opt.param_groups] == [0.0, 0.1]
    burn.step()  # epoch=None: last_epoch + 1 = 0
    assert burn.last_epoch == 0 and base.last_epoch == 0


def test_default_config_numbers(tmp_path):
    conf = load_config(None)['scheduler']
    opt = _optimizer()
    sch = S.scheduler_from_config(conf, opt, epoch_length=100)  # count = 9000
    for g, lr in ((250, 0.01 * (0.333 + 0.667 * 250 / 500)), (500, 0.01),
                  (501, 0.01 * (1 - 501 / 9000) ** 0.9), (9000, 0.0)):
        sch.step(g)
        assert opt.param_groups[1]['lr'] == pytest.approx(lr, abs=1e-15)


@pytest.mark.parametrize('text, epoch_length, steps, expected', [
    ('type = step\nparams = {"step_size": 2, "gamma": 0.1}\nburn_in_steps = 0\n', 7,
     [0, 1, 2, 3, 4], [1, 1, .1, .1, .01]),
    ('type = multistep\nparams = {"milestones": [1, 3], "gamma": 0.5}\nburn_in_steps = 0\n', 7,
     [0, 1, 2, 3], [1, .5, .5, .25]),
    ('type = linear\nepochs = 2\nparams = {"from": 1.0, "to": 0.0}\nburn_in_steps = 0\n', 2,
     [0, 1, 2, 4], [1, .75, .5, 0]),
    ('type = poly\nupdate_mode = epoch\nepochs = 4\nburn_in_steps = 0\n', 99,
     [0, 1, 2], [1, .75 ** .9, .5 ** .9]),
])
def test_other_types(tmp_path, text, epoch_length, steps, expected):
    opt = _optimizer(lr=1.0)
    sch = S.scheduler_from_config(_config(tmp_path, text), opt, epoch_length)
    got = []
    for s in steps:
        sch.step(s)
        got.append(opt.param_groups[1]['lr'])
    assert got == pytest.approx(expected)


def test_bad_type_and_mode(tmp_path):
    # the configuration refuses them when it is loaded (issue 21), naming file and key
    with pytest.raises(ValueError, match=r'\[scheduler\] type = cosine is not one of'):
        _config(tmp_path, 'type = cosine\n')
    with pytest.raises(ValueError, match=r'\[scheduler\] update_mode = iter is not one of'):
        _config(tmp_path, 'update_mode = iter\n')
    # and so does the scheduler itself for a section built another way
    conf = _config(tmp_path, '')
    conf['type'] = 'cosine'
    with pytest.raises(ValueError, match='scheduler type'):
        S.scheduler_from_config(conf, _optimizer(), 1)
    conf['type'], conf['update_mode'] = 'poly', 'iter'
    with pytest.raises(ValueError, match='update_mode'):
        S.scheduler_from_config(conf, _optimizer(), 1)
    with pytest.raises(ValueError, match='increasing'):
        S.MultiStepLR(_optimizer(), [3, 1])
