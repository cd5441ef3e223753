"""Timing helper shared by the benchmarks (run them as scripts: ``python benchmarks/bench_<name>.py``)."""
import time


def best(fn, repeat=3):
    """The smallest wall time of ``repeat`` calls of ``fn()`` (seconds)."""
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)
