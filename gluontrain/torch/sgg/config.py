"""Scene-Graph-Benchmark's yacs configuration: the same key names and defaults.

Transcribed from SGB ``maskrcnn_benchmark/config/defaults.py`` (line numbers below refer to
that file) for every key the scene-graph recipe reads; the mask, keypoint, RetinaNet, FBNet
and VGG nodes are left out (this recipe builds none of those models). Every module reads its
settings by SGB's names, e.g. ``cfg.MODEL.ROI_RELATION_HEAD.USE_GT_BOX``.

Keys that are ours (SGB has no counterpart) are marked "ours" below and listed in
docs/from_sgb.md, "Configuration (yacs)": ``DATASETS.DATA_DIR`` (SGB's hard-coded
``DatasetCatalog.DATA_DIR``; the file names stay SGB's, ``paths_catalog.py:115-121``),
``DATASETS.NUM_VAL_IM`` (SGB's ``VGDataset(num_val_im=5000)`` default),
``TEST.RELATION.ZERO_SHOT_FILE`` ("": computed from the training split), ``SEED`` (-1 leaves
RNGs unseeded) and ``SOLVER.RESTORE_SCHEDULER`` (False keeps SGB's lost decays).

``MODEL.DEVICE`` keeps SGB's default ``"cuda"``; the shipped small configs set ``"cpu"``."""
import os
import re

from yacs.config import CfgNode as CN

from ...core.argtypes import path_problem
# the value checks and ConfigError live beside (this module holds SGB's key list)
from .config_values import ConfigError, MAX_IMAGE_SIDE, check_values, check_world_size

__all__ = ['get_cfg', 'load_cfg', 'ConfigError', 'check_values',
           'check_world_size', 'MAX_IMAGE_SIDE']

_C = CN()

# ----- MODEL (defaults.py:23-45)
_C.MODEL = CN()
_C.MODEL.FLIP_AUG = False
_C.MODEL.RPN_ONLY = False
_C.MODEL.MASK_ON = False
_C.MODEL.RETINANET_ON = False
_C.MODEL.KEYPOINT_ON = False
_C.MODEL.ATTRIBUTE_ON = False
_C.MODEL.RELATION_ON = False
_C.MODEL.DEVICE = "cuda"
_C.MODEL.META_ARCHITECTURE = "GeneralizedRCNN"
_C.MODEL.CLS_AGNOSTIC_BBOX_REG = False
# Path to a checkpoint (or catalog:// name in SGB) for the whole model.
_C.MODEL.WEIGHT = ""
# The sgg-detector checkpoint loaded with load_mapping before relation training.
_C.MODEL.PRETRAINED_DETECTOR_CKPT = ""

# ----- INPUT (defaults.py:46-72)
_C.INPUT = CN()
_C.INPUT.MIN_SIZE_TRAIN = (800,)
_C.INPUT.MAX_SIZE_TRAIN = 1333
_C.INPUT.MIN_SIZE_TEST = 800
_C.INPUT.MAX_SIZE_TEST = 1333
_C.INPUT.PIXEL_MEAN = [102.9801, 115.9465, 122.7717]
_C.INPUT.PIXEL_STD = [1., 1., 1.]
_C.INPUT.TO_BGR255 = True
_C.INPUT.BRIGHTNESS = 0.0
_C.INPUT.CONTRAST = 0.0
_C.INPUT.SATURATION = 0.0
_C.INPUT.HUE = 0.0
_C.INPUT.VERTICAL_FLIP_PROB_TRAIN = 0.0
# ours: SGB hard-codes 0.5 in data/transforms/build.py (its FLIP_PROB_TRAIN is commented out),
# which flips images with left/right predicates although MODEL.FLIP_AUG False is documented
# as turning flips off for them. 0.5 keeps SGB's behaviour.
_C.INPUT.FLIP_PROB_TRAIN = 0.5

# ----- DATASETS (defaults.py:73-85)
_C.DATASETS = CN()
_C.DATASETS.TRAIN = ()
_C.DATASETS.VAL = ()
_C.DATASETS.TEST = ()
_C.DATASETS.TO_TEST = None
# ours: the VG folder (SGB: paths_catalog DATA_DIR "datasets" + "vg/"); file names in gluontrain.data.vg_checks.
_C.DATASETS.DATA_DIR = "datasets/vg"
# ours: SGB VGDataset's num_val_im constructor default.
_C.DATASETS.NUM_VAL_IM = 5000

# ----- DATALOADER (defaults.py:86-97)
_C.DATALOADER = CN()
_C.DATALOADER.NUM_WORKERS = 4
_C.DATALOADER.SIZE_DIVISIBILITY = 0
_C.DATALOADER.ASPECT_RATIO_GROUPING = True

# ----- BACKBONE / FPN / GROUP_NORM (defaults.py:101-135)
_C.MODEL.BACKBONE = CN()
_C.MODEL.BACKBONE.CONV_BODY = "R-50-C4"
_C.MODEL.BACKBONE.FREEZE_CONV_BODY_AT = 2
# ours: every ResNet width multiplied (small CPU bodies), and the body's norm layers:
# 'off' = frozen affine batch norm (maskrcnn-benchmark's FrozenBatchNorm2d), 'bn' to train
# from scratch (gluontrain.torch.twostage.norm.make_norm_act modes)
_C.MODEL.BACKBONE.WIDTH_MULT = 1.0
_C.MODEL.BACKBONE.NORM = 'off'

_C.MODEL.FPN = CN()
_C.MODEL.FPN.USE_GN = False
_C.MODEL.FPN.USE_RELU = False

_C.MODEL.GROUP_NORM = CN()
_C.MODEL.GROUP_NORM.DIM_PER_GP = -1
_C.MODEL.GROUP_NORM.NUM_GROUPS = 32
_C.MODEL.GROUP_NORM.EPSILON = 1e-5

# ----- RPN (defaults.py:136-186)
_C.MODEL.RPN = CN()
_C.MODEL.RPN.USE_FPN = False
_C.MODEL.RPN.RPN_MID_CHANNEL = 512
_C.MODEL.RPN.ANCHOR_SIZES = (32, 64, 128, 256, 512)
_C.MODEL.RPN.ANCHOR_STRIDE = (16,)
_C.MODEL.RPN.ASPECT_RATIOS = (0.5, 1.0, 2.0)
_C.MODEL.RPN.STRADDLE_THRESH = 0
_C.MODEL.RPN.FG_IOU_THRESHOLD = 0.7
_C.MODEL.RPN.BG_IOU_THRESHOLD = 0.3
_C.MODEL.RPN.BATCH_SIZE_PER_IMAGE = 256
_C.MODEL.RPN.POSITIVE_FRACTION = 0.5
_C.MODEL.RPN.PRE_NMS_TOP_N_TRAIN = 12000
_C.MODEL.RPN.PRE_NMS_TOP_N_TEST = 6000
_C.MODEL.RPN.POST_NMS_TOP_N_TRAIN = 2000
_C.MODEL.RPN.POST_NMS_TOP_N_TEST = 1000
_C.MODEL.RPN.NMS_THRESH = 0.7
_C.MODEL.RPN.MIN_SIZE = 0
_C.MODEL.RPN.FPN_POST_NMS_TOP_N_TRAIN = 2000
_C.MODEL.RPN.FPN_POST_NMS_TOP_N_TEST = 2000
_C.MODEL.RPN.FPN_POST_NMS_PER_BATCH = True
_C.MODEL.RPN.RPN_HEAD = "SingleConvRPNHead"

# ----- ROI_HEADS (defaults.py:187-222)
_C.MODEL.ROI_HEADS = CN()
_C.MODEL.ROI_HEADS.USE_FPN = False
_C.MODEL.ROI_HEADS.FG_IOU_THRESHOLD = 0.5
_C.MODEL.ROI_HEADS.BG_IOU_THRESHOLD = 0.3
_C.MODEL.ROI_HEADS.BBOX_REG_WEIGHTS = (10., 10., 5., 5.)
_C.MODEL.ROI_HEADS.BATCH_SIZE_PER_IMAGE = 256
_C.MODEL.ROI_HEADS.POSITIVE_FRACTION = 0.25
_C.MODEL.ROI_HEADS.SCORE_THRESH = 0.01
_C.MODEL.ROI_HEADS.NMS = 0.3
_C.MODEL.ROI_HEADS.POST_NMS_PER_CLS_TOPN = 300
_C.MODEL.ROI_HEADS.NMS_FILTER_DUPLICATES = False
_C.MODEL.ROI_HEADS.DETECTIONS_PER_IMG = 256

# ----- ROI_BOX_HEAD (defaults.py:223-240)
_C.MODEL.ROI_BOX_HEAD = CN()
_C.MODEL.ROI_BOX_HEAD.FEATURE_EXTRACTOR = "ResNet50Conv5ROIFeatureExtractor"
_C.MODEL.ROI_BOX_HEAD.PREDICTOR = "FastRCNNPredictor"
_C.MODEL.ROI_BOX_HEAD.POOLER_RESOLUTION = 14
_C.MODEL.ROI_BOX_HEAD.POOLER_SAMPLING_RATIO = 0
_C.MODEL.ROI_BOX_HEAD.POOLER_SCALES = (1.0 / 16,)
_C.MODEL.ROI_BOX_HEAD.NUM_CLASSES = 81
_C.MODEL.ROI_BOX_HEAD.MLP_HEAD_DIM = 2048
_C.MODEL.ROI_BOX_HEAD.USE_GN = False
_C.MODEL.ROI_BOX_HEAD.DILATION = 1
_C.MODEL.ROI_BOX_HEAD.CONV_HEAD_DIM = 256
_C.MODEL.ROI_BOX_HEAD.NUM_STACKED_CONVS = 4

# ----- ROI_ATTRIBUTE_HEAD (defaults.py:241-254)
_C.MODEL.ROI_ATTRIBUTE_HEAD = CN()
_C.MODEL.ROI_ATTRIBUTE_HEAD.FEATURE_EXTRACTOR = "FPN2MLPFeatureExtractor"
_C.MODEL.ROI_ATTRIBUTE_HEAD.PREDICTOR = "FPNPredictor"
_C.MODEL.ROI_ATTRIBUTE_HEAD.SHARE_BOX_FEATURE_EXTRACTOR = True
_C.MODEL.ROI_ATTRIBUTE_HEAD.USE_BINARY_LOSS = True
_C.MODEL.ROI_ATTRIBUTE_HEAD.ATTRIBUTE_LOSS_WEIGHT = 0.1
_C.MODEL.ROI_ATTRIBUTE_HEAD.NUM_ATTRIBUTES = 201
_C.MODEL.ROI_ATTRIBUTE_HEAD.MAX_ATTRIBUTES = 10
_C.MODEL.ROI_ATTRIBUTE_HEAD.ATTRIBUTE_BGFG_SAMPLE = True
_C.MODEL.ROI_ATTRIBUTE_HEAD.ATTRIBUTE_BGFG_RATIO = 3
_C.MODEL.ROI_ATTRIBUTE_HEAD.POS_WEIGHT = 5.0

# ----- ROI_RELATION_HEAD (defaults.py:286-343)
_C.MODEL.ROI_RELATION_HEAD = CN()
_C.MODEL.ROI_RELATION_HEAD.PREDICTOR = "MotifPredictor"
_C.MODEL.ROI_RELATION_HEAD.FEATURE_EXTRACTOR = "RelationFeatureExtractor"
_C.MODEL.ROI_RELATION_HEAD.POOLING_ALL_LEVELS = True
_C.MODEL.ROI_RELATION_HEAD.NUM_CLASSES = 51
_C.MODEL.ROI_RELATION_HEAD.BATCH_SIZE_PER_IMAGE = 64
_C.MODEL.ROI_RELATION_HEAD.POSITIVE_FRACTION = 0.25
# PredCls: USE_GT_BOX and USE_GT_OBJECT_LABEL; SGCls: USE_GT_BOX only; SGDet: neither.
_C.MODEL.ROI_RELATION_HEAD.USE_GT_BOX = True
_C.MODEL.ROI_RELATION_HEAD.USE_GT_OBJECT_LABEL = False
_C.MODEL.ROI_RELATION_HEAD.EMBED_DIM = 200
_C.MODEL.ROI_RELATION_HEAD.CONTEXT_DROPOUT_RATE = 0.2
_C.MODEL.ROI_RELATION_HEAD.CONTEXT_HIDDEN_DIM = 512
_C.MODEL.ROI_RELATION_HEAD.CONTEXT_POOLING_DIM = 4096
_C.MODEL.ROI_RELATION_HEAD.CONTEXT_OBJ_LAYER = 1
_C.MODEL.ROI_RELATION_HEAD.CONTEXT_REL_LAYER = 1

_C.MODEL.ROI_RELATION_HEAD.TRANSFORMER = CN()
_C.MODEL.ROI_RELATION_HEAD.TRANSFORMER.DROPOUT_RATE = 0.1
_C.MODEL.ROI_RELATION_HEAD.TRANSFORMER.OBJ_LAYER = 4
_C.MODEL.ROI_RELATION_HEAD.TRANSFORMER.REL_LAYER = 2
_C.MODEL.ROI_RELATION_HEAD.TRANSFORMER.NUM_HEAD = 8
_C.MODEL.ROI_RELATION_HEAD.TRANSFORMER.INNER_DIM = 2048
_C.MODEL.ROI_RELATION_HEAD.TRANSFORMER.KEY_DIM = 64
_C.MODEL.ROI_RELATION_HEAD.TRANSFORMER.VAL_DIM = 64

_C.MODEL.ROI_RELATION_HEAD.LABEL_SMOOTHING_LOSS = False
_C.MODEL.ROI_RELATION_HEAD.PREDICT_USE_VISION = True
_C.MODEL.ROI_RELATION_HEAD.PREDICT_USE_BIAS = True
_C.MODEL.ROI_RELATION_HEAD.REQUIRE_BOX_OVERLAP = True
_C.MODEL.ROI_RELATION_HEAD.NUM_SAMPLE_PER_GT_REL = 4
_C.MODEL.ROI_RELATION_HEAD.ADD_GTBOX_TO_PROPOSAL_IN_TRAIN = False

_C.MODEL.ROI_RELATION_HEAD.CAUSAL = CN()
_C.MODEL.ROI_RELATION_HEAD.CAUSAL.EFFECT_ANALYSIS = False
_C.MODEL.ROI_RELATION_HEAD.CAUSAL.FUSION_TYPE = 'sum'
_C.MODEL.ROI_RELATION_HEAD.CAUSAL.CONTEXT_LAYER = 'motifs'
_C.MODEL.ROI_RELATION_HEAD.CAUSAL.SEPARATE_SPATIAL = False
_C.MODEL.ROI_RELATION_HEAD.CAUSAL.SPATIAL_FOR_VISION = False
_C.MODEL.ROI_RELATION_HEAD.CAUSAL.EFFECT_TYPE = 'none'  # 'TDE', 'TIE', 'TE'

# VG150 predicate proportions (defaults.py:339-343), used by SGB's reweighting experiments.
_C.MODEL.ROI_RELATION_HEAD.REL_PROP = [
    0.01858, 0.00057, 0.00051, 0.00109, 0.00150, 0.00489, 0.00432, 0.02913, 0.00245, 0.00121,
    0.00404, 0.00110, 0.00132, 0.00172, 0.00005, 0.00242, 0.00050, 0.00048, 0.00208, 0.15608,
    0.02650, 0.06091, 0.00900, 0.00183, 0.00225, 0.00090, 0.00028, 0.00077, 0.04844, 0.08645,
    0.31621, 0.00088, 0.00301, 0.00042, 0.00186, 0.00100, 0.00027, 0.01012, 0.00010, 0.01286,
    0.00647, 0.00084, 0.01077, 0.00132, 0.00069, 0.00376, 0.00214, 0.11424, 0.01205, 0.02958]

# ----- RESNETS (defaults.py:352-383)
_C.MODEL.RESNETS = CN()
_C.MODEL.RESNETS.NUM_GROUPS = 1
_C.MODEL.RESNETS.WIDTH_PER_GROUP = 64
_C.MODEL.RESNETS.STRIDE_IN_1X1 = True
_C.MODEL.RESNETS.TRANS_FUNC = "BottleneckWithFixedBatchNorm"
_C.MODEL.RESNETS.STEM_FUNC = "StemWithFixedBatchNorm"
_C.MODEL.RESNETS.RES5_DILATION = 1
_C.MODEL.RESNETS.BACKBONE_OUT_CHANNELS = 256 * 4
_C.MODEL.RESNETS.RES2_OUT_CHANNELS = 256
_C.MODEL.RESNETS.STEM_OUT_CHANNELS = 64
_C.MODEL.RESNETS.STAGE_WITH_DCN = (False, False, False, False)
_C.MODEL.RESNETS.WITH_MODULATED_DCN = False
_C.MODEL.RESNETS.DEFORMABLE_GROUPS = 1

# ----- SOLVER (defaults.py:482-534)
_C.SOLVER = CN()
_C.SOLVER.MAX_ITER = 40000
_C.SOLVER.BASE_LR = 0.002
_C.SOLVER.BIAS_LR_FACTOR = 2
_C.SOLVER.MOMENTUM = 0.9
_C.SOLVER.WEIGHT_DECAY = 0.0005
_C.SOLVER.WEIGHT_DECAY_BIAS = 0.0
_C.SOLVER.CLIP_NORM = 5.0
_C.SOLVER.GAMMA = 0.1
_C.SOLVER.STEPS = (30000,)
_C.SOLVER.WARMUP_FACTOR = 1.0 / 3
_C.SOLVER.WARMUP_ITERS = 500
_C.SOLVER.WARMUP_METHOD = "linear"

_C.SOLVER.SCHEDULE = CN()
_C.SOLVER.SCHEDULE.TYPE = "WarmupMultiStepLR"  # or "WarmupReduceLROnPlateau"
_C.SOLVER.SCHEDULE.PATIENCE = 2
_C.SOLVER.SCHEDULE.THRESHOLD = 1e-4
_C.SOLVER.SCHEDULE.COOLDOWN = 1
_C.SOLVER.SCHEDULE.FACTOR = 0.5
_C.SOLVER.SCHEDULE.MAX_DECAY_STEP = 7

_C.SOLVER.CHECKPOINT_PERIOD = 2500
_C.SOLVER.GRAD_NORM_CLIP = 5.0
_C.SOLVER.PRINT_GRAD_FREQ = 5000
_C.SOLVER.TO_VAL = True
_C.SOLVER.PRE_VAL = True
_C.SOLVER.VAL_PERIOD = 2500
_C.SOLVER.UPDATE_SCHEDULE_DURING_LOAD = False
# ours: restore the scheduler (and its plateau bookkeeping) on resume; False = SGB's loss.
_C.SOLVER.RESTORE_SCHEDULER = True
# Images per batch over all GPUs (SGB divides it by the world size).
_C.SOLVER.IMS_PER_BATCH = 16

# ----- TEST (defaults.py:535-585)
_C.TEST = CN()
_C.TEST.EXPECTED_RESULTS = []
_C.TEST.EXPECTED_RESULTS_SIGMA_TOL = 4
_C.TEST.IMS_PER_BATCH = 8
_C.TEST.DETECTIONS_PER_IMG = 100

_C.TEST.BBOX_AUG = CN()
_C.TEST.BBOX_AUG.ENABLED = False
_C.TEST.BBOX_AUG.H_FLIP = False
_C.TEST.BBOX_AUG.SCALES = ()
_C.TEST.BBOX_AUG.MAX_SIZE = 4000
_C.TEST.BBOX_AUG.SCALE_H_FLIP = False

_C.TEST.SAVE_PROPOSALS = False

_C.TEST.RELATION = CN()
_C.TEST.RELATION.MULTIPLE_PREDS = False
_C.TEST.RELATION.IOU_THRESHOLD = 0.5
_C.TEST.RELATION.REQUIRE_OVERLAP = True
_C.TEST.RELATION.LATER_NMS_PREDICTION_THRES = 0.3
_C.TEST.RELATION.SYNC_GATHER = False
# ours: zero-shot triplet file (SGB: zeroshot_triplet.pytorch in its package); "" = from train.
_C.TEST.RELATION.ZERO_SHOT_FILE = ""

_C.TEST.ALLOW_LOAD_FROM_CACHE = True
_C.TEST.CUSTUM_EVAL = False
_C.TEST.CUSTUM_PATH = '.'

# ----- misc (defaults.py:586-601)
_C.OUTPUT_DIR = "."
_C.DETECTED_SGG_DIR = "."
_C.GLOVE_DIR = "."
_C.DTYPE = "float32"
# ours: seed of Python/NumPy/torch RNGs (SGB seeds nothing); -1 = unseeded as SGB.
_C.SEED = 0


def get_cfg():
    """Return a fresh copy of the default configuration.

    Returns
    -------
    yacs.config.CfgNode
        A mutable clone of SGB's defaults (plus the keys documented as ours in this module);
        changing it leaves the defaults untouched.
    """
    return _C.clone()


def load_cfg(config_file=None, opts=(), data_dir=None):
    """Build a config as SGB's tools do: defaults, then ``merge_from_file``, then
    ``merge_from_list(opts)``.

    Parameters
    ----------
    config_file : str or None
        A yacs ``.yaml`` file; ``None`` keeps the defaults.
    opts : sequence of str
        ``KEY VALUE`` pairs, e.g. ``('SOLVER.MAX_ITER', '100', 'OUTPUT_DIR', 'out')``.
    data_dir : str or None
        When given, sets ``DATASETS.DATA_DIR`` (the ``--data-dir`` CLI option) after opts.

    Returns
    -------
    yacs.config.CfgNode

    Raises
    ------
    ConfigError
        The file is missing or not valid YAML, a key does not exist (naming it and the
        file), a value has the wrong type or is out of range (:func:`check_values`), or
        ``opts`` has an odd length.
    """
    cfg = get_cfg()
    if config_file is not None:
        problem = path_problem(config_file)
        if problem:
            raise ConfigError('config file {} {}: pass a yacs .yaml file (the '
                              'shipped ones are in {})'.format(config_file, problem, CONFIGS_DIR))
        try:
            cfg.merge_from_file(config_file)
        except (KeyError, ValueError, TypeError, AssertionError) as exc:
            raise ConfigError('config file {}: {}'.format(config_file, _message(exc))) from None
        except Exception as exc:  # yaml.YAMLError and friends
            raise ConfigError('config file {} is not valid YAML: {}'.format(
                config_file, str(exc).replace('\n', ' '))) from None
    opts = list(opts or ())
    if len(opts) % 2:
        raise ConfigError('command-line overrides must be KEY VALUE pairs; got an odd number '
                          '({}): {}'.format(len(opts), ' '.join(opts)))
    try:
        cfg.merge_from_list(opts)
    except (KeyError, ValueError, TypeError, AssertionError) as exc:
        raise ConfigError('command-line override: {}'.format(_message(exc))) from None
    if data_dir is not None:
        cfg.DATASETS.DATA_DIR = str(data_dir)
    _check_dtype(cfg, config_file)
    check_values(cfg, config_file, opts)
    cfg.freeze()  # as SGB's tools
    return cfg


def _check_dtype(cfg, config_file):
    """``DTYPE``: SGB trains in float32, or with ``"float16"`` through apex AMP O1
    (``relation_train_net.py``: ``amp.initialize(..., opt_level='O1')``), which needs CUDA;
    the recipe runs it as torch's float16 autocast + GradScaler (``step.SGGStep``)."""
    where = 'config file {}'.format(config_file) if config_file else 'command-line override'
    if cfg.DTYPE not in ('float32', 'float16'):
        raise ConfigError('{}: DTYPE = {!r}; SGB knows "float32" and "float16"'.format(
            where, cfg.DTYPE))
    if cfg.DTYPE == 'float16' and not str(cfg.MODEL.DEVICE).startswith('cuda'):
        raise ConfigError('{}: DTYPE "float16" is SGB\'s apex AMP (O1) mixed precision, which '
                          'runs on CUDA only; on MODEL.DEVICE {} pass DTYPE float32'.format(
                              where, cfg.MODEL.DEVICE))


_MISMATCH = re.compile(r"Type mismatch \(<class '(\w+)'> vs\. <class '(\w+)'>\) with values "
                       r"\((.*) vs\. (.*)\) for config key: (\S+)$")
_KINDS = {'int': 'an integer', 'float': 'a number', 'str': 'text', 'bool': 'True or False',
          'tuple': 'a tuple', 'list': 'a list'}


def _message(exc):
    msg = str(exc.args[0] if exc.args else exc).replace('\n', ' ')
    # yacs: "Type mismatch (<class 'int'> vs. <class 'str'>) with values (200 vs. abc) for
    # config key: SOLVER.MAX_ITER" -> the key, the value, what it takes
    match = _MISMATCH.match(msg)
    if match:
        want, got, default, value, key = match.groups()
        return '{} = {} is {}, but {} takes {} (e.g. {})'.format(
            key, value, _KINDS.get(got, 'a ' + got), key, _KINDS.get(want, 'a ' + want), default)
    return msg


CONFIGS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'configs')
