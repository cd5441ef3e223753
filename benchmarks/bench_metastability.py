"""The cluster detector of the metastability experiment against the exponential floor of one right-hand side.

    python benchmarks/bench_metastability.py [--quick]

`meanfield.observables.diagnostics.find_clusters` runs at every saved time of every run of ``meanfield
metastability`` (particles and Lagrangian nodes alike). One right-hand side of the dynamics of the
same n points costs at least ``np.exp`` over an n×n float64 array; that is the baseline, timed in
alternation with the detector in the same run (minimum of several repetitions). Printed: the ratio
detector / exp(n×n) for n = 4000 points on S^1 and S^2, for a near-uniform cloud, sharp clusters
(radius 1e-7) and clusters of radius comparable to the tolerance (the worst case of the cell
reduction on S^2), at tolerances 1e-3 and 1e-2. Target: every ratio <= 0.25 (counting the clusters
at a saved time costs a fraction of one of the ~6 right-hand sides of a time step).
"""
import os
import sys

import numpy as np

from meanfield.observables.diagnostics import find_clusters
from meanfield.measures.sampling import uniform_points

sys.path.insert(0, os.path.dirname(__file__))
from _timing import interleaved  # noqa: E402


def clouds(dim, n, rng):
    centres = uniform_points(4, dim, rng)
    lab = rng.integers(0, 4, n)

    def around(width):
        x = centres[lab] + width * rng.standard_normal((n, dim))
        return x / np.linalg.norm(x, axis=1, keepdims=True)

    return {"near-uniform": uniform_points(n, dim, rng), "sharp (radius 1e-7)": around(1e-7),
            "radius 1e-3": around(1e-3)}


def main(quick=False):
    n = 1000 if quick else 4000
    repeat = 2 if quick else 5
    rng = np.random.default_rng(0)
    a = rng.random((n, n))
    worst = 0.0
    print(f"find_clusters / np.exp({n}×{n}) (one right-hand side's exponential floor)")
    for dim in (2, 3):
        for name, x in clouds(dim, n, rng).items():
            for tol in (1e-3, 1e-2):
                base, det = interleaved([lambda: np.exp(a), lambda: find_clusters(x, tol)], repeat)
                worst = max(worst, det / base)
                print(f"  S^{dim - 1} {name:22s} tol={tol:g}: exp {1e3 * base:7.2f} ms | detector {1e3 * det:7.2f} ms"
                      f" = {det / base:5.3f}x")
    print(f"worst ratio: {worst:.3f}  (target <= 0.25)")
    return worst


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
