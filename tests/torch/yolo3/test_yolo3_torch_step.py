"""gluontrain.torch.yolo3.step: GluonCV's loss and targets by hand, MXNet's SGD, Gluon's
BatchNorm variance."""
import logging
import math

import torch

from gluontrain.torch.yolo3.model import TrainOutputs
from gluontrain.torch.yolo3.step import (GluonSGD, YOLOv3Step, batch_iou, gluon_batchnorm,
                                         merge_targets, yolov3_loss)


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


def test_amp_skips_overflowed_updates_and_logs_each_loss_scale_change(caplog):
    """``--amp``'s GradScaler with GluonSGD: while the scaled gradients overflow float16, the
    update is skipped (weights and MXNet momentum untouched) and the scale halves with MXNet
    AMP's log line; the first clean step updates and keeps the scale. float16 autocast on the
    CPU stands in for CUDA (the recipe refuses --amp on a CPU). On the real network YOLOv3's
    summed loss overflows at MXNet's initial 2**16 too: 18 skipped updates for mobilenet0.25
    at 128 px (docs/faithfulness.md)."""
    torch.manual_seed(0)
    anchors = 64
    net = _TinyHead(anchors)
    opt = GluonSGD(net.parameters(), lr=1e-3, momentum=0.9, rescale_grad=0.5)
    step = YOLOv3Step(net, opt, torch.device('cpu'), 2,
                      autocast=lambda: torch.autocast('cpu', dtype=torch.float16),
                      scaler=torch.amp.GradScaler('cpu', init_scale=2.**22))
    zeros = [torch.zeros(4, anchors, k) for k in (1, 2, 2, 2, 2)]  # every anchor negative
    batch = (torch.rand(4, 8), *zeros, -torch.ones(4, 1, 4))
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
            assert not opt.state  # and no momentum buffer yet
            scales.append(scale / 2)
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
