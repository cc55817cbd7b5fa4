"""SSD under ``torchrun --nproc_per_node 2`` (gloo, CPU): identical weights on both ranks,
disjoint shards every pass, one set of files, the whole split's mAP; a crashed DDP run
resumed equals the uninterrupted one; 2 processes against 1 with the same global batch."""
import json
import os
import re

import numpy as np
import pytest
import torch

from launch import dist_env, torchrun  # tests/launch.py
from gluontrain.core.checkpoint import load_checkpoint
from gluontrain.data import synthetic

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'ddp_ssd_worker.py')
NUM_TRAIN = 16   # trainval images: 8 of VOC2007 + 8 of VOC2012
# SSD300 at 1/16 of the channels (was 1/8: a step costs half the CPU; every torchrun here
# starts 3 processes and trains 2 ranks)
WIDTH = 0.0625


@pytest.fixture(scope='module')
def tiny_voc(tmp_path_factory):
    root = tmp_path_factory.mktemp('ssdddp')
    return synthetic.write_voc(str(root), num_train=8, num_val=4, seed=0,
                               classes=synthetic.DEFAULT_VOC_CLASSES, image_size=(128, 160))


def _argv(root, folder, batch_size, *extra, plots=False):
    # pictures only where a test looks at them (rank 0 alone draws them: ddp_run)
    return ['--dataset_root', root, '--basenet', '', '--cuda', 'false', '--batch_size',
            str(batch_size), '--num_workers', '0', '--width_mult', str(WIDTH), '--seed', '0',
            '--log_interval', '2', '--save_interval', '0', '--lr_steps', '6',
            '--plots', str(plots).lower(), '--save_folder', str(folder) + '/'] + list(extra)


def _torchrun(program, args, env_extra=None, timeout=300):
    env = dist_env(PYTHONPATH=REPO, **(env_extra or {}))
    return torchrun(program, args, timeout=timeout, env=env)


def _ok(res):
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]


def _rows(folder):
    with open(os.path.join(str(folder), 'ssd300_VOC_metrics.jsonl')) as f:
        return [json.loads(line) for line in f]


@pytest.fixture(scope='module')
def ddp_run(tiny_voc, tmp_path_factory):
    """--batch_size 4 (global): 2 ranks x 2 images, 12 steps: 4 steps a pass, 3 passes."""
    out = tmp_path_factory.mktemp('ddp')
    _ok(_torchrun(WORKER, [str(out)] + _argv(tiny_voc, out / 'run', 4, '--max_iter', '12',
                                             plots=True)))
    return out


@pytest.mark.slow
def test_two_ranks_identical_weights_disjoint_shards_one_set_of_files(ddp_run, tiny_voc):
    ranks = [torch.load(str(ddp_run / 'rank{}.pt'.format(r))) for r in (0, 1)]
    final = ranks[0]['final']
    assert len(final) == 71
    for name, value in final.items():
        assert torch.equal(value, ranks[1]['final'][name]), name
    # DDP broadcast rank 0's initial weights (rank 1 drew others from seed + 1) and they trained
    changed = [k for k in final if not torch.equal(final[k], ranks[0]['initial'][k])]
    assert len(changed) == 71
    assert any(not torch.equal(ranks[0]['initial'][k], ranks[1]['initial'][k]) for k in final)
    saved = torch.load(str(ddp_run / 'run' / 'VOC.pth'))
    assert all(torch.equal(saved[k], final[k]) for k in final)
    logs = [json.loads((ddp_run / 'rank{}.json'.format(r)).read_text()) for r in (0, 1)]
    assert [(log['rank'], log['world_size'], log['iteration']) for log in logs] == [
        (0, 2, 12), (1, 2, 12)]
    # each rank loaded 8 images a pass: disjoint halves of the 16, reshuffled every pass
    passes = [[log['loaded'][8 * p:8 * p + 8] for p in range(3)] for log in logs]
    assert all(len(log['loaded']) == 24 for log in logs)
    for p in range(3):
        assert not set(passes[0][p]) & set(passes[1][p])
        assert set(passes[0][p]) | set(passes[1][p]) == set(range(NUM_TRAIN))
    assert len({tuple(sorted(passes[0][p])) for p in range(3)}) > 1
    # one set of files, written by rank 0
    files = set(os.listdir(str(ddp_run / 'run')))
    assert files == {'VOC.pth', 'ssd300_VOC_last.ckpt', 'ssd300_VOC_train.log',
                     'ssd300_VOC_metrics.jsonl', 'ssd300_VOC_curves.png',
                     'ssd300_VOC_val_samples.png'} | (files & {'ssd300_VOC_best.pth',
                                                                'ssd300_VOC_best_map.log'})
    log = (ddp_run / 'run' / 'ssd300_VOC_train.log').read_text()
    assert log.count('Start training from') == 1 and log.count('[Iter 12] Validation') == 1
    assert re.findall(r'iter (\d+) \|\|', log) == ['0', '2', '4', '6', '8', '10']
    assert [r['epoch'] for r in _rows(ddp_run / 'run')] == [0, 1, 2]
    # both ranks report the same validation: the whole split's
    assert logs[0]['val'] == logs[1]['val'] and logs[0]['val'][0][-1] == 'mAP'


@pytest.mark.slow
def test_gathered_validation_equals_one_process_on_the_same_weights(ddp_run, tiny_voc):
    from gluontrain.torch.ssd.args import parse_args
    from gluontrain.torch.ssd.model import build_ssd
    from gluontrain.torch.ssd.recipe import get_dataloader, get_dataset
    from gluontrain.torch.ssd.recipe import validate
    args = parse_args(_argv(tiny_voc, ddp_run / 'unused', 2))
    train_ds, val_ds, metric = get_dataset('VOC', args)
    _, val_data = get_dataloader(None, train_ds, val_ds, 300, 2, 0, args)
    net = build_ssd('train', 300, 21, width_mult=WIDTH)
    net.load_state_dict(torch.load(str(ddp_run / 'run' / 'VOC.pth')))
    names, values = validate(net, val_data, [torch.device('cpu')], metric)
    gathered = json.loads((ddp_run / 'rank0.json').read_text())['val']
    assert gathered[0] == list(names)
    np.testing.assert_array_equal(gathered[1], [float(v) for v in values])  # NaN: no object


@pytest.mark.slow
def test_crashed_ddp_run_resumed_at_a_pass_end_then_inside_a_pass_equals_the_uninterrupted_run(
        ddp_run, tiny_voc, tmp_path):
    """Both kinds of DDP resume in one chain (three torchruns instead of four, issue 22): the
    crashed run resumes from its pass-end checkpoint (iteration 4) and stops inside pass 1
    (iteration 6), and that end-of-run checkpoint, inside a pass, resumes to iteration 12."""
    crashed = tmp_path / 'crashed'
    res = _torchrun(WORKER, [str(tmp_path)] + _argv(tiny_voc, crashed, 4, '--max_iter', '12'),
                    {'GLUONTRAIN_TEST_CRASH_AT': '6'})
    assert res.returncode != 0 and 'planted crash at iteration 6' in res.stderr + res.stdout
    ckpt = str(crashed / 'ssd300_VOC_last.ckpt')   # the end of pass 0 (iteration 4)
    assert load_checkpoint(ckpt)['iteration'] == 4
    script = os.path.join(REPO, 'scripts', 'train_ssd.py')
    _ok(_torchrun(script, _argv(tiny_voc, crashed, 4, '--max_iter', '6', '--resume', ckpt)))
    assert load_checkpoint(ckpt)['iteration'] == 6  # inside pass 1
    _ok(_torchrun(script, _argv(tiny_voc, crashed, 4, '--max_iter', '12', '--resume', ckpt)))
    a = torch.load(str(ddp_run / 'run' / 'VOC.pth'))
    b = torch.load(str(crashed / 'VOC.pth'))
    assert [k for k in a if not torch.equal(a[k], b[k])] == []
    keys = ('epoch', 'iteration', 'lr', 'loss_running', 'loss_epoch', 'val')
    assert [{k: r.get(k) for k in keys} for r in _rows(crashed)] == [
        {k: r.get(k) for k in keys} for r in _rows(ddp_run / 'run')]
    # a checkpoint of 2 processes is refused by 1, with the command that continues it
    from gluontrain.torch.ssd.recipe import main
    with pytest.raises(ValueError, match='written by 2 process.*--nproc_per_node 2'):
        main(_argv(tiny_voc, tmp_path / 'alone', 4, '--max_iter', '14', '--resume', ckpt))


# 2 processes x batch 2 against 1 process x batch 4, measured on this data (seed 0) at width
# 1/16: per-pass mean losses differ by +0.3..+8 % (the largest: pass 0's conf_loss, 51.2 vs
# 47.5), the means over the run's three passes by +3 % (loc) and +7 % (conf). For scale, one
# process with --seed 1 instead of 0 differs from itself by up to 28 % per pass (pass 2's
# conf_loss, 20.3 vs 15.9). At width 1/8 (before) the same comparison gave -4..+59 % per pass
# (pass 1's loc_loss, 4.67 vs 2.94), +7 % and +15 % over the run, and seed 1 up to 35 %; the
# bounds below hold both.
PASS_REL_TOL = 0.75
RUN_REL_TOL = 0.25


@pytest.mark.slow
def test_two_processes_follow_one_with_the_same_global_batch(ddp_run, tiny_voc, tmp_path):
    from gluontrain.torch.ssd.recipe import main
    main(_argv(tiny_voc, tmp_path / 'one', 4, '--max_iter', '12'))
    one, two = _rows(tmp_path / 'one'), _rows(ddp_run / 'run')
    assert [r['iteration'] for r in one] == [r['iteration'] for r in two] == [4, 8, 12]
    # The same weights at the start, the same LR schedule and 4 images a step, but not the
    # same images in a step (DistributedSampler's shards vs RandomSampler's order), not the
    # same augmentation draws (each rank seeds seed + rank), and MultiBoxLoss normalised by
    # each rank's positives before DDP averages the gradients (one process normalises by the
    # global batch's); the logged loss is the mean of the ranks' losses. There is no
    # BatchNorm here (--batch_norm false, the reference); with it each rank would also
    # normalise with its own 2-image statistics. 4 steps a pass make the per-pass means noisy.
    for name in ('loc_loss', 'conf_loss'):
        for a, b in zip(one, two):
            assert b['loss_epoch'][name] == pytest.approx(a['loss_epoch'][name],
                                                          rel=PASS_REL_TOL), (name, a, b)
        mean_one = np.mean([r['loss_epoch'][name] for r in one])
        mean_two = np.mean([r['loss_epoch'][name] for r in two])
        assert mean_two == pytest.approx(mean_one, rel=RUN_REL_TOL), name
    # both learn: the last pass is well below the first in both runs
    for rows in (one, two):
        assert rows[-1]['loss_epoch']['conf_loss'] < 0.5 * rows[0]['loss_epoch']['conf_loss']
