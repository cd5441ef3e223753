"""solvers.Hardmax: the cost of one event of the exact event-driven hardmax dynamics (docs/attention.md, "Hardmax").

    python benchmarks/bench_hardmax.py [--quick]

For random tokens (uniform in [-1, 1]^d, on the sphere normalised), V = I and Q^T K = G G^T + 0.3 I
(G Gaussian, seed 5), t in [0, 5]: the whole run, its number of events and pieces (events and saved times),
the wall time per piece, and that time in units of two floors measured in the same run, in alternation
with it (minimum of several repetitions):

* exp floor: np.exp over n^2 numbers (one evaluation of the n x n scores' exponentials, the floor of one
  softmax right-hand side of the same tokens);
* expm floor: scipy.linalg.expm of an n x n generator W - I (the exponential of one linear piece).

A piece costs a scan of the margins (a few dozen exponentials applied to the tokens and n x n scores),
Brent's refinement of the event time, and the selection at the tie it opens. The machine's load is
printed first: take the figures only when it is below 0.6.
"""
import os
import sys

import numpy as np
from scipy.linalg import expm

import meanfield as mf
import solvers
from meanfield.threads import blas_single_threaded
from _timing import interleaved

CASES = (("euclidean", 2, 16), ("euclidean", 2, 64), ("euclidean", 3, 64), ("sphere", 3, 16), ("sphere", 3, 32))


def case(domain, d, n):
    rng = np.random.default_rng(5)
    G = rng.standard_normal((d, d))
    model = mf.Model(beta=1.0, dim=d, K=G @ G.T + 0.3 * np.eye(d), attention="hardmax")
    z0 = rng.uniform(-1.0, 1.0, (n, d))
    if domain == "sphere":
        z0 /= np.linalg.norm(z0, axis=1, keepdims=True)
    return solvers.Hardmax(model), z0


def main(quick=False):
    print("uptime:", os.popen("uptime").read().strip())
    repeat = 1 if quick else 3
    print(f"{'domain':>10} {'d':>2} {'n':>4} {'events':>7} {'pieces':>7} {'inexact':>8} {'run s':>8} "
          f"{'ms/piece':>9} {'/exp floor':>11} {'/expm floor':>12}")
    for domain, d, n in CASES[:3] if quick else CASES:
        solver, z0 = case(domain, d, n)
        rng = np.random.default_rng(0)
        scores = rng.random((n, n))
        W = np.zeros((n, n))
        W[np.arange(n), rng.integers(0, n, n)] = 1.0
        generator = W - np.eye(n)

        def run():
            return solver.solve(z0, [0.0, 5.0], domain=domain, progress=False)

        with blas_single_threaded():          # the floors on one BLAS thread, as the solver's runs are
            whole, floor, floor_expm = interleaved([run, lambda: np.exp(scores), lambda: expm(generator)], repeat)
        stats = run().stats
        pieces = stats["nsteps"]
        per = whole / pieces
        print(f"{domain:>10} {d:>2} {n:>4} {stats['events']:>7} {pieces:>7} {stats['inexact_pieces']:>8} "
              f"{whole:>8.3f} {per * 1e3:>9.2f} {per / floor:>11.0f} {per / floor_expm:>12.0f}")


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
