"""The maskrcnn-benchmark flavour of the two-stage detector, SGB's 'sgg-detector':
maskrcnn-benchmark's ``GeneralizedRCNN`` (backbone + FPN, RPN, FPN box head) as
Scene-Graph-Benchmark pretrains it on Visual Genome (``tools/detector_pretrain_net.py`` with
``MODEL.RELATION_ON False``), in plain torch, from plain arguments (SGB's config is read in
:mod:`gluontrain.torch.sgg.modeling.detector`).

Module names follow SGB's state_dict (``backbone.body``, ``backbone.fpn``, ``rpn.head``,
``roi_heads.box.feature_extractor`` / ``.predictor``) so that ``load_mapping`` finds the box
feature extractor of a detector checkpoint under SGB's key names.

The ResNet / ResNeXt body is the shared :mod:`gluontrain.torch.backbone` one under
maskrcnn-benchmark's names (``backbone.body.stem``, ``backbone.body.layer1.0.conv1`` ...,
``FrozenBatchNorm2d`` buffers), so SGB's detector checkpoints load key for key; the FPN is
:class:`~.fpn.FPN` under maskrcnn-benchmark's names with its behaviour (:func:`fpn_backbone`:
1x1 inner + 3x3 layer convs with bias and no norm, nearest top-down,
``top_block='max_pool'``: P6 = stride-2 max-pool of P5).
"""
from collections import OrderedDict

import torch.nn as nn

from .box_head import add_predict_logits
from .fpn import FPN, FPNBody
from .images import to_image_list

__all__ = ['FPN_INPUTS', 'fpn_backbone', 'SGGDetector']

#: The body outputs maskrcnn-benchmark's FPN reads.
FPN_INPUTS = ('layer1', 'layer2', 'layer3', 'layer4')


def fpn_backbone(body, out_channels, fpn_inputs=FPN_INPUTS):
    """maskrcnn-benchmark's ``backbone`` module: ``body`` + its FPN (``out_channels`` wide,
    P2..P6).

    Parameters
    ----------
    body : gluontrain.torch.backbone.ResNet
        Under maskrcnn-benchmark's names.
    out_channels : int
    fpn_inputs : sequence of str

    Returns
    -------
    FPNBody
        ``body`` + ``fpn``.
    """
    fpn = FPN([body.out_channels[k] for k in fpn_inputs], out_channels, norm_act=None,
              naming='maskrcnn', top_block='max_pool', init='kaiming_uniform')
    return FPNBody(body, fpn, fpn_inputs, naming='maskrcnn', out_channels=out_channels)


class SGGDetector(nn.Module):
    """SGB's ``GeneralizedRCNN`` without the relation head: ``backbone``, ``rpn``,
    ``roi_heads`` = {``box``} (SGB's names). Built from SGB's config by
    :func:`gluontrain.torch.sgg.modeling.detector.build_detector`.

    Parameters
    ----------
    backbone : FPNBody
        :func:`fpn_backbone`.
    rpn : RPNModule
    box_head : ROIBoxHead
    size_divisibility : int
        The padded batch's sides are multiples of it (``DATALOADER.SIZE_DIVISIBILITY``).
    """

    def __init__(self, backbone, rpn, box_head, size_divisibility=0):
        super().__init__()
        self.size_divisibility = size_divisibility
        self.backbone = backbone
        self.rpn = rpn
        self.roi_heads = nn.ModuleDict(OrderedDict(box=box_head))

    def _check_targets(self, targets):
        if self.training and targets is None:
            raise ValueError('In training mode, targets should be passed')

    def forward(self, images, targets=None):
        """Training: loss dict (``loss_objectness``, ``loss_rpn_box_reg``,
        ``loss_classifier``, ``loss_box_reg``). Evaluation: list of BoxList detections
        (``pred_labels``, ``pred_scores``, ``labels`` = ``pred_labels``, ``predict_logits``
        and the fc7 ``box_features`` of each detection).

        Parameters
        ----------
        images : ImageList-like, tensor or list of tensors
        targets : list of BoxList, optional
        """
        self._check_targets(targets)
        images = to_image_list(images, self.size_divisibility)
        features = self.backbone(images.tensors)
        proposals, rpn_losses = self.rpn(images.image_sizes, features, targets)
        box = self.roi_heads['box']
        if self.training:
            _, _, box_losses = box(features, proposals, targets)
            losses = dict(box_losses)
            losses.update(rpn_losses)
            return losses
        x = box.feature_extractor(features, proposals)
        class_logits, box_regression = box.predictor(x)
        add_predict_logits(proposals, class_logits)
        x, result = box.post_processor((x, class_logits, box_regression), proposals,
                                       relation_mode=False)
        start = 0
        for r in result:
            r.add_field('labels', r.get_field('pred_labels'))
            r.add_field('box_features', x[start:start + len(r)])
            start += len(r)
        return result
