"""One rank of the 2-process SyncBatchNormAct test (started with torchrun's variables by
test_twostage_norm.py; not a test). Writes ``rank{R}.json`` into argv[1]: the largest
differences between the synchronised layer on this rank's half of the batch and a plain
BatchNormAct on the whole batch."""
import json
import os
import sys

import torch
import torch.distributed as dist

from gluontrain.torch.twostage.norm import BatchNormAct, SyncBatchNormAct


def main(out_dir):
    dist.init_process_group('gloo')
    rank, world = dist.get_rank(), dist.get_world_size()
    g = torch.Generator().manual_seed(7)
    x_all = torch.randn(4 * world, 3, 5, 5, generator=g) * 2 + 1
    upstream = torch.randn(4 * world, 3, 5, 5, generator=g)
    ref, sync = BatchNormAct(3), SyncBatchNormAct(3)
    with torch.no_grad():
        for m in (ref, sync):
            m.weight.copy_(torch.tensor([1.5, -0.5, 2.0]))
            m.bias.copy_(torch.tensor([0.1, 0.2, -0.3]))
    xr = x_all.clone().requires_grad_(True)
    (ref(xr) * upstream).sum().backward()
    part = slice(4 * rank, 4 * rank + 4)
    xs = x_all[part].clone().requires_grad_(True)
    ys = sync(xs)
    (ys * upstream[part]).sum().backward()
    wgrad = sync.weight.grad.clone()
    dist.all_reduce(wgrad)  # each rank holds the gradient of its own outputs
    out = {'y': (ys.detach() - _ref_out(x_all, part)).abs().max().item(),
           'xgrad': (xs.grad - xr.grad[part]).abs().max().item(),
           'wgrad': (wgrad - ref.weight.grad).abs().max().item(),
           'running_var': (sync.running_var - ref.running_var).abs().max().item(),
           'running_mean': (sync.running_mean - ref.running_mean).abs().max().item(),
           'world': world}
    with open(os.path.join(out_dir, 'rank{}.json'.format(rank)), 'w') as f:
        json.dump(out, f)
    dist.barrier()
    dist.destroy_process_group()


def _ref_out(x_all, part):
    m = BatchNormAct(3)
    with torch.no_grad():
        m.weight.copy_(torch.tensor([1.5, -0.5, 2.0]))
        m.bias.copy_(torch.tensor([0.1, 0.2, -0.3]))
        return m(x_all)[part]


if __name__ == '__main__':
    main(sys.argv[1])
