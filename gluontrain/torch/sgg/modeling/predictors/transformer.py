"""Transformer context (SGB's ``model_transformer.py``) and ``TransformerPredictor``.

Objects of one image attend to each other (padded per image, masked): an object encoder over
``[roi feature, class embedding, box embedding]`` and an edge encoder over
``[roi feature, object context, predicted-class embedding]``; the predictor then builds pair
features as MOTIFS does and adds a context branch (``ctx_compress``) to the visual branch.
"""
import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from .base import ObjectContext, PairPredictor
from .utils_motifs import check_inputs, encode_box_info, to_onehot
from .utils_relation import obj_prediction_nms

__all__ = ['MultiHeadAttention', 'PositionwiseFeedForward',
           'EncoderLayer', 'TransformerEncoder', 'TransformerContext', 'TransformerPredictor']


class MultiHeadAttention(nn.Module):
    """Multi-head self-attention with residual and LayerNorm (post-norm).

    Per head ``softmax(q k^T / sqrt(d_k)) v``, masked keys at ``-inf``, dropout 0.1 on the
    attention weights: SGB's ``ScaledDotProductAttention``, which has no parameters, inlined.

    Parameters
    ----------
    n_head, d_model, d_k, d_v : int
    dropout : float
    """

    def __init__(self, n_head, d_model, d_k, d_v, dropout=0.1):
        super().__init__()
        self.n_head, self.d_k, self.d_v = n_head, d_k, d_v
        self.w_qs = nn.Linear(d_model, n_head * d_k)
        self.w_ks = nn.Linear(d_model, n_head * d_k)
        self.w_vs = nn.Linear(d_model, n_head * d_v)
        nn.init.normal_(self.w_qs.weight, mean=0, std=np.sqrt(2.0 / (d_model + d_k)))
        nn.init.normal_(self.w_ks.weight, mean=0, std=np.sqrt(2.0 / (d_model + d_k)))
        nn.init.normal_(self.w_vs.weight, mean=0, std=np.sqrt(2.0 / (d_model + d_v)))
        self.temperature = np.power(d_k, 0.5)
        self.attn_dropout = nn.Dropout(0.1)
        self.layer_norm = nn.LayerNorm(d_model)
        self.fc = nn.Linear(n_head * d_v, d_model)
        nn.init.xavier_normal_(self.fc.weight)
        self.dropout = nn.Dropout(dropout)

    def forward(self, q, k, v, mask=None):
        """``(B, Lq, d_model)``; ``mask`` ``(B, Lq, Lk)``, True at keys to ignore."""
        d_k, d_v, n_head = self.d_k, self.d_v, self.n_head
        sz_b, len_q, _ = q.size()
        len_k, len_v = k.size(1), v.size(1)
        residual = q
        q = self.w_qs(q).view(sz_b, len_q, n_head, d_k).permute(2, 0, 1, 3).reshape(-1, len_q, d_k)
        k = self.w_ks(k).view(sz_b, len_k, n_head, d_k).permute(2, 0, 1, 3).reshape(-1, len_k, d_k)
        v = self.w_vs(v).view(sz_b, len_v, n_head, d_v).permute(2, 0, 1, 3).reshape(-1, len_v, d_v)
        attn = torch.bmm(q, k.transpose(1, 2)) / self.temperature
        attn = F.softmax(attn.masked_fill(mask.repeat(n_head, 1, 1), -np.inf), dim=2)
        output = torch.bmm(self.attn_dropout(attn), v)
        output = output.view(n_head, sz_b, len_q, d_v).permute(1, 2, 0, 3).reshape(sz_b, len_q, -1)
        output = self.dropout(self.fc(output))
        return self.layer_norm(output + residual)


class PositionwiseFeedForward(nn.Module):
    """Two 1x1 convolutions with residual and LayerNorm.

    Parameters
    ----------
    d_in, d_hid : int
    dropout : float
    """

    def __init__(self, d_in, d_hid, dropout=0.1):
        super().__init__()
        self.w_1 = nn.Conv1d(d_in, d_hid, 1)
        self.w_2 = nn.Conv1d(d_hid, d_in, 1)
        self.layer_norm = nn.LayerNorm(d_in)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        """``(B, L, d_in) -> (B, L, d_in)``."""
        out = self.w_2(F.relu(self.w_1(x.transpose(1, 2)))).transpose(1, 2)
        return self.layer_norm(self.dropout(out) + x)


class EncoderLayer(nn.Module):
    """Self-attention then feed-forward, padded rows zeroed after each.

    Parameters
    ----------
    d_model, d_inner, n_head, d_k, d_v : int
    dropout : float
    """

    def __init__(self, d_model, d_inner, n_head, d_k, d_v, dropout=0.1):
        super().__init__()
        self.slf_attn = MultiHeadAttention(n_head, d_model, d_k, d_v, dropout=dropout)
        self.pos_ffn = PositionwiseFeedForward(d_model, d_inner, dropout=dropout)

    def forward(self, enc_input, non_pad_mask=None, slf_attn_mask=None):
        """``(B, L, d_model)``, padded rows zero."""
        out = self.slf_attn(enc_input, enc_input, enc_input, mask=slf_attn_mask)
        out = out * non_pad_mask.float()
        return self.pos_ffn(out) * non_pad_mask.float()


class TransformerEncoder(nn.Module):
    """``n_layers`` encoder layers over each image's objects (padded batch, masked keys).

    Parameters
    ----------
    n_layers, n_head, d_k, d_v, d_model, d_inner : int
    dropout : float
    """

    def __init__(self, n_layers, n_head, d_k, d_v, d_model, d_inner, dropout=0.1):
        super().__init__()
        self.layer_stack = nn.ModuleList([EncoderLayer(d_model, d_inner, n_head, d_k, d_v,
                                                       dropout=dropout)
                                          for _ in range(n_layers)])

    def forward(self, input_feats, num_objs):
        """``(sum N_i, d_model) -> (sum N_i, d_model)``, objects attending within their image."""
        padded = nn.utils.rnn.pad_sequence(input_feats.split(num_objs, dim=0), batch_first=True)
        pad_len, counts = max(num_objs), torch.as_tensor(num_objs, device=padded.device)
        valid = torch.arange(pad_len, device=padded.device)[None] < counts[:, None]   # (B, L)
        slf_attn_mask = (~valid).unsqueeze(1).expand(-1, pad_len, -1)   # padded keys
        non_pad_mask = valid.unsqueeze(-1)
        out = padded
        for layer in self.layer_stack:
            out = layer(out, non_pad_mask=non_pad_mask, slf_attn_mask=slf_attn_mask)
        return out[non_pad_mask.squeeze(-1)]


class TransformerContext(ObjectContext):
    """SGB's ``TransformerContext``.

    Parameters
    ----------
    cfg : yacs.config.CfgNode
        ``MODEL.ROI_RELATION_HEAD.{EMBED_DIM, CONTEXT_HIDDEN_DIM, USE_GT_BOX,
        USE_GT_OBJECT_LABEL, TRANSFORMER.*}``, ``TEST.RELATION.LATER_NMS_PREDICTION_THRES``,
        ``GLOVE_DIR``.
    obj_classes, rel_classes : list of str
    in_channels : int
    """

    def __init__(self, cfg, obj_classes, rel_classes, in_channels):
        super().__init__(cfg, obj_classes, rel_classes, in_channels, pos_embed=False)
        t = cfg.MODEL.ROI_RELATION_HEAD.TRANSFORMER
        self.nms_thresh = cfg.TEST.RELATION.LATER_NMS_PREDICTION_THRES
        self.bbox_embed = nn.Sequential(nn.Linear(9, 32), nn.ReLU(inplace=True), nn.Dropout(0.1),
                                        nn.Linear(32, 128), nn.ReLU(inplace=True),
                                        nn.Dropout(0.1))
        self.lin_obj = nn.Linear(in_channels + self.embed_dim + 128, self.hidden_dim)
        self.lin_edge = nn.Linear(self.embed_dim + self.hidden_dim + in_channels, self.hidden_dim)
        self.out_obj = nn.Linear(self.hidden_dim, self.num_obj_classes)
        layer = (t.NUM_HEAD, t.KEY_DIM, t.VAL_DIM, self.hidden_dim, t.INNER_DIM, t.DROPOUT_RATE)
        self.context_obj = TransformerEncoder(t.OBJ_LAYER, *layer)
        self.context_edge = TransformerEncoder(t.REL_LAYER, *layer)

    def forward(self, roi_features, proposals, logger=None):
        """``(obj_dists (N, C), obj_preds (N,), edge_ctx (N, hidden_dim))``."""
        obj_labels, _, obj_embed = self._object_inputs(
            proposals, self.training or self.cfg.MODEL.ROI_RELATION_HEAD.USE_GT_OBJECT_LABEL)
        pos_embed = self.bbox_embed(encode_box_info(proposals))
        num_objs = [len(p) for p in proposals]
        obj_pre_rep = self.lin_obj(torch.cat((roi_features, obj_embed, pos_embed), -1))
        obj_feats = self.context_obj(obj_pre_rep, num_objs)
        if self.mode == 'predcls':
            obj_preds = obj_labels.long()
            obj_dists = to_onehot(obj_preds, self.num_obj_classes)
        else:
            obj_dists = self.out_obj(obj_feats)
            if self.mode == 'sgdet' and not self.training:
                obj_preds = self.nms_per_cls(obj_dists, [p.get_field('boxes_per_cls')
                                                         for p in proposals], num_objs)
            else:
                obj_preds = obj_dists[:, 1:].max(1)[1] + 1
        edge_pre_rep = torch.cat((roi_features, obj_feats, self.obj_embed2(obj_preds)), dim=-1)
        edge_ctx = self.context_edge(self.lin_edge(edge_pre_rep), num_objs)
        return obj_dists, obj_preds, edge_ctx

    def nms_per_cls(self, obj_dists, boxes_per_cls, num_objs):
        """Per-image greedy NMS labels (background column at ``-1``, as SGB's Transformer)."""
        return torch.cat([obj_prediction_nms(b, d, self.nms_thresh, bg_value=-1.0)
                          for b, d in zip(boxes_per_cls, obj_dists.split(num_objs, dim=0))], 0)


class TransformerPredictor(PairPredictor):
    """SGB's ``TransformerPredictor``.

    ``rel = rel_compress(post_cat(pair) * union) + ctx_compress(pair) [+ freq_bias]``. SGB
    crashes (``visual_rep`` undefined) with ``PREDICT_USE_VISION False``; here the visual term
    is then left out (``rel = ctx_compress(pair) [+ freq_bias]``), see docs/faithfulness.md.

    Parameters
    ----------
    cfg : yacs.config.CfgNode
    in_channels : int
    statistics : dict
    """

    def __init__(self, cfg, in_channels, statistics):
        super().__init__(cfg, statistics)
        self.context_layer = TransformerContext(cfg, self.obj_classes, self.rel_classes,
                                                in_channels)
        self._add_post_layers(cfg, statistics, [('rel_compress', self.pooling_dim),
                                                ('ctx_compress', self.hidden_dim * 2)],
                              ('post_emb', 'rel_compress', 'ctx_compress', 'post_cat'))

    def forward(self, proposals, rel_pair_idxs, rel_labels, rel_binarys, roi_features,
                union_features, logger=None):
        """Same contract as :meth:`MotifPredictor.forward`."""
        check_inputs(proposals, rel_pair_idxs)
        obj_dists, obj_preds, edge_ctx = self.context_layer(roi_features, proposals, logger)
        prod_rep, pair_pred, _ = self.pair_context(edge_ctx, obj_preds, proposals,
                                                   rel_pair_idxs)
        rel_dists = self.ctx_compress(prod_rep)
        if self.use_vision:
            union = self._union(union_features)
            rel_dists = self.rel_compress(self.post_cat(prod_rep) * union) + rel_dists
        rel_dists = self._add_bias(rel_dists, pair_pred)
        return self._per_image(proposals, rel_pair_idxs, obj_dists, rel_dists)
