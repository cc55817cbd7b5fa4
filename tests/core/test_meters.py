"""LossMeter: running means since creation (GluonCV's logged value) and per-epoch means."""
import math

from gluontrain.core.meters import LossMeter, all_finite


def test_running_and_epoch_means_hand_computed():
    m = LossMeter(['Obj', 'Cls'])
    m.update({'Obj': [(4.0, 2), (2.0, 2)], 'Cls': [(1.0, 4)]})
    m.update({'Obj': [(6.0, 4)], 'Cls': [(3.0, 4)]})
    assert m.running() == {'Obj': 12.0 / 8, 'Cls': 4.0 / 8}
    m.reset_epoch()
    m.update({'Obj': [(1.0, 2)], 'Cls': [(0.0, 2)]})
    assert m.epoch() == {'Obj': 0.5, 'Cls': 0.0}
    assert m.running() == {'Obj': 13.0 / 10, 'Cls': 4.0 / 10}


def test_state_dict_round_trip_and_empty_mean_is_nan():
    m = LossMeter(['a'])
    assert math.isnan(m.running()['a'])
    m.update({'a': [(3.0, 3)], 'b': [(1.0, 1)]})
    m2 = LossMeter()
    m2.load_state_dict(m.state_dict())
    assert m2.running() == m.running() == {'a': 1.0, 'b': 1.0}


def test_all_finite():
    assert all_finite({'a': [(1.0, 1)]})
    assert not all_finite({'a': [(1.0, 1), (float('nan'), 1)]})
    assert not all_finite({'a': [(float('inf'), 1)]})
