"""Resuming a torch run from its checkpoint equals never stopping: every loss, every weight."""
import argparse
import random

import numpy as np
import pytest
import torch

from gluontrain.core import checkpoint as core_checkpoint
from gluontrain.core.hooks import CheckpointHook
from gluontrain.core.loop import Hook, run_loop
from gluontrain.core.lr_scheduler import LRScheduler, LRSequential
from gluontrain.torch.checkpoint import (load_weights, restore_checkpoint, save_checkpoint,
                                         save_weights)
from gluontrain.torch.lr_scheduler import GluonLRScheduler, LRSchedulerHook

torch.set_num_threads(1)

BATCHES_PER_EPOCH = 4
ARGS = argparse.Namespace(lr=0.05, epochs=4)


def _build(seed=0):
    """Model with dropout, SGD with momentum, warm-up + cosine schedule."""
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.ReLU(), torch.nn.Dropout(0.3),
                                torch.nn.Linear(16, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0, momentum=0.9, weight_decay=1e-4)
    schedule = LRSequential([
        LRScheduler('linear', base_lr=0, target_lr=ARGS.lr, nepochs=1,
                    iters_per_epoch=BATCHES_PER_EPOCH),
        LRScheduler('cosine', base_lr=ARGS.lr, nepochs=ARGS.epochs - 1,
                    iters_per_epoch=BATCHES_PER_EPOCH)])
    return model, optimizer, GluonLRScheduler(optimizer, schedule)


def _loader():
    generator = torch.Generator().manual_seed(7)
    x = torch.randn(4 * BATCHES_PER_EPOCH, 4, generator=generator)
    y = x @ torch.tensor([[1.0], [-2.0], [0.5], [3.0]])
    # shuffle=True draws each epoch's order from torch's global RNG
    return torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=4,
                                       shuffle=True)


class _Step:
    """Forward, MSE, backward, update, with augmentation drawn from torch's and numpy's RNG."""

    def __init__(self, model, optimizer):
        self.model, self.optimizer = model, optimizer

    def __call__(self, batch, state):
        x, y = batch
        x = x * float(np.random.uniform(0.9, 1.1)) + 0.05 * torch.randn_like(x)
        self.model.train()
        self.optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(self.model(x), y)
        loss.backward()
        self.optimizer.step()
        n = x.shape[0]
        return {'losses': {'mse': [(loss.item() * n, n)]},
                'lr': self.optimizer.param_groups[0]['lr'], 'batch_size': n}


class _Record(Hook):
    def __init__(self):
        self.losses, self.lrs = [], []

    def after_batch(self, state):
        self.losses.append(state.outputs['losses']['mse'][0][0])
        self.lrs.append(state.outputs['lr'])


def _seed_everything():
    random.seed(3)
    np.random.seed(3)
    torch.manual_seed(3)


def _run(model, optimizer, scheduler, start_epoch, epochs, state=None, checkpoint=None):
    record = _Record()
    hooks = [LRSchedulerHook(scheduler), record]
    if checkpoint:
        hooks.append(CheckpointHook(lambda st: save_checkpoint(
            checkpoint, model, optimizer, scheduler, st.epoch, st.iteration, 0.25, ARGS)))
    state = run_loop(_Step(model, optimizer), _loader(), hooks, start_epoch, epochs, state)
    return record, state


@pytest.fixture(scope='module')
def straight():
    model, optimizer, scheduler = _build()
    _seed_everything()
    record, state = _run(model, optimizer, scheduler, 0, ARGS.epochs)
    return record, state, model


def test_resume_equals_the_uninterrupted_run(straight, tmp_path):
    record, state, model = straight
    path = str(tmp_path / 'run_last.ckpt')
    first_model, first_optimizer, first_scheduler = _build()
    _seed_everything()
    first, _ = _run(first_model, first_optimizer, first_scheduler, 0, 2, checkpoint=path)

    # a new process, in effect: other weights, other RNG states, fresh optimizer and scheduler
    random.seed(99)
    np.random.seed(99)
    resumed_model, optimizer, scheduler = _build(seed=1)
    payload, resumed_state = restore_checkpoint(path, resumed_model, optimizer, scheduler)
    assert payload['epoch'] == 1 and payload['best_score'] == 0.25
    assert payload['args'] == vars(ARGS) and resumed_state.iteration == 2 * BATCHES_PER_EPOCH
    # the hooks drop the rows the interrupted run wrote past the checkpoint (frcnn's metrics
    # held a redone epoch twice when the recipe did not say it resumed)
    assert resumed_state.resumed_from == resumed_state.last_checkpoint == path
    second, final_state = _run(resumed_model, optimizer, scheduler, payload['epoch'] + 1,
                               ARGS.epochs, resumed_state)

    assert first.losses + second.losses == record.losses
    assert first.lrs + second.lrs == record.lrs
    assert final_state.iteration == state.iteration == ARGS.epochs * BATCHES_PER_EPOCH
    for (name, got), expected in zip(resumed_model.state_dict().items(),
                                     model.state_dict().values()):
        assert torch.equal(got, expected), name


def test_without_the_torch_rng_restore_the_run_diverges(straight, tmp_path):
    """The check above can fail: dropout, noise and shuffling depend on torch's RNG state."""
    record = straight[0]
    path = str(tmp_path / 'run_last.ckpt')
    model, optimizer, scheduler = _build()
    _seed_everything()
    _run(model, optimizer, scheduler, 0, 2, checkpoint=path)
    model, optimizer, scheduler = _build()
    payload, state = restore_checkpoint(path, model, optimizer, scheduler)
    torch.manual_seed(12345)
    second, _ = _run(model, optimizer, scheduler, payload['epoch'] + 1, ARGS.epochs, state)
    assert second.losses != record.losses[2 * BATCHES_PER_EPOCH:]


def test_checkpoint_holds_the_torch_rng_and_refuses_a_scheduler_mismatch(tmp_path):
    path = str(tmp_path / 'a.ckpt')
    model, optimizer, scheduler = _build()
    torch.manual_seed(5)
    save_checkpoint(path, model, optimizer, scheduler, 0, 4, 0.0, ARGS, extra={'meter': 1})
    payload = core_checkpoint.load_checkpoint(path)
    assert payload['extra']['meter'] == 1
    torch.manual_seed(5)
    np.testing.assert_array_equal(payload['extra']['torch_rng']['cpu'],
                                  torch.get_rng_state().numpy())
    with pytest.raises(ValueError, match='holds an lr scheduler state'):
        restore_checkpoint(path, *_build()[:2])
    save_checkpoint(path, model, optimizer, None, 0, 4, 0.0, ARGS)
    with pytest.raises(ValueError, match='holds no lr scheduler state'):
        restore_checkpoint(path, *_build())


def test_load_weights_is_weights_only(tmp_path):
    trained, optimizer, scheduler = _build(seed=0)
    ckpt, weights = str(tmp_path / 'run_last.ckpt'), str(tmp_path / 'run_best.pt')
    save_checkpoint(ckpt, trained, optimizer, scheduler, 3, 16, 0.5, ARGS)
    save_weights(weights, trained)
    for path in (ckpt, weights):
        model, optimizer, scheduler = _build(seed=1)
        result = load_weights(path, model)
        assert not result.missing_keys and not result.unexpected_keys
        assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(),
                                                      trained.state_dict().values()))
        # the optimizer and schedule are untouched: a new run starts at update 0
        assert scheduler.num_update == 0 and not optimizer.state
    other = torch.nn.Sequential(torch.nn.Linear(4, 16))
    with pytest.raises(RuntimeError, match='Unexpected key'):
        load_weights(weights, other)
    assert load_weights(weights, other, strict=False).unexpected_keys
    with pytest.raises(ValueError, match='not a gluontrain checkpoint') as info:
        restore_checkpoint(weights, *_build())
    # the hint names what the PyTorch recipes have (--resume), not MXNet's --load-weights
    assert '--resume' in str(info.value) and '--load-weights' not in str(info.value)
    with pytest.raises(ValueError, match='holds the weights of another network') as info:
        load_weights(weights, other)
    assert weights in str(info.value) and 'Unexpected key(s)' in str(info.value)
    with pytest.raises(FileNotFoundError):
        load_weights(str(tmp_path / 'missing.pt'), other)


def test_wrapped_models_save_plain_keys(tmp_path):
    model, optimizer, scheduler = _build()
    wrapped = torch.nn.DataParallel(model)
    save_weights(str(tmp_path / 'w.pth'), wrapped)
    saved = torch.load(str(tmp_path / 'w.pth'), weights_only=True)
    assert list(saved) == list(model.state_dict())  # no ``module.`` prefix
    assert all(torch.equal(saved[k], v) for k, v in model.state_dict().items())
    save_checkpoint(str(tmp_path / 'c.ckpt'), wrapped, optimizer, scheduler, 0, 0, 0.0, ARGS)
    restore_checkpoint(str(tmp_path / 'c.ckpt'), *_build(seed=5))  # strict: plain keys


def test_resume_or_load_decides_by_content_for_torch(tmp_path):
    trained, optimizer, scheduler = _build(seed=3)
    ckpt = str(tmp_path / 'run_weights.pth')  # a checkpoint under a weights-like name
    save_checkpoint(ckpt, trained, optimizer, scheduler, 2, 12, 0.25, ARGS)
    weights = str(tmp_path / 'model.ckpt')  # a state_dict under a checkpoint-like name
    save_weights(weights, trained)
    mx_params = tmp_path / 'yolo3.params'
    mx_params.write_bytes((0x112).to_bytes(8, 'little') + b'\0' * 16)  # NDArray list magic

    def attempt(path):
        model, opt, sched = _build(seed=4)
        kind, result = core_checkpoint.resume_or_load(
            path, lambda p: restore_checkpoint(p, model, opt, sched),
            lambda p: load_weights(p, model), core_checkpoint.TORCH_WEIGHTS)
        same = all(torch.equal(a, b) for a, b in zip(model.state_dict().values(),
                                                     trained.state_dict().values()))
        return kind, result, same, sched.num_update

    kind, (payload, state), same, num_update = attempt(ckpt)
    assert (kind, payload['epoch'], state.iteration, same, num_update) == (
        core_checkpoint.CHECKPOINT, 2, 12, True, scheduler.num_update)
    kind, result, same, num_update = attempt(weights)
    assert (kind, same, num_update) == (core_checkpoint.TORCH_WEIGHTS, True, 0)
    assert not result.missing_keys
    with pytest.raises(ValueError, match='yolo3.params holds mxnet-params weights'):
        attempt(str(mx_params))
