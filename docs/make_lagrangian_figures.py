"""Picture for docs/lagrangian.md (run once; the PNG under docs/img/ is committed).

    python docs/make_lagrangian_figures.py

lagrangian_circle.png: (SA) β = 10 on S^1 from a seeded random perturbation of the uniform density
(modes 1..10, amplitude 0.05), t ∈ [0, 90]:
  (a) FourierCircle with 512 modes: space–time density on a log colour scale, until it stops with
      UnderResolved as the clusters sharpen;
  (b) Lagrangian with adaptive panels (`solve_adaptive`, W1 tolerance 1e-4 at t = 90): the
      cell-averaged density (`LagrangianNodes.cell_averages`, 720 cells) through clustering, a
      quick first merger and a metastable plateau that ends in a late merger;
  (c) the cluster masses against time (`LagrangianNodes.clusters`) and the W1 error estimate.
Prints the figures quoted in the page.
"""
import pathlib
import time

import numpy as np

import meanfield as mf
import solvers

IMG = pathlib.Path(__file__).resolve().parent / "img"
BETA, T, SEED = 10.0, 90.0, 1


def initial_density(amplitude=0.05, modes=10, seed=SEED):
    phases = np.random.default_rng(seed).uniform(0, 2 * np.pi, modes)
    sizes = np.random.default_rng(seed + 100).random(modes)

    def rho0(x):
        theta = np.arctan2(x[..., 1], x[..., 0])
        return 1 + amplitude * (sizes * np.cos(theta[..., None] * np.arange(1, modes + 1) + phases)).sum(-1)

    return rho0


def main():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import LogNorm

    model = mf.Model(BETA, 2)
    rho0 = initial_density()
    t_eval = np.linspace(0, T, 361)
    try:
        spectral = solvers.FourierCircle(model, modes=512, w1=False).solve(rho0, t_eval, normalize=True)
        stop = None
    except mf.UnderResolved as exc:
        spectral, stop = exc.solution, exc.t
        print(f"FourierCircle(modes=512): UnderResolved at t = {stop:.3f} (tail {exc.tail:.2e})")
    t0 = time.perf_counter()
    lag = solvers.Lagrangian(model, panels=32, min_mass=0.02).solve_adaptive(rho0, t_eval, tol=1e-4, normalize=True)
    wall = time.perf_counter() - t0
    st, d = lag.stats, lag.diagnostics
    print(f"Lagrangian adaptive: {wall:.1f} s, rounds {st['rounds']}, nodes {st['nodes_per_round']}, "
          f"W1 estimates {np.array(st['estimate_per_round'])}, max density {d['max_density'][-1]:.2e}, "
          f"mass error {abs(lag.mass[-1] - lag.mass[0]):.1e}")
    nc = d["n_clusters"].astype(int)
    print("cluster counts:", [(float(lag.t[i]), int(nc[i])) for i in range(1, len(nc)) if nc[i] != nc[i - 1]])

    n = 720
    theta, cells = lag.representation.space_time(lag.data, n)
    fourier = spectral.representation
    grid = 2 * np.pi * (np.arange(n) + 0.5) / n
    spec = np.array([fourier.grid_values(c, n) for c in spectral.data])
    floor = 1e-4
    norm = LogNorm(vmin=floor, vmax=float(cells.max()))

    fig, ax = plt.subplots(1, 3, figsize=(16, 5.4), gridspec_kw={"width_ratios": [1, 1, 1.15]},
                           layout="constrained")
    ax[0].pcolormesh(grid, spectral.t, np.clip(spec, floor, None), shading="auto", cmap="magma", norm=norm)
    ax[0].set_ylim(0, T)
    if stop is not None:
        ax[0].axhline(stop, color="c", lw=1)
        ax[0].text(0.2, stop + 2, f"UnderResolved at t = {stop:.2f}", color="k", fontsize=9)
    ax[0].set(xlabel=r"$\theta$", ylabel="t", title="FourierCircle, 512 modes")
    mesh = ax[1].pcolormesh(theta, lag.t, np.clip(cells, floor, None), shading="auto", cmap="magma", norm=norm)
    for i, t in enumerate(lag.t[::2]):
        masses, centres = lag.representation.clusters(lag.data[2 * i])
        angles = np.mod(np.arctan2(centres[:, 1], centres[:, 0]), 2 * np.pi)
        ax[1].scatter(angles, np.full(len(masses), t), s=12 * masses, c="w", lw=0)
    ax[1].set(xlabel=r"$\theta$", ylabel="t", xlim=(0, 2 * np.pi),
              title=f"Lagrangian, {lag.representation.n} labels (max $\\rho$ = {d['max_density'][-1]:.0e})")
    fig.colorbar(mesh, ax=ax[:2], label=r"$\rho$: cell averages over $2\pi/720$ (relative to $\sigma$); "
                 "white: cluster centres", pad=0.01)
    for i, t in enumerate(lag.t):
        masses, _ = lag.representation.clusters(lag.data[i])
        ax[2].plot(np.full(len(masses), t), masses, "k.", ms=2)
    ax[2].set(xlabel="t", ylabel="cluster masses", title="cluster masses (mass >= 0.02)", ylim=(0, 1))
    ax2 = ax[2].twinx()
    ax2.semilogy(lag.t, np.maximum(d["error_estimate"], 1e-16), "C1-", lw=1)
    ax2.set_ylabel("W1 error estimate (to the previous round)", color="C1")
    fig.savefig(IMG / "lagrangian_circle.png", dpi=110)
    print("wrote", IMG / "lagrangian_circle.png")


if __name__ == "__main__":
    main()
