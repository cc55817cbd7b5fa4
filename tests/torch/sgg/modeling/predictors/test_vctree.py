"""VCTree: greedy tree construction by hand, binary conversion, tree LSTM order, predictor."""
import pytest
import torch

from gluontrain.torch.sgg.modeling.predictors import build_predictor
from gluontrain.torch.sgg.modeling.predictors.utils_treelstm import (BiTreeLSTM_Backward,
                                                                     MultiLayer_BTreeLSTM,
                                                                     TreeLSTM_IO,
                                                                     block_orthogonal)
from gluontrain.torch.sgg.modeling.predictors.utils_vctree import (arbForest_to_biForest,
                                                                   generate_forest,
                                                                   get_overlap_info)
from gluontrain.torch.sgg.modeling.predictors.vctree import VCTreePredictor
from gluontrain.torch.twostage.structures import BoxList


def _boxlist(n):
    p = BoxList(torch.arange(n * 4, dtype=torch.float32).view(n, 4).cumsum(1), (100, 100))
    p.add_field('labels', torch.arange(1, n + 1))
    return p


def test_greedy_tree_by_hand():
    # row means: 0 -> 0.45, 1 -> 0.5 (root), 2 -> 0.2, 3 -> 0.275
    s = torch.tensor([[0.0, 0.9, 0.1, 0.8],
                      [0.7, 0.0, 0.6, 0.7],
                      [0.1, 0.1, 0.0, 0.6],
                      [0.2, 0.2, 0.7, 0.0]])
    root = generate_forest([s], [_boxlist(4)], 'predcls')[0]
    # from {1}: best 1->0 (0.7, first of the ties with 1->3); from {1, 0}: 0->3 (0.8);
    # from {1, 0, 3}: 3->2 (0.7)
    assert root.index == 1 and [c.index for c in root.children] == [0]
    assert [c.index for c in root.children[0].children] == [3]
    assert [c.index for c in root.children[0].children[0].children] == [2]
    assert root.get_total_child() == 3 and root.label == 2


def test_left_child_right_sibling_conversion():
    s = torch.tensor([[0.0, 0.9, 0.8], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    root = generate_forest([s], [_boxlist(3)], 'predcls')[0]    # 0 -> children 1, 2
    assert [c.index for c in root.children] == [1, 2]
    bi = arbForest_to_biForest([root])[0]
    assert bi.index == 0 and bi.right_child is None
    assert bi.left_child.index == 1 and bi.left_child.right_child.index == 2
    assert bi.left_child.right_child.parent is bi.left_child
    assert sorted(n.index for n in bi.nodes()) == [0, 1, 2]


def test_overlap_info_hand_computed():
    p = BoxList(torch.tensor([[0., 0., 9., 9.], [5., 0., 14., 9.], [50., 50., 59., 59.]]),
                (100, 100))
    info = get_overlap_info([p])
    # box 0 meets itself (100 px) and box 1 (50 px): count 2, IoU sum 1 + 50/150
    torch.testing.assert_close(info[0], torch.tensor([
        2., 150. / 1024 ** 2, 1 + 1 / 3, 75. / 1024 ** 2, (1 + 1 / 3) / 2, 81. / 1024 ** 2]))
    torch.testing.assert_close(info[2, 0], torch.tensor(1.))


def test_tree_lstm_outputs_in_object_order():
    torch.manual_seed(0)
    s = torch.rand(4, 4)
    root = arbForest_to_biForest(generate_forest([s], [_boxlist(4)], 'predcls'))[0]
    lstm = MultiLayer_BTreeLSTM(5, 6, 2).eval()
    feats = torch.randn(4, 5)
    out = lstm(root, feats, 4)
    assert out.shape == (4, 6)
    # the root's backward half (no parent) depends only on its own feature
    bw = lstm.multi_layer_lstm[0].treeLSTM_backward.treeLSTM
    io = TreeLSTM_IO(4, None)
    bw(root, feats, io)
    c, h = bw.node_backward(feats[root.index].view(1, -1), torch.zeros(1, 3), torch.zeros(1, 3),
                            None)
    torch.testing.assert_close(io.hidden[root.index], h.view(-1))


def test_block_orthogonal():
    w = torch.empty(6, 4)
    block_orthogonal(w, [3, 4])
    for blk in (w[:3], w[3:]):
        torch.testing.assert_close(blk @ blk.t(), torch.eye(3), atol=1e-5, rtol=0)
    with pytest.raises(ValueError, match='divisible'):
        block_orthogonal(torch.empty(5, 4), [3, 4])
    assert isinstance(BiTreeLSTM_Backward(4, 2), torch.nn.Module)


@pytest.mark.parametrize('mode', ['predcls', 'sgcls', 'sgdet'])
@pytest.mark.parametrize('training', [True, False])
def test_predictor_shapes_and_binary_loss(tiny, glove_dir, mode, training):
    torch.manual_seed(0)
    cfg = tiny.make_cfg(glove_dir, mode=mode, predictor='VCTreePredictor')
    pred = build_predictor(cfg, tiny.IN_CHANNELS, tiny.make_statistics())
    assert isinstance(pred, VCTreePredictor)
    inputs = tiny.make_inputs(mode, training)
    obj_dists, rel_dists, losses = pred.train(training)(*inputs)
    assert [tuple(d.shape) for d in obj_dists] == [(3, 5), (4, 5)]
    assert [tuple(d.shape) for d in rel_dists] == [(3, 4), (5, 4)]
    if not training:
        assert losses == {}
        return
    assert set(losses) == {'binary_loss'}
    total = losses['binary_loss'] + torch.nn.functional.cross_entropy(
        torch.cat(rel_dists), torch.cat(inputs[2]))
    if mode != 'predcls':
        labels = torch.cat([p.get_field('labels') for p in inputs[0]])
        total = total + torch.nn.functional.cross_entropy(torch.cat(obj_dists), labels)
    total.backward()
    ctx = pred.context_layer
    assert ctx.vision_prior.weight.grad.abs().sum() > 0          # via the binary loss
    assert ctx.edge_ctx_rnn.multi_layer_lstm[0].treeLSTM_foreward.treeLSTM.px.weight.grad \
        .abs().sum() > 0
    decoded = ctx.decoder_rnn.out.weight.grad
    assert (decoded is not None and decoded.abs().sum() > 0) == (mode != 'predcls')
