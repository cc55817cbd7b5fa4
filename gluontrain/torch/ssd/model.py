"""SSD300 (VGG16 base) as amdegroot/ssd.pytorch builds it, on plain modern PyTorch.

The module tree mirrors the reference's ``ssd.py`` child for child (``vgg``, ``L2Norm``,
``extras``, ``loc``, ``conf``), so ``state_dict()`` has its 71 keys (docs/faithfulness.md,
"SSD300"). The priors are a non-persistent buffer; bad ``phase``/``size`` raise instead of
printing and returning ``None``. ``width_mult`` (gluontrain's) scales every *input* channel
count, never the box counts, the input size or the priors."""
import contextlib
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..weights import load_state_dict_reported, read_weights_file

__all__ = ['L2Norm', 'SSD', 'build_ssd', 'vgg_layers', 'extra_layers', 'multibox',
           'init_weights', 'load_base_weights', 'load_ssd_weights', 'conv4_3_end', 'test_phase',
           'BASE_CFG', 'EXTRAS_CFG', 'MBOX_CFG', 'RESUME_FIX', 'BASENET_FIX']

# The reference's layer lists for SSD300 ('M': max-pool, 'C': ceil-mode max-pool,
# 'S': the next conv has stride 2 and padding 1).
BASE_CFG = [64, 64, 'M', 128, 128, 'M', 256, 256, 256, 'C', 512, 512, 512, 'M',
            512, 512, 512]
EXTRAS_CFG = [256, 'S', 512, 128, 'S', 256, 128, 256, 128, 256]
MBOX_CFG = [4, 6, 6, 6, 4, 4]
# conv4_3 is the 10th conv of BASE_CFG; its ReLU ends the L2Norm source (vgg[:23] as in
# the reference, vgg[:33] with batch_norm).
_CONV4_3_INDEX = 9


def _scaled(channels, width_mult):
    """Channel count ``channels`` scaled by ``width_mult`` (at least 1)."""
    return max(1, int(round(channels * width_mult)))


class L2Norm(nn.Module):
    """Channel-wise L2 normalisation with a learnt per-channel scale (ParseNet), ``weight``
    of ``n_channels`` initialised to ``scale`` (20 in SSD)."""

    def __init__(self, n_channels, scale):
        super().__init__()
        self.n_channels = n_channels
        self.gamma = scale or None
        self.eps = 1e-10
        self.weight = nn.Parameter(torch.empty(n_channels))
        self.reset_parameters()

    def reset_parameters(self):
        """Set every scale to ``gamma`` (the reference's constant init)."""
        nn.init.constant_(self.weight, self.gamma)

    def forward(self, x):
        """Normalise ``x`` over C (eps added to the norm) and scale each channel."""
        norm = x.pow(2).sum(dim=1, keepdim=True).sqrt() + self.eps
        return self.weight.view(1, -1, 1, 1) * torch.div(x, norm)


def conv4_3_end(base):
    """``(count, conv)``: the number of leading ``base`` layers that produce conv4_3's output
    (its ReLU included) and the conv itself. Counted, not the reference's hard-coded 23, so
    that ``batch_norm`` layers keep it right."""
    conv = [i for i, m in enumerate(base) if isinstance(m, nn.Conv2d)][_CONV4_3_INDEX]
    relu = next(i for i in range(conv + 1, len(base)) if isinstance(base[i], nn.ReLU))
    return relu + 1, base[conv]


def vgg_layers(cfg=BASE_CFG, in_channels=3, width_mult=1.0, batch_norm=False):
    """The reference's ``vgg(cfg, 3)``: VGG16 up to conv5_3, pool5, conv6 (dilated 3x3, 1024
    channels), ReLU, conv7 (1x1), ReLU; 35 layers in the reference's order (48 with
    ``batch_norm``), their indices the ``vgg.<i>`` keys.

    ``width_mult`` (gluontrain's) multiplies every channel count. ``batch_norm``: the
    reference's ``vgg(..., batch_norm=True)``, a BatchNorm2d after each of the 13 VGG16 convs,
    which ssd.pytorch never builds; gluontrain's for training from scratch.
    """
    layers = []
    for v in cfg:
        if v == 'M':
            layers.append(nn.MaxPool2d(kernel_size=2, stride=2))
        elif v == 'C':
            # 75 -> 38 (not 37) at 300 px: the 38x38 conv4_3 map of SSD300
            layers.append(nn.MaxPool2d(kernel_size=2, stride=2, ceil_mode=True))
        else:
            out = _scaled(v, width_mult)
            layers.append(nn.Conv2d(in_channels, out, kernel_size=3, padding=1))
            if batch_norm:
                layers.append(nn.BatchNorm2d(out))
            layers.append(nn.ReLU(inplace=True))
            in_channels = out
    fc = _scaled(1024, width_mult)
    layers += [nn.MaxPool2d(kernel_size=3, stride=1, padding=1),
               nn.Conv2d(in_channels, fc, kernel_size=3, padding=6, dilation=6),
               nn.ReLU(inplace=True),
               nn.Conv2d(fc, fc, kernel_size=1),
               nn.ReLU(inplace=True)]
    return layers


def extra_layers(cfg=EXTRAS_CFG, in_channels=1024, width_mult=1.0):
    """The reference's ``add_extras(cfg, 1024)``: 8 convs alternating 1x1 / 3x3, ``'S'`` makes
    the next one stride 2 with padding 1; no ReLUs (``SSD.forward`` applies them).
    ``in_channels``: conv7's, already scaled."""
    layers, stride2 = [], False
    for v in cfg:
        if v == 'S':
            stride2 = True
            continue
        out = _scaled(v, width_mult)
        # the reference's flag: kernels alternate 1x1, 3x3 over the convs made
        layers.append(nn.Conv2d(in_channels, out, kernel_size=(1, 3)[len(layers) % 2],
                                stride=(1, 2)[stride2], padding=(0, 1)[stride2]))
        in_channels, stride2 = out, False
    return layers


def multibox(vgg, extras, cfg=MBOX_CFG, num_classes=21):
    """``(loc, conf)`` lists of 3x3 heads (``boxes * 4`` and ``boxes * num_classes`` outputs)
    on conv4_3, conv7 and every second extra layer; ``cfg``: boxes per location per source."""
    sources = [conv4_3_end(vgg)[1].out_channels, vgg[-2].out_channels]
    sources += [layer.out_channels for layer in extras[1::2]]
    loc = [nn.Conv2d(c, boxes * 4, kernel_size=3, padding=1) for c, boxes in zip(sources, cfg)]
    conf = [nn.Conv2d(c, boxes * num_classes, kernel_size=3, padding=1)
            for c, boxes in zip(sources, cfg)]
    return loc, conf


def _add_test_layers(model):
    """Give ``model`` the reference's test-phase layers (no parameters): ``softmax`` and
    ``Detect`` with conf 0.01, NMS 0.45, top 200."""
    from .detection import Detect  # pylint: disable=import-outside-toplevel
    model.softmax = nn.Softmax(dim=-1)
    # the reference's Detect read the variance from the VOC config: same (0.1, 0.2)
    model.detect = Detect(model.num_classes, 0, 200, 0.01, 0.45,
                          variance=model.cfg.get('variance', (0.1, 0.2)))


class SSD(nn.Module):
    """Single Shot MultiBox Detector with a VGG16 base (use :func:`build_ssd`).

    ``phase`` ``'train'`` returns raw head outputs, ``'test'`` runs softmax and ``Detect``;
    ``cfg``: prior configuration, default the reference's (``config.voc`` when
    ``num_classes == 21``, else ``config.coco``).
    """

    def __init__(self, phase, size, base, extras, head, num_classes, cfg=None):
        super().__init__()
        from .config import coco, voc
        from .prior_box import PriorBox
        self.phase = phase
        self.num_classes = num_classes
        self.cfg = cfg if cfg is not None else (coco, voc)[num_classes == 21]
        self.priorbox = PriorBox(self.cfg)
        # A buffer follows .to(device); non-persistent keeps the reference's 71 keys.
        self.register_buffer('priors', self.priorbox.forward().detach().clone(),
                             persistent=False)
        self.size = size

        self.vgg = nn.ModuleList(base)
        self.conv4_3_end, conv4_3 = conv4_3_end(base)
        self.L2Norm = L2Norm(conv4_3.out_channels, 20)
        self.extras = nn.ModuleList(extras)
        self.loc = nn.ModuleList(head[0])
        self.conf = nn.ModuleList(head[1])

        if phase == 'test':
            _add_test_layers(self)

    def forward(self, x):
        """Run the network on ``x`` ``[B, 3, 300, 300]`` (BGR, mean subtracted).

        Returns ``'train'``: ``(loc [B, P, 4], conf [B, P, num_classes], priors [P, 4])``,
        P = 8732; ``'test'``: ``Detect``'s ``[B, num_classes, 200, 5]`` (score, x1, y1, x2, y2).
        """
        sources, loc, conf = [], [], []
        for k in range(self.conv4_3_end):
            x = self.vgg[k](x)
        sources.append(self.L2Norm(x))
        for k in range(self.conv4_3_end, len(self.vgg)):
            x = self.vgg[k](x)
        sources.append(x)
        for k, v in enumerate(self.extras):
            x = F.relu(v(x), inplace=True)
            if k % 2 == 1:
                sources.append(x)
        for s, l, c in zip(sources, self.loc, self.conf):
            # NHWC before flattening: the reference's (and its checkpoints') prior order
            loc.append(l(s).permute(0, 2, 3, 1).contiguous())
            conf.append(c(s).permute(0, 2, 3, 1).contiguous())
        # [B, P_s, 4] per source, concatenated: the reference's flatten, cat and view
        loc = torch.cat([o.view(o.size(0), -1, 4) for o in loc], 1)
        conf = torch.cat([o.view(o.size(0), -1, self.num_classes) for o in conf], 1)
        if self.phase == 'test':
            return self.detect(loc, self.softmax(conf), self.priors.to(loc.dtype))
        return loc, conf, self.priors

    def load_weights(self, base_file):
        """Load a full SSD state_dict (``.pth`` / ``.pkl``) strictly; the
        :func:`load_ssd_weights` report."""
        ext = os.path.splitext(base_file)[1]
        # the reference's test `ext == '.pkl' or '.pth'` was always true
        if ext not in ('.pkl', '.pth'):
            raise ValueError('Only .pth and .pkl files are supported, got {}'.format(base_file))
        return load_ssd_weights(self, base_file, what='SSD weights')


@contextlib.contextmanager
def test_phase(net):
    """Run ``net`` (an :class:`SSD`, or DDP/DataParallel around one) as ``build_ssd('test')``
    builds it, in eval mode without gradients; yield the unwrapped model, then restore its
    phase and mode. A 'train' net gets ``softmax`` and ``Detect`` here (no parameters)."""
    model = net.module if hasattr(net, 'module') else net
    if not hasattr(model, 'detect'):
        _add_test_layers(model)
    was_training, phase = model.training, model.phase
    model.eval()
    model.phase = 'test'
    try:
        with torch.no_grad():
            yield model
    finally:
        model.phase = phase
        model.train(was_training)


def build_ssd(phase, size=300, num_classes=21, width_mult=1.0, cfg=None, batch_norm=False):
    """Build the reference's SSD300 (``size`` 300 only; ``num_classes`` with background).

    Parameters
    ----------
    width_mult : float
        gluontrain's (1 = the reference): multiplies every VGG, extra and head input channel
        count; the state_dict keys stay the same.
    cfg : dict, optional
        Prior configuration (default: the reference's choice, see :class:`SSD`).
    batch_norm : bool
        gluontrain's (False = the reference): see :func:`vgg_layers`; ``vgg.<i>`` keys differ.
    """
    if phase not in ('train', 'test'):
        raise ValueError("phase must be 'train' or 'test', got {!r}".format(phase))
    if size != 300:
        raise ValueError('Only SSD300 (size=300) is supported, got size={!r}'.format(size))
    if not width_mult > 0:
        raise ValueError('width_mult must be > 0, got {!r}'.format(width_mult))
    base = vgg_layers(BASE_CFG, 3, width_mult, batch_norm)
    extras = extra_layers(EXTRAS_CFG, base[-2].out_channels, width_mult)
    head = multibox(base, extras, MBOX_CFG, num_classes)
    return SSD(phase, size, base, extras, head, num_classes, cfg=cfg)


def _xavier_zero(m):
    if isinstance(m, nn.Conv2d):
        nn.init.xavier_uniform_(m.weight)
        nn.init.zeros_(m.bias)


def init_weights(net):
    """train.py's ``weights_init``: Xavier-uniform weights and zero biases of every conv in
    ``extras``, ``loc`` and ``conf``, in place (the base comes from :func:`load_base_weights`);
    returns ``net``."""
    with torch.no_grad():
        for layers in (net.extras, net.loc, net.conf):
            layers.apply(_xavier_zero)
    return net


#: The end of errors about a ``--resume`` weights file.
RESUME_FIX = ('pass a state_dict of this SSD (ssd.pytorch\'s torch.save(ssd_net.state_dict()), '
              'e.g. ssd300_mAP_77.43_v2.pth) built with the same --dataset (number of '
              'classes), --width_mult and --batch_norm, or a *_last.ckpt of this recipe')
#: The end of errors about a ``--basenet`` file.
BASENET_FIX = ("pass ssd.pytorch's vgg16_reducedfc.pth (keys 0.weight ... 33.bias; found in "
               '--save_folder; from https://s3.amazonaws.com/amdegroot-models/'
               "vgg16_reducedfc.pth) with --width_mult 1, or --basenet '' to start from "
               'scratch')


def load_ssd_weights(net, path, what='--resume', logger=None):
    """Load a whole-SSD ``state_dict`` file strictly (ssd.pytorch's
    ``ssd_net.load_weights(args.resume)``) and return the :class:`LoadReport`.

    ``net``'s DDP / DataParallel wrapper and a ``module.`` prefix in the file are stripped;
    ``what`` starts error messages; ``logger`` receives the report (default
    ``gluontrain.torch.weights``).

    Raises
    ------
    FileNotFoundError
        ``path`` does not exist.
    WeightsLoadError
        Unreadable, hostile or foreign file, or one that does not fill the net exactly (the
        message names what it looks like or the tensors); nothing is loaded then.
    """
    state = read_weights_file(path, what, RESUME_FIX)
    return load_state_dict_reported(net, state, path, what, RESUME_FIX, ignore=(),
                                    allow_unexpected=False, logger=logger)


def load_base_weights(net, path, logger=None):
    """Load ssd.pytorch's ``vgg16_reducedfc.pth`` (``width_mult`` 1) into ``net.vgg``
    strictly, as train.py; the report is appended to ``net.load_reports``; returns ``net``.

    Raises ``FileNotFoundError`` (naming where to get it) or ``WeightsLoadError`` (a file
    that does not fill ``net.vgg`` exactly; nothing is loaded), as :func:`load_ssd_weights`.
    """
    state = read_weights_file(path, '--basenet', BASENET_FIX)
    report = load_state_dict_reported(net.vgg, state, path, '--basenet', BASENET_FIX,
                                      ignore=(), allow_unexpected=False, logger=logger)
    net.load_reports = list(getattr(net, 'load_reports', [])) + [report]
    return net
