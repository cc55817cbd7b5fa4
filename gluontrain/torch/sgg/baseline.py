"""The frequency-bias-only baseline of neural-motifs / SGB (``FrequencyBias`` without any
visual or context term): each subject-object pair's predicate distribution is
``softmax(pred_dist[subject label, object label])``, ``pred_dist = log(fg / sum fg + 1e-3)``
from :func:`gluontrain.torch.sgg.data.statistics.get_statistics`.

Used as the reference a trained relation model must beat (learnability test, notebook).
"""
import torch

__all__ = ['frequency_baseline']


def frequency_baseline(predictions, pred_dist):
    """Copies of ``predictions`` whose relation scores are the frequency baseline's.

    Parameters
    ----------
    predictions : list of BoxList
        Relation-model outputs (``pred_labels``, ``rel_pair_idxs``, ...); in PredCls the pairs
        and labels are the ground truth's, so the baseline sees the same candidates.
    pred_dist : array-like (C, C, R)
        Log-frequencies of predicate given (subject, object) class, predicate 0 background.

    Returns
    -------
    list of BoxList
        ``pred_rel_scores`` = the softmax of ``pred_dist`` for each pair (background
        included, as SGB's post-processor scores), ``pred_rel_labels`` its best
        non-background predicate.
    """
    pred_dist = torch.as_tensor(pred_dist, dtype=torch.float32)
    out = []
    for p in predictions:
        q = p.copy_with_fields(list(p.fields()))
        labels = q.get_field('pred_labels').long()
        pairs = q.get_field('rel_pair_idxs').long()
        scores = torch.softmax(pred_dist[labels[pairs[:, 0]], labels[pairs[:, 1]]], -1)
        q.add_field('pred_rel_scores', scores)
        q.add_field('pred_rel_labels', scores[:, 1:].argmax(1) + 1)
        out.append(q)
    return out
