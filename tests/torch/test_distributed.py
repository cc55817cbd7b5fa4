"""DDP helpers: a real 2-process torchrun job on gloo, and the single-process fallbacks."""
import json
import os

import numpy as np
import pytest
import torch

from launch import free_port, torchrun  # tests/launch.py
from gluontrain.torch import distributed as gdist

torch.set_num_threads(1)

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'ddp_worker.py')


def _run_torchrun(out_dir):
    return torchrun(WORKER, [out_dir], timeout=60)


@pytest.mark.slow  # a subprocess, several processes or a live GluonCV run: over ~5 s
def test_two_ranks_end_with_identical_weights(tmp_path):
    res = _run_torchrun(tmp_path)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    ranks = [np.load(str(tmp_path / 'rank{}.npz'.format(r))) for r in (0, 1)]
    params = list(ranks[0]['param_names'])
    assert len(params) == 6         # 2 Linear (weight, bias) + BatchNorm (weight, bias)
    for name in params:
        final0, final1 = ranks[0]['final/' + name], ranks[1]['final/' + name]
        np.testing.assert_array_equal(final0, final1, err_msg=name)
        assert not np.array_equal(final0, ranks[0]['initial/' + name]), name + ' did not train'
    # each rank saw its own half of the data, every sample once per epoch
    seen0, seen1 = (set(r['epoch0_seen'].tolist()) for r in ranks)
    assert not seen0 & seen1 and seen0 | seen1 == set(range(32))
    # BatchNorm running statistics are per rank (DDP broadcasts rank 0's before each forward,
    # then each rank adds its own last batch), which shows the ranks' data really differed
    assert not np.array_equal(ranks[0]['final/1.running_mean'], ranks[1]['final/1.running_mean'])
    logs = [json.loads((tmp_path / 'rank{}.json'.format(r)).read_text()) for r in (0, 1)]
    assert [log['main'] for log in logs] == [True, False]
    for log in logs:
        assert log['syncbn_refused'].startswith('SyncBatchNorm needs CUDA')
        assert 'expected input tensor to be on GPU' in log['torch_syncbn_forward_error']
    expected = (logs[0]['local_loss'] + logs[1]['local_loss']) / 2
    assert logs[0]['mean_loss'] == logs[1]['mean_loss'] == pytest.approx(expected, rel=1e-12)
    assert logs[0]['mean_rank'] == logs[1]['mean_rank'] == 0.5
    # the engine's Comm over torch.distributed
    comms = [log['comm'] for log in logs]
    assert [c['rank_world'] for c in comms] == [[0, 2], [1, 2]]
    for c in comms:
        assert c['gathered'] == [{'rank': 0, 'n': 32}, {'rank': 1, 'n': 32}]
        assert c['broadcast'] == 'from rank 0' and c['broadcast_1'] == ['r', 1]
        assert c['mean'] == {'x': 0.5, 'y': 3.0}
    assert [c['shard'] for c in comms] == [[0, 2, 4], [1, 3]]


@pytest.mark.skipif(torch.cuda.is_available(), reason='checks the CPU refusal')
def test_sync_batchnorm_refuses_cpu_with_a_clear_message():
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4))
    with pytest.raises(RuntimeError, match='SyncBatchNorm needs CUDA') as error:
        gdist.convert_sync_batchnorm(model)
    assert "without --syncbn" in str(error.value)
    # what it prevents, a failure at the first forward of a distributed CPU run, is checked
    # inside the torchrun job (test_two_ranks_end_with_identical_weights)


def test_sync_batchnorm_refuses_a_cpu_device_even_with_cuda(monkeypatch):
    monkeypatch.setattr(torch.cuda, 'is_available', lambda: True)
    with pytest.raises(RuntimeError, match='device=cpu'):
        gdist.convert_sync_batchnorm(torch.nn.BatchNorm1d(3), device='cpu')


def test_single_process_fallbacks(monkeypatch):
    for name in ('RANK', 'WORLD_SIZE', 'LOCAL_RANK'):
        monkeypatch.delenv(name, raising=False)
    info = gdist.init_distributed(use_cuda=False)
    assert info == gdist.DistInfo(0, 1, 0, torch.device('cpu'), None)
    # a --local_rank argument (seamseg's, SGB's tools) wins over torchrun's LOCAL_RANK
    monkeypatch.setenv('LOCAL_RANK', '1')
    assert gdist.init_distributed(use_cuda=False).local_rank == 1
    assert gdist.init_distributed(use_cuda=False, local_rank=3).local_rank == 3
    monkeypatch.delenv('LOCAL_RANK')
    assert not gdist.is_distributed() and gdist.is_main_process()
    assert gdist.get_rank() == 0 and gdist.get_world_size() == 1
    gdist.barrier()
    means = gdist.all_reduce_mean({'b': torch.tensor(2.5), 'a': 1})
    assert means == {'b': 2.5, 'a': 1.0} and list(means) == ['b', 'a']
    model = torch.nn.Linear(2, 2)
    assert gdist.wrap_ddp(model, torch.device('cpu')) is model
    assert gdist.unwrap_model(torch.nn.DataParallel(model)) is model
    comm = gdist.TorchComm()
    assert (comm.rank, comm.world_size, comm.is_main) == (0, 1, True)
    comm.barrier()
    assert comm.allgather_object({'a': 1}) == [{'a': 1}]
    assert comm.broadcast_object(7) == 7 and comm.allreduce_mean({'l': 2}) == {'l': 2.0}
    with pytest.raises(ValueError, match='rank 0 only'):
        comm.broadcast_object(7, root=1)
    assert list(gdist.ShardSampler(7, 2, 3)) == [2, 5] and len(gdist.ShardSampler(7, 0, 3)) == 3
    with pytest.raises(ValueError, match='rank 3'):
        gdist.ShardSampler(7, 3, 3)
    monkeypatch.setenv('WORLD_SIZE', 'two')
    with pytest.raises(ValueError, match='WORLD_SIZE'):
        gdist.init_distributed(use_cuda=False)


def test_a_rank_that_does_not_join_within_the_timeout_is_one_error(monkeypatch):
    """Rank 0 of 2 alone, as when rank 1 starts 3 s late under a 2 s timeout (stop 53's CI:
    torch's DistStoreError traceback, nothing from the late rank): one CollectiveTimeoutError
    (the CLI's error: line) saying what to raise, and no process group left behind."""
    monkeypatch.setenv('MASTER_ADDR', '127.0.0.1')
    monkeypatch.setenv('MASTER_PORT', str(free_port()))
    monkeypatch.delenv('TORCHELASTIC_USE_AGENT_STORE', raising=False)
    with pytest.raises(gdist.CollectiveTimeoutError) as caught:
        gdist.init_process_group('gloo', 1, rank=0, world_size=2)
    line = str(caught.value)
    assert line.startswith('rank 0: the other 1 rank(s) did not join the process group within 1 s')
    assert 'GLUONTRAIN_DIST_TIMEOUT=1' in line and '\n' not in line
    assert not torch.distributed.is_initialized()
