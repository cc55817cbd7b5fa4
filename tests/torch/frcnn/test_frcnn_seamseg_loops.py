"""seamseg's train/validate loops driven with a stand-in model (the real detector needs the
ops package): scheduler before forward, weighted losses, meters, log lines, COCO AP."""
import os
from collections import OrderedDict

import pytest
import torch

from gluontrain.torch.frcnn import log as L
from gluontrain.torch.frcnn.config import load_config
from gluontrain.torch.frcnn.data import make_dataloaders
from gluontrain.torch.frcnn.meters import AverageMeter
from gluontrain.torch.frcnn.optim import make_optimizer
from gluontrain.torch.frcnn.seamseg_loops import LOSS_NAMES, train, validate


class StandIn(torch.nn.Module):
    """Losses k * (w - 1)^2 for k = 1..4; predictions: the non-crowd ground truth (oracle)."""

    def __init__(self, miss_every=0):
        super().__init__()
        self.w = torch.nn.Linear(1, 1, bias=False)
        self.optimizer, self.seen_lr, self.miss_every, self.calls = None, [], miss_every, 0

    def forward(self, img, cat, iscrowd, bbx, do_loss=False, do_prediction=True):
        if self.optimizer is not None:
            self.seen_lr.append(self.optimizer.param_groups[1]['lr'])
        d = self.w.weight.sum() - 1.0
        losses = OrderedDict((name, (k + 1) * d * d) for k, name in enumerate(LOSS_NAMES))
        pred = None
        if do_prediction:
            pred = {'bbx_pred': [], 'cls_pred': [], 'obj_pred': []}
            for c, cr, b in zip(cat, iscrowd, bbx):
                self.calls += 1
                keep = cr == 0
                if not keep.any() or (self.miss_every and self.calls % self.miss_every == 0):
                    for v in pred.values():
                        v.append(None)
                    continue
                pred['bbx_pred'].append(b[keep])
                pred['cls_pred'].append(c[keep])
                pred['obj_pred'].append(torch.ones(int(keep.sum())))
        return losses, pred


def _setup(tmp_path, coco_root):
    p = tmp_path / 'c.ini'
    p.write_text('[general]\nlog_interval = 2\n'
                 '[optimizer]\nlr = 0.1\nloss_weights = (1., 2., 0., 0.)\n'
                 '[scheduler]\nepochs = 2\nburn_in_steps = 2\n'
                 '[dataloader]\nshortest_size = 64\nlongest_max_size = 96\ntrain_batch_size = 2\n'
                 'val_batch_size = 2\nnum_workers = 0\ntrain_set = train2017\nval_set = val2017\n')
    conf = load_config(str(p))
    train_dl, val_dl = make_dataloaders(conf, coco_root)
    model = StandIn()
    with torch.no_grad():
        model.w.weight.fill_(3.)
    optimizer, scheduler, batch_update, epochs = make_optimizer(conf, model, len(train_dl))
    model.optimizer = optimizer
    momentum = 1. - 1. / len(train_dl)
    meters = {k: AverageMeter((), momentum) for k in ('loss',) + LOSS_NAMES}
    return conf, train_dl, val_dl, model, optimizer, scheduler, batch_update, epochs, meters


def test_train_epoch(tmp_path, coco_root):
    conf, train_dl, _, model, opt, sch, batch_update, epochs, meters = _setup(tmp_path,
                                                                            coco_root)
    n = len(train_dl)
    assert n >= 3
    L.init(str(tmp_path), 'training')
    step = train(model, opt, sch, train_dl, meters, epoch=1, num_epochs=epochs, global_step=n,
                 batch_update=batch_update, loss_weights=conf['optimizer'].getstruct(
                     'loss_weights'), log_interval=2)
    assert step == 2 * n and train_dl.batch_sampler._epoch == 1
    # lr of iteration g is set before its forward: poly over 2 epochs, g > burn-in
    count = 2 * n
    assert model.seen_lr == pytest.approx([0.1 * (1 - g / count) ** 0.9
                                           for g in range(n + 1, 2 * n + 1)])
    # weighted total: 1 * obj + 2 * bbx = 5 (w - 1)^2, roi losses weighted 0
    assert meters['loss'].value.item() == pytest.approx(5 * meters['obj_loss'].value.item())
    assert meters['roi_bbx_loss'].value.item() == pytest.approx(
        4 * meters['obj_loss'].value.item())
    assert meters['loss'].count.item() == pytest.approx(
        sum((1 - 1 / n) ** k for k in range(n)))
    for h in L.get_logger().handlers:
        h.flush()
    lines = (tmp_path / 'training.log').read_text().splitlines()
    assert len(lines) == n // 2
    assert lines[0].split(' ', 3)[3].startswith('[2/2] [{:>{w}}/{}]\tlr='.format(
        2, n, w=len(str(n))))
    assert all('\tobj_loss=' in l and '\tbatch_time=' in l for l in lines)


def test_validate_oracle_scores_one(tmp_path, coco_root):
    conf, _, val_dl, model, *_ = _setup(tmp_path, coco_root)
    gt = os.path.join(coco_root, 'annotations', 'instances_val2017.json')
    L.init(str(tmp_path), 'eval')
    kw = dict(epoch=0, num_epochs=2, global_step=5, log_interval=1, coco_gt=gt)
    assert validate(model, val_dl, (1., 1., 1., 1.), **kw) == pytest.approx(1.0)
    for h in L.get_logger().handlers:
        h.flush()
    last = (tmp_path / 'eval.log').read_text().splitlines()[-1]
    assert '\tdet_map=1.000' in last and '\tloss=40.000' in last  # 10 * (3 - 1)^2
    missing = StandIn(miss_every=3)
    with torch.no_grad():
        missing.w.weight.fill_(3.)
    assert validate(missing, val_dl, (1., 1., 1., 1.), **kw) < 0.99
    missing.calls = 0
    assert validate(missing, val_dl, (1., 1., 1., 1.), reference_img_filter=True,
                    **kw) == pytest.approx(1.0)
