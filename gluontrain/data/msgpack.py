"""A small MessagePack codec for seamseg's ``metadata.bin``.

seamseg writes and reads ``metadata.bin`` with ``umsgpack.dump(meta, fid)`` /
``umsgpack.unpack(fid)`` (u-msgpack-python's API). Neither ``umsgpack`` nor ``msgpack`` is in
gluontrain's stack, and what seamseg stores is plain data (dicts, lists, strings, ints,
floats), so this module implements the MessagePack specification
(https://github.com/msgpack/msgpack/blob/master/spec.md) for those types instead of adding a
dependency: every integer width, float32/64, str, bin, array and map are read; extension
types are refused with a clear error. Packing follows u-msgpack-python: the smallest integer
encoding, float64, UTF-8 ``str``, ``bytes`` as ``bin``, tuples as arrays.
"""
import struct

__all__ = ['packb', 'unpackb', 'dump', 'load', 'MsgpackError']


class MsgpackError(ValueError):
    """Malformed or unsupported MessagePack data."""


# (type byte, struct format) from the narrowest: unsigned for v >= 0, signed below
_INTS = (((0xcc, '>B'), (0xcd, '>H'), (0xce, '>I'), (0xcf, '>Q')),
         ((0xd0, '>b'), (0xd1, '>h'), (0xd2, '>i'), (0xd3, '>q')))


def _pack_int(v, out):
    if -32 <= v < 0x80:
        out.append(struct.pack('b' if v < 0 else 'B', v))
        return
    for code, fmt in _INTS[v < 0]:
        try:
            out.append(struct.pack('B', code) + struct.pack(fmt, v))
            return
        except struct.error:  # does not fit: the next wider format
            continue
    raise MsgpackError('integer {} does not fit in 64 bits'.format(v))


def _pack_len(n, fix_base, fix_max, codes, out):
    if fix_base is not None and n <= fix_max:
        out.append(struct.pack('B', fix_base | n))
        return
    for code, fmt, hi in codes:
        if n <= hi:
            out.append(struct.pack('B', code) + struct.pack(fmt, n))
            return
    raise MsgpackError('object of length {} is too long for MessagePack'.format(n))


def _pack(obj, out):
    if obj is None:
        out.append(b'\xc0')
    elif obj is True or obj is False:
        out.append(b'\xc3' if obj else b'\xc2')
    elif isinstance(obj, int) or type(obj).__name__.startswith(('int', 'uint')):
        _pack_int(int(obj), out)
    elif isinstance(obj, float) or type(obj).__name__.startswith('float'):
        out.append(b'\xcb' + struct.pack('>d', float(obj)))
    elif isinstance(obj, str):
        data = obj.encode('utf-8')
        _pack_len(len(data), 0xa0, 31, ((0xd9, '>B', 0xff), (0xda, '>H', 0xffff),
                                        (0xdb, '>I', 0xffffffff)), out)
        out.append(data)
    elif isinstance(obj, (bytes, bytearray)):
        _pack_len(len(obj), None, -1, ((0xc4, '>B', 0xff), (0xc5, '>H', 0xffff),
                                       (0xc6, '>I', 0xffffffff)), out)
        out.append(bytes(obj))
    elif isinstance(obj, (list, tuple)):
        _pack_len(len(obj), 0x90, 15, ((0xdc, '>H', 0xffff), (0xdd, '>I', 0xffffffff)), out)
        for item in obj:
            _pack(item, out)
    elif isinstance(obj, dict):
        _pack_len(len(obj), 0x80, 15, ((0xde, '>H', 0xffff), (0xdf, '>I', 0xffffffff)), out)
        for k, v in obj.items():
            _pack(k, out)
            _pack(v, out)
    else:
        raise MsgpackError('cannot pack {} objects'.format(type(obj).__name__))


def packb(obj):
    """Serialise ``obj`` (None, bool, int, float, str, bytes, list/tuple, dict).

    Parameters
    ----------
    obj : object

    Returns
    -------
    bytes
    """
    out = []
    _pack(obj, out)
    return b''.join(out)


class _Reader:
    def __init__(self, data):
        self.data, self.pos = data, 0

    def take(self, n):
        if self.pos + n > len(self.data):
            raise MsgpackError('truncated MessagePack data at byte {}'.format(self.pos))
        chunk = self.data[self.pos:self.pos + n]
        self.pos += n
        return chunk

    def unpack(self, fmt):
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]


_FIXED = {0xcc: '>B', 0xcd: '>H', 0xce: '>I', 0xcf: '>Q', 0xd0: '>b', 0xd1: '>h', 0xd2: '>i',
          0xd3: '>q', 0xca: '>f', 0xcb: '>d'}
_STR = {0xd9: '>B', 0xda: '>H', 0xdb: '>I'}
_BIN = {0xc4: '>B', 0xc5: '>H', 0xc6: '>I'}
_ARR = {0xdc: '>H', 0xdd: '>I'}
_MAP = {0xde: '>H', 0xdf: '>I'}


def _read(r):
    b = r.unpack('B')
    if b <= 0x7f:
        return b
    if b >= 0xe0:
        return b - 0x100
    if 0xa0 <= b <= 0xbf:
        return _text(r, b & 0x1f)
    if 0x90 <= b <= 0x9f:
        return [_read(r) for _ in range(b & 0x0f)]
    if 0x80 <= b <= 0x8f:
        return _map(r, b & 0x0f)
    if b == 0xc0:
        return None
    if b in (0xc2, 0xc3):
        return b == 0xc3
    if b in _FIXED:
        return r.unpack(_FIXED[b])
    if b in _STR:
        return _text(r, r.unpack(_STR[b]))
    if b in _BIN:
        return bytes(r.take(r.unpack(_BIN[b])))
    if b in _ARR:
        return [_read(r) for _ in range(r.unpack(_ARR[b]))]
    if b in _MAP:
        return _map(r, r.unpack(_MAP[b]))
    raise MsgpackError('unsupported MessagePack type byte 0x{:02x} at byte {} (extension types '
                       'are not used by seamseg metadata)'.format(b, r.pos - 1))


def _text(r, n):
    try:
        return bytes(r.take(n)).decode('utf-8')
    except UnicodeDecodeError as exc:
        raise MsgpackError('invalid UTF-8 string in MessagePack data: {}'.format(exc)) from None


def _map(r, n):
    out = {}
    for _ in range(n):
        k = _read(r)
        if isinstance(k, list):
            k = tuple(k)
        out[k] = _read(r)
    return out


def unpackb(data):
    """Deserialise one object; trailing bytes are an error.

    Parameters
    ----------
    data : bytes

    Returns
    -------
    object

    Raises
    ------
    MsgpackError
    """
    r = _Reader(memoryview(data))
    obj = _read(r)
    if r.pos != len(data):
        raise MsgpackError('{} bytes of trailing data after the MessagePack object'.format(
            len(data) - r.pos))
    return obj


def dump(obj, fp):
    """Write ``packb(obj)`` to the binary file ``fp``."""
    fp.write(packb(obj))


def load(fp):
    """Read one object from the binary file ``fp``."""
    return unpackb(fp.read())
