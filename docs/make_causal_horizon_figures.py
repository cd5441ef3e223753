"""The causal mean-field horizon for docs/causal.md: the measurement and its picture (the PNG under docs/img/
is committed).

    OPENBLAS_NUM_THREADS=1 python docs/make_causal_horizon_figures.py [--quick] [--dims 2,3] [--ns 1024,4096]

Prints, for S^1 and S^2 and each n, the horizon t_h(n) (the first time the largest quarter gap between
the tokens' and the layered continuum's mean direction exceeds 0.05; `meanfield.experiments.causal_horizon`)
and the fits t_h = a + b log n and t_h = c n^p; writes

* causal_horizon.png   left, tokens (θ_j against σ_j = j/n, S^1, n = 4096) over the continuum's ρ(t, σ, θ)
                       before (t = 4) and after (t = 10) the horizon; right, the largest quarter gap
                       against t for each n (S^1), the threshold 0.05 dashed.
"""
import pathlib
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import solvers  # noqa: E402
from meanfield.experiments.causal_horizon import default_density, growth_fit, horizon  # noqa: E402
from meanfield.transformer.model import Model  # noqa: E402
from meanfield.measures.sampling import sample_tokens  # noqa: E402

IMG = pathlib.Path(__file__).resolve().parent / "img"


def _arg(name, default):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


def measure(dims, ns, t_end):
    """{dim: [Horizon per n]}, printed as it goes, with the fits."""
    out = {}
    for dim in dims:
        continuum, out[dim] = None, []
        for n in ns:
            h, continuum = horizon(dim, n, t_end=t_end, continuum=continuum)
            out[dim].append(h)
            worst = h.gaps.max(axis=1)
            print(f"S^{dim - 1} n = {n:6d}: t_h = {h.t_horizon:6.3f}   largest gap at t = 4: "
                  f"{worst[np.searchsorted(h.times, 4.0)]:.4f}, at t = {h.times[-1]:g}: {worst[-1]:.4f}", flush=True)
        done = [(h.n, h.t_horizon) for h in out[dim] if np.isfinite(h.t_horizon)]
        if len(done) >= 2:
            fit = growth_fit(*zip(*done))
            (a, b, r1), (c, p, r2) = fit["log"], fit["power"]
            print(f"S^{dim - 1}: t_h = {a:.3f} + {b:.3f} log n (rms {r1:.3f});  t_h = {c:.3f} n^{p:.3f} (rms {r2:.3f})")
    return out


def picture(results, n=4096, times=(4.0, 10.0)):
    """Tokens over the continuum before and after the horizon (S^1), and the gaps against t."""
    model = Model(4.0, 2, mask="causal", position_bias=1.0)
    rho0 = default_density(2)
    t_eval = np.concatenate([[0.0], times])
    tokens, _ = sample_tokens(rho0, n, 2, method="quasi", rng=0)
    particles = solvers.Particles(model, diagnostics="none").solve(tokens, t_eval, rtol=1e-7, atol=1e-9)
    continuum = solvers.FourierCircle(model, 48, positions=16).solve(rho0, t_eval, on_underresolved={"nodes": 64},
                                                                     rtol=1e-8, atol=1e-10)
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2), layout="constrained")
    theta = np.linspace(-np.pi, np.pi, 241)
    grid = np.stack([np.cos(theta), np.sin(theta)], -1)
    sigma = np.linspace(0.01, 1.0, 100)
    for ax, i in zip(axes[:2], (1, 2)):
        rho = np.array([continuum.density(grid, i, position=s) for s in sigma])
        ax.pcolormesh(theta, sigma, np.log10(np.maximum(rho, 1e-3)), cmap="Greys", shading="auto", vmin=-1)
        x = particles.positions[i]
        ax.plot(np.arctan2(x[:, 1], x[:, 0]), np.arange(1, n + 1) / n, ".", ms=0.8, color="C3", alpha=0.6)
        ax.set(xlabel=r"$\theta$", ylabel=r"position $\sigma$",
               title=f"t = {t_eval[i]:g}: tokens (red) over log10 ρ(t, σ, θ) (grey)")
    ax = axes[2]
    for h in results.get(2, []):
        ax.semilogy(h.times, h.gaps.max(axis=1), label=f"n = {h.n}")
    ax.axhline(0.05, ls="--", color="k", lw=0.8)
    ax.set(xlabel="t", ylabel="largest quarter gap", title=r"S$^1$, (SA), $\beta = 4$, $\lambda = 1$")
    ax.legend(fontsize="small")
    fig.savefig(IMG / "causal_horizon.png", dpi=110)


def main():
    quick = "--quick" in sys.argv
    dims = [int(v) for v in _arg("--dims", "2,3").split(",")]
    ns = [int(v) for v in _arg("--ns", "1024,2048" if quick else "1024,2048,4096,8192,16384").split(",")]
    results = measure(dims, ns, 16.0)
    picture(results)


if __name__ == "__main__":
    main()
