"""SGB's training step: SGGStep (clip + per-parameter log, frozen modules, loss scaling), and
the relation model's step under autocast."""
import logging
import os
import sys
from collections import OrderedDict

import pytest
import torch

from gluontrain.core.loop import TrainState
from gluontrain.torch.sgg.config import get_cfg
from gluontrain.torch.sgg.step import SGGStep


class Images:
    def __init__(self, t):
        self.t = t

    def to(self, device):
        return self


class Target(list):
    def to(self, device):
        return self


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = torch.nn.Linear(1, 1, bias=False)
        self.head = torch.nn.Linear(1, 1, bias=False)
        self.backbone.weight.data.fill_(1.0)
        self.head.weight.data.fill_(1.0)

    def forward(self, images, targets):
        x = self.backbone(images.t)
        return OrderedDict(loss_a=(self.head(x) * 10).sum(), loss_b=self.head.weight.sum())


def test_step_clips_logs_and_keeps_frozen_modules_frozen(caplog):
    cfg = get_cfg()
    cfg.SOLVER.GRAD_NORM_CLIP, cfg.SOLVER.PRINT_GRAD_FREQ = 1.0, 2
    net = Net()
    opt = torch.optim.SGD([net.head.weight], lr=0.1)
    step = SGGStep(net, opt, cfg, torch.device('cpu'), eval_modules=(net.backbone,),
                   logger=logging.getLogger('sgg-step'))
    batch = (Images(torch.ones(1, 1)), [Target([1])], [0])
    with caplog.at_level(logging.INFO, logger='sgg-step'):
        out = step(batch, TrainState(iteration=0))
    # d(10 w + w)/dw = 11 -> clipped to norm 1: w = 1 - 0.1 * 11 / (11 + 1e-6)
    assert net.head.weight.item() == pytest.approx(1 - 0.1 * 11 / (11 + 1e-6))
    assert net.backbone.weight.requires_grad is False and net.backbone.weight.item() == 1.0
    assert out['losses']['loss'][0][0] == pytest.approx(11.0)
    assert out['losses']['loss_a'][0][0] == pytest.approx(10.0)
    assert out['lr'] == 0.1 and out['batch_size'] == 1
    assert any(r.getMessage().startswith('---Total norm 11.00000') for r in caplog.records)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger='sgg-step'):
        step(batch, TrainState(iteration=2))   # iteration 3: not a PRINT_GRAD_FREQ multiple
    assert not caplog.records
    with caplog.at_level(logging.INFO, logger='sgg-step'):
        step(batch, TrainState(iteration=3))   # iteration 4
    assert caplog.records


def test_step_with_loss_scaling_clips_the_unscaled_gradient():
    """``DTYPE "float16"`` (apex O1): the scaler's factor never reaches the clip or the
    update; the forward runs under the given autocast."""
    cfg = get_cfg()
    cfg.SOLVER.GRAD_NORM_CLIP = 1.0
    net = Net()
    opt = torch.optim.SGD([net.head.weight], lr=0.1)
    entered = []

    class Autocast:
        def __enter__(self):
            entered.append(torch.is_autocast_enabled('cpu'))

        def __exit__(self, *exc):
            return False

    scaler = torch.amp.GradScaler('cpu', init_scale=1024.0)
    step = SGGStep(net, opt, cfg, torch.device('cpu'), eval_modules=(net.backbone,),
                   logger=logging.getLogger('sgg-step'), autocast=Autocast, scaler=scaler)
    step((Images(torch.ones(1, 1)), [Target([1])], [0]), TrainState(iteration=0))
    assert entered == [False]
    # the same update as without scaling: the gradient 11, clipped to norm 1
    assert net.head.weight.item() == pytest.approx(1 - 0.1 * 11 / (11 + 1e-6))
    assert scaler.get_scale() == 1024.0


def test_relation_model_step_runs_under_autocast():
    """The model's ops (ROIAlign, box coding, NMS, the predictors) run under autocast: CPU
    bfloat16 here stands in for CUDA float16, which this machine cannot run."""
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), 'modeling'))
    from sgg_model_helpers import make_batch, tiny_cfg  # pylint: disable=import-outside-toplevel
    from gluontrain.torch.sgg.model import build_relation_model
    torch.manual_seed(0)
    cfg = tiny_cfg('sgdet')
    cfg.MODEL.ROI_RELATION_HEAD.PREDICTOR = 'MotifPredictor'
    stats = {'fg_matrix': torch.zeros(6, 6, 4).long().numpy(),
             'pred_dist': torch.zeros(6, 6, 4).numpy(),
             'obj_classes': ['bg'] + ['o%d' % i for i in range(5)],
             'rel_classes': ['bg'] + ['r%d' % i for i in range(3)], 'att_classes': []}
    model = build_relation_model(cfg, stats)
    model.train()
    images, targets = make_batch()
    with torch.autocast('cpu', dtype=torch.bfloat16):
        losses = model(images, targets)
    total = sum(v.float() for v in losses.values())
    assert torch.isfinite(total)
    total.backward()
