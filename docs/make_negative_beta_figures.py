"""The synchronisation threshold for β < 0 on S^1, for docs/negative-beta.md (run once; the PNG under
docs/img/ is committed and the table is printed in Markdown).

    python docs/make_negative_beta_figures.py [--starts B] [--time T]

For n = 3..12 particles and β = −1, −0.95, …, 0, B iid uniform starts (default 400, seed 0) of (SA)
run to t = T (default 400) in one batch (`solvers.Particles`, dopri5). A run is *synchronised* when
every ⟨x_i, x_j⟩ > 1 − 1e-6 at T, *stuck* when it is not and no particle moved by more than 1e-6
between T/2 and T (a non-synchronised equilibrium, e.g. the equilateral triangle for n = 3), and
*moving* otherwise. Writes docs/img/negative_beta_threshold.png (the fraction not synchronised).
"""
import argparse
import pathlib

import numpy as np

import meanfield as mf
import solvers

IMG = pathlib.Path(__file__).resolve().parent / "img"
NS = range(3, 13)
BETAS = np.round(np.linspace(-1.0, 0.0, 21), 10)


def outcome(beta, n, starts, T, rng):
    """Fractions (synchronised, stuck, moving) of ``starts`` iid uniform starts of n particles at t = T."""
    theta = rng.uniform(0.0, 2 * np.pi, (starts, n))
    x0 = np.stack([np.cos(theta), np.sin(theta)], -1)
    sol = solvers.Particles(mf.Model(beta=beta, dim=2)).solve(x0, [0.0, T / 2, T], diagnostics="none")
    x, half = sol.positions[-1], sol.positions[1]
    closest = np.einsum("bid,bjd->bij", x, x).min(axis=(1, 2))
    synced = closest > 1 - 1e-6
    still = np.abs(x - half).max(axis=(1, 2)) < 1e-6
    return synced.mean(), (~synced & still).mean(), (~synced & ~still).mean()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=400)
    parser.add_argument("--time", type=float, default=400.0)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    table = np.array([[outcome(b, n, args.starts, args.time, rng) for b in BETAS] for n in NS])   # (n, β, 3)
    print("| n | " + " | ".join(f"{b:g}" for b in BETAS[::2]) + " |")
    print("|---" * (1 + len(BETAS[::2])) + "|")
    for n, row in zip(NS, table):
        print(f"| {n} | " + " | ".join(f"{1 - s:.3f}" + ("*" if m > 0 else "") for s, _, m in row[::2]) + " |")
    print("(fraction not synchronised at t = T; * some runs still moving)")

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.6), constrained_layout=True)
    im = ax.imshow(1 - table[..., 0], origin="lower", aspect="auto", cmap="viridis",
                   extent=(BETAS[0] - 0.025, BETAS[-1] + 0.025, NS[0] - 0.5, NS[-1] + 0.5))
    ax.axvline(-2 / 3, color="w", ls="--", lw=1)
    ax.axvline(-0.16, color="w", ls=":", lw=1)
    ax.set(xlabel="β", ylabel="n", title=f"(SA) on S^1: fraction of {args.starts} random starts not synchronised at t = {args.time:g}")
    fig.colorbar(im, ax=ax)
    IMG.mkdir(exist_ok=True)
    fig.savefig(IMG / "negative_beta_threshold.png", dpi=110)


if __name__ == "__main__":
    main()
