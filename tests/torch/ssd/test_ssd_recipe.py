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
