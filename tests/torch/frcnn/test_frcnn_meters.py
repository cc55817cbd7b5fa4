"""seamseg's AverageMeter arithmetic, by hand."""
import pytest
import torch

from gluontrain.torch.frcnn.meters import AverageMeter


def test_momentum_average_by_hand():
    m = AverageMeter((), momentum=0.5)
    assert m.mean.item() == 0.0  # before any update
    for v in (2., 4., 8.):
        m.update(torch.tensor(v))
    # sum: 2 -> 2*.5+4 = 5 -> 5*.5+8 = 10.5 ; count: 1 -> 1.5 -> 1.75
    assert m.sum.item() == 10.5 and m.count.item() == 1.75
    assert m.mean.item() == pytest.approx(6.0) and m.value.item() == 8.0


def test_momentum_one_is_plain_mean_and_train_momentum():
    m = AverageMeter(())
    for v in (1., 2., 6.):
        m.update(v)
    assert m.mean.item() == pytest.approx(3.0)
    # seamseg's train meters: momentum 1 - 1/len(loader); len 4 -> .75
    t = AverageMeter((), 1 - 1 / 4)
    t.update(4.)
    t.update(0.)
    assert t.mean.item() == pytest.approx((4 * .75 + 0) / (.75 + 1))


def test_count_below_one_is_clamped():
    m = AverageMeter((), momentum=0.)
    m.update(3.)
    m.update(5.)
    assert m.count.item() == 1.0 and m.mean.item() == 5.0
    m.count.fill_(0.5)
    assert m.mean.item() == 5.0  # sum / clamp(count, min=1)


def test_state_dict_round_trip_and_unknown_key():
    a = AverageMeter((), .9)
    for v in (1., 2.):
        a.update(v)
    b = AverageMeter((), .9)
    b.load_state_dict(a.state_dict())
    assert b.mean.item() == a.mean.item() and b.value.item() == 2.
    assert set(a.state_dict()) == {'last', 'sum', 'count'}
    with pytest.raises(KeyError):
        b.load_state_dict({'avg': torch.tensor(1.)})
    b.reset()
    assert b.count.item() == 0
