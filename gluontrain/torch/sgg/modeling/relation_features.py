"""The union-box feature of a relation, Scene-Graph-Benchmark's ``RelationFeatureExtractor``
(``roi_heads/relation_head/roi_relation_feature_extractors.py``).

Per pair: the union box of head and tail pooled by the extractor's own pooler (all FPN levels
concatenated and reduced by a 3x3 conv with ``POOLING_ALL_LEVELS``), plus the rect-mask
branch: a 2-channel ``rect_size x rect_size`` binary map (``rect_size = 4 *
POOLER_RESOLUTION - 1``, 27 for 7x7) of the head and tail boxes rescaled from the image to
the map, through conv7x7/2 + ReLU + BN + maxpool3/2 + conv3x3 + ReLU + BN to the pooled
feature's shape; the sum goes through the extractor's ``fc6``/``fc7``. With
``CAUSAL.SEPARATE_SPATIAL`` the region and the spatial features stay apart.
"""
import torch
import torch.nn as nn

from ...twostage.structures import boxlist_union
from ...twostage.box_head import make_fc
from .detector import box_feature_extractor

__all__ = ['RelationFeatureExtractor', 'rect_masks']


def rect_masks(head, tail, rect_size):
    """The ``(K, 2, rect_size, rect_size)`` head / tail masks of SGB.

    Each BoxList is resized to a ``rect_size x rect_size`` image; a cell ``(y, x)`` is 1 when
    ``floor(x0) <= x <= ceil(x1)`` and ``floor(y0) <= y <= ceil(y1)`` (inclusive bounds).

    Parameters
    ----------
    head, tail : BoxList
        The pairs' boxes (same length, one image).
    rect_size : int

    Returns
    -------
    torch.Tensor
        float32 masks.
    """
    rng = torch.arange(rect_size, device=head.bbox.device)
    xs, ys = rng.view(1, 1, -1), rng.view(1, -1, 1)

    def mask(boxes):
        b = boxes.resize((rect_size, rect_size)).convert('xyxy').bbox
        x0, y0 = b[:, :2].floor().long().view(-1, 2, 1, 1).unbind(1)
        x1, y1 = b[:, 2:].ceil().long().view(-1, 2, 1, 1).unbind(1)
        return ((xs >= x0) & (xs <= x1) & (ys >= y0) & (ys <= y1)).float()

    return torch.stack((mask(head), mask(tail)), dim=1)


class RelationFeatureExtractor(nn.Module):
    """SGB's ``RelationFeatureExtractor`` (``ATTRIBUTE_ON`` off).

    Parameters
    ----------
    cfg : yacs.config.CfgNode
        ``MODEL.ROI_BOX_HEAD.*`` (its own ``FPN2MLPFeatureExtractor`` named
        ``feature_extractor``), ``MODEL.ROI_RELATION_HEAD.{POOLING_ALL_LEVELS,
        CAUSAL.SEPARATE_SPATIAL}``.
    in_channels : int
    """

    def __init__(self, cfg, in_channels):
        super().__init__()
        if cfg.MODEL.ATTRIBUTE_ON:
            raise ValueError('MODEL.ATTRIBUTE_ON is not supported by the scene-graph recipe')
        rel = cfg.MODEL.ROI_RELATION_HEAD
        resolution = cfg.MODEL.ROI_BOX_HEAD.POOLER_RESOLUTION
        self.feature_extractor = box_feature_extractor(
            cfg, in_channels, cat_all_levels=rel.POOLING_ALL_LEVELS)
        self.out_channels = self.feature_extractor.out_channels
        self.separate_spatial = rel.CAUSAL.SEPARATE_SPATIAL
        if self.separate_spatial:
            size = self.feature_extractor.resize_channels
            out = self.feature_extractor.out_channels
            self.spatial_fc = nn.Sequential(make_fc(size, out // 2), nn.ReLU(inplace=True),
                                            make_fc(out // 2, out), nn.ReLU(inplace=True))
        self.rect_size = resolution * 4 - 1
        half = in_channels // 2
        self.rect_conv = nn.Sequential(
            nn.Conv2d(2, half, kernel_size=7, stride=2, padding=3, bias=True),
            nn.ReLU(inplace=True),
            nn.BatchNorm2d(half, momentum=0.01),
            nn.MaxPool2d(kernel_size=3, stride=2, padding=1),
            nn.Conv2d(half, in_channels, kernel_size=3, stride=1, padding=1, bias=True),
            nn.ReLU(inplace=True),
            nn.BatchNorm2d(in_channels, momentum=0.01))

    def forward(self, x, proposals, rel_pair_idxs):
        """Union features ``(sum K_i, out_channels)`` (a ``(region, spatial)`` pair with
        ``SEPARATE_SPATIAL``)."""
        unions, rects = [], []
        for proposal, pairs in zip(proposals, rel_pair_idxs):
            head, tail = proposal[pairs[:, 0]], proposal[pairs[:, 1]]
            unions.append(boxlist_union(head, tail))
            rects.append(rect_masks(head, tail, self.rect_size))
        rect_features = self.rect_conv(torch.cat(rects, dim=0))
        union_vis = self.feature_extractor.pooler(x, unions)
        if self.separate_spatial:
            return (self.feature_extractor.forward_without_pool(union_vis),
                    self.spatial_fc(rect_features.reshape(rect_features.size(0), -1)))
        return self.feature_extractor.forward_without_pool(union_vis + rect_features)
