"""``meanfield phase-diagram``: the Figure 3 experiment (Section 6.2–6.3 of the paper; docs/mathematics.md §7).

For i.i.d. uniform initial particles on S^{d-1}, p_d(t, β) = P(⟨x_1(t), x_2(t)⟩ >= 1 − δ) is estimated
as the fraction of ordered pairs i ≠ j with ⟨x_i(t), x_j(t)⟩ >= 1 − δ, averaged over B realisations
(defaults n = 32, δ = 1e-3, B = 1024). Overlaid:

* Γ_∞,δ (6.12): the time t*(β) at which the equiangular solution γ_β of (6.9) (SA) or (6.10) (USA)
  reaches 1 − δ (Theorems 6.8–6.9), solved with `scipy.integrate.solve_ivp`;
* the empirical curve Γ_d,δ: the first saved time with p_d >= 1/2 (the level p* = 1/2, docs/mathematics.md §7).

Checks: at t = 0 the estimate matches the exact P(⟨x, y⟩ >= 1 − δ) for independent uniform points;
the particle solver reproduces γ_β exactly for orthonormal initial data (d >= n, Theorem 6.8;
docs/mathematics.md §7); the
smallest β clusters by the end; p_d stays in [0, 1]. Optionally counts clusters (metastability,
Figure 4).
"""
from dataclasses import dataclass

import numpy as np
from scipy.integrate import solve_ivp
from scipy.special import betainc
from tqdm.auto import tqdm

from ..errors import Interrupted, InvalidInput
from ..transformer.model import NORMALIZATIONS, Model
from ..measures.sampling import uniform_points
from ..validation import check_memory
from .report import Report, show_progress
from .options import Options, at_most, experiment, option
from .parallel import check_parallel, cluster, map_tasks
import solvers
from ..observables.diagnostics import clustered_pair_fraction
from ..results.plotting import suptitle
from solvers.particles import Layers


def equiangular_rhs(beta, n, normalized=True):
    """The right-hand side of (6.9) (SA) or (6.10) (USA) for γ = ⟨x_i, x_j⟩, i ≠ j."""
    def rhs(t, g):
        e = np.exp(beta * (g - 1.0))                     # e^{β(γ−1)}: scaled by e^{-β}
        core = (1.0 - g) * ((n - 1) * g + 1.0)
        if normalized:
            return 2.0 * e * core / (1.0 + (n - 1) * e)
        return 2.0 / n * np.exp(beta * g) * core
    return rhs


def gamma_curve(beta, n, t, normalized=True):
    """γ_β(t) at the times ``t`` (γ_β(0) = 0), from (6.9)/(6.10) with rtol 1e-11; for an array of β,
    one row per β (one vector ODE: the equations do not couple)."""
    t = np.asarray(t, dtype=float)
    b = np.asarray(beta, dtype=float)
    sol = solve_ivp(equiangular_rhs(b.reshape(-1), n, normalized), (0.0, float(t[-1])), np.zeros(b.size),
                    t_eval=t, rtol=1e-11, atol=1e-13, method="DOP853")
    return sol.y[0] if b.ndim == 0 else sol.y


def gamma_crossing(beta, n, delta, normalized=True, t_max=1e6):
    """t*(β): the time at which γ_β(t) = 1 − δ, so that (t*(β), β) lies on Γ_∞,δ (6.12); inf if not by
    ``t_max``. For an array of β, an array (one vector ODE, stopped when every γ_β has crossed)."""
    b = np.asarray(beta, dtype=float)
    level = 1.0 - delta

    def crossing(k):
        event = lambda t, g: g[k] - level  # noqa: E731
        event.direction = 1
        return event

    events = [crossing(k) for k in range(b.size)]
    done = lambda t, g: np.min(g) - level  # noqa: E731
    done.terminal, done.direction = True, 1
    sol = solve_ivp(equiangular_rhs(b.reshape(-1), n, normalized), (0.0, t_max), np.zeros(b.size),
                    events=events + [done], rtol=1e-11, atol=1e-13, method="DOP853")
    t_star = np.array([float(e[0]) if e.size else np.inf for e in sol.t_events[:-1]])
    return float(t_star[0]) if b.ndim == 0 else t_star


def pair_probability_uniform(dim, delta):
    """P(⟨x, y⟩ >= 1 − δ) for independent uniform x, y on S^{dim-1}: ½·I_{1−(1−δ)²}((d−1)/2, ½), δ <= 1."""
    s = 1.0 - (1.0 - delta) ** 2
    return 0.5 * float(betainc(0.5 * (dim - 1), 0.5, s))


def clustered_fraction(positions, delta):
    """Fraction of ordered pairs i ≠ j with ⟨x_i, x_j⟩ >= 1 − δ, one value per leading index of (..., n, d)."""
    return np.asarray(clustered_pair_fraction(positions, delta))


def equiangular_check(beta, n=6, normalized=True, t_end=4.0, progress=False):
    """Max |⟨x_1(t), x_2(t)⟩ − γ_β(t)| for n orthonormal particles in d = n (Theorem 6.8; docs/mathematics.md §7)."""

    t = np.linspace(0.0, t_end, 21)
    sol = solvers.Particles(Model(beta=beta, dim=n, normalized=normalized)).solve(
        np.eye(n), t, rtol=1e-10, atol=1e-12, progress=progress)
    x = np.asarray(sol.positions)
    g = np.einsum("tid,tjd->tij", x, x)
    off = g[:, ~np.eye(n, dtype=bool)]
    return float(np.max(np.abs(off - gamma_curve(beta, n, t, normalized)[:, None])))


QK = ("identity", "gaussian", "goe")
VALUES = ("identity", "wishart", "plus-qk", "minus-qk")
DRAWS = ("realisation", "beta", "once")
SPAN_TOL = 1e-3            # Gram eigenvalues above this count in the span dimension (the authors' threshold)


def random_parameters(qk, v, dim, rng, size=None):
    """One draw of the random parameters of Figure 5 (Problem 2 of the paper): the query-key matrix
    B = QᵀK, so that ⟨Qx, Ky⟩ = xᵀBy, and the value matrix V, from matrices G with i.i.d. N(0, 1)
    entries (docs/random-parameters.md):

    * ``qk``: "gaussian" B = G₁G₂/√d, "goe" B = (G + Gᵀ)/√2, "identity" B = I;
    * ``v``: "wishart" V = GGᵀ/√d, "plus-qk" V = Bᵀ/c and "minus-qk" V = −Bᵀ/c with c = √d (gaussian),
      √(d + 1) (goe), 1 (identity), "identity" V = I.

    V acts on column vectors, ẋ_i = P_{x_i} Σ_j A_ij V x_j; the authors' V = ±B/c multiplies row
    vectors, which is V = ±Bᵀ/c here. ``rng`` a numpy Generator (B is drawn first, then V);
    ``size`` None for one pair of (d, d) matrices, else the number of realisations, each with its
    own (stacks (size, d, d)). Returns (B, V), None for an identity.
    """
    if qk not in QK:
        raise InvalidInput(f"`qk` must be one of {', '.join(map(repr, QK))}, got {qk!r}.")
    if v not in VALUES:
        raise InvalidInput(f"`v` must be one of {', '.join(map(repr, VALUES))}, got {v!r}.")
    shape = (dim, dim) if size is None else (size, dim, dim)

    def gaussian():
        return rng.standard_normal(shape)

    def transpose(a):
        return np.swapaxes(a, -1, -2)

    B, c = None, 1.0
    if qk == "gaussian":
        B, c = gaussian() @ gaussian() / np.sqrt(dim), np.sqrt(dim)
    elif qk == "goe":
        G = gaussian()
        B, c = (G + transpose(G)) / np.sqrt(2.0), np.sqrt(dim + 1.0)
    if v == "wishart":
        G = gaussian()
        V = G @ transpose(G) / np.sqrt(dim)
    elif v == "identity":
        V = None
    else:
        sign = 1.0 if v == "plus-qk" else -1.0
        V = sign * (np.eye(dim) if B is None else transpose(B)) / c
    return B, V


def step_times(t, dt):
    """The saved times of an Euler run on the step grid: each t_k moved to the first step at or after
    it, dt·⌈t_k/dt⌉ (⌈·⌉ to within 1e-9 steps, so that a t_k on the grid stays), as the authors'
    phase-diagrams.py records its checkpoints."""
    return dt * np.ceil(np.asarray(t, dtype=float) / dt - 1e-9) + 0.0      # + 0.0: no −0


def layer_parameters(k, batch, *, dim, qk, v, draw, seed, layers):
    """The heads [(None, B, V)] of each of ``layers`` layers for β number k (`random_parameters`), or
    None for the identities. ``draw``: "realisation" (a stack of ``batch`` draws, one per realisation,
    fresh for each β), "beta" (one draw for all realisations, fresh for each β) or "once" (one draw for
    the whole run). The draws come from the stream seeded by (seed, 1, k) ((seed, 1) for "once"), so
    that a β's parameters do not depend on which worker runs it."""
    if qk == "identity" and v == "identity":
        return None
    rng = np.random.default_rng([seed, 1] if draw == "once" else [seed, 1, k])
    size = batch if draw == "realisation" else None
    return [[(None,) + random_parameters(qk, v, dim, rng, size)] for _ in range(layers)]


@dataclass
class PhaseDiagramOptions(Options):
    """P(<x_1(t), x_2(t)> >= 1 - delta) over a (t, beta) grid for random particles, with the curve Gamma
    of the equiangular ODE (6.9)/(6.10) overlaid.

    The options of `phase_diagram` and of ``meanfield phase-diagram``.
    """

    dim: int = option(3, "ambient dimension d", low=2)
    n: int = option(32, "particles per realisation", low=2, flags=("-n", "--particles"))
    realisations: int = option(1024, "realisations B, independent initial conditions", low=1,
                               flags=("-B", "--realisations"), quick=128)
    delta: float = option(1e-3, "clustering threshold δ in <x_i, x_j> >= 1 - δ", low=0.0, low_open=True, high=1.0)
    betas: tuple[float, ...] = option(tuple(map(float, np.linspace(0.9, 9.0, 10))), "beta values", low=0.0,
                                      shown="10 values 0.9 ... 9", quick=tuple(map(float, np.linspace(0.9, 9.0, 5))))
    t_end: float = option(30.0, "final time", low=0.0, low_open=True)
    n_times: int = option(61, "saved times linspace(0, t_end, n_times) (the Euler scheme: each at the first step at "
                          "or after it)", low=2, quick=at_most(31))
    normalized: bool = option(True, "(SA) if true, (USA) otherwise (Γ then uses (6.10))", flags=("--usa",),
                              flag_help="(USA) instead of (SA)")
    scheme: str = option("adaptive", "particle time stepping: error-controlled, or the authors' Euler step then "
                         "normalisation", choices=("adaptive", "euler-normalize"))
    dt: float = option(0.1, "step of --scheme euler-normalize", low=0.0, low_open=True)
    clusters: bool = option(True, "also record the mean number of clusters (metastability, Figure 4)",
                            flags=("--no-clusters",), flag_help="do not count clusters")
    cluster_delta: float = option(1e-2, "particles in one cluster when <x_i, x_j> >= 1 - cluster_delta", low=0.0,
                                  low_open=True, high=1.0)
    qk: str = option("identity", "query-key matrix B = QᵀK: identity, gaussian G1 G2/√d, goe (G + Gᵀ)/√2 "
                     "(Figure 5)", choices=QK)
    v: str = option("identity", "value matrix V: identity, wishart G Gᵀ/√d, plus-qk Bᵀ/c, minus-qk -Bᵀ/c "
                    "(c = √d gaussian, √(d+1) goe)", choices=VALUES)
    draw: str = option("realisation", "random matrices drawn per realisation, per β, or once for the run",
                       choices=DRAWS)
    layer_period: float | None = option(None, "draw fresh matrices at t = T, 2T, ... (layers that differ)",
                                        low=0.0, low_open=True, shown="none: one layer")
    span_dimension: bool = option(False, "also record the dimension of the span of the tokens (Gram eigenvalues "
                                  "above 1e-3: rank collapse)")
    cluster_sizes: bool = option(False, "also record the distribution of cluster sizes (at cluster_delta)")
    normalization: str = option("post", "where the layer normalisation sits: a speed factor on each token's "
                                "direction (docs/normalization.md)", choices=NORMALIZATIONS)
    mix_depth: float | None = option(None, "τ of --normalization mix (Post-LN for t <= τ, Pre-LN after)", low=0.0,
                                     low_open=True, shown="none: 1 under mix")
    mlp_width: int | None = option(None, "add a random feed-forward term of this width, one per realisation "
                                   "(random_mlp; docs/feedforward.md)", low=1, shown="none: attention alone")
    seed: int = option(0, "random seed", low=0)

    def __post_init__(self):
        super().__post_init__()
        if self.mix_depth is not None and self.normalization != "mix":       # as `Model` refuses it
            raise InvalidInput(f"`mix_depth` applies to normalization 'mix' only, got normalization "
                               f"{self.normalization!r} with mix_depth {self.mix_depth:g}.")


def random_mlp(width, dim, rng, size=None):
    """A random feed-forward term (W, U, b) of ``width``: W_ij ~ N(0, 1/w), U_ij ~ N(0, 1/d), b_i ~ N(0, 1)
    (the scale at which the MLP's field and the attention's are both of order 1); with ``size`` B a
    leading axis of B independent draws (one MLP per realisation)."""
    lead = () if size is None else (size,)
    W = rng.standard_normal(lead + (dim, width)) / np.sqrt(width)
    U = rng.standard_normal(lead + (width, dim)) / np.sqrt(dim)
    return W, U, rng.standard_normal(lead + (width,))


@experiment("phase-diagram", PhaseDiagramOptions, writes="phase_diagram.nc",
            help="the Figure 3 phase diagram with the curve Gamma (Figure 5: random Q, K, V)")
def phase_diagram(out, o, *, quick, progress, workers, scheduler):
    """The Figure 3 phase diagram p_d(t, β) with Γ_∞,δ overlaid; returns the `Report`.

    ``workers``, ``scheduler``: one task per β on dask workers (see
    `meanfield.experiments.parallel.map_tasks`); every realisation starts from the same points, so the
    result does not depend on them.

    A feed-forward term (``mlp_width``, docs/feedforward.md): one `random_mlp` per realisation, drawn from
    the stream seeded by (seed, 2), the same for every β.

    Random parameters (Figure 5, docs/random-parameters.md): ``qk``, ``v`` (`random_parameters`),
    ``draw`` and ``layer_period`` (`layer_parameters`); the equiangular curve Γ stays that of the
    identities. With ``scheme="euler-normalize"`` each saved time is recorded at the first step at or
    after it (`step_times`): the run takes exactly ⌈t_end/dt⌉ steps of dt per β, and the file's
    ``time`` holds the times of the recorded states (``requested_time`` the asked ones).
    """
    dim, n, delta, t_end, n_times, B = o.dim, o.n, o.delta, o.t_end, o.n_times, o.realisations
    normalized, scheme, dt, seed = o.normalized, o.scheme, o.dt, o.seed
    workers, scheduler = check_parallel(workers, scheduler)
    betas = np.array(o.betas, dtype=float)
    progress = show_progress(progress)
    requested = np.linspace(0.0, t_end, n_times)
    t = step_times(requested, dt) if scheme == "euler-normalize" else requested
    t_run, inverse = np.unique(t, return_inverse=True)       # a step records every t_k that falls on it
    identity = o.qk == "identity" and o.v == "identity"
    layers = 1 if o.layer_period is None else max(1, int(np.ceil(t_run[-1] / o.layer_period - 1e-9)))
    if not identity:
        check_memory(layers * (B if o.draw == "realisation" else 1) * 16 * dim * dim, "layer_period", o.layer_period)
    kind = "SA" if normalized else "USA"
    settings = {"dim": dim, "n": n, "betas": betas, "t_end": t_end, "n_times": n_times, "realisations": B,
                "delta": delta, "cluster_delta": o.cluster_delta, "kind": kind, "scheme": scheme, "dt": dt,
                "seed": seed, "qk": o.qk, "v": o.v, "draw": o.draw, "layer_period": o.layer_period, "quick": quick,
                "normalization": o.normalization, "mlp_width": o.mlp_width}
    report = Report("phase-diagram", out, settings)
    report.write()
    # the workers (if any) start first: they warm up while Γ is computed here
    with report.guard(), cluster(workers, scheduler) as client:
        # Γ_∞,δ from the equiangular ODE (cheap; first, so an interrupted run still has it)
        t_star = gamma_crossing(betas, n, delta, normalized)
        gammas = gamma_curve(betas, n, t, normalized)
        report.results["gamma_curve"] = {"beta": betas, "t_star": t_star}
        report.write()

        rng = np.random.default_rng(seed)
        x0 = uniform_points(B * n, dim, rng).reshape(B, n, dim)
        rows = {name: np.full((betas.size, t.size), np.nan) for name in ("p", "p_stderr", "clusters", "span")}
        sizes = np.full((betas.size, t.size, n), np.nan) if o.cluster_sizes else None
        bar = None
        if progress:
            bar = tqdm(total=betas.size, desc=f"phase diagram d={dim} n={n} B={B}", unit="β")
        task = dict(x0=x0, t=t_run, betas=betas, dim=dim, normalized=normalized, scheme=scheme, dt=dt, delta=delta,
                    clusters=o.clusters, cluster_delta=o.cluster_delta, span=o.span_dimension,
                    sizes=o.cluster_sizes, layer=_layer(o),
                    mlp=None if o.mlp_width is None else random_mlp(o.mlp_width, dim, np.random.default_rng([seed, 2]), B),
                    draws=None if identity else dict(qk=o.qk, v=o.v, draw=o.draw, seed=seed, layers=layers,
                                                     period=o.layer_period))

        checked = (float(betas[0]), float(betas[-1]))                  # β of the equiangular check
        try:
            eq_errors = _run_betas(task, client, checked, rows, sizes, inverse, bar)
        finally:
            if bar is not None:
                bar.close()
            _save(report, betas, t, requested, rows, sizes, gammas, t_star, delta, n, dim, B, settings)

        _check_results(report, o, betas, t, rows, B, identity, eq_errors, t_star)
        report.finish()
    return report


def _run_betas(task, client, checked, rows, sizes, inverse, bar):
    """Every β of the phase diagram, with the two equiangular checks beside them: on the dask
    ``client``'s workers, else on the threads of `meanfield.threads.default_threads` (one run per thread),
    else one after the other; the rows filled in place as the runs end. Returns the equiangular errors.
    On Ctrl-C the saved times of the runs it stopped are kept (`map_tasks`)."""
    betas = task["betas"]
    eq_errors = []

    def fill(k, result):
        for name, row in result.items():                  # rows over t_run (fewer if interrupted)
            target = sizes if name == "sizes" else rows[name]
            if target is not None and row is not None:
                ok = inverse < len(row)
                target[k, ok] = row[inverse[ok]]
        if bar is not None:
            bar.update(1)

    def collect(k, result):
        if k < betas.size:
            fill(k, result)
        else:
            eq_errors.append(result)

    # the larger β first, the short checks last: an adaptive run takes fewer steps at small β
    # (at β = 0.9, 2/3 of the others'), and the short tasks fill the end
    try:
        map_tasks(phase_task, list(range(betas.size)) + [("equiangular", b) for b in checked],
                  scheduler=client, shared=task, progress=False, on_result=collect,
                  priority=list(betas) + [-1.0, -1.0], threads=None, meanwhile=_import_writers)
    except Interrupted as exc:                        # keep the saved times of the β it stopped
        for k, sol in exc.tasks.items():
            if k < betas.size and sol is not None and len(sol.t):
                fill(k, {"p": _rows(sol)["p"]})
        raise
    return eq_errors


def _import_writers():
    """What writing the results needs (xarray, pyplot), imported while the runs go on other threads."""
    import xarray  # noqa: F401  deferred: xarray is heavy

    from .report import pyplot

    pyplot()


def _check_results(report, o, betas, t, rows, B, identity, eq_errors, t_star):
    """The results and checks of the phase diagram: p_d(0, β) against the exact probability, clustering at
    the smallest β, the equiangular solution, the monotone t*(β)."""
    dim, n, delta, normalized, t_end = o.dim, o.n, o.delta, o.normalized, o.t_end
    p = rows["p"]
    # empirical Γ_d,δ at level 1/2
    t_half = np.array([t[np.argmax(row >= 0.5)] if np.any(row >= 0.5) else np.inf for row in p])
    p_exact0 = pair_probability_uniform(dim, delta)
    pairs = B * n * (n - 1)
    se = np.sqrt(p_exact0 * (1 - p_exact0) / max(pairs // 2, 1))
    res = report.results
    res.update({"p": p, "p_stderr": rows["p_stderr"], "t": t, "t_half": t_half, "p_initial": p[:, 0],
                "p_initial_exact": p_exact0, "p_final": p[:, -1], "mean_clusters_final": rows["clusters"][:, -1]})
    if o.span_dimension:
        res["span_dimension_final"] = rows["span"][:, -1]
    z = float(np.max(np.abs(p[:, 0] - p_exact0)) / se)
    report.check("p_d(0, β) = P(⟨x,y⟩ >= 1 − δ) for independent uniform points", z <= 6.0,
                 f"measured {np.mean(p[:, 0]):.2e}, exact {p_exact0:.2e}; worst |Δ| = {z:.1f} standard errors",
                 compared="p_d(0, β) for each β with the exact probability for independent uniform points, in "
                          "binomial standard errors", tolerance="<= 6 standard errors")
    # clustering by t_end at the smallest β is the Post-LN expectation of Figure 3; random parameters
    # (Figure 5 shows, not proves, it), a feed-forward term or another normalisation (another speed along
    # each direction, docs/normalization.md) report p_d(t_end, β_min) without that verdict
    if identity and o.mlp_width is None and o.normalization == "post":
        report.check(f"the smallest β = {betas[0]:g} clusters by t = {t_end:g}", p[0, -1] >= 0.9,
                     f"p_d(t_end, β_min) = {p[0, -1]:.3f}", compared="p_d(t_end, β) at the smallest β",
                     tolerance=">= 0.9")
    eq_err = max(eq_errors)
    res["equiangular_max_error"] = eq_err
    report.check("orthonormal particles follow γ_β of (6.9)/(6.10) (Theorem 6.8)", eq_err <= 1e-6,
                 f"max |⟨x_i,x_j⟩ − γ_β| = {eq_err:.1e} for n = d = {min(n, 6)}, "
                 f"β = {betas[0]:g}, {betas[-1]:g}",
                 compared="max over saved times and pairs of |⟨x_i(t), x_j(t)⟩ − γ_β(t)| for orthonormal initial "
                          "particles", tolerance="<= 1e-6")
    if normalized:
        report.check("Γ_∞,δ: t*(β) increases with β (SA)", bool(np.all(np.diff(t_star) > 0)),
                     f"t* from {t_star[0]:.3g} to {t_star[-1]:.3g}",
                     compared="t*(β), where γ_β(t*) = 1 − δ, along the β grid", tolerance="strictly increasing")


def _solve_beta(k, *, x0, t, betas, dim, normalized, scheme, dt, delta=1e-3, clusters=False, cluster_delta=1e-2,
                span=False, sizes=False, draws=None, layer=None, mlp=None):
    """β number k: the particle run keeping only its diagnostics at the saved times (the clustered
    fraction at δ; the number of clusters and their sizes at ``cluster_delta``, the span dimension,
    if asked), not the positions; with ``draws`` (the keywords of `layer_parameters` and the
    ``period``) under random parameters, one vectorised batch of per-realisation matrices; ``mlp`` a
    feed-forward term per realisation (`random_mlp`)."""

    model = Model(beta=float(betas[k]), dim=dim, normalized=normalized, **(layer or {}))
    kw = {"rtol": 1e-6, "atol": 1e-9, "dense_output": True} if scheme == "adaptive" else {"dt": dt}
    names = ("clustered_fraction",) + (("clusters",) if clusters else ()) + (("span_dimension",) if span else ()) \
        + (("cluster_sizes",) if sizes else ())
    if draws is not None:
        draws = dict(draws)
        period = draws.pop("period")
        layers = layer_parameters(k, x0.shape[0], dim=dim, **draws)
        kw["parameters"] = layers[0] if period is None else Layers(layers, period)
    solver = solvers.Particles(model, delta=delta, cluster_delta=cluster_delta, diagnostics=names)
    return solver.solve(x0, t, scheme=scheme, save="diagnostics", progress=False, mlp=mlp, **kw)


def _layer(o):
    """The Model keywords of the layer: where the normalisation sits (and τ for "mix")."""
    layer = {"normalization": o.normalization}
    if o.normalization == "mix":
        layer["mix_depth"] = 1.0 if o.mix_depth is None else o.mix_depth
    return layer


def _rows(sol):
    """The rows of a run of `_solve_beta` at its saved times, means over realisations: "p" (p_d, the
    clustered fraction), "p_stderr" (its standard error, the realisations' spread over √B),
    "clusters" (the number of clusters; NaN if not counted), "span" (the span dimension; NaN if not
    recorded) and "sizes" (the clusters of each size, (T, n); None if not recorded)."""
    T, diag = len(sol.t), sol.diagnostics

    def mean(name):
        if name not in diag:
            return np.full(T, np.nan)
        return np.asarray(diag[name], dtype=float).reshape(T, -1).mean(axis=1)

    frac = np.asarray(diag["clustered_fraction"], dtype=float).reshape(T, -1)
    se = frac.std(axis=1, ddof=1) / np.sqrt(frac.shape[1]) if frac.shape[1] > 1 else np.full(T, np.nan)
    out = {"p": frac.mean(axis=1), "p_stderr": se, "clusters": mean("clusters"), "span": mean("span_dimension"),
           "sizes": None}
    if "cluster_sizes" in diag:
        c = np.asarray(diag["cluster_sizes"], dtype=float)
        out["sizes"] = c.reshape(T, -1, c.shape[-1]).mean(axis=1)
    return out


def beta_rows(k, **task):
    """β number k of the phase diagram (a task of `map_tasks`): the `_rows` of its run."""
    return _rows(_solve_beta(k, **task))


def phase_task(item, **shared):
    """A task of the distributed phase diagram: a β number (`beta_rows`), or ``("equiangular", β)``,
    the check of Theorem 6.8 (`equiangular_check` with n = min(n, 6)), which then runs beside the β
    tasks instead of after them."""
    if isinstance(item, tuple):
        return equiangular_check(item[1], n=min(shared["x0"].shape[-2], 6), normalized=shared["normalized"])
    return beta_rows(item, **shared)


def parameters_label(qk, v, draw="realisation", layer_period=None):
    """The parameters in words, for titles: "V = I" (Figure 3), "B = QᵀK gaussian, V wishart, drawn per
    realisation", "…, layers of T = 5"."""
    if qk == "identity" and v == "identity":
        return "V = I"
    text = f"QᵀK {qk}, V {v}, drawn per {draw}" if draw != "once" else f"QᵀK {qk}, V {v}, drawn once"
    return text + (f", layers of T = {layer_period:g}" if layer_period is not None else "")


def gamma_label(parameters):
    """The legend of the curve Γ_∞,δ (γ_β(t) = 1 − δ, (6.12)) on a phase diagram of ``parameters``
    (`parameters_label`): the equiangular solution (6.9)/(6.10) is that of Q = K = V = I, so for other
    parameters (Figure 5) the legend says that it is drawn as a reference only."""
    text = r"$\Gamma_{\infty,\delta}$: $\gamma_\beta(t) = 1-\delta$"
    if parameters == "V = I":
        return text
    return text + "\nof the identity parameters Q = K = V = I\n(a reference, not a prediction here)"


def _save(report, betas, t, requested, rows, sizes, gammas, t_star, delta, n, dim, B, settings):
    if report.out is None:
        return
    import xarray as xr  # deferred: xarray is heavy

    kind = settings["kind"]
    p, ncl = rows["p"], rows["clusters"]
    data = {"p": (("beta", "time"), p), "p_stderr": (("beta", "time"), rows["p_stderr"]),
            "mean_clusters": (("beta", "time"), ncl), "gamma": (("beta", "time"), gammas),
            "t_star": (("beta",), t_star)}
    if np.any(np.isfinite(rows["span"])):
        data["span_dimension"] = (("beta", "time"), rows["span"])
    if sizes is not None:
        data["cluster_sizes"] = (("beta", "time", "size"), sizes)
    ds = xr.Dataset(data, coords={"beta": betas, "time": t, "requested_time": ("time", requested),
                                  **({"size": np.arange(1, n + 1)} if sizes is not None else {})})
    ds["p"].attrs["long_name"] = "fraction of pairs with <x_i, x_j> >= 1 - delta"
    ds["p_stderr"].attrs["long_name"] = "standard error of p over the realisations (their spread / sqrt(B))"
    ds["gamma"].attrs["long_name"] = "equiangular solution gamma_beta(t) of (6.9)/(6.10)"
    ds["t_star"].attrs["long_name"] = "time where gamma_beta = 1 - delta (curve Gamma_inf,delta, (6.12))"
    ds["requested_time"].attrs["long_name"] = "saved time asked for, linspace(0, t_end, n_times)"
    if "span_dimension" in ds:
        ds["span_dimension"].attrs["long_name"] = (f"mean number of Gram eigenvalues above {SPAN_TOL:g} "
                                                   "(dimension of the span of the tokens)")
    if sizes is not None:
        ds["cluster_sizes"].attrs["long_name"] = "mean number of clusters of each size per realisation"
    saved = ("each requested time at the first step at or after it, dt*ceil(t/dt) (as the authors' "
             "phase-diagrams.py records)" if settings["scheme"] == "euler-normalize" else
             "the requested times (from the adaptive steps' interpolant)")
    ds.attrs.update({"delta": delta, "n": n, "dim": dim, "realisations": B, "saved_times": saved,
                     "qk": settings["qk"], "v": settings["v"], "draw": settings["draw"],
                     "layer_period": "none" if settings["layer_period"] is None else settings["layer_period"]})
    report.save_dataset(ds, "phase_diagram.nc")

    have_cl, have_span = np.any(np.isfinite(ncl)), "span_dimension" in ds
    panels = 1 + have_cl + have_span
    fig, axes = report.subplots(1, panels, figsize=(6.5 + 4.5 * (panels - 1), 4.6), squeeze=False)
    label = parameters_label(settings["qk"], settings["v"], settings["draw"], settings["layer_period"])
    suptitle(fig, f"Figure {3 if label == 'V = I' else 5}: ({kind}) {label}, d = {dim}, ν = 0, β from "
                  f"{betas.min():g} to {betas.max():g}; n = {n} particles, {B} realisations, δ = {delta:g}")
    ax = axes[0, 0]
    mesh = ax.pcolormesh(t, betas, p, shading="auto", cmap="viridis", vmin=0, vmax=1)
    fig.colorbar(mesh, ax=ax, label=r"$p_d(t,\beta)$")
    fine = np.linspace(betas.min(), betas.max(), 60) if betas.size > 1 else betas
    t_fine = gamma_crossing(fine, n, delta, kind == "SA", t_max=t[-1])
    ok = np.isfinite(t_fine) & (t_fine <= t[-1])
    ax.plot(t_fine[ok], fine[ok], "w--", lw=2, label=gamma_label(label))
    ax.set(xlabel="t", ylabel=r"$\beta$", title=f"d = {dim}, n = {n}, δ = {delta:g}, B = {B}")
    ax.legend(fontsize=8, loc="upper left")
    if have_cl:
        from matplotlib.colors import LogNorm  # deferred: matplotlib is heavy

        m = axes[0, 1].pcolormesh(t, betas, ncl, shading="auto", cmap="magma",
                                  norm=LogNorm(vmin=1, vmax=max(2.0, float(np.nanmax(ncl)))))
        fig.colorbar(m, ax=axes[0, 1], label="mean number of clusters")
        axes[0, 1].set(xlabel="t", ylabel=r"$\beta$", title="mean number of clusters (metastability, Fig. 4)")
    if have_span:                                        # the authors' --plotdim: rank collapse
        ax = axes[0, panels - 1]
        m = ax.pcolormesh(t, betas, rows["span"], shading="auto", cmap="RdBu_r", vmin=1, vmax=dim)
        fig.colorbar(m, ax=ax, label="dimension of the span")
        ax.set(xlabel="t", ylabel=r"$\beta$", title=f"tokens' span: Gram eigenvalues > {SPAN_TOL:g}")
    fig.tight_layout()
    report.save_figure(fig, "phase_diagram.png")
