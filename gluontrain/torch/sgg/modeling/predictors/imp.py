"""Iterative Message Passing (Xu et al. 2017, "Scene Graph Generation by Iterative Message
Passing") as Scene-Graph-Benchmark implements it.

Object nodes and relation edges each keep a GRU state; for ``num_iter`` rounds every edge
receives its subject's and object's states weighted by learned sigmoid gates, and every node the
sum of its outgoing and incoming edges' states, gated likewise. SGB trains IMP with the relation
head's box and union feature extractors at ``lr / 10`` (:data:`IMPPredictor.SLOW_HEADS`).
"""
import torch
from torch import nn
from torch.nn import functional as F

from .base import PairPredictor
from ...config_values import relation_mode
from .utils_motifs import check_inputs, pair_features, to_onehot
from .utils_relation import make_fc

__all__ = ['IMPContext', 'IMPPredictor', 'SLOW_HEADS', 'SLOW_RATIO']

#: Parameter-name substrings SGB's ``relation_train_net.py`` slows down for IMP.
SLOW_HEADS = ('roi_heads.relation.box_feature_extractor',
              'roi_heads.relation.union_feature_extractor.feature_extractor')
#: Their learning-rate divisor (``make_optimizer(..., slow_ratio=10.0)``).
SLOW_RATIO = 10.0


def _gate(hidden_dim):
    return nn.Sequential(nn.Linear(hidden_dim * 2, 1), nn.Sigmoid())


class IMPContext(nn.Module):
    """Message passing between object and relation GRU states.

    Parameters
    ----------
    cfg : yacs.config.CfgNode
        Reads ``MODEL.ROI_RELATION_HEAD.{CONTEXT_POOLING_DIM, USE_GT_BOX,
        USE_GT_OBJECT_LABEL}``.
    num_obj, num_rel : int
        Class counts (background included).
    in_channels : int
        ROI feature size.
    hidden_dim : int
        GRU size (SGB: 512, not read from the config).
    num_iter : int
        Message-passing rounds (SGB: 3).
    """

    def __init__(self, cfg, num_obj, num_rel, in_channels, hidden_dim=512, num_iter=3):
        super().__init__()
        self.num_obj, self.num_rel = num_obj, num_rel
        self.pooling_dim = cfg.MODEL.ROI_RELATION_HEAD.CONTEXT_POOLING_DIM
        self.hidden_dim, self.num_iter = hidden_dim, num_iter
        self.mode = relation_mode(cfg)
        self.rel_fc = make_fc(hidden_dim, num_rel)
        self.obj_fc = make_fc(hidden_dim, num_obj)
        self.obj_unary = make_fc(in_channels, hidden_dim)
        self.edge_unary = make_fc(self.pooling_dim, hidden_dim)
        self.edge_gru = nn.GRUCell(input_size=hidden_dim, hidden_size=hidden_dim)
        self.node_gru = nn.GRUCell(input_size=hidden_dim, hidden_size=hidden_dim)
        self.sub_vert_w_fc = _gate(hidden_dim)
        self.obj_vert_w_fc = _gate(hidden_dim)
        self.out_edge_w_fc = _gate(hidden_dim)
        self.in_edge_w_fc = _gate(hidden_dim)

    def forward(self, x, proposals, union_features, rel_pair_idxs, logger=None):
        """Object and relation logits after ``num_iter`` rounds.

        Parameters
        ----------
        x : torch.Tensor
            ``(sum N_i, in_channels)``.
        proposals : list of BoxList
        union_features : torch.Tensor
            ``(sum R_i, CONTEXT_POOLING_DIM)``.
        rel_pair_idxs : list of torch.Tensor
        logger : optional

        Returns
        -------
        tuple of torch.Tensor
            ``(obj_dists (sum N_i, num_obj), rel_dists (sum R_i, num_rel))``.
        """
        num_objs = [len(b) for b in proposals]
        obj_rep = self.obj_unary(x)
        rel_rep = F.relu(self.edge_unary(union_features))
        obj_count, rel_count = obj_rep.shape[0], rel_rep.shape[0]
        device = obj_rep.device
        # batch-wide subject / object of each relation, and the incidence matrices
        # node <- edges where it is subject / object
        offsets = [sum(num_objs[:i]) for i in range(len(num_objs))]
        sub_inds = torch.cat([p[:, 0].long() + o for p, o in zip(rel_pair_idxs, offsets)])
        obj_inds = torch.cat([p[:, 1].long() + o for p, o in zip(rel_pair_idxs, offsets)])
        rel = torch.arange(rel_count, device=device)
        sub2rel = torch.zeros(obj_count, rel_count, device=device)
        obj2rel = torch.zeros(obj_count, rel_count, device=device)
        sub2rel[sub_inds, rel] = 1.0
        obj2rel[obj_inds, rel] = 1.0
        hx_obj = torch.zeros(obj_count, self.hidden_dim, device=device)
        hx_rel = torch.zeros(rel_count, self.hidden_dim, device=device)
        vert = [self.node_gru(obj_rep, hx_obj)]
        edge = [self.edge_gru(rel_rep, hx_rel)]
        for i in range(self.num_iter):
            sub_vert, obj_vert = vert[i][sub_inds], vert[i][obj_inds]
            weighted_sub = self.sub_vert_w_fc(torch.cat((sub_vert, edge[i]), 1)) * sub_vert
            weighted_obj = self.obj_vert_w_fc(torch.cat((obj_vert, edge[i]), 1)) * obj_vert
            edge.append(self.edge_gru(weighted_sub + weighted_obj, edge[i]))
            pre_out = self.out_edge_w_fc(torch.cat((sub_vert, edge[i]), 1)) * edge[i]
            pre_in = self.in_edge_w_fc(torch.cat((obj_vert, edge[i]), 1)) * edge[i]
            vert.append(self.node_gru(sub2rel @ pre_out + obj2rel @ pre_in, vert[i]))
        if self.mode == 'predcls':
            obj_labels = torch.cat([p.get_field('labels') for p in proposals], dim=0)
            obj_dists = to_onehot(obj_labels, self.num_obj)
        else:
            obj_dists = self.obj_fc(vert[-1])
        return obj_dists, self.rel_fc(edge[-1])


class IMPPredictor(PairPredictor):
    """SGB's ``IMPPredictor`` (no frequency bias: SGB hard-codes ``use_bias = False``).

    Parameters
    ----------
    cfg : yacs.config.CfgNode
        ``MODEL.ROI_BOX_HEAD.{NUM_CLASSES, MLP_HEAD_DIM}``,
        ``MODEL.ROI_RELATION_HEAD.{NUM_CLASSES, CONTEXT_HIDDEN_DIM, CONTEXT_POOLING_DIM}`` and
        :class:`IMPContext`'s keys.
    in_channels : int
    statistics : dict
        SGB's statistics (only used when ``use_bias``).
    use_bias : bool
        SGB: False. True adds the frequency bias of the predicted labels.
    hidden_dim : int
        :class:`IMPContext`'s GRU size (SGB's 512).

    Attributes
    ----------
    SLOW_HEADS : tuple of str
        What SGB's optimizer trains at ``lr / SLOW_RATIO`` with this predictor.
    """

    SLOW_HEADS = SLOW_HEADS
    SLOW_RATIO = SLOW_RATIO

    def __init__(self, cfg, in_channels, statistics, use_bias=False, hidden_dim=512):
        super().__init__(cfg)
        self.use_bias = use_bias
        self.context_layer = IMPContext(cfg, self.num_obj_cls, self.num_rel_cls, in_channels,
                                        hidden_dim)
        self._add_post_layers(cfg, statistics)

    def forward(self, proposals, rel_pair_idxs, rel_labels, rel_binarys, roi_features,
                union_features, logger=None):
        """Same contract as :meth:`MotifPredictor.forward`."""
        check_inputs(proposals, rel_pair_idxs)
        obj_dists, rel_dists = self.context_layer(roi_features, proposals,
                                                  self._union(union_features), rel_pair_idxs,
                                                  logger)
        if self.use_bias:
            _, pair_pred = pair_features(obj_dists, obj_dists, obj_dists.max(-1)[1],
                                         rel_pair_idxs, [len(b) for b in proposals])
            rel_dists = self._add_bias(rel_dists, pair_pred)
        return self._per_image(proposals, rel_pair_idxs, obj_dists, rel_dists)
