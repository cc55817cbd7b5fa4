"""seamseg's ``make_optimizer`` (scripts/train_detection.py): two SGD parameter groups.

Group 0, the parameters of norm layers: ``lr = 0`` when ``[body] bn_frozen`` (else ``lr``),
``weight_decay`` only if ``weight_decay_norm``. Group 1, convolution and linear weights *and
biases*: ``lr``, ``weight_decay``. Only parameters with ``requires_grad``; every one must
fall in a group. ``SGD(momentum, nesterov)``; then the scheduler over ``epoch_length``.
"""
from ..optim import SGD
from ..twostage.norm import NORM_LAYERS, OTHER_LAYERS
from .scheduler import scheduler_from_config

__all__ = ['parameter_groups', 'make_optimizer', 'current_lr']


def parameter_groups(model, lr, weight_decay, bn_frozen=True, weight_decay_norm=True):
    """seamseg's two parameter groups.

    Parameters
    ----------
    model : nn.Module
    lr, weight_decay : float
    bn_frozen, weight_decay_norm : bool

    Returns
    -------
    list of dict
        ``[norm group, conv/linear group]``.

    Raises
    ------
    ValueError
        A trainable parameter belongs to neither kind of layer.
    """
    norm, other = [], []
    for m in model.modules():
        if isinstance(m, NORM_LAYERS):
            norm += [p for p in m.parameters(recurse=False) if p.requires_grad]
        elif isinstance(m, OTHER_LAYERS):
            other += [p for p in m.parameters(recurse=False) if p.requires_grad]
    covered = {id(p) for p in norm + other}
    stray = [n for n, p in model.named_parameters() if p.requires_grad and id(p) not in covered]
    if stray:
        raise ValueError('Not all parameters that require grad are accounted for in the '
                         'optimizer: {} are in neither a norm nor a conv/linear layer'
                         .format(stray[:5]))
    return [{'params': norm, 'lr': 0. if bn_frozen else lr,
             'weight_decay': weight_decay if weight_decay_norm else 0.},
            {'params': other, 'lr': lr, 'weight_decay': weight_decay}]


def make_optimizer(config, model, epoch_length):
    """seamseg's ``make_optimizer``.

    Parameters
    ----------
    config : configparser.ConfigParser
    model : nn.Module
    epoch_length : int
        ``len(train_loader)`` of this process.

    Returns
    -------
    optimizer : torch.optim.SGD
    scheduler : object
    batch_update : bool
        ``[scheduler] update_mode == 'batch'``.
    total_epochs : int
    """
    body_config, opt_config = config['body'], config['optimizer']
    sch_config = config['scheduler']
    groups = parameter_groups(model, opt_config.getfloat('lr'),
                              opt_config.getfloat('weight_decay'),
                              body_config.getboolean('bn_frozen'),
                              opt_config.getboolean('weight_decay_norm'))
    optimizer = SGD(groups, lr=opt_config.getfloat('lr'), momentum=opt_config.getfloat('momentum'),
                    nesterov=opt_config.getboolean('nesterov'))
    scheduler = scheduler_from_config(sch_config, optimizer, epoch_length)
    return optimizer, scheduler, sch_config['update_mode'] == 'batch', \
        sch_config.getint('epochs')


def current_lr(optimizer):
    """The learning rate to log: the conv/linear group's (group 1).

    seamseg logs ``scheduler.get_lr()[0]``, the norm group, which is 0 for the whole run
    with the default ``bn_frozen = yes``.

    Parameters
    ----------
    optimizer : torch.optim.Optimizer
        From :func:`make_optimizer`.

    Returns
    -------
    float
    """
    return float(optimizer.param_groups[-1]['lr'])
