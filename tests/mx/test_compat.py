"""GluonCV 0.3's LRScheduler: its formula at every update, and seed 001's train() unchanged."""
import argparse
import logging
import math
import os

import mxnet as mx
import pytest

from gluontrain.mx import gluoncv  # noqa: F401  (gluoncv importable beside torch)
from gluontrain.mx.compat import LRScheduler

CELLS = os.path.join(os.path.dirname(__file__), 'data', 'seed001_cells.py.txt')


def old_formula(mode, baselr, niters, nepochs, step, step_factor, targetlr, power, warmup_epochs,
                warmup_lr, warmup_mode, i, epoch):
    """GluonCV 0.3's schedule (gluon-cv 7c555523 gluoncv/utils/lr_scheduler.py), restated from
    its docstring: warm-up over whole epochs, then step by epoch or poly/cosine over the rest."""
    t, total, warm = epoch * niters + i, nepochs * niters, warmup_epochs * niters
    if epoch < warmup_epochs:
        return warmup_lr if warmup_mode == 'constant' else \
            warmup_lr + (baselr - warmup_lr) * t / warm
    if mode == 'step':
        return baselr * step_factor ** len([s for s in step if s <= epoch])
    frac = (t - warm) / (total - warm)
    shape = (1 - frac) ** power if mode == 'poly' else (1 + math.cos(math.pi * frac)) / 2
    return targetlr + (baselr - targetlr) * shape


CASES = [
    dict(mode='step', baselr=0.001, niters=7, nepochs=6, step=[3, 5], step_factor=0.1,
         targetlr=0, power=2, warmup_epochs=2, warmup_lr=0, warmup_mode='linear'),
    dict(mode='poly', baselr=0.01, niters=5, nepochs=8, step=(30, 60, 90), step_factor=0.1,
         targetlr=1e-4, power=0.9, warmup_epochs=1, warmup_lr=0.001, warmup_mode='linear'),
    dict(mode='cosine', baselr=0.1, niters=4, nepochs=5, step=(30, 60, 90), step_factor=0.1,
         targetlr=0.0, power=0.9, warmup_epochs=2, warmup_lr=0.02, warmup_mode='constant'),
    dict(mode='cosine', baselr=0.1, niters=6, nepochs=4, step=(30, 60, 90), step_factor=0.1,
         targetlr=0.005, power=0.9, warmup_epochs=0, warmup_lr=0, warmup_mode='linear'),
]


@pytest.mark.parametrize('kw', CASES, ids=lambda kw: '{}-warmup{}'.format(
    kw['mode'], kw['warmup_epochs']))
def test_old_schedule_follows_the_old_formula_at_every_update(kw):
    sched = LRScheduler(**kw)
    assert sched(0) == kw['baselr']  # before the first update(), as GluonCV 0.3
    for epoch in range(kw['nepochs']):
        for i in range(kw['niters']):
            sched.update(i, epoch)
            expected = old_formula(i=i, epoch=epoch, **kw)
            assert sched.learning_rate == pytest.approx(expected, rel=1e-12, abs=1e-15)
            assert sched(12345) == sched.learning_rate  # MXNet's count is ignored
    sched.update(0, kw['nepochs'])  # T == N is still allowed ...
    with pytest.raises(AssertionError):
        sched.update(1, kw['nepochs'])  # ... one more is not


def test_old_schedule_hand_values():
    # 2 warm-up epochs of 4 updates up to 0.004, then x0.1 at epoch 3
    sched = LRScheduler('step', baselr=0.004, niters=4, nepochs=5, step=[3], warmup_epochs=2)
    lrs = []
    for epoch in range(5):
        for i in range(4):
            sched.update(i, epoch)
            lrs.append(sched.learning_rate)
    assert lrs == pytest.approx([0, 0.0005, 0.001, 0.0015, 0.002, 0.0025, 0.003, 0.0035]
                                + [0.004] * 4 + [0.0004] * 8)


def test_old_schedule_rejects_modes_it_did_not_have():
    with pytest.raises(ValueError, match="mode must be 'step', 'poly' or 'cosine'"):
        LRScheduler('linear', baselr=0.1, niters=2, nepochs=2)


def _seed_args(save_prefix, num_samples):
    # the attributes seed 001's train() reads, with its parse_args' defaults except the sizes
    return argparse.Namespace(
        lr_mode='step', lr=0.001, lr_decay=0.1, lr_decay_period=0, lr_decay_epoch='2',
        warmup_epochs=1, epochs=3, batch_size=4, num_samples=num_samples, wd=0.0005,
        momentum=0.9, no_wd=False, label_smooth=False, mixup=False, no_mixup_epochs=20,
        start_epoch=0, log_interval=2, val_interval=3, save_interval=0,
        save_prefix=save_prefix, no_random_shape=True, data_shape=64)


def test_seed001_train_cell_runs_unchanged_with_the_old_schedule(voc_root, tmp_path):
    scope = {'__name__': 'seed001'}
    with open(CELLS) as f:
        exec(compile(f.read(), CELLS, 'exec'), scope)  # pylint: disable=exec-used
    seen = []  # (epoch, i, lr) at every update() the cell makes

    class Recording(scope['LRScheduler']):
        def update(self, i, epoch):
            super().update(i, epoch)
            seen.append((epoch, i, self.learning_rate))

    scope['LRScheduler'] = Recording
    gdata, get_model = scope['gdata'], scope['get_model']
    train_ds = gdata.VOCDetection(root=voc_root, splits=[(2007, 'trainval')])
    val_ds = gdata.VOCDetection(root=voc_root, splits=[(2007, 'test')])
    metric = scope['VOC07MApMetric'](iou_thresh=0.5, class_names=val_ds.classes)
    args = _seed_args(str(tmp_path / 'seed001'), len(train_ds))
    mx.random.seed(0)
    net = get_model('yolo3_mobilenet0.25_custom', classes=train_ds.classes,
                    pretrained_base=False)
    net.initialize()
    ctx = [mx.cpu()]
    train_data, val_data = scope['get_dataloader'](net, train_ds, val_ds, args.data_shape,
                                                   args.batch_size, 0, args)
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        scope['train'](net, train_data, val_data, metric, ctx, args)
    finally:  # the cell adds a FileHandler to the root logger; keep it out of later tests
        for handler in set(root.handlers) - set(handlers):
            root.removeHandler(handler)
            handler.close()
        root.setLevel(level)

    niters = len(train_ds) // args.batch_size
    assert len(train_ds) == 16 and niters == 4
    assert [(e, i) for e, i, _ in seen] == [(e, i) for e in range(3) for i in range(niters)]
    expected = [old_formula('step', 0.001, niters, 3, [2], 0.1, 0, 2, 1, 0, 'linear', i, e)
                for e in range(3) for i in range(niters)]
    assert [lr for _, _, lr in seen] == pytest.approx(expected, rel=1e-12, abs=1e-15)
    # by hand: warm-up 0, 1/4, 2/4, 3/4 of 0.001, then 0.001 for epoch 1, 0.0001 for epoch 2
    assert [lr for _, _, lr in seen] == pytest.approx(
        [0, 0.00025, 0.0005, 0.00075] + [0.001] * 4 + [0.0001] * 4)
    with open(args.save_prefix + '_train.log') as f:
        log = f.read()
    assert '[Epoch 2] Validation:' in log and 'mAP=' in log
    # the trainer saw the scheduler's value: the seed logs trainer.learning_rate every 2 batches
    assert '[Epoch 2][Batch 1], LR: 1.00E-04' in log
