"""Timing helper shared by the benchmarks (run them as scripts: ``python benchmarks/bench_<name>.py``)."""
import time


def interleaved(fns, repeat, calls=1):
    """The smallest wall time of each of ``fns`` over ``repeat`` rounds, calling them in turn (so that a
    baseline and the timed code see the same machine load), ``calls`` times in a row each round (as the
    steps of a run call a right-hand side: the later calls find their data in cache); one warm-up call each."""
    for fn in fns:
        fn()
    times = [float("inf")] * len(fns)
    for _ in range(repeat):
        for k, fn in enumerate(fns):
            for _ in range(calls):
                t0 = time.perf_counter()
                fn()
                times[k] = min(times[k], time.perf_counter() - t0)
    return times


def best(fn, repeat=3):
    """The smallest wall time of ``repeat`` calls of ``fn()`` (seconds)."""
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)
