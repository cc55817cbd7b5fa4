"""Norm + activation layers of each normalization_mode."""
import pytest
import torch
import torch.nn.functional as F

from launch import dist_env, free_port  # tests/launch.py
from gluontrain.torch.twostage import norm as N


def test_batchnorm_act_equals_bn_then_leaky_relu_on_2d_and_4d():
    torch.manual_seed(0)
    layer = N.BatchNormAct(3)
    ref = torch.nn.BatchNorm2d(3)
    for x in (torch.randn(4, 3, 5, 5), torch.randn(6, 3)):
        y = layer(x)
        if x.dim() == 4:
            assert torch.allclose(y, F.leaky_relu(ref(x), 0.01), atol=1e-6)
        else:
            m, v = x.mean(0), x.var(0, unbiased=False)
            assert torch.allclose(y, F.leaky_relu((x - m) / torch.sqrt(v + 1e-5), 0.01),
                                  atol=1e-5)


def test_frozen_affine_uses_running_stats_in_train_mode():
    layer = N.FrozenAffineAct(2, activation='identity')
    with torch.no_grad():
        layer.running_mean.copy_(torch.tensor([1., -1.]))
        layer.running_var.copy_(torch.tensor([4., 1.]))
        layer.weight.copy_(torch.tensor([2., 3.]))
        layer.bias.copy_(torch.tensor([.5, 0.]))
    layer.train()
    x = torch.tensor([[3., 1.]])
    y = layer(x)
    # (3 - 1) / sqrt(4 + 1e-5) * 2 + .5 ; (1 + 1) / sqrt(1 + 1e-5) * 3
    assert torch.allclose(y, torch.tensor([[2 / (4 + 1e-5) ** .5 * 2 + .5,
                                            2 / (1 + 1e-5) ** .5 * 3]]))
    assert torch.equal(layer.running_mean, torch.tensor([1., -1.]))  # never updated


def test_modes_static_dynamic():
    kinds = {m: tuple(type(f(32)) for f in N.make_norm_act(m)) for m in N.NORMALIZATION_MODES}
    assert kinds == {
        'bn': (N.BatchNormAct, N.BatchNormAct),
        'syncbn': (N.SyncBatchNormAct, N.SyncBatchNormAct),
        'syncbn+bn': (N.SyncBatchNormAct, N.BatchNormAct),
        'gn': (N.GroupNormAct, N.GroupNormAct),
        'syncbn+gn': (N.SyncBatchNormAct, N.GroupNormAct),
        'off': (N.FrozenAffineAct, N.FrozenAffineAct)}
    gn = N.make_norm_act('gn', groups=8)[0](32)
    assert gn.num_groups == 8 and isinstance(gn, N.NORM_LAYERS)
    with pytest.raises(ValueError, match='normalization_mode'):
        N.make_norm_act('inplace')
    with pytest.raises(ValueError, match='activation'):
        N.make_norm_act('bn', activation='tanh')
    with pytest.raises(ValueError, match='divisible'):
        N.GroupNormAct(30, 16)


def test_syncbn_single_process_is_batchnorm():
    torch.manual_seed(0)
    x = torch.randn(4, 3, 5, 5)
    a, b = N.SyncBatchNormAct(3), N.BatchNormAct(3)
    assert torch.allclose(a(x), b(x), atol=1e-6)
    assert torch.allclose(a.running_var, b.running_var)


def test_syncbn_two_cpu_processes_equal_whole_batch_batchnorm(tmp_path):
    """2 ranks on gloo: outputs, input gradients, summed scale gradients and running
    statistics equal one BatchNormAct over the whole batch.

    The two ranks are started here with torchrun's variables (env://, a free port) rather than
    by torchrun, whose own python start was a third of the test (trim of issue 22: 8.1 -> 5.5 s
    CPU)."""
    import json
    import os
    import subprocess
    import sys
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))))
    worker = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'syncbn_worker.py')
    port = str(free_port())
    ranks = []
    for rank in (0, 1):
        env = dist_env(PYTHONPATH=repo)
        env.update(MASTER_ADDR='127.0.0.1', MASTER_PORT=port, WORLD_SIZE='2', RANK=str(rank),
                   LOCAL_RANK=str(rank))
        ranks.append(subprocess.Popen([sys.executable, worker, str(tmp_path)], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True))
    try:
        results = [(p.communicate(timeout=120)[1], p.returncode) for p in ranks]
    finally:
        for p in ranks:
            if p.poll() is None:
                p.kill()
                p.wait()
    for err, code in results:
        assert code == 0, err[:3000]
    for rank in (0, 1):
        diffs = json.loads((tmp_path / 'rank{}.json'.format(rank)).read_text())
        assert diffs.pop('world') == 2
        assert max(diffs.values()) < 1e-5, diffs
