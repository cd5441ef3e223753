"""The cost of each normalisation scheme's right-hand side against "post" (docs/normalization.md).

    python benchmarks/bench_normalization.py [--quick]

* Particles, n = 2000 tokens on S^15 (d = 16), β = 1, direct sums on one thread: one right-hand
  side of every scheme, timed in alternation with that of "post" (the kept evaluation is dropped
  before each call, so every call does its kernel sums);
* FourierCircle (modes 512) and SphericalHarmonics (lmax 63): one right-hand side of "ngpt"
  (one more synthesis, of ∂_β Z̃) and "sqrt-depth" against "post".
Printed: the ratio to "post" measured in the same run (minimum of several repetitions).
"""
import sys

import numpy as np

import meanfield as mf
import solvers
from _timing import interleaved
from meanfield.measures.sampling import uniform_points

SCHEMES = ("post", "pre", "mix", "peri", "ngpt", "sqrt-depth")


def model(scheme, dim):
    return mf.Model(1.0, dim, normalization=scheme, **({"mix_depth": 1.0} if scheme == "mix" else {}))


def particle_rhs(scheme, x0):
    run = solvers.Particles(model(scheme, x0.shape[-1]), sums="direct", diagnostics="none").start(x0, threads=1)

    def rhs():
        run.workspace.pop("evaluation", None)
        return run.rhs(0.5, run.y0)
    return rhs


def spectral_rhs(scheme, make, rho0):
    run = make(model(scheme, 2 if make is fourier else 3)).start(rho0, normalize=True)
    return lambda: run.rhs(0.5, run.y0)


def fourier(m):
    return solvers.FourierCircle(m, 512)


def harmonics(m):
    return solvers.SphericalHarmonics(m, 63)


def main(quick=False):
    repeat = 3 if quick else 10
    x0 = uniform_points(2000, 16, np.random.default_rng(0))
    fns = [particle_rhs(s, x0) for s in SCHEMES]
    times = interleaved(fns, repeat)
    print(f"Particles n = 2000, d = 16: post RHS {times[0] * 1e3:.1f} ms")
    for s, t in zip(SCHEMES, times):
        print(f"  {s:>11}: {t / times[0]:.3f} x post")
    rho0 = lambda x: np.exp(2 * x[..., 0])
    for name, make in (("FourierCircle modes 512", fourier), ("SphericalHarmonics lmax 63", harmonics)):
        schemes = ("post", "ngpt", "sqrt-depth")
        times = interleaved([spectral_rhs(s, make, rho0) for s in schemes], repeat)
        print(f"{name}: post RHS {times[0] * 1e3:.2f} ms")
        for s, t in zip(schemes, times):
            print(f"  {s:>11}: {t / times[0]:.3f} x post")


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
