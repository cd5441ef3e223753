"""The pictures of the metastability experiment (Section 6.3, Figure 4 of the paper; docs/mathematics.md
§5, §9; docs/metastability.md): growth rates, cluster histories, the mean cluster count over (t, β), the
first counts and the energy staircase. The figure machinery is `meanfield.results.plotting`'s.
"""
import numpy as np

from ..observables.energy import dirac_energy, uniform_energy
from ..results.figures import pyplot
from ..transformer.kernels import fastest_mode
from ..transformer.model import Model


def plot_growth_rates(pred, dims):
    """The linear growth rates ς_l(β) of docs/mathematics.md §5 over (β, l) on each S^{d-1} of ``dims``,
    with the fastest degree k*(β) drawn over them. ``pred["S1"]``, ``pred["S2"]``: dicts with ``beta``
    (B,), ``rate`` (B, lmax + 1) and ``k_star`` (B,) (the metastability experiment's ``prediction``)."""
    plt = pyplot()
    fig, axes = plt.subplots(1, len(dims), figsize=(5.5 * len(dims), 4), squeeze=False)
    for ax, d in zip(axes[0], dims):
        p = pred[f"S{d - 1}"]
        m = ax.pcolormesh(p["beta"], np.arange(p["rate"].shape[1]), p["rate"].T, shading="nearest", cmap="viridis")
        fig.colorbar(m, ax=ax, label=r"$\varsigma_l(\beta)$")
        ax.step(p["beta"], p["k_star"], "w-", where="mid", lw=2, label=r"$k^*(\beta)$")
        ax.set(xlabel=r"$\beta$", ylabel="degree l", ylim=(0.5, 10.5), title=f"growth rates on $S^{{{d - 1}}}$ (SA)")
        ax.legend(loc="upper left")
    fig.tight_layout()
    return fig


def plot_cluster_histories(runs, cases, seeds, particles, quasi_ns):
    """Space–time density of one S^1 continuum run through clustering and merging; the cluster counts
    of every run (continuum solid, particles dashed; seeds offset by 0.04); the energy staircases,
    (E_β − E_β[σ])/(E_β[δ] − E_β[σ]) between the uniform minimum and the Dirac maximum (Proposition 3.4).

    ``runs[(dim, beta, seed)]`` and ``particles[(dim, beta, seed, n)]``: dicts with ``t``, ``count`` and
    ``energy`` (and ``space_time`` = (θ, cell averages) for the S^1 continuum runs), for every
    ``(dim, beta)`` of ``cases``, ``seeds`` seeds and the largest n of ``quasi_ns``."""
    plt = pyplot()
    from matplotlib.colors import LogNorm  # deferred: matplotlib is heavy


    fig, axes = plt.subplots(1, 3, figsize=(16, 4.6))
    circle = [(d, b) for d, b in cases if d == 2]
    if circle:
        d, b = circle[len(circle) // 2]
        r = runs[(d, b, 0)]
        theta, cells = r["space_time"]
        m = axes[0].pcolormesh(theta, r["t"], np.clip(cells, 1e-3, None), shading="auto", cmap="magma",
                               norm=LogNorm(vmin=1e-3, vmax=max(float(cells.max()), 10.0)))
        fig.colorbar(m, ax=axes[0], label="cell-averaged density")
        axes[0].set(xlabel=r"$\theta$", ylabel="t", yscale="log", ylim=(5.0, r["t"][-1]),
                    title=f"continuum on $S^1$, $\\beta = {b:g}$, seed 0")
    nmax = max(quasi_ns)
    for c, (d, b) in enumerate(cases):
        e_min, e_max = uniform_energy(b, d), dirac_energy(b)
        for s in range(seeds):
            r, p = runs[(d, b, s)], particles[(d, b, s, nmax)]
            lab = f"$S^{{{d - 1}}}$, $\\beta = {b:g}$" if s == 0 else None
            axes[1].step(r["t"], r["count"] + 0.04 * s, "-", where="post", lw=1.2, label=lab, color=f"C{c}")
            axes[1].step(p["t"], p["count"] + 0.04 * s, "--", where="post", lw=0.8, color=f"C{c}")
            axes[2].plot(r["t"], (r["energy"] - e_min) / (e_max - e_min), "-", lw=1, color=f"C{c}", label=lab)
    axes[1].set(xscale="log", xlabel="t", ylabel="clusters",
                title=f"clusters: continuum (solid), particles n = {nmax} (dashed)")
    axes[2].set(xscale="log", xlabel="t", ylabel=r"$(E_\beta - E_\beta[\sigma]) / (E_\beta[\delta] - E_\beta[\sigma])$",
                title="energy staircase (continuum)")
    axes[1].legend(fontsize=7)
    axes[2].legend(fontsize=7)
    fig.tight_layout()
    return fig


def plot_mean_clusters(f4):
    """The mean number of clusters over (t, β) (white: no realisation separated yet), with k*(β)
    overlaid: red dashed lines where k* changes, k* written between them; and the mean first count
    (Figure 4 of the paper). ``f4``: a dict with ``t`` (T,), ``beta`` (B,), ``mean_clusters`` (B, T) and
    ``first_count_mean`` (B,)."""

    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(12.5, 4.6))
    t, betas = np.asarray(f4["t"], dtype=float), np.asarray(f4["beta"], dtype=float)
    keep = t > 0
    m = axes[0].pcolormesh(t[keep], betas, np.asarray(f4["mean_clusters"], dtype=float)[:, keep], shading="nearest",
                           cmap="viridis")
    fig.colorbar(m, ax=axes[0], label="mean number of clusters")
    fine = np.linspace(betas.min() - 0.5, betas.max() + 0.5, 400)
    kf = np.array([fastest_mode(Model(beta=b, dim=2))[0] for b in fine])
    jumps = np.nonzero(np.diff(kf))[0]
    for j in jumps:
        axes[0].axhline(0.5 * (fine[j] + fine[j + 1]), color="r", ls="--", lw=1.2)
    edges = np.concatenate([[fine[0]], 0.5 * (fine[jumps] + fine[jumps + 1]), [fine[-1]]])
    for lo, hi, k in zip(edges[:-1], edges[1:], kf[np.concatenate([[0], jumps + 1])]):
        mid = 0.5 * (max(lo, betas.min()) + min(hi, betas.max()))
        if betas.min() <= mid <= betas.max():
            axes[0].text(t[keep][0] * 1.1, mid, f"k* = {k}", color="k", va="center", fontsize=9)
    axes[0].set(xscale="log", xlabel="t", ylabel=r"$\beta$", ylim=(betas.min() - 0.5, betas.max() + 0.5),
                title="Figure 4 analogue: iid particles on $S^1$")
    axes[1].step(fine, kf, "k-", where="mid", label=r"$k^*(\beta)$")
    axes[1].plot(betas, np.asarray(f4["first_count_mean"], dtype=float), "o", label="mean first count (particles)")
    axes[1].set(xlabel=r"$\beta$", ylabel="clusters", title="first cluster count against the linear theory")
    axes[1].legend()
    fig.tight_layout()
    return fig


def plot_first_counts(res):
    """The distribution of the first cluster count of iid particles over seeds (bars) beside the linear
    theory for white-noise initial data (crosses; docs/mathematics.md §5). ``res[label]``: dicts with
    ``first_count_distribution`` {count: seeds} and ``white_noise_prediction`` {count: probability}."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for j, (key, r) in enumerate(res.items()):
        dist = r["first_count_distribution"]
        total = max(sum(dist.values()), 1)
        ks = np.array(sorted(dist))
        ax.bar(ks + 0.25 * (j - len(res) / 2), [dist[k] / total for k in ks], width=0.22, label=key, alpha=0.8,
               color=f"C{j}")
        pred = r["white_noise_prediction"]
        pk = np.array(sorted(pred))
        ax.plot(pk + 0.25 * (j - len(res) / 2), [pred[k] for k in pk], "x", color=f"C{j}", ms=8)
    ax.set(xlabel="first cluster count", ylabel="fraction of seeds",
           title="iid particles (bars) against the white-noise linear theory (x)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def plot_staircase(stairs):
    """E_β (3.5) against log t for n = 5 particles at β = 4 on S^1, one line per seed, the plateaus of
    the first shaded and labelled with their cluster counts (Geshkovski, Koubbi, Polyanskiy, Rigollet
    (2024)). ``stairs``: dicts with ``t``, ``energy``, ``seed`` and ``plateaus`` [{start, end, energy,
    clusters}] (`meanfield.observables.diagnostics.energy_plateaus`)."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    for j, r in enumerate(stairs):
        main = j == 0
        ax.plot(r["t"][1:], r["energy"][1:], "-", lw=2 if main else 0.8, alpha=1 if main else 0.5,
                label=f"seed {r['seed']}" + (" (plateaus shaded)" if main else ""))
    for p in stairs[0]["plateaus"]:
        ax.axvspan(p["start"], p["end"], color="0.85", zorder=0)
        ax.text(np.sqrt(p["start"] * p["end"]), p["energy"], f"{p['clusters']:.0f}", ha="center", va="bottom")
    ax.set(xscale="log", xlabel="t", ylabel=r"$E_\beta$", title=r"$n = 5$ particles, $\beta = 4$ on $S^1$: the staircase")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig
