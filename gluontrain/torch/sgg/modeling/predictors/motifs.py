"""Neural MOTIFS (Zellers et al. 2018) as Scene-Graph-Benchmark implements it.

:class:`LSTMContext` orders the objects of each image left to right and runs a bidirectional
object-context LSTM over ``[roi feature, class embedding, box embedding]``; a highway-LSTM
decoder (:class:`DecoderRNN`) predicts object labels in SGCls / SGDet (with per-class NMS at
SGDet test time), and an edge-context LSTM produces one feature per object. :class:`MotifPredictor`
turns each object's edge feature into a head and a tail half, multiplies the pair feature with
the union-box feature and adds the frequency bias.

The ``untreated_*`` moving averages (``CAUSAL.EFFECT_ANALYSIS``) serve the causal predictor's
counterfactual (TDE) forward.
"""
import torch
from torch import nn
from torch.nn import functional as F
from torch.nn.utils.rnn import PackedSequence

from .base import ObjectContext, PairPredictor
from .utils_motifs import (check_inputs, encode_box_info, get_dropout_mask, glove_embeddings,
                           sort_rois, to_onehot)
from .utils_relation import obj_prediction_nms

__all__ = ['DecoderRNN', 'LSTMContext', 'MotifPredictor']


class DecoderRNN(nn.Module):
    """Highway LSTM decoding object labels one time step (one object per image) at a time.

    Parameters
    ----------
    cfg : yacs.config.CfgNode
    obj_classes : list of str
    embed_dim, inputs_dim, hidden_dim : int
    rnn_drop : float
        Dropout on the step output, one mask per sequence.
    """

    def __init__(self, cfg, obj_classes, embed_dim, inputs_dim, hidden_dim, rnn_drop):
        super().__init__()
        self.obj_embed, = glove_embeddings(['start'] + list(obj_classes), cfg.GLOVE_DIR,
                                           embed_dim)
        self.hidden_size = hidden_dim
        self.rnn_drop = rnn_drop
        self.input_linearity = nn.Linear(inputs_dim + embed_dim, 6 * hidden_dim, bias=True)
        self.state_linearity = nn.Linear(hidden_dim, 5 * hidden_dim, bias=True)
        self.out_obj = nn.Linear(hidden_dim, len(obj_classes))
        nn.init.constant_(self.state_linearity.bias, 0.0)
        nn.init.constant_(self.input_linearity.bias, 0.0)

    def lstm_equations(self, timestep_input, previous_state, previous_memory, dropout_mask=None):
        """One highway-LSTM step; returns ``(output, memory)``."""
        h = self.hidden_size
        pi = self.input_linearity(timestep_input)
        ps = self.state_linearity(previous_state)
        input_gate = torch.sigmoid(pi[:, 0:h] + ps[:, 0:h])
        forget_gate = torch.sigmoid(pi[:, h:2 * h] + ps[:, h:2 * h])
        memory_init = torch.tanh(pi[:, 2 * h:3 * h] + ps[:, 2 * h:3 * h])
        output_gate = torch.sigmoid(pi[:, 3 * h:4 * h] + ps[:, 3 * h:4 * h])
        memory = input_gate * memory_init + forget_gate * previous_memory
        output = output_gate * torch.tanh(memory)
        highway_gate = torch.sigmoid(pi[:, 4 * h:5 * h] + ps[:, 4 * h:5 * h])
        output = highway_gate * output + (1 - highway_gate) * pi[:, 5 * h:6 * h]
        if dropout_mask is not None and self.training:
            output = output * dropout_mask
        return output, memory

    def forward(self, inputs, labels=None):
        """Decode a packed sequence.

        Parameters
        ----------
        inputs : PackedSequence
            Time-major object features.
        labels : torch.Tensor, optional
            Packed-order labels (training: the embedding of step ``t`` feeds step ``t+1``,
            background labels replaced by the predicted foreground class).

        Returns
        -------
        tuple of torch.Tensor
            ``(dists (N, C) packed order, commitments (N,) packed order)``; in eval the
            commitments are the greedy argmax over foreground classes (NMS is applied by the
            caller, per image).
        """
        seq, batch_lengths = inputs.data, inputs.batch_sizes
        batch_size = int(batch_lengths[0])
        memory = state = seq.new_zeros(batch_size, self.hidden_size)   # never changed in place
        prev_embed = self.obj_embed.weight[0, None].expand(batch_size, -1)
        dropout_mask = (get_dropout_mask(self.rnn_drop, memory.size(), memory.device)
                        if self.rnn_drop > 0.0 else None)
        out_dists, commitments = [], []
        end = 0
        for l_batch in batch_lengths.tolist():
            start, end = end, end + l_batch
            # the batch shrinks as shorter images end: keep the rows still running
            memory, state, prev_embed = memory[:l_batch], state[:l_batch], prev_embed[:l_batch]
            if dropout_mask is not None:
                dropout_mask = dropout_mask[:l_batch]
            step_input = torch.cat((seq[start:end], prev_embed), 1)
            state, memory = self.lstm_equations(step_input, state, memory, dropout_mask)
            dist = self.out_obj(state)
            out_dists.append(dist)
            if self.training:
                step_labels = labels[start:end]
                fg_pred = dist[:, 1:].max(1)[1] + 1
                embed_labels = torch.where(step_labels == 0, fg_pred, step_labels)
            else:
                # SGB asserts one image per step here; the argmax is per row, so any works
                embed_labels = F.softmax(dist, dim=1)[:, 1:].max(1)[1] + 1
            commitments.append(embed_labels)
            prev_embed = self.obj_embed(embed_labels + 1)
        return torch.cat(out_dists, 0), torch.cat(commitments, 0)


class LSTMContext(ObjectContext):
    """MOTIFS object and edge context (SGB's ``LSTMContext``).

    Parameters
    ----------
    cfg : yacs.config.CfgNode
        Reads ``MODEL.ROI_RELATION_HEAD.{USE_GT_BOX, USE_GT_OBJECT_LABEL, EMBED_DIM,
        CONTEXT_DROPOUT_RATE, CONTEXT_HIDDEN_DIM, CONTEXT_OBJ_LAYER, CONTEXT_REL_LAYER,
        CAUSAL.EFFECT_ANALYSIS}``, ``TEST.RELATION.LATER_NMS_PREDICTION_THRES``, ``GLOVE_DIR``.
    obj_classes, rel_classes : list of str
    in_channels : int
        ROI feature size.
    sort_mode : {'leftright', 'confidence', 'size'}
        Object order for the LSTMs; SGB always uses ``'leftright'``.
    """

    def __init__(self, cfg, obj_classes, rel_classes, in_channels, sort_mode='leftright'):
        super().__init__(cfg, obj_classes, rel_classes, in_channels)
        self.sort_mode = sort_mode
        self._layer_counts()
        self.nms_thresh = cfg.TEST.RELATION.LATER_NMS_PREDICTION_THRES
        obj_in = self.obj_dim + self.embed_dim + 128

        def context_lstm(input_size, layers):   # dropout only between stacked layers
            return nn.LSTM(input_size=input_size, hidden_size=self.hidden_dim, num_layers=layers,
                           dropout=self.dropout_rate if layers > 1 else 0, bidirectional=True)
        self.obj_ctx_rnn = context_lstm(obj_in, self.nl_obj)
        self.decoder_rnn = DecoderRNN(cfg, obj_classes, embed_dim=self.embed_dim,
                                      inputs_dim=self.hidden_dim + obj_in,
                                      hidden_dim=self.hidden_dim, rnn_drop=self.dropout_rate)
        self.edge_ctx_rnn = context_lstm(self.embed_dim + self.hidden_dim + self.obj_dim,
                                         self.nl_edge)
        self.lin_obj_h = nn.Linear(self.hidden_dim * 2, self.hidden_dim)
        self.lin_edge_h = nn.Linear(self.hidden_dim * 2, self.hidden_dim)
        self._register_untreated(obj_in, self.embed_dim + self.obj_dim, self.hidden_dim + obj_in)

    def obj_ctx(self, obj_feats, proposals, obj_labels=None, boxes_per_cls=None,
                ctx_average=False, obj_logits=None):
        """Object context LSTM and label decoding.

        Returns
        -------
        tuple
            ``(obj_dists, obj_preds, obj_ctx, perm, inv_perm, ls_transposed)``, rows in the
            proposals' order.
        """
        perm, inv_perm, ls_transposed = sort_rois(proposals, self.sort_mode, obj_logits)
        obj_inp_rep = obj_feats[perm].contiguous()
        encoder_rep = self.obj_ctx_rnn(PackedSequence(obj_inp_rep, ls_transposed))[0][0]
        encoder_rep = self.lin_obj_h(encoder_rep)
        decoder_inp = self._decoder_input(obj_inp_rep, encoder_rep, ctx_average)
        if self.mode != 'predcls':
            obj_dists, obj_preds = self.decoder_rnn(
                PackedSequence(decoder_inp, ls_transposed),
                labels=obj_labels[perm] if obj_labels is not None else None)
            obj_dists, obj_preds = obj_dists[inv_perm], obj_preds[inv_perm]
            if boxes_per_cls is not None and not self.training:
                obj_preds = self._nms_labels(obj_dists, boxes_per_cls, perm, proposals)
        else:
            obj_preds = obj_labels
            obj_dists = to_onehot(obj_preds, self.num_obj_classes)
        return obj_dists, obj_preds, encoder_rep[inv_perm], perm, inv_perm, ls_transposed

    def _nms_labels(self, obj_dists, boxes_per_cls, perm, proposals):
        # SGB runs the greedy NMS on one image in LSTM order; per image, same order here
        labels = torch.zeros(obj_dists.shape[0], dtype=torch.long, device=obj_dists.device)
        start = 0
        for p in proposals:
            end = start + len(p)
            order = perm[(perm >= start) & (perm < end)]
            labels[order] = obj_prediction_nms(boxes_per_cls[order], obj_dists[order],
                                               self.nms_thresh, bg_value=0.0)
            start = end
        return labels

    def edge_ctx(self, inp_feats, perm, inv_perm, ls_transposed):
        """Edge context LSTM; returns ``(N, hidden_dim)`` in the proposals' order."""
        edge_reps = self.edge_ctx_rnn(PackedSequence(inp_feats[perm], ls_transposed))[0][0]
        return self.lin_edge_h(edge_reps)[inv_perm]

    def forward(self, x, proposals, rel_pair_idxs=None, logger=None, all_average=False,
                ctx_average=False):
        """Contexts for every object.

        Parameters
        ----------
        x : torch.Tensor
            ``(sum N_i, in_channels)`` ROI features.
        proposals : list of BoxList
            Fields ``labels`` (training, or PredCls/SGCls), ``predict_logits`` (SGCls/SGDet),
            ``boxes_per_cls`` (SGDet test).
        rel_pair_idxs : list, optional
            Unused (VCTree's context needs it; same signature).
        logger : optional
        all_average, ctx_average : bool
            Counterfactual inputs (mean features) at test time with ``EFFECT_ANALYSIS``.

        Returns
        -------
        tuple
            ``(obj_dists (N, C), obj_preds (N,), edge_ctx (N, hidden_dim), None)``.
        """
        obj_labels, obj_logits, obj_embed = self._object_inputs(
            proposals, self.training or self.cfg.MODEL.ROI_RELATION_HEAD.USE_GT_BOX)
        pos_embed = self.pos_embed(encode_box_info(proposals))
        obj_pre_rep = self._object_rep(x, obj_embed, pos_embed, all_average)
        boxes_per_cls = None
        if self.mode == 'sgdet' and not self.training:
            boxes_per_cls = torch.cat([p.get_field('boxes_per_cls') for p in proposals], dim=0)
        if self.sort_mode == 'confidence' and obj_logits is None:
            obj_logits = to_onehot(obj_labels, self.num_obj_classes)
        obj_dists, obj_preds, obj_ctx, perm, inv_perm, ls_transposed = self.obj_ctx(
            obj_pre_rep, proposals, obj_labels, boxes_per_cls, ctx_average=ctx_average,
            obj_logits=obj_logits)
        obj_embed2, obj_rel_rep = self._edge_input(x, obj_preds, obj_ctx,
                                                  all_average or ctx_average)
        edge_ctx = self.edge_ctx(obj_rel_rep, perm, inv_perm, ls_transposed)
        self._update_untreated(obj_pre_rep, (obj_embed2, x))
        return obj_dists, obj_preds, edge_ctx, None


class MotifPredictor(PairPredictor):
    """SGB's ``MotifPredictor``.

    Parameters
    ----------
    cfg : yacs.config.CfgNode
        Besides :class:`LSTMContext`'s keys: ``MODEL.ROI_BOX_HEAD.{NUM_CLASSES, MLP_HEAD_DIM}``,
        ``MODEL.ROI_RELATION_HEAD.{NUM_CLASSES, CONTEXT_POOLING_DIM, PREDICT_USE_VISION,
        PREDICT_USE_BIAS}``, ``MODEL.ATTRIBUTE_ON`` (must be False).
    in_channels : int
        ROI feature size.
    statistics : dict
        SGB's statistics (``obj_classes``, ``rel_classes``, ``pred_dist`` ...).
    sort_mode : str
        Passed to :class:`LSTMContext`.
    """

    def __init__(self, cfg, in_channels, statistics, sort_mode='leftright'):
        super().__init__(cfg, statistics)
        self.context_layer = LSTMContext(cfg, self.obj_classes, self.rel_classes, in_channels,
                                         sort_mode=sort_mode)
        self._add_post_layers(cfg, statistics, [('rel_compress', self.pooling_dim)],
                              ('post_emb', 'post_cat', 'rel_compress'))

    def forward(self, proposals, rel_pair_idxs, rel_labels, rel_binarys, roi_features,
                union_features, logger=None):
        """Object and relation logits.

        Parameters
        ----------
        proposals : list of BoxList
        rel_pair_idxs : list of torch.Tensor
            ``(R_i, 2)`` per image.
        rel_labels, rel_binarys : list or None
            Unused here (SGB's signature).
        roi_features : torch.Tensor
            ``(sum N_i, in_channels)``.
        union_features : torch.Tensor
            ``(sum R_i, MLP_HEAD_DIM)``.
        logger : optional

        Returns
        -------
        tuple
            ``(obj_dists, rel_dists, add_losses)``: tuples of per-image ``(N_i, C_obj)`` and
            ``(R_i, C_rel)`` logits, and an empty dict.
        """
        check_inputs(proposals, rel_pair_idxs)
        obj_dists, obj_preds, edge_ctx, _ = self.context_layer(roi_features, proposals,
                                                               rel_pair_idxs, logger)
        prod_rep, pair_pred, _ = self.pair_context(edge_ctx, obj_preds, proposals,
                                                   rel_pair_idxs)
        prod_rep = self.post_cat(prod_rep)
        if self.use_vision:
            prod_rep = prod_rep * self._union(union_features)
        rel_dists = self._add_bias(self.rel_compress(prod_rep), pair_pred)
        return self._per_image(proposals, rel_pair_idxs, obj_dists, rel_dists)
