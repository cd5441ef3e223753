"""Spectral against direct kernel sums: the particle right-hand side from n = 10^3 to 10^6.

    python benchmarks/bench_fast_sums.py [--quick] [--threads N] [--accuracy] [--run-1e6] [--lagrangian]

Printed, on S^2 and S^1 at β = 4 ((SA), one thread unless ``--threads``):

* the right-hand side of `solvers.Particles` (one `Solver.start(...).rhs` call, what a run
  evaluates) with ``sums="direct"`` (up to n = 64 000; beyond that its n² cost is extrapolated
  from the largest measured n) and ``sums="spectral"``, and their ratio;
* the spectral right-hand side over the transform floor measured in the same run at the same n:
  one ``adjoint_synthesis_general`` plus one spin-0 and one spin-1 ``synthesis_general`` (ducc0,
  lmax 48, ε 1e-12) on S^2, one type-1 plus one type-2 NUFFT of two transforms on S^1 (which the
  compiled Fourier recurrences replace up to lmax 64: there spectral/floor below 1 is their gain);
* the crossover n that ``sums="auto"`` uses (`meanfield.sums.spectralsums.crossover`) and the measured
  one (the smallest n of a doubling grid from 64 where the spectral RHS is faster).

``--accuracy``: the spectral against the direct field at n = 20 000 for β ∈ {0.5, 4, 10}, (SA) and
(USA), V = ±1, uniform and clustered clouds: max |X_s − X_d| / max |X_d| (target <= 1e-9).
``--run-1e6``: (SA) β = 4 on S^2, n = 10^6 iid uniform particles, t ∈ [0, 10], dopri5 at rtol 1e-6
with the default ``sums="auto"``: wall time and peak memory (targets 5 minutes, 2 GB).
``--lagrangian``: the Lagrangian S^2 case of docs/lagrangian.md ((SA) β = 4 from
``band_limited(3, 6, rng=1, scale=0.01)`` to t = 30) with 2048 direct and 8192 spectral labels (target:
the spectral run in at most 0.3 of the direct one's time, issue 47), and the spectral run's floor: its
number of right-hand sides times the ducc0 transforms of one (both label systems), timed alone; the CPU time
of each run and its ratio too (the wall time suffers from other processes on a shared machine).
"""
import os
import resource
import sys
import time

_threads = sys.argv[sys.argv.index("--threads") + 1] if "--threads" in sys.argv else "1"
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ[_var] = _threads

import numpy as np  # noqa: E402

import meanfield as mf  # noqa: E402
import solvers  # noqa: E402
from meanfield.sums.spectralsums import EPSILON, crossover, truncation_degree  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
from _timing import interleaved  # noqa: E402

BETA = 4.0
DIRECT_MAX = 64_000


def uniform(n, d, seed=0):
    x = np.random.default_rng(seed).standard_normal((n, d))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def rhs(d, x, sums):
    run = solvers.Particles(mf.Model(beta=BETA, dim=d), sums=sums).start(x)
    y = run.y0 + 0.0

    def evaluate():
        run.workspace.clear()          # the run keeps the last evaluation for the next step: evaluate afresh
        return run.rhs(0.0, y)
    return evaluate


def floor(d, x, threads):
    """The transforms a spectral right-hand side needs, called directly."""
    w = np.full(len(x), 1.0 / len(x))
    if d == 3:
        from ducc0.sht.experimental import adjoint_synthesis_general, synthesis_general

        loc = np.stack([np.arccos(np.clip(x[:, 2], -1, 1)), np.mod(np.arctan2(x[:, 1], x[:, 0]), 2 * np.pi)], -1)
        L, eps = 48, 1e-12

        def transforms():
            a = adjoint_synthesis_general(map=w[None], spin=0, lmax=L, loc=loc, epsilon=eps, nthreads=threads)
            synthesis_general(alm=a, spin=0, lmax=L, loc=loc, epsilon=eps, nthreads=threads)
            synthesis_general(alm=a, spin=1, lmax=L, loc=loc, epsilon=eps, nthreads=threads, mode="DERIV1")
        return transforms
    import ducc0.nufft as nufft

    theta = np.arctan2(x[:, 1], x[:, 0])[:, None]
    L = truncation_degree(BETA, 2, EPSILON)

    def transforms():
        c = nufft.nu2u(points=w.astype(complex), coord=theta, forward=True, epsilon=EPSILON, nthreads=threads,
                       out=np.empty(2 * L + 1, dtype=complex))
        nufft.u2nu(grid=np.stack([c, c]), coord=theta, forward=False, epsilon=EPSILON, nthreads=threads)
    return transforms


def timing_table(d, sizes, threads, repeat):
    print(f"\nS^{d - 1}, (SA) beta = {BETA:g}, {threads} thread(s): right-hand side of solvers.Particles")
    print(f"{'n':>9} {'direct s':>10} {'spectral s':>11} {'direct/spectral':>16} {'floor s':>9} {'spectral/floor':>15}")
    last = None
    for n in sizes:
        x = uniform(n, d)
        fns = [rhs(d, x, "spectral"), floor(d, x, threads)]
        if n <= DIRECT_MAX:
            fns.append(rhs(d, x, "direct"))
        t = interleaved(fns, repeat if n <= DIRECT_MAX else max(1, repeat - 1))
        if n <= DIRECT_MAX:
            direct, note = t[2], ""
            last = (n, direct)
        else:
            direct, note = last[1] * (n / last[0]) ** 2, "*"
        print(f"{n:>9} {direct:>9.3g}{note:1} {t[0]:>11.3g} {direct / t[0]:>16.3g} {t[1]:>9.3g} {t[0] / t[1]:>15.2f}")
    print("  * extrapolated as n² from the largest direct measurement")
    grid, measured = 64, None
    while grid <= 8192 and measured is None:
        x = uniform(grid, d)
        ts, td = interleaved([rhs(d, x, "spectral"), rhs(d, x, "direct")], 5)
        measured = grid if ts < td else None
        grid *= 2
    L = truncation_degree(BETA, d, EPSILON)
    print(f"  crossover: sums='auto' takes the spectral sums from n = {crossover(d, L)} (lmax {L}); "
          f"measured: spectral faster from n = {measured}")


def accuracy():
    print("\naccuracy at n = 20 000: max |X_spectral − X_direct| / max |X_direct|")
    rng = np.random.default_rng(1)
    worst = 0.0
    for d in (2, 3):
        for kind in ("uniform", "clustered"):
            if kind == "uniform":
                x = uniform(20_000, d, 1)
            else:
                c = rng.standard_normal((5, d))
                x = c[rng.integers(0, 5, 20_000)] + 0.02 * rng.standard_normal((20_000, d))
                x /= np.linalg.norm(x, axis=1, keepdims=True)
            row = []
            for beta in (0.5, 4.0, 10.0):
                for normalized in (True, False):
                    for v in (1.0, -1.0):
                        model = mf.Model(beta=beta, dim=d, normalized=normalized, V=v)
                        xd = solvers.Particles(model, sums="direct").velocity(x)
                        xs = solvers.Particles(model, sums="spectral").velocity(x)
                        row.append(np.abs(xs - xd).max() / np.abs(xd).max())
            worst = max(worst, max(row))
            print(f"  S^{d - 1} {kind:>9}: {min(row):.2e} – {max(row):.2e} over beta, (SA)/(USA), V = ±1")
    print(f"  worst {worst:.2e} (target <= 1e-9)")


def run_1e6():
    x = uniform(1_000_000, 3, 2)
    t0 = time.perf_counter()
    sol = solvers.Particles(mf.Model(beta=BETA, dim=3)).solve(x, np.linspace(0, 10, 11), rtol=1e-6, progress=False)
    wall = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 ** 2
    print(f"\nn = 10^6 on S^2, (SA) beta = 4, t in [0, 10], dopri5 rtol 1e-6: {wall:.0f} s, peak memory {peak:.2f} GB "
          f"(targets 300 s, 2 GB); sums = {sol.stats['sums']}, bound {sol.stats['sums_error_bound']:.1e}, "
          f"{sol.stats['nfev']} right-hand sides; E = {sol.energy[0]:.6f} -> {sol.energy[-1]:.6f}")


def lagrangian(rounds=2):
    """2048 direct against 8192 spectral labels, alternated ``rounds`` times (the best of each), and the
    spectral run's floor: its right-hand sides' transforms alone (`lagrangian_floor`)."""
    rho0 = mf.densities.band_limited(3, 6, rng=1, scale=0.01)
    model = mf.Model(BETA, 3)
    print(f"\nLagrangian on S^2, (SA) beta = 4 to t = 30 (docs/lagrangian.md), {_threads} thread(s), "
          f"load average {os.getloadavg()[0]:.2f}")
    best, cpu, runs = {}, {}, {}
    for _ in range(rounds):
        for nodes, sums in ((2048, "direct"), (8192, "spectral")):
            t0, c0 = time.perf_counter(), time.process_time()
            sol = solvers.Lagrangian(model, nodes, sums=sums).solve(rho0, np.linspace(0, 30, 31), progress=False)
            wall, used = time.perf_counter() - t0, time.process_time() - c0
            best[sums] = min(best.get(sums, np.inf), wall)
            cpu[sums] = min(cpu.get(sums, np.inf), used)
            runs[sums] = sol
            d = sol.diagnostics
            print(f"  {sol.representation.n:>5} labels, {sums:>8}: {wall:6.1f} s (CPU {used:5.1f} s), {sol.stats['nfev']} "
                  f"right-hand sides, {int(d['n_clusters'][-1])} clusters, W1 estimate {d['error_estimate'][-1]:.2e}, "
                  f"load average {os.getloadavg()[0]:.2f}")
    print(f"  4x the labels (spectral) over the direct run, best of {rounds}: "
          f"{best['spectral'] / best['direct']:.2f} of the time (target <= 0.3); of the CPU time "
          f"{cpu['spectral'] / cpu['direct']:.2f}")
    sol = runs["spectral"]
    fine, companion = sol.stats["nfev"] * np.asarray(lagrangian_floor(sol))
    floor = fine + companion
    print(f"  the spectral run's transforms alone (nfev x one right-hand side's ducc0 calls at its last labels): "
          f"{floor:.1f} s ({fine:.1f} s the labels', {companion:.1f} s the companion's), {floor / best['direct']:.2f} "
          f"of the direct run; the rest {best['spectral'] - floor:.1f} s; load average {os.getloadavg()[0]:.2f}")


def lagrangian_floor(sol, repeat=20):
    """The ducc0 calls of one spectral right-hand side of a Lagrangian run on S^2 alone, at its last saved
    labels: for the labels (ε 3e-13) and for the companion's (ε `COMPANION_EPSILON`), one adjoint transform
    and the spin-0, spin-1 and spin-0 syntheses of Zs, G and H (lmax of beta and ε, one thread); the best of
    ``repeat`` (s): [labels, companion]."""
    from ducc0.sht.experimental import adjoint_synthesis_general, synthesis_general
    from solvers.lagrangian import COMPANION_EPSILON

    rep, data = sol.representation, np.asarray(sol.data[-1])
    clouds = [(data[:rep.n, :3], rep.weights, EPSILON), (data[rep.n:, :3], rep.companion[1], COMPANION_EPSILON)]
    locs = [np.stack([np.arccos(np.clip(x[:, 2], -1, 1)), np.mod(np.arctan2(x[:, 1], x[:, 0]), 2 * np.pi)], -1)
            for x, _, _ in clouds]

    def transforms(w, eps, loc):
        L = truncation_degree(BETA, 3, eps)

        def calls():
            a = adjoint_synthesis_general(map=w[None], spin=0, lmax=L, loc=loc, epsilon=eps, nthreads=1)
            synthesis_general(alm=a, spin=0, lmax=L, loc=loc, epsilon=eps, nthreads=1)
            synthesis_general(alm=a, spin=1, lmax=L, loc=loc, epsilon=eps, nthreads=1, mode="DERIV1")
            synthesis_general(alm=a, spin=0, lmax=L, loc=loc, epsilon=eps, nthreads=1)
        return calls
    return interleaved([transforms(w, eps, loc) for (_, w, eps), loc in zip(clouds, locs)], repeat)


def main():
    quick = "--quick" in sys.argv
    threads = int(_threads)
    print(f"load average {os.getloadavg()[0]:.2f}")
    sizes = [1000, 4000, 16_000] if quick else [1000, 4000, 16_000, 64_000, 200_000, 1_000_000]
    for d in (3, 2):
        timing_table(d, sizes, threads, 2 if quick else 3)
    if "--accuracy" in sys.argv:
        accuracy()
    if "--run-1e6" in sys.argv:
        run_1e6()
    if "--lagrangian" in sys.argv:
        lagrangian()


if __name__ == "__main__":
    main()
