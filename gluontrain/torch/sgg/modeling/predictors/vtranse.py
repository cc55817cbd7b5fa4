"""VTransE-style object features (SGB's ``model_vtranse.py``), a context layer of the causal
predictor (``CAUSAL.CONTEXT_LAYER 'vtranse'``).

No context between objects: each object's ``[roi feature, class embedding, box embedding]``
gives its class logits and, through one FC + ReLU, its edge feature. As in SGB the class
logits are predicted even in PredCls (the ground-truth labels only feed the embedding).
"""
import torch
from torch import nn
from torch.nn import functional as F

from .motifs import AVERAGE_RATIO, moving_average
from .utils_motifs import cat, encode_box_info, obj_edge_vectors, relation_mode
from .utils_relation import make_fc

__all__ = ['VTransEFeature']


class VTransEFeature(nn.Module):
    """Per-object features without context.

    Parameters
    ----------
    cfg : yacs.config.CfgNode
        ``MODEL.ROI_RELATION_HEAD.{EMBED_DIM, CONTEXT_HIDDEN_DIM, CONTEXT_DROPOUT_RATE,
        USE_GT_BOX, USE_GT_OBJECT_LABEL, CAUSAL.EFFECT_ANALYSIS}``, ``GLOVE_DIR``.
    obj_classes, rel_classes : list of str
    in_channels : int
    """

    def __init__(self, cfg, obj_classes, rel_classes, in_channels):
        super().__init__()
        head = cfg.MODEL.ROI_RELATION_HEAD
        self.cfg = cfg
        self.obj_classes, self.rel_classes = obj_classes, rel_classes
        self.num_obj_classes = len(obj_classes)
        self.mode = relation_mode(cfg)
        self.embed_dim = head.EMBED_DIM
        vecs = obj_edge_vectors(obj_classes, wv_dir=cfg.GLOVE_DIR, wv_dim=self.embed_dim)
        self.obj_embed1 = nn.Embedding(self.num_obj_classes, self.embed_dim)
        self.obj_embed2 = nn.Embedding(self.num_obj_classes, self.embed_dim)
        with torch.no_grad():
            self.obj_embed1.weight.copy_(vecs)
            self.obj_embed2.weight.copy_(vecs)
        self.pos_embed = nn.Sequential(nn.Linear(9, 32), nn.BatchNorm1d(32, momentum=0.001),
                                       nn.Linear(32, 128), nn.ReLU(inplace=True))
        self.obj_dim = in_channels
        self.dropout_rate = head.CONTEXT_DROPOUT_RATE
        self.hidden_dim = head.CONTEXT_HIDDEN_DIM
        self.pred_layer = make_fc(self.obj_dim + self.embed_dim + 128, self.num_obj_classes)
        self.fc_layer = make_fc(self.obj_dim + self.embed_dim + 128, self.hidden_dim)
        self.average_ratio = AVERAGE_RATIO
        self.effect_analysis = head.CAUSAL.EFFECT_ANALYSIS
        if self.effect_analysis:
            self.register_buffer('untreated_obj_feat',
                                 torch.zeros(self.obj_dim + self.embed_dim + 128))
            self.register_buffer('untreated_edg_feat', torch.zeros(self.obj_dim + 128))

    def forward(self, x, proposals, rel_pair_idxs=None, logger=None, all_average=False,
                ctx_average=False):
        """``(obj_dists, obj_preds, edge_ctx (N, hidden_dim), None)`` as :class:`LSTMContext`."""
        head = self.cfg.MODEL.ROI_RELATION_HEAD
        if self.training or head.USE_GT_BOX:
            obj_labels = cat([p.get_field('labels') for p in proposals], dim=0)
        else:
            obj_labels = None
        if head.USE_GT_OBJECT_LABEL:
            obj_embed = self.obj_embed1(obj_labels.long())
        else:
            obj_logits = cat([p.get_field('predict_logits') for p in proposals], dim=0).detach()
            obj_embed = F.softmax(obj_logits, dim=1) @ self.obj_embed1.weight
        pos_embed = self.pos_embed(encode_box_info(proposals))
        batch_size = x.shape[0]
        counterfactual = (all_average or ctx_average) and self.effect_analysis and \
            not self.training
        if counterfactual:
            obj_pre_rep = self.untreated_obj_feat.view(1, -1).expand(batch_size, -1)
        else:
            obj_pre_rep = cat((x, obj_embed, pos_embed), -1)
        obj_dists = self.pred_layer(obj_pre_rep)
        obj_preds = obj_dists.max(-1)[1]
        if counterfactual:
            obj_embed2 = F.softmax(obj_dists, dim=1) @ self.obj_embed2.weight
            obj_rel_rep = cat((self.untreated_edg_feat.view(1, -1).expand(batch_size, -1),
                               obj_embed2), dim=-1)
        else:
            obj_rel_rep = cat((x, pos_embed, self.obj_embed2(obj_preds.long())), -1)
        edge_ctx = F.relu(self.fc_layer(obj_rel_rep))
        if self.training and self.effect_analysis:
            self.untreated_obj_feat = moving_average(self.untreated_obj_feat, obj_pre_rep,
                                                     self.average_ratio)
            self.untreated_edg_feat = moving_average(self.untreated_edg_feat,
                                                     cat((x, pos_embed), -1), self.average_ratio)
        return obj_dists, obj_preds, edge_ctx, None
