"""SSD recipe plumbing for GPUs: loader options, cudnn.benchmark, --amp accepted or refused."""
import pytest
import torch

from gluontrain.data import synthetic
from gluontrain.torch.ssd import recipe
from gluontrain.torch.ssd.args import parse_args
from gluontrain.torch.ssd.multibox_loss import MultiBoxLoss
from gluontrain.torch.ssd.train import SSDStep

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


def test_ssd_step_amp_paths(tmp_path):
    root = synthetic.write_voc(str(tmp_path), num_train=2, num_val=1, seed=0,
                               classes=synthetic.DEFAULT_VOC_CLASSES, image_size=(64, 80))
    args = parse_args(['--dataset_root', root, '--basenet', '', '--cuda', 'false',
                       '--width_mult', '0.0625', '--save_folder', str(tmp_path) + '/'])
    train_ds, _, _ = recipe.get_dataset('VOC', args)
    net, _ = recipe.get_net(args, [torch.device('cpu')])
    loader, _ = recipe.get_dataloader(net, train_ds, None, 300, 2, 0, args)
    batch = next(iter(loader))
    opt = torch.optim.SGD(net.parameters(), lr=1e-3)
    crit = MultiBoxLoss(21, 0.5, True, 0, True, 3, 0.5, False, False)
    cpu = torch.device('cpu')
    with pytest.raises(ValueError, match='--amp'):
        SSDStep(net, crit, opt, cpu, amp=True)
    # bf16 autocast (the bench's path): the forward really runs in bfloat16, the loss is finite
    step = SSDStep(net, crit, opt, cpu, amp=True, cpu_bf16=True)
    dtypes = []
    hook = net.loc[0].register_forward_hook(lambda m, i, o: dtypes.append(o.dtype))
    out = step(batch)
    hook.remove()
    assert dtypes == [torch.bfloat16]
    assert all(torch.isfinite(torch.tensor(v[0][0])) for v in out['losses'].values())


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
