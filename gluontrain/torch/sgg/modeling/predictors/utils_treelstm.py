"""Binary tree LSTMs of VCTree (SGB's ``utils_treelstm.py``).

The "foreward" LSTM walks a :class:`~.utils_vctree.BiTree` from the leaves to the root
(post-order, each node sees its left and right child's states), the "backward" one from the
root to the leaves (pre-order, each node sees its parent's). Both are highway LSTMs with one
dropout mask per tree. With ``is_pass_embed`` (the object decoder) every node also predicts its
class and passes the embedding of that class (sampled in training, argmax at test) on.

Outputs come back in object order (row ``i`` = object ``i``), as SGB's ``order`` bookkeeping.
"""
import itertools

import torch
from torch import nn
from torch.nn import functional as F

from .utils_motifs import get_dropout_mask

__all__ = ['block_orthogonal', 'TreeLSTM_IO', 'BiTreeLSTM_Foreward', 'BiTreeLSTM_Backward',
           'OneDirectionalTreeLSTM', 'BidirectionalTreeLSTM', 'MultiLayer_BTreeLSTM',
           'tree_lstm_class']


def block_orthogonal(tensor, split_sizes, gain=1.0):
    """Orthogonal initialisation block by block (AllenNLP's, as SGB).

    Parameters
    ----------
    tensor : torch.Tensor
        2-d, modified in place.
    split_sizes : list of int
        Block size per dimension; must divide the dimension.
    gain : float

    Raises
    ------
    ValueError
        A size is not divisible by its block size.
    """
    sizes = list(tensor.size())
    if any(a % b != 0 for a, b in zip(sizes, split_sizes)):
        raise ValueError('tensor dimensions must be divisible by their respective split_sizes. '
                         'Found size: {} and split_sizes: {}'.format(sizes, split_sizes))
    indexes = [list(range(0, size, split)) for size, split in zip(sizes, split_sizes)]
    for starts in itertools.product(*indexes):
        block = tuple(slice(s, s + step) for s, step in zip(starts, split_sizes))
        square = tensor.new(max(split_sizes), max(split_sizes))
        torch.nn.init.orthogonal_(square, gain=gain)
        tensor[block] = square[0:split_sizes[0], 0:split_sizes[1]]


class TreeLSTM_IO:
    """Per-walk results, indexed by object: hidden states, class logits, committed labels.

    Parameters
    ----------
    num_obj : int
    dropout_mask : torch.Tensor or None
    """

    def __init__(self, num_obj, dropout_mask):
        self.hidden = [None] * num_obj
        self.dists = [None] * num_obj
        self.commitments = [None] * num_obj
        self.dropout_mask = dropout_mask


class _HighwayTreeLSTM(nn.Module):
    """What both directions share: the input projection ``px``, the highway output, the
    per-node results and, in decoder mode, the class embedding passed on."""

    def __init__(self, feat_dim, h_dim, is_pass_embed=False, embed_layer=None,
                 embed_out_layer=None):
        super().__init__()
        self.h_dim = h_dim
        self.is_pass_embed = is_pass_embed
        self.embed_layer, self.embed_out_layer = embed_layer, embed_out_layer
        self.px = nn.Linear(feat_dim, h_dim)

    def _orthogonal_init(self, *layers):
        # AllenNLP's (SGB's) start: each gate's block orthogonal, biases 0; px first, as SGB
        with torch.no_grad():
            for lin in (self.px,) + layers:
                block_orthogonal(lin.weight, [self.h_dim, lin.in_features])
                lin.bias.fill_(0.0)

    def walk(self, tree, features, num_obj, dropout):
        """Run over ``tree`` with one dropout mask for the whole tree; returns the filled
        :class:`TreeLSTM_IO` (object order)."""
        io = TreeLSTM_IO(num_obj, get_dropout_mask(dropout, (1, self.h_dim), features.device)
                         if dropout > 0.0 else None)
        self(tree, features, io)
        return io

    def _highway(self, c, o, r, projected_x, dropout_mask):
        h = r * (o * torch.tanh(c)) + (1 - r) * projected_x
        if dropout_mask is not None and self.training:
            h = h * dropout_mask
        return h

    def _store(self, tree, h, io):
        # decoder mode: class logits of this node; the embedding of its (sampled) class goes
        # to the next nodes
        if self.is_pass_embed:
            pred_dist = self.embed_out_layer(h)
            prob = F.softmax(pred_dist.view(-1), 0)[1:]
            label = prob.max(0)[1] + 1
            passed = prob.multinomial(1).detach() + 1 if self.training else label
            tree.embeded_label = self.embed_layer(passed + 1)
            io.dists[tree.index] = pred_dist.view(-1)
            io.commitments[tree.index] = label.view(-1)
        io.hidden[tree.index] = h.view(-1)


class BiTreeLSTM_Foreward(_HighwayTreeLSTM):
    """Leaves-to-root highway tree LSTM.

    Parameters
    ----------
    feat_dim, h_dim : int
    is_pass_embed : bool
        Decoder mode: the input also holds the children's class embeddings.
    embed_layer : nn.Embedding, optional
    embed_out_layer : nn.Linear, optional
    """

    def __init__(self, feat_dim, h_dim, is_pass_embed=False, embed_layer=None,
                 embed_out_layer=None):
        super().__init__(feat_dim, h_dim, is_pass_embed, embed_layer, embed_out_layer)
        self.ioffux = nn.Linear(feat_dim, 6 * h_dim)
        self.ioffuh_left = nn.Linear(h_dim, 6 * h_dim)
        self.ioffuh_right = nn.Linear(h_dim, 6 * h_dim)
        self._orthogonal_init(self.ioffux, self.ioffuh_left, self.ioffuh_right)
        with torch.no_grad():
            # forget gates start half open (SGB's 0.5)
            self.ioffuh_left.bias[2 * h_dim:4 * h_dim].fill_(0.5)
            self.ioffuh_right.bias[2 * h_dim:4 * h_dim].fill_(0.5)

    def node_forward(self, feat_inp, left_c, right_c, left_h, right_h, dropout_mask):
        """One node: ``(c, h)``."""
        projected_x = self.px(feat_inp)
        ioffu = self.ioffux(feat_inp) + self.ioffuh_left(left_h) + self.ioffuh_right(right_h)
        i, o, f_l, f_r, u, r = torch.split(ioffu, ioffu.size(1) // 6, dim=1)
        i, o, f_l, f_r = torch.sigmoid(i), torch.sigmoid(o), torch.sigmoid(f_l), torch.sigmoid(f_r)
        u, r = torch.tanh(u), torch.sigmoid(r)
        c = i * u + f_l * left_c + f_r * right_c
        return c, self._highway(c, o, r, projected_x, dropout_mask)

    def _child(self, child, features):
        if child is None:
            zero = features.new_zeros(1, self.h_dim)
            embed = self.embed_layer.weight[0] if self.is_pass_embed else None
            return zero, zero, embed
        return child.state_c, child.state_h, child.embeded_label

    def forward(self, tree, features, treelstm_io):
        """Walk ``tree`` post-order, filling ``treelstm_io``."""
        for child in (tree.left_child, tree.right_child):
            if child is not None:
                self.forward(child, features, treelstm_io)
        left_c, left_h, left_embed = self._child(tree.left_child, features)
        right_c, right_h, right_embed = self._child(tree.right_child, features)
        x = features[tree.index].view(1, -1)
        if self.is_pass_embed:
            x = torch.cat((x, left_embed.view(1, -1), right_embed.view(1, -1)), 1)
        c, h = self.node_forward(x, left_c, right_c, left_h, right_h, treelstm_io.dropout_mask)
        tree.state_c, tree.state_h = c, h
        self._store(tree, h, treelstm_io)


class BiTreeLSTM_Backward(_HighwayTreeLSTM):
    """Root-to-leaves highway tree LSTM (parameters as :class:`BiTreeLSTM_Foreward`)."""

    def __init__(self, feat_dim, h_dim, is_pass_embed=False, embed_layer=None,
                 embed_out_layer=None):
        super().__init__(feat_dim, h_dim, is_pass_embed, embed_layer, embed_out_layer)
        self.iofux = nn.Linear(feat_dim, 5 * h_dim)
        self.iofuh = nn.Linear(h_dim, 5 * h_dim)
        self._orthogonal_init(self.iofux, self.iofuh)
        with torch.no_grad():
            self.iofuh.bias[2 * h_dim:3 * h_dim].fill_(1.0)

    def node_backward(self, feat_inp, root_c, root_h, dropout_mask):
        """One node: ``(c, h)``."""
        projected_x = self.px(feat_inp)
        iofu = self.iofux(feat_inp) + self.iofuh(root_h)
        i, o, f, u, r = torch.split(iofu, iofu.size(1) // 5, dim=1)
        i, o, f, u, r = (torch.sigmoid(i), torch.sigmoid(o), torch.sigmoid(f), torch.tanh(u),
                         torch.sigmoid(r))
        c = i * u + f * root_c
        return c, self._highway(c, o, r, projected_x, dropout_mask)

    def forward(self, tree, features, treelstm_io):
        """Walk ``tree`` pre-order, filling ``treelstm_io``."""
        if tree.parent is None:
            root_c = root_h = features.new_zeros(1, self.h_dim)
            root_embed = self.embed_layer.weight[0] if self.is_pass_embed else None
        else:
            root_c, root_h = tree.parent.state_c_backward, tree.parent.state_h_backward
            root_embed = tree.parent.embeded_label
        x = features[tree.index].view(1, -1)
        if self.is_pass_embed:
            x = torch.cat((x, root_embed.view(1, -1)), 1)
        c, h = self.node_backward(x, root_c, root_h, treelstm_io.dropout_mask)
        tree.state_c_backward, tree.state_h_backward = c, h
        self._store(tree, h, treelstm_io)
        for child in (tree.left_child, tree.right_child):
            if child is not None:
                self.forward(child, features, treelstm_io)


def tree_lstm_class(direction):
    """:class:`BiTreeLSTM_Foreward` for ``'foreward'``, :class:`BiTreeLSTM_Backward` for
    ``'backward'`` (SGB's spellings); a ``ValueError`` naming both otherwise."""
    classes = {'foreward': BiTreeLSTM_Foreward, 'backward': BiTreeLSTM_Backward}
    if direction not in classes:
        raise ValueError("direction must be 'foreward' or 'backward', got {!r}".format(
            direction))
    return classes[direction]


class OneDirectionalTreeLSTM(nn.Module):
    """One tree LSTM direction with its per-tree dropout mask.

    Parameters
    ----------
    in_dim, out_dim : int
    direction : {'foreward', 'backward'}
    dropout : float
    """

    def __init__(self, in_dim, out_dim, direction, dropout=0.0):
        super().__init__()
        self.dropout = dropout
        self.treeLSTM = tree_lstm_class(direction)(in_dim, out_dim)

    def forward(self, tree, features, num_obj):
        """``(num_obj, out_dim)`` hidden states in object order."""
        return torch.stack(self.treeLSTM.walk(tree, features, num_obj, self.dropout).hidden, 0)


class BidirectionalTreeLSTM(nn.Module):
    """Both directions, concatenated (``out_dim / 2`` each).

    Parameters
    ----------
    in_dim, out_dim : int
    dropout : float
    """

    def __init__(self, in_dim, out_dim, dropout=0.0):
        super().__init__()
        self.treeLSTM_foreward = OneDirectionalTreeLSTM(in_dim, int(out_dim / 2), 'foreward',
                                                        dropout)
        self.treeLSTM_backward = OneDirectionalTreeLSTM(in_dim, int(out_dim / 2), 'backward',
                                                        dropout)

    def forward(self, tree, features, num_obj):
        """``(num_obj, out_dim)``."""
        fw = self.treeLSTM_foreward(tree, features, num_obj)
        bw = self.treeLSTM_backward(tree, features, num_obj)
        return torch.cat((fw, bw), 1)


class MultiLayer_BTreeLSTM(nn.Module):
    """Stack of :class:`BidirectionalTreeLSTM`.

    Parameters
    ----------
    in_dim, out_dim, num_layer : int
    dropout : float
    """

    def __init__(self, in_dim, out_dim, num_layer, dropout=0.0):
        super().__init__()
        layers = [BidirectionalTreeLSTM(in_dim, out_dim, dropout)]
        layers += [BidirectionalTreeLSTM(out_dim, out_dim, dropout) for _ in range(num_layer - 1)]
        self.multi_layer_lstm = nn.ModuleList(layers)

    def forward(self, tree, features, num_obj):
        """``(num_obj, out_dim)``."""
        for layer in self.multi_layer_lstm:
            features = layer(tree, features, num_obj)
        return features
