"""seamseg's FPN (seamseg/modules/fpn.py), RPN head (seamseg/modules/heads/rpn.py) and FPN
ROI head (seamseg/modules/heads/fpn.py), with their initialisations.

Initialisation (seamseg's ``reset_parameters``): Xavier-normal weights with the gain of the
norm's activation (``calculate_gain('leaky_relu', 0.01)``), norm scale 1, every bias 0; the
RPN classifiers use gain 0.01, the ROI ``roi_cls`` 0.01 and ``roi_bbx`` 0.001.
"""
from collections import OrderedDict

import torch
import torch.nn as nn
import torch.nn.functional as F

from .norm import NORM_LAYERS, BatchNormAct

__all__ = ['FPN', 'FPNBody', 'RPNHead', 'FPNROIHead', 'flatten_rpn_outputs']


def _gain(norm):
    return nn.init.calculate_gain(norm.activation, norm.activation_param)


class FPN(nn.Module):
    """Feature pyramid: 1x1 lateral conv + norm-act per input, nearest top-down sums,
    3x3 output conv + norm-act per level, then ``extra_scales`` stride-2 3x3 convs that
    start from the *last input* (not the last output), as seamseg.

    Parameters
    ----------
    in_channels : sequence of int
    out_channels : int
    extra_scales : int
    norm_act : callable
    interpolation : str
        ``F.interpolate`` mode (``bilinear`` uses ``align_corners=False``).
    """

    def __init__(self, in_channels, out_channels=256, extra_scales=0, norm_act=BatchNormAct,
                 interpolation='nearest'):
        super().__init__()
        self.interpolation = interpolation

        def block(cin, cout, k, stride=1):
            return nn.Sequential(OrderedDict([
                ('conv', nn.Conv2d(cin, cout, k, stride=stride, padding=k // 2, bias=False)),
                ('bn', norm_act(cout))]))

        self.lateral = nn.ModuleList([block(c, out_channels, 1) for c in in_channels])
        self.output = nn.ModuleList([block(out_channels, out_channels, 3) for _ in in_channels])
        if extra_scales > 0:
            self.extra = nn.ModuleList([
                block(in_channels[-1] if i == 0 else out_channels, out_channels, 3, 2)
                for i in range(extra_scales)])
        self.reset_parameters()

    def reset_parameters(self):
        """seamseg's FPN initialisation."""
        gain = _gain(self.lateral[0].bn)
        for mod in self.modules():
            if isinstance(mod, nn.Conv2d):
                nn.init.xavier_normal_(mod.weight, gain)
            elif isinstance(mod, NORM_LAYERS) and mod.weight is not None:
                nn.init.constant_(mod.weight, 1.)
            if getattr(mod, 'bias', None) is not None:
                nn.init.constant_(mod.bias, 0.)

    def forward(self, xs):
        """List of inputs (finest first) -> list of outputs (finest first)."""
        kw = {'mode': self.interpolation}
        if self.interpolation == 'bilinear':
            kw['align_corners'] = False
        ys = []
        for x_i, lateral_i in zip(xs[::-1], self.lateral[::-1]):
            x_i = lateral_i(x_i)
            if ys:
                x_i = x_i + F.interpolate(ys[0], size=x_i.shape[-2:], **kw)
            ys.insert(0, x_i)
        ys = [out(y) for y, out in zip(ys, self.output)]
        if hasattr(self, 'extra'):
            y = xs[-1]
            for extra_i in self.extra:
                y = extra_i(y)
                ys.append(y)
        return ys


class FPNBody(nn.Module):
    """Backbone + FPN over the named backbone outputs (state_dict keys ``backbone.*``,
    ``fpn.*`` as seamseg's snapshots).

    Parameters
    ----------
    backbone : nn.Module
        Returns a dict of features.
    fpn : FPN
    fpn_inputs : sequence of str
    """

    def __init__(self, backbone, fpn, fpn_inputs=()):
        super().__init__()
        self.fpn_inputs = list(fpn_inputs)
        self.backbone = backbone
        self.fpn = fpn

    def forward(self, x):
        feats = self.backbone(x)
        return self.fpn([feats[name] for name in self.fpn_inputs])


class RPNHead(nn.Module):
    """3x3 conv + norm-act, then 1x1 ``conv_obj`` (A channels) and ``conv_bbx`` (4A).

    Parameters
    ----------
    in_channels : int
    num_anchors : int
    stride : int
    hidden_channels : int
    norm_act : callable
    """

    def __init__(self, in_channels, num_anchors, stride=1, hidden_channels=255,
                 norm_act=BatchNormAct):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, hidden_channels, 3, padding=1, stride=stride,
                               bias=False)
        self.bn1 = norm_act(hidden_channels)
        self.conv_obj = nn.Conv2d(hidden_channels, num_anchors, 1)
        self.conv_bbx = nn.Conv2d(hidden_channels, num_anchors * 4, 1)
        self.reset_parameters()

    def reset_parameters(self):
        """seamseg's RPN head initialisation."""
        nn.init.xavier_normal_(self.conv1.weight, _gain(self.bn1))
        self.bn1.reset_parameters()
        for m in (self.conv_obj, self.conv_bbx):
            nn.init.xavier_normal_(m.weight, .01)
            nn.init.constant_(m.bias, 0)

    def forward(self, x):
        """``(N, C, H, W)`` -> ``obj_logits (N, A, H, W)``, ``bbx_logits (N, 4A, H, W)``."""
        x = self.bn1(self.conv1(x))
        return self.conv_obj(x), self.conv_bbx(x)


class FPNROIHead(nn.Module):
    """ROI features ``(S, C, h, w)`` -> 2x2 average pool -> ``fc1`` + norm-act -> ``fc2`` +
    norm-act -> ``roi_cls`` (thing + 1) and ``roi_bbx`` (thing x 4).

    Parameters
    ----------
    in_channels : int
    classes : dict
        ``{'total', 'stuff', 'thing'}`` counts.
    roi_size : (int, int)
    hidden_channels : int
    norm_act : callable
    """

    def __init__(self, in_channels, classes, roi_size, hidden_channels=1024,
                 norm_act=BatchNormAct):
        super().__init__()
        self.fc = nn.Sequential(OrderedDict([
            ('fc1', nn.Linear(int(roi_size[0] * roi_size[1] * in_channels / 4),
                              hidden_channels, bias=False)),
            ('bn1', norm_act(hidden_channels)),
            ('fc2', nn.Linear(hidden_channels, hidden_channels, bias=False)),
            ('bn2', norm_act(hidden_channels))]))
        self.roi_cls = nn.Linear(hidden_channels, classes['thing'] + 1)
        self.roi_bbx = nn.Linear(hidden_channels, classes['thing'] * 4)
        self.reset_parameters()

    def reset_parameters(self):
        """seamseg's ROI head initialisation."""
        gain = _gain(self.fc.bn1)
        for name, mod in self.named_modules():
            if isinstance(mod, nn.Linear):
                g = .01 if 'roi_cls' in name else (.001 if 'roi_bbx' in name else gain)
                nn.init.xavier_normal_(mod.weight, g)
            elif isinstance(mod, NORM_LAYERS) and mod.weight is not None:
                nn.init.constant_(mod.weight, 1.)
            if getattr(mod, 'bias', None) is not None:
                nn.init.constant_(mod.bias, 0.)

    def forward(self, x):
        """-> ``cls_logits (S, thing + 1)``, ``bbx_logits (S, thing, 4)``."""
        x = F.avg_pool2d(x, 2)
        x = self.fc(x.reshape(x.size(0), -1))
        return self.roi_cls(x), self.roi_bbx(x).view(x.size(0), -1, 4)


def flatten_rpn_outputs(head, features):
    """Run the shared RPN head on every level and flatten as seamseg's ``_get_logits``:
    ``permute(0, 2, 3, 1)`` so that anchors run row-major over (y, x), then over ratios.

    Parameters
    ----------
    head : RPNHead
    features : list of torch.Tensor

    Returns
    -------
    obj_logits : torch.Tensor
        ``(N, sum_l H_l W_l A)``.
    bbx_logits : torch.Tensor
        ``(N, sum_l H_l W_l A, 4)``.
    sizes : list of (int, int)
        ``(H_l, W_l)`` per level.
    """
    objs, bbxs, sizes = [], [], []
    for x in features:
        obj, bbx = head(x)
        sizes.append(tuple(int(s) for s in obj.shape[-2:]))
        objs.append(obj.permute(0, 2, 3, 1).reshape(obj.size(0), -1))
        bbxs.append(bbx.permute(0, 2, 3, 1).reshape(bbx.size(0), -1, 4))
    return torch.cat(objs, 1), torch.cat(bbxs, 1), sizes
