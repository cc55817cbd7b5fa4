"""The 'sgg-detector' stage end to end (SGB's detector_pretrain_net on generated VG boxes), its
model_final.pth loaded by the relation training through load_mapping."""
import os

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
    rel = recipe.main(['--config-file', os.path.join(CONFIGS_DIR, 'sgdet_motifs_cpu.yaml'),
                       '--data-dir', root, '--skip-test', 'OUTPUT_DIR', str(tmp_path / 'rel'),
                       'MODEL.PRETRAINED_DETECTOR_CKPT', final, 'SOLVER.MAX_ITER', '2',
                       'SOLVER.TO_VAL', 'False', 'SOLVER.CHECKPOINT_PERIOD', '2'] + TINY)
    weights = torch.load(str(tmp_path / 'rel' / 'model_final.pth'), weights_only=True)['model']
    det_w = saved['model']
    # the frozen detector is the pretrained one; the relation box extractor started from it
    for key in ('backbone.fpn.fpn_inner1.weight', 'roi_heads.box.feature_extractor.fc6.weight'):
        if key in det_w:
            assert torch.equal(weights[key], det_w[key]), key
    assert rel.iteration == 2


def test_detector_config_refused_by_relation_script(tmp_path):
    with pytest.raises(ValueError, match='MODEL.RELATION_ON is False'):
        recipe.main(['--config-file', os.path.join(CONFIGS_DIR, 'detector_cpu.yaml'),
                     'OUTPUT_DIR', str(tmp_path)])
    with pytest.raises(ValueError, match='MODEL.RELATION_ON is True'):
        detector_recipe.main(['--config-file', os.path.join(CONFIGS_DIR,
                                                            'predcls_motifs_cpu.yaml'),
                              'OUTPUT_DIR', str(tmp_path)])
