"""VTransE-style object features (SGB's ``model_vtranse.py``), a context layer of the causal
predictor (``CAUSAL.CONTEXT_LAYER 'vtranse'``).

No context between objects: each object's ``[roi feature, class embedding, box embedding]``
gives its class logits and, through one FC + ReLU, its edge feature. As in SGB the class
logits are predicted even in PredCls (the ground-truth labels only feed the embedding).
"""
import torch
from torch.nn import functional as F

from .base import ObjectContext
from .utils_motifs import encode_box_info
from .utils_relation import make_fc

__all__ = ['VTransEFeature']


class VTransEFeature(ObjectContext):
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
        super().__init__(cfg, obj_classes, rel_classes, in_channels)
        self.pred_layer = make_fc(self.obj_dim + self.embed_dim + 128, self.num_obj_classes)
        self.fc_layer = make_fc(self.obj_dim + self.embed_dim + 128, self.hidden_dim)
        self._register_untreated(self.obj_dim + self.embed_dim + 128, self.obj_dim + 128)

    def forward(self, x, proposals, rel_pair_idxs=None, logger=None, all_average=False,
                ctx_average=False):
        """``(obj_dists, obj_preds, edge_ctx (N, hidden_dim), None)`` as :class:`LSTMContext`."""
        _, _, obj_embed = self._object_inputs(
            proposals, self.training or self.cfg.MODEL.ROI_RELATION_HEAD.USE_GT_BOX)
        pos_embed = self.pos_embed(encode_box_info(proposals))
        counterfactual = self._counterfactual(all_average or ctx_average)
        obj_pre_rep = self._object_rep(x, obj_embed, pos_embed, all_average or ctx_average)
        obj_dists = self.pred_layer(obj_pre_rep)
        obj_preds = obj_dists.max(-1)[1]
        if counterfactual:
            obj_embed2 = F.softmax(obj_dists, dim=1) @ self.obj_embed2.weight
            untreated = self.untreated_edg_feat.view(1, -1).expand(x.shape[0], -1)
            obj_rel_rep = torch.cat((untreated, obj_embed2), dim=-1)
        else:
            obj_rel_rep = torch.cat((x, pos_embed, self.obj_embed2(obj_preds.long())), -1)
        edge_ctx = F.relu(self.fc_layer(obj_rel_rep))
        self._update_untreated(obj_pre_rep, (x, pos_embed))
        return obj_dists, obj_preds, edge_ctx, None
