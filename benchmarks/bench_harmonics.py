"""SphericalHarmonics: cost of one right-hand side against one raw ducc0.sht synthesis (docs/sphere.md).

    python benchmarks/bench_harmonics.py [--quick]
    python benchmarks/bench_harmonics.py --paths [--repeat R]

* ratio = (one RHS evaluation) / (one raw ducc0.sht.synthesis_2d, spin 0, at the same lmax on its
  own Gauss–Legendre grid with lmax+1 rings and 2·lmax+1 longitudes, pyshtools' GLQ grid), both measured in this run,
  for lmax = 63, 255, 511, with 1 thread and with 2 threads (the baseline uses the same number of
  threads), timed in alternation (minimum of several runs) because the machine is shared. Target at
  lmax = 255, single thread: SA <= 6, USA <= 5 (issue 47).
* end-to-end wall time of (SA) runs with β = 4, lmax = 127, t ∈ [0, 10] (1 thread), attractive
  (stops with UnderResolved once the clusters are too sharp for lmax = 127) and repulsive, with the
  number of RHS evaluations and the time per RHS.

``--paths``: at lmax 127 and 255 on one thread, in one process and in alternation (minimum of R = 20
rounds), the RHS of SA and USA at β = 1, the same with the kernel's fields at degree lmax (band = lmax:
the cost when the kernel needs every degree), and the transforms of ae5e629 for one density (two-field
scalar synthesis, ``synthesis_2d_deriv1``, the full spin-1 ``analysis_2d``, all at lmax), each over the
raw synthesis; it also prints the largest difference of the RHS from the ae5e629 transforms.

A RHS is, on a dealiasing grid with ⌊3·lmax/2⌋ + 1 rings (solvers/harmonics.py): 1 scalar synthesis of
ρ; for SA 1 scalar synthesis of Z̃ and for both 1 spin-1 synthesis of the gradient part alone (∇Ψ̃), these
two at the degree B where the kernel's fields vanish to rounding (`solvers.spectral.kernel_band`, printed;
B = 17 at β = 1); 1 spin-1 analysis of the gradient part of the flux alone (the quadrature weights
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


def former_rhs(solver, alm):
    """The right-hand side of one density by the transforms of ae5e629: ρ and Z̃ in one two-field synthesis,
    ∇Ψ̃ by ``synthesis_2d_deriv1``, |X|², ρX, and E of the full spin-1 ``analysis_2d``, all at lmax."""
    from ducc0.sht import analysis_2d, synthesis, synthesis_2d_deriv1

    b, L = solver.basis, solver.lmax
    rows = np.stack([alm] + ([solver._kern * alm] if solver._kern is not None else []))
    g = synthesis(alm=rows[:, None], spin=0, nthreads=1, **b._geometry).reshape(len(rows), b.ntheta, b.nphi)
    grad = synthesis_2d_deriv1(alm=(solver._vel * alm)[None], lmax=L, geometry="GL", ntheta=b.ntheta, nphi=b.nphi)
    x = solver.field.velocity(grad, g[1][None] if len(rows) > 1 else None)
    _ = x[0] ** 2 + x[1] ** 2                                 # |X|², which ae5e629 formed for every scheme
    x *= g[0][None]
    d = np.sqrt(b.laplacian) * analysis_2d(map=x, spin=1, lmax=L, geometry="GL")[0]
    d[0] = 0.0
    d[b.zonal] = d[b.zonal].real
    return d


def paths(repeat):
    """--paths: the RHS, with band = lmax, and by the ae5e629 transforms, over one raw synthesis."""
    import copy
    from ducc0.sht import synthesis_2d

    for L in (127, 255):
        a = random_state(L, np.random.default_rng(0))
        fns, names = [lambda: synthesis_2d(alm=a[None], spin=0, lmax=L, geometry="GL", ntheta=L + 1,
                                           nphi=2 * L + 1)], []
        for normalized in (True, False):
            S = solvers.SphericalHarmonics(mf.Model(beta=1.0, dim=3, normalized=normalized), lmax=L, threads=1)
            full = copy.copy(S)
            full.field = copy.copy(S.field)
            full.field.band = L
            rhs, rhs_full = S.start(mf.densities.uniform()).rhs, full.start(mf.densities.uniform()).rhs
            d, former = rhs(0.0, a), former_rhs(S, a)
            print(f"lmax {L} {'SA' if normalized else 'USA'}: max |RHS − ae5e629| / max |RHS| = "
                  f"{np.abs(d - former).max() / np.abs(former).max():.1e}")
            fns += [lambda r=rhs: r(0.0, a), lambda r=rhs_full: r(0.0, a), lambda s=S: former_rhs(s, a)]
            names += [f"{'SA' if normalized else 'USA'} {k}" for k in ("RHS", "band = lmax", "ae5e629")]
        times = interleaved(fns, repeat)
        os.system("uptime")
        print(f"  lmax = {L}: synthesis {1e3 * times[0]:.2f} ms | " +
              " | ".join(f"{n} {t / times[0]:.2f}" for n, t in zip(names, times[1:])))


def main():
    os.system("uptime")
    if "--paths" in sys.argv:
        repeat = int(sys.argv[sys.argv.index("--repeat") + 1]) if "--repeat" in sys.argv else 20
        return paths(repeat)
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
