"""One YOLOv3 training step on PyTorch, as GluonCV's: ``YOLOV3TargetMerger``
(:func:`merge_targets`), ``YOLOV3Loss`` (:func:`yolov3_loss`), MXNet's SGD (:class:`GluonSGD`)
and Gluon's BatchNorm variance (:func:`gluon_batchnorm`) (docs/faithfulness.md, "YOLOv3 on
PyTorch: the training recipe"). The step never waits for the device: its losses and loss
scale stay there until the log reads them (docs/performance.md, "The step on the GPU")."""
import logging
from collections import OrderedDict

import torch
import torch.distributed as dist
import torch.nn.functional as F

from ..distributed import is_distributed, unwrap_model
from ..optim import without_compiler

__all__ = ['LOSS_NAMES', 'IGNORE_IOU_THRESH', 'batch_iou', 'merge_targets', 'yolov3_loss',
           'GluonSGD', 'gluon_batchnorm', 'loss_sums', 'to_channels_last', 'YOLOv3Step']

LOSS_NAMES = ('ObjLoss', 'BoxCenterLoss', 'BoxScaleLoss', 'ClassLoss')
#: GluonCV's ``ignore_iou_thresh`` of every YOLOv3 in its zoo
IGNORE_IOU_THRESH = 0.7


def batch_iou(a, b, eps=1e-15):
    """``BBoxBatchIOU`` (corner boxes, offset 0): ``(B, N, 4)`` x ``(B, M, 4)`` -> ``(B, N, M)``."""
    al, at, ar, ab = a[..., 0:1], a[..., 1:2], a[..., 2:3], a[..., 3:4]
    bl, bt, br, bb = (t.transpose(1, 2) for t in (b[..., 0:1], b[..., 1:2], b[..., 2:3],
                                                  b[..., 3:4]))
    iw = (torch.minimum(ar, br) - torch.maximum(al, bl)).clamp(0, 6.55040e+04)
    ih = (torch.minimum(ab, bb) - torch.maximum(at, bt)).clamp(0, 6.55040e+04)
    inter = iw * ih
    union = (ar - al) * (ab - at) + (br - bl) * (bb - bt) - inter
    return inter / (union + eps)


def merge_targets(box_preds, gt_boxes, obj_t, center_t, scale_t, weight_t, class_t,
                  num_class, label_smooth=False, ignore_iou_thresh=IGNORE_IOU_THRESH):
    """``YOLOV3TargetMerger``: ``[objectness, center, scale, weights, classes, class_mask]``
    from the predicted corner boxes ``(B, N, 4)``, the ground truth ``(B, M, 4)`` (-1 padded)
    and the transform's targets; objectness -1 (ignored) above ``ignore_iou_thresh``."""
    with torch.no_grad():
        ious = batch_iou(box_preds.detach(), gt_boxes)
        dyn_obj = (ious.max(dim=-1, keepdim=True)[0] > ignore_iou_thresh).to(obj_t.dtype) * -1
        mask = obj_t > 0
        objectness = torch.where(mask, obj_t, dyn_obj)
        zeros2 = torch.zeros_like(center_t)
        center = torch.where(mask, center_t, zeros2)
        scale = torch.where(mask, scale_t, zeros2)
        weights = torch.where(mask, weight_t, zeros2)
        classes = torch.where(mask, class_t, -torch.ones_like(class_t))
        if label_smooth:
            smooth = min(1. / num_class, 1. / 40)
            classes = torch.where(classes > 0.5, classes - smooth, classes)
            classes = torch.where((classes < -0.5) | (classes > 0.5), classes,
                                  torch.full_like(classes, smooth))
        class_mask = mask.to(classes.dtype) * (classes >= 0).to(classes.dtype)
    return [objectness, center, scale, weights, classes, class_mask]


def _sigmoid_bce(pred, label, weight):
    """Gluon's ``SigmoidBinaryCrossEntropyLoss(from_sigmoid=False)``, per image."""
    loss = F.relu(pred) - pred * label + F.softplus(-pred.abs())
    return (loss * weight).flatten(1).mean(dim=1)


def yolov3_loss(objness, centers, scales, cls_preds, obj_t, center_t, scale_t, weight_t,
                class_t, class_mask):
    """``YOLOV3Loss``: ``(obj, center, scale, class)`` losses, each ``(B,)``, from the raw
    outputs and :func:`merge_targets`' targets."""
    denorm = float(obj_t.shape[1:].numel())
    weight_t = weight_t * obj_t
    hard_obj = torch.where(obj_t > 0, torch.ones_like(obj_t), obj_t)
    obj_mask = torch.where(obj_t > 0, obj_t, (obj_t >= 0).to(obj_t.dtype))
    obj_loss = _sigmoid_bce(objness, hard_obj, obj_mask) * denorm
    center_loss = _sigmoid_bce(centers, center_t, weight_t) * (denorm * 2)
    scale_loss = ((scale_t - scales).abs() * weight_t).flatten(1).mean(dim=1) * (denorm * 2)
    denorm_class = float(class_t.shape[1:].numel())
    class_mask = class_mask * obj_t
    cls_loss = _sigmoid_bce(cls_preds, class_t, class_mask) * denorm_class
    return obj_loss, center_loss, scale_loss, cls_loss


class GluonSGD(torch.optim.Optimizer):
    """MXNet's SGD with momentum: ``mom = momentum * mom - lr * wd * w - lr * rescale_grad *
    grad; w += mom``, with a group's ``wd_mult`` (default 1) scaling ``weight_decay``. The base
    class's methods run without the ``torch._dynamo`` guard (it would import the compiler).

    Under a ``GradScaler`` it skips an overflowed update on the device (weights and momentum
    kept, selected by the scaler's ``found_inf``), where the scaler would read ``found_inf`` on
    the host: the same weights without a wait for the device."""

    #: ``GradScaler.step`` hands ``found_inf`` (and ``grad_scale``) over instead of reading it
    _step_supports_amp_scaling = True

    add_param_group = without_compiler(torch.optim.Optimizer.add_param_group)
    zero_grad = without_compiler(torch.optim.Optimizer.zero_grad)
    state_dict = without_compiler(torch.optim.Optimizer.state_dict)
    load_state_dict = without_compiler(torch.optim.Optimizer.load_state_dict)

    def __init__(self, params, lr=0.0, momentum=0.9, weight_decay=0.0, rescale_grad=1.0):
        super().__init__(params, dict(lr=lr, momentum=momentum, weight_decay=weight_decay,
                                      rescale_grad=rescale_grad, wd_mult=1.0))

    @torch.no_grad()
    def step(self, closure=None):  # pylint: disable=arguments-differ
        """One update of every parameter with a gradient; under ``GradScaler.step`` none
        where its ``found_inf`` is set (decided on the device)."""
        found_inf = getattr(self, 'found_inf', None)
        keep = None if found_inf is None else found_inf > 0
        scale = getattr(self, 'grad_scale', None)  # set when no unscale_ came first
        inv = None if scale is None else scale.double().reciprocal().float()  # as unscale_'s
        for group in self.param_groups:
            for p in group['params']:
                if p.grad is not None:
                    if inv is not None:
                        p.grad.mul_(inv)
                    self.update(p, group, keep)

    @torch.no_grad()
    def update(self, p, group, keep=None):
        """MXNet's update of one parameter ``p`` of ``group`` from its ``grad``; where the 0-d
        bool tensor ``keep`` is true, weight and momentum stay as they were."""
        lr, mom = group['lr'], group['momentum']
        wd = group['weight_decay'] * group['wd_mult']
        state = self.state[p]
        if 'momentum_buffer' not in state:
            state['momentum_buffer'] = torch.zeros_like(p)
        buf = state['momentum_buffer']
        if keep is None:
            buf.mul_(mom).add_(p, alpha=-lr * wd).add_(p.grad, alpha=-lr * group['rescale_grad'])
            p.add_(buf)
            return
        new = buf.mul(mom).add_(p, alpha=-lr * wd).add_(p.grad, alpha=-lr * group['rescale_grad'])
        p.copy_(torch.where(keep, p, p + new))
        buf.copy_(torch.where(keep, buf, new))

    def update_in_backward(self):
        """From now on update each parameter as soon as backward has accumulated its gradient,
        and drop it: the same weights, one gradient alive at a time (docs/performance.md;
        not with AMP or DDP). Returns the hook handles (``remove()`` goes back to ``step``)."""
        handles = []
        for group in self.param_groups:
            for p in group['params']:
                def hook(param, group=group):
                    self.update(param, group)
                    param.grad = None
                handles.append(p.register_post_accumulate_grad_hook(hook))
        return handles


def to_channels_last(net):
    """``--channels-last``: every convolution weight of ``net`` in ``torch.channels_last``
    (NHWC) memory format, in place (the 5-d anchors and offsets stay as they are); returns
    ``net``. The inputs follow in :class:`YOLOv3Step`."""
    for mod in net.modules():
        if isinstance(mod, torch.nn.Conv2d):
            mod.to(memory_format=torch.channels_last)
    return net


def _bn_pre(module, inputs):
    if module.training:
        module._gluon_var = module.running_var.clone()


def _bn_post(module, inputs, output):
    old = getattr(module, '_gluon_var', None)
    if old is None:
        return
    module._gluon_var = None
    x = inputs[0]
    n = x.numel() // x.shape[1]
    m = module.momentum
    with torch.no_grad():
        # torch stored (1 - m) * old + m * unbiased; Gluon keeps the biased variance
        unbiased = (module.running_var - (1 - m) * old) / m
        # through .data: autograd saved the buffer (unused by the training backward, which
        # reads the batch statistics) and would refuse a tracked in-place change
        module.running_var.data.copy_((1 - m) * old + m * unbiased * ((n - 1) / n))


def gluon_batchnorm(net):
    """Make every ``BatchNorm2d`` of ``net`` keep Gluon's running variance (the biased batch
    variance) while training. Returns the hook handles."""
    handles = []
    for mod in net.modules():
        if isinstance(mod, torch.nn.modules.batchnorm._BatchNorm):
            handles.append(mod.register_forward_pre_hook(_bn_pre))
            handles.append(mod.register_forward_hook(_bn_post))
    return handles


def _log_loss_scale(before, after):
    # MXNet's LossScaler logs each change on the root logger, which GluonCV's script writes
    # to its _train.log: a run's skipped updates are visible there, and so here
    if after != before:
        logging.getLogger('gluontrain').info('AMP: %s loss scale to %f', 'decreasing'
                                             if after < before else 'increasing', after)


def loss_sums(losses):
    """The sums over the batch of the four per-image losses as one float64 tensor ``(4,)`` on
    their device, averaged over the torchrun ranks there (one all-reduce, no wait for the
    host): each is ``float(loss.sum())`` of the float32 loss, as the log adds them."""
    sums = torch.stack([loss.detach().sum() for loss in losses]).double()
    if is_distributed():
        # nccl reduces CUDA tensors only (gloo: the CPU's), as all_reduce_mean packs them
        device = torch.device('cuda', torch.cuda.current_device()) \
            if dist.get_backend() == 'nccl' else torch.device('cpu')
        packed = sums.to(device)
        dist.all_reduce(packed, op=dist.ReduceOp.SUM)
        sums = (packed / dist.get_world_size()).to(sums.device)
    return sums


class YOLOv3Step:
    """Callable ``step(batch, state) -> outputs`` for :func:`gluontrain.core.loop.run_loop`.

    Parameters
    ----------
    net : torch.nn.Module
        The YOLOv3 in training mode (or its DDP wrapper).
    optimizer : GluonSGD
    device : torch.device
    num_class : int
    label_smooth : bool
    autocast : callable, optional
        ``--amp``: a context manager factory around the forward.
    scaler : torch.amp.GradScaler, optional
        MXNet AMP's ``LossScaler`` in PyTorch's terms; each scale change is logged by
        :meth:`flush`.
    update_in_backward : bool
        :meth:`GluonSGD.update_in_backward` (refused with ``scaler`` or DDP); see :meth:`close`.
    channels_last : bool
        ``--channels-last``: the images in ``torch.channels_last`` (the network's too: the
        recipe converts it).

    Returns (from ``__call__``)
    ---------------------------
    dict
        ``losses``: name -> ``[(sum over the batch, batch size)]``, the sum a 0-d float64
        tensor on the device (:func:`loss_sums`; read at the log interval); ``lr``;
        ``batch_size``.
    """

    def __init__(self, net, optimizer, device, num_class, label_smooth=False, autocast=None,
                 scaler=None, update_in_backward=False, channels_last=False):
        self.net, self.optimizer, self.device = net, optimizer, device
        self.num_class, self.label_smooth = num_class, label_smooth
        self.autocast, self.scaler = autocast, scaler
        self.update_in_backward = update_in_backward
        self.channels_last = channels_last
        # the loss scale after each step since the last flush (on the device), and the last
        # one logged (the scaler's initial scale: no read of the device)
        self._scales = []
        self._logged_scale = scaler.get_scale() if scaler is not None else None
        self._hooks = []
        if update_in_backward:
            if scaler is not None or unwrap_model(net) is not net:
                raise ValueError('YOLOv3Step: update_in_backward needs every gradient before '
                                 'the update under AMP and DDP; pass update_in_backward=False')
            self._hooks = optimizer.update_in_backward()

    def close(self):
        """Take the update-during-backward hooks off the parameters (a notebook's second
        ``train()`` on the same network must not apply this optimizer's update too)."""
        for handle in self._hooks:
            handle.remove()
        self._hooks = []

    def flush(self):
        """Log the loss-scale changes of the steps since the last flush, in order, as MXNet
        logs each (one read of the device; the recipe's hook calls it where the log reads the
        losses, so the lines stand where they stood)."""
        if not self._scales:
            return
        scales, self._scales = torch.stack(self._scales).tolist(), []
        for scale in scales:
            _log_loss_scale(self._logged_scale, scale)
            self._logged_scale = scale

    def losses(self, batch):
        """The four per-image losses ``(B,)`` of a batch
        ``(image, obj, center, scale, weight, class targets, gt boxes)``."""
        # in the network's float type (float64 runs measure float32's rounding)
        dtype = next(unwrap_model(self.net).parameters()).dtype
        data, *targets, gt_boxes = [t.to(self.device, dtype, non_blocking=True) for t in batch]
        if self.channels_last:
            data = data.contiguous(memory_format=torch.channels_last)
        if self.autocast is not None:
            with self.autocast():
                out = self.net(data)
        else:
            out = self.net(data)
        # under autocast the losses are computed in the targets' precision
        dtype = targets[0].dtype
        merged = merge_targets(out.box_preds.to(dtype), gt_boxes, *targets,
                               num_class=self.num_class, label_smooth=self.label_smooth)
        return yolov3_loss(out.objness.to(dtype), out.raw_centers.to(dtype),
                           out.raw_scales.to(dtype), out.class_pred.to(dtype), *merged)

    def __call__(self, batch, state=None):
        losses = self.losses(batch)
        self.optimizer.zero_grad(set_to_none=True)
        total = (losses[0] + losses[1] + losses[2] + losses[3]).sum()
        if self.scaler is not None:
            self.scaler.scale(total).backward()
            self.scaler.unscale_(self.optimizer)
            # GluonSGD skips the update on the device when a gradient overflowed
            self.scaler.step(self.optimizer)
            self.scaler.update()
            # a copy of the scale tensor (get_scale() would read it; update() moves it in place)
            scale = self.scaler._get_scale_async()  # pylint: disable=protected-access
            self._scales.append(scale.clone())
        else:
            total.backward()
            if not self.update_in_backward:
                self.optimizer.step()
        size = int(batch[0].shape[0])
        sums = loss_sums(losses)
        out = OrderedDict((name, [(sums[i], size)]) for i, name in enumerate(LOSS_NAMES))
        return {'losses': out, 'lr': self.optimizer.param_groups[0]['lr'], 'batch_size': size}
