"""get_devices and split_and_load behave like GluonCV's --gpus and gluon's split_and_load."""
import numpy as np
import pytest
import torch

from gluontrain.mx import gluoncv  # noqa: F401  (gluoncv beside torch)
import mxnet as mx
from mxnet import gluon

from gluontrain.torch.parallel import get_devices, split_and_load, split_data

torch.set_num_threads(1)


@pytest.mark.parametrize('num_slice', [1, 2, 3, 4, 5, 7, 8])
@pytest.mark.parametrize('size', [1, 2, 3, 5, 8, 9, 16, 17, 31])
def test_uneven_slices_equal_gluon(size, num_slice):
    values = np.arange(size * 2, dtype=np.float32).reshape(size, 2)
    expected = [s.asnumpy() for s in gluon.utils.split_data(mx.nd.array(values), num_slice,
                                                            even_split=False)]
    got = [s.numpy() for s in split_data(torch.from_numpy(values), num_slice, even_split=False)]
    assert [g.shape for g in got] == [e.shape for e in expected]
    for g, e in zip(got, expected):
        np.testing.assert_array_equal(g, e)


@pytest.mark.parametrize('size,num_slice', [(4, 3), (10, 4), (3, 4), (9, 2)])
def test_even_split_raises_like_gluon(size, num_slice):
    with pytest.raises(ValueError) as gluon_error:
        gluon.utils.split_data(mx.nd.zeros((size, 3)), num_slice)
    with pytest.raises(ValueError) as ours:
        split_data(torch.zeros(size, 3), num_slice)
    assert str(ours.value) == str(gluon_error.value)
    assert 'even_split=False' in str(ours.value)


@pytest.mark.parametrize('num_slice', [2, 3, 4])
def test_batch_axis_1_equals_gluon(num_slice):
    values = np.random.RandomState(0).rand(2, 7, 3).astype(np.float32)
    expected = gluon.utils.split_data(mx.nd.array(values), num_slice, batch_axis=1,
                                      even_split=False)
    got = split_data(torch.from_numpy(values), num_slice, batch_axis=1, even_split=False)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        np.testing.assert_array_equal(g.numpy(), e.asnumpy())


def test_split_and_load_onto_cpu_devices_equals_gluon():
    values = np.arange(30, dtype=np.int64).reshape(10, 3)
    contexts = [mx.cpu(i) for i in range(4)]
    expected = gluon.utils.split_and_load(values, contexts, even_split=False)
    got = split_and_load(values, get_devices('', cpus=4), even_split=False)
    # gluon turns a numpy batch into float32 (mx.nd.array), so does split_and_load
    assert [g.dtype for g in got] == [torch.float32] * 4
    for g, e in zip(got, expected):
        assert g.numpy().dtype == e.asnumpy().dtype
        np.testing.assert_array_equal(g.numpy(), e.asnumpy())
    with pytest.raises(ValueError, match='evenly split'):
        split_and_load(values, get_devices('', cpus=4))


def test_one_device_is_never_split_or_checked():
    batch = torch.arange(5)
    expected = gluon.utils.split_and_load(mx.nd.arange(5), [mx.cpu()], even_split=True)
    got = split_and_load(batch, get_devices(''), even_split=True)
    assert len(got) == len(expected) == 1 and got[0].shape[0] == expected[0].shape[0] == 5
    assert got[0].dtype == torch.int64        # tensors keep their dtype


def test_get_devices():
    assert get_devices('') == [torch.device('cpu')]
    assert get_devices('  ') == [torch.device('cpu')]
    assert get_devices('0', cpus=2) == [torch.device('cpu')] * 2
    with pytest.raises(ValueError, match="--gpus ''"):
        get_devices('not-a-gpu')
    count = torch.cuda.device_count()
    if count:
        assert get_devices('0') == [torch.device('cuda', 0)]
    with pytest.raises(ValueError) as error:
        get_devices('{},{}'.format(count, count + 1))
    message = str(error.value)
    assert "--gpus ''" in message and 'sees {} GPU'.format(count) in message
