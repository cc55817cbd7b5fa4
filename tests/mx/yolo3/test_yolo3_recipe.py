"""train / validate / save_params: files, log lines, losses, COCO, resume, several contexts."""
import json
import os
import re

import mxnet as mx
import numpy as np
import pytest

from gluontrain.mx.context import get_contexts
from gluontrain.mx.yolo3 import (get_dataloader, get_dataset, get_lr_scheduler, get_net, main,
                                 parse_args, save_params, train)
from gluontrain.mx.yolo3.step import YOLOv3Step

LOSS_RE = re.compile(r'ObjLoss=([\d.]+), BoxCenterLoss=([\d.]+), BoxScaleLoss=([\d.]+), '
                     r'ClassLoss=([\d.]+)')


def _prefix(argv):
    return argv[argv.index('--save-prefix') + 1] + 'yolo3_mobilenet0.25_voc'


def _epoch_means(log_text):
    return [sum(map(float, LOSS_RE.search(line).groups()))
            for line in log_text.splitlines() if 'Epoch mean' in line]


@pytest.mark.slow  # a subprocess, several processes or a live GluonCV run: over ~5 s
def test_two_epochs_write_reference_files_lines_and_lower_loss(voc_root, argv_for):
    """At 128 px instead of conftest's 160: 17.3 -> 15.1 s CPU. The epoch-mean loss sums
    (their halving is asserted below; the first is mostly objectness over all anchors, so it
    grows with the input size) were 234.9 -> 85.2 at 160 px (0.36), now 178.5 -> 73.6 (0.41);
    at 96 px 0.47 and at 64 px 0.51 were too close to the half or over it."""
    argv = argv_for(voc_root, '--epochs', '2', '--save-interval', '1', '--data-shape', '128',
                    plots=True)
    state = main(argv)
    prefix = _prefix(argv)
    names, values = state.scores['val']
    assert names[-1] == 'mAP' and len(names) == 21 and 0.0 <= values[-1] <= 1.0
    log = open(prefix + '_train.log').read()
    lines = log.splitlines()
    assert lines[0].startswith('Namespace(') and lines[1] == 'Start training from [Epoch 0]'
    assert re.match(r'\[Epoch 0\]\[Batch 0\], LR: \d\.\d\dE-\d\d, Speed: [\d.]+ samples/sec, '
                    r'ObjLoss=[\d.]+, BoxCenterLoss=', lines[2])
    assert sum('[Epoch 1] Validation: ' == line for line in lines) == 1
    assert lines[-1].startswith('mAP=')
    means = _epoch_means(log)
    assert len(means) == 2 and means[1] < 0.5 * means[0]
    for epoch in (0, 1):
        assert os.path.isfile('{}_{:04d}_{:.4f}.params'.format(prefix, epoch, 0.0)) or \
            any(f.startswith(os.path.basename(prefix) + '_{:04d}_'.format(epoch))
                for f in os.listdir(os.path.dirname(prefix)))
    assert os.path.isfile(prefix + '_last.ckpt')
    out = os.path.dirname(prefix)
    assert os.path.isfile(os.path.join(out, 'model-symbol.json'))
    assert os.path.isfile(os.path.join(out, 'model-0000.params'))
    recs = [json.loads(line) for line in open(prefix + '_metrics.jsonl')]
    assert [r['epoch'] for r in recs] == [0, 1] and recs[1]['iteration'] == 16
    # the exported graph is the inference graph
    sym = mx.sym.load(os.path.join(out, 'model-symbol.json'))
    assert len(sym.list_outputs()) == 3


def test_save_params_best_and_interval_policy(tmp_path):
    class Net:
        def __init__(self):
            self.saved = []

        def save_parameters(self, name):
            self.saved.append(name)
            open(name, 'w').write('w')

    net, best = Net(), [0]
    prefix = str(tmp_path / 'p')
    for epoch, score in enumerate([0.0, 0.5, 0.4, 0.7]):
        save_params(net, best, score, epoch, 2, prefix)
    files = sorted(os.listdir(tmp_path))
    assert files == ['p_0000_0.0000.params', 'p_0002_0.4000.params', 'p_best.params',
                     'p_best_map.log']
    assert open(prefix + '_best_map.log').read() == '0001:\t0.5000\n0003:\t0.7000\n'
    assert best == [0.7]


@pytest.mark.parametrize('warmup,mode', [(0, 'step'), (2, 'step'), (1, 'cosine'), (1, 'poly')])
def test_lr_schedule_counts_batches_not_batch_size(warmup, mode):
    args = parse_args(['--lr', '0.1', '--epochs', '6', '--lr-decay-epoch', '4,5',
                       '--warmup-epochs', str(warmup), '--lr-mode', mode, '--batch-size', '4'])
    args.num_samples = 40  # 10 updates per epoch
    sched = get_lr_scheduler(args)
    lrs = [sched(u) for u in range(1, 61)]
    if warmup:
        # linear warm-up from 0 over the first warmup*10 updates (N = niters - 1)
        n = warmup * 10 - 1
        assert lrs[0] == pytest.approx(0.1 * 1 / n) and lrs[n - 1] == pytest.approx(0.1)
    if mode == 'step':
        # gluoncv's step count T = num_update - offset decays once T reaches epoch*10, so the
        # 40th update (the last of epoch 3) already runs at 0.01, warm-up or not
        assert lrs[38] == pytest.approx(0.1) and lrs[39] == pytest.approx(0.01)
        assert lrs[48] == pytest.approx(0.01) and lrs[49] == pytest.approx(0.001)
    else:
        assert lrs[-1] < 1e-3 < lrs[30]
    if mode == 'step':
        # seed 000's iters_per_epoch=batch_size (4) would have decayed from update 16 on
        assert lrs[20] == pytest.approx(0.1)


def _run_with_crash_at(argv, crash_epoch, monkeypatch):
    real = YOLOv3Step.__call__

    def crashing(self, batch, state=None):
        if state.epoch == crash_epoch:
            raise KeyboardInterrupt
        return real(self, batch, state)

    monkeypatch.setattr(YOLOv3Step, '__call__', crashing)
    with pytest.raises(KeyboardInterrupt):
        main(argv)
    monkeypatch.setattr(YOLOv3Step, '__call__', real)


def _batch_lines(log, epoch):
    return [re.sub(r'Speed: [\d.]+', '', line) for line in log.splitlines()
            if line.startswith('[Epoch {}]['.format(epoch))]


@pytest.mark.slow  # three short training runs (3 + 2 + 1 epochs)
def test_resume_equals_the_uninterrupted_run(voc_root, argv_for, monkeypatch):
    """64 px instead of conftest's 160 (what is compared, the batch lines and the weights,
    does not depend on the size): 51.4 -> 28.7 s CPU."""
    # batch 5 over 32 images leaves 2 in the rollover buffer: the checkpoint must carry it;
    # mixup and warm-up make the RNG state and the LR position matter too
    extra = ['--epochs', '3', '--batch-size', '5', '--mixup', '--no-mixup-epochs', '1',
             '--warmup-epochs', '1', '--lr-decay-epoch', '2', '--data-shape', '64']
    full = argv_for(voc_root, *extra, sub='full')
    main(full)
    crashed = argv_for(voc_root, *extra, sub='crashed')
    _run_with_crash_at(crashed, 2, monkeypatch)
    ckpt = _prefix(crashed) + '_last.ckpt'
    resumed = argv_for(voc_root, *extra, '--resume', ckpt, sub='resumed')
    main(resumed)
    full_log = open(_prefix(full) + '_train.log').read()
    resumed_log = open(_prefix(resumed) + '_train.log').read()
    assert 'Start training from [Epoch 2]' in resumed_log
    # the checkpoint's weights are reported in the log's header, before training starts
    report = 'loaded 247 of 247 tensors from {} (0 missing, 0 unexpected, 0 wrong shape)'.format(
        ckpt)
    assert report in resumed_log.split('Start training')[0]
    assert _batch_lines(resumed_log, 2) == _batch_lines(full_log, 2)
    # rollover: 32 -> 6 batches (2 left), 34 -> 6 (4 left), 36 -> 7 batches in epoch 2
    assert len(_batch_lines(full_log, 2)) == 7
    a = mx.nd.load(os.path.join(os.path.dirname(_prefix(full)), 'model-0000.params'))
    b = mx.nd.load(os.path.join(os.path.dirname(_prefix(resumed)), 'model-0000.params'))
    # gluon numbers block names per process (mobilenet0_, mobilenet1_, ...): compare in order
    assert len(a) == len(b) > 100
    for (ka, va), (kb, vb) in zip(a.items(), b.items()):
        assert ka.split('_', 1)[1] == kb.split('_', 1)[1]
        np.testing.assert_array_equal(va.asnumpy(), vb.asnumpy(), err_msg=ka)


@pytest.mark.slow  # two short training runs
def test_resume_from_params_moves_the_schedule_instead_of_rewarming(voc_root, argv_for):
    """64 px instead of conftest's 160 (the LRs and the load report do not depend on it):
    18.7 -> 12.0 s CPU."""
    base = argv_for(voc_root, '--epochs', '1', '--data-shape', '64', sub='base')
    main(base)
    weights = os.path.join(os.path.dirname(_prefix(base)), 'model-0000.params')
    argv = argv_for(voc_root, '--epochs', '3', '--warmup-epochs', '2', '--start-epoch', '2',
                    '--load-weights', _prefix(base) + '_0000_0.0000.params',
                    '--data-shape', '64', sub='from_params')
    assert os.path.isfile(weights)
    main(argv)
    log = open(_prefix(argv) + '_train.log').read()
    lrs = {float(x) for x in re.findall(r'LR: ([\d.E+-]+),', log)}
    assert lrs == {0.001}  # the reference would re-run the warm-up from 0
    assert 'loaded 247 of 247 tensors from {}_0000_0.0000.params (0 missing, 0 unexpected, ' \
        '0 wrong shape)'.format(_prefix(base)) in log.split('Start training')[0]


@pytest.mark.slow  # a subprocess, several processes or a live GluonCV run: over ~5 s
def test_two_cpu_contexts_keep_identical_replicas(voc_root, tmp_path):
    args = parse_args(['--network', 'mobilenet0.25', '--dataset', 'voc', '--dataset-root',
                       str(voc_root), '--no-pretrained-base', '--cpus', '2', '--batch-size', '4',
                       '-j', '0', '--data-shape', '128', '--no-random-shape', '--epochs', '1',
                       '--log-interval', '0', '--lr', '0.01',
                       '--save-prefix', str(tmp_path) + '/'])
    ctx = get_contexts(args.gpus, args.cpus)
    assert ctx == [mx.cpu(0), mx.cpu(1)]
    args.save_prefix += 'two_ctx'
    train_ds, val_ds, metric = get_dataset(args.dataset, args)
    net, async_net = get_net(args, ctx)
    train_data, val_data = get_dataloader(async_net, train_ds, val_ds, 128, 4, 0, args)
    before = {k: p.data(mx.cpu(0)).asnumpy() for k, p in net.collect_params().items()}
    state = train(net, train_data, val_data, metric, ctx, args)
    assert state.iteration == 8
    changed = differ = 0
    for k, p in net.collect_params().items():
        d0, d1 = (x.asnumpy() for x in p.list_data())
        if p.grad_req == 'null':
            # BatchNorm running statistics see only their own context's half batch (as in the
            # reference); save_parameters averages them. SyncBatchNorm is what shares them.
            assert k.endswith(('running_mean', 'running_var')) or 'anchor' in k or 'offset' in k
            differ += not np.array_equal(d0, d1)
            continue
        np.testing.assert_array_equal(d0, d1, err_msg=k)
        changed += not np.array_equal(d0, before[k])
    assert changed > 50 and differ > 0


def test_coco_dataset_trains_and_reports_coco_map(coco_root, argv_for):
    argv = argv_for(coco_root, '--epochs', '1', dataset='coco')
    state = main(argv)
    names, values = state.scores['val']
    assert '~~~~ MeanAP @ IoU=[0.50,0.95] ~~~~\n' in names[-1]
    assert isinstance(values[-1], str) and 0.0 <= float(values[-1]) <= 100.0
    log = open(argv[argv.index('--save-prefix') + 1] + 'yolo3_mobilenet0.25_coco_train.log').read()
    assert 'Validation:' in log


@pytest.mark.parametrize('argv,err,match', [
    (['--gpus', '0,a'], ValueError, "'a' is not a GPU id"),
    (['--network', 'vgg16'], ValueError, "'vgg16' is not a YOLOv3 base network"),
])
def test_bad_arguments_fail_before_training(argv, err, match):
    with pytest.raises(err, match=match):
        main(['--gpus', ''] + argv)


def test_missing_dataset_root_fails_with_its_name(tmp_path):
    with pytest.raises(ValueError, match='does-not-exist'):
        main(['--gpus', '', '--network', 'mobilenet0.25', '--no-pretrained-base',
              '--dataset-root', str(tmp_path / 'does-not-exist')])


def test_resume_or_load_decides_by_content_for_mxnet(tmp_path):
    import torch
    from gluontrain.core import checkpoint as ck
    from gluontrain.core.loop import TrainState
    from gluontrain.mx.yolo3.recipe import restore_checkpoint, save_checkpoint

    def build(seed):
        mx.random.seed(seed)
        net = mx.gluon.nn.Dense(2, in_units=3)
        net.initialize()
        return net, mx.gluon.Trainer(net.collect_params(), 'sgd', {'learning_rate': 0.1})
    trained, trainer = build(1)
    ckpt = str(tmp_path / 'epoch3.params')  # a checkpoint under a weights name
    save_checkpoint(ckpt, trained, trainer, None, TrainState(epoch=3, iteration=30, best=0.5),
                    {'lr': 0.1}, {'BestCheckpointHook': {'best': 0.5}})
    weights = str(tmp_path / 'weights.ckpt')  # weights under a checkpoint name
    trained.save_parameters(weights)
    torch_file = str(tmp_path / 'ssd.params')
    torch.save({'w': torch.zeros(1)}, torch_file)

    def attempt(path):
        net, tr = build(2)
        kind, result = ck.resume_or_load(
            path, lambda p: restore_checkpoint(p, net, tr, None, mx.cpu()),
            lambda p: net.load_parameters(p), ck.MX_PARAMS)
        same = np.array_equal(net.weight.data().asnumpy(), trained.weight.data().asnumpy())
        return kind, result, same

    kind, (payload, state), same = attempt(ckpt)
    assert (kind, payload['epoch'], payload['best_score'], state.iteration, same) == (
        ck.CHECKPOINT, 3, 0.5, 30, True)
    assert payload['extra']['hooks'] == {'BestCheckpointHook': {'best': 0.5}}
    assert attempt(weights)[::2] == (ck.MX_PARAMS, True)
    with pytest.raises(ValueError, match='ssd.params holds torch-weights weights'):
        attempt(torch_file)


def _differing_arrays(argv_a, argv_b):
    """How many exported arrays differ between two runs (gluon numbers block names per
    process, so the arrays are paired in order)."""
    a = mx.nd.load(os.path.join(os.path.dirname(_prefix(argv_a)), 'model-0000.params'))
    b = mx.nd.load(os.path.join(os.path.dirname(_prefix(argv_b)), 'model-0000.params'))
    assert len(a) == len(b) > 100
    return sum(not np.array_equal(va.asnumpy(), vb.asnumpy())
               for va, vb in zip(a.values(), b.values()))


@pytest.mark.slow
def test_resume_that_extends_the_run_equals_the_longer_run(voc_root, argv_for):
    # 2 epochs (decays at the default 160,180), then resume to 4 epochs with a decay at 3:
    # the restored optimizer must not keep the 2-epoch run's schedule
    tiny = ['--batch-size', '8', '--data-shape', '64']
    full = argv_for(voc_root, *tiny, '--epochs', '4', '--lr-decay-epoch', '3', sub='full')
    main(full)
    first = argv_for(voc_root, *tiny, '--epochs', '2', sub='first')
    main(first)
    ckpt = _prefix(first) + '_last.ckpt'
    resumed = argv_for(voc_root, *tiny, '--epochs', '4', '--lr-decay-epoch', '3',
                       '--resume', ckpt, sub='resumed')
    main(resumed)
    assert _differing_arrays(full, resumed) == 0
    log = open(_prefix(resumed) + '_train.log').read().splitlines()
    assert 'resumed from {} at epoch 2, iteration 8'.format(ckpt) in log
    assert "changed on resume: --epochs: 2 -> 4" in log
    assert "changed on resume: --lr-decay-epoch: '160,180' -> '3'" in log
    # the decay at epoch 3 shows in the LR of epoch 3's batch lines
    lrs = [float(x) for x in re.findall(r'\[Epoch 3\]\[Batch \d\], LR: ([\d.E+-]+),',
                                        '\n'.join(log))]
    assert lrs and all(lr == pytest.approx(1e-4) for lr in lrs)
    # what fixes the network's input is refused, naming the argument, both values, the file
    with pytest.raises(ValueError, match=re.escape(ckpt) + r".*--data-shape 64 but this run "
                                                            r"has 96"):
        main(argv_for(voc_root, *tiny, '--data-shape', '96', '--epochs', '4',
                      '--resume', ckpt, sub='refused'))


def test_restore_sets_the_schedule_wd_and_momentum_from_the_arguments(tmp_path):
    from gluontrain.core.loop import TrainState
    from gluontrain.mx.yolo3.recipe import restore_checkpoint, save_checkpoint
    saved = parse_args(['--epochs', '2', '--lr', '0.1', '--num-samples', '40',
                        '--batch-size', '4'])
    net = mx.gluon.nn.Dense(2, in_units=3)
    net.initialize()
    trainer = mx.gluon.Trainer(net.collect_params(), 'sgd', {
        'wd': saved.wd, 'momentum': saved.momentum, 'lr_scheduler': get_lr_scheduler(saved)})
    trainer._init_kvstore()
    ckpt = str(tmp_path / 'r_last.ckpt')
    save_checkpoint(ckpt, net, trainer, None, TrainState(epoch=1, iteration=20), saved, {})
    now = parse_args(['--epochs', '6', '--lr', '0.5', '--num-samples', '40', '--batch-size',
                      '4', '--wd', '0.01', '--momentum', '0.5', '--lr-decay-epoch', '3'])
    fresh = mx.gluon.Trainer(net.collect_params(), 'sgd', {'learning_rate': 1.0})
    _, state = restore_checkpoint(ckpt, net, fresh, None, mx.cpu(), now)
    opt = fresh._optimizer
    assert (opt.wd, opt.momentum) == (0.01, 0.5)
    # 10 updates an epoch: update 25 is in epoch 2 (0.5), update 35 after the decay at 3
    assert opt.lr_scheduler(25) == pytest.approx(0.5)
    assert opt.lr_scheduler(35) == pytest.approx(0.05)
    assert state.resume_changes == ['--epochs: 2 -> 6', '--lr: 0.1 -> 0.5',
                                    "--lr-decay-epoch: '160,180' -> '3'",
                                    '--momentum: 0.9 -> 0.5', '--wd: 0.0005 -> 0.01']
    with pytest.raises(ValueError, match='--batch-size 4 but this run has 8'):
        restore_checkpoint(ckpt, net, fresh, None, mx.cpu(),
                           parse_args(['--num-samples', '40', '--batch-size', '8']))


class _ReplayNet:
    """Stands for the network in ``validate``: returns prepared detections, image by image,
    in the order the images arrive (a known mAP between 0 and 1, no training needed)."""

    def __init__(self, detections):
        self.detections = list(detections)

    def set_nms(self, **kwargs):
        pass

    def hybridize(self):
        pass

    def __call__(self, x):
        take, self.detections = self.detections[:x.shape[0]], self.detections[x.shape[0]:]
        ids, scores, boxes = (mx.nd.array(np.stack([d[i] for d in take])) for i in range(3))
        return ids, scores, boxes


class _TwoRankComm:
    """Rank ``rank`` of two, run one after the other in this process: rank 1 records what it
    contributes, rank 0 gathers it (what HorovodComm does across processes)."""
    world_size = 2
    rank1_records = None

    def __init__(self, rank):
        self.rank = rank

    def allgather_object(self, obj):
        if self.rank == 1:
            _TwoRankComm.rank1_records = obj
            return [None, obj]
        return [obj, _TwoRankComm.rank1_records]

    def broadcast_object(self, obj, root=0):
        return obj


def _detections(val_data, rng):
    """Per image: every ground-truth box jittered (a tenth with a wrong class) plus three
    random boxes, random scores, padded to 12 rows with -1."""
    out = []
    for batch in val_data:
        for label in batch[1].asnumpy():
            gt = label[label[:, 4] >= 0]
            boxes = np.concatenate([gt[:, :4] + rng.normal(0, 6, (len(gt), 4)),
                                    rng.uniform(0, 160, (3, 4))]).clip(0, 160)
            boxes[:, 2:] = np.maximum(boxes[:, 2:], boxes[:, :2] + 1)
            ids = np.concatenate([np.where(rng.uniform(size=len(gt)) < 0.1, 0, gt[:, 4]),
                                  rng.randint(0, 5, 3)])
            det = -np.ones((12, 6), dtype='float32')
            det[:len(ids), 0], det[:len(ids), 1], det[:len(ids), 2:] = \
                ids, rng.uniform(size=len(ids)), boxes
            out.append((det[:, :1], det[:, 1:2], det[:, 2:]))
    return out


def test_validate_split_over_two_ranks_reports_the_whole_split(voc_root, tmp_path):
    """``--horovod`` validation: each rank scores its contiguous block of the split, rank 0
    feeds the gathered results to the metric in the split's order and gets exactly the
    one-process values."""
    from gluontrain.mx.yolo3 import validate
    args = parse_args(['--network', 'mobilenet0.25', '--dataset', 'voc', '--dataset-root',
                       str(voc_root), '--no-pretrained-base', '--gpus', '', '--batch-size', '3',
                       '--data-shape', '160', '--no-random-shape',
                       '--save-prefix', str(tmp_path) + '/'])
    ctx = get_contexts('', 0)
    train_ds, val_ds, metric = get_dataset(args.dataset, args)
    _, async_net = get_net(args, ctx)
    _, full = get_dataloader(async_net, train_ds, val_ds, 160, 3, 0, args)
    detections = _detections(full, np.random.RandomState(0))
    expected = validate(_ReplayNet(detections), full, ctx, metric)
    print('mAP of the prepared detections:', expected[1][-1])
    assert 0.2 < expected[1][-1] < 0.95  # a score that can tell images apart
    shards = []
    for rank in (1, 0):
        comm = _TwoRankComm(rank)
        _, val_data = get_dataloader(async_net, train_ds, val_ds, 160, 3, 0, args, comm)
        shards.append(list(val_data._batch_sampler._sampler))
        mine = detections[:4] if rank == 0 else detections[4:]
        result = validate(_ReplayNet(mine), val_data, ctx, metric, comm)
    assert shards == [[4, 5, 6, 7], [0, 1, 2, 3]]
    assert result[0] == expected[0]
    np.testing.assert_array_equal(result[1], expected[1])
    # rank 0's block alone scores otherwise: the gathered half counts
    _TwoRankComm.rank1_records = []
    alone = validate(_ReplayNet(detections[:4]), val_data, ctx, metric, _TwoRankComm(0))
    assert alone[1][-1] != pytest.approx(expected[1][-1], abs=1e-3)


def test_custom_anchors_train_save_reload_and_evaluate_the_same(voc_root, argv_for, capsys):
    # pylint: disable=import-outside-toplevel
    from gluontrain.__main__ import main as cli
    from gluontrain.mx.yolo3.infer import eval_main, load_net
    from gluontrain.mx.yolo3.model import build_yolov3
    from gluontrain.mx.yolo3.weights import load_params, net_anchors, read_params
    from gluontrain.yolo3.anchors import GLUONCV_ANCHORS_TEXT, file_anchors
    custom = '4,6,8,12,16,10;12,24,24,16,24,40;40,30,48,56,64,60'
    argv = argv_for(voc_root, '--epochs', '1', '--save-interval', '1', '--data-shape', '64',
                    '--anchors', custom)
    state = main(argv)
    out = os.path.dirname(_prefix(argv))
    params = [os.path.join(out, f) for f in os.listdir(out) if '_0000_' in f]
    assert len(params) == 1 and file_anchors(read_params(params[0], 'f', '')) == custom
    capsys.readouterr()
    names, values = eval_main(['--network', 'mobilenet0.25', '--dataset', 'voc',
                               '--dataset-root', voc_root, '--data-shape', '64',
                               '--params', params[0], '--batch-size', '4'])
    assert 'anchors (from the file): ' + custom in capsys.readouterr().out
    assert list(names) == list(state.scores['val'][0])
    assert str(values) == str(state.scores['val'][1])
    # eval's network (built with GluonCV's anchors, the file's loaded) is the --anchors one
    x = mx.nd.random.uniform(shape=(1, 3, 64, 64))
    from_file = load_net('mobilenet0.25', 'voc', None, mx.cpu(), params[0])
    same = build_yolov3('yolo3_mobilenet0.25_voc', custom)
    load_params(same, params[0], 'f', '', anchors='same')
    gluoncvs = build_yolov3('yolo3_mobilenet0.25_voc')
    load_params(gluoncvs, params[0], 'f', '', anchors='network')
    assert net_anchors(from_file) == custom and net_anchors(gluoncvs) == GLUONCV_ANCHORS_TEXT
    for net in (from_file, same, gluoncvs):
        net.set_nms(nms_thresh=0, post_nms=0)  # every box: after NMS's 0.01 none is left
    got, want, other = (n(x)[2].asnumpy() for n in (from_file, same, gluoncvs))
    assert np.array_equal(got, want) and not np.array_equal(got, other)
    # training from it or resuming it with other anchors: one line naming both
    for extra in (['--load-weights', params[0]], ['--resume', _prefix(argv) + '_last.ckpt']):
        assert cli(['train', 'yolo3'] + argv_for(voc_root, '--epochs', '2', '--data-shape',
                                                 '64', *extra, sub='again')) == 1
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and custom in err[0] and GLUONCV_ANCHORS_TEXT in err[0], err
