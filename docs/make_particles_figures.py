"""Pictures for docs/particles.md: run once, writes docs/img/particles_*.png.

    python docs/make_particles_figures.py
"""
import pathlib

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import meanfield as mf  # noqa: E402
import solvers  # noqa: E402

IMG = pathlib.Path(__file__).resolve().parent / "img"


def trajectories():
    """(SA), β = 4, n = 64 iid uniform particles on S^2: trajectories and E_β(t)."""
    rng = np.random.default_rng(1)
    x0, w0 = mf.sample(mf.densities.uniform(), 64, 3, rng=rng)
    t = np.linspace(0, 15, 151)
    sol = solvers.Particles(mf.Model(beta=4.0, dim=3)).solve(x0, t, weights=w0, progress=False)
    sol.plot(path=IMG / "particles_trajectories.png")
    plt.close("all")
    return sol


def figure3_panel():
    """Fraction of clustered pairs p(t, β) (δ = 1e-3) for (SA), d = 3, n = 32, B = 256 realisations."""
    rng = np.random.default_rng(2)
    B, n = 256, 32
    x0 = rng.standard_normal((B, n, 3))
    x0 /= np.linalg.norm(x0, axis=-1, keepdims=True)
    t = np.linspace(0, 30, 61)
    betas = [1.0, 3.0, 5.0, 9.0]
    fig, ax = plt.subplots(1, 2, figsize=(10, 3.8))
    for beta in betas:
        sol = solvers.Particles(mf.Model(beta=beta, dim=3)).solve(x0, t, rtol=1e-6, atol=1e-9, progress=False)
        ax[0].plot(t, sol.diagnostics["clustered_fraction"].mean(axis=1), label=fr"$\beta={beta:g}$")
        ax[1].plot(t, sol.diagnostics["clusters"].mean(axis=1), label=fr"$\beta={beta:g}$")
    ax[0].set_xlabel("t")
    ax[0].set_ylabel(r"fraction of pairs with $\langle x_i,x_j\rangle\geq 1-10^{-3}$")
    ax[1].set_xlabel("t")
    ax[1].set_ylabel("mean number of clusters")
    ax[1].set_yscale("log")
    for a in ax:
        a.legend(fontsize=8)
    ax[0].set_title(f"(SA) on $S^2$, n = {n}, B = {B}")
    fig.tight_layout()
    fig.savefig(IMG / "particles_clustering.png", dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    IMG.mkdir(exist_ok=True)
    trajectories()
    figure3_panel()
    print("wrote", sorted(p.name for p in IMG.glob("particles_*.png")))
