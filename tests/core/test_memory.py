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


def _trims(step_s, trim_s, batches=5, epochs=2):
    """When the hook trimmed (clock seconds) over a run of ``step_s`` steps, a trim taking
    ``trim_s``."""
    calls, now = [], [0.0]

    def step(batch, state):
        now[0] += step_s
        return {}

    def release():
        calls.append(round(now[0], 6))
        now[0] += trim_s
    run_loop(step, range(batches), [memory.ReleaseMemoryHook(
        max_fraction=0.01, release=release, clock=lambda: now[0])], 0, epochs)
    return calls


def test_hook_trims_after_every_step_that_costs_over_100_trims():
    # a 2 ms trim after 0.4 s steps: 1 % of 0.4 s is 4 ms, every step and every epoch's end
    assert len(_trims(0.4, 0.002)) == 5 * 2 + 2


def test_hook_spaces_trims_to_one_percent_of_the_run():
    # 2 ms trims after 50 ms steps: a trim waits 0.2 s for the next, i.e. every 4th or 5th step
    # (the clock's rounding decides the tie), and every epoch's end trims
    calls = _trims(0.05, 0.002, batches=20, epochs=1)
    steps = calls[:-1]
    gaps = [b - a for a, b in zip(steps, steps[1:])]
    assert len(steps) in (4, 5) and all(0.2 - 1e-9 <= gap - 0.002 <= 0.25 + 1e-9 for gap in gaps)
    assert calls[-1] == pytest.approx(20 * 0.05 + len(steps) * 0.002)
