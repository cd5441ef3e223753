"""The table and the picture of docs/random-parameters.md: our phase diagrams with random parameters
(Figure 5 of the paper) side by side with the authors' phase-diagrams.py.

    python docs/make_random_parameters_figures.py --authors DIR [--seeds 4] [--quick] [table] [figure3] [same] [figure]

(default: all four). DIR holds the pickles of the authors' code, run separately in its own
environment (it is not part of this project): ``{case}_s{seed}.pkl`` with the keys ``times_list``,
``betas_list``, ``density_tensor`` for the cases gaussian_identity, goe_identity, gaussian_wishart and
gaussian_minus (``--randomKQ 1|3 --randomV 0|1|3``, d = 3, n = 32, batch 1024, betas 1, 5, 9,
``--use_softmax``, step 0.1, maxtime 30), and ``fig3_s{seed}.pkl`` (the identities, 16 betas from 0.5
to 8). Without DIR only our side is computed.

* table: p_d(t, β) for β = 1, 5, 9 at the authors' checkpoints nearest to t = 10, 20, 30 (their grid
  linspace(0, 30, 200) recorded at the first step at or after each: steps 100, 201 and 300, so
  t = 10, 20.1 and 30), ours with the same grid (``n_times=200``), means over the seeds with their
  standard errors, and z = (ours − theirs)/sqrt(se_ours² + se_theirs²);
* figure3: p_d(30, β) for the 16 β of Figure 3 (identities), ours against theirs, to three decimals;
* same: from the authors' own draws (``{case}_draws_s1.npz`` in DIR, for fig3 and the four cases:
  for each β the initial points and matrices their run ``{case}_s1.pkl`` drew with torch seed 1,
  re-drawn in the order of their code: normalize(torch.randn(1024, 32, 3)), then B, then V), our
  particle step against theirs, p_d at every checkpoint but the first (which they record after one
  step);
* figure: docs/img/random_parameters_figure5.png, p_d(t, β) over β = 0.5 ... 9 for the four cases
  (one seed), and under each p_d(t) at β = 1, 5, 9, ours (lines) against the authors' (points).

Standard errors: ours from the spread of the realisations' clustered fractions (`p_stderr`, each
realisation independent: own initial points and own matrices); the authors' pickles hold only the
means, so theirs is the spread of their seeds' means over sqrt(seeds), floored at ours (the same
distribution has the same spread).
"""
import os
import pathlib
import pickle
import sys
import tempfile

os.environ.setdefault("MPLBACKEND", "Agg")

import numpy as np  # noqa: E402

from meanfield.experiments import phase_diagram  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent
IMG = ROOT / "docs" / "img"
CASES = {"gaussian_identity": ("gaussian", "identity"), "goe_identity": ("goe", "identity"),
         "gaussian_wishart": ("gaussian", "wishart"), "gaussian_minus": ("gaussian", "minus-qk")}
CHECKPOINTS = (66, 133, 199)          # of linspace(0, 30, 200): recorded at steps 100, 201, 300
COMMON = dict(dim=3, n=32, t_end=30.0, scheme="euler-normalize", dt=0.1, clusters=False, progress=False)


def ours(qk, v, betas, seed, n_times=200, realisations=1024):
    """(t, p, se) of our phase diagram: the recorded times, p_d (β, t) and its standard error."""
    import xarray as xr

    with tempfile.TemporaryDirectory() as tmp:
        phase_diagram(tmp, betas=list(betas), realisations=realisations, n_times=n_times, qk=qk, v=v, seed=seed,
                      **COMMON)
        with xr.open_dataset(pathlib.Path(tmp) / "phase_diagram.nc", decode_times=False) as ds:
            return ds["time"].values, ds["p"].values, ds["p_stderr"].values


def authors(folder, name):
    """The authors' runs of one case: (times, betas, [p (β, t) per seed])."""
    files = sorted(pathlib.Path(folder).glob(f"{name}_s*.pkl"))
    runs = [pickle.load(open(f, "rb")) for f in files]
    if not runs:
        return None
    return (np.asarray(runs[0]["times_list"]), np.asarray(runs[0]["betas_list"]),
            [np.asarray(r["density_tensor"], dtype=float) for r in runs])


def combine(ps, ses=None):
    """Mean over seeds and its standard error: from the per-run errors if given, else from the spread."""
    ps = np.asarray(ps)
    if ses is not None:
        return ps.mean(0), np.sqrt(np.sum(np.square(ses), axis=0)) / len(ps)
    spread = ps.std(0, ddof=1) / np.sqrt(len(ps)) if len(ps) > 1 else np.full(ps.shape[1:], np.nan)
    return ps.mean(0), spread


def table(folder, seeds):
    betas = (1.0, 5.0, 9.0)
    print("| B = QᵀK, V | β | t | ours (mean ± se) | authors (mean ± se) | z |")
    print("|---|---|---|---|---|---|")
    worst = 0.0
    for name, (qk, v) in CASES.items():
        runs = [ours(qk, v, betas, seed) for seed in range(1, seeds + 1)]
        t = runs[0][0]
        p, se = combine([r[1] for r in runs], [r[2] for r in runs])
        theirs = authors(folder, name) if folder else None
        if theirs is not None:
            q, qse = combine(theirs[2])
            qse = np.fmax(np.nan_to_num(qse), se * np.sqrt(len(runs) / len(theirs[2])))
        for b, beta in enumerate(betas):
            for k in CHECKPOINTS:
                cell = f"{p[b, k]:.4f} ± {se[b, k]:.4f}"
                other, z = "—", ""
                if theirs is not None:
                    zk = (p[b, k] - q[b, k]) / np.hypot(se[b, k], qse[b, k])
                    worst = max(worst, abs(zk))
                    other, z = f"{q[b, k]:.4f} ± {qse[b, k]:.4f} ({len(theirs[2])} runs)", f"{zk:+.1f}"
                print(f"| {qk}, {v} | {beta:g} | {t[k]:.3g} | {cell} ({len(runs)} seeds) | {other} | {z} |", flush=True)
    if worst:
        print(f"largest |z| = {worst:.2f} over {len(CASES) * 9} cells")


def figure3(folder, seeds=2):
    betas = np.linspace(0.5, 8.0, 16)
    runs = [ours("identity", "identity", betas, seed, n_times=201) for seed in range(seeds)]
    p, se = combine([r[1][:, -1] for r in runs], [r[2][:, -1] for r in runs])
    theirs = authors(folder, "fig3") if folder else None
    print("| β | " + " | ".join(f"{b:g}" for b in betas) + " |")
    print("|---" * (betas.size + 1) + "|")
    print(f"| ours ({seeds} seeds) | " + " | ".join(f"{x:.3f}" for x in p) + " |")
    if theirs is not None:
        q = np.mean([r[:, -1] for r in theirs[2]], axis=0)
        qse = se * np.sqrt(seeds / len(theirs[2]))
        scale = np.hypot(se, qse)
        z = np.divide(p - q, scale, out=np.where(p == q, 0.0, np.inf), where=scale > 0)   # se 0: all clustered
        print(f"| authors ({len(theirs[2])} runs) | " + " | ".join(f"{x:.3f}" for x in q) + " |")
        print("| z | " + " | ".join(f"{x:+.1f}" for x in z) + " |")
        print(f"largest |z| = {np.max(np.abs(z)):.2f}; standard errors {se.min():.4f} ... {se.max():.4f}")


def same_points(folder):
    import meanfield as mf
    import solvers

    pairs = 1024 * 32 * 31
    print("| B = QᵀK, V | β | max over checkpoints of abs(ours − theirs) | in pairs (of 1 015 808) | p_d(30): ours, theirs |")
    print("|---|---|---|---|---|")
    worst = 0.0
    for name, (qk, v) in {"fig3": ("identity", "identity"), **CASES}.items():
        run = pickle.load(open(pathlib.Path(folder) / f"{name}_s1.pkl", "rb"))
        times, betas, q = (np.asarray(run[k], dtype=float) for k in ("times_list", "betas_list", "density_tensor"))
        draws = np.load(pathlib.Path(folder) / f"{name}_draws_s1.npz")
        t_run, inverse = np.unique(0.1 * np.ceil(times / 0.1 - 1e-9), return_inverse=True)
        for k, beta in enumerate(betas):
            # their x ← x + h (A x) V acts on rows: V here is their V transposed; ⟨x_i, B x_j⟩ with K = B
            heads = None if name == "fig3" else [(None, draws["B"][k], np.swapaxes(draws["V"][k], -1, -2))]
            solver = solvers.Particles(mf.Model(beta=float(beta), dim=3), delta=1e-3,
                                       diagnostics=("clustered_fraction",))
            sol = solver.solve(draws["x0"][k], t_run, method="euler-normalize", dt=0.1, save="diagnostics",
                               progress=False, parameters=heads)
            p = np.asarray(sol.diagnostics["clustered_fraction"]).mean(axis=1)[inverse]
            diff = np.abs(p[1:] - q[k, 1:]).max()
            worst = max(worst, diff)
            print(f"| {qk}, {v} | {beta:g} | {diff:.1e} | {diff * pairs:.0f} | {p[-1]:.3f}, {q[k, -1]:.3f} |",
                  flush=True)
    print(f"largest difference {worst:.1e} ({worst * pairs:.0f} pairs)")


def figure(folder, quick=False):
    import matplotlib.pyplot as plt

    betas = np.linspace(0.5, 9.0, 9 if quick else 18)
    fig, axes = plt.subplots(2, 4, figsize=(17, 7.2), gridspec_kw={"height_ratios": [1.35, 1]})
    for c, (name, (qk, v)) in enumerate(CASES.items()):
        t, p, _ = ours(qk, v, betas, seed=1, n_times=201, realisations=256 if quick else 1024)
        ax = axes[0, c]
        mesh = ax.pcolormesh(t, betas, p, shading="auto", cmap="viridis", vmin=0, vmax=1)
        ax.set(xlabel="t", ylabel=r"$\beta$", title=f"QᵀK {qk}, V {v}")
        t3, p3, _ = ours(qk, v, (1.0, 5.0, 9.0), seed=1, realisations=256 if quick else 1024)
        theirs = authors(folder, name) if folder else None
        ax = axes[1, c]
        for b, (beta, color) in enumerate(zip((1, 5, 9), ("C0", "C1", "C3"))):
            ax.plot(t3, p3[b], color=color, lw=1.6, label=fr"ours, $\beta$ = {beta}")
            if theirs is not None:
                q = np.mean(theirs[2], axis=0)
                step = 0.1 * np.ceil(theirs[0] / 0.1 - 1e-9)
                ax.plot(step[::8], q[b, ::8], "o", color=color, ms=3.5, mfc="none",
                        label=f"authors ({len(theirs[2])} runs)" if b == 0 else None)
        ax.set(xlabel="t", ylabel=r"$p_d(t,\beta)$", ylim=(-0.02, 1.02))
        ax.legend(fontsize=7, loc="lower right")
    fig.colorbar(mesh, ax=axes[0, :].tolist(), label=r"$p_d(t,\beta)$", shrink=0.9)
    fig.suptitle("Random parameters (Figure 5 of the paper): (SA), d = 3, n = 32, B = 1024 realisations, each "
                 "with its own matrices; euler-normalize, dt = 0.1, δ = 1e-3")
    IMG.mkdir(exist_ok=True)
    fig.savefig(IMG / "random_parameters_figure5.png", dpi=100, bbox_inches="tight")
    print("wrote", IMG / "random_parameters_figure5.png")


if __name__ == "__main__":
    args = sys.argv[1:]
    folder = args[args.index("--authors") + 1] if "--authors" in args else None
    seeds = int(args[args.index("--seeds") + 1]) if "--seeds" in args else 4
    chosen = [a for a in args if a in ("table", "figure3", "same", "figure")] or ["table", "figure3", "same", "figure"]
    if "table" in chosen:
        table(folder, seeds)
    if "figure3" in chosen:
        figure3(folder)
    if "same" in chosen and folder:
        same_points(folder)
    if "figure" in chosen:
        figure(folder, quick="--quick" in args)
