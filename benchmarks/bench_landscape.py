"""meanfield.landscape: the cost of the census, of the certification and of the branch-and-bound
(docs/landscape.md; targets of issue 44: the census for n <= 8 over 100 values of β in under a minute,
n = 12 in under ten minutes, on one core).

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_landscape.py [--quick]

* census: `meanfield.experiments.landscape.census_over_beta` (continuation on the grid, 4 random
  starts per β, no certification) for n = 3..8 on 100 values of β in [−6, 2], and n = 12;
* certification: the Krawczyk test and the interval eigenvalue signs of every point of the census
  at β = −3 for n = 8 and 12 (points per second);
* branch-and-bound: `enclose(n, β)` for n = 3 and 4 at β ∈ {−3, −1, −0.5, 0.5, 2} (boxes, seconds).

Each figure is the best of ``repeat`` runs next to the exp floor (`np.exp` over 10^6 doubles) measured
in the same run, since the machine's speed varies from minute to minute. Report the load (``uptime``)
with the figures; on a loaded machine they are not a measurement.
"""
import os
import sys
import time

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402

from meanfield.experiments.landscape import census_over_beta  # noqa: E402
from meanfield.landscape.branchbound import enclose  # noqa: E402
from meanfield.landscape.census import critical_points  # noqa: E402
from meanfield.landscape.certify import certify_point  # noqa: E402
from meanfield.landscape.energy import Energy  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
from _timing import best  # noqa: E402


def main(quick=False):
    repeat = 1 if quick else 2
    floor = best(lambda: np.exp(np.linspace(0, 1, 10 ** 6)), 5)
    print(f"load {os.getloadavg()[0]:.2f}; exp floor {1e3 * floor:.2f} ms")
    betas = np.linspace(-6.0, 2.0, 21 if quick else 100)
    total = 0.0
    for n in range(3, 9):
        t = best(lambda: census_over_beta(n, betas, certify="none"), repeat)
        total += t
        print(f"census n = {n}, {betas.size} β: {t:.2f} s")
    print(f"census n = 3..8, {betas.size} β: {total:.1f} s (target < 60 s)")
    if not quick:
        t = best(lambda: census_over_beta(12, betas, certify="none"), 1)
        print(f"census n = 12, {betas.size} β: {t:.1f} s (target < 600 s)")
    for n in (8,) if quick else (8, 12):
        pts = critical_points(n, -3.0, certify=False)
        e = Energy(-3.0, n)
        t0 = time.perf_counter()
        ok = sum(certify_point(e, p).certified for p in pts)
        t = time.perf_counter() - t0
        print(f"certify n = {n}, β = −3: {ok}/{len(pts)} points in {t:.2f} s ({len(pts) / t:.1f} points/s)")
    for n in (3,) if quick else (3, 4):
        for b in (-3.0, -1.0, -0.5, 0.5, 2.0):
            r = enclose(n, b)
            print(f"branch-and-bound n = {n}, β = {b:g}: complete {r.complete}, {len(r.classes)} classes, "
                  f"{r.boxes} boxes, {r.seconds:.1f} s")
    print(f"load {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
