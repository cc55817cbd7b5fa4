"""The relation losses, Scene-Graph-Benchmark's ``RelationLossComputation``
(``roi_heads/relation_head/loss.py``, attributes off).

``loss_rel``: cross-entropy over the predicate logits of every sampled pair of the batch
(class 0 = background); ``loss_refine_obj``: cross-entropy of the refined object logits
against the proposals' ``labels`` (in PredCls the predictors return ``+-1000`` one-hot logits,
so it is ~0). ``LABEL_SMOOTHING_LOSS`` switches both to SGB's
``Label_Smoothing_Regression(e=0.01)``. SGB also builds an unused ``pred_weight`` with
``.cuda()`` (a crash on CPU-only torch); it is not built here.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

__all__ = ['label_smoothing_loss', 'RelationLossComputation',
           'make_roi_relation_loss_evaluator']


def label_smoothing_loss(logits, labels, e=0.01):
    """SGB's ``Label_Smoothing_Regression``: targets ``(1 - e) onehot(y) + e / C`` (every
    class, the true one included), loss ``-sum_c target_c log p_c`` averaged over the rows.

    Parameters
    ----------
    logits : torch.Tensor
        ``(N, C)``.
    labels : torch.Tensor
        ``(N,)``.
    e : float

    Returns
    -------
    torch.Tensor
        0-d.
    """
    num_classes = logits.shape[1]
    smoothed = torch.full_like(logits, e / num_classes)
    smoothed.scatter_add_(1, labels.view(-1, 1),
                          torch.full_like(logits[:, :1], 1 - e))
    return -(F.log_softmax(logits, dim=1) * smoothed).sum(1).mean()


class RelationLossComputation:
    """Callable ``(proposals, rel_labels, relation_logits, refine_logits) ->
    (loss_relation, loss_refine_obj)``.

    Parameters
    ----------
    use_label_smoothing : bool
    """

    def __init__(self, use_label_smoothing=False):
        self.criterion_loss = label_smoothing_loss if use_label_smoothing else \
            nn.CrossEntropyLoss()

    def __call__(self, proposals, rel_labels, relation_logits, refine_logits):
        """Per-image lists of logits and labels, concatenated over the batch.

        Parameters
        ----------
        proposals : list of BoxList
            With ``labels``.
        rel_labels : list of torch.Tensor
        relation_logits, refine_logits : list of torch.Tensor

        Returns
        -------
        loss_relation, loss_refine_obj : torch.Tensor
        """
        relation_logits = torch.cat(list(relation_logits), dim=0)
        refine_logits = torch.cat(list(refine_logits), dim=0)
        fg_labels = torch.cat([p.get_field('labels') for p in proposals], dim=0)
        rel_labels = torch.cat(list(rel_labels), dim=0)
        loss_relation = self.criterion_loss(relation_logits, rel_labels.long())
        loss_refine_obj = self.criterion_loss(refine_logits, fg_labels.long())
        return loss_relation, loss_refine_obj


def make_roi_relation_loss_evaluator(cfg):
    """SGB's factory (``MODEL.ROI_RELATION_HEAD.LABEL_SMOOTHING_LOSS``; attributes off).

    Returns
    -------
    RelationLossComputation
    """
    return RelationLossComputation(cfg.MODEL.ROI_RELATION_HEAD.LABEL_SMOOTHING_LOSS)
