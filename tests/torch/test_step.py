"""LossDictStep: the update equals the hand-written step; loss weights, clipping, the AMP
scaler's hook point and the meters' output format."""
import pytest
import torch

from gluontrain.core.meters import LossMeter
from gluontrain.torch.step import LossDictStep, mixed_precision, seed_all, to_device

torch.set_num_threads(1)


def _model_and_data(seed=0):
    torch.manual_seed(seed)
    model = torch.nn.Linear(3, 2)
    x = torch.randn(5, 3)
    y = torch.randn(5, 2)
    return model, x, y


def _losses(model, batch):
    x, y = batch
    out = model(x)
    return {'l1': (out - y).abs().mean(), 'l2': ((out - y) ** 2).mean()}, x.shape[0]


def test_step_equals_the_hand_written_update_and_feeds_the_meter():
    model, x, y = _model_and_data()
    reference = torch.nn.Linear(3, 2)
    reference.load_state_dict(model.state_dict())
    ref_opt = torch.optim.SGD(reference.parameters(), lr=0.1, momentum=0.9)
    out = reference(x)
    ref_opt.zero_grad()
    l1, l2 = (out - y).abs().mean(), ((out - y) ** 2).mean()
    (l1 + 0.5 * l2).backward()
    ref_opt.step()

    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    step = LossDictStep(lambda b: _losses(model, b), opt, loss_weights={'l2': 0.5})
    result = step((x, y))
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), reference.parameters()))
    # unweighted values, one per step, in the meters' format
    assert result == {'losses': {'l1': [(l1.item(), 1)], 'l2': [(l2.item(), 1)]}, 'lr': 0.1,
                      'batch_size': 5}
    meter = LossMeter(['l1', 'l2'])
    meter.update(result['losses'])
    assert meter.running() == {'l1': l1.item(), 'l2': l2.item()}


def test_grad_clip_bounds_the_update():
    model, x, y = _model_and_data()
    before = [p.detach().clone() for p in model.parameters()]
    opt = torch.optim.SGD(model.parameters(), lr=1.0)
    LossDictStep(lambda b: ({'big': 1000 * model(b[0]).sum()}, 5), opt, grad_clip=0.5)((x, y))
    moved = torch.cat([(p.detach() - b).flatten() for p, b in zip(model.parameters(), before)])
    # with lr 1, the update is minus the clipped gradient: its norm is the clip value
    assert abs(moved.norm().item() - 0.5) < 1e-5


class _RecordingScaler:
    """The GradScaler interface, recording the calls (its hook point, without CUDA)."""

    def __init__(self):
        self.calls = []

    def scale(self, loss):
        self.calls.append('scale')
        return loss * 4.0

    def unscale_(self, optimizer):
        self.calls.append('unscale_')
        for group in optimizer.param_groups:
            for p in group['params']:
                p.grad /= 4.0

    def step(self, optimizer):
        self.calls.append('step')
        optimizer.step()

    def update(self):
        self.calls.append('update')


def test_scaler_and_autocast_hook_points():
    model, x, y = _model_and_data()
    plain, _, _ = _model_and_data()
    entered = []

    class _Ctx:
        def __enter__(self):
            entered.append(True)

        def __exit__(self, *exc):
            return False
    scaler = _RecordingScaler()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    LossDictStep(lambda b: _losses(model, b), opt, grad_clip=100.0, scaler=scaler,
                 autocast=_Ctx)((x, y))
    LossDictStep(lambda b: _losses(plain, b), torch.optim.SGD(plain.parameters(), lr=0.1))(
        (x, y))
    assert scaler.calls == ['scale', 'unscale_', 'step', 'update'] and entered == [True]
    # scaling by 4 and unscaling before the (inactive) clip gives the fp32 update
    assert all(torch.allclose(a, b) for a, b in zip(model.parameters(), plain.parameters()))


def test_no_losses_is_an_error():
    model, x, y = _model_and_data()
    with pytest.raises(ValueError, match='no losses'):
        LossDictStep(lambda b: ({}, 1), torch.optim.SGD(model.parameters(), lr=0.1))((x, y))


def test_to_device_and_seed_all():
    batch = {'images': torch.zeros(2), 'targets': [torch.ones(1), (torch.ones(2), 'id')]}
    moved = to_device(batch, torch.device('cpu'))
    assert moved['targets'][1][1] == 'id' and torch.equal(moved['targets'][0], torch.ones(1))
    seed_all(3)
    a = torch.rand(2)
    seed_all(3)
    assert torch.equal(a, torch.rand(2))


def test_real_cpu_grad_scaler_gives_the_fp32_update_and_skips_non_finite_steps():
    model, x, y = _model_and_data()
    plain, _, _ = _model_and_data()
    scaler = torch.amp.GradScaler('cpu', init_scale=2.0 ** 10)
    step = LossDictStep(lambda b: _losses(model, b), torch.optim.SGD(model.parameters(), lr=0.1),
                        scaler=scaler)
    step((x, y))
    LossDictStep(lambda b: _losses(plain, b), torch.optim.SGD(plain.parameters(), lr=0.1))(
        (x, y))
    # scaling by a power of two and unscaling is exact: the same parameters bit for bit
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), plain.parameters()))
    before = [p.detach().clone() for p in model.parameters()]
    step((x * float('inf'), y))  # non-finite gradients: step skipped, scale halved
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), before))
    assert scaler.get_scale() == 2.0 ** 9


def test_mixed_precision_pairs_and_cpu_refusal():
    assert mixed_precision('cpu', False) == (None, None)
    with pytest.raises(ValueError, match='--amp needs a CUDA device'):
        mixed_precision(torch.device('cpu'), True)
    with pytest.raises(ValueError, match='--mixed'):
        mixed_precision('cpu', True, argument='--mixed')
    autocast, scaler = mixed_precision('cpu', True, cpu_bf16=True)
    assert scaler is None
    with autocast():
        assert (torch.ones(2, 2) @ torch.ones(2, 2)).dtype == torch.bfloat16
