"""The certified W1 bracket on S^2 at scale, as users call it (`mf.wasserstein(..., method="bracket")`).

    python benchmarks/bench_w1bracket.py [--quick]

n quasi points of a two-cap density against the density, n = 10^4, 10^5, 10^6 (--quick: up to 10^5),
one thread: wall time (target at 10^6: <= 60 s on one core), relative width (target <= 20%), and the time
in units of an exp floor (np.exp over 64·n numbers) measured in the same run.
"""
import os
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import meanfield as mf  # noqa: E402
from _timing import best  # noqa: E402


def main(quick=False):
    rho = mf.densities.mixture([mf.densities.von_mises_fisher([0, 0, 1.0], 3.0),
                                mf.densities.von_mises_fisher([1.0, 0, 0], 2.0)], [0.6, 0.4])
    print(f"{'n':>9} {'seconds':>8} {'lower':>10} {'upper':>10} {'width':>7} {'/ exp floor':>12}")
    for n in (10 ** 4, 10 ** 5) if quick else (10 ** 4, 10 ** 5, 10 ** 6):
        x, w = mf.sample(rho, n, 3, method="quasi")
        floor_input = np.random.default_rng(0).random(64 * n)
        floor = best(lambda: np.exp(floor_input), repeat=3)
        t0 = time.perf_counter()
        b = mf.wasserstein((x, w), rho, method="bracket")
        wall = time.perf_counter() - t0
        print(f"{n:>9} {wall:>8.1f} {b.lower:>10.3e} {b.upper:>10.3e} {b.width:>7.2%} {wall / floor:>12.0f}")


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
