"""gluontrain.torch.yolo3.step: GluonCV's loss and targets by hand, MXNet's SGD, Gluon's
BatchNorm variance."""
import collections
import logging
import math
import os

import numpy as np
import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from gluontrain.core.loop import Hook
from gluontrain.data import synthetic
from gluontrain.torch.step import mixed_precision
from gluontrain.torch.yolo3 import get_yolov3, main, recipe
from gluontrain.torch.yolo3.model import TrainOutputs
from gluontrain.torch.yolo3.recipe import gluon_init
from gluontrain.torch.yolo3.step import (GluonSGD, YOLOv3Step, batch_iou, gluon_batchnorm,
                                         merge_targets, to_channels_last, yolov3_loss)
from gluontrain.torch.yolo3.weights import gluon_arrays


def _bce(x, y):
    return max(x, 0) - x * y + math.log1p(math.exp(-abs(x)))


def test_loss_by_hand_one_positive_one_ignored_one_negative():
    # three anchors, one class: anchor 0 has a box, 1 is ignored (-1), 2 is background
    obj_t = torch.tensor([[[1.], [-1.], [0.]]])
    center_t = torch.tensor([[[0.25, 0.5], [0, 0], [0, 0]]])
    scale_t = torch.tensor([[[0.1, -0.2], [0, 0], [0, 0]]])
    weight_t = torch.tensor([[[1.5, 1.5], [0, 0], [0, 0]]])
    class_t = torch.tensor([[[1.], [-1.], [-1.]]])
    class_mask = torch.tensor([[[1.], [0.], [0.]]])
    objness = torch.tensor([[[0.3], [2.0], [-1.0]]])
    centers = torch.tensor([[[0.1, -0.4], [5, 5], [5, 5]]])
    scales = torch.tensor([[[0.3, 0.1], [9, 9], [9, 9]]])
    cls = torch.tensor([[[0.7], [3.], [3.]]])
    obj, cen, sca, cla = yolov3_loss(objness, centers, scales, cls, obj_t, center_t, scale_t,
                                     weight_t, class_t, class_mask)
    # GluonCV: mean over the 3 anchors x denorm 3 = sum; centres/scales mean over 6 x 6
    assert math.isclose(obj.item(), _bce(0.3, 1) + _bce(-1.0, 0), rel_tol=1e-6)
    assert math.isclose(cen.item(), 1.5 * (_bce(0.1, 0.25) + _bce(-0.4, 0.5)), rel_tol=1e-6)
    assert math.isclose(sca.item(), 1.5 * (0.2 + 0.3), rel_tol=1e-6)
    assert math.isclose(cla.item(), _bce(0.7, 1), rel_tol=1e-6)


def test_dynamic_ignore_above_0_7_and_label_smoothing():
    gt = torch.tensor([[[0., 0., 10., 10.], [-1, -1, -1, -1]]])
    preds = torch.tensor([[[0., 0., 10., 9.], [0., 0., 10., 6.], [0, 0, 10, 10]]])
    assert torch.allclose(batch_iou(preds, gt)[0, :, 0], torch.tensor([0.9, 0.6, 1.0]))
    zeros = torch.zeros(1, 3, 2)
    obj_t = torch.tensor([[[0.], [0.], [1.]]])
    class_t = torch.tensor([[[-1., -1.], [-1., -1.], [0., 1.]]])
    obj, _, _, _, classes, mask = merge_targets(preds, gt, obj_t, zeros, zeros, zeros, class_t,
                                                num_class=2, label_smooth=True)
    assert obj.view(-1).tolist() == [-1, 0, 1]  # IoU 0.9 ignored, 0.6 negative, box kept
    # smoothing min(1/2, 1/40): 1 -> 1 - 1/40, 0 -> 1/40
    assert torch.allclose(classes[0, 2], torch.tensor([1 / 40, 1 - 1 / 40]))
    assert mask[0].tolist() == [[0, 0], [0, 0], [1, 1]]


def test_sgd_is_mxnet_s_when_the_lr_changes():
    w = torch.nn.Parameter(torch.tensor([1.0]))
    opt = GluonSGD([w], lr=0.1, momentum=0.9, weight_decay=0.01, rescale_grad=0.5)
    mom, ref = 0.0, 1.0
    for lr, g in ((0.1, 2.0), (0.3, -1.0), (0.05, 4.0)):
        opt.param_groups[0]['lr'] = lr
        w.grad = torch.tensor([g])
        opt.step()
        mom = 0.9 * mom - lr * 0.01 * ref - lr * 0.5 * g
        ref += mom
    assert math.isclose(w.item(), ref, rel_tol=1e-6)


def test_sgd_state_dict_round_trip_is_torch_s():
    """GluonSGD calls the base class's methods past their ``torch._dynamo`` guard: the same
    state dict as ``torch.optim.Optimizer``'s."""
    w = torch.nn.Parameter(torch.tensor([1.0, 2.0]))
    opt = GluonSGD([w], lr=0.1, momentum=0.9)
    w.grad = torch.tensor([1.0, -1.0])
    opt.step()
    state = opt.state_dict()
    assert state['param_groups'][0]['params'] == [0]
    assert torch.equal(state['state'][0]['momentum_buffer'], torch.tensor([-0.1, 0.1]))
    w2 = torch.nn.Parameter(w.detach().clone())
    opt2 = GluonSGD([w2], lr=0.5, momentum=0.0)
    opt2.load_state_dict(state)
    assert opt2.param_groups[0]['lr'] == 0.1 and opt2.param_groups[0]['momentum'] == 0.9
    assert torch.equal(opt2.state[w2]['momentum_buffer'], torch.tensor([-0.1, 0.1]))
    w2.grad = torch.ones(2)
    opt2.zero_grad()  # the base class's, past its guard: set_to_none as torch's
    assert w2.grad is None
    # that none of these imports torch._dynamo: tests/torch/test_optim.py


def test_no_wd_group_and_batchnorm_keeps_the_biased_variance():
    bn = torch.nn.BatchNorm2d(1, momentum=0.1)
    gluon_batchnorm(bn)
    x = torch.tensor([1., 2., 3., 6.]).view(4, 1, 1, 1)
    bn.train()
    bn(x).sum().backward()
    biased = x.var(unbiased=False).item()
    assert math.isclose(bn.running_var.item(), 0.9 + 0.1 * biased, rel_tol=1e-6)
    w = torch.nn.Parameter(torch.tensor([1.0]))
    opt = GluonSGD([{'params': [w], 'wd_mult': 0.0}], lr=1.0, momentum=0.0, weight_decay=1.0)
    w.grad = torch.zeros(1)
    opt.step()
    assert w.item() == 1.0



class _TinyHead(torch.nn.Module):
    """A linear layer standing in for the network: :class:`TrainOutputs`' five fields for
    ``anchors`` anchors and 2 classes (float16 under autocast, as the real heads)."""

    def __init__(self, anchors):
        super().__init__()
        self.anchors = anchors
        self.linear = torch.nn.Linear(8, anchors * 11)

    def forward(self, x):  # pylint: disable=missing-function-docstring
        out = self.linear(x).reshape(x.shape[0], self.anchors, 11)
        return TrainOutputs(out[..., :4], out[..., 4:6], out[..., 6:8], out[..., 8:9],
                            out[..., 9:], None, None, None)


def _tiny_amp_step(anchors=64):
    """``(net, opt, step, batch)``: float16 autocast on the CPU (standing in for CUDA) over
    :class:`_TinyHead`, a loss scale that overflows, and a batch whose anchors are all
    negative."""
    torch.manual_seed(0)
    net = _TinyHead(anchors)
    opt = GluonSGD(net.parameters(), lr=1e-3, momentum=0.9, rescale_grad=0.5)
    step = YOLOv3Step(net, opt, torch.device('cpu'), 2,
                      autocast=lambda: torch.autocast('cpu', dtype=torch.float16),
                      scaler=torch.amp.GradScaler('cpu', init_scale=2.**22))
    zeros = [torch.zeros(4, anchors, k) for k in (1, 2, 2, 2, 2)]
    return net, opt, step, (torch.rand(4, 8), *zeros, -torch.ones(4, 1, 4))


def test_amp_skips_overflowed_updates_and_logs_each_loss_scale_change(caplog):
    """``--amp``'s GradScaler with GluonSGD: while the scaled gradients overflow float16, the
    update is skipped (weights and MXNet momentum untouched) and the scale halves with MXNet
    AMP's log line (written at ``flush``); the first clean step updates and keeps the scale.
    float16 autocast on the CPU stands in for CUDA (the recipe refuses float16 --amp on a
    CPU). On the real network YOLOv3's
    summed loss overflows at MXNet's initial 2**16 too: 18 skipped updates for mobilenet0.25
    at 128 px (docs/faithfulness.md)."""
    net, opt, step, batch = _tiny_amp_step()
    scales, updated = [], False
    with caplog.at_level(logging.INFO, logger='gluontrain'):
        for _ in range(30):
            before = net.linear.weight.detach().clone()
            scale = step.scaler.get_scale()
            step(batch)
            updated = not torch.equal(before, net.linear.weight.detach())
            if updated:
                assert step.scaler.get_scale() == scale  # a clean step keeps the scale
                break
            assert step.scaler.get_scale() == scale / 2  # skipped: halved, weights as they were
            # and MXNet's momentum still its initial zeros (the skip is decided on the device)
            assert all(not st['momentum_buffer'].any() for st in opt.state.values())
            scales.append(scale / 2)
        step.flush()  # the recipe's hook calls it where the log reads the losses
    assert updated and len(scales) >= 2
    assert [r.getMessage() for r in caplog.records if 'AMP' in r.getMessage()] == \
        ['AMP: decreasing loss scale to %f' % s for s in scales]


class _TwoLayerHead(_TinyHead):
    """:class:`_TinyHead` behind a hidden layer: four parameters, gradients ready in turn."""

    def __init__(self, anchors):
        super().__init__(anchors)
        self.hidden = torch.nn.Linear(8, 8)

    def forward(self, x):  # pylint: disable=missing-function-docstring
        return super().forward(torch.tanh(self.hidden(x)))


def _tiny_run(update_in_backward, alive=None, close=False):
    torch.manual_seed(0)
    net = _TwoLayerHead(16)
    groups = [{'params': [net.hidden.weight, net.linear.weight]},
              {'params': [net.hidden.bias, net.linear.bias], 'wd_mult': 0.0}]
    opt = GluonSGD(groups, lr=0.0, momentum=0.9, weight_decay=5e-4, rescale_grad=0.25)
    if alive is not None:  # registered first: sees the gradients before the update drops one
        params = list(net.parameters())
        for p in params:
            p.register_post_accumulate_grad_hook(
                lambda _: alive.append(sum(q.grad is not None for q in params)))
    step = YOLOv3Step(net, opt, torch.device('cpu'), 2, update_in_backward=update_in_backward)
    gen = torch.Generator().manual_seed(1)
    for lr in (0.1, 0.3, 0.05):  # the warm-up's changing lr
        for group in opt.param_groups:
            group['lr'] = lr
        obj = (torch.rand(4, 16, 1, generator=gen) > 0.7).float()
        batch = (torch.randn(4, 8, generator=gen), obj, torch.rand(4, 16, 2, generator=gen),
                 torch.randn(4, 16, 2, generator=gen), torch.rand(4, 16, 2, generator=gen),
                 (torch.rand(4, 16, 2, generator=gen) > 0.5).float(),
                 torch.rand(4, 2, 4, generator=gen) * 8)
        out = step(batch)
    if close:
        step.close()
    return net, opt, out


def test_update_in_backward_gives_step_s_weights_bit_for_bit_one_gradient_alive():
    """The update made during backward, parameter by parameter, is ``backward(); step()``'s to
    the bit (weights, MXNet momentum, losses) over three steps of changing lr with a no-wd
    group; when each gradient is ready no other parameter holds one, and none is kept."""
    alive = []
    fused, fused_opt, fused_out = _tiny_run(True, alive)
    plain, plain_opt, plain_out = _tiny_run(False)
    assert fused_out['losses'] == plain_out['losses']
    for (name, a), b in zip(fused.named_parameters(), plain.parameters()):
        assert torch.equal(a, b), name
        assert torch.equal(fused_opt.state[a]['momentum_buffer'],
                           plain_opt.state[b]['momentum_buffer']), name
        assert a.grad is None and b.grad is not None
    assert alive == [1] * 12  # 4 parameters x 3 steps, one gradient at a time


def test_update_in_backward_is_refused_under_amp():
    net = _TinyHead(4)
    opt = GluonSGD(net.parameters(), lr=0.1)
    try:
        YOLOv3Step(net, opt, torch.device('cpu'), 2, scaler=torch.amp.GradScaler('cpu'),
                   update_in_backward=True)
    except ValueError as err:
        assert 'update_in_backward' in str(err)
    else:
        raise AssertionError('update_in_backward under AMP was accepted')


def test_closed_step_leaves_the_parameters_to_a_later_run():
    """After ``close`` no hook updates during backward: a second step on the same network
    (a notebook's second ``train()``) sees its gradients and updates once, with its own
    optimizer, as a network that never had the hooks."""
    net, _, _ = _tiny_run(True, close=True)
    fresh = _TwoLayerHead(16)
    fresh.load_state_dict(net.state_dict())
    x = torch.randn(4, 8, generator=torch.Generator().manual_seed(2))
    outs = []
    for model in (net, fresh):
        opt = GluonSGD(model.parameters(), lr=0.1, momentum=0.9)
        model(x).objness.sum().backward()
        assert all(p.grad is not None for p in model.parameters())
        opt.step()
        outs.append([p.detach().clone() for p in model.parameters()])
    assert all(torch.equal(a, b) for a, b in zip(*outs))


# ---------------------------------------------------------------------------- host syncs
#: Tensor methods that wait for the device and copy a value to the host (on a GPU a sync)
SYNC_METHODS = ('item', 'cpu', 'tolist', 'numpy', '__bool__', '__float__', '__int__',
                '__index__', 'nonzero')
#: operators below Python that read a device value on the host (item's, a data-dependent
#: shape); boolean-mask indexing (``index`` with a bool index) too
SYNC_OPS = ('_local_scalar_dense', 'nonzero', 'masked_select', 'is_nonzero', 'unique_dim',
            '_unique2', 'unique_consecutive')


class SyncCounter(TorchDispatchMode):
    """Counts, while ``on``, every call of :data:`SYNC_METHODS` (patched on ``torch.Tensor``
    by :meth:`patch`) and every :data:`SYNC_OPS` operator or boolean-mask index that reaches
    the dispatcher (also those called from C++, e.g. ``torch.where(cond)``)."""

    def __init__(self):
        super().__init__()
        self.on, self.counts = False, collections.Counter()

    @classmethod
    def _should_skip_dynamo(cls):
        # nothing here is compiled: without this, torch wraps __torch_dispatch__ in
        # torch._dynamo.disable, whose first call imports the compiler (7 s on 2 cores)
        return False

    def patch(self, monkeypatch):
        for name in SYNC_METHODS:
            original = getattr(torch.Tensor, name)

            def counted(*args, _name=name, _original=original, **kwargs):
                if self.on:
                    self.counts['Tensor.' + _name] += 1
                return _original(*args, **kwargs)
            monkeypatch.setattr(torch.Tensor, name, counted)
        return self

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        if self.on and (name in SYNC_OPS or (
                name.startswith('index') and len(args) > 1 and any(
                    isinstance(i, torch.Tensor) and i.dtype == torch.bool
                    for i in (args[1] if isinstance(args[1], (list, tuple)) else [args[1]])))):
            self.counts['aten.' + name] += 1
        return func(*args, **(kwargs or {}))


class _Window(Hook):
    """First / last of the hook list: counts from ``before_batch`` to the end of
    ``after_batch`` (the step and every per-step hook; not the loader's fetch)."""

    def __init__(self, counter, per_step, opens):
        self.counter, self.per_step, self.opens = counter, per_step, opens

    def before_batch(self, state):
        if self.opens:
            self.counter.counts.clear()
            self.counter.on = True
            self.counter.__enter__()  # the dispatcher's calls, only inside the window

    def after_batch(self, state):
        if not self.opens:
            self.counter.__exit__(None, None, None)
            self.counter.on = False
            self.per_step[(state.epoch, state.batch)] = dict(self.counter.counts)


@pytest.fixture(scope='module')
def eight_images(tmp_path_factory):
    return synthetic.write_voc(str(tmp_path_factory.mktemp('voc8')), num_train=4, num_val=2,
                               seed=0, years=(2007, 2012), classes=None, image_size=(64, 96),
                               max_objects=3)


def _counted_run(root, out, monkeypatch, *extra):
    """The recipe's ``main`` (mobilenet0.25, 64 px, batch 1: 8 steps an epoch) with the host
    reads of each step counted; returns ``{(epoch, batch): {name: calls}}`` and the log."""
    counter, per_step = SyncCounter().patch(monkeypatch), {}
    real_fit = recipe.fit

    def counted_fit(step, train_data, hooks, *args, **kwargs):
        hooks = [_Window(counter, per_step, True)] + hooks + [_Window(counter, per_step, False)]
        return real_fit(step, train_data, hooks, *args, **kwargs)

    monkeypatch.setattr(recipe, 'fit', counted_fit)
    main(['--network', 'mobilenet0.25', '--dataset', 'voc', '--dataset-root', root,
          '--gpus', '', '--no-pretrained-base', '--data-shape', '64', '--no-random-shape',
          '--batch-size', '1', '-j', '0', '--epochs', '1', '--save-interval', '1',
          '--val-interval', '2', '--no-plots', '--save-prefix', out + os.sep] + list(extra))
    with open(os.path.join(out, 'yolo3_mobilenet0.25_voc_train.log')) as f:
        return per_step, f.read()


@pytest.mark.parametrize('extra', [(), ('--amp', '--amp-dtype', 'bfloat16', '--channels-last')],
                         ids=['fp32', 'bf16-channels-last'])
def test_the_step_reads_the_device_only_at_the_log_interval(eight_images, tmp_path,
                                                            monkeypatch, extra):
    """Issue 44: 8 steps, ``--log-interval 3``: the steps at a batch line (batches 2 and 5)
    and the pass's last (7, the NaN guard's read before the checkpoint) read the device;
    the five others (0, 1, 3, 4, 6) make no call that waits for it: no ``.item()``, ``.cpu()``,
    ``float(t)``..., no boolean-mask index, in the step, the target merge, the loss and every
    per-step hook. (Before the fix every step made four ``float()`` reads of its losses.)"""
    per_step, log = _counted_run(eight_images, str(tmp_path), monkeypatch, '--log-interval',
                                 '3', *extra)
    assert sorted(per_step) == [(0, b) for b in range(8)]
    quiet = {b: per_step[(0, b)] for b in (0, 1, 3, 4, 6)}
    assert all(not counts for counts in quiet.values()), quiet
    # the log line reads the meter's 8 device sums (4 losses, running and epoch), the guard 1
    for batch in (2, 5):
        assert per_step[(0, batch)].get('Tensor.__float__') == 9, per_step[(0, batch)]
    assert per_step[(0, 7)].get('Tensor.__float__') == 1, per_step[(0, 7)]
    assert log.count('[Epoch 0][Batch ') == 2 and 'ObjLoss=' in log


def test_amp_step_waits_for_the_device_only_when_flushed(caplog):
    """Under a GradScaler the step neither reads the scale nor ``found_inf``: GluonSGD skips
    an overflowed update on the device. ``flush`` then reads the scales once (``tolist``) and
    logs each change, as the step logged them before (float16 autocast on the CPU stands in
    for CUDA)."""
    net, opt, step, batch = _tiny_amp_step()
    with pytest.MonkeyPatch.context() as mp:
        counter = SyncCounter().patch(mp)
        with counter, caplog.at_level(logging.INFO, logger='gluontrain'):
            counter.on = True
            for _ in range(8):
                step(batch)
            assert not counter.counts, dict(counter.counts)  # (before: 3 .item() a step)
            step.flush()
            assert dict(counter.counts) == {'Tensor.tolist': 1}
    lines = [r.getMessage() for r in caplog.records if 'AMP' in r.getMessage()]
    assert lines and lines == ['AMP: decreasing loss scale to %f' % (2.**22 / 2 ** k)
                               for k in range(1, len(lines) + 1)]


# ---------------------------------------------------------------------------- switches
def _generated_batch():
    """Two 64 px images and targets for mobilenet0.25's 252 anchors (2 classes), 5 %
    positive: the shapes the recipe's loader gives."""
    gen = torch.Generator().manual_seed(1)
    b, n = 2, 252
    obj = (torch.rand(b, n, 1, generator=gen) > 0.95).float()
    classes = torch.where(obj > 0, (torch.rand(b, n, 2, generator=gen) > 0.5).float(),
                          -torch.ones(b, n, 2))
    return (torch.rand(b, 3, 64, 64, generator=gen) * 2 - 1, obj,
            torch.rand(b, n, 2, generator=gen) * obj, torch.randn(b, n, 2, generator=gen) * obj,
            obj.expand(b, n, 2) * 1.5, classes,
            torch.tensor([[[4., 4., 30., 40.], [-1] * 4], [[10., 8., 60., 50.], [20, 20, 40, 40]]]))


def _first_steps(channels_last=False, amp_dtype=None, steps=1):
    torch.manual_seed(0)
    net = gluon_init(get_yolov3('yolo3_mobilenet0.25_custom', ['a', 'b'])).train()
    gluon_batchnorm(net)
    if channels_last:
        to_channels_last(net)
    opt = GluonSGD(net.parameters(), lr=0.01, momentum=0.9, rescale_grad=0.5)
    autocast, scaler = mixed_precision('cpu', amp_dtype is not None, dtype=amp_dtype or 'float16')
    step = YOLOv3Step(net, opt, torch.device('cpu'), 2, autocast=autocast, scaler=scaler,
                      channels_last=channels_last)
    losses = [[float(parts[0][0]) for parts in step(_generated_batch())['losses'].values()]
              for _ in range(steps)]
    return net, opt, step, losses


def test_channels_last_is_the_same_forward_in_nhwc():
    """``--channels-last``: every convolution weight (and its MXNet momentum) in NHWC after
    two updates; the first batch's losses are the contiguous network's within float32
    rounding (measured up to 4.5e-5 relative: the same sums in another order; bound 1e-3,
    the size of float32's own first-batch error against float64 in
    test_yolo3_torch_training.py); the .params written are the same arrays in NCHW."""
    net, opt, _, cl = _first_steps(channels_last=True, steps=2)
    plain, _, _, ref = _first_steps(steps=2)
    convs = [m.weight for m in net.modules() if isinstance(m, torch.nn.Conv2d)]
    assert len(convs) > 20
    assert all(w.is_contiguous(memory_format=torch.channels_last) for w in convs)
    assert all(opt.state[w]['momentum_buffer'].is_contiguous(
        memory_format=torch.channels_last) for w in convs)
    assert all(abs(a / b - 1) < 1e-3 for a, b in zip(cl[0], ref[0])), (cl[0], ref[0])
    plain.load_state_dict(net.state_dict())
    ours, theirs = gluon_arrays(net), gluon_arrays(plain)
    assert list(ours) == list(theirs)
    assert all(np.array_equal(ours[k], theirs[k]) for k in ours)


def test_amp_bfloat16_runs_on_the_cpu_without_loss_scaling():
    """``--amp --amp-dtype bfloat16``: autocast to bfloat16 (the heads' outputs are bfloat16),
    no GradScaler (bfloat16 has float32's exponent range: nothing to scale, no update
    skipped), the losses in float32; every step updates. The first batch's losses are fp32's
    within bfloat16's rounding through the network (8-bit mantissa: measured up to 7.3e-2
    relative, BoxScaleLoss; bound 0.15)."""
    net, _, step, bf16 = _first_steps(amp_dtype='bfloat16', steps=1)
    assert step.scaler is None
    with torch.no_grad(), step.autocast():
        out = net(_generated_batch()[0])
    assert out.objness.dtype == torch.bfloat16
    before = [p.detach().clone() for p in net.parameters()]
    step(_generated_batch())
    assert all(not torch.equal(a, p) for a, p in zip(before, net.parameters())
               if p.grad is not None)
    losses = step.losses(_generated_batch())
    assert all(loss.dtype == torch.float32 and torch.isfinite(loss).all() for loss in losses)
    _, _, _, fp32 = _first_steps(steps=1)
    assert all(abs(a / b - 1) < 0.15 for a, b in zip(bf16[0], fp32[0])), (bf16[0], fp32[0])


def test_gluon_sgd_unscales_itself_when_the_scaler_did_not():
    """``GradScaler.step`` without ``unscale_`` first hands GluonSGD the scale: it unscales as
    ``unscale_`` would, so both orders give the same weights bit for bit."""
    weights = []
    for unscale_first in (True, False):
        torch.manual_seed(0)
        net = torch.nn.Linear(4, 3)
        initial = net.weight.detach().clone()
        opt = GluonSGD(net.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-3)
        scaler = torch.amp.GradScaler('cpu', init_scale=2.**10)
        for _ in range(3):
            opt.zero_grad()
            scaler.scale(net(torch.ones(2, 4)).square().sum()).backward()
            if unscale_first:
                scaler.unscale_(opt)
            scaler.step(opt)
            scaler.update()
        weights.append([p.detach().clone() for p in net.parameters()])
    assert all(torch.equal(a, b) for a, b in zip(*weights))
    assert not torch.equal(weights[0][0], initial)  # it did update
