"""The k-th optimizer.step() of a torch run uses the lr of GluonCV's k-th trainer.step()."""
import io
import warnings

import numpy as np
import pytest
import torch

from gluontrain.mx import gluoncv  # noqa: F401  (gluoncv beside torch)
import mxnet as mx
from gluoncv.utils import LRScheduler as GluonLRSched, LRSequential as GluonLRSeq

from gluontrain.core.loop import Hook, TrainState, run_loop
from gluontrain.core.lr_scheduler import LRScheduler, LRSequential
from gluontrain.torch.lr_scheduler import GluonLRScheduler, LRSchedulerHook

torch.set_num_threads(1)

ITERS_PER_EPOCH = 5
CASES = {
    'warmup+step': dict(mode='step', step_epoch=[4, 6], step_factor=0.1),
    'warmup+cosine': dict(mode='cosine'),
    'warmup+poly': dict(mode='poly', power=2),
}


def _schedule(sched_cls, seq_cls, mode, warmup_epochs=2, epochs=8, lr=0.01, **kw):
    """The YOLOv3 recipe's construction (linear warm-up, then ``mode``)."""
    return seq_cls([
        sched_cls('linear', base_lr=0, target_lr=lr, nepochs=warmup_epochs,
                  iters_per_epoch=ITERS_PER_EPOCH),
        sched_cls(mode, base_lr=lr, nepochs=epochs - warmup_epochs,
                  iters_per_epoch=ITERS_PER_EPOCH, **kw),
    ])


def _model_and_optimizer(seed=0):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=123.0, momentum=0.9, weight_decay=5e-4)
    return model, optimizer


def _record_lrs(optimizer):
    """The lr of param group 0 at the moment each optimizer.step() runs."""
    seen = []
    optimizer.register_step_pre_hook(lambda opt, args, kwargs: seen.append(
        opt.param_groups[0]['lr']))
    return seen


def _train(model, optimizer, scheduler, num_steps):
    x, y = torch.randn(8, 3), torch.randn(8, 1)
    for _ in range(num_steps):
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()
        scheduler.step()


@pytest.mark.parametrize('case', sorted(CASES))
def test_lr_at_every_optimizer_step_equals_gluoncv(case):
    reference = _schedule(GluonLRSched, GluonLRSeq, **CASES[case])
    model, optimizer = _model_and_optimizer()
    scheduler = GluonLRScheduler(optimizer, _schedule(LRScheduler, LRSequential, **CASES[case]))
    seen = _record_lrs(optimizer)
    with warnings.catch_warnings():
        warnings.simplefilter('error')       # no "scheduler.step() before optimizer.step()"
        _train(model, optimizer, scheduler, reference.count + 3)
    expected = [reference(k) for k in range(1, reference.count + 4)]
    assert seen == expected
    assert scheduler.num_update == reference.count + 3
    assert seen[0] > 0 and seen[0] == reference(1) != reference(0)


def test_gluon_trainer_uses_schedule_k_at_its_kth_step():
    """The convention above is Gluon's: with plain SGD, update k moves w by exactly lr(k)."""
    schedule = _schedule(GluonLRSched, GluonLRSeq, 'cosine', epochs=4)
    weight = mx.gluon.Parameter('w', shape=(1,), init=mx.init.Zero())
    weight.initialize(ctx=mx.cpu())
    trainer = mx.gluon.Trainer([weight], 'sgd', {'lr_scheduler': schedule, 'wd': 0})
    moved = []
    for _ in range(schedule.count):
        weight.set_data(mx.nd.zeros((1,)))
        with mx.autograd.record():
            loss = weight.data().sum()            # gradient 1
        loss.backward()
        trainer.step(1)
        moved.append(-float(weight.data().asnumpy()[0]))
    expected = [np.float32(schedule(k)) for k in range(1, schedule.count + 1)]
    np.testing.assert_allclose(moved, expected, rtol=1e-6, atol=0)
    # the warm-up starts at 0, so an off-by-one would show: update 1 does move w
    assert moved[0] > 0 and schedule(0) == 0


def test_resume_from_state_dict_continues_the_sequence():
    config = CASES['warmup+step']
    total, cut = 40, 13
    model, optimizer = _model_and_optimizer()
    scheduler = GluonLRScheduler(optimizer, _schedule(LRScheduler, LRSequential, **config))
    straight = _record_lrs(optimizer)
    _train(model, optimizer, scheduler, total)

    model, optimizer = _model_and_optimizer()
    scheduler = GluonLRScheduler(optimizer, _schedule(LRScheduler, LRSequential, **config))
    first = _record_lrs(optimizer)
    _train(model, optimizer, scheduler, cut)
    buffer = io.BytesIO()
    torch.save({'optimizer': optimizer.state_dict(), 'scheduler': scheduler.state_dict()},
               buffer)
    buffer.seek(0)
    saved = torch.load(buffer, weights_only=True)

    model, optimizer = _model_and_optimizer(seed=1)
    scheduler = GluonLRScheduler(optimizer, _schedule(LRScheduler, LRSequential, **config))
    assert optimizer.param_groups[0]['lr'] != straight[cut]      # a fresh start would differ
    optimizer.load_state_dict(saved['optimizer'])
    scheduler.load_state_dict(saved['scheduler'])
    assert scheduler.num_update == cut
    second = _record_lrs(optimizer)
    _train(model, optimizer, scheduler, total - cut)
    assert first + second == straight


def test_begin_update_starts_mid_schedule():
    schedule = _schedule(GluonLRSched, GluonLRSeq, 'cosine')
    model, optimizer = _model_and_optimizer()
    scheduler = GluonLRScheduler(optimizer, _schedule(LRScheduler, LRSequential, 'cosine'),
                                 begin_update=17)
    seen = _record_lrs(optimizer)
    _train(model, optimizer, scheduler, 4)
    assert seen == [schedule(k) for k in (18, 19, 20, 21)]
    with pytest.raises(ValueError, match='begin_update'):
        GluonLRScheduler(optimizer, schedule, begin_update=-1)
    with pytest.raises(TypeError, match='callable'):
        GluonLRScheduler(optimizer, 0.1)


def test_lr_mult_scales_a_param_group_as_gluon():
    model, _ = _model_and_optimizer()
    optimizer = torch.optim.SGD([{'params': model[0].parameters()},
                                 {'params': model[2].parameters(), 'lr_mult': 0.1}], lr=1.0)
    schedule = LRScheduler('linear', base_lr=1.0, target_lr=0.0, niters=11)
    scheduler = GluonLRScheduler(optimizer, schedule)
    _train(model, optimizer, scheduler, 3)
    assert [g['lr'] for g in optimizer.param_groups] == pytest.approx([0.6, 0.06], abs=1e-15)


def test_hook_steps_once_per_batch_of_the_core_loop():
    reference = _schedule(GluonLRSched, GluonLRSeq, 'cosine')
    model, optimizer = _model_and_optimizer()
    scheduler = GluonLRScheduler(optimizer, _schedule(LRScheduler, LRSequential, 'cosine'))
    x, y = torch.randn(8, 3), torch.randn(8, 1)

    def step(batch, state):
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()
        return {'losses': {}, 'lr': optimizer.param_groups[0]['lr'], 'batch_size': 8}

    lrs = []

    class Record(Hook):
        def after_batch(self, state):
            lrs.append(state.outputs['lr'])

    batches = range(ITERS_PER_EPOCH)
    state = run_loop(step, batches, [LRSchedulerHook(scheduler), Record()], 0, 3)
    assert lrs == [reference(k) for k in range(1, 3 * ITERS_PER_EPOCH + 1)]
    assert scheduler.num_update == state.iteration == 15
    # resuming the loop at iteration 15 with a scheduler that was not restored fails at once
    fresh = GluonLRScheduler(optimizer, _schedule(LRScheduler, LRSequential, 'cosine'))
    with pytest.raises(ValueError, match='begin_update=15'):
        run_loop(step, batches, [LRSchedulerHook(fresh)], 3, 4, TrainState(iteration=15))
