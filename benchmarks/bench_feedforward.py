"""The cost of the feed-forward term in a right-hand side: with an MLP of width w against without (docs/feedforward.md).

    python benchmarks/bench_feedforward.py [--quick]

One right-hand side of each solver with a random MLP (W, U, b) of width 8 and 64 (GELU), timed in
alternation with the same solver without it (the baseline, measured in the same run):

* Particles, n = 2000 tokens on S^15 (d = 16), β = 1, direct sums on one thread (the kept evaluation is
  dropped before each call, so every call does its kernel sums);
* FourierCircle (modes 512) and SphericalHarmonics (lmax 63): the MLP's tangent components on the grid
  are computed once, so a step only adds them to the velocity;
* Lagrangian on S^2 (2048 labels): F, P_x F and div_S(P_x F) at the labels in every right-hand side.
Printed: the ratio to the solver without the MLP (minimum of several repetitions).
"""
import sys

import numpy as np

import meanfield as mf
import solvers
from _timing import interleaved
from meanfield.experiments.phase_diagram import random_mlp
from meanfield.measures.sampling import uniform_points

WIDTHS = (None, 8, 64)


def model(dim, width):
    mlp = None if width is None else random_mlp(width, dim, np.random.default_rng(width))
    return mf.Model(1.0, dim, mlp=mlp)


def rhs_of(run, t=0.5):
    def rhs():
        run.workspace.pop("evaluation", None)       # Particles: no kept evaluation, every call sums
        return run.rhs(t, run.y0)
    return rhs


def main(quick=False):
    repeat = 3 if quick else 10
    x0 = uniform_points(2000, 16, np.random.default_rng(0))
    rho0 = lambda x: np.exp(2 * x[..., 0])
    cases = {
        "Particles n = 2000, d = 16": lambda w: solvers.Particles(model(16, w), sums="direct",
                                                                  diagnostics="none").start(x0, threads=1),
        "FourierCircle modes 512": lambda w: solvers.FourierCircle(model(2, w), 512).start(rho0, normalize=True),
        "SphericalHarmonics lmax 63": lambda w: solvers.SphericalHarmonics(model(3, w), 63).start(rho0,
                                                                                               normalize=True),
        "Lagrangian S^2, 2048 labels": lambda w: solvers.Lagrangian(model(3, w), 2048).start(rho0, normalize=True),
    }
    for name, start in cases.items():
        times = interleaved([rhs_of(start(w)) for w in WIDTHS], repeat)
        print(f"{name}: RHS without the MLP {times[0] * 1e3:.2f} ms")
        for w, t in zip(WIDTHS[1:], times[1:]):
            print(f"  MLP width {w:>3}: {t / times[0]:.3f} x without")


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
