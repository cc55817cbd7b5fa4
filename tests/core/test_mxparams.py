"""mxparams: MXNet's .params files read and written in numpy, equal to mx.nd.load / mx.nd.save.

The committed files under tests/fixtures/mxparams/ were written by MXNet itself
(make_yolo3_torch_fixtures.py), so the reader is checked without MXNet; where MXNet is
importable the same checks run against it live.
"""
import importlib.util
import io
import os
import struct

import numpy as np
import pytest

from fixtures.make_yolo3_torch_fixtures import gluon_block_values, tiny_arrays
from gluontrain.core import mxparams
from gluontrain.core.mxparams import ParamsFormatError

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'fixtures',
                        'mxparams')
HAS_MXNET = importlib.util.find_spec('mxnet') is not None
needs_mxnet = pytest.mark.skipif(not HAS_MXNET, reason='mxnet not installed: the live '
                                 'comparison with mx.nd.load / mx.nd.save needs it')


def _fixture(name):
    return os.path.join(FIXTURES, name)


def _params_bytes(arrays):
    """The bytes :func:`mxparams.write_params_to` writes for ``arrays``."""
    out = io.BytesIO()
    mxparams.write_params_to(out, arrays)
    return out.getvalue()


def _assert_same(got, want):
    assert list(got) == list(want)
    for key in want:
        assert got[key].dtype == want[key].dtype, key
        np.testing.assert_array_equal(got[key], want[key], err_msg=key)


def test_reads_what_mx_nd_save_wrote_value_for_value_and_dtype_for_dtype():
    _assert_same(mxparams.read_params(_fixture('dtypes.params')), tiny_arrays())


def test_writer_gives_the_bytes_mx_nd_save_wrote():
    with open(_fixture('dtypes.params'), 'rb') as f:
        assert _params_bytes(tiny_arrays()) == f.read()


def test_streamed_writer_and_its_size_give_the_same_bytes():
    """write_params_to with lazy values (one array at a time) writes the same bytes as whole
    arrays, and params_size counts them from shapes and dtypes alone (named and unnamed)."""
    arrays = tiny_arrays()
    for spec in (arrays, list(arrays.values())):
        lazy = ({k: (lambda v=v: v) for k, v in spec.items()} if isinstance(spec, dict)
                else [lambda v=v: v for v in spec])
        out = io.BytesIO()
        mxparams.write_params_to(out, lazy)
        assert out.getvalue() == _params_bytes(spec)
        shapes = ({k: (np.shape(v), np.asarray(v).dtype) for k, v in spec.items()}
                  if isinstance(spec, dict) else [(np.shape(v), np.asarray(v).dtype)
                                                   for v in spec])
        assert mxparams.params_size(shapes) == len(out.getvalue())


def test_reads_gluon_save_parameters_names_in_order():
    got = mxparams.read_params(_fixture('gluon_block.params'))
    # Gluon's structural names: conv weight, BatchNorm's four, dense weight and bias
    assert list(got) == ['0.weight', '1.gamma', '1.beta', '1.running_mean', '1.running_var',
                         '2.weight', '2.bias']
    assert got['0.weight'].shape == (4, 2, 3, 3) and got['2.weight'].shape == (3, 36)
    _assert_same(got, gluon_block_values({k: v.shape for k, v in got.items()}))


def test_an_unnamed_list_reads_as_a_list():
    got = mxparams.read_params(_fixture('list.params'))
    assert isinstance(got, list) and len(got) == 2
    np.testing.assert_array_equal(got[0], tiny_arrays()['f32'])
    assert got[1].dtype == np.int64
    with open(_fixture('list.params'), 'rb') as f:
        assert _params_bytes([tiny_arrays()['f32'], tiny_arrays()['i64']]) == f.read()


def test_write_then_read_round_trip_is_atomic(tmp_path):
    path = tmp_path / 'w.params'
    mxparams.write_params(str(path), tiny_arrays())
    _assert_same(mxparams.read_params(str(path)), tiny_arrays())
    assert sorted(os.listdir(tmp_path)) == ['w.params']  # no temporary left


def _array_bytes(magic, dims, values, dim_fmt='q', stype=True):
    out = b''
    if magic is not None:
        out += struct.pack('<I', magic)
        if stype:
            out += struct.pack('<i', 0)
        out += struct.pack('<i', len(dims)) + struct.pack('<' + dim_fmt * len(dims), *dims)
    else:  # the oldest layout: uint32 ndim, uint32 dims
        out += struct.pack('<I', len(dims)) + struct.pack('<' + 'I' * len(dims), *dims)
    return out + struct.pack('<iii', 1, 0, 0) + np.asarray(values, '<f4').tobytes()


def _file(arrays, names=()):
    out = struct.pack('<QQQ', 0x112, 0, len(arrays)) + b''.join(arrays)
    out += struct.pack('<Q', len(names))
    for name in names:
        out += struct.pack('<Q', len(name)) + name.encode()
    return out


@pytest.mark.parametrize('magic,stype', [(mxparams.V1_MAGIC, False), (None, False),
                                         (mxparams.V3_MAGIC, True)])
def test_older_and_numpy_shape_layouts_read(magic, stype):
    values = np.arange(6, dtype=np.float32).reshape(2, 3)
    data = _file([_array_bytes(magic, (2, 3), values, stype=stype)], ['w'])
    got = mxparams.read_params_bytes(data)
    np.testing.assert_array_equal(got['w'], values)


def test_none_array_reads_as_none_and_keeps_the_place():
    none = struct.pack('<Iii', mxparams.V2_MAGIC, 0, 0)  # ndim 0: nothing follows
    data = _file([none, _array_bytes(mxparams.V2_MAGIC, (2,), [1, 2])], ['a', 'b'])
    got = mxparams.read_params_bytes(data)
    assert got['a'] is None and got['b'].tolist() == [1, 2]


@pytest.mark.parametrize('damage,message', [
    (lambda d: d[:-9], 'is truncated'),
    (lambda d: d + b'\0', 'bytes after its last name'),
    (lambda d: b'PK\x03\x04' + d[4:], 'is not an MXNet .params file'),
    (lambda d: d[:28] + struct.pack('<i', 1) + d[32:], 'sparse (row_sparse)'),
    (lambda d: d[:24] + struct.pack('<I', 0xDEADBEEF) + d[28:], 'no NDArray magic'),
])
def test_damaged_files_are_one_line_naming_the_file(tmp_path, damage, message):
    with open(_fixture('dtypes.params'), 'rb') as f:
        data = damage(f.read())
    path = tmp_path / 'bad.params'
    path.write_bytes(data)
    with pytest.raises(ParamsFormatError) as err:
        mxparams.read_params(str(path))
    assert message in str(err.value) and str(path) in str(err.value)
    assert '\n' not in str(err.value)


def test_unsupported_type_flag_names_it():
    data = _file([_array_bytes(mxparams.V2_MAGIC, (1,), [0])], ['x'])
    data = data.replace(struct.pack('<iii', 1, 0, 0), struct.pack('<iii', 1, 0, 12))
    with pytest.raises(ParamsFormatError, match='type flag 12 .bfloat16.'):
        mxparams.read_params_bytes(data, 'x.params')


@pytest.mark.parametrize('value,message', [(np.float32(1), '0-d array'),
                                           (np.zeros((0, 2), 'f4'), 'empty array'),
                                           (np.zeros(2, 'complex64'), 'complex64')])
def test_writer_refuses_what_mx_nd_load_cannot_read(tmp_path, value, message):
    path = tmp_path / 'w.params'
    with pytest.raises(ParamsFormatError, match=message):
        mxparams.write_params(str(path), {'x': value})
    assert not path.exists()


def test_missing_file():
    with pytest.raises(FileNotFoundError):
        mxparams.read_params(os.path.join(FIXTURES, 'absent.params'))


# ------------------------------------------------------------------ live, where mxnet is
@needs_mxnet
def test_live_mx_nd_load_reads_the_writer_and_mx_nd_save_the_reader(tmp_path):
    import mxnet as mx  # pylint: disable=import-outside-toplevel
    arrays = dict(tiny_arrays(), flag=np.array([True, False, True]),
                  big=np.random.RandomState(3).normal(size=(64, 33, 3, 3)).astype(np.float32))
    path = str(tmp_path / 'ours.params')
    mxparams.write_params(path, arrays)
    loaded = mx.nd.load(path)
    _assert_same({k: v.asnumpy() for k, v in loaded.items()}, arrays)
    theirs = str(tmp_path / 'theirs.params')
    mx.nd.save(theirs, {k: mx.nd.array(v, dtype=v.dtype) for k, v in arrays.items()})
    _assert_same(mxparams.read_params(theirs), arrays)
    with open(theirs, 'rb') as f:
        assert f.read() == _params_bytes(arrays)
