"""Tracers: the cost of m passive tracers over a run, against the same run without them.

    python benchmarks/bench_tracers.py [--quick]

For each solver, one run from a smooth density (particles: quasi-random points of it) to t = 1 is
timed without tracers (the baseline, in the same process, in alternation) and with m tracers
(`Solver.solve(..., tracers=points)`). Printed: the wall-time ratio and the steps of each run (the
error control includes the tracers as a group of their own, so the steps may differ). The tracers'
field costs one evaluation at m points per stage: the kernel sums against the particles or labels
(m·n exponentials, or one nonuniform transform with the spectral sums), or one nonuniform synthesis
of the density's fields for the spectral solvers.
"""
import os
import sys

import numpy as np

import meanfield as mf
import solvers

sys.path.insert(0, os.path.dirname(__file__))
from _timing import interleaved  # noqa: E402


def rho_sphere(x):
    return 1 + 0.3 * x[..., 2] + 0.2 * x[..., 0] * x[..., 1]


def rho_circle(x):
    return 1 + 0.4 * x[..., 0] + 0.2 * x[..., 1] ** 3


def cases(quick):
    sphere, circle = mf.Model(2.0, 3), mf.Model(3.0, 2)
    x, w = mf.sample(rho_sphere, 1024 if quick else 4096, 3, method="quasi")
    yield "Particles S^2 n=%d" % len(x), solvers.Particles(sphere), (x, w), 3
    yield "Lagrangian S^2 2048 labels", solvers.Lagrangian(sphere, estimate=False), rho_sphere, 3
    yield "SphericalHarmonics lmax 63", solvers.SphericalHarmonics(sphere, 63), rho_sphere, 3
    yield "FourierCircle 512 modes", solvers.FourierCircle(circle, 512), rho_circle, 2


def main(quick=False):
    repeat = 1 if quick else 3
    rng = np.random.default_rng(0)
    print("wall time with m tracers / without (same run, alternated); steps without -> with")
    for name, solver, initial, dim in cases(quick):
        for m in (16, 1024):
            z = rng.standard_normal((m, dim))
            z /= np.linalg.norm(z, axis=1, keepdims=True)
            runs = {}

            def plain():
                runs["plain"] = solver.solve(initial, [0.0, 1.0], progress=False)

            def traced():
                runs["traced"] = solver.solve(initial, [0.0, 1.0], tracers=z, progress=False)

            base, with_tracers = interleaved([plain, traced], repeat)
            print(f"  {name:28s} m={m:5d}: {with_tracers / base:5.2f}x  ({base:6.3f} s without; steps "
                  f"{runs['plain'].stats['nsteps']} -> {runs['traced'].stats['nsteps']})")


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
