"""Predicate frequency statistics of the training split (SGB's ``get_VG_statistics``,
``VGDataset.get_statistics`` and ``get_dataset_statistics``), cached in the output folder.

The statistics feed ``FrequencyBias`` (``pred_dist``) and the predictors' class lists.
"""
import logging
import os

import numpy as np
import torch

from ....core.checkpoint import atomic_save_file
from ....core.load_report import WeightsLoadError
from ...weights import read_weights_file
from .vg_dataset import box_filter

__all__ = ['get_statistics', 'statistics_dict', 'get_dataset_statistics', 'statistics_file']

_LOG = logging.getLogger(__name__)
#: the recipe's logger (console and OUTPUT_DIR/log.txt): what the user must read goes there
_RUN_LOG = logging.getLogger('gluontrain.sgg')
_KEYS = ('fg_matrix', 'pred_dist', 'obj_classes', 'rel_classes', 'att_classes')


def get_statistics(train_data, must_overlap=True):
    """Count subject-object-predicate triplets and candidate pairs (SGB's ``get_VG_statistics``).

    Parameters
    ----------
    train_data : VGDataset
        The training split as SGB builds it for statistics (``filter_duplicate_rels=False``;
        ``VGDataset.training_split()``).
    must_overlap : bool
        Background pairs are the ordered pairs of boxes that intersect (exclusive edges), or
        every ordered pair of an image where none do; all ordered pairs when False.

    Returns
    -------
    fg_matrix : numpy.ndarray
        ``(C, C, P)`` int64, ``fg[s, o, p]`` = annotated relations with subject class ``s``,
        object class ``o`` and predicate ``p`` (duplicates counted).
    bg_matrix : numpy.ndarray
        ``(C, C)`` int64 counts of candidate pairs by class (annotated or not).
    """
    num_obj_classes = len(train_data.ind_to_classes)
    num_rel_classes = len(train_data.ind_to_predicates)
    fg_matrix = np.zeros((num_obj_classes, num_obj_classes, num_rel_classes), dtype=np.int64)
    bg_matrix = np.zeros((num_obj_classes, num_obj_classes), dtype=np.int64)
    for ex_ind in range(len(train_data.gt_classes)):
        gt_classes = train_data.gt_classes[ex_ind]
        gt_relations = train_data.relationships[ex_ind]
        gt_boxes = train_data.gt_boxes[ex_ind]
        o1o2 = gt_classes[gt_relations[:, :2]]
        np.add.at(fg_matrix, (o1o2[:, 0], o1o2[:, 1], gt_relations[:, 2]), 1)
        pairs = np.array(box_filter(gt_boxes, must_overlap=must_overlap), dtype=int)
        o1o2_total = gt_classes[pairs].reshape(-1, 2)
        np.add.at(bg_matrix, (o1o2_total[:, 0], o1o2_total[:, 1]), 1)
    return fg_matrix, bg_matrix


def statistics_dict(train_data, must_overlap=True):
    """SGB's statistics dict from the training split.

    ``bg_matrix + 1`` becomes predicate 0 of ``fg_matrix`` and
    ``pred_dist = log(fg / sum_p fg + 1e-3)``.

    Parameters
    ----------
    train_data : VGDataset
        See :func:`get_statistics`.
    must_overlap : bool
        See :func:`get_statistics`.

    Returns
    -------
    dict
        ``fg_matrix`` (int64 tensor ``(C, C, P)``, background column filled), ``pred_dist``
        (float32 tensor ``(C, C, P)``), ``obj_classes``, ``rel_classes``, ``att_classes``
        (lists of names, ``'__background__'`` first).
    """
    fg_matrix, bg_matrix = get_statistics(train_data, must_overlap=must_overlap)
    eps = 1e-3
    bg_matrix += 1
    fg_matrix[:, :, 0] = bg_matrix
    pred_dist = np.log(fg_matrix / fg_matrix.sum(2)[:, :, None] + eps)
    return {'fg_matrix': torch.from_numpy(fg_matrix),
            'pred_dist': torch.from_numpy(pred_dist).float(),
            'obj_classes': list(train_data.ind_to_classes),
            'rel_classes': list(train_data.ind_to_predicates),
            'att_classes': list(train_data.ind_to_attributes)}


def statistics_file(cfg):
    """``OUTPUT_DIR/<DATASETS.TRAIN joined>_statistics.cache``, SGB's cache path."""
    return os.path.join(cfg.OUTPUT_DIR, '{}.cache'.format(
        ''.join(cfg.DATASETS.TRAIN) + '_statistics'))


def _fingerprint(dataset):
    st = os.stat(dataset.roidb_file)
    return {'roidb_file': os.path.abspath(dataset.roidb_file), 'size': int(st.st_size),
            'mtime_ns': int(st.st_mtime_ns), 'num_val_im': int(dataset.num_val_im)}


def get_dataset_statistics(cfg, data_dir=None):
    """The statistics of ``cfg.DATASETS.TRAIN``, read from or written to SGB's cache file.

    Parameters
    ----------
    cfg : yacs.config.CfgNode
        Reads ``DATASETS.TRAIN`` (one dataset), ``OUTPUT_DIR`` and what
        :func:`~gluontrain.torch.sgg.data.build.dataset_args` reads.
    data_dir : str, optional
        Overrides ``DATASETS.DATA_DIR``.

    Returns
    -------
    dict
        See :func:`statistics_dict`.

    Notes
    -----
    SGB reuses any existing cache file. Here the file also records the h5 it was computed
    from (path, size, mtime, ``num_val_im``) and is recomputed when they differ; it is written
    through a staged file, so an interrupted run leaves no truncated cache.
    """
    from .build import build_dataset  # pylint: disable=import-outside-toplevel

    if len(cfg.DATASETS.TRAIN) != 1:
        raise ValueError('DATASETS.TRAIN must name exactly one dataset for the statistics, got '
                         '{}'.format(list(cfg.DATASETS.TRAIN)))
    dataset = build_dataset(cfg, cfg.DATASETS.TRAIN, None, is_train=True,
                            data_dir=data_dir)[0]
    save_file = statistics_file(cfg)
    stamp = _fingerprint(dataset)
    if os.path.exists(save_file):
        try:
            cached = read_weights_file(save_file, 'data statistics cache',
                                       'it is recomputed from the data')
        except (WeightsLoadError, FileNotFoundError) as e:
            # a cache is derived data: a torn, foreign or hostile one (never unpickled beyond
            # tensors) is replaced, with a word
            _RUN_LOG.warning('%s', e)
            cached = {}
        if not isinstance(cached, dict):
            _RUN_LOG.warning('data statistics cache %s holds a %s, not the statistics; it is '
                         'recomputed from the data', save_file, type(cached).__name__)
            cached = {}
        if cached.get('source') == stamp:
            _LOG.info('Loading data statistics from: %s', save_file)
            return {k: cached[k] for k in _KEYS}
        _LOG.info('Data statistics in %s are for other data; recomputing', save_file)
    result = dataset.get_statistics()
    os.makedirs(cfg.OUTPUT_DIR, exist_ok=True)
    atomic_save_file(save_file, lambda tmp: torch.save(dict(result, source=stamp), tmp))
    _LOG.info('Save data statistics to: %s', save_file)
    return result
