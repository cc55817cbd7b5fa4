"""gluontrain.torch.batchify returns what gluoncv.data.batchify returns, as torch tensors."""
import numpy as np
import pytest
import torch

from gluontrain.mx import gluoncv  # noqa: F401  (gluoncv beside torch)
import mxnet as mx
from gluoncv.data import batchify as gb

from gluontrain.torch import batchify as tb

torch.set_num_threads(1)


def assert_same(gluon_out, torch_out):
    """Same nesting, shapes, dtypes (numpy <-> torch) and values."""
    if isinstance(gluon_out, (list, tuple)):
        assert isinstance(torch_out, type(gluon_out)), (type(gluon_out), type(torch_out))
        assert len(gluon_out) == len(torch_out)
        for g, t in zip(gluon_out, torch_out):
            assert_same(g, t)
        return
    assert isinstance(torch_out, torch.Tensor)
    expected, got = gluon_out.asnumpy(), torch_out.numpy()
    assert got.dtype == expected.dtype, (got.dtype, expected.dtype)
    assert got.shape == expected.shape
    np.testing.assert_array_equal(got, expected)


def _rng():
    return np.random.RandomState(0)


def _boxes(rng, n):
    """A detection label: n rows of (xmin, ymin, xmax, ymax, class, difficult)."""
    xy = rng.uniform(0, 100, size=(n, 2))
    return np.hstack([xy, xy + rng.uniform(1, 50, size=(n, 2)),
                      rng.randint(0, 20, size=(n, 1)), np.zeros((n, 1))]).astype(np.float32)


STACK_INPUTS = {
    'int lists': [[1, 2, 3, 4], [4, 5, 6, 8], [8, 9, 1, 2]],
    'python scalars': [1, 0, 2],
    'float64 arrays': [_rng().rand(2, 3) for _ in range(3)],
    'int64 arrays': [np.arange(6).reshape(2, 3) * i for i in range(4)],
    'uint8 images': [_rng().randint(0, 255, (4, 5, 3)).astype(np.uint8) for _ in range(2)],
    'float32 arrays': [np.full((3,), i, dtype=np.float32) for i in range(5)],
    'numpy scalars': [np.float64(0.1), np.int64(3)],
}


@pytest.mark.parametrize('name', sorted(STACK_INPUTS))
def test_stack_equals_gluoncv(name):
    data = STACK_INPUTS[name]
    assert_same(gb.Stack()(data), tb.Stack()(data))


def test_stack_of_tensors_keeps_dtype_like_stack_of_ndarrays():
    ints = [np.arange(4, dtype=np.int32) + i for i in range(3)]
    assert_same(gb.Stack()([mx.nd.array(a, dtype='int32') for a in ints]),
                tb.Stack()([torch.from_numpy(a) for a in ints]))


PAD_CASES = {
    'int lists': (dict(), [[1, 2, 3, 4], [4, 5, 6], [8, 2]]),
    'float lists': (dict(pad_val=-1), [[1.5, 2.0], [4.0], [8.0, 2.0, 0.5]]),
    'ret_length': (dict(ret_length=True), [[1, 2, 3, 4], [4, 5, 6], [8, 2]]),
    'axis 1': (dict(axis=1, pad_val=-1), [np.array([[1, 2, 3, 4], [5, 6, 7, 8]]),
                                         np.array([[5, 8], [1, 2]])]),
    'axis 1 ret_length': (dict(axis=1, pad_val=7, ret_length=True),
                          [_rng().rand(3, n, 2) for n in (4, 1, 6)]),
    'axis tuple': (dict(axis=(1, 2), ret_length=True),
                   [_rng().rand(3, h, w).astype(np.float32) for h, w in ((4, 5), (6, 2))]),
    'detection boxes': (dict(pad_val=-1, ret_length=True),
                        [_boxes(_rng(), n) for n in (3, 1, 7, 2)]),
    'float64 boxes': (dict(pad_val=-1), [_boxes(_rng(), n).astype(np.float64) for n in (2, 5)]),
    'uint8 wraps -1': (dict(pad_val=-1), [np.zeros(3, np.uint8), np.ones(1, np.uint8)]),
    'int truncates pad_val': (dict(pad_val=2.7), [np.arange(3), np.arange(1)]),
    'equal lengths': (dict(ret_length=True), [np.ones((2, 2)), np.zeros((2, 2))]),
    'shards': (dict(num_shards=2, ret_length=True), [[1, 2, 3], [4], [5, 6], [7, 8, 9, 10]]),
    'uneven shards': (dict(num_shards=2, pad_val=-1), [[1, 2, 3], [4], [5, 6]]),
}


@pytest.mark.parametrize('name', sorted(PAD_CASES))
def test_pad_equals_gluoncv(name):
    kwargs, data = PAD_CASES[name]
    assert_same(gb.Pad(**kwargs)(data), tb.Pad(**kwargs)(data))


def test_pad_of_tensors_equals_pad_of_ndarrays():
    arrays = [_boxes(_rng(), n) for n in (3, 1, 4)]
    assert_same(gb.Pad(pad_val=-1, ret_length=True)([mx.nd.array(a) for a in arrays]),
                tb.Pad(pad_val=-1, ret_length=True)([torch.from_numpy(a) for a in arrays]))
    ints = [np.arange(n, dtype=np.int32) for n in (2, 5)]
    assert_same(gb.Pad(pad_val=-1)([mx.nd.array(a, dtype='int32') for a in ints]),
                tb.Pad(pad_val=-1)([torch.from_numpy(a) for a in ints]))


def test_pad_negative_axis_counts_from_the_sample_end():
    # gluoncv indexes the batch shape with 1 + axis and mis-shapes the batch for axis=-1;
    # here -1 is the sample's last axis, i.e. the same as axis=1 for 2-D samples
    data = [np.array([[1, 2, 3], [4, 5, 6]]), np.array([[7], [8]])]
    out = tb.Pad(axis=-1, pad_val=-1)(data)
    np.testing.assert_array_equal(out.numpy(), [[[1, 2, 3], [4, 5, 6]],
                                                 [[7, -1, -1], [8, -1, -1]]])
    assert_same(gb.Pad(axis=1, pad_val=-1)(data), out)
    with pytest.raises(ValueError, match='out of range'):
        tb.Pad(axis=2)(data)


def test_pad_does_not_alias_its_inputs():
    sample = np.arange(3, dtype=np.float32)
    sample.setflags(write=False)
    out = tb.Pad()([sample, np.arange(2, dtype=np.float32)])
    out[0, 0] = 42
    assert sample[0] == 0


APPEND_CASES = {
    'lists': (dict(), [[1, 2, 3, 4], [4, 5, 6], [8, 2]]),
    'no expand': (dict(expand=False), [[1, 2], [3]]),
    'int64 arrays axis 1': (dict(batch_axis=1), [np.arange(6).reshape(2, 3), np.arange(2)[None]]),
    'float64 last axis': (dict(batch_axis=-1), [_rng().rand(2, 3), _rng().rand(4, 1)]),
}


@pytest.mark.parametrize('name', sorted(APPEND_CASES))
def test_append_equals_gluoncv(name):
    kwargs, data = APPEND_CASES[name]
    assert_same(gb.Append(**kwargs)(data), tb.Append(**kwargs)(data))


def test_append_of_tensors_keeps_dtype():
    ints = [np.zeros((2, 3), np.int32), np.ones((1, 3), np.int32)]
    assert_same(gb.Append(batch_axis=1)([mx.nd.array(a, dtype='int32') for a in ints]),
                tb.Append(batch_axis=1)([torch.from_numpy(a) for a in ints]))


def _detection_samples(n=6):
    rng = _rng()
    return [(rng.rand(3, 8, 8).astype(np.float32), _boxes(rng, 1 + i % 4), i % 3)
            for i in range(n)]


@pytest.mark.parametrize('as_list', [False, True])
def test_tuple_equals_gluoncv(as_list):
    data = _detection_samples()
    fns = ('Stack', 'Pad', 'Stack')
    kwargs = ({}, {'pad_val': -1, 'ret_length': True}, {})

    def build(module):
        parts = [getattr(module, f)(**kw) for f, kw in zip(fns, kwargs)]
        return module.Tuple(parts) if as_list else module.Tuple(*parts)
    assert_same(build(gb)(data), build(tb)(data))


def test_tuple_errors():
    with pytest.raises(ValueError, match='2 fields'):
        tb.Tuple(tb.Stack(), tb.Stack())([(1, 2, 3)])
    with pytest.raises(TypeError, match='not callable'):
        tb.Tuple(tb.Stack(), 3)
    with pytest.raises(ValueError, match='not both'):
        tb.Tuple([tb.Stack()], tb.Stack())


class _Detections(torch.utils.data.Dataset):
    def __init__(self):
        self.samples = _detection_samples(7)

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, idx):
        return self.samples[idx]


@pytest.mark.parametrize('num_workers', [0, 2])
def test_collate_fn_of_a_dataloader(num_workers):
    dataset = _Detections()
    collate = tb.Tuple(tb.Stack(), tb.Pad(pad_val=-1), tb.Stack())
    loader = torch.utils.data.DataLoader(dataset, batch_size=3, shuffle=False,
                                         num_workers=num_workers, collate_fn=collate)
    batches = list(loader)
    assert [b[0].shape[0] for b in batches] == [3, 3, 1]
    reference = gb.Tuple(gb.Stack(), gb.Pad(pad_val=-1), gb.Stack())
    for k, batch in enumerate(batches):
        assert_same(reference(dataset.samples[3 * k:3 * k + 3]), batch)
