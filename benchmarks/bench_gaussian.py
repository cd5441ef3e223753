"""solvers.Gaussian: the exact Gaussian continuum in R^d against the particles it stands for (docs/gaussian.md).

    python benchmarks/bench_gaussian.py [--quick]

For d = 3, 16, 64 ((SA), one head, Q, K, V near I, Σ0 = 0.09/d · I, t in [0, 1], 11 saved times):
* the whole Gaussian run, in units of the exp floor of one n × n particle right-hand side
  (np.exp over n² numbers, n = 2000), and
* one right-hand side of n = 2000 particles in R^d (`solvers.Particles`, domain "euclidean") in the
  same units, timed in alternation with the floor (minimum of several repetitions).
The Gaussian run costs a few hundred d × d products; it is the reference the particle runs converge to.
"""
import sys

import numpy as np

import meanfield as mf
import solvers
from _timing import interleaved


def main(quick=False):
    n, repeat = 2000, 2 if quick else 5
    rng = np.random.default_rng(0)
    floor_input = rng.random(n * n)
    print(f"{'d':>4} {'exp floor ms':>13} {'Gaussian run / floor':>21} {'particle RHS / floor':>21} {'RHS evals':>10}")
    for d in (3, 16) if quick else (3, 16, 64):
        Q, K, V = (np.eye(d) + 0.1 / np.sqrt(d) * rng.standard_normal((d, d)) for _ in range(3))
        model = mf.Model(beta=1.0, dim=d, Q=Q, K=K, V=V)
        gauss = solvers.Gaussian(model)
        initial = (np.zeros(d), 0.09 / d * np.eye(d))
        t = np.linspace(0, 1, 11)
        run = solvers.Particles(model).start(0.3 / np.sqrt(d) * rng.standard_normal((n, d)), domain="euclidean",
                                             threads=1)
        floor, whole, rhs = interleaved([lambda: np.exp(floor_input),
                                         lambda: gauss.solve(initial, t, progress=False),
                                         lambda: run.rhs(0.0, run.y0)], repeat)
        nfev = gauss.solve(initial, t, progress=False).stats["nfev"]
        print(f"{d:>4} {floor * 1e3:>13.2f} {whole / floor:>21.2f} {rhs / floor:>21.2f} {nfev:>10}")


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
