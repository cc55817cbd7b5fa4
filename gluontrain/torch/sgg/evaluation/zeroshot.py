"""Zero-shot triplets: evaluation triplets never seen in the training split.

SGB ships ``zeroshot_triplet.pytorch`` (a ``(5971, 3)`` int64 tensor for VG150, rows
``(sub_class, obj_class, predicate)``) and reads it from a path hard-coded relative to the
working directory. Here the file is computed from a dataset pair, saved (staged write) in the
same format and loaded from a path the caller chooses; SGB's own file loads as well.
"""
import os

import numpy as np
import torch

from ...checkpoint import save_file
from ...passes import preserved_rng
from .sgg_eval import class_triplets

__all__ = ['dataset_triplets', 'compute_zeroshot_triplets', 'save_zeroshot_triplets',
           'load_zeroshot_triplets', 'load_or_compute_zeroshot_triplets']


def dataset_triplets(dataset):
    """The set of ``(sub_class, obj_class, predicate)`` of every ground-truth relation.

    Parameters
    ----------
    dataset : VGDataset-like
        With ``relationships`` and ``gt_classes`` (VGDataset's per-image arrays) those are
        read: every relation the split loaded, duplicates included, and no random draw
        (the training split's ``get_groundtruth`` keeps one random predicate per pair and
        draws from the global RNGs). Otherwise ``len()`` and ``get_groundtruth(i,
        evaluation=True)`` with ``labels`` and ``relation_tuple``, the global ``random`` /
        numpy RNG states restored afterwards.

    Returns
    -------
    set of tuple of int
    """
    out = set()
    if hasattr(dataset, 'relationships') and hasattr(dataset, 'gt_classes'):
        for rels, labels in zip(dataset.relationships, dataset.gt_classes):
            out.update(map(tuple, class_triplets(rels, labels).tolist()))
        return out
    with preserved_rng():
        for i in range(len(dataset)):
            gt = dataset.get_groundtruth(i, evaluation=True)
            out.update(map(tuple, class_triplets(gt.get_field('relation_tuple'),
                                                 gt.get_field('labels')).tolist()))
    return out


def compute_zeroshot_triplets(train_dataset, eval_dataset):
    """Triplets of ``eval_dataset`` absent from ``train_dataset``, sorted.

    Parameters
    ----------
    train_dataset : VGDataset-like
        The split the model trains on (SGB: ``train`` without its first ``num_val_im``).
    eval_dataset : VGDataset-like
        The split evaluated (SGB's file is for ``test``).

    Returns
    -------
    ndarray (Z, 3) int64
        ``(sub_class, obj_class, predicate)`` rows, lexicographic order.
    """
    unseen = sorted(dataset_triplets(eval_dataset) - dataset_triplets(train_dataset))
    return np.asarray(unseen, dtype=np.int64).reshape(-1, 3)


def save_zeroshot_triplets(path, triplets):
    """Write ``triplets`` as SGB's file: an int64 ``(Z, 3)`` tensor, ``torch.save``d."""
    return save_file(path, torch.as_tensor(np.asarray(triplets, dtype=np.int64).reshape(-1, 3)))


def load_zeroshot_triplets(path):
    """Read a zero-shot triplet file (this module's or SGB's).

    Returns
    -------
    ndarray (Z, 3) int64

    Raises
    ------
    FileNotFoundError
        With the way to make the file.
    ValueError
        When the file does not hold a ``(Z, 3)`` integer tensor.
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(
            'zero-shot triplet file {} not found: write it with gluontrain.torch.sgg.evaluation.'
            'zeroshot.load_or_compute_zeroshot_triplets(path, train_dataset, eval_dataset), or '
            "pass SGB's zeroshot_triplet.pytorch".format(path))
    t = torch.load(path, map_location='cpu', weights_only=True)
    if not isinstance(t, torch.Tensor) or t.dim() != 2 or t.shape[1] != 3 \
            or t.is_floating_point():
        raise ValueError('zero-shot triplet file {}: expected an integer (Z, 3) tensor of '
                         '(sub_class, obj_class, predicate), got {}'.format(
                             path, getattr(t, 'shape', type(t).__name__)))
    return t.long().numpy()


def load_or_compute_zeroshot_triplets(path, train_dataset, eval_dataset):
    """The triplets in ``path``, computed and saved there first when the file is missing.

    Parameters
    ----------
    path : str
    train_dataset, eval_dataset : VGDataset-like
        See :func:`compute_zeroshot_triplets`.

    Returns
    -------
    ndarray (Z, 3) int64
    """
    if not os.path.isfile(path):
        save_zeroshot_triplets(path, compute_zeroshot_triplets(train_dataset, eval_dataset))
    return load_zeroshot_triplets(path)
