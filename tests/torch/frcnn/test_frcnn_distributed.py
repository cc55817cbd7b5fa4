"""A real 2-process torchrun/gloo run of the recipe: both ranks end with identical weights."""
import os
import socket
import subprocess
import sys

import pytest
import torch

from gluontrain.torch.frcnn.snapshot import load_snapshot

from test_frcnn_recipe import REPO, TINY  # same folder (pytest prepends it to sys.path)

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'ddp_frcnn_worker.py')


def _free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


@pytest.mark.slow
def test_two_ranks_train_to_identical_weights(tmp_path):
    root = tmp_path / 'data'
    subprocess.run([sys.executable, os.path.join(REPO, 'scripts', 'make_synthetic_data.py'),
                    'coco', '--root', str(root), '--num-train', '16', '--num-val', '4'],
                   check=True, capture_output=True)
    cfg = tmp_path / 'tiny.ini'
    cfg.write_text(TINY.replace('train_batch_size = 4', 'train_batch_size = 2'))
    env = dict(os.environ, OMP_NUM_THREADS='1', PYTHONPATH=REPO)
    for name in ('RANK', 'WORLD_SIZE', 'LOCAL_RANK', 'MASTER_ADDR', 'MASTER_PORT'):
        env.pop(name, None)
    cmd = [sys.executable, '-m', 'torch.distributed.run', '--nnodes', '1',
           '--nproc_per_node', '2', '--rdzv-backend', 'static', '--master-addr', '127.0.0.1',
           '--master-port', str(_free_port()), '--max-restarts', '0', WORKER, str(tmp_path),
           '--seed', '0', '--log_dir', str(tmp_path / 'run'), str(cfg), str(root)]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
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
