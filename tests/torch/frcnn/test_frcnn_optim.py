"""seamseg's make_optimizer parameter groups."""
import pytest
import torch

from gluontrain.torch.frcnn.config import load_config
from gluontrain.torch.twostage.norm import BatchNormAct, GroupNormAct
from gluontrain.torch.frcnn.optim import current_lr, make_optimizer, parameter_groups


def _net():
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), BatchNormAct(4), torch.nn.Conv2d(4, 4, 1),
                              GroupNormAct(4, 2), torch.nn.Flatten(), torch.nn.Linear(4, 2))
    net[0].weight.requires_grad_(False)  # frozen: left out
    return net


def test_groups_default_config():
    net = _net()
    opt, sch, batch_update, epochs = make_optimizer(load_config(None), net, epoch_length=10)
    norm, other = opt.param_groups
    ids = lambda ps: {id(p) for p in ps}  # noqa: E731
    assert ids(norm['params']) == ids([net[1].weight, net[1].bias, net[3].weight, net[3].bias])
    assert ids(other['params']) == ids([net[0].bias, net[2].weight, net[2].bias,
                                        net[5].weight, net[5].bias])
    assert norm['lr'] == 0.0 and norm['weight_decay'] == 1e-4  # bn_frozen, weight_decay_norm
    assert other['lr'] == pytest.approx(0.01 * 0.333)  # scheduler applied lr(0) at construction
    assert other['initial_lr'] == 0.01 and other['weight_decay'] == 1e-4
    assert opt.defaults['nesterov'] and opt.defaults['momentum'] == 0.9
    assert batch_update and epochs == 90
    sch.step(250)
    # seamseg logs get_lr()[0], the bn_frozen norm group: 0 all run long; we log group 1
    assert sch.get_lr()[0] == 0.0
    assert current_lr(opt) == pytest.approx(0.01 * (0.333 + 0.667 * 250 / 500))


def test_switches(tmp_path):
    groups = parameter_groups(_net(), 0.1, 0.5, bn_frozen=False, weight_decay_norm=False)
    assert (groups[0]['lr'], groups[0]['weight_decay']) == (0.1, 0.)
    p = tmp_path / 'o.ini'
    p.write_text('[optimizer]\nnesterov = no\nmomentum = 0.5\n[scheduler]\nupdate_mode = epoch\n')
    opt, _, batch_update, _ = make_optimizer(load_config(str(p)), _net(), 3)
    assert not opt.defaults['nesterov'] and opt.defaults['momentum'] == 0.5 and not batch_update


def test_stray_parameter_is_an_error():
    net = _net()
    net.register_parameter('scale', torch.nn.Parameter(torch.ones(1)))
    with pytest.raises(ValueError, match='scale'):
        parameter_groups(net, 0.1, 0.)
