"""Bounded learnability of the scene-graph recipe on generated VG data (held-out test split):
PredCls R@50 of a trained MOTIFS model beats the frequency-bias-only baseline and the
untrained model, each by a margin chosen from five seeds' spread; SGCls and SGDet run end to
end and report every metric."""
import logging
import os

import numpy as np
import pytest
import torch

from gluontrain.data.vg import write_vg
from gluontrain.torch.sgg import recipe
from gluontrain.torch.sgg.baseline import frequency_baseline
from gluontrain.torch.sgg.evaluation.vg_eval import do_vg_evaluation

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
CONFIGS = os.path.join(REPO, 'gluontrain', 'torch', 'sgg', 'configs')
TEST_SET = 'VG_stanford_filtered_with_attribute_test'
# Measured (seed 0, 100 train / 25 test images, 2 CPU cores): R@50 PredCls on the test split
# untrained 0.0612 (chance: ~5 objects, 12 predicates), frequency baseline 0.1065, trained
# (400 iterations) 0.4156 (0.0862 / 0.4225 before the body took maskrcnn-benchmark's
# kaiming_uniform_(a=1) initialisation, gluontrain.torch.backbone). Before two fixes the trained model reached 0.1551: SGB's hard-coded
# horizontal flips corrupt 'left of' / 'right of' (the shipped config sets
# INPUT.FLIP_PROB_TRAIN 0), and an untrained frozen detector's batch norms in eval mode
# (initial statistics) fed the raw BGR-255 scale to the relation head, whose union features
# then died (frozen_norm_eval). BASE_LR 0.02 still kills them; 0.005 (x4 images) learns.
# Trim of issue 22: 200 iterations (was 400; the rate's decay at 150, was 300), 104.5 -> 60.1 s
# CPU for the test (2 loaded cores). R@50 untrained / frequency / trained with SEED 0, 1, 2:
# 0.0612 / 0.1065 / 0.2674, 0.1159 / 0.1065 / 0.2145, 0.1203 / 0.1065 / 0.2290 (the untrained
# number depends on the initial weights; 400 iterations gave 0.4167 for seed 0). Thresholds
# (were +0.2 and x3, tuned to seed 0's 400 iterations): trained above the frequency baseline
# + 0.05 (the smallest margin measured is 0.108) and above 1.5 x untrained (smallest ratio
# 1.85; 128 px images or 150 iterations came closer to the untrained model).
# Second trim (2026-11-26): images at 128-224 px (the config: 192-320), the shipped CPU config's
# rate 0.01, 150 iterations (decay at 110): 42.3 -> 27 s CPU for the training run. R@50
# untrained / frequency / trained with SEED 0, 1, 2: 0.1101 / 0.1065 / 0.3036, 0.1341 / 0.1065 /
# 0.2062, 0.0830 / 0.1065 / 0.2149 (smallest margin over the baseline 0.100, smallest ratio to
# untrained 1.54). 100 or 120 iterations at that size, or 120 at the config's size, left seed 1
# at 0.133-0.144: too close to the baseline.
# Issue 39 (2026-11-29): the run made longer again, 300 iterations (decay at 220), and the
# thresholds absolute margins chosen from the seeds' spread. At 150 iterations the outcome is
# a chaotic function of float rounding: the same seed 0 reached 0.3036 before dff84e1 (the CPU
# ROI op's new summation order, equal to 1e-12 in float64) and 0.1790 after it; on this EPYC
# 0.1808 under ATEN_CPU_CAPABILITY=default, 0.2493 with oneDNN capped at SSE4.1, 0.1612 on an
# AVX-512 Xeon (which missed the old 1.5 x untrained = 0.1652). Seeds 0-4 at HEAD, 150
# iterations, R@50 untrained / frequency / trained: 0.1101 / 0.1065 / 0.1790, 0.1341 / 0.1065 /
# 0.1301, 0.0830 / 0.1065 / 0.1764, 0.0888 / 0.1065 / 0.2457, 0.0580 / 0.1065 / 0.3250: seed 1
# did not beat its untrained model, so no threshold could keep the test's meaning there. At
# 300 iterations (57-60 s CPU for the test, was 36-40 s), seeds 0-4: 0.1101 / 0.1065 / 0.2076,
# 0.1341 / 0.1065 / 0.1714, 0.0830 / 0.1065 / 0.3341, 0.0888 / 0.1065 / 0.2982, 0.0580 /
# 0.1065 / 0.4333; seed 0 trained under ATen default / oneDNN SSE4.1 / OpenBLAS Sandybridge:
# 0.2076 / 0.2815 / 0.2076 (at 150 iterations ATen AVX2 and OpenBLAS Haswell / Sandybridge /
# Zen repeated the default run bit for bit). Smallest
# gaps: trained - frequency 0.065, trained - untrained 0.037 (both seed 1). Thresholds:
# about half of each (FREQ_MARGIN, UNTRAINED_MARGIN); the untrained number is not a ratio's
# denominator any more (it moves 0.058-0.134 with the initial weights). A run that does not
# learn stays near its untrained or the frequency number (0.06-0.13) and fails.
FREQ_MARGIN, UNTRAINED_MARGIN = 0.03, 0.02
SIZES = ['INPUT.MIN_SIZE_TRAIN', '(128,)', 'INPUT.MAX_SIZE_TRAIN', '224',
         'INPUT.MIN_SIZE_TEST', '128', 'INPUT.MAX_SIZE_TEST', '224']
ITERATIONS = 300
TRAIN = ['SOLVER.MAX_ITER', str(ITERATIONS), 'SOLVER.STEPS', '(220,)', 'SOLVER.TO_VAL', 'False',
         'SOLVER.CHECKPOINT_PERIOD', str(ITERATIONS)] + SIZES


@pytest.fixture(scope='module')
def vg_root(tmp_path_factory):
    root = tmp_path_factory.mktemp('vg')
    write_vg(str(root), num_train=100, num_val=25, seed=0)
    return str(root)


@pytest.fixture(scope='module')
def small_vg_root(tmp_path_factory):
    root = tmp_path_factory.mktemp('small_vg')
    write_vg(str(root), num_train=20, num_val=6, seed=0)
    return str(root)


def _run(config, vg_root, out, *opts):
    state = recipe.main(['--config-file', os.path.join(CONFIGS, config), '--data-dir', vg_root,
                         'OUTPUT_DIR', str(out)] + list(opts))
    score, result = state.scores['test'][0]
    return state, score, result


def _r50(result, mode='predcls'):
    return float(np.mean(result[mode + '_recall'][50]))


@pytest.mark.slow
def test_predcls_motifs_beats_frequency_baseline(vg_root, tmp_path):
    _, _, untrained = _run('predcls_motifs_cpu.yaml', vg_root, tmp_path / 'untrained',
                           'SOLVER.MAX_ITER', '0', 'SOLVER.TO_VAL', 'False', *SIZES)
    state, _, trained = _run('predcls_motifs_cpu.yaml', vg_root, tmp_path / 'trained', *TRAIN)
    assert state.iteration == ITERATIONS
    folder = tmp_path / 'trained' / 'inference' / TEST_SET
    saved = torch.load(str(folder / 'eval_results.pytorch'), weights_only=False)
    stats = torch.load(str(tmp_path / 'trained' /
                           'VG_stanford_filtered_with_attribute_train_statistics.cache'),
                       weights_only=False)
    cfg = recipe.config_from_args(recipe.parse_args([
        '--config-file', os.path.join(CONFIGS, 'predcls_motifs_cpu.yaml'), '--data-dir',
        vg_root]))
    test_ds = _test_dataset(cfg, vg_root)
    _, freq = do_vg_evaluation(cfg, test_ds, frequency_baseline(saved['predictions'],
                                                                stats['pred_dist']),
                               None, logging.getLogger('freq'), ('relations',),
                               return_result_dict=True)
    r_untrained, r_freq, r_trained = _r50(untrained), _r50(freq), _r50(trained)
    print('PredCls R@50 untrained {:.4f} frequency {:.4f} trained {:.4f}'.format(
        r_untrained, r_freq, r_trained))
    assert r_trained > r_freq + FREQ_MARGIN
    assert r_trained > r_untrained + UNTRAINED_MARGIN


def _test_dataset(cfg, vg_root):
    from gluontrain.torch.sgg.data.build import build_dataset
    from gluontrain.torch.sgg.data.transforms import build_transforms
    return build_dataset(cfg, cfg.DATASETS.TEST, build_transforms(cfg, False), is_train=False,
                         data_dir=vg_root)[0]


@pytest.mark.slow
@pytest.mark.parametrize('config, mode', [('sgcls_motifs_cpu.yaml', 'sgcls'),
                                          ('sgdet_motifs_cpu.yaml', 'sgdet')])
def test_sgcls_and_sgdet_end_to_end(small_vg_root, tmp_path, config, mode):
    """Trim of issue 22: 4 iterations (was 20), 4 validation images (was 20) and 6 test
    images (was 25, the learnability data): 12.2 + 28.0 -> 7.4 + 8.4 s CPU."""
    state, score, result = _run(config, small_vg_root, tmp_path, 'SOLVER.MAX_ITER', '4',
                                'SOLVER.VAL_PERIOD', '4', 'SOLVER.CHECKPOINT_PERIOD', '4',
                                'DATASETS.NUM_VAL_IM', '4')
    assert state.iteration == 4 and 0.0 <= score <= 1.0
    for key in ('_recall', '_recall_nogc', '_zeroshot_recall', '_ng_zeroshot_recall',
                '_mean_recall', '_ng_mean_recall'):
        assert set(result[mode + key]) == {20, 50, 100}, key
    assert os.path.isfile(str(tmp_path / 'model_final.pth'))
