"""SSD recipe: plumbing for GPUs (loader options, cudnn.benchmark, --amp accepted or refused),
a tiny run's files and lines, exact resume, and validation."""
import os
import re

import numpy as np
import pytest
import torch

from gluontrain.data import synthetic
from gluontrain.torch.ssd import recipe
from gluontrain.torch.ssd.args import parse_args
from gluontrain.torch.ssd.recipe import main, validate
from gluontrain.torch.ssd.step import SSDStep

torch.set_num_threads(1)


def test_amp_and_persistent_workers_default_off():
    args = parse_args([])
    assert args.amp is False and args.persistent_workers is False
    assert parse_args(['--amp', '--persistent_workers', 'true']).amp is True


def test_amp_on_the_cpu_is_refused_before_any_data_is_read(tmp_path):
    # the dataset folder does not exist: the --amp error must come first, naming the switch
    with pytest.raises(ValueError, match='--amp needs a CUDA device'):
        recipe.main(['--dataset_root', str(tmp_path / 'missing'), '--cuda', 'false', '--amp',
                     '--basenet', ''])


@pytest.mark.parametrize('workers,persistent,expected', [(0, 'true', False), (1, 'true', True),
                                                         (1, 'false', False)])
def test_loader_options(workers, persistent, expected):
    args = parse_args(['--cuda', 'false', '--persistent_workers', persistent])
    data = list(range(4))
    train, val = recipe.get_dataloader(None, data, data, 300, 2, workers, args)
    for loader in (train, val):
        assert loader.persistent_workers is expected and loader.num_workers == workers
        assert loader.pin_memory is False  # training on the CPU: nothing to pin for
    # --cuda true pins only where a CUDA device exists (the reference always pins)
    assert recipe.loader_pins(parse_args(['--cuda', 'true'])) == torch.cuda.is_available()


def test_cuda_contexts_set_cudnn_benchmark_like_the_reference(monkeypatch):
    monkeypatch.setattr(torch.backends.cudnn, 'benchmark', False)
    assert recipe.get_contexts(parse_args(['--cuda', 'false'])) == [torch.device('cpu')]
    assert torch.backends.cudnn.benchmark is False  # CPU: untouched
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match='--cuda false'):
            recipe.get_contexts(parse_args(['--cuda', 'true']))
    else:
        recipe.get_contexts(parse_args(['--cuda', 'true']))
        assert torch.backends.cudnn.benchmark is True


def test_loaders_of_a_distributed_run_split_the_global_batch(tmp_path, monkeypatch):
    from gluontrain.data import synthetic
    from gluontrain.torch.distributed import ShardSampler
    from gluontrain.torch.passes import SkippingBatchSampler
    root = synthetic.write_voc(str(tmp_path), num_train=4, num_val=3, seed=0,
                               classes=synthetic.DEFAULT_VOC_CLASSES, image_size=(64, 80))
    args = recipe.parse_args(['--dataset_root', root, '--basenet', '', '--cuda', 'false',
                              '--seed', '5'])
    train_ds, val_ds, _ = recipe.get_dataset('VOC', args)
    monkeypatch.setattr(recipe, 'get_world_size', lambda: 2)
    monkeypatch.setattr(recipe, 'get_rank', lambda: 1)
    train_data, val_data = recipe.get_dataloader(None, train_ds, val_ds, 300, 4, 0, args)
    # --batch_size is the global batch: 2 images a step on each of 2 ranks
    assert isinstance(train_data.batch_sampler, SkippingBatchSampler)
    sampler = train_data.batch_sampler.sampler
    assert train_data.batch_sampler.batch_sampler.batch_size == 2
    assert (sampler.num_replicas, sampler.rank, sampler.seed) == (2, 1, 5)
    train_data.batch_sampler.set_epoch(3)
    assert sampler.epoch == 3
    assert isinstance(val_data.sampler, ShardSampler) and list(val_data.sampler) == [1]
    with pytest.raises(ValueError, match='--batch_size 3 is the global batch'):
        recipe.get_dataloader(None, train_ds, val_ds, 300, 3, 0, args)


def test_local_rank_spellings_and_environment(monkeypatch):
    monkeypatch.delenv('LOCAL_RANK', raising=False)
    assert recipe.parse_args([]).local_rank == 0
    monkeypatch.setenv('LOCAL_RANK', '3')
    assert recipe.parse_args([]).local_rank == 3
    assert recipe.parse_args(['--local-rank', '1']).local_rank == 1
    assert recipe.parse_args(['--local_rank=2']).local_rank == 2


def test_syncbn_is_refused_on_the_cpu_and_without_batchnorm():
    args = recipe.parse_args(['--syncbn', '--cuda', 'false'])
    with pytest.raises(ValueError, match='--syncbn needs --batch_norm true'):
        recipe.check_syncbn(args, torch.device('cpu'))
    args = recipe.parse_args(['--syncbn', '--batch_norm', 'true', '--cuda', 'false'])
    with pytest.raises(ValueError, match='--syncbn: SyncBatchNorm needs CUDA'):
        recipe.check_syncbn(args, torch.device('cpu'))
    recipe.check_syncbn(recipe.parse_args([]), torch.device('cpu'))  # off: nothing to check


@pytest.fixture(scope='module')
def tiny_voc(tmp_path_factory):
    """8 trainval images (4 a year) and 4 test images: at batch 2 (``_argv``), 4 batches a
    pass. Was 16 trainval images at batch 4 and width 1/8; at batch 2 and width 1/16 a step
    costs a quarter of the CPU and every pass-and-iteration layout stays as it was."""
    root = tmp_path_factory.mktemp('ssdvoc')
    return synthetic.write_voc(str(root), num_train=4, num_val=4, seed=0,
                               classes=synthetic.DEFAULT_VOC_CLASSES, image_size=(128, 160))


def _argv(root, folder, *extra, plots=False):
    # no pictures unless the test looks at them: ~1.4 s of matplotlib per run, a third of
    # these runs' CPU
    return ['--dataset_root', root, '--basenet', '', '--cuda', 'false', '--batch_size', '2',
            '--num_workers', '0', '--width_mult', '0.0625', '--seed', '0', '--log_interval', '2',
            '--plots', str(plots).lower(), '--save_folder', str(folder) + '/'] + list(extra)


def test_tiny_run_writes_reference_files_and_lines(tiny_voc, tmp_path):
    # 8 trainval images (2007 + 2012) at batch 2: 4 batches per pass
    state = main(_argv(tiny_voc, tmp_path, '--max_iter', '10', '--save_interval', '4',
                       '--lr_steps', '8', plots=True))
    assert state.iteration == 10
    files = sorted(os.listdir(tmp_path))
    # index 4 and 8 (0-based, i != 0 and i % 4 == 0, as the reference) and the final VOC.pth
    assert {'ssd300_VOC_4.pth', 'ssd300_VOC_8.pth', 'VOC.pth', 'ssd300_VOC_last.ckpt',
            'ssd300_VOC_train.log', 'ssd300_VOC_metrics.jsonl'} <= set(files)
    log = open(tmp_path / 'ssd300_VOC_train.log').read()
    assert re.findall(r'iter (\d+) \|\| Loss: [\d.]+ \|\|', log) == ['0', '2', '4', '6', '8']
    names, values = state.scores['val']
    assert names[-1] == 'mAP' and len(names) == 21 and 0.0 <= values[-1] <= 1.0
    assert '[Iter 10] Validation: ' in log
    weights = torch.load(tmp_path / 'VOC.pth')
    assert len(weights) == 71
    # pictures (issue 6): curves incl. the last, partial pass, samples after the validation
    from PIL import Image
    with Image.open(tmp_path / 'ssd300_VOC_curves.png') as im:
        assert im.size == (800, 600)
        hook_pixels = np.asarray(im.convert('RGB'))
    # the metrics file holds the same passes (the last one partial), so plot_log redraws it
    from gluontrain.core.plots import plot_curves, read_metrics
    records = read_metrics(tmp_path / 'ssd300_VOC_metrics.jsonl')
    assert [(r['epoch'], r['iteration'], r.get('partial', False)) for r in records] == \
        [(0, 4, False), (1, 8, False), (2, 10, True)]
    assert 'val' in records[2] and 'val' not in records[1]
    plot_curves(tmp_path / 'ssd300_VOC_metrics.jsonl', tmp_path / 'again.png',
                title='ssd300 VOC (x = passes over the data)')
    with Image.open(tmp_path / 'again.png') as im:
        assert np.array_equal(np.asarray(im.convert('RGB')), hook_pixels)
    with Image.open(tmp_path / 'ssd300_VOC_val_samples.png') as im:
        assert im.size == (800, 800)


def test_max_iter_on_a_pass_boundary_closes_the_last_pass(tiny_voc, tmp_path):
    from gluontrain.core.checkpoint import load_checkpoint
    from gluontrain.core.plots import read_metrics
    # 4 batches per pass, max_iter 8: the budget ends exactly with pass 1
    state = main(_argv(tiny_voc, tmp_path, '--max_iter', '8', '--save_interval', '0',
                       plots=True))
    assert state.iteration == 8 and state.stop_reason == 'max_iter 8 reached'
    records = read_metrics(tmp_path / 'ssd300_VOC_metrics.jsonl')
    assert [(r['epoch'], r['iteration'], r.get('partial', False)) for r in records] == \
        [(0, 4, False), (1, 8, False)]
    assert 'val' in records[1]  # the final validation belongs to the closed pass
    log = open(tmp_path / 'ssd300_VOC_train.log').read()
    assert '[Epoch 1] Training cost' in log and '[Iter 8] Validation: ' in log
    payload = load_checkpoint(str(tmp_path / 'ssd300_VOC_last.ckpt'))
    assert (payload['epoch'], payload['iteration']) == (1, 8)
    assert set(payload['extra']['hooks']) >= {'LossMeterHook', 'BestCheckpointHook',
                                              'CurvesHook'}


def test_plots_false_draws_no_picture_and_keeps_the_other_files(tiny_voc, tmp_path):
    from gluontrain.core.checkpoint import load_checkpoint
    assert parse_args([]).plots is True
    main(_argv(tiny_voc, tmp_path, '--max_iter', '4', '--save_interval', '0'))
    files = set(os.listdir(tmp_path))
    assert not [f for f in files if f.endswith('.png')]
    assert {'ssd300_VOC_metrics.jsonl', 'ssd300_VOC_last.ckpt', 'VOC.pth'} <= files
    hooks = load_checkpoint(str(tmp_path / 'ssd300_VOC_last.ckpt'))['extra']['hooks']
    assert 'CurvesHook' not in hooks and 'LossMeterHook' in hooks


def test_loss_goes_down(tiny_voc, tmp_path):
    """Eight steps of batch 4 (four passes over the 8 trainval images) bring the loss well
    below the untrained network's.

    The loss of SSD from scratch falls fastest in its first steps (the classifier learns the
    background: 60-80 down to about 25 in four steps), then slowly and noisily, so the test
    compares the mean of the last four steps with the first step's (the untrained network's).
    Measured (batch 4, width 1/16, 8 trainval images, 8 iterations): 0.36 (seed 0), 0.31
    (seed 1), 0.27 (seed 2); the bound 0.6 leaves a wide margin. Before: 24 iterations of
    batch 4 at width 1/8 on 16 images, mean of the last four below 0.6 x the first four's,
    20 s of CPU; now about 5 s.
    """
    losses = []
    real = SSDStep.__call__

    def record(self, batch, state=None):
        out = real(self, batch, state)
        losses.append(sum(t for parts in out['losses'].values() for t, _ in parts))
        return out
    SSDStep.__call__ = record
    try:
        main(_argv(tiny_voc, tmp_path, '--max_iter', '8', '--save_interval', '0',
                   '--batch_size', '4'))
    finally:
        SSDStep.__call__ = real
    assert len(losses) == 8
    assert sum(losses[-4:]) / 4 < 0.6 * losses[0]


@pytest.mark.slow  # a subprocess, several processes or a live GluonCV run: over ~5 s
def test_resume_from_pass_end_checkpoint_equals_uninterrupted(tiny_voc, tmp_path):
    """Crashed in pass 1, resumed from the end of pass 0 (after an LR step): bit for bit the
    uninterrupted run's weights. Was 12 iterations of batch 4 at width 1/8 on 16 images,
    crashing in pass 2 (25 s of CPU); now 8 of batch 2 at width 1/16 on 8 images (4 batches
    a pass as before, about 9 s)."""
    full = tmp_path / 'full'
    main(_argv(tiny_voc, full, '--max_iter', '8', '--save_interval', '0', '--lr_steps', '3'))
    crashed = tmp_path / 'crashed'
    real = SSDStep.__call__

    def crash(self, batch, state=None):
        if state.iteration == 5:
            raise KeyboardInterrupt
        return real(self, batch, state)
    SSDStep.__call__ = crash
    try:
        with pytest.raises(KeyboardInterrupt):
            main(_argv(tiny_voc, crashed, '--max_iter', '8', '--save_interval', '0',
                       '--lr_steps', '3'))
    finally:
        SSDStep.__call__ = real
    ckpt = str(crashed / 'ssd300_VOC_last.ckpt')  # written at the end of pass 0 (iteration 4)
    resumed = tmp_path / 'resumed'
    state = main(_argv(tiny_voc, resumed, '--max_iter', '8', '--save_interval', '0',
                       '--lr_steps', '3', '--resume', ckpt))
    assert state.iteration == 8
    a = torch.load(full / 'VOC.pth')
    b = torch.load(resumed / 'VOC.pth')
    assert all(torch.equal(a[k], b[k]) for k in a)


class _OracleSSD(torch.nn.Module):
    """Stands in for SSD in test phase: emits the ground truth, encoded against the priors
    and decoded by the real Detect, so validate's whole path must score mAP 1."""

    def __init__(self, loader):
        super().__init__()
        from gluontrain.torch.ssd import config
        from gluontrain.torch.ssd.detection import Detect
        from gluontrain.torch.ssd.prior_box import PriorBox
        self.phase, self.num_classes, self.cfg = 'train', 21, config.voc
        self.priors = PriorBox(config.voc).forward()
        self.detect = Detect(21, 0, 200, 0.01, 0.45)
        self._batches = iter(loader)

    def forward(self, images):
        from gluontrain.torch.ssd.box_utils import match_batch
        assert self.phase == 'test' and not self.training
        _, gts, sizes = next(self._batches)
        scale = torch.stack([sizes[:, 1], sizes[:, 0], sizes[:, 1], sizes[:, 0]], 1)
        valid = gts[:, :, 4] >= 0
        # VOCAnnotationTransform's (coord - 1) / size, the training targets' convention
        boxes = (gts[:, :, :4] - 1) / scale[:, None, :]
        loc_t, conf_t = match_batch(0.5, boxes, self.priors, (0.1, 0.2),
                                    gts[:, :, 4].clamp(min=0), valid)
        conf = torch.full(conf_t.shape + (21,), -10.0).scatter_(2, conf_t.unsqueeze(2), 10.0)
        return self.detect(loc_t, torch.softmax(conf, -1), self.priors)


def test_validate_scores_an_oracle_at_map_one(tiny_voc):
    from gluontrain.torch.ssd.args import parse_args
    from gluontrain.torch.ssd.recipe import get_dataloader, get_dataset
    args = parse_args(['--dataset_root', tiny_voc, '--basenet', '', '--cuda', 'false'])
    train_ds, val_ds, metric = get_dataset('VOC', args)
    _, val_data = get_dataloader(None, train_ds, val_ds, 300, 3, 0, args)
    _, oracle_data = get_dataloader(None, train_ds, val_ds, 300, 3, 0, args)
    oracle = _OracleSSD(oracle_data)
    names, values = validate(oracle, val_data, [torch.device('cpu')], metric)
    assert values[-1] == pytest.approx(1.0)
    assert oracle.phase == 'train' and oracle.training  # restored afterwards
    present = [v for v in values[:-1] if v == v]
    assert len(present) >= 3 and all(v == pytest.approx(1.0) for v in present)


def _differing_tensors(a_folder, b_folder):
    a = torch.load(a_folder / 'VOC.pth')
    b = torch.load(b_folder / 'VOC.pth')
    assert a.keys() == b.keys() and len(a) > 50
    return sum(not torch.equal(a[k], b[k]) for k in a)


@pytest.mark.slow
def test_resume_inside_a_pass_extending_the_run_equals_the_longer_run(tiny_voc, tmp_path):
    """Resumed inside a pass with a longer budget and a new LR step: the longer run's weights
    and metrics. Was 20 + 10 + 10 iterations of batch 4 at width 1/8 on 16 images, stopping
    at 10 (38 s of CPU); now 12 + 6 + 6 of batch 2 at width 1/16 on 8 images (4 batches a
    pass as before), about 11 s."""
    # 4 batches a pass: iteration 6 ends inside pass 1, after the final validation; the
    # resumed run extends the budget to 12 and adds an LR step at 9
    full = tmp_path / 'full'
    main(_argv(tiny_voc, full, '--max_iter', '12', '--save_interval', '0', '--lr_steps', '9'))
    first = tmp_path / 'first'
    state = main(_argv(tiny_voc, first, '--max_iter', '6', '--save_interval', '0'))
    assert state.stop_reason == 'max_iter 6 reached' and 'val' in state.scores
    ckpt = str(first / 'ssd300_VOC_last.ckpt')
    resumed = tmp_path / 'resumed'
    state = main(_argv(tiny_voc, resumed, '--max_iter', '12', '--save_interval', '0',
                       '--lr_steps', '9', '--resume', ckpt))
    assert state.iteration == 12
    assert _differing_tensors(full, resumed) == 0
    log = open(resumed / 'ssd300_VOC_train.log').read().splitlines()
    assert 'resumed from {} at epoch 1, iteration 6'.format(ckpt) in log
    assert "changed on resume: --lr_steps: None -> '9'" in log
    assert 'changed on resume: --max_iter: 6 -> 12' in log
    # the metrics of the passes the resumed run finished are the uninterrupted run's
    from gluontrain.core.plots import read_metrics

    def rows(folder):
        return [{k: r.get(k) for k in ('epoch', 'iteration', 'lr', 'loss_running',
                                        'loss_epoch', 'val', 'partial')}
                for r in read_metrics(folder / 'ssd300_VOC_metrics.jsonl') if r['epoch'] >= 1]
    assert len(rows(full)) == 2 and rows(resumed) == rows(full)


def test_resume_honours_momentum_and_weight_decay_and_refuses_another_width(tiny_voc, tmp_path,
                                                                            monkeypatch):
    first = tmp_path / 'first'
    main(_argv(tiny_voc, first, '--max_iter', '4', '--save_interval', '0', '--val_interval',
               '100'))
    ckpt = str(first / 'ssd300_VOC_last.ckpt')
    seen = []
    real = SSDStep.__call__

    def record(self, batch, state=None):
        group = self.optimizer.param_groups[0]
        seen.append((group['momentum'], group['weight_decay']))
        return real(self, batch, state)
    monkeypatch.setattr(SSDStep, '__call__', record)
    again = tmp_path / 'again'
    main(_argv(tiny_voc, again, '--max_iter', '5', '--save_interval', '0', '--momentum', '0.5',
               '--weight_decay', '0.01', '--resume', ckpt))
    assert seen == [(0.5, 0.01)]
    log = open(again / 'ssd300_VOC_train.log').read().splitlines()
    assert 'changed on resume: --momentum: 0.9 -> 0.5' in log
    assert 'changed on resume: --weight_decay: 0.0005 -> 0.01' in log
    with pytest.raises(ValueError, match=re.escape(ckpt) + r'.*--width_mult 0.0625 but this '
                                                           r'run has 0.25'):
        main(_argv(tiny_voc, tmp_path / 'wider', '--width_mult', '0.25', '--max_iter', '5',
                   '--resume', ckpt))


class _NoisyOracleSSD(_OracleSSD):
    """The oracle with false positives: class noise drawn from a generator seeded by each
    image's own ground truth, so an image's detections do not depend on its batch or rank."""

    def forward(self, images):
        from gluontrain.torch.ssd.box_utils import match_batch
        _, gts, sizes = next(self._batches)
        scale = torch.stack([sizes[:, 1], sizes[:, 0], sizes[:, 1], sizes[:, 0]], 1)
        valid = gts[:, :, 4] >= 0
        boxes = (gts[:, :, :4] - 1) / scale[:, None, :]
        loc_t, conf_t = match_batch(0.5, boxes, self.priors, (0.1, 0.2),
                                    gts[:, :, 4].clamp(min=0), valid)
        conf = torch.zeros(conf_t.shape + (21,)).scatter_(2, conf_t.unsqueeze(2), 1.0)
        for b in range(conf.shape[0]):
            g = torch.Generator().manual_seed(int(gts[b][valid[b]].sum().item() * 10))
            conf[b] += 8 * torch.rand(conf.shape[1:], generator=g)
        return self.detect(loc_t, torch.softmax(conf, -1), self.priors)


def test_validation_split_over_two_ranks_and_gathered_equals_one_process(tiny_voc):
    from gluontrain.core.distributed import Comm
    from gluontrain.torch.batchify import Pad, Stack, Tuple
    from gluontrain.torch.distributed import ShardSampler
    from gluontrain.torch.ssd.args import parse_args
    from gluontrain.torch.ssd.recipe import get_dataloader, get_dataset
    args = parse_args(['--dataset_root', tiny_voc, '--basenet', '', '--cuda', 'false'])
    train_ds, val_ds, metric = get_dataset('VOC', args)
    cpu = [torch.device('cpu')]
    _, val_data = get_dataloader(None, train_ds, val_ds, 300, 3, 0, args)
    _, oracle_data = get_dataloader(None, train_ds, val_ds, 300, 3, 0, args)
    names, alone = validate(_NoisyOracleSSD(oracle_data), val_data, cpu, metric)
    assert 0.05 < alone[-1] < 0.95   # a score with something to get wrong

    class Rank(Comm):
        """Rank ``rank`` of 2, run one after the other: rank 1 first, its part handed to 0."""
        parts = {}

        def __init__(self, rank):
            self.rank, self.world_size = rank, 2

        def allgather_object(self, obj):
            self.parts[self.rank] = obj
            return [self.parts.get(r) for r in range(2)]

        def broadcast_object(self, obj, root=0):
            return obj

    def shard(rank):
        return torch.utils.data.DataLoader(
            val_ds, 2, sampler=ShardSampler(len(val_ds), rank, 2),
            collate_fn=Tuple(Stack(), Pad(pad_val=-1), Stack()))
    results = {}
    for rank in (1, 0):
        results[rank] = validate(_NoisyOracleSSD(shard(rank)), shard(rank), cpu, metric,
                                 Rank(rank))
    assert len(val_ds) == 4 and [len(Rank.parts[r]) for r in (0, 1)] == [2, 2]
    assert results[1] is None          # this fake broadcast hands rank 1 its own None
    gathered_names, gathered = results[0]
    assert gathered_names == names
    np.testing.assert_array_equal(gathered, alone)   # NaN for classes without objects


def test_weights_files_are_reported_in_the_log(tiny_voc, tmp_path):
    """--basenet and a weights-only --resume (torch.save(ssd_net.state_dict())) say what
    they filled at the top of the training log."""
    from gluontrain.torch.ssd.model import build_ssd
    tiny = build_ssd('train', 300, 21, width_mult=0.0625)
    run = tmp_path / 'run'
    run.mkdir()
    torch.save(tiny.vgg.state_dict(), str(run / 'vgg_tiny.pth'))
    argv = _argv(tiny_voc, run, '--max_iter', '1', '--save_interval', '0')
    argv[argv.index('--basenet') + 1] = 'vgg_tiny.pth'
    main(argv)
    log = open(run / 'ssd300_VOC_train.log').read().splitlines()
    assert 'loaded 30 of 30 tensors from {}/vgg_tiny.pth (0 missing, 0 unexpected, 0 wrong ' \
           'shape)'.format(run) in log
    weights = tmp_path / 'ssd300_VOC_5.pth'
    torch.save(tiny.state_dict(), str(weights))
    again = tmp_path / 'again'
    main(_argv(tiny_voc, again, '--max_iter', '1', '--save_interval', '0', '--resume',
               str(weights)))
    log = open(again / 'ssd300_VOC_train.log').read().splitlines()
    assert 'loaded 71 of 71 tensors from {} (0 missing, 0 unexpected, 0 wrong shape)'.format(
        weights) in log


def test_resume_from_another_recipe_s_file_is_one_error_line(tiny_voc, tmp_path, capsys):
    from gluontrain.__main__ import main as cli_main
    from gluontrain.torch.ssd.model import RESUME_FIX
    snapshot = tmp_path / 'model_last.pth.tar'  # seamseg's snapshot layout (frcnn recipe)
    torch.save({'config': '', 'state_dict': {'body': {'backbone.mod1.conv1.weight':
                                                      torch.zeros(1)}},
                'training_meta': {'epoch': 0}}, str(snapshot))
    vgg_only = tmp_path / 'vgg_as_resume.pth'
    torch.save({'{}.weight'.format(i): torch.zeros(1) for i in (0, 2, 5)}, str(vgg_only))
    for path, looks in ((snapshot, 'a seamseg / gluontrain two-stage (frcnn) snapshot '
                                   '(config, state_dict, training_meta)'),
                        (vgg_only, 'a VGG16 base (vgg16_reducedfc.pth)')):
        status = cli_main(['train', 'ssd'] + _argv(tiny_voc, tmp_path / 'run', '--max_iter',
                                                   '1', '--resume', str(path)))
        err = capsys.readouterr().err.strip().splitlines()
        assert status == 1 and err == ['error: --resume {}: loaded 0 of 71 tensors; it looks '
                                       'like {}; {}'.format(path, looks, RESUME_FIX)]
