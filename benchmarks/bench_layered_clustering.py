"""A layered S^2 run through clustering on labels in (σ, x), against causal particles (issue 47 acceptance).

    python benchmarks/bench_layered_clustering.py [--quick] [--threads k]

(SA), S^2, β = 4, ALiBi slope λ = 1, a density that turns with the position (``rho0``):

1. the continuum: a layered `solvers.SphericalHarmonics` run (lmax 32, M = 32 positions) from t = 0 to 8,
   handed over to labels (``on_underresolved={"nodes": 2048}``: n = 2048 labels per position, the spectral
   prefix sums of docs/causal.md) when it stops resolving the clusters. Printed: the wall time (target:
   under 10 minutes on one core), the hand-over time, the labels' sums and their error bound, max ρ.
2. 16384 causal particles (`mf.sample_tokens`, "quasi": every quarter of the tokens is a low-discrepancy
   sample of its positions' law) to t = 2, before particles and continuum part ways. Printed: in each
   quarter of the positions, the largest component of the gap between the tokens' mean direction and the
   continuum's (targets: quarters 2–4 within 1e-2, the first within 2e-2).

``--quick``: M = 16, n = 512, 4096 particles (about a minute). ``--compare``: instead, labels from ``rho0``
with M = 8, n = 512 to t = 8 with the spectral and with the direct sums (wall times, right-hand sides, the
largest difference of the labels; about 1.5 minutes). ``uptime`` is printed first: the wall times mean
something on an idle machine only.
"""
import os
import sys
import time

import numpy as np

import meanfield as mf
import solvers

BETA, SLOPE, T_COMPARE, T_END = 4.0, 1.0, 2.0, 8.0


def rho0(x, s):
    """Mass 1 at every position s (its first moment turns from e_3 towards e_1 with s)."""
    return 1 + 0.5 * (x[..., 2] * np.cos(2 * s) + x[..., 0] * np.sin(2 * s)) + 0.3 * x[..., 0] * x[..., 1]


def quarter_means(sol, i, nodes=12):
    """The mean direction (4, 3) of the continuum's positions in each quarter of (0, 1] at saved time i
    (Gauss–Legendre in σ over each quarter)."""
    g, gw = np.polynomial.legendre.leggauss(nodes)
    out = np.zeros((4, 3))
    for q in range(4):
        for gi, w in zip(g, gw):
            x, weights = sol.measure(i, position=(q + 0.5 + 0.5 * gi) / 4)
            out[q] += w / 2 * (weights @ x)
    return out


def main(quick=False, threads=1):
    print(os.popen("uptime").read().strip(), f"| threads {threads}")
    M, n, tokens = (16, 512, 4096) if quick else (32, 2048, 16384)
    model = mf.Model(BETA, 3, mask="causal", position_bias=SLOPE)
    start = time.perf_counter()
    sol = solvers.SphericalHarmonics(model, 32, positions=M, threads=threads).solve(
        rho0, [0.0, T_COMPARE, T_END], on_underresolved={"nodes": n}, progress=False)
    wall = time.perf_counter() - start
    print(f"continuum: M = {M}, n = {n} labels per position, wall {wall:.0f} s (target < 600 s on one core); "
          f"hand-over at t = {sol.stats.get('handover_t', float('nan')):.2f}, sums {sol.stats.get('sums')}, "
          f"bound {sol.stats.get('sums_error_bound', float('nan')):.1e}, "
          f"max rho {sol.diagnostics['max_density'][-1]:.3g} at t = {T_END:g}")
    x, _ = mf.sample_tokens(rho0, tokens, 3, method="quasi", rng=0)
    start = time.perf_counter()
    particles = solvers.Particles(model, diagnostics="none", threads=threads).solve(x, [0.0, T_COMPARE], progress=False)
    means = particles.positions[-1].reshape(4, tokens // 4, 3).mean(1)
    gap = np.abs(means - quarter_means(sol, 1)).max(-1)
    print(f"{tokens} particles to t = {T_COMPARE:g} ({time.perf_counter() - start:.0f} s): gap per quarter "
          + " ".join(f"{g:.2e}" for g in gap) + " (targets 2e-2, then 1e-2)")
    print(os.popen("uptime").read().strip())
    return wall, gap


def compare(threads=1):
    """Labels (M = 8, n = 512) to t = 8 with the spectral and the direct sums: wall times and the gap."""
    print(os.popen("uptime").read().strip(), f"| threads {threads}")
    model = mf.Model(BETA, 3, mask="causal", position_bias=SLOPE)
    runs = {}
    for sums in ("spectral", "direct"):
        start = time.perf_counter()
        runs[sums] = solvers.Lagrangian(model, 512, positions=8, estimate=False, sums=sums, threads=threads).solve(
            rho0, [0.0, T_COMPARE, T_END], progress=False)
        print(f"{sums:8}: wall {time.perf_counter() - start:.1f} s, {runs[sums].stats.get('nfev')} right-hand sides, "
              f"bound {runs[sums].stats['sums_error_bound']:.1e}")
    gap = np.abs(np.asarray(runs["spectral"].data[-1]) - np.asarray(runs["direct"].data[-1]))[..., :3].max()
    print(f"labels differ by {gap:.1e} at t = {T_END:g}; max rho {runs['direct'].diagnostics['max_density'][-1]:.3g}")
    print(os.popen("uptime").read().strip())


if __name__ == "__main__":
    k = sys.argv.index("--threads") + 1 if "--threads" in sys.argv else None
    threads = int(sys.argv[k]) if k else 1
    if "--compare" in sys.argv:
        compare(threads)
    else:
        main(quick="--quick" in sys.argv, threads=threads)
