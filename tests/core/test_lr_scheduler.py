"""The core schedules give GluonCV's learning rate at every update, bit for bit."""
import subprocess
import sys

import pytest

from gluontrain.mx import gluoncv  # noqa: F401  (makes gluoncv importable beside torch)
from gluoncv.utils import LRScheduler as GluonLRScheduler, LRSequential as GluonLRSequential

from gluontrain.core.lr_scheduler import LRScheduler, LRSequential

SINGLE = [
    dict(mode='constant', base_lr=0.05, niters=20),
    dict(mode='linear', base_lr=0.1, target_lr=0.001, niters=37),
    dict(mode='linear', base_lr=0, target_lr=0.004, nepochs=3, iters_per_epoch=7),
    dict(mode='poly', base_lr=0.01, niters=50),
    dict(mode='poly', base_lr=0.01, target_lr=1e-4, niters=50, power=0.9),
    dict(mode='poly', base_lr=0.02, nepochs=4, iters_per_epoch=9, power=3),
    dict(mode='cosine', base_lr=0.1, niters=64),
    dict(mode='cosine', base_lr=0.3, target_lr=0.01, nepochs=5, iters_per_epoch=11),
    dict(mode='step', base_lr=0.1, niters=60, step_iter=[10, 30, 45]),
    dict(mode='step', base_lr=0.1, niters=60, step_iter=[10, 30, 45], step_factor=0.5),
    dict(mode='step', base_lr=0.004, nepochs=10, iters_per_epoch=6, step_epoch=[4, 7],
         step_factor=0.3),
    # step_epoch is ignored when nepochs * iters_per_epoch == 0: no decay at all
    dict(mode='step', base_lr=0.1, niters=30, step_epoch=[1, 2]),
    # an offset shifts the curve; updates before it read as update 0
    dict(mode='cosine', base_lr=0.1, niters=40, offset=13),
    dict(mode='step', base_lr=0.1, niters=40, offset=5, step_iter=[0, 12]),
    # niters == 0 (an empty warm-up): every update gives target_lr
    dict(mode='linear', base_lr=0, target_lr=0.1, niters=0),
]


def _updates(niters, offset=0):
    return range(0, offset + niters + 6)


@pytest.mark.parametrize('kwargs', SINGLE, ids=lambda kw: '{mode}-{n}'.format(
    mode=kw['mode'], n=kw.get('niters') or kw.get('nepochs')))
def test_single_schedule_equals_gluoncv_at_every_update(kwargs):
    ours, theirs = LRScheduler(**kwargs), GluonLRScheduler(**kwargs)
    assert ours.niters == theirs.niters
    for u in _updates(ours.niters, kwargs.get('offset', 0)):
        expected = theirs(u)
        assert ours(u) == expected, (u, ours.learning_rate, expected)
        assert ours.learning_rate == theirs.learning_rate


def _sequence(cls_sched, cls_seq, warmup_epochs, mode, iters_per_epoch=8, epochs=12, **kw):
    """The YOLOv3 recipe's schedule: linear warm-up, then ``mode`` over the other epochs."""
    return cls_seq([
        cls_sched('linear', base_lr=0, target_lr=0.004, nepochs=warmup_epochs,
                  iters_per_epoch=iters_per_epoch),
        cls_sched(mode, base_lr=0.004, nepochs=epochs - warmup_epochs,
                  iters_per_epoch=iters_per_epoch, **kw),
    ])


SEQUENCES = [
    dict(warmup_epochs=2, mode='step', step_epoch=[4, 7], step_factor=0.1),
    dict(warmup_epochs=3, mode='step', step_epoch=[5], step_factor=0.5),
    dict(warmup_epochs=2, mode='cosine'),
    dict(warmup_epochs=1, mode='poly', power=2),
    dict(warmup_epochs=2, mode='poly', power=0.9, target_lr=1e-5),
    # --warmup-epochs 0: the empty warm-up is skipped by the dispatch
    dict(warmup_epochs=0, mode='cosine'),
    dict(warmup_epochs=0, mode='step', step_epoch=[3, 9]),
]


@pytest.mark.parametrize('kwargs', SEQUENCES, ids=lambda kw: '{warmup_epochs}-{mode}'.format(**kw))
def test_warmup_sequence_equals_gluoncv_at_every_update(kwargs):
    ours = _sequence(LRScheduler, LRSequential, **kwargs)
    theirs = _sequence(GluonLRScheduler, GluonLRSequential, **kwargs)
    assert ours.count == theirs.count and ours.update_sep == theirs.update_sep
    assert [s.offset for s in ours.schedulers] == [s.offset for s in theirs.schedulers]
    for u in range(0, ours.count + 6):
        expected = theirs(u)
        assert ours(u) == expected, (u, ours.learning_rate, expected)


def test_three_part_sequence_with_step_iter_equals_gluoncv():
    def build(sched, seq):
        return seq([sched('linear', base_lr=0.001, target_lr=0.1, niters=15),
                    sched('constant', base_lr=0.1, niters=10),
                    sched('step', base_lr=0.1, niters=40, step_iter=[5, 20, 20, 33],
                          step_factor=0.2)])
    ours, theirs = build(LRScheduler, LRSequential), build(GluonLRScheduler, GluonLRSequential)
    for u in range(0, 71):
        assert ours(u) == theirs(u), u


def test_hand_computed_values():
    warmup = LRScheduler('linear', base_lr=0, target_lr=0.1, niters=11)
    decay = LRScheduler('step', base_lr=0.1, niters=20, step_iter=[5, 10], step_factor=0.5)
    seq = LRSequential([warmup, decay])
    assert decay.offset == 11 and seq.count == 31
    assert seq(0) == 0.0
    assert seq(5) == pytest.approx(0.05, abs=1e-15)       # half-way through N = 10
    assert seq(10) == pytest.approx(0.1, abs=1e-15)
    assert seq(11) == 0.1                                  # the decay's T = 0
    assert seq(16) == 0.05 and seq(21) == 0.025            # T = 5 and T = 10 decay
    assert seq(30) == seq(1000) == 0.025                   # clipped to count - 1
    cosine = LRScheduler('cosine', base_lr=1.0, target_lr=0.0, niters=5)
    assert [cosine(t) for t in range(5)] == pytest.approx([1.0, 0.8535533905932737, 0.5,
                                                           0.14644660940672627, 0.0], abs=1e-15)
    poly = LRScheduler('poly', base_lr=1.0, niters=3, power=2)
    assert [poly(t) for t in range(3)] == [1.0, 0.25, 0.0]


def test_invalid_configurations_fail_clearly():
    with pytest.raises(ValueError, match='unknown lr mode'):
        LRScheduler('exponential')
    with pytest.raises(ValueError, match='step_iter or step_epoch'):
        LRScheduler('step', niters=10)
    with pytest.raises(ZeroDivisionError, match='niters=1'):
        LRScheduler('cosine', niters=1)(0)
    with pytest.raises(ZeroDivisionError):    # GluonCV fails the same way
        GluonLRScheduler('cosine', niters=1)(0)
    assert LRScheduler('step', niters=1, step_iter=[0])(0) == pytest.approx(0.01)
    with pytest.raises(TypeError, match='LRScheduler'):
        LRSequential([GluonLRScheduler('constant', niters=3)])
    with pytest.raises(ValueError):
        LRSequential([])


def test_lr_scheduler_module_imports_no_framework():
    code = ('import sys, gluontrain.core.lr_scheduler; '
            'bad = [m for m in ("mxnet", "torch", "gluoncv") if m in sys.modules]; '
            'print(bad); sys.exit(1 if bad else 0)')
    res = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr


ALIASES = [
    # only the old names: they are used
    dict(mode='cosine', baselr=0.02, targetlr=0.001, niters=30),
    dict(mode='step', baselr=0.05, niters=30, step_iter=[10, 20]),
    dict(mode='poly', targetlr=0.003, niters=30),
    # both names: the new one wins when it is not its default ...
    dict(mode='linear', base_lr=0.3, baselr=0.02, target_lr=0.01, targetlr=0.002, niters=30),
    # ... and loses when it equals the default, even passed explicitly
    dict(mode='linear', base_lr=0.1, baselr=0.02, target_lr=0, targetlr=0.002, niters=30),
    dict(mode='cosine', base_lr=0.1, baselr=0.5, target_lr=0.05, targetlr=0.002, niters=30),
]


@pytest.mark.parametrize('kwargs', ALIASES, ids=lambda kw: '-'.join(
    k for k in ('base_lr', 'baselr', 'target_lr', 'targetlr') if k in kw))
def test_deprecated_aliases_follow_gluoncv(kwargs):
    with pytest.warns(UserWarning) as ours_rec:
        ours = LRScheduler(**kwargs)
    with pytest.warns(UserWarning) as theirs_rec:
        theirs = GluonLRScheduler(**kwargs)
    assert [str(w.message) for w in ours_rec] == [str(w.message) for w in theirs_rec]
    assert [w.category for w in ours_rec] == [w.category for w in theirs_rec]
    assert (ours.base_lr, ours.target_lr) == (theirs.base_lr, theirs.target_lr)
    for u in range(32):
        assert ours(u) == theirs(u), u


def test_deprecated_alias_values_by_hand():
    with pytest.warns(UserWarning, match='baselr is deprecated. Please use base_lr.'):
        only_old = LRScheduler('constant', baselr=0.02, niters=5)
    assert only_old(3) == 0.02
    with pytest.warns(UserWarning, match='targetlr is deprecated. Please use target_lr.'):
        both = LRScheduler('linear', base_lr=0.4, target_lr=0.2, targetlr=0.0, niters=3)
    assert [both(u) for u in range(3)] == [0.4, pytest.approx(0.3), 0.2]
