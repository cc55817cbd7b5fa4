"""core.distributed: LocalComm, the rank-0-only hooks under run_loop, SetEpochHook,
BarrierHook, RankStateHook (per-rank state through rank 0's checkpoint), build_hooks(comm=)."""
import os
import random

import numpy as np
import pytest

from gluontrain.core.defaults import HookSpec, RunPaths, build_hooks
from gluontrain.core.distributed import (BarrierHook, Comm, LocalComm, RankStateHook,
                                         SetEpochHook)
from gluontrain.core.hooks import LogHook, hooks_state_dict, load_hooks_state_dict
from gluontrain.core.loop import Hook, Period, TrainState, run_loop
from gluontrain.core.meters import LossMeter


class FakeComm(Comm):
    """Rank ``rank`` of a pretend world: the other ranks' gathered objects are ``others``
    (rank order, this rank's slot left out); counts barriers."""

    def __init__(self, rank, world_size, others=()):
        self.rank, self.world_size, self.others = rank, world_size, list(others)
        self.barriers = 0

    def barrier(self):
        self.barriers += 1

    def allreduce_mean(self, values):
        return dict(values)

    def allgather_object(self, obj):
        out = list(self.others)
        out.insert(self.rank, obj)
        return out

    def broadcast_object(self, obj, root=0):
        return obj


def _step(batch, state):
    return {'losses': {'Loss': [(1.0 + batch, 1)]}, 'lr': 0.1, 'batch_size': 2}


def test_local_comm_is_the_identity():
    comm = LocalComm()
    assert (comm.rank, comm.world_size, comm.is_main) == (0, 1, True)
    comm.barrier()
    means = comm.allreduce_mean({'b': 2, 'a': np.float32(0.5)})
    assert means == {'b': 2.0, 'a': 0.5} and list(means) == ['b', 'a']
    assert all(type(v) is float for v in means.values())
    assert comm.allgather_object({'x': 1}) == [{'x': 1}]
    assert comm.broadcast_object([3]) == [3]
    with pytest.raises(ValueError, match='rank 0 only'):
        comm.broadcast_object(1, root=1)
    with pytest.raises(NotImplementedError):
        Comm().barrier()


def test_train_state_rank_defaults_and_is_main():
    assert (TrainState().rank, TrainState().world_size, TrainState().is_main) == (0, 1, True)
    assert not TrainState(rank=1, world_size=2).is_main


def _default_hooks(tmp_path, comm, validated, saved):
    def validate():
        validated.append(comm.rank)
        return ['mAP'], [0.25]
    return build_hooks(HookSpec(
        RunPaths(str(tmp_path / 'run' / 'p')), LossMeter(), header=['hdr'], validate=validate,
        save_params=lambda best, cur, index, interval: saved.append(index)
        or best.__setitem__(0, max(best[0], cur)),
        checkpoint=lambda st, hs: saved.append(('ckpt', sorted(hs))) or 'c'), comm=comm)


def test_rank_one_runs_no_sink_hook_but_validates(tmp_path):
    validated, saved = [], []
    comm = FakeComm(1, 2, others=[{'rng': None, 'hooks': {}, 'backend': None}])
    hooks = _default_hooks(tmp_path, comm, validated, saved)
    state = run_loop(_step, [1, 2], hooks, 0, 2, comm=comm)
    assert (state.rank, state.world_size, state.is_main) == (1, 2, False)
    # no log, metrics, curves, weights or checkpoint from rank 1; validation ran every epoch
    assert not os.path.exists(str(tmp_path / 'run')) and saved == []
    assert validated == [1, 1] and state.current == 0.25 and state.best == 0.0
    assert comm.barriers == 2   # after each epoch, so rank 1 waits for rank 0's files
    # the same list on rank 0 writes everything
    validated, saved = [], []
    comm0 = FakeComm(0, 2, others=[{'rng': None, 'hooks': {}, 'backend': None}])
    hooks = _default_hooks(tmp_path, comm0, validated, saved)
    state = run_loop(_step, [1, 2], hooks, 0, 2, comm=comm0)
    assert state.is_main and state.best == 0.25
    assert os.path.isfile(str(tmp_path / 'run' / 'p_train.log'))
    assert len(open(str(tmp_path / 'run' / 'p_metrics.jsonl')).readlines()) == 2
    assert saved[0] == 0 and saved[1][0] == 'ckpt' and 'RankStateHook' in saved[1][1]


def test_build_hooks_adds_rank_state_and_barrier_only_when_distributed(tmp_path):
    kw = dict(validate=lambda: (['m'], [1.0]), checkpoint=lambda st, hs: 'x')
    names = [type(h).__name__ for h in build_hooks(
        HookSpec(RunPaths(str(tmp_path / 'p')), LossMeter(), **kw), comm=FakeComm(0, 2))]
    assert names.index('RankStateHook') == names.index('CheckpointHook') - 1
    assert names[-2:] == ['ReleaseMemoryHook', 'BarrierHook']
    for comm in (None, LocalComm()):
        alone = [type(h).__name__ for h in build_hooks(
            HookSpec(RunPaths(str(tmp_path / 'p')), LossMeter(), **kw), comm=comm)]
        assert 'RankStateHook' not in alone and 'BarrierHook' not in alone


def test_every_sink_hook_is_main_process_only():
    from gluontrain.core import hooks, plots
    sinks = {hooks.LogHook, hooks.MetricsJSONHook, hooks.CheckpointHook,
             hooks.BestCheckpointHook, hooks.ProgressHook,
             hooks.TensorBoardHook, plots.CurvesHook, plots.SamplesHook}
    assert all(h.main_process_only for h in sinks)
    # what every rank must run: meters, NaN stop, validation, sampler epochs, barriers
    for h in (hooks.LossMeterHook, hooks.NaNGuardHook, hooks.ValidationHook, SetEpochHook,
              BarrierHook, RankStateHook, Hook):
        assert h.main_process_only is False, h


def test_set_epoch_hook_sets_every_epoch():
    class Sampler:
        epochs = []

        def set_epoch(self, epoch):
            self.epochs.append(epoch)
    sampler = Sampler()
    run_loop(_step, [1], [SetEpochHook(sampler)], 2, 5)
    assert sampler.epochs == [2, 3, 4]
    with pytest.raises(ValueError, match='set_epoch'):
        SetEpochHook(object())


def test_barrier_after_epochs_and_after_validation_steps():
    comm = FakeComm(0, 2)

    class Validates(Hook):
        def after_batch(self, state):
            if Period(iterations=3).iteration_due(state):
                state.val_iteration = state.iteration
    run_loop(_step, [1, 2], [Validates(), BarrierHook(comm)], 0, 3)
    # 3 epochs + the validations at iterations 3 and 6
    assert comm.barriers == 3 + 2


class Counter(Hook):
    def __init__(self):
        self.n = 0

    def after_batch(self, state):
        self.n += 1

    def state_dict(self):
        return {'n': self.n}

    def load_state_dict(self, state_dict):
        self.n = state_dict['n']


def test_rank_state_round_trip_gives_each_rank_its_own_part():
    # rank 1 of 2: its counter and generators go to rank 0's checkpoint and come back
    random.seed(5)
    np.random.seed(5)
    counter, log = Counter(), LogHook(LossMeter())
    counter.n = 7
    others = [{'rng': None, 'hooks': {'Counter': {'n': 3}}, 'backend': 'r0'}]
    hooks = [counter, log]
    rank_hook = RankStateHook(FakeComm(1, 2, others), hooks, lambda: 'r1')
    hooks.append(rank_hook)
    ranks = rank_hook.collect()
    assert ranks[0] is others[0] and ranks[1]['hooks'] == {'Counter': {'n': 7}}
    assert ranks[1]['backend'] == 'r1' and 'LogHook' not in str(ranks[1]['hooks'])
    expected = (random.random(), np.random.rand())
    saved = hooks_state_dict(hooks)
    # a resumed rank 1: rank 0's counter comes first (the checkpoint's top level), then its own
    random.seed(0)
    np.random.seed(0)
    restored_backend = []
    fresh = Counter()
    resumed = [fresh, LogHook(LossMeter())]
    resumed.append(RankStateHook(FakeComm(1, 2), resumed, None, restored_backend.append))
    load_hooks_state_dict(resumed, dict(saved, Counter={'n': 3}))
    assert fresh.n == 7 and restored_backend == ['r1']
    assert (random.random(), np.random.rand()) == expected
    # another world size cannot continue exactly: refused with the fix
    with pytest.raises(ValueError, match='same number of processes'):
        RankStateHook(FakeComm(0, 3), []).load_state_dict(saved['RankStateHook'])
    assert RankStateHook(LocalComm(), []).state_dict() == {}
