"""Pictures for docs/noise.md (run once; the PNGs under docs/img/ are committed).

    OPENBLAS_NUM_THREADS=1 python docs/make_noise_figures.py [--quick]

* noise_branches.png    bifurcation diagrams r(ν/ν_c) of (USA) on S^1 and S^2 for β/β_* = 0.5, 0.9,
                        1.1, 1.5, 2 (stable solid, unstable dashed), from `solvers.stationary.branch`;
* noise_landau.png      the Landau coefficient c(β) and the fold ν_fold/ν_c against β/β_*, d = 2, 3, 4;
* noise_hysteresis.png  the hysteresis loop from the dynamics at β = 2β_*: ν swept down then up,
                        noisy particles (n = 1000) on S^1 and S^2 and the PDE (FourierCircle) on S^1,
                        over the branch;
* noise_experiment_d2.png, noise_experiment_d3.png  the pictures of ``meanfield noise-transition``.
"""
import pathlib
import shutil
import sys
import tempfile

import numpy as np

from meanfield.experiments.noise_transition import draw_branch, hysteresis_run, noise_transition
from solvers import stationary

IMG = pathlib.Path(__file__).resolve().parent / "img"
FACTORS = (0.5, 0.9, 1.1, 1.5, 2.0)


def branches(plt):
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, d in zip(axes, (2, 3)):
        bs = stationary.beta_star(d)
        for k, f in enumerate(FACTORS):
            beta = f * bs
            ds = stationary.branch(beta, d, nu_min=0.5 * stationary.critical_noise(beta, d), sectors=(0, 1, 2))
            draw_branch(ax, ds, label=f"β = {f:g} β_* ({ds.attrs['transition'][:3]}.)", color=f"C{k}", uniform=k == 0)
        ax.set(xlabel=r"$\nu/\nu_c$", ylabel=r"$r = |\int x\rho\,d\sigma|$", xlim=(0.5, 1.3), ylim=(-0.02, 1),
               title=f"(USA) on $S^{d - 1}$, β_* = {bs:.4f}")
        ax.axvline(1.0, color="grey", lw=0.8, ls=":")
        ax.legend(fontsize=8, loc="upper right")
    fig.tight_layout()
    fig.savefig(IMG / "noise_branches.png", dpi=110)
    plt.close(fig)


def landau(plt):
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.0))
    for d in (2, 3, 4):
        bs = stationary.beta_star(d)
        x = np.linspace(0.05, 3.0, 120)
        axes[0].plot(x, [stationary.landau_coefficient(f * bs, d) for f in x], label=f"d = {d} (USA)")
        axes[0].plot(x, [stationary.landau_coefficient(f * bs, d, normalized=True) for f in x], ls="--",
                     color=axes[0].lines[-1].get_color(), label=f"d = {d} (SA)")
        xs = np.linspace(1.05, 3.0, 12)
        folds = [stationary.fold_point(f * bs, d, resolution=96).nu / stationary.critical_noise(f * bs, d)
                 for f in xs]
        axes[1].plot(xs, folds, "o-", ms=3, label=f"d = {d}")
    axes[0].axhline(0, color="k", lw=0.8)
    axes[0].axvline(1, color="grey", lw=0.8, ls=":")
    axes[0].set(xlabel=r"$\beta/\beta_*(d)$", ylabel=r"Landau coefficient $c$: $\nu = \nu_c(1 + c r^2 + \dots)$",
                title="c < 0 supercritical, c > 0 subcritical")
    axes[0].legend(fontsize=8)
    axes[1].set(xlabel=r"$\beta/\beta_*(d)$", ylabel=r"$\nu_{fold}/\nu_c$", title="fold of the subcritical branch (USA)")
    axes[1].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(IMG / "noise_landau.png", dpi=110)
    plt.close(fig)


def hysteresis(plt, quick):
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, d in zip(axes, (2, 3)):
        beta = 2 * stationary.beta_star(d)
        ds = stationary.branch(beta, d, nu_min=0.6 * stationary.critical_noise(beta, d), sectors=(0, 1, 2))
        nu_c, f = ds.attrs["nu_c"], ds.attrs["nu_fold"] / ds.attrs["nu_c"]
        draw_branch(ax, ds, label="stationary states", color="C0")
        down = np.linspace(f + 0.1, 0.6, 7 if quick else 11)
        nus = np.concatenate([down, down[::-1][1:]]) * nu_c
        half = down.size
        task = {"dim": d, "beta": beta, "normalized": False, "nus": nus}
        runs = [("particles", dict(task, method="particles", n=500 if quick else 1000, dt=0.01 / nu_c, seed=7,
                                   t_stage=6.0 / nu_c))]
        if d == 2:
            runs.append(("PDE", dict(task, method="pde", resolution="auto", t_stage=10.0 / nu_c)))
        for (name, t), col in zip(runs, ("C2", "C3")):
            r = hysteresis_run(t)
            ax.plot(nus[:half] / nu_c, r[:half], "v-", color=col, ms=6, lw=1, label=f"{name}: ν down")
            ax.plot(nus[half - 1:] / nu_c, r[half - 1:], "^-", color=col, ms=6, lw=1, alpha=0.7, label=f"{name}: ν up")
        ax.axvline(1.0, color="grey", lw=0.8, ls=":")
        ax.axvline(f, color="grey", lw=0.8, ls="-.")
        ax.set(xlabel=r"$\nu/\nu_c$", ylabel="r", ylim=(-0.02, 1), xlim=(0.55, f + 0.15),
               title=f"hysteresis on $S^{d - 1}$, β = 2β_* = {beta:.3f}")
        ax.legend(fontsize=8, loc="lower left")
    fig.tight_layout()
    fig.savefig(IMG / "noise_hysteresis.png", dpi=110)
    plt.close(fig)


def experiment(quick):
    with tempfile.TemporaryDirectory() as tmp:
        report = noise_transition(tmp, quick=quick, progress=False)
        print("\n".join(report.lines()))
        for d in (2, 3):
            shutil.copy(pathlib.Path(tmp) / f"noise_transition_d{d}.png", IMG / f"noise_experiment_d{d}.png")


def main(quick=False):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    IMG.mkdir(exist_ok=True)
    branches(plt)
    landau(plt)
    hysteresis(plt, quick)
    experiment(quick)


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
