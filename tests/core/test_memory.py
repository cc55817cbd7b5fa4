"""core.memory: malloc_trim gives a fragmented heap's free pages back; the hook calls it after
every step and every epoch."""
import os
import subprocess
import sys

import pytest

from gluontrain.core import memory
from gluontrain.core.loop import run_loop

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# 64 KiB blocks come from the heap (below glibc's 128 KiB mmap threshold); the 1000-byte block
# kept after each (above Python's 512-byte small-object limit, so also malloc's) pins the heap:
# freeing the big ones leaves resident holes, not a shorter heap
CHILD = r'''
from gluontrain.core.memory import release_free_memory
def anon():
    for line in open('/proc/self/status'):
        if line.startswith('RssAnon'):
            return int(line.split()[1]) // 1024
big, keep = [], []
for _ in range(1600):
    block = bytearray(65536)
    block[::4096] = b'x' * 16  # every page touched
    big.append(block)
    keep.append(bytearray(1000))
before = anon()
del big
freed = anon()
released = release_free_memory()
print(before, freed, anon(), released)
'''


@pytest.mark.skipif(not sys.platform.startswith('linux'), reason='glibc and /proc: Linux only')
def test_release_returns_the_holes_of_a_fragmented_heap():
    out = subprocess.run([sys.executable, '-c', CHILD], capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=ROOT), check=True).stdout.split()
    before, freed, after = map(int, out[:3])
    # 1600 x 64 KiB = 100 MiB freed but kept resident by the heap, until the trim
    assert freed > before - 10
    assert freed - after > 80
    assert out[3] == 'True'


def test_release_without_malloc_trim_does_nothing(monkeypatch):
    monkeypatch.setattr(memory, '_TRIM', [None])
    assert memory.release_free_memory() is None


def test_hook_releases_after_every_step_and_every_epoch():
    calls = []
    hook = memory.ReleaseMemoryHook(release=lambda: calls.append(1))
    state = run_loop(lambda batch, state: {}, range(3), [hook], 0, 2)
    assert state.iteration == 6
    assert len(calls) == 6 + 2
