"""SSD300 loss curve in fp32 vs mixed precision from the same weights on the same batches.

Decides whether ``--amp`` may run on the CPU (bfloat16 autocast): a tiny SSD (``--width``
channel multiplier, random init) on generated VOC images, ``--iters`` SGD steps at batch
``--batch``, the per-iteration loc/conf losses of both runs and their largest relative
difference. On CUDA (``--device cuda``) the mixed run is float16 autocast + GradScaler.

Usage: python bench/ssd_amp.py [--iters 20] [--batch 4] [--width 0.125] [--device cpu]
"""
import argparse
import copy
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))

import torch  # noqa: E402

from gluontrain.data import synthetic  # noqa: E402
from gluontrain.torch.ssd import recipe  # noqa: E402
from gluontrain.torch.ssd.args import parse_args  # noqa: E402
from gluontrain.torch.ssd.multibox_loss import MultiBoxLoss  # noqa: E402
from gluontrain.torch.ssd.step import SSDStep  # noqa: E402
from gluontrain.torch.step import seed_all  # noqa: E402


def curve(net, batches, device, amp, lr):
    """Per-iteration (loc, conf) losses and seconds of SGD steps over ``batches``."""
    net = copy.deepcopy(net).to(device).train()
    opt = torch.optim.SGD(net.parameters(), lr=lr, momentum=0.9, weight_decay=5e-4)
    crit = MultiBoxLoss(net.num_classes, 0.5, True, 0, True, 3, 0.5, False,
                        device.type == 'cuda')
    step = SSDStep(net, crit, opt, device, amp=amp, cpu_bf16=amp and device.type == 'cpu')
    out, tic = [], time.perf_counter()
    for batch in batches:
        seed_all(0)  # hard-negative mining ties: the same draws in both runs
        losses = step(batch)['losses']
        out.append((losses['loc_loss'][0][0], losses['conf_loss'][0][0]))
    return out, time.perf_counter() - tic


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--iters', type=int, default=20)
    p.add_argument('--batch', type=int, default=4)
    p.add_argument('--width', type=float, default=0.125)
    p.add_argument('--lr', type=float, default=1e-3)
    p.add_argument('--device', default='cpu')
    a = p.parse_args()
    torch.set_num_threads(1)
    device = torch.device(a.device)
    with tempfile.TemporaryDirectory() as tmp:
        root = synthetic.write_voc(tmp, num_train=a.batch * 2, num_val=1, seed=0,
                                   classes=synthetic.DEFAULT_VOC_CLASSES,
                                   image_size=(128, 160))
        args = parse_args(['--dataset_root', root, '--basenet', '', '--cuda', 'false',
                           '--width_mult', str(a.width), '--save_folder', tmp + '/'])
        seed_all(0)
        train_ds, _, _ = recipe.get_dataset('VOC', args)
        net, _ = recipe.get_net(args, [torch.device('cpu')])
        loader, _ = recipe.get_dataloader(net, train_ds, None, 300, a.batch, 0, args)
        batches = []
        while len(batches) < a.iters:
            batches.extend(loader)
        batches = batches[:a.iters]
    fp32, t32 = curve(net, batches, device, False, a.lr)
    mixed, tmix = curve(net, batches, device, True, a.lr)
    name = 'bf16 autocast' if device.type == 'cpu' else 'fp16 autocast + GradScaler'
    print('| iter | loc fp32 | loc {0} | conf fp32 | conf {0} |\n|---|---|---|---|---|'.format(
        name))
    worst = 0.0
    for i, ((l32, c32), (lm, cm)) in enumerate(zip(fp32, mixed)):
        worst = max(worst, abs(lm - l32) / abs(l32), abs(cm - c32) / abs(c32))
        print('| {} | {:.4f} | {:.4f} | {:.4f} | {:.4f} |'.format(i, l32, lm, c32, cm))
    print('\nlargest relative loss difference over {} iterations: {:.2%}; time fp32 {:.1f} s, '
          '{} {:.1f} s'.format(a.iters, worst, t32, name, tmix))


if __name__ == '__main__':
    main()
