"""Pictures for docs/sphere.md (run once; the PNGs under docs/img/ are committed).

    python docs/make_sphere_figures.py [--no-crossval]

* sphere_run.png      (SA) β = 4, lmax = 127: Mollweide maps of ρ at t = 0, 1.5, 3 with weighted
                      particles (solvers.Particles, same ρ0) overlaid, and E_β(t);
* sphere_crossval.png (SA) β = 2, t ∈ [0, 3]: 20 000 quasi-uniform weighted particles against the PDE
                      (lmax = 48): max error of the degree <= 8 moments and W1 (binned LP on 3000 nodes, 20000-point
                      PDE measure) against t;
* sphere_convergence.png  error at t = 1 against lmax (spectral convergence).
"""
import pathlib
import sys
import time

import numpy as np

import meanfield as mf
import solvers

IMG = pathlib.Path(__file__).resolve().parent / "img"


def particles_or_none():
    try:
        return solvers.Particles
    except AttributeError:
        return None


def overlay(axes, sol_p, idx_p, every=1):
    """Scatter particle positions (marker area ∝ weight) on Mollweide axes."""
    w = np.asarray(sol_p.weights)
    for ax, i in zip(axes, idx_p):
        x = sol_p.positions[i]
        lon = np.arctan2(x[:, 1], x[:, 0])
        lat = np.arcsin(np.clip(x[:, 2], -1, 1))
        ax.scatter(lon[::every], lat[::every], s=5e3 * w[::every], c="cyan", alpha=0.6, lw=0)


def run_figure(Particles):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from meanfield.results.plotting import save

    rho0 = mf.densities.band_limited(3, 4, rng=3, floor=0.2)
    model = mf.Model(beta=4.0, dim=3)
    t = np.linspace(0, 3, 13)
    t0 = time.perf_counter()
    sol = solvers.SphericalHarmonics(model, lmax=127).solve(rho0, t, progress=False)
    print(f"PDE run: {time.perf_counter() - t0:.1f} s, {sol.stats}")
    fig = sol.plot(times=[0.0, 1.5, 3.0])           # the library's picture: maps, one colour bar, E_β(t)
    axes = [ax for ax in fig.axes if ax.name == "mollweide"]
    if Particles is not None:
        x0, w0 = mf.sample(rho0, 3000, 3, method="quasi")
        t0 = time.perf_counter()
        sp = Particles(model).solve(x0, t, weights=w0, progress=False)
        print(f"particles: {time.perf_counter() - t0:.1f} s")
        overlay(axes, sp, [0, 6, 12], every=3)
        axes[0].set_title("t = 0 (cyan: every third of 3000 weighted particles)", fontsize="medium")
    save(fig, IMG / "sphere_run.png")
    plt.close(fig)


def convergence_figure():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    model = mf.Model(beta=2.0, dim=3)
    axis = np.array([0.3, 0.5, 0.8]) / np.linalg.norm([0.3, 0.5, 0.8])
    rho0 = mf.densities.mixture([mf.densities.von_mises_fisher(axis, 2.0), mf.densities.uniform()])
    kw = dict(rtol=1e-12, atol=1e-14, progress=False)
    ref = solvers.SphericalHarmonics(model, lmax=48).solve(rho0, [0, 1.0], **kw).data[-1]
    Ls = [16, 18, 20, 22, 24, 26, 28, 32]
    errs = []
    for L in Ls:
        c = solvers.SphericalHarmonics(model, lmax=L, tail_tol=1.0).solve(rho0, [0, 1.0], **kw).data[-1]
        d = ref.copy()
        d[:, :L + 1, :L + 1] -= c
        errs.append(np.sqrt(np.sum(d ** 2)))
    print("convergence:", dict(zip(Ls, np.round(np.log10(errs), 2))))
    fig, ax = plt.subplots(figsize=(5, 3.5))
    ax.semilogy(Ls, errs, "o-")
    ax.set_xlabel(r"$\ell_{\max}$")
    ax.set_ylabel(r"$\|\rho^{\ell_{\max}}(1) - \rho^{48}(1)\|_{L^2(\sigma)}$")
    ax.set_title(r"spectral convergence, (SA) $\beta = 2$")
    fig.tight_layout()
    fig.savefig(IMG / "sphere_convergence.png", dpi=110)
    plt.close(fig)


def harmonic_moments(x, w, lmax):
    """∫ Y_lm dμ of the measure (x, w) for the σ-orthonormal real harmonics (`meanfield.measures.densities.real_sh`),
    in the layout of the spherical-harmonic coefficients (2, lmax + 1, lmax + 1)."""
    out = np.zeros((2, lmax + 1, lmax + 1))
    for l in range(lmax + 1):
        for m in range(-l, l + 1):
            out[0 if m >= 0 else 1, l, abs(m)] = w @ mf.densities.real_sh(l, m, x)
    return out


def crossval_figure(Particles):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    model = mf.Model(beta=2.0, dim=3)
    axis = np.array([0.3, 0.5, 0.8]) / np.linalg.norm([0.3, 0.5, 0.8])
    rho0 = mf.densities.mixture([mf.densities.von_mises_fisher(axis, 1.0), mf.densities.uniform()])
    t = np.linspace(0, 3, 7)
    pde = solvers.SphericalHarmonics(model, lmax=48).solve(rho0, t, progress=False)
    x0, w0 = mf.sample(rho0, 20000, 3, method="quasi")
    t0 = time.perf_counter()
    part = Particles(model).solve(x0, t, weights=w0, progress=False, rtol=1e-7, atol=1e-9)
    print(f"20 000 particles: {time.perf_counter() - t0:.1f} s")
    mom, w1 = [], []
    for i in range(len(t)):
        xi, wi = part.measure(i)
        mom.append(np.max(np.abs(harmonic_moments(xi, wi, 8) - pde.data[i][:, :9, :9])))
        w1.append(mf.wasserstein((xi, wi), pde.measure(i, n=20000), method="binned", n_bins=3000))
    for ti, m, w in zip(t, mom, w1):
        print(f"t = {ti:.1f}: max moment error {m:.2e}, W1 (binned, 3000 nodes) {w:.3e}")
    fig, ax = plt.subplots(figsize=(5.5, 3.5))
    ax.semilogy(t, mom, "o-", label=r"max $|\int Y_{lm} d\mu_N - \rho_{lm}|$, $l \leq 8$")
    ax.semilogy(t, w1, "s-", label=r"$W_1$ to the PDE measure (binned LP, 3000 nodes)")
    ax.axhline(1e-3, color="C0", ls=":", lw=1, label="required tolerance, moments (1e-3)")
    ax.axhline(2e-2, color="C1", ls=":", lw=1, label=r"required tolerance, $W_1$ (2e-2)")
    ax.set_xlabel("t")
    ax.legend(fontsize=8)
    ax.set_title("20 000 weighted particles vs PDE, (SA) $\\beta = 2$")
    fig.tight_layout()
    fig.savefig(IMG / "sphere_crossval.png", dpi=110)
    plt.close(fig)


def main():
    IMG.mkdir(exist_ok=True)
    Particles = particles_or_none()
    if Particles is None:
        print("solvers.Particles not available: no particle overlay, no cross-validation figure")
    run_figure(Particles)
    convergence_figure()
    if Particles is not None and "--no-crossval" not in sys.argv:
        crossval_figure(Particles)


if __name__ == "__main__":
    main()
