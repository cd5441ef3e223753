"""Pictures for docs/circle.md (run once; the PNGs under docs/img/ are committed).

    python docs/make_circle_figures.py [--no-particles]

* circle_run.png        the README example: (SA) β = 4, modes = 256, two von Mises bumps, t ∈ [0, 5]:
                        space-time density and E_β(t);
* circle_resolution.png a sharper two-bump ρ0: spectral tail against t for modes = 64, 128, 256
                        (each stops with UnderResolved at tail 1e-6) and for modes="auto";
* circle_particles.png  10 000 quasi-uniform weighted particles (solvers.Particles) from the same
                        ρ0 as the README example: weighted histograms over the PDE density at
                        t = 0, 2.5, 5, and W1(PDE, particles) against t.
"""
import pathlib
import sys

import numpy as np

import meanfield as mf
import solvers
from meanfield.measures import densities as D

IMG = pathlib.Path(__file__).resolve().parent / "img"


def readme_density():
    return D.mixture([D.von_mises_fisher([1.0, 0.0], 1.0), D.von_mises_fisher([-1.0, 0.0], 1.0)], [0.5, 0.5])


def sharp_density():
    return D.mixture([D.von_mises_fisher([1.0, 0.0], 4.0), D.von_mises_fisher([np.cos(2.0), np.sin(2.0)], 6.0)],
                     [0.6, 0.4])


def main(with_particles=True):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    model = mf.Model(beta=4.0, dim=2)
    t_eval = np.linspace(0, 5, 51)
    sol = solvers.FourierCircle(model, modes=256).solve(readme_density(), t_eval)
    sol.plot(path=IMG / "circle_run.png")
    print(f"circle_run: E(0) = {sol.energy[0]:.6f}, E(5) = {sol.energy[-1]:.6f}, "
          f"max tail {sol.diagnostics['spectral_tail'].max():.2e}, "
          f"max energy-identity error {sol.diagnostics['energy_rate_error'].max():.2e}")

    fig, ax = plt.subplots(1, 2, figsize=(11, 4))
    t_long = np.linspace(0, 5, 201)
    for K in (64, 128, 256):
        try:
            s = solvers.FourierCircle(model, modes=K, w1=False).solve(sharp_density(), t_long)
        except mf.UnderResolved as exc:
            s = exc.solution
            print(f"modes={K}: UnderResolved at t = {exc.t:.3f} (tail {exc.tail:.2e})")
        ax[0].semilogy(s.t, s.diagnostics["spectral_tail"], label=f"modes = {K}")
    auto = solvers.FourierCircle(model, modes="auto", w1=False).solve(sharp_density(), t_long)
    ax[0].semilogy(auto.t, auto.diagnostics["spectral_tail"], "k:", label='modes = "auto"')
    ax[0].axhline(1e-6, color="r", lw=0.8, label="tail_tol")
    ax[0].set(xlabel="t", ylabel="spectral tail", title="fixed resolutions stop with UnderResolved")
    ax[0].set_ylim(1e-17, 1e-4)
    ax[0].legend(fontsize=8)
    ax[1].semilogy(auto.t, auto.diagnostics["modes"], "k-")
    ax[1].set(xlabel="t", ylabel="modes K", title='modes = "auto": K doubles as the clusters sharpen')
    fig.tight_layout()
    fig.savefig(IMG / "circle_resolution.png", dpi=110)
    print(f"auto: final modes {auto.representation.modes}, {auto.stats['nsteps']} steps")

    if not with_particles:
        return
    try:
        Particles = solvers.Particles
    except AttributeError:
        print("solvers.Particles not available: no particle figure")
        return
    t_p = np.linspace(0, 5, 11)
    pde = solvers.FourierCircle(model, modes=256).solve(readme_density(), t_p)
    x0, w = mf.sample(readme_density(), 10_000, 2, method="quasi")
    part = Particles(model).solve(x0, t_p, weights=w)
    dist = np.array([mf.wasserstein(pde.measure(i), part.measure(i)) for i in range(len(t_p))])
    print("W1(PDE, particles):", " ".join(f"{v:.2e}" for v in dist))
    fig, ax = plt.subplots(1, 4, figsize=(15, 3.6))
    theta = np.linspace(-np.pi, np.pi, 1001)
    pts = np.stack([np.cos(theta), np.sin(theta)], -1)
    for a, i in zip(ax[:3], (0, 5, 10)):
        x = part.positions[i]
        ang = np.arctan2(x[:, 1], x[:, 0])
        a.hist(ang, bins=120, range=(-np.pi, np.pi), weights=part.weights * 120 / (2 * np.pi) * 2 * np.pi,
               color="C0", alpha=0.5, label="particles (weighted histogram)")
        a.plot(theta, pde.density(pts, i), "k-", lw=1.2, label="FourierCircle ρ")
        a.set(xlabel=r"$\theta$", title=f"t = {t_p[i]:g}")
    ax[0].set_ylabel(r"density relative to $\sigma$")
    ax[0].legend(fontsize=7)
    ax[3].semilogy(t_p, dist, "o-")
    ax[3].axhline(1e-3, color="r", lw=0.8)
    ax[3].set(xlabel="t", ylabel="W1", title="W1(PDE, 10 000 particles)")
    fig.tight_layout()
    fig.savefig(IMG / "circle_particles.png", dpi=110)


if __name__ == "__main__":
    main(with_particles="--no-particles" not in sys.argv)
