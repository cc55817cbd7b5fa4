"""Ranges of the scene-graph config values, checked when a config is loaded
(:func:`gluontrain.torch.sgg.config.load_cfg`): a value SGB would crash on mid-run
(``SOLVER.IMS_PER_BATCH 0``: ``split_size can only be 0``; ``SOLVER.MAX_ITER -5``:
``__len__() should return >= 0``; ``SOLVER.VAL_PERIOD 0`` / ``CHECKPOINT_PERIOD 0``: a
division by zero in SGB, silently "never" before) or run out of memory on (``INPUT`` sizes) is
one line naming where it came from (the config file or the command-line override), the key,
the value and what is allowed.
"""
__all__ = ['ConfigError', 'MAX_IMAGE_SIDE', 'VALUE_CHECKS', 'check_values', 'check_world_size',
           'check_detector_classes', 'relation_mode', 'MODES']


class ConfigError(ValueError):
    """A config file is missing or malformed, or names a key SGB's config does not have."""


#: ``(USE_GT_BOX, USE_GT_OBJECT_LABEL)`` -> SGB's mode name.
MODES = {(True, True): 'predcls', (True, False): 'sgcls', (False, False): 'sgdet'}


def relation_mode(cfg):
    """``'predcls'``, ``'sgcls'`` or ``'sgdet'`` from ``MODEL.ROI_RELATION_HEAD.USE_GT_BOX``
    / ``USE_GT_OBJECT_LABEL`` (the model, its predictors and the evaluation read it here).

    Raises
    ------
    ValueError
        For ``USE_GT_BOX False`` with ``USE_GT_OBJECT_LABEL True`` (no such mode).
    """
    r = cfg.MODEL.ROI_RELATION_HEAD
    key = (bool(r.USE_GT_BOX), bool(r.USE_GT_OBJECT_LABEL))
    if key not in MODES:
        raise ValueError('MODEL.ROI_RELATION_HEAD.USE_GT_BOX False with USE_GT_OBJECT_LABEL '
                         'True is not a mode; use (True, True) PredCls, (True, False) SGCls '
                         'or (False, False) SGDet')
    return MODES[key]


#: The largest image side the INPUT sizes accept: one 8192 x 8192 float image is 0.8 GB
#: (SGB trains at 600 / 1000 px); far larger values ran out of memory mid-run.
MAX_IMAGE_SIDE = 8192


def _int_range(lo, hi=None):
    def ok(v):
        return isinstance(v, int) and not isinstance(v, bool) and v >= lo and \
            (hi is None or v <= hi)
    return ok, 'an integer >= {}{}'.format(lo, ' and <= {}'.format(hi) if hi else '')


def _float_range(lo, hi=None):
    def ok(v):
        return isinstance(v, (int, float)) and not isinstance(v, bool) and v == v and \
            abs(v) != float('inf') and v >= lo and (hi is None or v <= hi)
    return ok, 'a finite number >= {}{}'.format(lo, ' and <= {}'.format(hi) if hi else '')


_SIDE = _int_range(1, MAX_IMAGE_SIDE)
_DIVIDES = ' (SGB divides by it: iteration % {} == 0)'
#: key -> ((check, allowed), why); a key that means "never" at 0 is refused as SGB (it
#: divides by it), with the setting that does mean "never" named.
VALUE_CHECKS = {
    'SOLVER.IMS_PER_BATCH': (_int_range(1), ' (images per batch over all processes)'),
    'TEST.IMS_PER_BATCH': (_int_range(1), ' (images per batch over all processes)'),
    # 0 is allowed (and logged by the recipe): the test of the initial weights alone
    'SOLVER.MAX_ITER': (_int_range(0), ' (0 trains nothing: only the test of the initial '
                                       'weights runs)'),
    'SOLVER.CHECKPOINT_PERIOD': (_int_range(1), _DIVIDES.format('CHECKPOINT_PERIOD') +
                                 '; a value above SOLVER.MAX_ITER writes model_final.pth only'),
    'SOLVER.BASE_LR': (_float_range(0), ''),
    'SOLVER.MOMENTUM': (_float_range(0, 1), ''),
    'SOLVER.WEIGHT_DECAY': (_float_range(0), ''),
    'SOLVER.WARMUP_ITERS': (_int_range(0), ''),
    'INPUT.MAX_SIZE_TRAIN': (_SIDE, ' (pixels)'),
    'INPUT.MIN_SIZE_TEST': (_SIDE, ' (pixels)'),
    'INPUT.MAX_SIZE_TEST': (_SIDE, ' (pixels)'),
    'DATALOADER.NUM_WORKERS': (_int_range(0), ''),
    'DATALOADER.SIZE_DIVISIBILITY': (_int_range(0), ''),
    'DATASETS.NUM_VAL_IM': (_int_range(0), ''),
    'MODEL.ROI_BOX_HEAD.NUM_CLASSES': (_int_range(2), ' (background included)'),
    'MODEL.ROI_RELATION_HEAD.NUM_CLASSES': (_int_range(2), ' (background included)'),
    'MODEL.RPN.BATCH_SIZE_PER_IMAGE': (_int_range(1), ''),
    'MODEL.ROI_HEADS.BATCH_SIZE_PER_IMAGE': (_int_range(1), ''),
    'MODEL.ROI_RELATION_HEAD.BATCH_SIZE_PER_IMAGE': (_int_range(1), ''),
    'TEST.DETECTIONS_PER_IMG': (_int_range(1), ''),
    'MODEL.BACKBONE.WIDTH_MULT': ((lambda v: _float_range(0)[0](v) and v > 0, 'a number > 0'), ''),
}


def _get(cfg, key):
    node = cfg
    for part in key.split('.'):
        node = node[part]
    return node


def _source(key, config_file, opts):
    """Where ``key`` got its value: the last override naming it, else the file."""
    if key in list(opts)[::2]:
        return 'command-line override'
    return 'config file {}'.format(config_file) if config_file else 'default'


def check_values(cfg, config_file=None, opts=()):
    """Refuse values SGB would crash on mid-run (or silently misuse), before anything is built:
    ``SOURCE: KEY = VALUE is out of range; allowed: ...``.

    Parameters
    ----------
    cfg : yacs.config.CfgNode
    config_file : str or None
    opts : sequence of str
        The ``KEY VALUE`` overrides (the message names them as the source).

    Raises
    ------
    ConfigError
    """
    def fail(key, value, allowed):
        raise ConfigError('{}: {} = {!r} is out of range; allowed: {}'.format(
            _source(key, config_file, opts), key, value, allowed))
    for key, ((ok, allowed), why) in VALUE_CHECKS.items():
        if not ok(_get(cfg, key)):
            fail(key, _get(cfg, key), allowed + why)
    sizes = cfg.INPUT.MIN_SIZE_TRAIN
    if not isinstance(sizes, (list, tuple)) or not sizes or \
            not all(_SIDE[0](s) for s in sizes):
        fail('INPUT.MIN_SIZE_TRAIN', sizes, 'a tuple of integers from 1 to {} (one drawn per '
             'image), e.g. (600,)'.format(MAX_IMAGE_SIDE))
    if cfg.SOLVER.TO_VAL and not _int_range(1)[0](cfg.SOLVER.VAL_PERIOD):
        fail('SOLVER.VAL_PERIOD', cfg.SOLVER.VAL_PERIOD,
             'an integer >= 1' + _DIVIDES.format('VAL_PERIOD') + '; for no validation '
             'during training pass SOLVER.TO_VAL False')


def check_world_size(cfg, world_size):
    """SGB's assert that the batches split over the processes, as one line before anything
    is built.

    Parameters
    ----------
    cfg : yacs.config.CfgNode
    world_size : int

    Raises
    ------
    ConfigError
    """
    for key in ('SOLVER.IMS_PER_BATCH', 'TEST.IMS_PER_BATCH'):
        ims = _get(cfg, key)
        if ims % world_size:
            lower = max(world_size, ims // world_size * world_size)
            raise ConfigError('{} = {} must be divisible by the number of processes ({}); '
                              'pass {} {} or {}'.format(key, ims, world_size, key, lower,
                                                        lower + world_size))


def check_detector_classes(cfg, train_dataset):
    """``MODEL.ROI_BOX_HEAD.NUM_CLASSES`` must equal the dataset's object classes (background
    included), as the relation stage requires; SGB's detector tool trains a head of another
    size silently.

    Parameters
    ----------
    cfg : yacs.config.CfgNode
    train_dataset : VGDataset (or a ConcatDataset of them)

    Raises
    ------
    ValueError
    """
    base = getattr(train_dataset, 'datasets', [train_dataset])[0]
    names = getattr(base, 'ind_to_classes', None)
    have = cfg.MODEL.ROI_BOX_HEAD.NUM_CLASSES
    if names is not None and have != len(names):
        raise ValueError('MODEL.ROI_BOX_HEAD.NUM_CLASSES is {} but the dataset in {} has {} '
                         'object classes (background included); set '
                         'MODEL.ROI_BOX_HEAD.NUM_CLASSES {}'.format(
                             have, cfg.DATASETS.DATA_DIR, len(names), len(names)))
