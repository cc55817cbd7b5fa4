"""MXNet RecordIO (``.rec`` + ``.idx``) read and written without MXNet, byte for byte as
``mx.recordio`` does; the datasets over it are in :mod:`gluontrain.data.custom_detection`.
The framing, ``IRHeader`` and GluonCV's detection label (:func:`detection_label`):
docs/datasets.md, "GluonCV's ``.lst`` and RecordIO (``.rec`` + ``.idx``)" ("Layout"); a part
flag (``cflag``) is 1 first, 2 middle, 3 last, the reader joining the parts with the magic
word."""
import collections
import numbers
import os
import struct

import numpy as np

from .checks import DatasetError

__all__ = ['MAGIC', 'IRHeader', 'read_idx', 'IndexedRecordReader', 'iter_records',
           'IndexedRecordWriter', 'write_index', 'pack', 'unpack', 'pack_img',
           'detection_label', 'lst_line']

MAGIC = 0xced7230a
_MAGIC_BYTES = struct.pack('<I', MAGIC)
_LEN_MASK = (1 << 29) - 1
IRHeader = collections.namedtuple('IRHeader', ['flag', 'label', 'id', 'id2'])
IR_FORMAT = '<IfQQ'  # MXNet packs 'IfQQ' natively: the same 24 bytes on little-endian hosts
IR_SIZE = struct.calcsize(IR_FORMAT)
REWRITE = "rewrite the .rec and .idx with MXNet's tools/im2rec.py or IndexedRecordWriter"
_REINDEX = ("rebuild the index with gluontrain.data.recordio.write_index({!r}), or "
            + REWRITE)


# ---------------------------------------------------------------------------- RecordIO files
def read_idx(path):
    """The ``.idx`` file at ``path`` as ``{key: byte offset}`` in file order, keys as ``int``
    (``MXIndexedRecordIO``'s ``key_type``).

    Parameters
    ----------
    path : str

    Returns
    -------
    dict

    Raises
    ------
    DatasetError
        A line that is not ``key<TAB>offset`` in integers, or a key listed twice (MXNet
        would read the later record for both).
    """
    index, lines = {}, {}
    with open(path) as f:
        for lineno, line in enumerate(f, 1):
            fields = line.strip().split('\t')
            if fields == ['']:
                continue
            try:
                key, offset = int(fields[0]), int(fields[1])
            except (ValueError, IndexError):
                raise DatasetError('{} line {} is {!r}, not key<TAB>byte offset: {}.'.format(
                    path, lineno, line.strip()[:60], _REINDEX.format(
                        os.path.splitext(path)[0] + '.rec'))) from None
            if key in index:
                raise DatasetError(
                    '{} lists key {} on lines {} and {}: keys must be unique (MXNet would '
                    'read the record of line {} for both); number the .lst\'s first column '
                    'uniquely and {}.'.format(path, key, lines[key], lineno, lineno, REWRITE))
            index[key], lines[key] = offset, lineno
    return index


def _read_record(f, offset, where, size, rec_path, limit=None):
    """The record at ``offset`` of the open binary file ``f`` (``size`` bytes long); with
    ``limit``, only its first ``limit`` bytes when its first part holds them."""
    pos, parts, first = offset, [], True
    while True:
        f.seek(pos)
        head = f.read(8)
        if len(head) < 8:
            raise DatasetError('{}: the file ends at byte {} inside the record header (the '
                               'file is cut short); {}.'.format(where, size, REWRITE))
        magic, lrec = struct.unpack('<II', head)
        cflag, length = lrec >> 29, lrec & _LEN_MASK
        if magic != MAGIC:
            raise DatasetError('{}: byte {} holds 0x{:08x}, not the RecordIO magic number '
                               '0x{:08x} (the .idx does not belong to this .rec, or the file '
                               'is corrupted); {}.'.format(where, pos, magic, MAGIC,
                                                           _REINDEX.format(rec_path)))
        if cflag not in ((0, 1) if first else (2, 3)):
            raise DatasetError('{}: the record header at byte {} has part flag {} where {} '
                               'was expected (a broken file); {}.'.format(
                                   where, pos, cflag, '0 or 1' if first else '2 or 3', REWRITE))
        end = pos + 8 + ((length + 3) & ~3)
        if end > size:
            raise DatasetError('{}: the record needs bytes up to {} but the file ends at {} '
                               '(cut short); {}.'.format(where, end, size, REWRITE))
        if limit is not None and first and cflag == 0 and length >= limit:
            return f.read(limit)
        parts.append(f.read(length))
        if cflag in (0, 3):
            return _MAGIC_BYTES.join(parts)
        pos, first = end, False


def iter_records(rec_path):
    """``(offset, record bytes)`` of every record of ``rec_path`` in file order (what
    ``MXRecordIO(rec_path, 'r').read()`` returns one by one)."""
    size = os.path.getsize(rec_path)
    with open(rec_path, 'rb') as f:
        offset = 0
        while offset < size:
            record = _read_record(f, offset, '{} record at byte {}'.format(rec_path, offset),
                                  size, rec_path)
            yield offset, record
            offset = f.tell() + (-f.tell() % 4)


def write_index(rec_path, idx_path=None):
    """Write the ``.idx`` of ``rec_path`` from its records, each keyed by its IRHeader
    ``id`` (``tools/im2rec.py`` writes the ``.lst`` index as both).

    Parameters
    ----------
    rec_path : str
    idx_path : str, optional
        Default: ``rec_path`` with ``.idx`` for ``.rec``.

    Returns
    -------
    str
        The ``.idx`` path.
    """
    idx_path = idx_path or os.path.splitext(rec_path)[0] + '.idx'
    lines = ['{}\t{}\n'.format(unpack(record)[0].id, offset)
             for offset, record in iter_records(rec_path)]
    with open(idx_path, 'w') as f:
        f.writelines(lines)
    return idx_path


class IndexedRecordReader:
    """Random access to the records of a ``.rec`` by the keys of its ``.idx``
    (``mx.recordio.MXIndexedRecordIO(idx, rec, 'r')``).

    The file is opened on first read in each process, so a copy made by ``pickle`` or by a
    forked DataLoader worker reads through its own handle.

    Parameters
    ----------
    rec_path : str
    idx_path : str, optional
        Default: ``rec_path`` with ``.idx`` for ``.rec`` (what GluonCV looks for).

    Attributes
    ----------
    keys : list of int
        The keys in ``.idx`` order.
    index : dict
        ``{key: byte offset}``.
    """

    def __init__(self, rec_path, idx_path=None):
        self.rec_path = rec_path
        self.idx_path = idx_path or os.path.splitext(rec_path)[0] + '.idx'
        if not os.path.isfile(rec_path):
            raise DatasetError('RecordIO file {} does not exist: pass the .rec path (its .idx '
                               'beside it), or write both with MXNet\'s tools/im2rec.py.'.format(
                                   rec_path))
        if not os.path.isfile(self.idx_path):
            raise DatasetError('RecordIO file {} has no index {} beside it (GluonCV needs '
                               'both): {}.'.format(rec_path, self.idx_path,
                                                   _REINDEX.format(rec_path)))
        self.index = read_idx(self.idx_path)
        self.keys = list(self.index)
        self.size = os.path.getsize(rec_path)
        for key, offset in self.index.items():
            if not 0 <= offset < self.size:
                raise DatasetError('{} points key {} at byte {}, past the end of {} ({} bytes): '
                                   'the .rec is cut short or the .idx belongs to another file; '
                                   '{}.'.format(self.idx_path, key, offset, rec_path,
                                                self.size, _REINDEX.format(rec_path)))
        self._file, self._pid = None, None

    def __len__(self):
        return len(self.keys)

    def where(self, key):
        """``'<rec> record <key> (byte <offset>)'``, for messages."""
        return '{} record {} (byte {})'.format(self.rec_path, key, self.index[key])

    def read(self, key, limit=None):
        """The bytes of the record ``key`` (with ``limit``: at most its first ``limit``
        bytes, enough for its header).

        Raises
        ------
        DatasetError
            Bad magic or part header, or a record cut short by the end of the file.
        """
        if self._file is None or self._pid != os.getpid():
            self._file, self._pid = open(self.rec_path, 'rb', buffering=0), os.getpid()
        return _read_record(self._file, self.index[key], self.where(key), self.size,
                            self.rec_path, limit)

    def close(self):
        """Close this process's handle (reopened by the next read)."""
        if self._file is not None and self._pid == os.getpid():
            self._file.close()
        self._file = None

    def __getstate__(self):
        state = dict(self.__dict__)
        state['_file'] = state['_pid'] = None
        return state


class IndexedRecordWriter:
    """Writes a ``.rec`` and its ``.idx`` byte for byte as
    ``mx.recordio.MXIndexedRecordIO(idx, rec, 'w')`` does.

    Parameters
    ----------
    rec_path : str
    idx_path : str, optional
        Default: ``rec_path`` with ``.idx`` for ``.rec``.
    """

    def __init__(self, rec_path, idx_path=None):
        self.idx_path = idx_path or os.path.splitext(rec_path)[0] + '.idx'
        self._rec, self._idx = open(rec_path, 'wb'), open(self.idx_path, 'w')

    def write_idx(self, key, buf):
        """Append the record ``buf`` (bytes) under ``key``."""
        buf = bytes(buf)
        if len(buf) > _LEN_MASK:
            raise ValueError('RecordIO holds records below 2**29 bytes; this one has {} '
                             '(split it)'.format(len(buf)))
        pos = self._rec.tell()
        self._idx.write('{}\t{}\n'.format(int(key), pos))
        start, i = 0, buf.find(_MAGIC_BYTES)
        # dmlc-core: a magic word at a 4-byte boundary of the data ends a part
        while i >= 0:
            if i % 4 == 0:
                flag = 1 if start == 0 else 2
                self._rec.write(struct.pack('<II', MAGIC, (flag << 29) | (i - start)))
                self._rec.write(buf[start:i])
                start = i + 4
            i = buf.find(_MAGIC_BYTES, i + 1)
        self._rec.write(struct.pack('<II', MAGIC, ((3 if start else 0) << 29) |
                                    (len(buf) - start)))
        self._rec.write(buf[start:] + b'\0' * (-len(buf) % 4))

    def close(self):
        """Close both files."""
        self._rec.close()
        self._idx.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# ----------------------------------------------------------------------------- MXNet records
def pack(header, s):
    """``mx.recordio.pack``: the IRHeader, a float32 label array when ``header.label`` is
    not a number (its length in ``flag``), then the bytes ``s``."""
    header = IRHeader(*header)
    if isinstance(header.label, numbers.Number):
        header = header._replace(flag=0)
    else:
        label = np.asarray(header.label, dtype='<f4')
        header = header._replace(flag=label.size, label=0)
        s = label.tobytes() + bytes(s)
    return struct.pack(IR_FORMAT, *header) + bytes(s)


def unpack(s, where='record'):
    """``mx.recordio.unpack``: ``(IRHeader, payload bytes)``; the label is a float, or a
    read-only float32 array of ``flag`` values when ``flag > 0``.

    Raises
    ------
    DatasetError
        A record shorter than its header or its label (``where`` names it).
    """
    if len(s) < IR_SIZE:
        raise DatasetError('{} has {} bytes, fewer than the {}-byte IRHeader: it is not an '
                           'MXNet image record; {}.'.format(where, len(s), IR_SIZE, REWRITE))
    header = IRHeader(*struct.unpack(IR_FORMAT, s[:IR_SIZE]))
    s = s[IR_SIZE:]
    if header.flag > 0:
        if len(s) < 4 * header.flag:
            raise DatasetError('{}: its IRHeader announces {} label values but only {} bytes '
                               'follow (a broken header); {}.'.format(
                                   where, header.flag, len(s), REWRITE))
        header = header._replace(label=np.frombuffer(s, np.float32, header.flag))
        s = s[header.flag * 4:]
    return header, s


def pack_img(header, img, quality=95, img_fmt='.jpg'):
    """``mx.recordio.pack_img``: ``img`` (BGR, as OpenCV holds it) encoded with ``cv2`` and
    packed; ``quality`` is the JPEG quality or the PNG compression level."""
    import cv2  # pylint: disable=import-outside-toplevel
    params = {'.JPG': [cv2.IMWRITE_JPEG_QUALITY, quality],
              '.JPEG': [cv2.IMWRITE_JPEG_QUALITY, quality],
              '.PNG': [cv2.IMWRITE_PNG_COMPRESSION, quality]}.get(img_fmt.upper())
    ok, buf = cv2.imencode(img_fmt, img, params)
    if not ok:
        raise ValueError('OpenCV could not encode the image as {}'.format(img_fmt))
    return pack(header, buf.tobytes())


def detection_label(boxes, ids, width=None, height=None, extra=None, header=()):
    """GluonCV's flat detection label ``[A, B, *header, cls, xmin, ymin, xmax, ymax(,
    *extra)...]`` (the ``write_line`` of GluonCV's "Prepare custom datasets" tutorial).

    Parameters
    ----------
    boxes : array_like, ``[N, 4]``
        Pixel boxes ``xmin, ymin, xmax, ymax``; divided by ``width`` / ``height`` when given
        (normalised, GluonCV's default ``coord_normalized=True``).
    ids : array_like, ``[N]``
        Class ids.
    width, height : number, optional
    extra : array_like, ``[N, E]``, optional
        More values per object, e.g. a ``difficult`` column.
    header : sequence of float
        Extra header values (the tutorial writes the image width and height).

    Returns
    -------
    list of float
    """
    boxes = np.asarray(boxes, dtype=np.float64).reshape(-1, 4).copy()
    if width is not None:
        boxes[:, (0, 2)] /= float(width)
        boxes[:, (1, 3)] /= float(height)
    cols = [np.asarray(ids, dtype=np.float64).reshape(-1, 1), boxes]
    if extra is not None:
        cols.append(np.asarray(extra, dtype=np.float64).reshape(len(boxes), -1))
    objects = np.hstack(cols)
    return [float(2 + len(header)), float(objects.shape[1])] + [float(v) for v in header] + \
        objects.ravel().tolist()


def lst_line(index, label, path):
    """One ``.lst`` line: ``index<TAB>label values...<TAB>path`` with a newline."""
    return '\t'.join([str(int(index))] + [repr(float(v)) for v in label] + [path]) + '\n'
