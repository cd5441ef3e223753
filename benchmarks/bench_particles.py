"""solvers.Particles: its two performance figures (targets and history in docs/benchmarks.md).

    python benchmarks/bench_particles.py [--quick] [--threads N] [--scaling]

1. One right-hand-side evaluation for n = 4096 particles on S^2 (SA, β = 4), against numpy's
   ``np.exp`` over an n×n float64 array, both timed in alternation in this run (minimum of
   several repetitions), on one thread. Target: ratio <= 1.3. Also printed: the large-β paths
   (fixed shift β = 400, running log-sum-exp with a general Q) and chunk sizes 512 (default)/1024/4096.
3. ``--scaling``: one right-hand side for n = 100 000 on S^2 with ``threads=1`` and ``threads=2``
   (alternately, best of two each). Target: 2 threads >= 1.7x the speed of one.
2. The Figure 3 workload: (SA), d = 3, n = 32, B = 1024 realisations, t in [0, 30] (61 saved
   times), 10 values of β in [0.9, 9], adaptive dopri5 at rtol 1e-6 (as in
   meanfield.experiments.phase_diagram), with the cluster diagnostics. Target: < 120 s on 2 cores.
   ``--quick`` runs 2 values of β and extrapolates.
"""
import os
import sys
import time

import numpy as np

import meanfield as mf
import solvers


def interleaved(fns, repeat):
    for fn in fns:
        fn()
    best = [np.inf] * len(fns)
    for _ in range(repeat):
        for k, fn in enumerate(fns):
            t0 = time.perf_counter()
            fn()
            best[k] = min(best[k], time.perf_counter() - t0)
    return best


def sphere(shape, d, seed):
    x = np.random.default_rng(seed).standard_normal(tuple(np.atleast_1d(shape)) + (d,))
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def rhs_benchmark(repeat):
    n = 4096
    x = sphere(n, 3, 0)
    a = np.random.default_rng(1).random((n, n))
    w = np.full(n, 1.0 / n)

    def rhs_of(model, chunk=512):
        run = solvers.Particles(model, chunk=chunk).start(x, weights=w, threads=1)
        return lambda: (run.workspace.clear(), run.rhs(0.0, x))     # no evaluation kept from the call before

    cases = {"SA beta=4 (chunk 512, default)": rhs_of(mf.Model(beta=4.0, dim=3)),
             "SA beta=4 chunk 1024": rhs_of(mf.Model(beta=4.0, dim=3), 1024),
             "SA beta=4 chunk 4096": rhs_of(mf.Model(beta=4.0, dim=3), 4096),
             "USA beta=4": rhs_of(mf.Model(beta=4.0, dim=3, normalized=False)),
             "SA beta=400 (fixed shift)": rhs_of(mf.Model(beta=400.0, dim=3)),
             "SA beta=200, Q=diag(1,2,.5) (log-sum-exp)": rhs_of(mf.Model(beta=200.0, dim=3, Q=np.diag([1, 2, .5])))}
    names = list(cases)
    times = interleaved([lambda: np.exp(a)] + [cases[k] for k in names], repeat)
    base = times[0]
    print(f"[1] one RHS, n = {n}, d = 3; baseline np.exp over {n}x{n} float64: {base * 1e3:.1f} ms")
    for k, t in zip(names, times[1:]):
        print(f"    {k:45s} {t * 1e3:8.1f} ms   ratio {t / base:5.2f}")
    ratio = times[1] / base
    print(f"    FIGURE 1: RHS / exp ratio = {ratio:.2f} (target <= 1.3): {'OK' if ratio <= 1.3 else 'ABOVE TARGET'}")
    return ratio


def scaling_benchmark(repeat=2):
    n = 100_000
    x = sphere(n, 3, 3)
    runs = {k: solvers.Particles(mf.Model(beta=4.0, dim=3)).start(x, threads=k) for k in (1, 2)}
    times = interleaved([lambda k=k: (runs[k].workspace.clear(), runs[k].rhs(0.0, x)) for k in (1, 2)], repeat)
    speed = times[0] / times[1]
    print(f"[3] one RHS, n = {n}: 1 thread {times[0]:.1f} s, 2 threads {times[1]:.1f} s; "
          f"FIGURE 3: speed-up {speed:.2f} (target >= 1.7): {'OK' if speed >= 1.7 else 'BELOW TARGET'}")
    return speed


def figure3_benchmark(quick):
    betas = np.linspace(0.9, 9.0, 10)
    run = betas[[0, -1]] if quick else betas
    B, n, d = 1024, 32, 3
    x0 = sphere((B, n), d, 2)
    t = np.linspace(0.0, 30.0, 61)
    total, nfev = 0.0, 0
    for beta in run:
        t0 = time.perf_counter()
        sol = solvers.Particles(mf.Model(beta=float(beta), dim=d), delta=1e-3).solve(
            x0, t, rtol=1e-6, atol=1e-9, progress=False)
        p = float(np.mean(sol.diagnostics["clustered_fraction"][-1]))
        dt = time.perf_counter() - t0
        total += dt
        nfev += sol.stats["nfev"]
        print(f"    beta = {beta:4.1f}: {dt:6.1f} s, {sol.stats['nfev']} RHS, p_d(30, beta) = {p:.3f}")
    est = total * len(betas) / len(run)
    label = "estimated from 2 betas" if quick else "measured"
    print(f"[2] FIGURE 2: Figure 3 workload (SA, d=3, n=32, B=1024, t in [0,30], 10 betas): {est:.1f} s ({label}); "
          f"ratio to the 120 s budget = {est / 120:.2f}: {'OK' if est < 120 else 'ABOVE TARGET'}")
    return est


def main():
    quick = "--quick" in sys.argv
    print(f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}, numpy {np.__version__}")
    if "--scaling" in sys.argv:
        scaling_benchmark()
        return
    rhs_benchmark(3 if quick else 7)
    figure3_benchmark(quick)


if __name__ == "__main__":
    main()
