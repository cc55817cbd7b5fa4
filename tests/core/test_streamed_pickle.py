"""gluontrain.core.streamed_pickle: the same file as pickling the finished bytes, without
holding them."""
import io
import pickle
import subprocess
import sys

import pytest

from gluontrain.core.streamed_pickle import StreamedBlob, dump


def _chunks(size, chunk=1 << 16):
    def write(f):
        for start in range(0, size, chunk):
            n = min(chunk, size - start)
            f.write(bytes([start // chunk % 251]) * n)
    return write


@pytest.mark.parametrize('size', [0, 1000, 64 * 1024, 300_001])
def test_file_is_byte_for_byte_what_pickling_the_bytes_writes(size):
    blob = StreamedBlob(_chunks(size))
    assert blob.size == size
    value = blob.to_bytes()
    payload = {'version': 1, 'params': blob, 'trainer': b'small', 'rng': [1, 2.5, None]}
    out = io.BytesIO()
    dump(payload, out)
    want = pickle.dumps(dict(payload, params=value), protocol=5)
    assert out.getvalue() == want
    assert pickle.loads(out.getvalue())['params'] == value
    assert isinstance(payload['params'], StreamedBlob)  # the caller's dict is left alone


def test_a_blob_that_writes_other_than_it_announced_is_refused():
    blob = StreamedBlob(_chunks(200_000), size=100_000)
    with pytest.raises(RuntimeError, match='wrote 200000 bytes after announcing 100000'):
        dump({'params': blob}, io.BytesIO())


@pytest.mark.skipif(not sys.platform.startswith('linux'),
                    reason='reads and resets the peak memory through /proc/self (Linux)')
def test_peak_memory_stays_flat_where_the_bytes_would_cost_their_size(tmp_path):
    """Streaming 128 MiB in 1 MiB chunks raises the process's peak memory by a few MiB;
    building the bytes first raises it by tens of MiB."""
    code = '''
import sys
from gluontrain.core.streamed_pickle import StreamedBlob, dump
size, chunk = 128 << 20, 1 << 20
def write(f):
    for _ in range(size // chunk):
        f.write(b'x' * chunk)
def status(key):
    with open('/proc/self/status') as f:
        return next(int(line.split()[1]) for line in f if line.startswith(key))
with open('/proc/self/clear_refs', 'w') as f:
    f.write('5')  # the peak (VmHWM) starts again from the memory in use now
before = status('VmRSS')
blob = StreamedBlob(write, size=size)
with open(sys.argv[1], 'wb') as f:
    if sys.argv[2] == 'streamed':
        dump({'params': blob}, f)
    else:
        dump({'params': blob.to_bytes()}, f)
print((status('VmHWM') - before) // 1024)
'''
    grown = {}
    for how in ('streamed', 'bytes'):
        out = subprocess.run([sys.executable, '-c', code, str(tmp_path / how), how],
                             capture_output=True, text=True, check=True)
        grown[how] = int(out.stdout)
    assert grown['streamed'] < 16, grown
    assert grown['bytes'] >= 64, grown
    assert (tmp_path / 'streamed').read_bytes() == (tmp_path / 'bytes').read_bytes()
