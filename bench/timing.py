"""The in-process timer the op benches share (``ops_bench.py``, ``frcnn_bench.py``,
``compiled_ops.py``)."""
import statistics
import time


def median_seconds(fn, repeats):
    """Median wall seconds of ``fn()`` over ``repeats`` calls."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)
