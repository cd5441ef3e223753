"""Gegenbauer: cost of one right-hand side against one Gauss–Gegenbauer transform (docs/gegenbauer.md).

    python benchmarks/bench_gegenbauer.py [--quick]

* ratio = (one RHS evaluation) / (one synthesis f_j = Σ_l c_l p_l(s_j): the matrix–vector product
  with the precomputed n × (lmax + 1) table at the n = ⌊(3·lmax + 2)/2⌋ + 1 dealiasing nodes), both
  measured in this run, timed in alternation (minimum of several runs) because the machine is
  shared. A RHS is 3 such products for (USA) (f, ∂_sΦ, the test with p_l') and 4 for (SA) (Z̃ as
  well), plus O(n) work: the ideal ratio is 3–4. Target: <= 8.
* end to end, d = 128, (SA) β = 2, lmax = 128, t ∈ [0, 10] (target < 10 s each), two caps contracting
  towards the pole: wall time, RHS evaluations and the mean of ⟨x, e⟩ at t = 0, 5, 10.
  - noise-free, a weak cap (von Mises–Fisher κ = 0.004, mean ⟨x, e⟩ = 3e-5) that grows out of the
    linear instability and contracts to mean ⟨x, e⟩ ≈ 0.54 at t = 10 (‖ρ‖ ≈ 5e7). A strong cap
    contracts further before t = 10, into the collapse no σ-relative density can represent
    (docs/gegenbauer.md, *Resolution and conditioning*);
  - noise ν = 0.0055 (below ν_c = a_1/(β a_0) ≈ 0.0078), a strong cap (κ = 10, mean ≈ 0.08) that
    contracts and settles at a stationary cap of mean ≈ 0.5.
"""
import sys
import time

import numpy as np

import meanfield as mf
import solvers
from _timing import interleaved


def random_state(lmax, rng):
    c = rng.standard_normal(lmax + 1) * np.exp(-np.arange(lmax + 1) / 8.0) * 0.05
    c[0] = 1.0
    return c


def ratios(cases, repeat):
    rng = np.random.default_rng(0)
    rows = []
    for d, L in cases:
        c = random_state(L, rng)
        sa = solvers.Gegenbauer(mf.Model(beta=1.0, dim=d), L)
        usa = solvers.Gegenbauer(mf.Model(beta=1.0, dim=d, normalized=False), L)
        run_sa, run_usa = sa.start(c), usa.start(c)
        table = sa.synthesis
        base, t_sa, t_usa = interleaved([lambda: table @ c, lambda: run_sa.rhs(0.0, c),
                                         lambda: run_usa.rhs(0.0, c)], repeat)
        rows.append((d, L, table.shape[0], base, t_sa / base, t_usa / base))
    return rows


def end_to_end(kappa, noise):
    d = 128
    e = np.eye(d)[-1]
    model = mf.Model(beta=2.0, dim=d, noise=noise)
    solver = solvers.Gegenbauer(model, 128)
    t0 = time.perf_counter()
    sol = solver.solve(mf.densities.von_mises_fisher(e, kappa), np.linspace(0.0, 10.0, 11))
    wall = time.perf_counter() - t0
    s, w = solver.nodes, solver.weights
    means = [float(w @ (solver.synthesis @ c * s)) for c in sol.data[[0, 5, 10]]]
    return (wall, sol.stats["nfev"], means, float(np.max(sol.diagnostics["spectral_tail"])),
            float(np.max(sol.diagnostics["l2_norm"])))


def main(quick=False):
    cases = [(3, 64), (128, 128), (1024, 256)] if quick else [(3, 64), (3, 255), (128, 128), (128, 256),
                                                               (1024, 256), (1024, 512)]
    print("RHS / one Gauss–Gegenbauer synthesis (matrix–vector), same lmax and nodes (target <= 8)")
    print(f"{'d':>6} {'lmax':>6} {'nodes':>6} {'synthesis':>12} {'SA ratio':>9} {'USA ratio':>10}")
    worst = 0.0
    for d, L, n, base, r_sa, r_usa in ratios(cases, 5 if quick else 20):
        print(f"{d:>6} {L:>6} {n:>6} {base * 1e6:>10.1f}us {r_sa:>9.2f} {r_usa:>10.2f}")
        if L >= 128:
            worst = max(worst, r_sa, r_usa)
    print(f"largest ratio at lmax >= 128: {worst:.2f} ({'OK' if worst <= 8 else 'above the target 8'})")
    for kappa, noise in ((0.004, 0.0), (10.0, 0.0055)):
        wall, nfev, means, tail, norm = end_to_end(kappa, noise)
        print(f"d=128 (SA) beta=2 noise={noise:g}, vMF cap kappa={kappa:g}, lmax=128, t in [0, 10]: {wall:.2f} s "
              f"({'OK' if wall < 10 else 'above the target 10 s'}), {nfev} RHS ({wall / nfev * 1e6:.0f} us each), "
              f"mean <x,e> at t=0, 5, 10: {', '.join(f'{m:.2g}' for m in means)}, max spectral tail {tail:.1e}, "
              f"max ||rho|| {norm:.1e}")


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
