"""``CausalAnalysisPredictor``: Tang et al., "Unbiased Scene Graph Generation from Biased
Training" (CVPR 2020), the paper of Scene-Graph-Benchmark.

Three branches give predicate logits: visual (``vis_compress(union feature)``), context
(``ctx_compress(pair context)``) and frequency (``FrequencyBias``), fused by ``'sum'`` or
``'gate'`` (``ctx * sigmoid(vis + frq + gate(ctx))``). Training adds one cross-entropy per branch
(``auxiliary_ctx``, and ``auxiliary_vis`` / ``auxiliary_frq`` unless gated) and keeps moving
averages of the features. At test time with ``CAUSAL.EFFECT_ANALYSIS`` the logits become an
effect: the factual logits minus those of a counterfactual whose context comes from the
averaged ("untreated") features:

- ``TDE``: ``f(vis, ctx, p) - f(vis, ctx_avg, p)``,
- ``NIE``: ``f(vis, ctx_avg, p) - f(vis, ctx_avg, p_avg)``,
- ``TE``: ``f(vis, ctx, p) - f(vis, ctx_avg, p_avg)``,

with ``p`` the pair's class probabilities fed to the frequency table as an expectation.
"""
import torch
from torch import nn
from torch.nn import functional as F

from .base import PairPredictor, binary_loss, moving_average
from .frequency_bias import FrequencyBias
from .motifs import LSTMContext
from .utils_motifs import check_inputs
from .utils_relation import get_box_info, get_box_pair_info, layer_init
from .vctree import VCTreeLSTMContext
from .vtranse import VTransEFeature

__all__ = ['CausalAnalysisPredictor', 'EFFECT_TYPES', 'FUSION_TYPES', 'CONTEXT_LAYERS']

EFFECT_TYPES = ('none', 'TDE', 'NIE', 'TE')
FUSION_TYPES = ('sum', 'gate')
#: ``CAUSAL.CONTEXT_LAYER`` -> context class.
CONTEXT_LAYERS = {'motifs': LSTMContext, 'vtranse': VTransEFeature, 'vctree': VCTreeLSTMContext}


class CausalAnalysisPredictor(PairPredictor):
    """SGB's ``CausalAnalysisPredictor``.

    Parameters
    ----------
    cfg : yacs.config.CfgNode
        ``MODEL.ROI_RELATION_HEAD.CAUSAL.{EFFECT_ANALYSIS, EFFECT_TYPE, FUSION_TYPE,
        CONTEXT_LAYER, SEPARATE_SPATIAL, SPATIAL_FOR_VISION}``,
        ``MODEL.ROI_RELATION_HEAD.{NUM_CLASSES, CONTEXT_HIDDEN_DIM, CONTEXT_POOLING_DIM}``,
        ``MODEL.ROI_BOX_HEAD.{NUM_CLASSES, MLP_HEAD_DIM}`` and the context layer's keys.
    in_channels : int
    statistics : dict
        SGB's statistics.
    """

    def __init__(self, cfg, in_channels, statistics):
        super().__init__(cfg, statistics)
        causal = cfg.MODEL.ROI_RELATION_HEAD.CAUSAL
        self.spatial_for_vision = causal.SPATIAL_FOR_VISION
        self.fusion_type = causal.FUSION_TYPE
        self.separate_spatial = causal.SEPARATE_SPATIAL
        self.use_vtranse = causal.CONTEXT_LAYER == 'vtranse'
        self.effect_type = causal.EFFECT_TYPE
        self.effect_analysis = causal.EFFECT_ANALYSIS
        if self.fusion_type not in FUSION_TYPES:
            raise ValueError('MODEL.ROI_RELATION_HEAD.CAUSAL.FUSION_TYPE must be one of {}, got '
                             '{!r}'.format(FUSION_TYPES, self.fusion_type))
        if self.effect_analysis and self.effect_type not in EFFECT_TYPES:
            raise ValueError('MODEL.ROI_RELATION_HEAD.CAUSAL.EFFECT_TYPE must be one of {}, got '
                             '{!r}'.format(EFFECT_TYPES, self.effect_type))
        if causal.CONTEXT_LAYER not in CONTEXT_LAYERS:
            raise ValueError('MODEL.ROI_RELATION_HEAD.CAUSAL.CONTEXT_LAYER must be one of {}, '
                             'got {!r}'.format(tuple(CONTEXT_LAYERS), causal.CONTEXT_LAYER))
        stats = (statistics,) if causal.CONTEXT_LAYER == 'vctree' else ()  # VCTree's prior
        self.context_layer = CONTEXT_LAYERS[causal.CONTEXT_LAYER](
            cfg, self.obj_classes, self.rel_classes, *stats, in_channels)
        if self.use_vtranse:
            self.post_emb = nn.Linear(self.hidden_dim, self.pooling_dim * 2)
            self.ctx_compress = nn.Linear(self.pooling_dim, self.num_rel_cls, bias=False)
        else:
            self.post_emb = nn.Linear(self.hidden_dim, self.hidden_dim * 2)
            self.post_cat = nn.Sequential(nn.Linear(self.hidden_dim * 2, self.pooling_dim),
                                          nn.ReLU(inplace=True))
            self.ctx_compress = nn.Linear(self.pooling_dim, self.num_rel_cls)
        self.vis_compress = nn.Linear(self.pooling_dim, self.num_rel_cls)
        if self.fusion_type == 'gate':
            self.ctx_gate_fc = nn.Linear(self.pooling_dim, self.num_rel_cls)
            layer_init(self.ctx_gate_fc, xavier=True)
        layer_init(self.post_emb, 10.0 * (1.0 / self.hidden_dim) ** 0.5, normal=True)
        if not self.use_vtranse:
            layer_init(self.post_cat[0], xavier=True)
            layer_init(self.ctx_compress, xavier=True)
        layer_init(self.vis_compress, xavier=True)
        if self.pooling_dim != cfg.MODEL.ROI_BOX_HEAD.MLP_HEAD_DIM:
            raise ValueError('CausalAnalysisPredictor needs MODEL.ROI_RELATION_HEAD.'
                             'CONTEXT_POOLING_DIM ({}) == MODEL.ROI_BOX_HEAD.MLP_HEAD_DIM ({})'
                             .format(self.pooling_dim, cfg.MODEL.ROI_BOX_HEAD.MLP_HEAD_DIM))
        self.freq_bias = FrequencyBias(cfg, statistics)
        if self.spatial_for_vision:
            self.spt_emb = nn.Sequential(nn.Linear(32, self.hidden_dim), nn.ReLU(inplace=True),
                                         nn.Linear(self.hidden_dim, self.pooling_dim),
                                         nn.ReLU(inplace=True))
            layer_init(self.spt_emb[0], xavier=True)
            layer_init(self.spt_emb[2], xavier=True)
        self.register_buffer('untreated_spt', torch.zeros(32))
        for name in ('untreated_conv_spt', 'avg_post_ctx', 'untreated_feat'):
            self.register_buffer(name, torch.zeros(self.pooling_dim))

    def pair_feature_generate(self, roi_features, proposals, rel_pair_idxs, num_objs, obj_boxs,
                              logger=None, ctx_average=False):
        """Pair context features (factual, or counterfactual with ``ctx_average``).

        Returns
        -------
        tuple
            ``(post_ctx_rep (R, pooling), pair_pred (R, 2), pair_bbox (R, 32),
            pair_obj_probs (R, C_obj, 2), binary_preds, obj_dist_prob (N, C_obj),
            edge_rep, obj_dist_list)``.
        """
        obj_dists, obj_preds, edge_ctx, binary_preds = self.context_layer(
            roi_features, proposals, rel_pair_idxs, logger, ctx_average=ctx_average)
        obj_dist_prob = F.softmax(obj_dists, dim=-1)
        ctx_rep, pair_pred, edge_rep = self.pair_context(edge_ctx, obj_preds, proposals,
                                                         rel_pair_idxs,
                                                         difference=self.use_vtranse)
        pair_obj_probs, pair_bboxs = [], []
        for pair_idx, box, prob in zip(rel_pair_idxs, obj_boxs,
                                       obj_dist_prob.split(num_objs, dim=0)):
            s, o = pair_idx[:, 0].long(), pair_idx[:, 1].long()
            pair_obj_probs.append(torch.stack((prob[s], prob[o]), dim=2))
            pair_bboxs.append(get_box_pair_info(box[s], box[o]))
        post_ctx_rep = ctx_rep if self.use_vtranse else self.post_cat(ctx_rep)
        return (post_ctx_rep, pair_pred, torch.cat(pair_bboxs), torch.cat(pair_obj_probs),
                binary_preds, obj_dist_prob, edge_rep, obj_dists.split(num_objs, dim=0))

    def forward(self, proposals, rel_pair_idxs, rel_labels, rel_binarys, roi_features,
                union_features, logger=None):
        """Same contract as :meth:`MotifPredictor.forward`.

        ``union_features`` is a ``(union, spatial)`` pair when ``CAUSAL.SEPARATE_SPATIAL``.
        In training ``rel_labels`` (per-image ``(R_i,)``) give the auxiliary losses
        ``auxiliary_ctx`` / ``auxiliary_vis`` / ``auxiliary_frq`` in ``add_losses``.
        """
        check_inputs(proposals, rel_pair_idxs)
        num_rels = [r.shape[0] for r in rel_pair_idxs]
        num_objs = [len(b) for b in proposals]
        obj_boxs = [get_box_info(p.bbox, need_norm=True, proposal=p) for p in proposals]
        (post_ctx_rep, pair_pred, pair_bbox, pair_obj_probs, binary_preds, _, _,
         obj_dist_list) = self.pair_feature_generate(roi_features, proposals, rel_pair_idxs,
                                                     num_objs, obj_boxs, logger)
        if not self.training and self.effect_analysis:
            with torch.no_grad():
                avg = self.pair_feature_generate(roi_features, proposals, rel_pair_idxs,
                                                 num_objs, obj_boxs, logger, ctx_average=True)
                avg_post_ctx_rep, avg_pair_obj_prob = avg[0], avg[3]
        spatial_conv_feats = None
        if self.separate_spatial:
            union_features, spatial_conv_feats = union_features
            post_ctx_rep = post_ctx_rep * spatial_conv_feats
        if self.spatial_for_vision:
            post_ctx_rep = post_ctx_rep * self.spt_emb(pair_bbox)
        rel_dists = self.calculate_logits(union_features, post_ctx_rep, pair_pred,
                                          use_label_dist=False)
        add_losses = {}
        if self.training:
            if rel_labels is None:
                raise ValueError('CausalAnalysisPredictor needs rel_labels in training')
            rel_labels = torch.cat(list(rel_labels), dim=0)
            if binary_preds is not None:
                add_losses['binary_loss'] = binary_loss(rel_binarys, binary_preds)
            add_losses['auxiliary_ctx'] = F.cross_entropy(self.ctx_compress(post_ctx_rep),
                                                          rel_labels)
            if self.fusion_type != 'gate':
                add_losses['auxiliary_vis'] = F.cross_entropy(self.vis_compress(union_features),
                                                              rel_labels)
                add_losses['auxiliary_frq'] = F.cross_entropy(
                    self.freq_bias.index_with_labels(pair_pred.long()), rel_labels)
            if self.spatial_for_vision:
                self.untreated_spt = moving_average(self.untreated_spt, pair_bbox)
            if self.separate_spatial:
                self.untreated_conv_spt = moving_average(self.untreated_conv_spt,
                                                         spatial_conv_feats)
            self.avg_post_ctx = moving_average(self.avg_post_ctx, post_ctx_rep)
            self.untreated_feat = moving_average(self.untreated_feat, union_features)
        elif self.effect_analysis and self.effect_type != 'none':
            rel_dists = self.effect(union_features, post_ctx_rep, pair_obj_probs,
                                    avg_post_ctx_rep, avg_pair_obj_prob)
        return obj_dist_list, rel_dists.split(num_rels, dim=0), add_losses

    def effect(self, union_features, post_ctx_rep, pair_obj_probs, avg_post_ctx_rep,
               avg_pair_obj_prob):
        """The ``EFFECT_TYPE`` logits (factual minus counterfactual), SGB's arithmetic.

        Parameters
        ----------
        union_features : torch.Tensor
        post_ctx_rep, avg_post_ctx_rep : torch.Tensor
            Factual and ``ctx_average`` pair contexts (spatial factors not yet applied to the
            latter).
        pair_obj_probs, avg_pair_obj_prob : torch.Tensor
            ``(R, C_obj, 2)``.

        Returns
        -------
        torch.Tensor
            ``(R, C_rel)``.
        """
        with torch.no_grad():
            avg_ctx_rep = avg_post_ctx_rep
            if self.spatial_for_vision:
                avg_ctx_rep = avg_ctx_rep * self.spt_emb(self.untreated_spt.clone().view(1, -1))
            if self.separate_spatial:
                avg_ctx_rep = avg_ctx_rep * self.untreated_conv_spt.clone().view(1, -1)
        # each effect's ((context, class probabilities) of the minuend, of the subtrahend)
        terms = {'TDE': ((post_ctx_rep, pair_obj_probs), (avg_ctx_rep, pair_obj_probs)),
                 'NIE': ((avg_ctx_rep, pair_obj_probs), (avg_ctx_rep, avg_pair_obj_prob)),
                 'TE': ((post_ctx_rep, pair_obj_probs), (avg_ctx_rep, avg_pair_obj_prob))}
        if self.effect_type in terms:
            (ctx, probs), (cf_ctx, cf_probs) = terms[self.effect_type]
            return self.calculate_logits(union_features, ctx, probs) - \
                self.calculate_logits(union_features, cf_ctx, cf_probs)
        raise ValueError('EFFECT_TYPE {!r} has no effect formula; use one of {}'.format(
            self.effect_type, EFFECT_TYPES[1:]))

    def calculate_logits(self, vis_rep, ctx_rep, frq_rep, use_label_dist=True):
        """Fuse the three branches.

        Parameters
        ----------
        vis_rep : torch.Tensor
            ``(R, pooling)`` union features.
        ctx_rep : torch.Tensor
            ``(R, pooling)`` (or ``(1, pooling)``) pair context.
        frq_rep : torch.Tensor
            ``(R, C_obj, 2)`` class probabilities (``use_label_dist``) or ``(R, 2)`` labels.
        use_label_dist : bool

        Returns
        -------
        torch.Tensor
            ``vis + ctx + frq`` ('sum') or ``ctx * sigmoid(vis + frq + gate(ctx))`` ('gate').
        """
        frq_dists = (self.freq_bias.index_with_probability(frq_rep) if use_label_dist else
                     self.freq_bias.index_with_labels(frq_rep.long()))
        vis_dists = self.vis_compress(vis_rep)
        ctx_dists = self.ctx_compress(ctx_rep)
        if self.fusion_type == 'gate':
            return ctx_dists * torch.sigmoid(vis_dists + frq_dists + self.ctx_gate_fc(ctx_rep))
        return vis_dists + ctx_dists + frq_dists
