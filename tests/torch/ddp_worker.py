"""One rank of the 2-process DDP test (run by torchrun from test_distributed.py; not a test).

Trains Linear + BatchNorm + Linear on its own shard (DistributedSampler) with gloo for two
epochs, then writes ``rank{R}.npz`` (initial and final parameters, buffers, the dataset
indices this rank saw) and ``rank{R}.json`` (the all-reduced loss, and what SyncBatchNorm does
on the CPU of a distributed run) into the folder argv[1].

``ddp_worker.py DIR stop`` (test_dist_watchdog.py): rank 1 SIGSTOPs itself after the first
step, through ``run_job``, so that rank 0 must end the job within ``$GLUONTRAIN_DIST_TIMEOUT``;
``hang``: rank 1's main thread waits forever instead (a data loader that never returns).
"""
import json
import os
import signal
import sys
import threading

import numpy as np
import torch

from gluontrain.torch.distributed import (all_reduce_mean, barrier, cleanup,
                                          convert_sync_batchnorm, get_world_size,
                                          init_distributed, is_main_process, run_job,
                                          unwrap_model, wrap_ddp, ShardSampler, TorchComm)


class IndexedData(torch.utils.data.Dataset):
    """Fixed random regression data that also returns each sample's index."""

    def __init__(self, size=32):
        generator = torch.Generator().manual_seed(123)
        self.x = torch.randn(size, 4, generator=generator)
        self.y = self.x.sum(dim=1, keepdim=True) + 0.1 * torch.randn(size, 1, generator=generator)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, idx):
        return self.x[idx], self.y[idx], idx


def syncbn_on_cpu():
    """What convert_sync_batchnorm says on CPU, and how torch's own SyncBatchNorm fails here."""
    bn = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3))
    try:
        convert_sync_batchnorm(bn)
        refused = ''
    except RuntimeError as e:
        refused = str(e)
    try:
        torch.nn.SyncBatchNorm.convert_sync_batchnorm(bn)(torch.randn(4, 4))
        forward_error = ''
    except (ValueError, RuntimeError) as e:
        forward_error = str(e)
    return refused, forward_error


def main(out_dir, stop_rank=None, hang=False):
    torch.set_num_threads(1)
    info = init_distributed()
    assert info.world_size == get_world_size() == 2 and info.backend == 'gloo', info
    refused, forward_error = syncbn_on_cpu()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.BatchNorm1d(8),
                                torch.nn.ReLU(), torch.nn.Linear(8, 1))
    initial = {k: v.detach().clone().numpy() for k, v in model.state_dict().items()}
    model = wrap_ddp(model, info.device)
    assert isinstance(model, torch.nn.parallel.DistributedDataParallel)
    dataset = IndexedData()
    sampler = torch.utils.data.distributed.DistributedSampler(dataset, shuffle=True, seed=0)
    loader = torch.utils.data.DataLoader(dataset, batch_size=4, sampler=sampler)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    seen, losses = [], []
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for x, y, idx in loader:
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            optimizer.step()
            seen.extend(int(i) for i in idx)
            losses.append(loss.item())
            if info.rank == stop_rank:
                print('rank {} stops'.format(info.rank), flush=True)
                if hang:
                    threading.Event().wait()        # a data loader that never returns
                os.kill(os.getpid(), signal.SIGSTOP)
        if epoch == 0:
            epoch0_seen = list(seen)
    comm = TorchComm()
    comm_log = {'rank_world': [comm.rank, comm.world_size],
                'gathered': comm.allgather_object({'rank': info.rank, 'n': len(seen)}),
                'broadcast': comm.broadcast_object('from rank {}'.format(info.rank)),
                'broadcast_1': comm.broadcast_object(['r', info.rank], root=1),
                'mean': comm.allreduce_mean({'x': float(info.rank), 'y': 3.0}),
                'shard': list(ShardSampler(5, info.rank, 2))}
    comm.barrier()
    values = [('loss', float(np.mean(losses))), ('rank', float(info.rank))]
    # the ranks list the names in different orders; the means must not mix them up
    reduced = all_reduce_mean(dict(values if info.rank == 0 else values[::-1]))
    final = {k: v.detach().clone().numpy() for k, v in unwrap_model(model).state_dict().items()}
    rank = info.rank
    np.savez(os.path.join(out_dir, 'rank{}.npz'.format(rank)),
             seen=np.array(seen), epoch0_seen=np.array(epoch0_seen),
             **{'initial/' + k: v for k, v in initial.items()},
             **{'final/' + k: v for k, v in final.items()},
             param_names=np.array([n for n, _ in unwrap_model(model).named_parameters()]))
    with open(os.path.join(out_dir, 'rank{}.json'.format(rank)), 'w') as f:
        json.dump({'rank': rank, 'main': is_main_process(), 'local_loss': float(np.mean(losses)),
                   'mean_loss': reduced['loss'], 'mean_rank': reduced['rank'],
                   'syncbn_refused': refused,
                   'torch_syncbn_forward_error': forward_error, 'comm': comm_log}, f)
    barrier()
    cleanup()


if __name__ == '__main__':
    if sys.argv[2:] in (['stop'], ['hang']):
        sys.exit(run_job(lambda: main(sys.argv[1], stop_rank=1, hang=sys.argv[2] == 'hang')))
    main(sys.argv[1])
