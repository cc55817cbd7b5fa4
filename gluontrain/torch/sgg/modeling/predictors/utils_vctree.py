"""VCTree's dynamic trees (SGB's ``utils_vctree.py``).

Per image, a score matrix over object pairs builds a maximum-spanning *arbitrary* tree greedily
(root = object with the highest mean score; then repeatedly attach the remaining object with the
highest score to any object already in the tree), which is converted to a binary tree by the
left-child / right-sibling rule for the tree LSTMs.
"""
import torch

from ....ops import box_area, box_intersection

__all__ = ['ArbitraryTree', 'BiTree', 'generate_forest', 'gen_tree', 'arbForest_to_biForest',
           'get_overlap_info', 'IM_SCALE']

#: SGB's normalisation of areas in :func:`get_overlap_info` (a fixed 1024 x 1024 image).
IM_SCALE = 1024


class ArbitraryTree:
    """Node of the greedy tree: object ``index`` with any number of children.

    Parameters
    ----------
    idx : int
    score : float
        Mean pair score of the object.
    label : int
    """

    def __init__(self, idx, score, label=-1):
        self.index = int(idx)
        self.score = float(score)
        self.children = []
        self.label = label
        self.parent = None

    def get_total_child(self):
        """Number of descendants."""
        return sum(1 + c.get_total_child() for c in self.children)


class BiTree:
    """Binary-tree node of object ``idx`` for the tree LSTMs (left = first child, right = next
    sibling; the parent of a right child is its previous sibling).

    Parameters
    ----------
    idx : int
    """

    def __init__(self, idx):
        self.index = int(idx)
        self.left_child = self.right_child = self.parent = None
        # states written by the tree LSTMs while they walk the tree
        self.state_c = self.state_h = None
        self.state_c_backward = self.state_h_backward = None
        self.embeded_label = None

    def nodes(self):
        """All nodes, pre-order."""
        out = [self]
        for c in (self.left_child, self.right_child):
            if c is not None:
                out.extend(c.nodes())
        return out


def gen_tree(node_container, pair_score, root, remain_index):
    """Grow ``root`` greedily: attach the best (tree node, remaining node) pair until none left.

    Parameters
    ----------
    node_container : list of ArbitraryTree
        Nodes still outside the tree (consumed).
    pair_score : torch.Tensor
        ``(N, N)``; ``pair_score[a, b]`` scores attaching ``b`` under ``a``.
    root : ArbitraryTree
    remain_index : list of int
        Indices of ``node_container`` (consumed).
    """
    select_node, select_index = [root], [root.index]
    device = pair_score.device
    while node_container:
        wid = len(remain_index)
        sel = torch.tensor(select_index, device=device, dtype=torch.int64)
        rem = torch.tensor(remain_index, device=device, dtype=torch.int64)
        best_id = int(pair_score[sel][:, rem].reshape(-1).max(0)[1])
        depend, insert = select_node[best_id // wid], node_container[best_id % wid]
        insert.parent = depend
        depend.children.append(insert)
        select_node.append(insert)
        select_index.append(insert.index)
        node_container.remove(insert)
        remain_index.remove(insert.index)


def generate_forest(pair_scores, proposals, mode):
    """One greedy tree per image.

    Parameters
    ----------
    pair_scores : list of torch.Tensor
        ``(N_i, N_i)`` per image.
    proposals : list of BoxList
        ``labels`` (PredCls) or ``predict_logits``.
    mode : str
        ``'predcls'``, ``'sgcls'`` or ``'sgdet'``.

    Returns
    -------
    list of ArbitraryTree
        Roots.
    """
    forest = []
    for pair_score, proposal in zip(pair_scores, proposals):
        num_obj = pair_score.shape[0]
        obj_label = proposal.get_field('labels') if mode == 'predcls' else \
            proposal.get_field('predict_logits').max(-1)[1]
        node_scores = pair_score.detach().mean(1).view(-1)
        root_idx = int(node_scores.max(-1)[1])
        root = ArbitraryTree(root_idx, float(node_scores[root_idx]), int(obj_label[root_idx]))
        container, remain = [], []
        for idx in range(num_obj):
            if idx != root_idx:
                container.append(ArbitraryTree(idx, float(node_scores[idx]), int(obj_label[idx])))
                remain.append(idx)
        gen_tree(container, pair_score, root, remain)
        forest.append(root)
    return forest


def _to_bi(node, parent=None):
    # left child / right sibling: the first child is the left child, each later child the
    # right child of the one before it (and its parent in the binary tree)
    bi_node = BiTree(node.index)
    bi_node.parent = parent
    previous = None
    for child in node.children:
        bi_child = _to_bi(child, previous or bi_node)
        if previous is None:
            bi_node.left_child = bi_child
        else:
            previous.right_child = bi_child
        previous = bi_child
    return bi_node


def arbForest_to_biForest(forest):
    """Binary (left-child / right-sibling) copies of arbitrary trees.

    Parameters
    ----------
    forest : list of ArbitraryTree

    Returns
    -------
    list of BiTree
    """
    return [_to_bi(t) for t in forest]


def get_overlap_info(proposals):
    """SGB's 6-d overlap code per object.

    ``(#objects intersecting it (itself included), sum of intersections / 1024^2, sum of IoUs,
    mean intersection, mean IoU, area / 1024^2)``; intersections and IoUs ``+1`` pixel, the
    IoU denominator ``+ 1e-9`` and the area *without* ``+1`` as SGB.

    Parameters
    ----------
    proposals : list of BoxList

    Returns
    -------
    torch.Tensor
        ``(sum N_i, 6)``.
    """
    infos = []
    for p in proposals:
        if p.mode != 'xyxy':
            raise ValueError("get_overlap_info needs 'xyxy' boxes, got {!r}".format(p.mode))
        boxes = p.bbox
        inter = box_intersection(boxes, boxes, plus_one=True).float()
        area1 = box_area(boxes, plus_one=True)
        union = area1[:, None] + area1[None, :] - inter
        overlap = inter / (union + 1e-9)
        area = box_area(boxes).view(-1, 1).float()
        info1 = (inter > 0.0).float().sum(1).view(-1, 1)
        info2 = inter.sum(1).view(-1, 1) / float(IM_SCALE * IM_SCALE)
        info3 = overlap.sum(1).view(-1, 1)
        infos.append(torch.cat([info1, info2, info3, info2 / (info1 + 1e-9),
                                info3 / (info1 + 1e-9), area / float(IM_SCALE * IM_SCALE)], 1))
    return torch.cat(infos, 0)
