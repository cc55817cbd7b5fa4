"""Tiny SGB configurations, a test-only relation predictor and a tiny batch for the
scene-graph model tests (imported by them; a unique module name, as pytest's prepend mode
needs)."""
import torch
import torch.nn as nn

from gluontrain.torch.sgg.config import get_cfg
from gluontrain.torch.twostage.structures import BoxList

NUM_OBJ_CLASSES = 6
NUM_REL_CLASSES = 4


def tiny_cfg(mode='predcls', relation_on=True):
    """SGB's defaults with the FPN settings of its VG configs, shrunk for the CPU."""
    cfg = get_cfg()
    m = cfg.MODEL
    m.RELATION_ON = relation_on
    m.BACKBONE.CONV_BODY = 'R-18-FPN'
    m.BACKBONE.WIDTH_MULT = 0.25
    m.BACKBONE.NORM = 'bn'
    m.BACKBONE.FREEZE_CONV_BODY_AT = 0
    m.RESNETS.BACKBONE_OUT_CHANNELS = 16
    m.RPN.USE_FPN = True
    m.RPN.ANCHOR_SIZES = (32, 64, 128, 256, 512)
    m.RPN.ANCHOR_STRIDE = (4, 8, 16, 32, 64)
    m.RPN.ASPECT_RATIOS = (0.5, 1.0, 2.0)
    m.RPN.RPN_MID_CHANNEL = 16
    m.RPN.PRE_NMS_TOP_N_TRAIN = 600
    m.RPN.PRE_NMS_TOP_N_TEST = 300
    m.RPN.POST_NMS_TOP_N_TRAIN = 100
    m.RPN.POST_NMS_TOP_N_TEST = 50
    m.RPN.FPN_POST_NMS_TOP_N_TRAIN = 100
    m.RPN.FPN_POST_NMS_TOP_N_TEST = 50
    m.ROI_HEADS.USE_FPN = True
    m.ROI_HEADS.BATCH_SIZE_PER_IMAGE = 32
    m.ROI_HEADS.DETECTIONS_PER_IMG = 20
    m.ROI_HEADS.NMS_FILTER_DUPLICATES = True
    m.ROI_BOX_HEAD.FEATURE_EXTRACTOR = 'FPN2MLPFeatureExtractor'
    m.ROI_BOX_HEAD.PREDICTOR = 'FPNPredictor'
    m.ROI_BOX_HEAD.POOLER_RESOLUTION = 7
    m.ROI_BOX_HEAD.POOLER_SCALES = (0.25, 0.125, 0.0625, 0.03125)
    m.ROI_BOX_HEAD.POOLER_SAMPLING_RATIO = 2
    m.ROI_BOX_HEAD.NUM_CLASSES = NUM_OBJ_CLASSES
    m.ROI_BOX_HEAD.MLP_HEAD_DIM = 32
    r = m.ROI_RELATION_HEAD
    r.NUM_CLASSES = NUM_REL_CLASSES
    r.BATCH_SIZE_PER_IMAGE = 16
    r.USE_GT_BOX = mode in ('predcls', 'sgcls')
    r.USE_GT_OBJECT_LABEL = mode == 'predcls'
    cfg.DATALOADER.SIZE_DIVISIBILITY = 32
    cfg.MODEL.DEVICE = 'cpu'
    return cfg


class TinyPredictor(nn.Module):
    """Test-only predictor with SGB's interface: object logits from the ROI features (the
    +-1000 one-hot of the labels in PredCls, as SGB's predictors), predicate logits from the
    union feature and the head/tail features."""

    def __init__(self, cfg, in_channels):
        super().__init__()
        self.use_gt_label = cfg.MODEL.ROI_RELATION_HEAD.USE_GT_OBJECT_LABEL
        self.num_obj = cfg.MODEL.ROI_BOX_HEAD.NUM_CLASSES
        num_rel = cfg.MODEL.ROI_RELATION_HEAD.NUM_CLASSES
        self.obj = nn.Linear(in_channels, self.num_obj)
        self.rel = nn.Linear(in_channels * 3, num_rel)

    def forward(self, proposals, rel_pair_idxs, rel_labels, rel_binarys, roi_features,
                union_features, logger=None):
        n_obj = [len(p) for p in proposals]
        n_rel = [len(r) for r in rel_pair_idxs]
        if self.use_gt_label:
            labels = torch.cat([p.get_field('labels') for p in proposals]).long()
            obj = torch.full((labels.numel(), self.num_obj), -1000.)
            obj[torch.arange(labels.numel()), labels] = 1000.
        else:
            obj = self.obj(roi_features)
        feats = roi_features.split(n_obj)
        pair = torch.cat([torch.cat((f[r[:, 0]], f[r[:, 1]]), 1)
                          for f, r in zip(feats, rel_pair_idxs)])
        rel = self.rel(torch.cat((pair, union_features), 1))
        return obj.split(n_obj), rel.split(n_rel), {}


def make_batch(seed=0, sizes=((96, 128), (128, 96))):
    """Images ``(3, h, w)`` and targets with 3-4 boxes, labels and a relation matrix."""
    g = torch.Generator().manual_seed(seed)
    images, targets = [], []
    for i, (h, w) in enumerate(sizes):
        images.append(torch.randn(3, h, w, generator=g))
        boxes = torch.tensor([[4., 6., 50., 60.], [30., 20., 90., 80.], [10., 40., 60., 90.],
                              [60., 10., 90., 50.]])[:3 + i]
        boxes[:, 0::2] = boxes[:, 0::2].clamp(max=w - 1)
        boxes[:, 1::2] = boxes[:, 1::2].clamp(max=h - 1)
        t = BoxList(boxes, (w, h))
        t.add_field('labels', torch.tensor([1, 2, 3, 5][:3 + i]))
        rel = torch.zeros(3 + i, 3 + i, dtype=torch.long)
        rel[0, 1] = 2
        rel[2, 0] = 1
        if i:
            rel[3, 1] = 3
        t.add_field('relation', rel, is_triplet=True)
        targets.append(t)
    return images, targets

