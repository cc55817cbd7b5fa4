"""MXNet writers' bytes through memory (or a swept scratch file), never the system temp dir."""
import os
import tempfile

import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd, gluon

from gluontrain.mx import blobs


def _net_and_trainer():
    net = gluon.nn.Dense(3, in_units=4)
    net.initialize(mx.init.Normal(1.0))
    trainer = gluon.Trainer(net.collect_params(), 'sgd', {'learning_rate': 0.1, 'momentum': 0.9})
    with autograd.record():
        loss = net(mx.nd.ones((2, 4))).sum()
    loss.backward()
    trainer.step(2)  # momentum state is not zero now
    return net, trainer


@pytest.mark.parametrize('memfd', [True, False])
def test_round_trip_writes_nothing_to_disk_or_temp_dir(tmp_path, monkeypatch, memfd):
    def no_system_temp(*args, **kwargs):
        raise AssertionError('the system temp dir was used')

    for name in ('mkstemp', 'gettempdir', 'NamedTemporaryFile', 'TemporaryFile'):
        monkeypatch.setattr(tempfile, name, no_system_temp)
    if not memfd:
        monkeypatch.setattr(blobs, '_memfd_available', lambda: False)
    beside = str(tmp_path / 'out' / 'run_last.ckpt')
    os.makedirs(os.path.dirname(beside))
    net, trainer = _net_and_trainer()
    params = blobs.to_bytes(net.save_parameters, beside)
    states = blobs.to_bytes(trainer.save_states, beside)
    # the same bytes as the writers' own files
    net.save_parameters(str(tmp_path / 'ref.params'))
    assert params == (tmp_path / 'ref.params').read_bytes()
    net2, trainer2 = _net_and_trainer()
    blobs.from_bytes(params, lambda f: net2.load_parameters(f), beside)
    blobs.from_bytes(states, trainer2.load_states, beside)
    np.testing.assert_array_equal(net2.weight.data().asnumpy(), net.weight.data().asnumpy())
    momentum = [trainer._updaters[0].states[0].asnumpy(),
                trainer2._updaters[0].states[0].asnumpy()]
    np.testing.assert_array_equal(*momentum)
    assert os.listdir(os.path.dirname(beside)) == []


def test_streamed_params_are_save_parameters_bytes(tmp_path):
    net, _ = _net_and_trainer()
    net.save_parameters(str(tmp_path / 'ref.params'))
    blob = blobs.params_blob(net)
    assert blob.to_bytes() == (tmp_path / 'ref.params').read_bytes()
    assert blob.size == len(blob.to_bytes())


def test_streamed_trainer_states_load_back_as_save_states(tmp_path):
    """trainer_states_blob's bytes, read by trainer.load_states, give what save_states' give:
    the momentum arrays (dtype, context, values) and the optimizer (update count, lr)."""
    _, trainer = _net_and_trainer()
    beside = str(tmp_path / 'run_last.ckpt')
    streamed = blobs.trainer_states_blob(trainer, beside).to_bytes()
    want, got = _net_and_trainer()[1], _net_and_trainer()[1]
    blobs.from_bytes(blobs.to_bytes(trainer.save_states, beside), want.load_states, beside)
    blobs.from_bytes(streamed, got.load_states, beside)
    for w, g in zip(want._updaters[0].states.values(), got._updaters[0].states.values()):
        assert (g.dtype, g.context, g.shape) == (w.dtype, w.context, w.shape)
        np.testing.assert_array_equal(g.asnumpy(), w.asnumpy())
    assert got._optimizer.num_update == want._optimizer.num_update == 1
    assert got._optimizer.learning_rate == want._optimizer.learning_rate == 0.1
    assert sorted(got._updaters[0].states) == sorted(trainer._updaters[0].states)


def test_streamed_export_writes_exports_files_byte_for_byte(tmp_path):
    """export_streamed gives net.export's symbol and params files, BatchNorm's aux states
    included, in export's order and names."""
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Conv2D(4, 3, in_channels=3), gluon.nn.BatchNorm(in_channels=4),
            gluon.nn.Dense(2, in_units=4 * 6 * 6))
    net.initialize(mx.init.Normal(1.0))
    net.hybridize()
    with autograd.record():  # running statistics away from their initial 0 / 1
        net(mx.nd.random.uniform(shape=(2, 3, 8, 8)))
    net(mx.nd.ones((1, 3, 8, 8)))
    net.export(str(tmp_path / 'ref'), epoch=3)
    blobs.export_streamed(net, str(tmp_path / 'ours'), epoch=3)
    for suffix in ('-symbol.json', '-0003.params'):
        assert (tmp_path / ('ours' + suffix)).read_bytes() == \
            (tmp_path / ('ref' + suffix)).read_bytes()
    names = sorted(mx.nd.load(str(tmp_path / 'ours-0003.params')))
    assert sum(n.startswith('aux:') for n in names) == 2 and len(names) == 8


def test_streamed_export_needs_a_forward_first(tmp_path):
    net = gluon.nn.Dense(2, in_units=3)
    net.initialize()
    net.hybridize()
    with pytest.raises(RuntimeError, match='hybridize'):
        blobs.export_streamed(net, str(tmp_path / 'm'))
    assert list(tmp_path.iterdir()) == []
