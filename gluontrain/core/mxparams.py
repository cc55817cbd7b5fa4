"""MXNet's ``.params`` files (``mx.nd.save``, gluon's ``save_parameters``) in plain numpy.

The layout, as MXNet 1.x's ``NDArray::Save`` writes it (little-endian)::

    uint64 0x112                       list magic (kMXAPINDArrayListMagic)
    uint64 0                           reserved
    uint64 N                           arrays, each:
        uint32 0xF993FAC9              NDARRAY_V2_MAGIC (0xF993FACA: V3, numpy shape semantics)
        int32  storage type            0 = dense (row_sparse / csr are refused here)
        int32  ndim, int64 dim[ndim]   the shape
        int32  dev_type, int32 dev_id  where it was (1, 0 = cpu(0); ignored on reading)
        int32  type flag               0 float32, 1 float64, 2 float16, 3 uint8, 4 int32,
                                       5 int8, 6 int64, 7 bool
        bytes                          the values, C order
    uint64 M                           names (0 for ``nd.save`` of a list, else M == N):
        uint64 length, bytes           utf-8

Files of older MXNet versions start an array with ``NDARRAY_V1_MAGIC`` (0xF993FAC8: no
storage type) or with no magic at all (the first uint32 is ``ndim`` and the dimensions are
uint32); both are read. A V2 array of ``ndim == 0`` is "none" (MXNet writes nothing after
its shape), a V3 array of ``ndim == -1`` likewise.

:func:`read_params` / :func:`write_params` are what ``mx.nd.load`` / ``mx.nd.save`` do for
files of dense arrays, without MXNet: they let a model written by GluonCV move to another
framework and back. Every failure is one :class:`ParamsFormatError` line naming the file.
"""
import collections
import os
import struct

import numpy as np

from .checkpoint import atomic_write

__all__ = ['ParamsFormatError', 'read_params', 'read_params_bytes', 'write_params',
           'write_params_to', 'params_size', 'LIST_MAGIC', 'V1_MAGIC',
           'V2_MAGIC', 'V3_MAGIC', 'TYPE_FLAGS']

LIST_MAGIC = 0x112
V1_MAGIC = 0xF993FAC8
V2_MAGIC = 0xF993FAC9
V3_MAGIC = 0xF993FACA
#: MXNet's ``type_flag`` -> numpy dtype (mshadow's enum)
TYPE_FLAGS = {0: np.dtype('<f4'), 1: np.dtype('<f8'), 2: np.dtype('<f2'), 3: np.dtype('u1'),
              4: np.dtype('<i4'), 5: np.dtype('i1'), 6: np.dtype('<i8'), 7: np.dtype('?')}
_FLAG_OF = {dt: flag for flag, dt in TYPE_FLAGS.items()}
_OTHER_FLAGS = {8: 'int16', 9: 'uint16', 10: 'uint32', 11: 'uint64', 12: 'bfloat16'}
_STYPES = {1: 'row_sparse', 2: 'csr'}
_CPU = 1


class ParamsFormatError(ValueError):
    """A file that is not (or not entirely) an MXNet ``.params`` file: one line, naming it."""


class _Reader:
    """Sequential little-endian reads of a byte buffer; a short read raises with the offset."""

    def __init__(self, data, source):
        self.data, self.pos, self.source = memoryview(data), 0, source

    def take(self, size, what):
        if size < 0 or self.pos + size > len(self.data):
            raise ParamsFormatError(
                '{} is truncated: it ends at byte {} while reading {} ({} bytes needed); '
                'copy or save it again'.format(self.source, len(self.data), what, size))
        out = self.data[self.pos:self.pos + size]
        self.pos += size
        return out

    def unpack(self, fmt, what):
        return struct.unpack('<' + fmt, self.take(struct.calcsize('<' + fmt), what))


def _read_shape(reader, dim_fmt, what):
    ndim, = reader.unpack('i', what + ' ndim')
    if ndim <= 0:
        return ndim, ()
    if ndim > 32:
        raise ParamsFormatError('{}: {} has {} dimensions; the file is corrupt'.format(
            reader.source, what, ndim))
    dims = reader.unpack(dim_fmt * ndim, what + ' shape')
    if any(d < 0 for d in dims):
        raise ParamsFormatError('{}: {} has the shape {}; the file is corrupt'.format(
            reader.source, what, dims))
    return ndim, tuple(int(d) for d in dims)


def _read_values(reader, shape, what, copy=True):
    flag, = reader.unpack('i', what + ' dtype')
    if flag not in TYPE_FLAGS:
        raise ParamsFormatError('{}: {} has MXNet type flag {} ({}), which numpy cannot hold '
                                'here; save it as float32'.format(
                                    reader.source, what, flag,
                                    _OTHER_FLAGS.get(flag, 'unknown: the file is corrupt')))
    dtype = TYPE_FLAGS[flag]
    count = int(np.prod(shape, dtype=np.int64))
    raw = reader.take(count * dtype.itemsize, what + ' values')
    values = np.frombuffer(raw, dtype=dtype, count=count).reshape(shape)
    # a copy: the arrays outlive the buffer and must be writable (views only to check a file)
    return values.copy() if copy else values


def _read_array(reader, index, copy=True):
    what = 'array {}'.format(index)
    magic, = reader.unpack('I', what + ' magic')
    if magic in (V2_MAGIC, V3_MAGIC):
        stype, = reader.unpack('i', what + ' storage type')
        if stype != 0:
            raise ParamsFormatError('{}: {} is a sparse ({}) array; only dense arrays are read '
                                    'here: save it with .tostype("default")'.format(
                                        reader.source, what, _STYPES.get(stype, stype)))
        ndim, shape = _read_shape(reader, 'q', what)
        if (magic == V2_MAGIC and ndim == 0) or ndim < 0:
            return None  # MXNet's "none" array: nothing follows its shape
    elif magic == V1_MAGIC:
        ndim, shape = _read_shape(reader, 'q', what)
        if ndim == 0:
            return None
    else:
        # the oldest layout: no magic, the uint32 read is ndim, then uint32 dimensions
        if magic > 32:
            raise ParamsFormatError('{}: {} starts with 0x{:08X}, no NDArray magic; the file is '
                                    'corrupt or not MXNet\'s'.format(reader.source, what, magic))
        if magic == 0:
            return None
        shape = tuple(int(d) for d in reader.unpack('I' * magic, what + ' shape'))
    reader.unpack('ii', what + ' context')
    return _read_values(reader, shape, what, copy)


def read_params_bytes(data, source='<bytes>', copy=True):
    """The arrays of an MXNet ``.params`` file's bytes.

    Parameters
    ----------
    data : bytes-like
    source : str
        Named in errors.
    copy : bool
        ``False``: read-only views of ``data`` (to check a file's structure before another
        reader, e.g. MXNet's, which allocates what a corrupt header claims, sees it).

    Returns
    -------
    dict or list
        ``{name: numpy.ndarray}`` in file order (``save_parameters``, ``nd.save`` of a dict),
        or a list for an ``nd.save`` of a list. An array MXNet saved as "none" is ``None``.

    Raises
    ------
    ParamsFormatError
        No list magic, truncated, sparse or unsupported dtypes, trailing bytes, names that do
        not match the arrays.
    """
    reader = _Reader(data, source)
    if len(data) < 16 or struct.unpack_from('<Q', data)[0] != LIST_MAGIC:
        raise ParamsFormatError('{} is not an MXNet .params file (it starts with {!r}, not '
                                "MXNet's NDArray list magic 0x112)".format(
                                    source, bytes(data[:8])))
    reader.unpack('QQ', 'header')
    count, = reader.unpack('Q', 'the number of arrays')
    if count > len(data):
        raise ParamsFormatError('{} claims {} arrays in {} bytes; the file is corrupt'.format(
            source, count, len(data)))
    arrays = [_read_array(reader, i, copy) for i in range(count)]
    num_names, = reader.unpack('Q', 'the number of names')
    if num_names not in (0, count):
        raise ParamsFormatError('{} has {} arrays but {} names; the file is corrupt'.format(
            source, count, num_names))
    names = []
    for i in range(num_names):
        size, = reader.unpack('Q', 'name {} length'.format(i))
        raw = bytes(reader.take(size, 'name {}'.format(i)))
        try:
            names.append(raw.decode('utf-8'))
        except UnicodeDecodeError:
            raise ParamsFormatError('{}: name {} is not utf-8 ({!r}); the file is corrupt'
                                    .format(source, i, raw[:40])) from None
    if reader.pos != len(data):
        raise ParamsFormatError('{} has {} bytes after its last name; the file is corrupt or '
                                'two files were joined'.format(source, len(data) - reader.pos))
    if not num_names:
        return arrays
    if len(set(names)) != len(names):
        dup = sorted({n for n in names if names.count(n) > 1})
        raise ParamsFormatError('{} names {} twice; the file is corrupt'.format(source, dup[0]))
    return collections.OrderedDict(zip(names, arrays))


def read_params(path):
    """The arrays of the MXNet ``.params`` file ``path`` (what ``mx.nd.load`` returns, as numpy).

    Parameters
    ----------
    path : str

    Returns
    -------
    dict or list
        As :func:`read_params_bytes`.

    Raises
    ------
    FileNotFoundError
    ParamsFormatError
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError('{} does not exist'.format(path))
    with open(path, 'rb') as f:
        data = f.read()
    return read_params_bytes(data, path)


def _checked(name, value):
    """``value`` as the array ``.params`` stores, and its dtype flag; refuses what MXNet cannot
    load back."""
    arr = np.asarray(value)
    flag = _FLAG_OF.get(arr.dtype.newbyteorder('<'))
    if flag is None:
        raise ParamsFormatError('{}: {} arrays cannot be written to an MXNet .params file; '
                                'cast it to one of float32, float64, float16, uint8, int32, '
                                'int8, int64, bool'.format(name, arr.dtype))
    if arr.ndim == 0:
        # MXNet 1.x's legacy-shape loader reads a 0-d array as "none" and loses its place
        raise ParamsFormatError('{}: a 0-d array cannot be written to a .params file that '
                                'mx.nd.load reads; reshape it to (1,)'.format(name))
    if 0 in arr.shape:
        raise ParamsFormatError('{}: an empty array of shape {} cannot be written to a .params '
                                'file that mx.nd.load reads'.format(name, arr.shape))
    return np.ascontiguousarray(arr, dtype=TYPE_FLAGS[flag]), flag


def _write_array(out, name, value):
    arr, flag = _checked(name, value)
    out.write(struct.pack('<Iii', V2_MAGIC, 0, arr.ndim))
    out.write(struct.pack('<' + 'q' * arr.ndim, *arr.shape))
    out.write(struct.pack('<iii', _CPU, 0, flag))
    # the array's own memory, not a bytes copy of it
    out.write(memoryview(arr.reshape(-1)).cast('B'))


def _items(arrays):
    if isinstance(arrays, dict):
        return list(arrays.items()), True
    return [('array {}'.format(i), a) for i, a in enumerate(arrays)], False


def write_params_to(out, arrays):
    """Write what ``mx.nd.save`` writes for ``arrays`` to the binary file ``out``, one array
    at a time.

    Parameters
    ----------
    out : file object
    arrays : dict or list
        ``{name: array}`` (names kept in order, as ``save_parameters`` writes them) or a
        list; array-likes (numpy arrays, torch CPU tensors via ``numpy()``) of a supported
        dtype, at least one dimension, no zero-size dimension. A value may also be a callable
        without arguments returning the array, called when the array is written (so that
        only one is in memory).
    """
    items, named = _items(arrays)
    out.write(struct.pack('<QQQ', LIST_MAGIC, 0, len(items)))
    for name, value in items:
        _write_array(out, name, value() if callable(value) else value)
    out.write(struct.pack('<Q', len(items) if named else 0))
    if named:
        for name, _ in items:
            raw = str(name).encode('utf-8')
            out.write(struct.pack('<Q', len(raw)))
            out.write(raw)


def params_size(specs):
    """How many bytes :func:`write_params_to` writes for arrays of these shapes and dtypes.

    Parameters
    ----------
    specs : dict or list
        ``{name: (shape, dtype)}`` or a list of ``(shape, dtype)``, as :func:`write_params_to`'
        ``arrays`` (dtypes it accepts).

    Returns
    -------
    int
    """
    items, named = _items(specs)
    size = 24 + 8
    for name, (shape, dtype) in items:
        size += 12 + 8 * len(shape) + 12 + int(np.prod(shape)) * np.dtype(dtype).itemsize
        if named:
            size += 8 + len(str(name).encode('utf-8'))
    return size


def write_params(path, arrays):
    """Write ``arrays`` as an MXNet ``.params`` file (what ``mx.nd.save`` writes), atomically.

    Parameters
    ----------
    path : str
    arrays : dict or list
        As :func:`write_params_to`.

    Raises
    ------
    ParamsFormatError
        An array of a dtype, or a shape, that MXNet cannot load back; ``path`` is left as
        it was.
    """
    # written as checked, one array at a time: a refusal leaves the staged file removed and
    # ``path`` as it was
    atomic_write(os.fspath(path), lambda f: write_params_to(f, arrays))
