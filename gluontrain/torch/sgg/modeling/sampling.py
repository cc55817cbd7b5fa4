"""Relation pair sampling, Scene-Graph-Benchmark's ``RelationSampling``
(``roi_heads/relation_head/sampling.py``).

- :meth:`RelationSampling.gtbox_relsample` (PredCls / SGCls training): every ground-truth
  pair is foreground (at most ``int(BATCH_SIZE_PER_IMAGE * POSITIVE_FRACTION)``, a random
  subset beyond), the background pairs a random subset of the other ordered pairs ``i != j``
  filling the batch;
- :meth:`RelationSampling.detect_relsample` (SGDet training, neural-motifs'
  ``rel_assignments``): proposal pairs matching a ground-truth pair (same label, IoU >
  ``FG_IOU_THRESHOLD``) are foreground, at most ``NUM_SAMPLE_PER_GT_REL`` per ground-truth
  relation drawn with probability ``IoU_head * IoU_tail``;
- :meth:`RelationSampling.prepare_test_pairs`: every ordered pair ``i != j`` (SGDet with
  ``TEST.RELATION.REQUIRE_OVERLAP``: overlapping pairs only), ``[[0, 0]]`` when none.

The draws come from ``generator`` (torch) and ``rng`` (NumPy) when given, else from the global
generators as SGB.
"""
import numpy as np
import torch
from torch.nn import functional as F

from ...twostage.structures import boxlist_iou

__all__ = ['RelationSampling', 'make_roi_relation_samp_processor']


class RelationSampling:
    """SGB's ``RelationSampling``.

    Parameters
    ----------
    fg_thres : float
    require_overlap : bool
    num_sample_per_gt_rel : int
    batch_size_per_image : int
    positive_fraction : float
    use_gt_box : bool
    test_overlap : bool
    generator : torch.Generator, optional
    rng : numpy.random.RandomState, optional
    """

    def __init__(self, fg_thres, require_overlap, num_sample_per_gt_rel, batch_size_per_image,
                 positive_fraction, use_gt_box, test_overlap, generator=None, rng=None):
        self.fg_thres = fg_thres
        self.require_overlap = require_overlap
        self.num_sample_per_gt_rel = num_sample_per_gt_rel
        self.batch_size_per_image = batch_size_per_image
        self.positive_fraction = positive_fraction
        #: foreground pairs per image at most (SGB's ``num_pos_per_img``)
        self.num_pos_per_img = int(batch_size_per_image * positive_fraction)
        self.use_gt_box = use_gt_box
        self.test_overlap = test_overlap
        self.generator = generator
        self.rng = rng

    def _randperm(self, n, device):
        return torch.randperm(n, generator=self.generator).to(device)

    def prepare_test_pairs(self, device, proposals):
        """Candidate pairs ``(K, 2)`` of each image for evaluation."""
        out = []
        for p in proposals:
            n = len(p)
            cand = ~torch.eye(n, dtype=torch.bool, device=device)
            if (not self.use_gt_box) and self.test_overlap:
                cand = cand & boxlist_iou(p, p).gt(0)
            idxs = torch.nonzero(cand).view(-1, 2)
            if len(idxs) == 0:
                idxs = torch.zeros((1, 2), dtype=torch.int64, device=device)
            out.append(idxs)
        return out

    def gtbox_relsample(self, proposals, targets):
        """PredCls / SGCls training pairs.

        Returns
        -------
        proposals : list of BoxList
        rel_labels : list of torch.Tensor
            ``(K_i,)`` predicate (0 = background), foreground first.
        rel_idx_pairs : list of torch.Tensor
            ``(K_i, 2)`` (head, tail) box indices.
        rel_sym_binarys : list of torch.Tensor
            ``(N_i, N_i)`` symmetric 0/1 matrix of the ground-truth pairs.
        """
        if not self.use_gt_box:
            raise ValueError('gtbox_relsample needs USE_GT_BOX (PredCls / SGCls)')
        num_pos = self.num_pos_per_img
        rel_idx_pairs, rel_labels, rel_sym_binarys = [], [], []
        for proposal, target in zip(proposals, targets):
            device = proposal.bbox.device
            n = proposal.bbox.shape[0]
            if n != target.bbox.shape[0]:
                raise ValueError('gtbox_relsample: {} proposals for {} ground-truth boxes; in '
                                 'PredCls/SGCls the proposals are the targets'.format(
                                     n, target.bbox.shape[0]))
            rel = target.get_field('relation')
            pairs = torch.nonzero(rel > 0)
            heads, tails = pairs[:, 0], pairs[:, 1]
            labs = rel[heads, tails].view(-1)
            binary = torch.zeros((n, n), dtype=torch.long, device=device)
            binary[heads, tails] = 1
            binary[tails, heads] = 1
            rel_sym_binarys.append(binary)
            possible = ~torch.eye(n, dtype=torch.bool, device=device)
            possible[heads, tails] = False
            bg = torch.nonzero(possible)
            if pairs.shape[0] > num_pos:
                perm = self._randperm(pairs.shape[0], device)[:num_pos]
                pairs, labs = pairs[perm], labs[perm]
            num_bg = self.batch_size_per_image - pairs.shape[0]   # at most num_pos now
            bg = bg[self._randperm(bg.shape[0], device)[:num_bg]]
            rel_idx_pairs.append(torch.cat((pairs, bg), dim=0))
            rel_labels.append(F.pad(labs.long(), (0, bg.shape[0])))   # background: 0
        return proposals, rel_labels, rel_idx_pairs, rel_sym_binarys

    def detect_relsample(self, proposals, targets):
        """SGDet training pairs between foreground proposals (``labels > 0``); same returns
        as :meth:`gtbox_relsample`."""
        rel_idx_pairs, rel_labels, rel_sym_binarys = [], [], []
        for proposal, target in zip(proposals, targets):
            device = proposal.bbox.device
            prp_lab = proposal.get_field('labels').long()
            tgt_lab = target.get_field('labels').long()
            ious = boxlist_iou(target, proposal)
            is_match = (tgt_lab[:, None] == prp_lab[None]) & (ious > self.fg_thres)
            n = len(proposal)
            if self.require_overlap and not self.use_gt_box:
                self_iou = boxlist_iou(proposal, proposal)
                possible = (self_iou > 0) & (self_iou < 1)
            else:
                possible = ~torch.eye(n, dtype=torch.bool, device=device)
            possible[prp_lab == 0] = False
            possible[:, prp_lab == 0] = False
            triplets, binary = self.motif_rel_fg_bg_sampling(
                device, target.get_field('relation'), ious, is_match, possible)
            rel_idx_pairs.append(triplets[:, :2])
            rel_labels.append(triplets[:, 2])
            rel_sym_binarys.append(binary)
        return proposals, rel_labels, rel_idx_pairs, rel_sym_binarys

    def motif_rel_fg_bg_sampling(self, device, tgt_rel_matrix, ious, is_match, rel_possibility):
        """Foreground / background triplets ``(K, 3)`` of one image and the symmetric binary
        matrix of the proposal pairs matching a ground-truth pair."""
        rel_possibility = rel_possibility.clone()
        pairs = torch.nonzero(tgt_rel_matrix > 0)
        heads, tails = pairs[:, 0], pairs[:, 1]
        labs = tgt_rel_matrix[heads, tails].view(-1)
        num_prp = is_match.shape[-1]
        binary = torch.zeros((num_prp, num_prp), dtype=torch.long, device=device)
        fg = []
        for i in range(labs.shape[0]):
            h_idx = torch.nonzero(is_match[int(heads[i])]).squeeze(1)
            t_idx = torch.nonzero(is_match[int(tails[i])]).squeeze(1)
            if h_idx.numel() == 0 or t_idx.numel() == 0:
                continue
            hh, tt = (g.reshape(-1) for g in torch.meshgrid(h_idx, t_idx, indexing='ij'))
            binary[hh, tt] = 1
            binary[tt, hh] = 1
            valid = hh != tt
            if not bool(valid.any()):
                continue
            hh, tt = hh[valid], tt[valid]
            rel_possibility[hh, tt] = False
            fg_i = torch.stack((hh, tt, torch.full_like(hh, int(labs[i]))), dim=1)
            if fg_i.shape[0] > self.num_sample_per_gt_rel:
                score = (ious[int(heads[i]), hh] * ious[int(tails[i]), tt]).detach().cpu()
                score = score.double().numpy()
                score = score / score.sum()
                rng = self.rng if self.rng is not None else np.random
                perm = rng.choice(score.shape[0], p=score, size=self.num_sample_per_gt_rel,
                                  replace=False)
                fg_i = fg_i[torch.as_tensor(perm, device=device)]
            fg.append(fg_i)
        if fg:
            fg = torch.cat(fg, dim=0).long()
            if fg.shape[0] > self.num_pos_per_img:
                fg = fg[self._randperm(fg.shape[0], device)[:self.num_pos_per_img]]
        else:
            fg = torch.zeros((0, 3), dtype=torch.long, device=device)
        bg = F.pad(torch.nonzero(rel_possibility).view(-1, 2), (0, 1))   # label 0
        num_neg = min(self.batch_size_per_image - fg.shape[0], bg.shape[0])
        if bg.shape[0] > 0:
            bg = bg[self._randperm(bg.shape[0], device)[:num_neg]]
        if fg.shape[0] == 0 and bg.shape[0] == 0:
            bg = torch.zeros((1, 3), dtype=torch.long, device=device)
        return torch.cat((fg, bg), dim=0), binary


def make_roi_relation_samp_processor(cfg, generator=None, rng=None):
    """SGB's factory: ``MODEL.ROI_HEADS.FG_IOU_THRESHOLD``,
    ``MODEL.ROI_RELATION_HEAD.{REQUIRE_BOX_OVERLAP, NUM_SAMPLE_PER_GT_REL,
    BATCH_SIZE_PER_IMAGE, POSITIVE_FRACTION, USE_GT_BOX}``, ``TEST.RELATION.REQUIRE_OVERLAP``.

    Returns
    -------
    RelationSampling
    """
    r = cfg.MODEL.ROI_RELATION_HEAD
    return RelationSampling(cfg.MODEL.ROI_HEADS.FG_IOU_THRESHOLD, r.REQUIRE_BOX_OVERLAP,
                            r.NUM_SAMPLE_PER_GT_REL, r.BATCH_SIZE_PER_IMAGE,
                            r.POSITIVE_FRACTION, r.USE_GT_BOX, cfg.TEST.RELATION.REQUIRE_OVERLAP,
                            generator, rng)
