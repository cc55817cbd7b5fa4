"""Gluon's default initialisation of a YOLOv3 in numpy, seeded: the same starting weights on
both backends (MXNet and PyTorch draw their own generators differently)."""
import collections

import numpy as np

__all__ = ['gluon_default_arrays']

_CONSTANTS = ('.anchors', '.offsets')


def gluon_default_arrays(shapes, constants, seed=0):
    """``{save_parameters name: array}`` initialised as Gluon's ``net.initialize()`` does:
    4-d ``weight`` Uniform(-0.07, 0.07), ``bias`` / ``beta`` / ``running_mean`` 0,
    ``gamma`` / ``running_var`` 1; the anchors and offsets are the network's ``constants``.

    Parameters
    ----------
    shapes : dict
        Name -> shape (any order: values are drawn in sorted name order, so both backends'
        listings give the same arrays).
    constants : dict
        Name -> array for the ``*.anchors`` / ``*.offsets`` entries.
    seed : int

    Returns
    -------
    OrderedDict
        In the order of ``shapes``.
    """
    rng = np.random.RandomState(seed)
    drawn = {}
    for name in sorted(shapes):
        shape = tuple(shapes[name])
        if name.endswith(_CONSTANTS):
            drawn[name] = np.asarray(constants[name], np.float32).reshape(shape)
        elif name.endswith(('gamma', 'running_var')):
            drawn[name] = np.ones(shape, np.float32)
        elif name.endswith(('bias', 'beta', 'running_mean')):
            drawn[name] = np.zeros(shape, np.float32)
        elif name.endswith('weight'):
            drawn[name] = rng.uniform(-0.07, 0.07, shape).astype(np.float32)
        else:
            raise ValueError('gluon_default_arrays: no Gluon default for {!r}'.format(name))
    return collections.OrderedDict((name, drawn[name]) for name in shapes)
