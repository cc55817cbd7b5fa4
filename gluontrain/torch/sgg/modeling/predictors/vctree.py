"""VCTree (Tang et al. 2019, "Learning to Compose Dynamic Tree Structures for Visual
Contexts") as Scene-Graph-Benchmark implements it.

A score network rates every object pair of an image (a learned visual prior times the
class co-occurrence prior); the scores build one dynamic tree per image
(:mod:`.utils_vctree`), along which bidirectional tree LSTMs (:mod:`.utils_treelstm`) encode
object context, decode object labels (SGCls / SGDet) and encode edge context. The predictor then
works as MOTIFS' (head/tail halves, union features, frequency bias) and, in training, adds SGB's
``binary_loss`` on the pair scores against "has any relation".
"""
import torch
from torch import nn
from torch.nn import functional as F

from .base import ObjectContext, PairPredictor, binary_loss
from .utils_motifs import check_inputs, encode_box_info, glove_embeddings, to_onehot
from .utils_relation import layer_init
from .utils_treelstm import MultiLayer_BTreeLSTM, tree_lstm_class
from .utils_vctree import arbForest_to_biForest, generate_forest, get_overlap_info

__all__ = ['DecoderTreeLSTM', 'VCTreeLSTMContext', 'VCTreePredictor']


class DecoderTreeLSTM(nn.Module):
    """Object-label decoder along the tree (SGB's default direction: root to leaves).

    Parameters
    ----------
    cfg : yacs.config.CfgNode
    classes : list of str
    embed_dim, inputs_dim, hidden_dim : int
    direction : {'backward', 'foreward'}
    dropout : float
    """

    def __init__(self, cfg, classes, embed_dim, inputs_dim, hidden_dim, direction='backward',
                 dropout=0.2):
        super().__init__()
        self.dropout = dropout
        self.obj_embed, = glove_embeddings(['start'] + list(classes), cfg.GLOVE_DIR, embed_dim)
        self.out = nn.Linear(hidden_dim, len(classes))
        lstm = tree_lstm_class(direction)
        # the parent's class embedding (backward), or both children's (foreward), is input
        self.input_size = inputs_dim + embed_dim * (1 if direction == 'backward' else 2)
        self.decoderLSTM = lstm(self.input_size, hidden_dim, True, self.obj_embed, self.out)

    def forward(self, tree, features, num_obj):
        """``(dists (num_obj, C), commitments (num_obj,))`` in object order."""
        io = self.decoderLSTM.walk(tree, features, num_obj, self.dropout)
        return torch.stack(io.dists, 0), torch.cat(io.commitments, 0)


class VCTreeLSTMContext(ObjectContext):
    """SGB's ``VCTreeLSTMContext``.

    Parameters
    ----------
    cfg : yacs.config.CfgNode
        As :class:`~.motifs.LSTMContext` (``CONTEXT_HIDDEN_DIM`` must be even: each tree
        direction gets half).
    obj_classes, rel_classes : list of str
    statistics : dict
        ``pred_dist`` gives the co-occurrence prior (``pred_dist.sum(-1)``, symmetrised).
    in_channels : int
    """

    def __init__(self, cfg, obj_classes, rel_classes, statistics, in_channels):
        super().__init__(cfg, obj_classes, rel_classes, in_channels)
        self.overlap_embed = nn.Sequential(nn.Linear(6, 128), nn.BatchNorm1d(128, momentum=0.001),
                                           nn.ReLU(inplace=True))
        self.box_embed = nn.Sequential(nn.Linear(9, 128), nn.BatchNorm1d(128, momentum=0.001),
                                       nn.ReLU(inplace=True))
        self._layer_counts()
        co_occour = torch.as_tensor(statistics['pred_dist']).float().sum(-1)
        if co_occour.dim() != 2 or co_occour.shape[0] != co_occour.shape[1]:
            raise ValueError("statistics['pred_dist'] must be (C_obj, C_obj, C_rel)")
        self.bi_freq_prior = nn.Linear(self.num_obj_classes * self.num_obj_classes, 1,
                                       bias=False)
        with torch.no_grad():
            self.bi_freq_prior.weight.copy_((co_occour + co_occour.t()).view(-1).unsqueeze(0))
        self.obj_reduce = nn.Linear(self.obj_dim, 128)
        self.emb_reduce = nn.Linear(self.embed_dim, 128)
        self.score_pre = nn.Linear(128 * 4, self.hidden_dim)
        self.score_sub = nn.Linear(self.hidden_dim, self.hidden_dim)
        self.score_obj = nn.Linear(self.hidden_dim, self.hidden_dim)
        self.vision_prior = nn.Linear(self.hidden_dim * 3 + 1, 1)
        for lin in (self.obj_reduce, self.emb_reduce, self.score_pre, self.score_sub,
                    self.score_obj):
            layer_init(lin, xavier=True)
        obj_in = self.obj_dim + self.embed_dim + 128
        self.obj_ctx_rnn = MultiLayer_BTreeLSTM(obj_in, self.hidden_dim, self.nl_obj,
                                                self.dropout_rate if self.nl_obj > 1 else 0)
        self.decoder_rnn = DecoderTreeLSTM(cfg, obj_classes, embed_dim=self.embed_dim,
                                           inputs_dim=self.hidden_dim + obj_in,
                                           hidden_dim=self.hidden_dim,
                                           dropout=self.dropout_rate)
        self.edge_ctx_rnn = MultiLayer_BTreeLSTM(self.embed_dim + self.hidden_dim + self.obj_dim,
                                                 self.hidden_dim, self.nl_edge,
                                                 self.dropout_rate if self.nl_edge > 1 else 0)
        self._register_untreated(obj_in, self.embed_dim + self.obj_dim, self.hidden_dim + obj_in)

    def obj_ctx(self, num_objs, obj_feats, proposals, obj_labels=None, vc_forest=None,
                ctx_average=False):
        """Per-image object context and labels: ``(obj_ctxs, obj_preds, obj_dists)``."""
        feats = obj_feats.split(num_objs, dim=0)
        labels = obj_labels.split(num_objs, dim=0) if obj_labels is not None else None
        ctxs, preds, dists = [], [], []
        for i, (feat, tree, proposal) in enumerate(zip(feats, vc_forest, proposals)):
            enc = self.obj_ctx_rnn(tree, feat, len(proposal))
            ctxs.append(enc)
            if self.mode != 'predcls':
                dec_inp = self._decoder_input(feat, enc, ctx_average)
                dist, pred = self.decoder_rnn(tree, dec_inp, len(proposal))
            else:
                pred = labels[i]
                dist = to_onehot(pred, self.num_obj_classes)
            preds.append(pred)
            dists.append(dist)
        return torch.cat(ctxs, dim=0), torch.cat(preds, dim=0), torch.cat(dists, dim=0)

    def edge_ctx(self, num_objs, obj_feats, forest):
        """Edge context along each image's tree: ``(sum N_i, hidden_dim)``."""
        return torch.cat([self.edge_ctx_rnn(tree, feat, n) for feat, tree, n in
                          zip(obj_feats.split(num_objs, dim=0), forest, num_objs)], dim=0)

    def vctree_score_net(self, num_objs, roi_feat, roi_dist, proposals):
        """Pair scores: ``(bi_preds, vc_scores)``, per image ``(N_i, N_i)`` each.

        ``bi_preds = sigmoid(vision_prior) * co_prior`` (the binary-loss logits) and
        ``vc_scores = sigmoid(bi_preds)`` (the tree scores).
        """
        roi_dist = F.softmax(roi_dist.detach(), dim=-1)
        roi_feat = F.relu(self.score_pre(roi_feat))
        sub_feat = F.relu(self.score_sub(roi_feat))
        obj_feat = F.relu(self.score_obj(roi_feat))
        bi_preds, vc_scores = [], []
        for sub, obj, dist in zip(sub_feat.split(num_objs, dim=0), obj_feat.split(num_objs, dim=0),
                                  roi_dist.split(num_objs, dim=0)):
            n, d = sub.shape
            sub = sub.view(1, n, d).expand(n, n, d)
            obj = obj.view(n, 1, d).expand(n, n, d)
            # joint[i, j] = outer(dist[i], dist[j]) flattened: the pair's class co-occurrence
            joint = dist[None, :, None, :] * dist[:, None, :, None]
            co_prior = self.bi_freq_prior(joint.view(n * n, -1)).view(n, n)
            vis_in = torch.cat([sub * obj, sub, obj, co_prior.unsqueeze(-1)], dim=-1)
            vis_prior = self.vision_prior(vis_in.view(n * n, -1)).view(n, n)
            pred = torch.sigmoid(vis_prior) * co_prior
            bi_preds.append(pred)
            vc_scores.append(torch.sigmoid(pred))
        return bi_preds, vc_scores

    def forward(self, x, proposals, rel_pair_idxs=None, logger=None, all_average=False,
                ctx_average=False):
        """``(obj_dists, obj_preds, edge_ctx, bi_preds)`` as :class:`~.motifs.LSTMContext`."""
        num_objs = [len(b) for b in proposals]
        obj_labels, obj_logits, obj_embed = self._object_inputs(
            proposals, self.training or self.cfg.MODEL.ROI_RELATION_HEAD.USE_GT_BOX)
        if obj_logits is None:    # ground-truth labels: their one-hot logits rate the pairs
            obj_logits = to_onehot(obj_labels, self.num_obj_classes)
        box_info = encode_box_info(proposals)
        pos_embed = self.pos_embed(box_info)
        obj_pre_rep = self._object_rep(x, obj_embed, pos_embed, all_average)
        box_inp = self.box_embed(box_info)
        pair_inp = self.overlap_embed(get_overlap_info(proposals))
        bi_inp = torch.cat((self.obj_reduce(x.detach()), self.emb_reduce(obj_embed.detach()),
                            box_inp, pair_inp), -1)
        bi_preds, vc_scores = self.vctree_score_net(num_objs, bi_inp, obj_logits, proposals)
        vc_forest = arbForest_to_biForest(generate_forest(vc_scores, proposals, self.mode))
        obj_ctxs, obj_preds, obj_dists = self.obj_ctx(num_objs, obj_pre_rep, proposals,
                                                      obj_labels, vc_forest, ctx_average)
        obj_embed2, obj_rel_rep = self._edge_input(x, obj_preds, obj_ctxs,
                                                  all_average or ctx_average)
        edge_ctx = self.edge_ctx(num_objs, obj_rel_rep, vc_forest)
        self._update_untreated(obj_pre_rep, (obj_embed2, x))
        return obj_dists, obj_preds, edge_ctx, bi_preds


class VCTreePredictor(PairPredictor):
    """SGB's ``VCTreePredictor`` (vision and frequency bias always on, as SGB).

    Parameters
    ----------
    cfg : yacs.config.CfgNode
    in_channels : int
    statistics : dict
    """

    def __init__(self, cfg, in_channels, statistics):
        super().__init__(cfg, statistics)
        self.use_vision = self.use_bias = True
        self.context_layer = VCTreeLSTMContext(cfg, self.obj_classes, self.rel_classes,
                                               statistics, in_channels)
        self._add_post_layers(cfg, statistics, [('ctx_compress', self.pooling_dim)],
                              ('ctx_compress', 'post_emb', 'post_cat'))

    def forward(self, proposals, rel_pair_idxs, rel_labels, rel_binarys, roi_features,
                union_features, logger=None):
        """Same contract as :meth:`MotifPredictor.forward`; training needs ``rel_binarys``
        (per image ``(N_i, N_i)``, > 0 where a relation exists) for ``binary_loss``."""
        check_inputs(proposals, rel_pair_idxs)
        obj_dists, obj_preds, edge_ctx, binary_preds = self.context_layer(
            roi_features, proposals, rel_pair_idxs, logger)
        prod_rep, pair_pred, _ = self.pair_context(edge_ctx, obj_preds, proposals,
                                                   rel_pair_idxs, relu=True)
        prod_rep = self.post_cat(prod_rep)
        rel_dists = self._add_bias(self.ctx_compress(prod_rep * self._union(union_features)),
                                  pair_pred)
        add_losses = {}
        if self.training:
            if rel_binarys is None:
                raise ValueError('VCTreePredictor needs rel_binarys in training')
            add_losses['binary_loss'] = binary_loss(rel_binarys, binary_preds)
        return self._per_image(proposals, rel_pair_idxs, obj_dists, rel_dists, add_losses)
