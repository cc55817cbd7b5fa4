"""SGB's ``FrequencyBias``: a learnable table of ``log p(predicate | subject, object)``.

Initialised from the training statistics' ``pred_dist`` (``log(fg / sum fg + 1e-3)``, shape
``(C_obj, C_obj, C_rel)``) and stored as an ``nn.Embedding`` with one row per ordered
(subject class, object class) pair, row ``s * C_obj + o``.
"""
import torch
from torch import nn

__all__ = ['FrequencyBias']


class FrequencyBias(nn.Module):
    """Predicate logits indexed by the pair's object classes.

    Parameters
    ----------
    cfg : yacs.config.CfgNode
        Unused (kept for SGB's signature).
    statistics : dict
        SGB's statistics; ``statistics['pred_dist']`` is ``(C_obj, C_obj, C_rel)`` (tensor or
        array), whose ``log(... + 1e-3)`` already holds SGB's (unused) ``eps``.
    """

    def __init__(self, cfg, statistics):
        super().__init__()
        pred_dist = torch.as_tensor(statistics['pred_dist']).float()
        if pred_dist.dim() != 3 or pred_dist.size(0) != pred_dist.size(1):
            raise ValueError("statistics['pred_dist'] must be (C_obj, C_obj, C_rel), got {}"
                             .format(tuple(pred_dist.shape)))
        self.num_objs = pred_dist.size(0)
        self.num_rels = pred_dist.size(2)
        self.obj_baseline = nn.Embedding(self.num_objs * self.num_objs, self.num_rels)
        with torch.no_grad():
            self.obj_baseline.weight.copy_(pred_dist.view(-1, self.num_rels))

    def index_with_labels(self, labels):
        """Rows for hard pairs.

        Parameters
        ----------
        labels : torch.Tensor
            ``(R, 2)`` int64 (subject class, object class).

        Returns
        -------
        torch.Tensor
            ``(R, C_rel)``.
        """
        return self.obj_baseline(labels[:, 0] * self.num_objs + labels[:, 1])

    def index_with_probability(self, pair_prob):
        """Expected rows under soft class distributions (Causal's TDE counterfactual).

        Parameters
        ----------
        pair_prob : torch.Tensor
            ``(R, C_obj, 2)``: subject and object class probabilities.

        Returns
        -------
        torch.Tensor
            ``(R, C_rel)``: ``sum_{s,o} p_sub(s) p_obj(o) table[s * C + o]``.
        """
        batch_size, num_obj, _ = pair_prob.shape
        joint = pair_prob[:, :, None, 0] * pair_prob[:, None, :, 1]
        return joint.view(batch_size, num_obj * num_obj) @ self.obj_baseline.weight

    def forward(self, labels):
        """Same as :meth:`index_with_labels`."""
        return self.index_with_labels(labels)
