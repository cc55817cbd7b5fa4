"""A real 2-process torchrun/gloo run of the recipe: both ranks end with identical weights."""
import os
import subprocess
import sys

import pytest
import torch

from launch import dist_env, torchrun  # tests/launch.py
from gluontrain.torch.frcnn.snapshot import load_snapshot

from test_frcnn_recipe import REPO, TINY  # same folder (pytest prepends it to sys.path)

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'ddp_frcnn_worker.py')


@pytest.mark.slow
def test_two_ranks_train_to_identical_weights(tmp_path):
    root = tmp_path / 'data'
    subprocess.run([sys.executable, os.path.join(REPO, 'scripts', 'make_synthetic_data.py'),
                    'coco', '--root', str(root), '--num-train', '16', '--num-val', '4'],
                   check=True, capture_output=True)
    cfg = tmp_path / 'tiny.ini'
    cfg.write_text(TINY.replace('train_batch_size = 4', 'train_batch_size = 2'))
    res = torchrun(WORKER, [tmp_path, '--seed', '0', '--log_dir', tmp_path / 'run', cfg, root],
                   timeout=300, env=dist_env(PYTHONPATH=REPO))
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    ranks = [torch.load(str(tmp_path / 'rank{}.pt'.format(r)), weights_only=True)
             for r in (0, 1)]
    assert len(ranks[0]) > 50
    for name, value in ranks[0].items():
        assert torch.equal(value, ranks[1][name]), name
    # rank 0 wrote seamseg's files; each rank ran 16 / 2 ranks / 2 per batch = 4 steps a epoch
    snap = load_snapshot(str(tmp_path / 'run' / 'model_last.pth.tar'))
    assert snap['training_meta']['global_step'] == 2 * 4
    assert torch.equal(snap['state_dict']['roi_head']['roi_cls.weight'],
                       ranks[0]['roi_head.roi_cls.weight'])
    log = (tmp_path / 'run' / 'training.log').read_text()
    assert log.count('det_map=') == 2
