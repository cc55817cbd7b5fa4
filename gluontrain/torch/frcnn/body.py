"""seamseg's ``models.net_resnet<depth>`` (``[body] body = resnet50``) on the shared body.

The network is :class:`gluontrain.torch.backbone.ResNet` with seamseg's module names
(``mod1`` .. ``mod5``, ``block1`` .., ``convs``, ``proj_conv`` / ``proj_bn``), so seamseg's
snapshots load unchanged; seamseg leaves the body at PyTorch's default initialisation.
gluontrain adds ``width_mult`` (a ``body_params`` entry) for CPU-sized runs.
"""
from ..backbone import make_resnet
from ..twostage.norm import BatchNormAct

__all__ = ['NETS', 'make_body']

#: seamseg's body names -> ResNet depth (seamseg/models/resnet.py ``_NETS``).
NETS = {'resnet18': 18, 'resnet34': 34, 'resnet50': 50, 'resnet101': 101, 'resnet152': 152}


def make_body(name, norm_act=BatchNormAct, **body_params):
    """seamseg's ``models.net_<name>(norm_act=..., **body_params)``.

    Parameters
    ----------
    name : str
        A key of :data:`NETS`.
    norm_act : callable
        A seamseg norm-act factory (:mod:`gluontrain.torch.twostage.norm`).
    **body_params
        ``dilation``, ``width_mult``.

    Returns
    -------
    gluontrain.torch.backbone.ResNet
    """
    if name not in NETS:
        raise ValueError('[body] body = {!r} is not a known body; choose one of {}'.format(
            name, ', '.join(NETS)))
    unknown = set(body_params) - {'dilation', 'width_mult'}
    if unknown:
        raise ValueError('[body] body_params has unknown entries {}; allowed: dilation, '
                         'width_mult'.format(sorted(unknown)))
    return make_resnet(NETS[name], norm=norm_act, naming='seamseg', **body_params)
