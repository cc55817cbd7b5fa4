"""torch.optim (gluontrain's SGD): torch.optim.SGD's updates and state dict, bit for bit, and
no torch._dynamo import in a fresh process."""
import subprocess
import sys

import pytest
import torch

from gluontrain.torch.optim import SGD, without_compiler


def _params(seed):
    gen = torch.Generator().manual_seed(seed)
    return [torch.nn.Parameter(torch.randn(5, 3, generator=gen)),
            torch.nn.Parameter(torch.randn(7, generator=gen))]


@pytest.mark.parametrize('kwargs', [dict(momentum=0.9, weight_decay=5e-4),
                                    dict(momentum=0.9, nesterov=True),
                                    dict(momentum=0.0, weight_decay=1e-2),
                                    dict(momentum=0.9, dampening=0.1, maximize=True)])
def test_updates_and_state_equal_torch_sgd_bit_for_bit(kwargs):
    ours, theirs = _params(0), _params(0)
    groups = lambda ps: [{'params': [ps[0]]}, {'params': [ps[1]], 'lr': 0.05}]
    opt_ours, opt_theirs = SGD(groups(ours), lr=0.1, **kwargs), \
        torch.optim.SGD(groups(theirs), lr=0.1, **kwargs)
    gen = torch.Generator().manual_seed(1)
    for _ in range(4):
        grads = [torch.randn(p.shape, generator=gen) for p in ours]
        for opt, ps in ((opt_ours, ours), (opt_theirs, theirs)):
            opt.zero_grad()
            for p, g in zip(ps, grads):
                p.grad = g.clone()
            opt.step()
    for a, b in zip(ours, theirs):
        assert torch.equal(a, b)
    state, ref = opt_ours.state_dict(), opt_theirs.state_dict()
    assert state['param_groups'] == ref['param_groups']
    for key in ref['state']:
        assert state['state'][key].keys() == ref['state'][key].keys()
        for name, value in ref['state'][key].items():
            assert (value is None and state['state'][key][name] is None) or \
                torch.equal(state['state'][key][name], value)
    # each loads the other's state dict
    fresh = SGD(groups(_params(0)), lr=1.0)
    fresh.load_state_dict(ref)
    assert fresh.param_groups[1]['lr'] == 0.05


def test_closure_loss_and_differentiable_refused():
    w = torch.nn.Parameter(torch.tensor([2.0]))
    opt = SGD([w], lr=0.5)

    def closure():
        opt.zero_grad()
        loss = (w ** 2).sum()
        loss.backward()
        return loss
    assert opt.step(closure).item() == 4.0
    assert w.item() == 2.0 - 0.5 * 4.0
    with pytest.raises(ValueError, match='differentiable'):
        SGD([w], lr=0.1, differentiable=True)


@pytest.mark.parametrize('build, more', [
    ('from gluontrain.torch.optim import SGD; o = SGD([w], lr=0.1, momentum=0.9, '
     'weight_decay=1e-4)', ''),
    # the YOLOv3 recipe's MXNet update binds the same methods, and hooks into backward
    ('from gluontrain.torch.yolo3.step import GluonSGD; o = GluonSGD([w], lr=0.1)',
     'o.update_in_backward(); (w * w).sum().backward(); '),
], ids=['SGD', 'GluonSGD'])
def test_never_imports_the_compiler(build, more):
    """Every method a recipe calls, in a fresh process: ``torch._dynamo`` never loads."""
    assert without_compiler(torch.optim.Optimizer.zero_grad) is not torch.optim.Optimizer.zero_grad
    code = ('import sys, torch; w = torch.nn.Parameter(torch.ones(2)); ' + build + '; '
            'w.grad = torch.ones(2); o.step(); o.zero_grad(); '
            'o.load_state_dict(o.state_dict()); ' + more + 'print("torch._dynamo" in sys.modules)')
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == 'False'
