"""Pickle a dict whose large ``bytes`` values are written into the file as they are produced
(the checkpoint's weights and optimizer state: docs/recipes.md, "Checkpoints"). A
:class:`StreamedBlob` says how many bytes it will write and writes them when the pickler
reaches it: the file is byte for byte what pickling the finished ``bytes`` writes
(:func:`dump` checks the count), and a reader needs nothing new.

How: pickle (protocol 5) hands a buffer of 64 KiB or more to the file's ``write`` as the very
object it was given, after the header that carries its length. Each blob stands in the dict
as a read-only anonymous memory map of its size (nothing of it is ever touched, so it costs
no memory), and the file wrapper recognises the map and lets the blob write in its place."""
import io
import mmap
import pickle

from .signals import sigint_held

__all__ = ['StreamedBlob', 'dump']

# pickle writes buffers from this size on with one direct write() call (its frame target);
# smaller ones it copies into its frame, so those are produced in memory first
_DIRECT_WRITE_BYTES = 64 * 1024


class _ByteCounter:
    """A write-only file that counts what it is given."""

    def __init__(self):
        self.count = 0

    def write(self, data):  # pylint: disable=missing-function-docstring
        size = memoryview(data).nbytes
        self.count += size
        return size

    def flush(self):
        """Nothing to flush (writers such as ``torch.save`` call it)."""


class StreamedBlob:
    """A ``bytes`` value of :func:`dump`'s dict that ``write(f)`` writes straight to the file.

    Parameters
    ----------
    write : callable
        ``write(f)`` writes the value's bytes with ``f.write`` (any number of calls); it must
        write the same bytes each time it is called.
    size : int, optional
        How many bytes ``write`` writes; by default ``write`` is first run into a counter
        (cheap when it writes views of memory that exists anyway).
    """

    def __init__(self, write, size=None):
        self.write = write
        if size is None:
            counter = _ByteCounter()
            with sigint_held():  # write may be torch.save's C++ writer
                write(counter)
            size = counter.count
        self.size = int(size)

    def to_bytes(self):
        """The value as ``bytes`` (what a reader of the pickle gets)."""
        out = io.BytesIO()
        self.write(out)
        return out.getvalue()


class _SplicingFile:
    """Pass writes on to ``f``, except a stand-in buffer, which its blob writes instead."""

    def __init__(self, f, blobs):
        self.f = f
        self.blobs = blobs  # id(stand-in) -> StreamedBlob
        self.written = set()

    def write(self, data):  # pylint: disable=missing-function-docstring
        blob = self.blobs.get(id(data))
        if blob is None:
            return self.f.write(data)
        counter = _CountingFile(self.f)
        blob.write(counter)
        if counter.count != blob.size:
            raise RuntimeError('a streamed checkpoint value wrote {} bytes after announcing '
                               '{}'.format(counter.count, blob.size))
        self.written.add(id(data))
        return blob.size


class _CountingFile(_ByteCounter):
    """Write to ``f`` and count."""

    def __init__(self, f):
        super().__init__()
        self.f = f

    def write(self, data):  # pylint: disable=missing-function-docstring
        size = super().write(data)
        self.f.write(data)
        return size


def dump(payload, f):
    """``pickle.dump(payload, f, protocol=5)`` where ``payload``'s :class:`StreamedBlob` values
    are pickled as the ``bytes`` they write, written into ``f`` when pickle reaches them.

    Parameters
    ----------
    payload : dict
        Values of any picklable type; top-level :class:`StreamedBlob` values are streamed.
    f : file object
        Open for binary writing.

    Raises
    ------
    RuntimeError
        When a blob wrote another number of bytes than it announced, or pickle did not hand
        a stand-in to ``write`` (the file is then wrong: the caller's staged write must be
        discarded, as :func:`gluontrain.core.checkpoint.atomic_write` does on any error).
    """
    payload = dict(payload)
    blobs, maps = {}, []
    try:
        for key, value in payload.items():
            if not isinstance(value, StreamedBlob):
                continue
            if value.size < _DIRECT_WRITE_BYTES:
                payload[key] = value.to_bytes()
                continue
            stand_in = mmap.mmap(-1, value.size, access=mmap.ACCESS_READ)
            buffer = pickle.PickleBuffer(stand_in)
            maps.append((buffer, stand_in))
            blobs[id(buffer)] = value
            payload[key] = buffer
        splicer = _SplicingFile(f, blobs)
        pickle.dump(payload, splicer, protocol=5)
        if len(splicer.written) != len(blobs):
            raise RuntimeError('pickle wrote a streamed checkpoint value itself; the file is '
                               'not the checkpoint')
    finally:
        payload.clear()
        for buffer, stand_in in maps:
            buffer.release()
            stand_in.close()
