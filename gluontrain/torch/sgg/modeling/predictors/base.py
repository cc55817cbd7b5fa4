"""What SGB's relation contexts and predictors write once per model, written once here.

:class:`ObjectContext` is the common start of the MOTIFS, VCTree, VTransE and Transformer
contexts (class embeddings from GloVe, the box embedding, ground-truth or soft class inputs,
the ``untreated_*`` averages of ``CAUSAL.EFFECT_ANALYSIS``); :class:`PairPredictor` the common
end of the predictors (head / tail halves of each object's edge feature, the pair feature, the
union-feature projection, the frequency bias, per-image splitting). Modules are created and
initialised in SGB's order, so parameter names, their order and the random stream are SGB's.
"""
import torch
from torch import nn
from torch.nn import functional as F

from .frequency_bias import FrequencyBias
from ...config_values import relation_mode
from .utils_motifs import glove_embeddings, pair_features
from .utils_relation import layer_init

__all__ = ['AVERAGE_RATIO', 'moving_average', 'binary_loss', 'ObjectContext', 'PairPredictor']

#: SGB's momentum of the untreated feature averages (``average_ratio``).
AVERAGE_RATIO = 0.0005


def moving_average(holder, x, ratio=AVERAGE_RATIO):
    """``holder * (1 - ratio) + ratio * mean_rows(x)`` without gradient.

    Parameters
    ----------
    holder : torch.Tensor
        ``(D,)`` running average.
    x : torch.Tensor
        ``(N, D)`` batch.
    ratio : float

    Returns
    -------
    torch.Tensor
        The new average (a new tensor; assign it back to the buffer).
    """
    with torch.no_grad():
        return holder * (1 - ratio) + ratio * x.mean(0).view(-1)


def binary_loss(rel_binarys, binary_preds):
    """VCTree's ``binary_loss``: mean over images of BCE(pair score logits, has any relation).

    Parameters
    ----------
    rel_binarys : list of torch.Tensor
        Per image ``(N_i, N_i)``, ``> 0`` where a relation exists.
    binary_preds : list of torch.Tensor
        Per image ``(N_i, N_i)`` logits.

    Returns
    -------
    torch.Tensor
        Scalar.
    """
    losses = [F.binary_cross_entropy_with_logits(p, (g > 0).float())
              for g, p in zip(rel_binarys, binary_preds)]
    return sum(losses) / len(losses)


class ObjectContext(nn.Module):
    """Embeddings, inputs and counterfactual averages shared by SGB's context layers.

    Parameters
    ----------
    cfg : yacs.config.CfgNode
        Reads ``MODEL.ROI_RELATION_HEAD.{EMBED_DIM, CONTEXT_HIDDEN_DIM, CONTEXT_DROPOUT_RATE,
        USE_GT_BOX, USE_GT_OBJECT_LABEL, CAUSAL.EFFECT_ANALYSIS}``, ``GLOVE_DIR``.
    obj_classes, rel_classes : list of str
    in_channels : int
        ROI feature size.
    pos_embed : bool
        Add SGB's 9 -> 32 -> 128 box embedding ``pos_embed`` (all but the Transformer, which
        has its own ``bbox_embed``).
    """

    def __init__(self, cfg, obj_classes, rel_classes, in_channels, pos_embed=True):
        super().__init__()
        head = cfg.MODEL.ROI_RELATION_HEAD
        self.cfg = cfg
        self.num_obj_classes = len(obj_classes)
        self.mode = relation_mode(cfg)
        self.embed_dim = head.EMBED_DIM
        self.obj_embed1, self.obj_embed2 = glove_embeddings(obj_classes, cfg.GLOVE_DIR,
                                                            self.embed_dim, copies=2)
        if pos_embed:
            self.pos_embed = nn.Sequential(nn.Linear(9, 32), nn.BatchNorm1d(32, momentum=0.001),
                                           nn.Linear(32, 128), nn.ReLU(inplace=True))
        self.obj_dim = in_channels
        self.dropout_rate = head.CONTEXT_DROPOUT_RATE
        self.hidden_dim = head.CONTEXT_HIDDEN_DIM
        self.effect_analysis = head.CAUSAL.EFFECT_ANALYSIS

    def _layer_counts(self):
        # MOTIFS' and VCTree's CONTEXT_OBJ_LAYER / CONTEXT_REL_LAYER, checked
        head = self.cfg.MODEL.ROI_RELATION_HEAD
        self.nl_obj, self.nl_edge = head.CONTEXT_OBJ_LAYER, head.CONTEXT_REL_LAYER
        if self.nl_obj < 1 or self.nl_edge < 1:
            raise ValueError('MODEL.ROI_RELATION_HEAD.CONTEXT_OBJ_LAYER and CONTEXT_REL_LAYER '
                             'must be >= 1, got {} and {}'.format(self.nl_obj, self.nl_edge))

    def _register_untreated(self, obj_dim, edg_dim, dcd_dim=None):
        # the EFFECT_ANALYSIS buffers, in SGB's order (decoder input first where there is one)
        if self.effect_analysis:
            if dcd_dim is not None:
                self.register_buffer('untreated_dcd_feat', torch.zeros(dcd_dim))
            self.register_buffer('untreated_obj_feat', torch.zeros(obj_dim))
            self.register_buffer('untreated_edg_feat', torch.zeros(edg_dim))

    def _counterfactual(self, flag):
        return flag and self.effect_analysis and not self.training

    def _object_inputs(self, proposals, need_labels):
        """``(labels or None, detached predict_logits or None, class embedding)``: with
        ``USE_GT_OBJECT_LABEL`` the labels' embedding, else the softmax-weighted mean one.
        ``need_labels``: read ``labels`` (the contexts differ in when they do)."""
        obj_labels = obj_logits = None
        if need_labels:
            obj_labels = torch.cat([p.get_field('labels') for p in proposals], dim=0)
        if self.cfg.MODEL.ROI_RELATION_HEAD.USE_GT_OBJECT_LABEL:
            obj_embed = self.obj_embed1(obj_labels.long())
        else:
            obj_logits = torch.cat([p.get_field('predict_logits') for p in proposals]).detach()
            obj_embed = F.softmax(obj_logits, dim=1) @ self.obj_embed1.weight
        return obj_labels, obj_logits, obj_embed

    def _object_rep(self, x, obj_embed, pos_embed, average=False):
        """``[roi feature, class embedding, box embedding]``, or its untreated average when
        ``average`` is asked for at test time with ``EFFECT_ANALYSIS``."""
        if self._counterfactual(average):
            return self.untreated_obj_feat.view(1, -1).expand(x.shape[0], -1)
        return torch.cat((x, obj_embed, pos_embed), -1)

    def _decoder_input(self, feat, enc, ctx_average=False):
        """MOTIFS' / VCTree's label-decoder input ``[feat, enc]`` (or its untreated average),
        whose average it updates in training with ``EFFECT_ANALYSIS``."""
        if self._counterfactual(ctx_average):
            dec_inp = self.untreated_dcd_feat.view(1, -1).expand(enc.shape[0], -1)
        else:
            dec_inp = torch.cat((feat, enc), 1)
        if self.training and self.effect_analysis:
            self.untreated_dcd_feat = moving_average(self.untreated_dcd_feat, dec_inp)
        return dec_inp

    def _edge_input(self, x, obj_preds, obj_ctx, average=False):
        """``(obj_embed2, [class embedding, roi feature, object context])`` of MOTIFS /
        VCTree, the first two replaced by their untreated average on request."""
        obj_embed2 = self.obj_embed2(obj_preds.long())
        if self._counterfactual(average):
            untreated = self.untreated_edg_feat.view(1, -1).expand(x.shape[0], -1)
            return obj_embed2, torch.cat((untreated, obj_ctx), dim=-1)
        return obj_embed2, torch.cat((obj_embed2, x, obj_ctx), -1)

    def _update_untreated(self, obj_pre_rep, edge_parts):
        """In training with ``EFFECT_ANALYSIS``: move the averages of the object input and
        of the edge input (``edge_parts`` concatenated)."""
        if self.training and self.effect_analysis:
            self.untreated_obj_feat = moving_average(self.untreated_obj_feat, obj_pre_rep)
            self.untreated_edg_feat = moving_average(self.untreated_edg_feat,
                                                     torch.cat(edge_parts, -1))


class PairPredictor(nn.Module):
    """The post-context part SGB's predictors repeat.

    Parameters
    ----------
    cfg : yacs.config.CfgNode
        ``MODEL.ROI_BOX_HEAD.{NUM_CLASSES, MLP_HEAD_DIM}``, ``MODEL.ROI_RELATION_HEAD.{
        NUM_CLASSES, CONTEXT_HIDDEN_DIM, CONTEXT_POOLING_DIM, PREDICT_USE_VISION,
        PREDICT_USE_BIAS}``, ``MODEL.ATTRIBUTE_ON`` (must be False when ``statistics``).
    statistics : dict, optional
        SGB's statistics: their class names (checked against the config) go to
        ``self.obj_classes`` / ``self.rel_classes`` for the context layer. ``None`` (IMP, which
        has no context layer of that kind) skips them.
    """

    def __init__(self, cfg, statistics=None):
        super().__init__()
        head = cfg.MODEL.ROI_RELATION_HEAD
        self.num_obj_cls = cfg.MODEL.ROI_BOX_HEAD.NUM_CLASSES
        self.num_rel_cls = head.NUM_CLASSES
        if statistics is not None:
            if cfg.MODEL.ATTRIBUTE_ON:
                raise NotImplementedError('MODEL.ATTRIBUTE_ON (SGB\'s attribute heads) is not '
                                          'ported; set MODEL.ATTRIBUTE_ON False')
            self.obj_classes = list(statistics['obj_classes'])
            self.rel_classes = list(statistics['rel_classes'])
            # the config's class counts must be the dataset's (SGB asserts)
            for key, value, names in (('ROI_BOX_HEAD', self.num_obj_cls, self.obj_classes),
                                      ('ROI_RELATION_HEAD', self.num_rel_cls, self.rel_classes)):
                if value != len(names):
                    raise ValueError('MODEL.{0}.NUM_CLASSES is {1} but the dataset has {2} '
                                     'classes (background included); set MODEL.{0}.NUM_CLASSES '
                                     '{2}'.format(key, value, len(names)))
        self.use_vision = head.PREDICT_USE_VISION
        self.use_bias = head.PREDICT_USE_BIAS
        self.hidden_dim = head.CONTEXT_HIDDEN_DIM
        self.pooling_dim = head.CONTEXT_POOLING_DIM

    def _add_post_layers(self, cfg, statistics, compress=(), init_order=()):
        """With ``compress``: ``post_emb`` (hidden -> 2 hidden), ``post_cat`` (2 hidden ->
        pooling) and the ``(name, in_features)`` predicate layers of ``compress``,
        initialised in ``init_order`` (each predictor's order in SGB: it fixes the random
        stream). Then ``up_dim`` when the union features are not ``pooling_dim`` wide, and
        the frequency bias when ``use_bias``."""
        if compress:
            self.post_emb = nn.Linear(self.hidden_dim, self.hidden_dim * 2)
            self.post_cat = nn.Linear(self.hidden_dim * 2, self.pooling_dim)
        for name, in_features in compress:
            setattr(self, name, nn.Linear(in_features, self.num_rel_cls))
        for name in init_order:
            if name == 'post_emb':
                layer_init(self.post_emb, 10.0 * (1.0 / self.hidden_dim) ** 0.5, normal=True)
            else:
                layer_init(getattr(self, name), xavier=True)
        self.union_single_not_match = self.pooling_dim != cfg.MODEL.ROI_BOX_HEAD.MLP_HEAD_DIM
        if self.union_single_not_match:
            self.up_dim = nn.Linear(cfg.MODEL.ROI_BOX_HEAD.MLP_HEAD_DIM, self.pooling_dim)
            layer_init(self.up_dim, xavier=True)
        if self.use_bias:
            self.freq_bias = FrequencyBias(cfg, statistics)

    def _union(self, union_features):
        """Union features, projected to ``pooling_dim`` by ``up_dim`` where needed."""
        return self.up_dim(union_features) if self.union_single_not_match else union_features

    def _add_bias(self, rel_dists, pair_pred):
        """``rel_dists`` plus the frequency bias of the pairs' classes when ``use_bias``."""
        if self.use_bias:
            return rel_dists + self.freq_bias.index_with_labels(pair_pred.long())
        return rel_dists

    def pair_context(self, edge_ctx, obj_preds, proposals, rel_pair_idxs, relu=False,
                     difference=False):
        """Head and tail halves of ``post_emb(edge_ctx)``, gathered per relation pair.

        Parameters
        ----------
        edge_ctx : torch.Tensor
            ``(sum N_i, hidden_dim)``.
        obj_preds : torch.Tensor
            ``(sum N_i,)``.
        proposals : list of BoxList
        rel_pair_idxs : list of torch.Tensor
        relu : bool
            ReLU after ``post_emb`` (VCTree).
        difference : bool
            ``head - tail`` instead of ``[head, tail]`` (causal VTransE).

        Returns
        -------
        tuple of torch.Tensor
            ``(prod_rep (sum R_i, D), pair_pred (sum R_i, 2), edge_rep (N, 2, D / 2))``.
        """
        edge_rep = self.post_emb(edge_ctx)
        if relu:
            edge_rep = F.relu(edge_rep)
        edge_rep = edge_rep.view(edge_ctx.size(0), 2, self.post_emb.out_features // 2)
        prod_rep, pair_pred = pair_features(edge_rep[:, 0].contiguous(),
                                            edge_rep[:, 1].contiguous(), obj_preds,
                                            rel_pair_idxs, [len(b) for b in proposals],
                                            difference)
        return prod_rep, pair_pred, edge_rep

    @staticmethod
    def _per_image(proposals, rel_pair_idxs, obj_dists, rel_dists, add_losses=None):
        """SGB's return value: ``(obj_dists, rel_dists)`` split per image, ``add_losses``."""
        return (obj_dists.split([len(b) for b in proposals], dim=0),
                rel_dists.split([r.shape[0] for r in rel_pair_idxs], dim=0),
                {} if add_losses is None else add_losses)
