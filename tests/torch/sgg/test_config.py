"""SGB's yacs config: key names and defaults as defaults.py, file + opts merging, clear errors.

SGB's README command lines and their config files come from the recording ``sgb_config`` and,
with ``GLUONTRAIN_REFERENCES`` set, live from SGB's checkout."""
import os
import shlex

import pytest

from fixtures.recorded import SOURCES, Recorder, from_json_array, json_array, reference_source
from gluontrain.torch.sgg.config import (CONFIGS_DIR, ConfigError, check_world_size,
                                         get_cfg, load_cfg)


def test_defaults_match_sgb_defaults_py():
    cfg = get_cfg()
    # A sample across every node, values read off SGB maskrcnn_benchmark/config/defaults.py.
    assert cfg.MODEL.META_ARCHITECTURE == "GeneralizedRCNN"
    assert cfg.MODEL.RELATION_ON is False and cfg.MODEL.ATTRIBUTE_ON is False
    assert cfg.MODEL.DEVICE == "cuda"
    assert cfg.INPUT.MIN_SIZE_TRAIN == (800,) and cfg.INPUT.MAX_SIZE_TEST == 1333
    assert cfg.INPUT.PIXEL_MEAN == [102.9801, 115.9465, 122.7717]
    assert cfg.MODEL.RPN.ANCHOR_STRIDE == (16,) and cfg.MODEL.RPN.PRE_NMS_TOP_N_TRAIN == 12000
    assert cfg.MODEL.ROI_HEADS.BBOX_REG_WEIGHTS == (10., 10., 5., 5.)
    assert cfg.MODEL.ROI_HEADS.DETECTIONS_PER_IMG == 256
    assert cfg.MODEL.ROI_BOX_HEAD.POOLER_RESOLUTION == 14
    assert cfg.MODEL.ROI_BOX_HEAD.MLP_HEAD_DIM == 2048
    rel = cfg.MODEL.ROI_RELATION_HEAD
    assert rel.PREDICTOR == "MotifPredictor" and rel.NUM_CLASSES == 51
    assert rel.BATCH_SIZE_PER_IMAGE == 64 and rel.POSITIVE_FRACTION == 0.25
    assert rel.USE_GT_BOX is True and rel.USE_GT_OBJECT_LABEL is False
    assert rel.NUM_SAMPLE_PER_GT_REL == 4 and rel.REQUIRE_BOX_OVERLAP is True
    assert rel.TRANSFORMER.OBJ_LAYER == 4 and rel.TRANSFORMER.INNER_DIM == 2048
    assert rel.CAUSAL.EFFECT_TYPE == 'none' and rel.CAUSAL.FUSION_TYPE == 'sum'
    assert len(rel.REL_PROP) == 50 and rel.REL_PROP[30] == 0.31621
    assert cfg.MODEL.RESNETS.BACKBONE_OUT_CHANNELS == 1024
    s = cfg.SOLVER
    assert (s.MAX_ITER, s.BASE_LR, s.BIAS_LR_FACTOR, s.WEIGHT_DECAY_BIAS) == (40000, 0.002, 2, 0.0)
    assert s.WARMUP_FACTOR == 1.0 / 3 and s.WARMUP_ITERS == 500 and s.STEPS == (30000,)
    assert s.SCHEDULE.TYPE == "WarmupMultiStepLR"
    assert (s.SCHEDULE.PATIENCE, s.SCHEDULE.THRESHOLD, s.SCHEDULE.COOLDOWN,
            s.SCHEDULE.FACTOR, s.SCHEDULE.MAX_DECAY_STEP) == (2, 1e-4, 1, 0.5, 7)
    assert (s.CHECKPOINT_PERIOD, s.VAL_PERIOD, s.PRINT_GRAD_FREQ, s.GRAD_NORM_CLIP) == \
        (2500, 2500, 5000, 5.0)
    assert s.PRE_VAL is True and s.TO_VAL is True and s.UPDATE_SCHEDULE_DURING_LOAD is False
    assert s.IMS_PER_BATCH == 16 and cfg.TEST.IMS_PER_BATCH == 8
    assert cfg.TEST.RELATION.LATER_NMS_PREDICTION_THRES == 0.3
    assert cfg.TEST.RELATION.IOU_THRESHOLD == 0.5 and cfg.TEST.ALLOW_LOAD_FROM_CACHE is True
    assert cfg.TEST.CUSTUM_EVAL is False
    assert cfg.OUTPUT_DIR == "." and cfg.GLOVE_DIR == "." and cfg.DETECTED_SGG_DIR == "."
    assert cfg.DTYPE == "float32"


def test_get_cfg_returns_independent_clone():
    a = get_cfg()
    a.SOLVER.BASE_LR = 1.0
    assert get_cfg().SOLVER.BASE_LR == 0.002


def test_file_then_opts_then_data_dir(tmp_path):
    f = tmp_path / 'x.yaml'
    f.write_text("SOLVER:\n  MAX_ITER: 30\n  BASE_LR: 0.01\nMODEL:\n  ROI_RELATION_HEAD:\n"
                 "    USE_GT_OBJECT_LABEL: True\n")
    cfg = load_cfg(str(f), ['SOLVER.BASE_LR', '0.5', 'OUTPUT_DIR', 'out'], data_dir='/d')
    assert cfg.SOLVER.MAX_ITER == 30 and cfg.SOLVER.BASE_LR == 0.5
    assert cfg.MODEL.ROI_RELATION_HEAD.USE_GT_OBJECT_LABEL is True
    assert cfg.OUTPUT_DIR == 'out' and cfg.DATASETS.DATA_DIR == '/d'
    assert cfg.is_frozen()


def test_errors_name_file_and_key(tmp_path):
    with pytest.raises(ConfigError, match='does not exist'):
        load_cfg(str(tmp_path / 'missing.yaml'))
    bad = tmp_path / 'bad.yaml'
    bad.write_text("SOLVER:\n  MAX_ITERS: 3\n")
    with pytest.raises(ConfigError, match=r'bad\.yaml.*SOLVER\.MAX_ITERS'):
        load_cfg(str(bad))
    with pytest.raises(ConfigError, match='SOLVER.NOPE'):
        load_cfg(None, ['SOLVER.NOPE', '1'])
    with pytest.raises(ConfigError, match='KEY VALUE pairs'):
        load_cfg(None, ['SOLVER.MAX_ITER'])
    broken = tmp_path / 'broken.yaml'
    broken.write_text("SOLVER: [\n")
    with pytest.raises(ConfigError, match='broken.yaml'):
        load_cfg(str(broken))


@pytest.mark.parametrize('name, relation, gt_box, gt_label', [
    ('detector_cpu', False, True, False), ('predcls_motifs_cpu', True, True, True),
    ('sgcls_motifs_cpu', True, True, False), ('sgdet_motifs_cpu', True, False, False)])
def test_shipped_configs_load_with_their_mode(name, relation, gt_box, gt_label):
    from gluontrain.torch.sgg.config import CONFIGS_DIR
    cfg = load_cfg(os.path.join(CONFIGS_DIR, name + '.yaml'))
    head = cfg.MODEL.ROI_RELATION_HEAD
    assert (cfg.MODEL.RELATION_ON, head.USE_GT_BOX, head.USE_GT_OBJECT_LABEL) == \
        (relation, gt_box, gt_label)
    # the synthetic VG data: 8 shapes + background, 12 predicates + background
    assert cfg.MODEL.ROI_BOX_HEAD.NUM_CLASSES == 9 and head.NUM_CLASSES == 13
    assert cfg.MODEL.DEVICE == 'cpu' and cfg.DATASETS.TRAIN == (
        'VG_stanford_filtered_with_attribute_train',)
    assert cfg.INPUT.MIN_SIZE_TRAIN == (192,)   # a list in the file, SGB's tuple here


@pytest.mark.parametrize('opts, message', [
    (['MODEL.DEVICE', 'cpu', 'DTYPE', 'float16'], 'CUDA only; on MODEL.DEVICE cpu pass DTYPE'),
    (['DTYPE', 'bfloat16'], 'SGB knows "float32" and "float16"')])
def test_dtype_is_honoured_or_refused_in_one_line(opts, message):
    """SGB's README passes ``DTYPE "float16"`` (apex AMP O1, CUDA only): never silently
    float32."""
    with pytest.raises(ConfigError, match=message) as err:
        load_cfg(None, opts)
    assert '\n' not in str(err.value)


def test_dtype_float16_is_accepted_on_cuda():
    """SGB's README command lines (``DTYPE "float16"``, MODEL.DEVICE cuda) load unchanged."""
    assert load_cfg(None, ['MODEL.DEVICE', 'cuda', 'DTYPE', 'float16']).DTYPE == 'float16'


SGB_CHECKOUT = 'Scene-Graph-Benchmark.pytorch'


def _sgb_readme():
    """SGB's README.md text, or None without the checkout."""
    return reference_source(SGB_CHECKOUT, 'README.md')


SGB = Recorder('sgb_config', _sgb_readme, "SGB's README.md and configs/")


@SGB.case
def readme_command_lines(readme):
    """Every ``python ... --config-file ...`` line of SGB's README, split as a shell would,
    and the text of each config file they name (``{path in the checkout: yaml}``)."""
    lines = [shlex.split(line) for line in readme.splitlines()
             if '--config-file' in line and 'python' in line]
    paths = sorted({args[args.index('--config-file') + 1] for args in lines})
    return {'lines': json_array(lines),
            'configs': json_array({p: reference_source(SGB_CHECKOUT, p) for p in paths})}


@pytest.mark.parametrize('source', SOURCES)
def test_sgb_readme_command_lines_load_unchanged(tmp_path, source):
    """Every ``--config-file ... KEY VALUE ...`` command line of SGB's README (detector
    pretraining, PredCls / SGCls / SGDet training and testing, ``DTYPE "float16"``,
    ``GLOVE_DIR``, ``MODEL.ROI_RELATION_HEAD.*``) loads with its own config file (recorded,
    and live from SGB's checkout)."""
    ref = SGB.outputs('readme_command_lines', source)
    lines, configs = from_json_array(ref['lines']), from_json_array(ref['configs'])
    assert len(lines) >= 7
    for rel, text in configs.items():   # SGB's files, at their paths in the checkout
        os.makedirs(os.path.dirname(str(tmp_path / rel)), exist_ok=True)
        (tmp_path / rel).write_text(text)
    for args in lines:
        at = args.index('--config-file')
        cfg = load_cfg(str(tmp_path / args[at + 1]), args[at + 2:])
        assert cfg.DTYPE == 'float16' and cfg.MODEL.BACKBONE.CONV_BODY == 'R-101-FPN'
        assert cfg.MODEL.RESNETS.NUM_GROUPS == 32


# ----- issue 21: values refused when the config is loaded, naming where they came from

CPU = os.path.join(CONFIGS_DIR, 'predcls_motifs_cpu.yaml')


@pytest.mark.parametrize('opts, message', [
    # before: "split_size can only be 0" from torch mid-run
    (['SOLVER.IMS_PER_BATCH', '0'], 'command-line override: SOLVER.IMS_PER_BATCH = 0 is out of '
                                    'range; allowed: an integer >= 1 (images per batch over all '
                                    'processes)'),
    # before: "__len__() should return >= 0"
    (['SOLVER.MAX_ITER', '-5'], 'command-line override: SOLVER.MAX_ITER = -5 is out of range; '
                                'allowed: an integer >= 0 (0 trains nothing: only the test of '
                                'the initial weights runs)'),
    # before: silently never (SGB itself divides by zero)
    (['SOLVER.VAL_PERIOD', '0'], 'command-line override: SOLVER.VAL_PERIOD = 0 is out of range; '
                                 'allowed: an integer >= 1 (SGB divides by it: iteration % '
                                 'VAL_PERIOD == 0); for no validation during training pass '
                                 'SOLVER.TO_VAL False'),
    (['SOLVER.CHECKPOINT_PERIOD', '0'], 'command-line override: SOLVER.CHECKPOINT_PERIOD = 0 is '
                                        'out of range; allowed: an integer >= 1 (SGB divides by '
                                        'it: iteration % CHECKPOINT_PERIOD == 0); a value above '
                                        'SOLVER.MAX_ITER writes model_final.pth only'),
    (['INPUT.MIN_SIZE_TRAIN', '(0,)'], 'command-line override: INPUT.MIN_SIZE_TRAIN = (0,) is '
                                       'out of range; allowed: a tuple of integers from 1 to '
                                       '8192 (one drawn per image), e.g. (600,)'),
    (['INPUT.MIN_SIZE_TRAIN', '(100000,)'], 'INPUT.MIN_SIZE_TRAIN = (100000,) is out of range'),
    (['INPUT.MAX_SIZE_TEST', '0'], 'INPUT.MAX_SIZE_TEST = 0 is out of range; allowed: an '
                                   'integer >= 1 and <= 8192 (pixels)'),
    (['TEST.IMS_PER_BATCH', '-1'], 'TEST.IMS_PER_BATCH = -1 is out of range'),
    (['DATALOADER.NUM_WORKERS', '-1'], 'DATALOADER.NUM_WORKERS = -1 is out of range'),
    (['MODEL.ROI_BOX_HEAD.NUM_CLASSES', '1'], 'MODEL.ROI_BOX_HEAD.NUM_CLASSES = 1 is out of '
                                              'range; allowed: an integer >= 2 (background '
                                              'included)'),
    (['SOLVER.BASE_LR', 'float("nan")'], 'SOLVER.BASE_LR = '),
    # yacs' "Type mismatch (<class 'tuple'> vs. <class 'int'>) ..." in words
    (['INPUT.MIN_SIZE_TRAIN', '600'], 'command-line override: INPUT.MIN_SIZE_TRAIN = 600 is an '
                                      'integer, but INPUT.MIN_SIZE_TRAIN takes a tuple (e.g. '
                                      '(192,))'),
    (['SOLVER.MAX_ITER', 'abc'], 'command-line override: SOLVER.MAX_ITER = abc is text, but '
                                 'SOLVER.MAX_ITER takes an integer'),
])
def test_bad_values_are_one_line_naming_source_key_value_and_allowed(opts, message):
    with pytest.raises(ConfigError) as err:
        load_cfg(CPU, opts)
    msg = str(err.value)
    assert msg.startswith('command-line override: ') and message in msg and '\n' not in msg


def test_bad_value_in_the_file_names_the_file(tmp_path):
    f = tmp_path / 'x.yaml'
    f.write_text('SOLVER:\n  CHECKPOINT_PERIOD: 0\n')
    with pytest.raises(ConfigError, match=r'^config file .*x.yaml: SOLVER.CHECKPOINT_PERIOD = 0 '
                                          r'is out of range'):
        load_cfg(str(f))


def test_val_period_is_free_when_validation_is_off():
    # SGB reads VAL_PERIOD only under TO_VAL
    assert load_cfg(CPU, ['SOLVER.VAL_PERIOD', '0', 'SOLVER.TO_VAL', 'False']).SOLVER.TO_VAL \
        is False


def test_shipped_configs_and_defaults_pass():
    for name in sorted(os.listdir(CONFIGS_DIR)):
        load_cfg(os.path.join(CONFIGS_DIR, name))
    load_cfg(None)


def test_batches_must_split_over_the_processes():
    cfg = load_cfg(CPU, ['SOLVER.IMS_PER_BATCH', '4', 'TEST.IMS_PER_BATCH', '4'])
    check_world_size(cfg, 2)
    with pytest.raises(ConfigError, match=r'^SOLVER.IMS_PER_BATCH = 4 must be divisible by the '
                                          r'number of processes \(3\); pass SOLVER.IMS_PER_BATCH '
                                          r'3 or 6$'):
        check_world_size(cfg, 3)


def test_a_folder_given_as_the_config_file_says_so(tmp_path):
    with pytest.raises(ConfigError, match='is a folder, not a file'):
        load_cfg(str(tmp_path))
