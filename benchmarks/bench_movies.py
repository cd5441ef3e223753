"""Movies: the time of a 100-frame GIF, as users make it (`Solution.animate`) (docs/movies.md).

    python benchmarks/bench_movies.py

1. 256 particles on S^2 ((SA), β = 4, 100 saved times on [0, 10]): target < 20 s on one core.
2. An S^2 density, SphericalHarmonics at lmax 64 ((SA), β = 2, two caps, 100 saved times): target < 40 s.
Each is printed with the time of one ducc0 synthesis of the lmax-64 grid as the baseline of this run.
"""
import os
import tempfile
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import meanfield as mf  # noqa: E402
import solvers  # noqa: E402
from _timing import best  # noqa: E402


def main():
    x0 = mf.sampling.uniform_points(256, 3, 0)
    particles = solvers.Particles(mf.Model(beta=4.0, dim=3)).solve(x0, np.linspace(0, 10, 100), progress=False,
                                                                   threads=1)
    rho0 = mf.densities.mixture([mf.densities.von_mises_fisher([0, 0, 1.0], 3.0),
                                 mf.densities.von_mises_fisher([1.0, 0, 0], 2.0)], [0.6, 0.4])
    density = solvers.SphericalHarmonics(mf.Model(beta=2.0, dim=3), lmax=64).solve(
        rho0, np.linspace(0, 1.5, 100), progress=False)
    state = density.state(-1)
    floor = best(lambda: state.to_grid(90), repeat=5)
    with tempfile.TemporaryDirectory() as tmp:
        for name, sol, target in (("256 particles on S^2", particles, 20.0), ("S^2 density, lmax 64", density, 40.0)):
            t0 = time.perf_counter()
            made = sol.animate(os.path.join(tmp, "m.gif"), progress=False)
            wall = time.perf_counter() - t0
            print(f"{name:22s}: {made['frames']} frames in {wall:.2f} s (target < {target:g} s); "
                  f"{wall / floor:.0f} lmax-64 syntheses ({floor * 1e3:.2f} ms each)")


if __name__ == "__main__":
    main()
