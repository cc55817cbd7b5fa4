"""Each two-stage flavour's parameter names, as data.

The RPN head and the FPN are one structure each; a flavour only names their sub-modules (so
that its reference's checkpoints load key for key). Behaviour (norm, initialisation, top
block) is given to the constructors as arguments, never derived from the flavour. The body's
names are :data:`gluontrain.torch.backbone.resnet.LAYOUTS`. A new flavour is one entry in
each table and its constructor calls (docs/recipes.md, "Adding a two-stage flavour").
"""
from ..backbone.resnet import add_module_at

__all__ = ['RPN_HEAD_NAMES', 'FPN_NAMES', 'FPN_BODY_NAMES', 'flavour_names', 'add_module_at']

#: :class:`~.rpn.RPNHead`: the 3x3 convolution, its norm (maskrcnn-benchmark's head has
#: none), the objectness and the box convolutions.
RPN_HEAD_NAMES = {
    'seamseg': {'conv': 'conv1', 'norm': 'bn1', 'obj': 'conv_obj', 'bbx': 'conv_bbx'},
    'maskrcnn': {'conv': 'conv', 'norm': 'norm', 'obj': 'cls_logits', 'bbx': 'bbox_pred'},
}

#: :class:`~.fpn.FPN`: the lateral (1x1) and output (3x3) block of input level ``i``
#: (numbered from ``first``), the ``'convs'`` top block's levels, and whether each level's
#: pair is created in turn (maskrcnn-benchmark: the order of the random draws and of the
#: state_dict) or all laterals first (seamseg).
FPN_NAMES = {
    'seamseg': {'inner': 'lateral.{}', 'layer': 'output.{}', 'first': 0, 'extra': 'extra.{}',
                'interleaved': False},
    'maskrcnn': {'inner': 'fpn_inner{}', 'layer': 'fpn_layer{}', 'first': 1,
                 'extra': 'extra.{}', 'interleaved': True},
}

#: :class:`~.fpn.FPNBody`: the name of the body next to ``fpn``.
FPN_BODY_NAMES = {'seamseg': 'backbone', 'maskrcnn': 'body'}


def flavour_names(table, naming, what):
    """``table[naming]``, or ``ValueError`` naming ``what`` and the known flavours."""
    if naming not in table:
        raise ValueError('{}: naming {!r} is not one of {}'.format(what, naming,
                                                                   ', '.join(table)))
    return table[naming]
