"""Pictures for docs/gegenbauer.md (run once; the PNG under docs/img/ is committed).

    python docs/make_gegenbauer_figures.py [--particles N]      (the committed picture: N = 1500)

gegenbauer_d128.png  d = 128, (SA) β = 2, a von Mises–Fisher cap κ = 10 about e = e_d (mean ⟨x, e⟩ ≈ 0.08),
                     solvers.Gegenbauer with lmax = 128 on t ∈ [0, 2]:
                     (a) the law of s = ⟨x, e⟩ against time (colour), its quartiles (white lines) and the
                         quartiles of N stratified particles of the same initial law evolved by
                         solvers.Particles (default N = 4000; circles);
                     (b) the law of s at t = 0, 1, 2: PDE (lines) against particle histograms, and the
                         s-marginal W1 between them (`meanfield.observables.wasserstein.w1_marginal`);
                     (c) the mean of s against the d → ∞ equiangular limit s̄' = s̄(1 − s̄²), i.e.
                         γ = s̄² solving the n → ∞ limit γ' = 2γ(1 − γ) of (6.9).
"""
import pathlib
import sys
import time

import numpy as np
from scipy.integrate import solve_ivp

import meanfield as mf
import solvers
from meanfield.observables.wasserstein import w1_marginal

IMG = pathlib.Path(__file__).resolve().parent / "img"


def quantiles(rep, c, q):
    """s with F(s) = q for the law of s of the coefficients c (bisection on the exact CDF)."""
    lo, hi = np.full(len(q), -1.0), np.full(len(q), 1.0)
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        below = rep.marginal_cdf(c, mid) < q
        lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
    return 0.5 * (lo + hi)


def main(n_particles=4000):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    d, beta, kappa = 128, 2.0, 10.0
    e = np.eye(d)[-1]
    model = mf.Model(beta=beta, dim=d)
    rho0 = mf.densities.von_mises_fisher(e, kappa)
    t = np.linspace(0.0, 2.0, 21)
    t0 = time.perf_counter()
    pde = solvers.Gegenbauer(model, 128).solve(rho0, t)
    print(f"PDE: {time.perf_counter() - t0:.2f} s, max tail {pde.diagnostics['spectral_tail'].max():.1e}, "
          f"|ρ| up to {pde.diagnostics['l2_norm'].max():.1e}")
    t0 = time.perf_counter()
    cloud = solvers.Particles(model, diagnostics="none").solve(mf.sample(rho0, n_particles, d, method="quasi"), t,
                                                               rtol=1e-6, atol=1e-9, progress=False)
    print(f"{n_particles} particles: {time.perf_counter() - t0:.1f} s")
    rep = pde.representation
    cdf = [lambda s, i=i: rep.marginal_cdf(pde.data[i], s) for i in range(t.size)]
    w1 = np.array([w1_marginal(cdf[i], cloud.measure(i)) for i in range(t.size)])
    print("s-marginal W1(PDE, particles):", np.array2string(w1, precision=4))

    s = np.linspace(-0.4, 1.0, 701)
    law = np.array([rep.marginal_density(c, s) for c in pde.data])
    qs = np.array([0.25, 0.5, 0.75])
    q_pde = np.array([quantiles(rep, c, qs) for c in pde.data])
    sp = cloud.positions @ e                                       # (T, n)
    q_part = np.quantile(sp, qs, axis=1).T

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.4))
    ax = axes[0]
    mesh = ax.pcolormesh(s, t, law, shading="auto", cmap="magma")
    fig.colorbar(mesh, ax=ax, label=r"law of $s=\langle x,e\rangle$")
    for k in range(len(qs)):
        ax.plot(q_pde[:, k], t, "w-", lw=1.2, label="PDE quartiles" if k == 0 else None)
        ax.plot(q_part[:, k], t, "o", mfc="none", mec="cyan", ms=4, label=f"{n_particles} particles" if k == 0 else None)
    ax.set_xlabel(r"$s=\langle x,e\rangle$")
    ax.set_ylabel("t")
    ax.set_title(rf"$d={d}$, (SA) $\beta={beta:g}$: the law of $s$")
    ax.legend(loc="upper left", fontsize=8)

    ax = axes[1]
    for i, color in zip((0, 10, 20), ("C0", "C1", "C3")):
        ax.plot(s, law[i], color=color, lw=1.5, label=f"PDE t = {t[i]:g}")
        ax.hist(sp[i], bins=80, range=(s[0], s[-1]), density=True, histtype="step", color=color, alpha=0.6)
    ax.set_xlabel(r"$s$")
    ax.set_title(f"PDE (lines) vs particle histograms; max W1 = {w1.max():.1e}")
    ax.legend(fontsize=8)

    ax = axes[2]
    nodes, weights = solvers.Gegenbauer(model, 128).nodes, solvers.Gegenbauer(model, 128).weights
    mean_pde = np.array([weights @ (rep.profile(c, nodes) * nodes) for c in pde.data])
    ode = solve_ivp(lambda _, y: y * (1 - y * y), [0, t[-1]], [mean_pde[0]], t_eval=t, rtol=1e-12, atol=1e-14).y[0]
    ax.plot(t, mean_pde, "-", lw=2, label="PDE: mean of s")
    ax.plot(t, sp.mean(axis=1), "o", mfc="none", label="particles: mean of s")
    ax.plot(t, ode, "k--", lw=1, label=r"$d\to\infty$: $\bar s'=\bar s(1-\bar s^2)$ (6.9), $n\to\infty$")
    ax.set_xlabel("t")
    ax.set_title("equiangular regime")
    ax.legend(fontsize=8)
    fig.tight_layout()
    IMG.mkdir(exist_ok=True)
    fig.savefig(IMG / "gegenbauer_d128.png", dpi=110)
    print("wrote", IMG / "gegenbauer_d128.png")
    print("mean s: PDE", np.round(mean_pde[::5], 4), "ODE", np.round(ode[::5], 4))


if __name__ == "__main__":
    n = int(sys.argv[sys.argv.index("--particles") + 1]) if "--particles" in sys.argv else 4000
    main(n)
