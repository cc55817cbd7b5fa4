"""SGB's ``get_dataset_statistics``: the training split's predicate frequency statistics
(computed by :func:`~gluontrain.torch.sgg.data.vg_dataset.statistics_dict`, SGB's
``get_VG_statistics``, which lives beside the dataset as in SGB's ``visual_genome.py``), cached
in the output folder.

The statistics feed ``FrequencyBias`` (``pred_dist``) and the predictors' class lists.
"""
import logging
import os

from ....core.load_report import WeightsLoadError
from ...checkpoint import save_file
from ...weights import read_weights_file
from .build import build_dataset
from .vg_dataset import get_statistics, statistics_dict

__all__ = ['get_statistics', 'statistics_dict', 'get_dataset_statistics', 'statistics_file']

_LOG = logging.getLogger(__name__)
#: the recipe's logger (console and OUTPUT_DIR/log.txt): what the user must read goes there
_RUN_LOG = logging.getLogger('gluontrain.sgg')
_KEYS = ('fg_matrix', 'pred_dist', 'obj_classes', 'rel_classes', 'att_classes')


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
    if len(cfg.DATASETS.TRAIN) != 1:
        raise ValueError('DATASETS.TRAIN must name exactly one dataset for the statistics, got '
                         '{}'.format(list(cfg.DATASETS.TRAIN)))
    dataset = build_dataset(cfg, cfg.DATASETS.TRAIN, None, is_train=True, data_dir=data_dir)[0]
    path = statistics_file(cfg)
    stamp = _fingerprint(dataset)
    if os.path.exists(path):
        try:
            cached = read_weights_file(path, 'data statistics cache',
                                       'it is recomputed from the data')
        except (WeightsLoadError, FileNotFoundError) as e:
            # a cache is derived data: a torn, foreign or hostile one (never unpickled beyond
            # tensors) is replaced, with a word
            _RUN_LOG.warning('%s', e)
            cached = {}
        if not isinstance(cached, dict):
            _RUN_LOG.warning('data statistics cache %s holds a %s, not the statistics; it is '
                         'recomputed from the data', path, type(cached).__name__)
            cached = {}
        if cached.get('source') == stamp:
            _LOG.info('Loading data statistics from: %s', path)
            return {k: cached[k] for k in _KEYS}
        _LOG.info('Data statistics in %s are for other data; recomputing', path)
    result = dataset.get_statistics()
    save_file(path, dict(result, source=stamp))
    _LOG.info('Save data statistics to: %s', path)
    return result
