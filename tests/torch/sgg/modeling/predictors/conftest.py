"""Tiny configs, statistics and proposals for the relation-predictor tests.

Two images (3 and 4 boxes), 5 object classes and 4 predicate classes (background included),
hidden sizes of 8-16 so every forward takes milliseconds.
"""
import pytest
import torch

from gluontrain.torch.sgg.config import get_cfg
from gluontrain.torch.twostage.structures import BoxList

OBJ_CLASSES = ['__background__', 'man', 'horse', 'tennis racket', 'car']
REL_CLASSES = ['__background__', 'on', 'riding', 'has']
IN_CHANNELS = 12
MLP_DIM = 16


def make_cfg(glove_dir, mode='predcls', predictor='MotifPredictor', pooling_dim=MLP_DIM):
    """A small SGB config in ``mode`` for ``predictor``."""
    cfg = get_cfg()
    cfg.defrost()
    head = cfg.MODEL.ROI_RELATION_HEAD
    head.PREDICTOR = predictor
    head.USE_GT_BOX = mode in ('predcls', 'sgcls')
    head.USE_GT_OBJECT_LABEL = mode == 'predcls'
    head.NUM_CLASSES = len(REL_CLASSES)
    head.EMBED_DIM = 6
    head.CONTEXT_HIDDEN_DIM = 8
    head.CONTEXT_POOLING_DIM = pooling_dim
    head.TRANSFORMER.OBJ_LAYER = 1
    head.TRANSFORMER.REL_LAYER = 1
    head.TRANSFORMER.NUM_HEAD = 2
    head.TRANSFORMER.INNER_DIM = 16
    head.TRANSFORMER.KEY_DIM = 4
    head.TRANSFORMER.VAL_DIM = 4
    cfg.MODEL.ROI_BOX_HEAD.NUM_CLASSES = len(OBJ_CLASSES)
    cfg.MODEL.ROI_BOX_HEAD.MLP_HEAD_DIM = MLP_DIM
    cfg.GLOVE_DIR = str(glove_dir)
    return cfg


def make_statistics(seed=0):
    """SGB's statistics dict with a random ``fg_matrix``."""
    g = torch.Generator().manual_seed(seed)
    fg = torch.randint(0, 5, (len(OBJ_CLASSES), len(OBJ_CLASSES), len(REL_CLASSES)),
                       generator=g).float()
    pred_dist = torch.log(fg / (fg.sum(2, keepdim=True) + 1e-12) + 1e-3)
    return {'fg_matrix': fg, 'pred_dist': pred_dist, 'obj_classes': list(OBJ_CLASSES),
            'rel_classes': list(REL_CLASSES), 'att_classes': ['__background__']}


def make_proposals(mode, training, seed=0):
    """Per-image BoxLists with the fields SGB's box head supplies in ``mode``."""
    g = torch.Generator().manual_seed(seed)
    boxes = [torch.tensor([[2., 3., 40., 50.], [30., 10., 80., 60.], [5., 40., 60., 95.]]),
             torch.tensor([[0., 0., 20., 20.], [10., 10., 60., 30.], [50., 5., 90., 70.],
                           [12., 11., 58., 33.]])]
    labels = [torch.tensor([1, 2, 3]), torch.tensor([4, 1, 2, 1])]
    sizes = [(100, 100), (96, 80)]
    out = []
    num_cls = len(OBJ_CLASSES)
    for b, lab, size in zip(boxes, labels, sizes):
        p = BoxList(b, size)
        if mode in ('predcls', 'sgcls') or training:
            p.add_field('labels', lab)
        if mode != 'predcls':
            p.add_field('predict_logits', torch.randn(len(b), num_cls, generator=g))
        if mode == 'sgdet' and not training:
            jitter = torch.rand(len(b), num_cls, 4, generator=g) * 4
            p.add_field('boxes_per_cls', b[:, None, :] + jitter)
        out.append(p)
    return out


def make_pairs():
    """Relation pairs per image (local indices)."""
    return [torch.tensor([[0, 1], [1, 0], [2, 1]]),
            torch.tensor([[0, 1], [1, 2], [3, 2], [2, 0], [1, 3]])]


def make_inputs(mode, training, seed=0):
    """``(proposals, rel_pair_idxs, rel_labels, rel_binarys, roi_features, union_features)``."""
    g = torch.Generator().manual_seed(seed + 1)
    proposals = make_proposals(mode, training, seed)
    pairs = make_pairs()
    n_obj = sum(len(p) for p in proposals)
    n_rel = sum(len(r) for r in pairs)
    rel_labels = [torch.tensor([1, 0, 2]), torch.tensor([3, 0, 1, 2, 0])] if training else None
    rel_binarys = None
    if training:
        rel_binarys = []
        for p, r, lab in zip(proposals, pairs, rel_labels):
            m = torch.zeros(len(p), len(p))
            m[r[:, 0], r[:, 1]] = (lab > 0).float()
            rel_binarys.append(m)
    roi = torch.randn(n_obj, IN_CHANNELS, generator=g)
    union = torch.rand(n_rel, MLP_DIM, generator=g)
    return proposals, pairs, rel_labels, rel_binarys, roi, union


@pytest.fixture
def glove_dir(tmp_path):
    """A folder without GloVe files (random vectors)."""
    return tmp_path


@pytest.fixture
def tiny():
    """The builders above as one namespace (conftest modules are not importable by name)."""
    import types
    return types.SimpleNamespace(make_cfg=make_cfg, make_statistics=make_statistics,
                                 make_proposals=make_proposals, make_pairs=make_pairs,
                                 make_inputs=make_inputs, OBJ_CLASSES=OBJ_CLASSES,
                                 REL_CLASSES=REL_CLASSES, IN_CHANNELS=IN_CHANNELS,
                                 MLP_DIM=MLP_DIM)
