"""gluontrain.yolo3.hooks: GluonCV's mixup schedule and the rollover leftovers as hook state."""
import argparse

import numpy as np

from gluontrain.core.loop import TrainState
from gluontrain.yolo3.data import RolloverBatchSampler
from gluontrain.yolo3.hooks import GluonCVMixupHook, RolloverLeftoversHook


class _Recorder:
    def __init__(self):
        self.calls = []

    def set_mixup(self, mixup=None, *args):
        self.calls.append((mixup, args))


def _epochs_mixed(mixup, epochs=5, no_mixup_epochs=2):
    dataset = _Recorder()
    args = argparse.Namespace(mixup=mixup, epochs=epochs, no_mixup_epochs=no_mixup_epochs)
    hook = GluonCVMixupHook(dataset, args)
    mixed = []
    for epoch in range(epochs):
        dataset.calls = []
        hook.before_epoch(TrainState(epoch=epoch))
        mixed.append(bool(dataset.calls) and dataset.calls[-1] == (np.random.beta, (1.5, 1.5)))
    return mixed


def test_mixup_is_on_until_the_last_no_mixup_epochs():
    # the reference: set_mixup(beta, 1.5, 1.5), then None from epoch epochs - no_mixup_epochs
    assert _epochs_mixed(True) == [True, True, True, False, False]
    assert _epochs_mixed(True, no_mixup_epochs=0) == [True] * 5
    assert _epochs_mixed(False) == [False] * 5


def test_rollover_leftovers_round_trip_into_a_fresh_sampler():
    np.random.seed(0)
    sampler = RolloverBatchSampler(7, 3)
    list(sampler)  # 7 = 2 batches of 3 + 1 left over
    state = RolloverLeftoversHook(sampler).state_dict()
    assert state == {'prev': [int(i) for i in sampler.prev]} and len(state['prev']) == 1
    fresh = RolloverBatchSampler(7, 3)
    RolloverLeftoversHook(fresh).load_state_dict(state)
    assert fresh.prev == state['prev'] and len(fresh) == (1 + 7) // 3


def test_gluon_sampler_attribute_and_missing_sampler():
    class GluonLike:
        _prev = [np.int64(4), np.int64(2)]
    sampler = GluonLike()
    hook = RolloverLeftoversHook(sampler, '_prev')
    assert hook.state_dict() == {'prev': [4, 2]}
    hook.load_state_dict({'prev': [1]})
    assert sampler._prev == [1]
    none = RolloverLeftoversHook(None, '_prev')
    assert none.state_dict() == {'prev': []}
    none.load_state_dict({'prev': [3]})  # nothing to restore into: no error
