"""gluontrain.yolo3.init_weights: Gluon's defaults, the same arrays whatever the listing order."""
import numpy as np
import pytest

from gluontrain.yolo3.init_weights import gluon_default_arrays


def test_defaults_and_order_independence():
    shapes = {'a.weight': (2, 1, 3, 3), 'a.bias': (2,), 'bn.gamma': (2,), 'bn.beta': (2,),
              'bn.running_mean': (2,), 'bn.running_var': (2,), 'b.weight': (1, 2, 1, 1),
              'out.anchors': (1, 1, 1, 2)}
    constants = {'out.anchors': np.array([3., 4.])}
    one = gluon_default_arrays(shapes, constants, seed=1)
    two = gluon_default_arrays(dict(reversed(list(shapes.items()))), constants, seed=1)
    assert list(one) == list(shapes)
    for k in shapes:
        assert np.array_equal(one[k], two[k]) and one[k].dtype == np.float32
    assert np.abs(one['a.weight']).max() <= 0.07 and one['a.weight'].std() > 0.01
    assert np.all(one['bn.gamma'] == 1) and np.all(one['bn.running_var'] == 1)
    assert np.all(one['a.bias'] == 0) and np.all(one['bn.running_mean'] == 0)
    assert np.array_equal(one['out.anchors'].ravel(), [3, 4])
    with pytest.raises(ValueError, match='no Gluon default'):
        gluon_default_arrays({'x.odd': (1,)}, {})
