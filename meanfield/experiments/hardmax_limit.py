"""``meanfield hardmax-limit``: softmax attention against its limit β → ∞ (Problem 6 of the paper, §9.3;
docs/attention.md, section "Hardmax"; docs/experiments.md).

Tokens in R^d follow (9.4), ż_i = Σ_j softmax_j(β⟨Qz_i, Kz_j⟩) V(z_j − z_i) (`solvers.Particles` with
``domain="euclidean"``: its field Σ_j softmax_j V z_j plus the feed-forward term −V z_i, written exactly
as W relu(Uz) with U = [I; −I], W = [−V, V], `softmax_counterpart`), at β = 4 … 256, against the hardmax
dynamics (9.5)–(9.6) of `solvers.Hardmax` from the same tokens. It reports

* the sup-distance max_{t ≤ T, i} |z_i^β(t) − z_i^∞(t)| at each β and its rate (a power law in β,
  fitted on the three largest β: at small β, β·gap is not yet large and softmax is not near hardmax);
* how long tokens stay within δ of the hardmax vertices at finite β: from the hardmax limit (each token
  on its vertex) the softmax run's first exit of a token from its δ-ball, log(exit time) against β, its
  slope and R² (Alcalde, Geshkovski, Ruiz-Balet: times exponential in β), beside the smallest score gap
  g = min_v (s_vv − max_{w ≠ v} s_vw) of the vertices, the slope that the pull e^{−β g} predicts;
* the Frank–Wolfe picture (Alcalde et al.: each hardmax step is a Frank–Wolfe step): the cells
  {z : argmax_j ⟨Qz, Kz_j⟩ = k}, the vertices and the trajectories, as an image and a movie.
"""
from dataclasses import dataclass

import numpy as np

import solvers
from ..errors import InvalidInput
from ..transformer.model import Model
from .options import Options, experiment, option
from .report import Report, fit_power_law, show_progress


def softmax_counterpart(model, beta):
    """The softmax model whose `solvers.Particles` run in R^d is (9.4) for the hardmax ``model``: the same
    Q, K, V at inverse temperature ``beta``, with the feed-forward term −V z = W relu(Uz) (exact:
    relu(x) − relu(−x) = x) that turns Particles' Σ_j P_ij V z_j into Σ_j P_ij V(z_j − z_i).

    Parameters
    ----------
    model : `meanfield.Model` with ``attention="hardmax"`` (one head).
    beta : float > 0

    Returns
    -------
    `meanfield.Model`

    Examples
    --------
    >>> import numpy as np, meanfield as mf
    >>> from meanfield.experiments.hardmax_limit import softmax_counterpart
    >>> soft = softmax_counterpart(mf.Model(beta=1.0, dim=2, attention="hardmax"), 64.0)
    >>> soft.beta, soft.attention, soft.feedforward.value(np.array([[0.5, -2.0]])).tolist()
    (64.0, 'softmax', [[-0.5, 2.0]])
    """
    Q, K, V = model.heads[0]
    d = model.dim
    U = np.vstack([np.eye(d), -np.eye(d)])
    W = np.hstack([-V, V])
    return Model(beta=float(beta), dim=d, Q=Q, K=K, V=V, mlp=(W, U, np.zeros(2 * d)), activation="relu")


def sup_distance(a, b):
    """max over the saved times and tokens of |a − b| (two position arrays (T, n, d))."""
    return float(np.max(np.linalg.norm(np.asarray(a) - np.asarray(b), axis=-1)))


def fixed_tokens(sol):
    """The tokens that a hardmax Solution keeps at their place on all its saved times (the vertices)."""
    moved = np.max(np.linalg.norm(sol.positions - sol.positions[0], axis=-1), axis=0)
    return np.flatnonzero(moved == 0.0)


def score_gaps(z, M, vertices):
    """For each vertex v: s_vv − max_{w vertex, w ≠ v} s_vw (s_vw = z_v^T M z_w): the other tokens end at
    the vertices, so e^{−β·gap} sets the pull on v at finite β once they have arrived."""
    S = z[vertices] @ M @ z[vertices].T
    if len(vertices) < 2:
        return np.full(len(vertices), np.inf)
    return np.diag(S) - (S - np.diag(np.full(len(vertices), np.inf))).max(axis=1)


def draw_tokens(n, M, min_gap, rng, attempts=10000):
    """n tokens uniform in [−1, 1]^2 whose score margins (largest minus second largest s_ij, each i) are at
    least ``min_gap``: near-ties slow the convergence of softmax (β·gap must be large). Returns (z, draws)."""
    for k in range(1, attempts + 1):
        z = rng.uniform(-1.0, 1.0, (n, 2))
        top = np.sort(z @ M @ z.T, axis=1)
        if n < 2 or np.min(top[:, -1] - top[:, -2]) >= min_gap:
            return z, k
    raise InvalidInput(f"`min_gap`={min_gap:g}: no draw of {n} tokens in {attempts} has all score margins that "
                       "large; lower `min_gap` or `n`.")


def clustered(z, vertices):
    """Each token moved onto the vertex nearest to it (the hardmax limit configuration: tokens end at vertices)."""
    nearest = np.argmin(np.linalg.norm(z[:, None, :] - z[vertices][None], axis=-1), axis=1)
    return z[vertices][nearest]


def exit_times(model, z_start, betas, delta, t_max, count=240):
    """For each β, the first time a token of the softmax run (9.4) from ``z_start`` (the tokens on the
    hardmax vertices, `clustered`) is δ from where it started (interpolated in log t between saved times;
    inf when none leaves before ``t_max``)."""
    t = np.concatenate([[0.0], np.geomspace(1e-2, t_max, count)])
    out = []
    for beta in betas:
        sol = solvers.Particles(softmax_counterpart(model, beta)).solve(z_start, t, domain="euclidean", rtol=1e-8,
                                                                       atol=1e-10, progress=False)
        far = np.max(np.linalg.norm(sol.positions - z_start, axis=-1), axis=1)
        k = np.flatnonzero(far > delta)
        if k.size == 0:
            out.append(np.inf)
            continue
        k = int(k[0])
        lo, hi = np.log(max(t[k - 1], 1e-3)), np.log(t[k])
        frac = (delta - far[k - 1]) / (far[k] - far[k - 1])
        out.append(float(np.exp(lo + frac * (hi - lo))))
    return np.array(out)


def fit_line(x, y):
    """Least squares y ≈ a + b x: (b, a, R²) over the finite points."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    ok = np.isfinite(x) & np.isfinite(y)
    if ok.sum() < 2:
        return float("nan"), float("nan"), float("nan")
    b, a = np.polyfit(x[ok], y[ok], 1)
    resid = y[ok] - (a + b * x[ok])
    total = np.sum((y[ok] - y[ok].mean()) ** 2)
    return float(b), float(a), float(1.0 - resid @ resid / total) if total > 0 else 1.0


def hardmax_against_softmax(model, z0, t, betas, progress=None):
    """The hardmax Solution and, for each β, the softmax Solution (9.4) and its sup-distance on [0, T]."""
    hard = solvers.Hardmax(model).solve(z0, t, progress=False)
    soft, dist = {}, []
    for beta in betas:
        s = solvers.Particles(softmax_counterpart(model, beta)).solve(z0, t, domain="euclidean", rtol=1e-10,
                                                                     atol=1e-12, progress=False)
        soft[beta] = s
        dist.append(sup_distance(s.positions, hard.positions))
        if progress is not None:
            progress.update(1)
    return hard, soft, np.array(dist)


# -------------------------------------------------------------------------------------------------
# the Frank–Wolfe picture
# -------------------------------------------------------------------------------------------------
def _cells(ax, z, M, box, pixels=240):
    """Colour the plane by the index of argmax_j ⟨Mz, z_j⟩ (the hardmax cells of the tokens z)."""
    xs = np.linspace(box[0], box[1], pixels)
    ys = np.linspace(box[2], box[3], pixels)
    X, Y = np.meshgrid(xs, ys)
    P = np.stack([X.ravel(), Y.ravel()], axis=1)
    owner = np.argmax(P @ M @ z.T, axis=1).reshape(X.shape)
    ax.imshow(owner % 20, origin="lower", extent=box, cmap="tab20", alpha=0.35, interpolation="nearest",
              vmin=0, vmax=19, aspect="auto")


def _box(hard):
    lo, hi = hard.positions.min(axis=(0, 1)), hard.positions.max(axis=(0, 1))
    pad = 0.08 * max(hi - lo)
    return (lo[0] - pad, hi[0] + pad, lo[1] - pad, hi[1] + pad)


def _draw(ax, hard, soft, M, i, vertices, box, upto=True):
    z = hard.positions[i]
    _cells(ax, z, M, box)
    k = slice(0, i + 1) if upto else slice(None)
    for j in range(z.shape[0]):
        ax.plot(*hard.positions[k, j].T, color="k", lw=0.8)
        if soft is not None:
            ax.plot(*soft.positions[k, j].T, color="C3", lw=0.6, ls="--")
    ax.scatter(*z.T, s=10, color="k", zorder=3)
    ax.scatter(*z[vertices].T, s=40, marker="s", facecolor="none", edgecolor="C0", zorder=4)
    ax.set(xlim=box[:2], ylim=box[2:], aspect="equal")


def _figures(report, hard, soft, beta, M, vertices, dist, betas, exits, exit_betas, frames):
    box = _box(hard)
    fig, axes = report.subplots(1, 3, figsize=(14, 4.6))
    _draw(axes[0], hard, soft, M, len(hard.t) - 1, vertices, box, upto=True)
    axes[0].set_title(f"cells at t = {hard.t[-1]:g}; hardmax (black) and softmax β = {beta:g} (red dashed)",
                      fontsize=8)
    axes[1].loglog(betas, dist, "o-")
    axes[1].set(xlabel="β", ylabel="sup_t max_i |z^β − z^∞|", title="sup-distance on [0, T]")
    finite = np.isfinite(exits)
    axes[2].semilogy(np.asarray(exit_betas)[finite], exits[finite], "o-")
    axes[2].set(xlabel="β", ylabel="exit time", title="first exit of a token from its vertex's δ-ball")
    fig.tight_layout()
    report.save_figure(fig, "hardmax_limit.png")
    if report.out is not None and frames > 1:
        _movie(report, hard, soft, M, vertices, box, frames)


def _movie(report, hard, soft, M, vertices, box, frames):
    """The Frank–Wolfe picture frame by frame (cells of the current tokens), as a GIF."""
    from ..results.figures import pyplot, style
    from ..results.movies import gif_frame

    plt = pyplot()
    images = []
    for i in np.unique(np.linspace(0, len(hard.t) - 1, frames).round().astype(int)):
        with style():
            fig, ax = plt.subplots(figsize=(5, 5), dpi=80)
            _draw(ax, hard, soft, M, int(i), vertices, box)
            ax.set_title(f"t = {hard.t[i]:.2f}", fontsize=9)
            fig.canvas.draw()
            images.append(gif_frame(np.asarray(fig.canvas.buffer_rgba())[..., :3].copy()))
            plt.close(fig)
    images[0].save(report.path("hardmax_limit.gif"), save_all=True, append_images=images[1:], duration=100, loop=0)
    report.files.append("hardmax_limit.gif")


# -------------------------------------------------------------------------------------------------
# the experiment
# -------------------------------------------------------------------------------------------------
@dataclass
class HardmaxLimitOptions(Options):
    """Softmax attention against its hardmax limit (Problem 6): the sup-distance on [0, T] against beta and
    its rate, the exit times of the vertex tokens from their delta-balls against beta (slope and R^2), and the
    Frank-Wolfe picture (cells, vertices, trajectories) as an image and a movie; tokens in R^2, Q = K = V = I
    unless qk is given.

    The options of `hardmax_limit` and of ``meanfield hardmax-limit``.
    """

    n: int = option(12, "number of tokens", low=2, high=200, quick=8)
    seed: int = option(0, "seed of the initial tokens (uniform in [-1, 1]^2)", low=0)
    min_gap: float = option(0.05, "smallest score margin of the initial tokens (draws are repeated until it holds)",
                            low=0.0)
    qk: tuple[float, ...] = option((1.0, 1.0), "the diagonal of Q^T K (K = diag(qk), Q = I)", low=0.0, low_open=True)
    T: float = option(3.0, "the horizon of the sup-distance", low=0.0, low_open=True)
    times: int = option(151, "saved times on [0, T]", low=2, quick=61)
    betas: tuple[float, ...] = option((4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0), "softmax inverse temperatures",
                                      low=0.0, low_open=True, quick=(4.0, 16.0, 64.0, 256.0))
    exit_scale: tuple[float, ...] = option((2.0, 4.0, 6.0, 8.0, 10.0), "the exit times are measured at beta = "
                                           "exit_scale / g, g the smallest vertex gap", low=0.0, low_open=True,
                                           quick=(2.0, 5.0, 8.0))
    delta: float = option(0.05, "radius of the balls about the vertices", low=0.0, low_open=True)
    t_max: float = option(1e4, "the longest exit time looked for", low=0.0, low_open=True, quick=1e3)
    frames: int = option(60, "frames of the movie (1: no movie)", low=1, quick=20)


@experiment("hardmax-limit", HardmaxLimitOptions, parallel=False,
            help="softmax against its hardmax limit: sup-distance, exit times, Frank-Wolfe cells (Problem 6)")
def hardmax_limit(out, o, *, quick, progress):
    """Run the comparison (see the module docstring); returns the `Report`."""
    from tqdm.auto import tqdm

    if len(o.qk) != 2:
        raise InvalidInput(f"`qk` must hold the 2 diagonal entries of Q^T K (tokens in R^2), got {len(o.qk)}.")
    progress = show_progress(progress)
    settings = {"quick": quick, "n": o.n, "seed": o.seed, "qk": list(o.qk), "T": o.T, "times": o.times,
                "betas": list(o.betas), "exit_scale": list(o.exit_scale), "min_gap": o.min_gap, "delta": o.delta, "t_max": o.t_max}
    report = Report("hardmax-limit", out, settings)
    report.write()
    with report.guard():
        model = Model(beta=1.0, dim=2, K=np.diag(o.qk), attention="hardmax")
        M = np.diag(o.qk)
        z0, draws = draw_tokens(o.n, M, o.min_gap, np.random.default_rng(o.seed))
        t = np.linspace(0.0, o.T, o.times)
        betas = np.sort(np.array(o.betas))
        bar = tqdm(total=len(betas), desc="softmax", unit="β") if progress else None
        hard, soft, dist = hardmax_against_softmax(model, z0, t, betas, bar)
        if bar is not None:
            bar.close()
        rate, const = fit_power_law(betas[-3:], dist[-3:])
        vertices = fixed_tokens(hard)
        gaps = score_gaps(hard.positions[-1], M, vertices)
        gap = float(np.min(gaps)) if gaps.size else np.inf
        if not 0 < gap < np.inf:
            raise InvalidInput(f"`seed`={o.seed}: the hardmax run has {len(vertices)} vertices and no positive gap "
                               "between them to measure exit times by; choose another seed or more tokens `n`.")
        exit_betas = np.asarray(o.exit_scale) / gap
        exits = exit_times(model, clustered(hard.positions[-1], vertices), exit_betas, o.delta, o.t_max)
        slope, icpt, r2 = fit_line(exit_betas, np.log(exits))
        report.results.update({
            "events": hard.stats["events"], "event_log": hard.stats["event_log"],
            "ties": len(hard.stats["ties"]), "vertices": vertices.tolist(),
            "sup_distance": dict(zip(map(float, betas), map(float, dist))), "rate": rate, "constant": const,
            "draws": draws, "exit_times": dict(zip(map(float, exit_betas), map(float, exits))),
            "exit_slope": slope, "exit_intercept": icpt, "exit_r2": r2,
            "smallest_vertex_gap": gap, "exit_slope_over_gap": slope / gap})
        report.note(f"{o.n} tokens, {hard.stats['events']} events of the hardmax dynamics on [0, {o.T:g}], "
                    f"{len(vertices)} fixed (vertices)")
        report.note("sup-distance: " + ", ".join(f"β = {b:g}: {d:.3g}" for b, d in zip(betas, dist))
                    + f"; rate β^-{rate:.2f} over the three largest β")
        report.note(f"exit times: slope of log(exit) against β {slope:.3f} (R² = {r2:.3f}); smallest vertex "
                    f"gap g = {gap:.3f}, slope/g = {slope / gap:.2f}")
        report.check("the sup-distance to the hardmax solution falls with β at the three largest β",
                     len(dist) >= 3 and bool(np.all(np.diff(dist[-3:]) < 0)), ", ".join(f"{d:.3g}" for d in dist),
                     compared="max over [0, T] and tokens of |z^β − z^∞| at increasing β (small β is not yet "
                              "asymptotic: β·gap must be large)", tolerance="decreasing")
        report.check("the slope of log(exit time) is the smallest vertex gap", abs(slope / gap - 1.0) <= 0.25,
                     f"slope {slope:.4f}, gap g = {gap:.4f}, slope/g = {slope / gap:.3f}",
                     compared="the fitted slope against g = min_v (s_vv − max_{w ≠ v} s_vw)", tolerance="within 25%")
        report.check("log(exit time) grows linearly with β", slope > 0 and r2 > 0.9,
                     f"slope {slope:.3f}, R² = {r2:.3f}, {int(np.isfinite(exits).sum())} finite exit times",
                     compared="least squares of log(exit time) against β", tolerance="slope > 0, R² > 0.9")
        _figures(report, hard, soft[betas[-1]], betas[-1], M, vertices, dist, betas, exits, exit_betas, o.frames)
        report.finish()
    return report
