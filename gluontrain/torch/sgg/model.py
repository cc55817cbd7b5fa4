"""The scene-graph recipe's model: Scene-Graph-Benchmark's ``GeneralizedRCNN`` with
``MODEL.RELATION_ON`` (backbone, RPN, box head in relation mode, relation head, assembled from
the parts in :mod:`.modeling`), ``fix_eval_modules`` of ``tools/relation_train_net.py``, and
:func:`build_model` (the relation model or the sgg-detector of a config).

Modes (SGB README): PredCls = ``USE_GT_BOX`` and ``USE_GT_OBJECT_LABEL``; SGCls =
``USE_GT_BOX`` only; SGDet = neither. In relation mode SGB drops the RPN and box losses; the
training loss dict is the relation head's (``loss_rel``, ``loss_refine_obj`` + the
predictor's ``add_losses``).

Differences from SGB (docs/faithfulness.md): with ``USE_GT_BOX`` the RPN is not run (SGB runs
it and discards its proposals and losses; its outputs never reach the relation head); an SGDet
image without any detection gets an empty prediction (SGB's pooler asserts and the run dies).
"""
from collections import OrderedDict

import torch
from torch.nn.modules.batchnorm import _BatchNorm

from ..twostage.structures import BoxList
from ..twostage.images import to_image_list
from ..twostage.maskrcnn import SGGDetector
from .config_values import MODES, relation_mode
from .modeling.detector import build_detector, detector_parts
from .modeling.relation_head import build_roi_relation_head

__all__ = ['RelationModel', 'build_relation_model', 'build_model', 'fix_eval_modules',
           'eval_modules', 'frozen_norm_eval', 'relation_mode', 'MODES']

class RelationModel(SGGDetector):
    """``backbone``, ``rpn``, ``roi_heads`` = {``box``, ``relation``} (SGB's names); the box head
    is :class:`~.modeling.relation_box_head.RelationBoxHead`.

    Parameters
    ----------
    cfg : yacs.config.CfgNode
        ``MODEL.RELATION_ON`` must be True.
    relation_head : nn.Module
        :class:`~.modeling.relation_head.ROIRelationHead`.
    generator : torch.Generator, optional
        RPN / box-head draws (SGDet).
    """

    def __init__(self, cfg, relation_head, generator=None):
        if not cfg.MODEL.RELATION_ON:
            raise ValueError('RelationModel needs MODEL.RELATION_ON True')
        super().__init__(*detector_parts(cfg, generator))
        self.cfg = cfg.clone()
        self.mode = relation_mode(cfg)
        self.roi_heads['relation'] = relation_head

    def forward(self, images, targets=None, logger=None):
        """Training: the loss dict (``loss_rel``, ``loss_refine_obj``, add_losses).
        Evaluation: list of BoxList per image with ``pred_labels``, ``pred_scores``,
        ``rel_pair_idxs``, ``pred_rel_scores``, ``pred_rel_labels``.

        Parameters
        ----------
        images : ImageList-like, tensor or list of tensors
        targets : list of BoxList
            Ground truth (``labels``, ``relation`` in training); needed in evaluation too
            for PredCls / SGCls (the boxes) and SGDet without ``TEST.CUSTUM_EVAL`` (labels).
        logger : logging.Logger, optional
            Passed to the predictor.
        """
        self._check_targets(targets)
        images = to_image_list(images, self.cfg.DATALOADER.SIZE_DIVISIBILITY)
        features = self.backbone(images.tensors)
        proposals = None if self.cfg.MODEL.ROI_RELATION_HEAD.USE_GT_BOX else \
            self.rpn(images.image_sizes, features, targets)[0]
        _, detections, _ = self.roi_heads['box'](features, proposals, targets)
        keep = [i for i, d in enumerate(detections) if len(d) > 0]
        if len(keep) == len(detections):
            _, result, losses = self.roi_heads['relation'](features, detections, targets, logger)
            return OrderedDict(losses) if self.training else result
        return self._without_empty(features, detections, targets, logger, keep)

    def _without_empty(self, features, detections, targets, logger, keep):
        """SGDet images left without detections (SGB's pooler asserts on them): the relation
        head runs on the others; such an image gets an empty prediction, and no loss."""
        head = self.roi_heads['relation']
        if keep:
            idx = torch.tensor(keep, device=features[0].device)
            _, result, losses = head([f.index_select(0, idx) for f in features],
                                     [detections[i] for i in keep],
                                     None if targets is None else [targets[i] for i in keep],
                                     logger)
        else:
            result, losses = [], {}
        if self.training:
            if not losses:
                zero = sum(p.sum() for p in head.parameters() if p.requires_grad) * 0.
                losses = {'loss_rel': zero, 'loss_refine_obj': zero}
            return OrderedDict(losses)
        kept = dict(zip(keep, result))
        return [kept[i] if i in kept else _empty_prediction(
            d, self.cfg.MODEL.ROI_RELATION_HEAD.NUM_CLASSES) for i, d in enumerate(detections)]


def _empty_prediction(det, num_rel_classes):
    """A prediction BoxList without objects, with SGB's fields."""
    out = BoxList(det.bbox.new_zeros(0, 4), det.size, 'xyxy')
    for name, shape, dtype in (('pred_labels', (0,), torch.long), ('pred_scores', (0,), None),
                               ('rel_pair_idxs', (0, 2), torch.long),
                               ('pred_rel_scores', (0, num_rel_classes), None),
                               ('pred_rel_labels', (0,), torch.long)):
        out.add_field(name, torch.zeros(shape, dtype=dtype, device=det.bbox.device))
    return out


def eval_modules(model):
    """SGB's ``eval_modules``: ``(model.rpn, model.backbone, model.roi_heads.box)``."""
    return (model.rpn, model.backbone, model.roi_heads['box'])


def fix_eval_modules(modules, norm_eval=True):
    """SGB's ``fix_eval_modules``: ``requires_grad=False`` on every parameter of the modules,
    plus their batch-norm layers in eval mode.

    SGB does not call ``.eval()``: its ResNet's ``FrozenBatchNorm2d`` never updates anyway.
    With ``MODEL.BACKBONE.NORM 'bn'`` (ours, for bodies trained from scratch) the frozen
    detector's batch norms would otherwise keep normalising with batch statistics and
    updating their running statistics during relation training; in eval mode they act as
    SGB's frozen ones. Call again after each ``model.train()``, as SGB's loop does.

    Parameters
    ----------
    modules : iterable of nn.Module
    norm_eval : bool, default True
        False leaves the batch norms' mode alone (SGB's code as written; only differs for a
        ``'bn'`` body).
    """
    for module in modules:
        module.requires_grad_(False)
        for sub in module.modules() if norm_eval else ():
            if isinstance(sub, _BatchNorm):
                sub.eval()


def frozen_norm_eval(cfg):
    """Whether :func:`fix_eval_modules` should put the frozen detector's batch norms in eval
    mode: only when ``MODEL.PRETRAINED_DETECTOR_CKPT`` names a trained detector.

    A detector that was never trained (relation training from a randomly initialised body)
    has batch norms with their initial running statistics (mean 0, variance 1): in eval mode
    they normalise nothing, the raw BGR-255 scale runs through the whole body, the first
    relation logits are in the hundreds and the clipped first steps kill the union
    features' ReLUs (the model ends predicting the frequency prior). Left in training mode
    (SGB's code as written) they normalise with the batch statistics and their running
    statistics follow them, for evaluation.

    Parameters
    ----------
    cfg : yacs.config.CfgNode

    Returns
    -------
    bool
    """
    return bool(cfg.MODEL.PRETRAINED_DETECTOR_CKPT)


def build_relation_model(cfg, statistics=None, predictor=None, generator=None, rng=None):
    """SGB's ``build_detection_model`` with ``MODEL.RELATION_ON``.

    Parameters
    ----------
    cfg : yacs.config.CfgNode
    statistics : dict, optional
        ``get_statistics(cfg)`` output, for the predictor.
    predictor : nn.Module, optional
        Overrides ``MODEL.ROI_RELATION_HEAD.PREDICTOR``.
    generator : torch.Generator, optional
        Torch draws of the RPN / box / relation sampling.
    rng : numpy.random.RandomState, optional
        NumPy draws of ``detect_relsample``.

    Returns
    -------
    RelationModel
    """
    relation_mode(cfg)
    out_channels = cfg.MODEL.RESNETS.BACKBONE_OUT_CHANNELS
    head = build_roi_relation_head(cfg, out_channels, statistics, predictor, generator, rng)
    return RelationModel(cfg, head, generator)


def build_model(cfg, statistics=None):
    """The relation model (``MODEL.RELATION_ON``) or the sgg-detector, on
    ``MODEL.DEVICE``."""
    model = build_relation_model(cfg, statistics) if cfg.MODEL.RELATION_ON else build_detector(cfg)
    return model.to(torch.device(cfg.MODEL.DEVICE))
