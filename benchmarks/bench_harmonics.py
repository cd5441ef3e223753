"""SphericalHarmonics: cost of one right-hand side against one raw ducc0.sht synthesis (docs/sphere.md).

    python benchmarks/bench_harmonics.py [--quick]

* ratio = (one RHS evaluation) / (one raw ducc0.sht.synthesis_2d, spin 0, at the same lmax on its
  own Gauss–Legendre grid with lmax+1 rings and 2·lmax+1 longitudes, pyshtools' GLQ grid), both measured in this run,
  for lmax = 63, 255, 511, with 1 thread and with 2 threads (the baseline uses the same number of
  threads), timed in alternation (minimum of several runs) because the machine is shared. Target at
  lmax = 255, single thread: SA <= 6, USA <= 5 (issue 47).
* end-to-end wall time of (SA) runs with β = 4, lmax = 127, t ∈ [0, 10] (1 thread), attractive
  (stops with UnderResolved once the clusters are too sharp for lmax = 127) and repulsive, with the
  number of RHS evaluations and the time per RHS.

A RHS is, on a dealiasing grid with ⌊3·lmax/2⌋ + 1 rings (solvers/harmonics.py): 1 scalar synthesis of
ρ; for SA 1 scalar synthesis of Z̃ and for both 1 spin-1 synthesis of the gradient part alone (∇Ψ̃), these
two at the degree B where the kernel's fields vanish to rounding (`solvers.spectral.kernel_band`, printed;
B = 18 at β = 1); 1 spin-1 analysis of the gradient part of the flux alone (the quadrature weights
applied ring by ring).
"""
import os
import sys
import time

import numpy as np

import meanfield as mf
import solvers
from meanfield.representations.harmonics import alm_degrees, alm_size


def random_state(lmax, rng):
    """A smooth random density's a_lm (decaying spectrum, ρ_00 = 1)."""
    ls, ms = alm_degrees(lmax)
    a = (rng.standard_normal(alm_size(lmax)) + 1j * rng.standard_normal(alm_size(lmax))) * np.exp(-ls / 8.0) * 0.05
    a[ms == 0] = a[ms == 0].real
    a[0] = np.sqrt(4 * np.pi)
    return a


def interleaved(fns, repeat):
    """Minimum wall time of each function, measured in alternation (robust on a shared machine)."""
    for fn in fns:
        fn()
    best_times = [np.inf] * len(fns)
    for _ in range(repeat):
        for k, fn in enumerate(fns):
            t0 = time.perf_counter()
            fn()
            best_times[k] = min(best_times[k], time.perf_counter() - t0)
    return best_times


def ratios(nthreads, lmaxes, repeat):
    from ducc0.sht import synthesis_2d

    rng = np.random.default_rng(0)
    rows = []
    for L in lmaxes:
        a = random_state(L, rng)
        sa = solvers.SphericalHarmonics(mf.Model(beta=1.0, dim=3), lmax=L, threads=nthreads)
        usa = solvers.SphericalHarmonics(mf.Model(beta=1.0, dim=3, normalized=False), lmax=L, threads=nthreads)
        rsa, rusa = sa.start(mf.densities.uniform()).rhs, usa.start(mf.densities.uniform()).rhs
        base, t_sa, t_usa = interleaved([
            lambda: synthesis_2d(alm=a[None], spin=0, lmax=L, geometry="GL", ntheta=L + 1, nphi=2 * L + 1,
                                 nthreads=nthreads),
            lambda: rsa(0.0, a),
            lambda: rusa(0.0, a)], repeat)
        rows.append([L, base, t_sa / base, t_usa / base, sa.field.band])
    return rows


def main():
    os.system("uptime")
    quick = "--quick" in sys.argv
    lmaxes = [63, 255] if quick else [63, 255, 511]
    repeat = 3 if quick else 7
    for nthreads in (1, 2):
        print(f"RHS / raw ducc0 scalar synthesis, {nthreads} thread{'s' if nthreads > 1 else ''}:")
        for L, base, r_sa, r_usa, band in ratios(nthreads, lmaxes, repeat):
            flag = "  (target SA <= 6, USA <= 5)" if L == 255 and nthreads == 1 else ""
            print(f"  lmax = {L:4d}: synthesis {1e3 * base:8.2f} ms | SA {r_sa:5.2f} | USA {r_usa:5.2f} | kernel band "
                  f"B = {band}{flag}")
    rho0 = mf.densities.mixture([mf.densities.von_mises_fisher(np.array([0.3, 0.5, 0.8]) / np.linalg.norm([0.3, 0.5, 0.8]), 1.0),
                                 mf.densities.uniform()])
    for v, label in ((1.0, "attractive"), (-1.0, "repulsive")):
        S = solvers.SphericalHarmonics(mf.Model(beta=4.0, dim=3, V=v), lmax=127)
        t0 = time.perf_counter()
        try:
            sol = S.solve(rho0, np.linspace(0, 10, 11), progress=False)
            status = "finished"
        except mf.UnderResolved as exc:
            sol, status = exc.solution, f"stopped (UnderResolved at t={exc.t:.3g}: clusters need a larger lmax)"
        wall = time.perf_counter() - t0
        nfev = sol.stats.get("nfev", 0)
        print(f"end-to-end SA {label} beta=4, lmax=127, t in [0, 10]: {wall:.2f} s, {status}, {nfev} RHS, "
              f"{sol.stats.get('nsteps', 0)} steps, {1e3 * wall / max(nfev, 1):.2f} ms per RHS incl. overhead")

if __name__ == "__main__":
    main()
