"""solvers.stationary: cost of stationary states and branches against one transform (docs/noise.md).

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_stationary.py [--quick]

Ratios against a baseline measured in the same run, in alternation (`_timing.interleaved`):

* one self-consistent state on S^1 (`self_consistent`, Newton–Krylov on K Fourier modes, K = 64 and
  256) / one real FFT of the solver's grid (M >= 4K + 4 points);
* one on S^2 (ducc0 spherical harmonics, lmax = 32 and 64) / one ducc0 synthesis_2d on the solver's
  Gauss–Legendre grid (2·lmax + 2 rings);
* one zonal state (Gegenbauer basis, any d; d = 3, L = 64) and one branch (d = 2 and 3, β = 2β_*,
  L = 64, ν from ν_c to 0.9 ν_c through the fold, stability in sectors m = 0, 1, 2) / the same
  synthesis_2d at lmax = 64 (d = 3) or FFT (d = 2), with the number of residual evaluations and
  branch points.

Small dense matrices run fastest with one BLAS thread (set OPENBLAS_NUM_THREADS=1 on a shared
machine: oversubscribed BLAS threads make the eigenvalue problems 100x slower).
"""
import os
import sys

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402
import scipy.fft as sfft  # noqa: E402

import meanfield as mf  # noqa: E402
from solvers import stationary  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
from _timing import interleaved  # noqa: E402


def main(quick=False):
    from ducc0.fft import good_size
    from ducc0.sht import synthesis_2d

    repeat = 2 if quick else 5
    print(f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS')}, numpy {np.__version__}")
    print("\nself-consistent states (Newton–Krylov), ratio to one transform on the solver's grid")
    print(f"{'case':34s} {'time':>10s} {'baseline':>10s} {'ratio':>9s}")
    rng = np.random.default_rng(0)
    cases = [(2, 64), (2, 256)] if not quick else [(2, 64)]
    cases += [(3, 32), (3, 64)] if not quick else [(3, 32)]
    for d, L in cases:
        beta = 2 * stationary.beta_star(d)
        model = mf.Model(beta=beta, dim=d, normalized=False, noise=1.05 * stationary.critical_noise(beta, d))
        if d == 2:
            M = int(sfft.next_fast_len(4 * L + 4, real=True))
            x = rng.standard_normal(M)
            base = lambda: np.fft.rfft(x)  # noqa: E731
            what = f"S^1 Fourier K = {L}"
        else:
            nt, nphi = 2 * L + 2, int(good_size(4 * L + 4, True))
            alm = (rng.standard_normal((L + 1) * (L + 2) // 2) + 0j)
            base = lambda: synthesis_2d(alm=alm[None], spin=0, lmax=L, geometry="GL", ntheta=nt, nphi=nphi)  # noqa: E731
            what = f"S^2 harmonics lmax = {L}"
        solve = lambda: stationary.self_consistent(model, L, tail_tol=np.inf)  # noqa: E731
        t_base, t_solve = interleaved([base, solve], repeat)
        print(f"{what:34s} {t_solve * 1e3:8.1f}ms {t_base * 1e6:8.1f}us {t_solve / t_base:9.0f}")
    # zonal solve and branches
    print("\nzonal states and branches (beta = 2 beta_*, L = 64), ratio to one transform of the same size")
    L = 64
    nt, nphi = 2 * L + 2, int(good_size(4 * L + 4, True))
    alm = (rng.standard_normal((L + 1) * (L + 2) // 2) + 0j)
    sht = lambda: synthesis_2d(alm=alm[None], spin=0, lmax=L, geometry="GL", ntheta=nt, nphi=nphi)  # noqa: E731
    xf = rng.standard_normal(int(sfft.next_fast_len(4 * L + 4, real=True)))
    fft = lambda: np.fft.rfft(xf)  # noqa: E731
    beta3 = 2 * stationary.beta_star(3)
    model = mf.Model(beta=beta3, dim=3, normalized=False, noise=1.05 * stationary.critical_noise(beta3, 3))
    zonal = lambda: stationary.self_consistent(model, L, zonal=True)  # noqa: E731
    t_sht, t_zonal = interleaved([sht, zonal], repeat)
    print(f"{'zonal state d = 3':34s} {t_zonal * 1e3:8.1f}ms {t_sht * 1e6:8.1f}us {t_zonal / t_sht:9.0f}")
    for d, baseline in ((2, fft), (3, sht)):
        beta = 2 * stationary.beta_star(d)
        nu_c = stationary.critical_noise(beta, d)
        out = {}

        def run():
            out["ds"] = stationary.branch(beta, d, resolution=L, nu_min=0.9 * nu_c, sectors=(0, 1, 2))
        t_base, t_branch = interleaved([baseline, run], 1 if quick else 2)
        ds = out["ds"]
        label = f"branch d = {d} ({ds.sizes['point']} points)"
        print(f"{label:34s} {t_branch:8.2f}s  {t_base * 1e6:8.1f}us {t_branch / t_base:9.0f}"
              f"   nu_fold/nu_c = {ds.attrs['nu_fold'] / nu_c:.6f}")


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
