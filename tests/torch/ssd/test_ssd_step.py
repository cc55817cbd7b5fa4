"""SSD step: the --amp paths (refused on the CPU, bfloat16 autocast with cpu_bf16)."""
import pytest
import torch

from gluontrain.data import synthetic
from gluontrain.torch.ssd import recipe
from gluontrain.torch.ssd.args import parse_args
from gluontrain.torch.ssd.multibox_loss import MultiBoxLoss
from gluontrain.torch.ssd.step import SSDStep

torch.set_num_threads(1)


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
