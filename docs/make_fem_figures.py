"""Pictures for docs/fem.md:  OMP_NUM_THREADS=1 python docs/make_fem_figures.py  (about a minute).

    docs/img/fem_circle.png       space-time map and energy of an attractive (SA) run on the 256-gon
    docs/img/fem_sphere.png       Mollweide maps of an (SA) run on the icosphere r = 5 (SHT potential)
    docs/img/fem_convergence.png  L1 and W1 errors at t = 1 against exact spectral references
"""
import pathlib

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import meanfield as mf  # noqa: E402
from solvers.fem import FiniteElements, reference_quadrature  # noqa: E402
from solvers.references import fourier_collocation, legendre_zonal  # noqa: E402

IMG = pathlib.Path(__file__).resolve().parent / "img"


def fig_circle():
    rho0 = mf.densities.perturbed_uniform(0.1, 3, dim=2)
    sol = FiniteElements(mf.Model(beta=9.0, dim=2), vertices=256).solve(rho0, np.linspace(0, 6, 61))
    sol.plot(path=IMG / "fem_circle.png")


def fig_sphere():
    rho0 = mf.densities.band_limited(3, 6, rng=1, scale=0.3)
    sol = FiniteElements(mf.Model(beta=9.0, dim=3), refinement=5, potential="sht").solve(
        rho0, np.linspace(0, 3, 4), normalize=True)
    sol.plot(path=IMG / "fem_sphere.png")


def fig_convergence():
    circ0 = mf.densities.mixture([mf.densities.von_mises_fisher([1, 0], 2.0),
                                  mf.densities.von_mises_fisher([-0.6, 0.8], 3.0)], [0.6, 0.4])
    sph0 = mf.densities.mixture([mf.densities.von_mises_fisher([0, 0, 1], 1.0),
                                 mf.densities.von_mises_fisher([0, 0, -1], 1.0)], [0.6, 0.4])
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    M = 4096
    tf = 2 * np.pi * (np.arange(M) + 0.5) / M
    xf = np.stack([np.cos(tf), np.sin(tf)], -1)
    xq, wq = reference_quadrature(3, 64)
    xg = mf.sphere_quadrature(1500, 3)[0]
    for normalized, mk in ((True, "o"), (False, "s")):
        kind = "SA" if normalized else "USA"
        m = mf.Model(beta=2.0, dim=2, normalized=normalized)
        rf = fourier_collocation(2.0, circ0, 1.0, normalized=normalized)(tf)
        hs, l1, w1 = [], [], []
        for n in (64, 128, 256, 512, 1024):
            s = FiniteElements(m, vertices=n, potential="fft")
            fv = s.solve(circ0, [0, 1.0]).density(xf)
            hs.append(s.h)
            l1.append(np.mean(np.abs(fv - rf)))
            w1.append(mf.wasserstein((xf, fv / fv.sum()), (xf, rf / rf.sum())))
        axes[0].loglog(hs, l1, mk + "-", label=f"{kind} $L^1$")
        axes[0].loglog(hs, w1, mk + "--", label=f"{kind} $W_1$")
        m = mf.Model(beta=2.0, dim=3, normalized=normalized)
        ref = legendre_zonal(2.0, lambda z: sph0(np.stack([np.sqrt(1 - z * z), 0 * z, z], -1)), 1.0, normalized=normalized)
        rq, rg = ref(xq[:, 2]), ref(xg[:, 2])
        hs, l1, w1 = [], [], []
        for r in (2, 3, 4, 5):
            s = FiniteElements(m, refinement=r, kernel_cells=2.0, potential="sht")
            sol = s.solve(sph0, [0, 1.0])
            hs.append(s.h)
            l1.append(wq @ np.abs(sol.density(xq) - rq))
            fv = sol.density(xg)
            w1.append(mf.wasserstein((xg, fv / fv.sum()), (xg, rg / rg.sum())))
        axes[1].loglog(hs, l1, mk + "-", label=f"{kind} $L^1$")
        axes[1].loglog(hs, w1, mk + "--", label=f"{kind} $W_1$")
        print(kind, "sphere L1", np.round(l1, 6), "W1", np.round(w1, 6))
    for ax, title in zip(axes, ("$S^1$: polygon, N = 64 … 1024", "$S^2$: icosphere, r = 2 … 5")):
        h = np.array(ax.get_lines()[0].get_xdata())
        ax.loglog(h, 0.5 * ax.get_lines()[0].get_ydata()[-1] * (h / h[-1]) ** 2, "k:", label="$h^2$")
        ax.set_xlabel("mesh size h")
        ax.set_ylabel("error at t = 1")
        ax.set_title(title + r", $\beta = 2$")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(IMG / "fem_convergence.png", dpi=110)


if __name__ == "__main__":
    IMG.mkdir(exist_ok=True)
    fig_circle()
    fig_sphere()
    fig_convergence()
