"""Scene-Graph-Benchmark's ``ROIRelationHead`` (``roi_heads/relation_head/relation_head.py``):
relation sampling (training) or all candidate pairs (evaluation), the object features of its
own box feature extractor, the union features, the predictor, the losses or the
post-processed predictions.
"""
import torch
import torch.nn as nn

from .detector import box_feature_extractor
from .inference import make_roi_relation_post_processor
from .loss import make_roi_relation_loss_evaluator
from .relation_features import RelationFeatureExtractor
from .sampling import make_roi_relation_samp_processor

__all__ = ['ROIRelationHead', 'build_roi_relation_head']


class ROIRelationHead(nn.Module):
    """SGB's relation head (attributes off).

    Sub-modules (SGB's names, for ``load_mapping``): ``union_feature_extractor``
    (:class:`RelationFeatureExtractor`, its own ``feature_extractor`` inside),
    ``box_feature_extractor`` (``FPN2MLPFeatureExtractor``), ``predictor``.

    Parameters
    ----------
    cfg : yacs.config.CfgNode
    in_channels : int
    predictor : nn.Module
        Built by ``predictors.build_predictor(cfg, feat_dim, statistics)`` (see
        :func:`build_roi_relation_head`); SGB's interface ``forward(proposals, rel_pair_idxs,
        rel_labels, rel_binarys, roi_features, union_features, logger) -> (refine_logits,
        relation_logits, add_losses)`` with per-image lists of logits.
    generator : torch.Generator, optional
    rng : numpy.random.RandomState, optional
        Sampling draws (the global generators when None, as SGB).
    """

    def __init__(self, cfg, in_channels, predictor, generator=None, rng=None):
        super().__init__()
        self.cfg = cfg.clone()
        self.union_feature_extractor = RelationFeatureExtractor(cfg, in_channels)
        self.box_feature_extractor = box_feature_extractor(cfg, in_channels)
        self.predictor = predictor
        self.post_processor = make_roi_relation_post_processor(cfg)
        self.loss_evaluator = make_roi_relation_loss_evaluator(cfg)
        self.samp_processor = make_roi_relation_samp_processor(cfg, generator, rng)
        self.use_union_box = cfg.MODEL.ROI_RELATION_HEAD.PREDICT_USE_VISION

    def forward(self, features, proposals, targets=None, logger=None):
        """-> ``(roi_features, proposals_or_results, losses)`` as SGB.

        Training: ``losses`` has ``loss_rel``, ``loss_refine_obj`` and the predictor's
        ``add_losses``. Evaluation: ``results`` (list of BoxList with SGB's fields) and ``{}``.
        """
        if self.training:
            if targets is None:
                raise ValueError('ROIRelationHead: training needs the targets')
            with torch.no_grad():
                sample = (self.samp_processor.gtbox_relsample
                          if self.cfg.MODEL.ROI_RELATION_HEAD.USE_GT_BOX
                          else self.samp_processor.detect_relsample)
                proposals, rel_labels, rel_pair_idxs, rel_binarys = sample(proposals, targets)
        else:
            rel_labels, rel_binarys = None, None
            rel_pair_idxs = self.samp_processor.prepare_test_pairs(features[0].device,
                                                                   proposals)
        roi_features = self.box_feature_extractor(features, proposals)
        union_features = (self.union_feature_extractor(features, proposals, rel_pair_idxs)
                          if self.use_union_box else None)
        refine_logits, relation_logits, add_losses = self.predictor(
            proposals, rel_pair_idxs, rel_labels, rel_binarys, roi_features, union_features,
            logger)
        if not self.training:
            result = self.post_processor((relation_logits, refine_logits), rel_pair_idxs,
                                         proposals)
            return roi_features, result, {}
        loss_rel, loss_refine = self.loss_evaluator(proposals, rel_labels, relation_logits,
                                                    refine_logits)
        losses = {'loss_rel': loss_rel, 'loss_refine_obj': loss_refine}
        losses.update(add_losses)
        return roi_features, proposals, losses


def build_roi_relation_head(cfg, in_channels, statistics=None, predictor=None, generator=None,
                            rng=None):
    """The relation head with the predictor named by ``MODEL.ROI_RELATION_HEAD.PREDICTOR``.

    Parameters
    ----------
    cfg : yacs.config.CfgNode
    in_channels : int
    statistics : dict, optional
        ``get_statistics`` output, passed to the predictor builder.
    predictor : nn.Module, optional
        Use this predictor instead of the registry's (tests, custom heads).
    generator, rng : optional
        Sampling draws.

    Returns
    -------
    ROIRelationHead
    """
    if predictor is None:
        from .predictors import build_predictor  # filled by the predictors package
        predictor = build_predictor(cfg, cfg.MODEL.ROI_BOX_HEAD.MLP_HEAD_DIM, statistics)
    return ROIRelationHead(cfg, in_channels, predictor, generator, rng)
