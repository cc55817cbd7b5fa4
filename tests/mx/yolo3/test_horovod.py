"""``--horovod`` YOLOv3 with two processes on the CPU (``horovodrun -np 2 --gloo``).

One 2-epoch run of the tiny model on the generated VOC (32 training images, global batch 8,
4 per rank) and the same command as one Horovod process; the tests read what the ranks
recorded (tests/mx/yolo3/hvd_worker.py) and the files rank 0 wrote.
"""
import importlib.util
import json
import math
import os
import subprocess
import sys
import time

import numpy as np
import pytest

from launch import horovod_env, horovod_failure_report, horovodrun_command  # tests/launch.py

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec('horovod') is None,
                       reason='horovod is not installed (see docs/distributed.md for the build)'),
]

WORKER = os.path.join(os.path.dirname(__file__), 'hvd_worker.py')
PREFIX = 'yolo3_mobilenet0.25_voc'
# epoch-mean losses of the 2-process run vs one process with the same global batch and the
# same shards: measured differences up to 0.21 relative (BoxScaleLoss, epoch 0; see the
# test docstring for why they differ)
LOSS_RTOL = 0.3


def _argv(out, root, *extra):
    """conftest's tiny run (mobilenet0.25, no workers) at 96 px (was 160: the module's five
    runs of 2 epochs cost their convolutions, not what is compared) with a global batch of 8."""
    return ['--network', 'mobilenet0.25', '--dataset', 'voc', '--dataset-root', str(root),
            '--no-pretrained-base', '--gpus', '', '--batch-size', '8', '-j', '0',
            '--data-shape', '96', '--no-random-shape', '--log-interval', '1',
            '--save-prefix', out, '--epochs', '2', '--horovod'] + list(extra)


def _env():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))))
    return horovod_env(PYTHONPATH=root + os.pathsep + os.environ.get('PYTHONPATH', ''),
                       MPLBACKEND='Agg')


def _run(cmd, timeout):
    tic = time.time()
    proc = subprocess.run(cmd, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          timeout=timeout, universal_newlines=True)
    assert proc.returncode == 0, horovod_failure_report(proc.stdout)
    return time.time() - tic, proc.stdout


def _launch(folder, root, np_, *extra):
    worker = [sys.executable, WORKER, folder] + _argv(folder + '/', root, *extra)
    cmd = horovodrun_command(worker, np_) if np_ > 1 else worker
    return _run(cmd, timeout=300)


@pytest.fixture(scope='module')
def runs(voc_root, tmp_path_factory):
    """``{'two': folder, 'one': folder}``: the 2-process run and the 1-process run (plus
    their seconds and output)."""
    out = {}
    for name, np_ in (('two', 2), ('one', 1)):
        folder = str(tmp_path_factory.mktemp('hvd_' + name))
        out[name + '_seconds'], out[name + '_output'] = _launch(folder, voc_root, np_)
        out[name] = folder
    return out


def _params(path):
    import mxnet as mx
    return {k: v.asnumpy() for k, v in mx.nd.load(path).items()}


def _metrics(folder):
    with open(os.path.join(folder, PREFIX + '_metrics.jsonl')) as f:
        return [json.loads(line) for line in f]


def test_ranks_end_with_identical_parameters_that_trained(runs):
    start = _params(os.path.join(runs['two'], 'start_rank0.params'))
    end0 = _params(os.path.join(runs['two'], 'end_rank0.params'))
    end1 = _params(os.path.join(runs['two'], 'end_rank1.params'))
    assert end0.keys() == end1.keys() == start.keys()
    # bit-identical: gradients are all-reduced, BatchNorm running statistics broadcast
    for name in end0:
        assert np.array_equal(end0[name], end1[name]), name
    changed = [name for name in end0 if not np.array_equal(end0[name], start[name])]
    assert len(changed) > 0.9 * len(end0)
    print('2-process run: {:.1f} s, 1-process run: {:.1f} s'.format(runs['two_seconds'],
                                                                  runs['one_seconds']))


def test_each_rank_reads_a_disjoint_half_of_the_images_every_epoch(runs):
    seen = []
    for rank in (0, 1):
        with open(os.path.join(runs['two'], 'seen_rank{}.json'.format(rank))) as f:
            seen.append(json.load(f))
    shards = {}
    for epoch in (0, 1):
        per_rank = [[tuple(r[1:]) for r in s if r[0] == epoch] for s in seen]
        # 32 images, 4 batches of 4 per rank: every image once, no rollover
        assert [len(p) for p in per_rank] == [16, 16]
        assert [len(set(p)) for p in per_rank] == [16, 16]
        assert not set(per_rank[0]) & set(per_rank[1])
        assert len(set(per_rank[0]) | set(per_rank[1])) == 32
        shards[epoch] = set(per_rank[0])
    assert shards[0] != shards[1]  # reshuffled: rank 0 reads other images in epoch 1


def test_rank_zero_alone_writes_one_set_of_files(runs):
    output = runs['two_output']
    assert output.count('[0]<stdout>:[Epoch 1] Validation') == 1
    assert 'Validation' not in ''.join(line for line in output.splitlines(True)
                                       if line.startswith('[1]'))
    files = sorted(os.listdir(runs['two']))
    assert files.count(PREFIX + '_train.log') == 1
    with open(os.path.join(runs['two'], PREFIX + '_train.log')) as f:
        log = f.read()
    assert log.count('[Epoch 1] Training cost') == 1 and log.count('[Epoch 0] Validation') == 1
    assert [r['epoch'] for r in _metrics(runs['two'])] == [0, 1]
    assert 'model-0000.params' in files


def _full_split_validation(folder, voc_root, params):
    """The 1-process validation of ``params`` over the whole VOC2007 test split."""
    import mxnet as mx
    from gluontrain.mx.context import get_contexts
    from gluontrain.mx.yolo3 import get_dataloader, get_dataset, get_net, parse_args, validate
    args = parse_args([a for a in _argv(folder + '/', voc_root) if a != '--horovod'])
    ctx = get_contexts('', 0)
    train_dataset, val_dataset, metric = get_dataset(args.dataset, args)
    net, async_net = get_net(args, ctx)
    net.load_parameters(params, ctx=ctx)
    _, val_data = get_dataloader(async_net, train_dataset, val_dataset, args.data_shape,
                                 args.batch_size, 0, args)
    assert len(val_data._dataset) == 8
    return validate(net, val_data, ctx, metric)


def test_validation_reports_the_whole_split(runs, voc_root):
    names, values = _full_split_validation(
        runs['two'], voc_root, os.path.join(runs['two'], 'end_rank0.params'))
    logged = _metrics(runs['two'])[-1]['val']
    assert list(logged) == list(names)
    for name, value in zip(names, values):
        if math.isnan(value):
            assert logged[name] is None, name
        else:
            assert logged[name] == pytest.approx(value, abs=1e-12), name


def test_two_processes_follow_one_process_with_the_same_global_batch(runs):
    """Per-epoch mean losses, 2 processes x 4 images vs 1 process x 8 images, the same global
    batches (same shards, ``ShardedSampler``). They differ by BatchNorm (batch statistics over
    each rank's 4 images instead of 8), by the random augmentation (each process draws from its
    own generator, seeded alike, for other images) and by float summation order."""
    two, one = _metrics(runs['two']), _metrics(runs['one'])
    assert len(two) == len(one) == 2
    for a, b in zip(two, one):
        for name, value in b['loss_epoch'].items():
            assert a['loss_epoch'][name] == pytest.approx(value, rel=LOSS_RTOL), (a['epoch'], name)


def test_resumed_two_process_run_equals_the_uninterrupted_one(runs, voc_root, tmp_path):
    """``--resume`` from the uninterrupted 2-process run's checkpoint after epoch 0 (rank 0 of
    hvd_worker.py copies it; was a separate 1-epoch run, one horovodrun start less) to 2 epochs
    with 2 processes: every rank's generators and rollover leftovers come back (the engine's
    ``RankStateHook``), so the weights and losses are the uninterrupted run's, bit for bit."""
    second = str(tmp_path / 'second')
    os.makedirs(second)
    _launch(second, voc_root, 2, '--resume', os.path.join(runs['two'], 'epoch0_last.ckpt'))
    full = _params(os.path.join(runs['two'], 'end_rank0.params'))
    for rank in (0, 1):
        resumed = _params(os.path.join(second, 'end_rank{}.params'.format(rank)))
        for name in full:
            assert np.array_equal(resumed[name], full[name]), (rank, name)
    assert _metrics(second)[-1]['loss_epoch'] == _metrics(runs['two'])[-1]['loss_epoch']
