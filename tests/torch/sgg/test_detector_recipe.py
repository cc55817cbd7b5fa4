"""The 'sgg-detector' stage end to end (SGB's detector_pretrain_net on generated VG boxes), its
model_final.pth loaded by the relation training through load_mapping."""
import os
import re

import pytest
import torch

from gluontrain.data.vg import write_vg
from gluontrain.torch.sgg import detector_recipe, recipe
from gluontrain.torch.sgg.config import CONFIGS_DIR

TINY = ['SOLVER.IMS_PER_BATCH', '2', 'TEST.IMS_PER_BATCH', '2', 'DATASETS.NUM_VAL_IM', '4',
        'INPUT.MIN_SIZE_TRAIN', '(96,)', 'INPUT.MAX_SIZE_TRAIN', '160',
        'INPUT.MIN_SIZE_TEST', '96', 'INPUT.MAX_SIZE_TEST', '160']


@pytest.mark.slow
def test_detector_then_relation_training_loads_it(tmp_path):
    root = write_vg(str(tmp_path / 'vg'), num_train=12, num_val=4, seed=2, image_size=(96, 128))
    det = detector_recipe.main(['--config-file', os.path.join(CONFIGS_DIR, 'detector_cpu.yaml'),
                                '--data-dir', root, 'OUTPUT_DIR', str(tmp_path / 'det'),
                                'SOLVER.MAX_ITER', '4', 'SOLVER.VAL_PERIOD', '4',
                                'SOLVER.CHECKPOINT_PERIOD', '4'] + TINY)
    assert det.iteration == 4
    names, values = det.scores['val']
    assert names == ['val_score'] and 0.0 <= values[-1] <= 1.0   # box mAP
    final = str(tmp_path / 'det' / 'model_final.pth')
    saved = torch.load(final, weights_only=True)
    assert saved['iteration'] == 4 and 'scheduler' in saved   # the detector tool saves it
    # the same file as Scene-Graph-Benchmark's DetectronCheckpointer writes it under DDP:
    # 'module.' keys, no gluontrain entry
    sgb_file = str(tmp_path / 'sgb_model_final.pth')
    torch.save({'model': {'module.' + k: v for k, v in saved['model'].items()},
                'optimizer': saved['optimizer'], 'scheduler': saved['scheduler'],
                'iteration': 4}, sgb_file)
    rel = recipe.main(['--config-file', os.path.join(CONFIGS_DIR, 'sgdet_motifs_cpu.yaml'),
                       '--data-dir', root, '--skip-test', 'OUTPUT_DIR', str(tmp_path / 'rel'),
                       'MODEL.PRETRAINED_DETECTOR_CKPT', sgb_file, 'SOLVER.MAX_ITER', '2',
                       'SOLVER.TO_VAL', 'False', 'SOLVER.CHECKPOINT_PERIOD', '2'] + TINY)
    weights = torch.load(str(tmp_path / 'rel' / 'model_final.pth'), weights_only=True)['model']
    det_w = saved['model']
    # the frozen detector is the pretrained one; the relation box extractor started from it
    for key in ('backbone.fpn.fpn_inner1.weight', 'roi_heads.box.feature_extractor.fc6.weight'):
        if key in det_w:
            assert torch.equal(weights[key], det_w[key]), key
    assert rel.iteration == 2
    # the report: N of M, and both relation extractors filled from the box extractor
    log = (tmp_path / 'rel' / 'log.txt').read_text()
    n_box = sum(1 for k in det_w if k.startswith('roi_heads.box.feature_extractor.'))
    assert n_box and re.search(r'loaded \d+ of \d+ tensors from {} \(\d+ missing, 0 '
                               r'unexpected, 0 wrong shape\)'.format(re.escape(sgb_file)), log)
    for src in ('roi_heads.relation.box_feature_extractor',
                'roi_heads.relation.union_feature_extractor.feature_extractor'):
        assert '{}.* <- roi_heads.box.feature_extractor.* ({} tensors)'.format(
            src, n_box) in log
    assert 'Some model parameters or buffers are not found in the checkpoint:' in log

    # SGB's detector file named in last_checkpoint resumes the detector stage (iteration 4)
    det2 = tmp_path / 'det2'
    det2.mkdir()
    (det2 / 'last_checkpoint').write_text(sgb_file)
    resumed = detector_recipe.main(['--config-file', os.path.join(CONFIGS_DIR,
                                                                  'detector_cpu.yaml'),
                                    '--data-dir', root, '--skip-test', 'OUTPUT_DIR', str(det2),
                                    'SOLVER.MAX_ITER', '5', 'SOLVER.TO_VAL', 'False',
                                    'SOLVER.CHECKPOINT_PERIOD', '5'] + TINY)
    assert resumed.iteration == 5 and resumed.resumed_from == sgb_file
    assert torch.load(str(det2 / 'model_final.pth'), weights_only=True)['iteration'] == 5


def test_detector_config_refused_by_relation_script(tmp_path):
    with pytest.raises(ValueError, match='MODEL.RELATION_ON is False'):
        recipe.main(['--config-file', os.path.join(CONFIGS_DIR, 'detector_cpu.yaml'),
                     'OUTPUT_DIR', str(tmp_path)])
    with pytest.raises(ValueError, match='MODEL.RELATION_ON is True'):
        detector_recipe.main(['--config-file', os.path.join(CONFIGS_DIR,
                                                            'predcls_motifs_cpu.yaml'),
                              'OUTPUT_DIR', str(tmp_path)])


def test_detector_head_of_another_size_than_the_data_is_refused(tmp_path):
    # SGB's detector tool would train a 151-class head on 8-class data without a word; the
    # relation stage already refuses the same mismatch
    root = write_vg(str(tmp_path / 'vg'), num_train=6, num_val=2, seed=1, image_size=(96, 128))
    with pytest.raises(ValueError) as err:
        detector_recipe.main(['--config-file', os.path.join(CONFIGS_DIR, 'detector_cpu.yaml'),
                              '--data-dir', root, 'OUTPUT_DIR', str(tmp_path / 'det'),
                              'MODEL.ROI_BOX_HEAD.NUM_CLASSES', '151'] + TINY)
    n = len(detector_recipe.get_dataset(root, detector_recipe.config_of(
        detector_recipe.parse_args(['--config-file', os.path.join(CONFIGS_DIR,
                                                                  'detector_cpu.yaml')]
                                   + TINY)))[0].ind_to_classes)
    assert str(err.value) == (
        'MODEL.ROI_BOX_HEAD.NUM_CLASSES is 151 but the dataset in {} has {} object classes '
        '(background included); set MODEL.ROI_BOX_HEAD.NUM_CLASSES {}'.format(root, n, n))
    assert not [f for f in os.listdir(tmp_path / 'det') if f.endswith('.pth')]


def test_output_dir_that_is_a_file_is_one_line(tmp_path):
    taken = tmp_path / 'taken'
    taken.write_text('x')
    for main in (detector_recipe.main, recipe.main):
        config = 'detector_cpu.yaml' if main is detector_recipe.main else 'predcls_motifs_cpu.yaml'
        with pytest.raises(ValueError, match=r'^OUTPUT_DIR .*taken: .*taken is an existing '
                                             r'file, not a folder; pass OUTPUT_DIR with a '
                                             r'folder'):
            main(['--config-file', os.path.join(CONFIGS_DIR, config), 'OUTPUT_DIR', str(taken)])
    assert taken.read_text() == 'x'


def test_interrupt_advice_is_rerunning_the_command():
    # SGB's tools have no --resume: the Ctrl-C line must not advise one
    for module in (recipe, detector_recipe):
        advice = module.RESUME_ADVICE.format(path='out/model_0000002.pth')
        assert '--resume' not in advice
        assert advice == ('resume by rerunning the same command (it continues from the '
                          'checkpoint named in last_checkpoint beside out/model_0000002.pth)')
