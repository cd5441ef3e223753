"""``meanfield metastability``: how many clusters form first, and how they merge (Section 6.3, Figure 4
and Problem 1 of the paper; docs/mathematics.md §5, §7 and §9).

From a nearly uniform start the dynamics (SA) form k clusters quickly; these persist for long times
and merge one at a time, in a staircase of the energy E_β (3.5). The linear theory (docs/mathematics.md
§5) predicts k: the degree k*(β) = argmax_l ς_l of the exact growth rates (`meanfield.fastest_mode`).

* **Prediction.** k*(β) and the spectrum ς_l(β) over a β grid, on S^1 and S^2.
* **Continuum.** ρ_0 = 1 + ε Σ_{l=1..L} Y_l with equal amplitudes (`seeded_perturbation`: random phases
  on S^1, random coefficients on S^2), solved by `solvers.Lagrangian` (adaptive panels on S^1,
  `Lagrangian.solve_adaptive`) through clustering and merging. Recorded: the clusters against time
  (`meanfield.diagnostics.find_clusters`: count, masses, positions), the formation and merge times,
  the energy staircase. On S^2 a degree-l pattern need not give l clusters: the number of maxima of
  the seeded degree-k* harmonic is reported beside the observed count.
* **Particles.** The same ρ_0 sampled by `meanfield.sample(..., method="quasi")` (quadrature nodes with
  weights ∝ ρ_0) for several n: first count, formation and merge times against the continuum, plateau
  durations. With iid samples the sampling noise (of size n^{-1/2}, far above ε) seeds the
  instability: the distribution of the first count over seeds, beside the linear theory for
  white-noise data (`white_noise_prediction`).
* **Figure 4.** The mean number of clusters of iid particles over a (t, β) grid, with k*(β).
* **Staircase.** n = 5 particles on the circle, β = 4, t <= 400 (Geshkovski, Koubbi, Polyanskiy,
  Rigollet, *Dynamic metastability in the self-attention model* (2024)): E_β against log t, its
  plateaus (`energy_plateaus`) with their energies and durations.

A cluster is counted only when the measure is separated: at least 95% of the mass within ``tol`` of
the centre of its own cluster (`find_clusters`); before that the count is NaN ("not separated").
The formation time is the first saved time at which the measure is separated.
"""
from dataclasses import dataclass

import numpy as np

from ..validation import check_int, check_real
from ..densities import Density, real_sh
from ..diagnostics import find_clusters
from ..kernels import fastest_mode, linear_growth_rates
from ..model import Model
from ..quadrature import fibonacci
from ..sampling import sample, uniform_points
from .report import Report, pyplot, show_progress
from .options import Options, experiment, option
from .parallel import check_parallel, cluster, map_tasks

# --------------------------------------------------------------------------------------------------
# initial data and the linear prediction
# --------------------------------------------------------------------------------------------------


class SeededPerturbation(Density):
    """ρ_0 = 1 + ε Σ_{l=1..L} Y_l: equal amplitudes on the degrees 1..L, seeded (mass exactly 1).

    * S^1: Y_l = cos(l θ + φ_l) with phases φ_l uniform on [0, 2π);
    * S^2: Y_l = 2^{-1/2} Σ_m u_{lm} Y_{lm} with (u_{lm})_m uniform on the unit sphere of R^{2l+1} and
      Y_{lm} the real harmonics orthonormal in L²(σ), so that ‖Y_l‖_{L²(σ)} = 2^{-1/2} = ‖cos(lθ)‖ on S^1.
    """

    def __init__(self, dim, epsilon=1e-4, degrees=8, seed=0):
        self.dim = check_int(dim, "dim", low=2, high=3)
        self.epsilon = check_real(epsilon, "epsilon", low=0.0)
        self.degrees = check_int(degrees, "degrees", low=1, high=64)
        self.seed = seed
        rng = np.random.default_rng(seed)
        if self.dim == 2:
            self.phases = rng.uniform(0.0, 2 * np.pi, self.degrees)
        else:
            self.coefficients = []
            for l in range(1, self.degrees + 1):
                u = rng.standard_normal(2 * l + 1)
                self.coefficients.append(u / np.linalg.norm(u) / np.sqrt(2.0))
        ls = np.arange(1, self.degrees + 1)
        bound = float(ls.size if self.dim == 2 else np.sum(np.sqrt((2 * ls + 1) / 2.0)))    # Σ_l sup|Y_l|
        if self.epsilon * bound >= 1.0:
            raise ValueError(f"`epsilon`={epsilon:g} is too large for {degrees} degrees: ρ_0 could be negative; "
                             f"use epsilon < {1.0 / bound:.3g}.")

    def component(self, l, x):
        """Y_l(x), the degree-l term without the factor ε."""
        x = np.asarray(x, dtype=float)
        if self.dim == 2:
            return np.cos(l * np.arctan2(x[..., 1], x[..., 0]) + self.phases[l - 1])
        return sum(c * real_sh(l, m, x) for m, c in zip(range(-l, l + 1), self.coefficients[l - 1]))

    def _evaluate(self, x):
        return 1.0 + self.epsilon * sum(self.component(l, x) for l in range(1, self.degrees + 1))

    def __repr__(self):
        return (f"seeded_perturbation(dim={self.dim}, epsilon={self.epsilon:g}, degrees={self.degrees}, "
                f"seed={self.seed})")


def seeded_perturbation(dim, epsilon=1e-4, degrees=8, seed=0):
    """The seeded near-uniform density of the metastability experiment (see `SeededPerturbation`)."""
    return SeededPerturbation(dim, epsilon, degrees, seed)


def growth_spectrum(betas, dim, lmax=16, normalized=True):
    """(k* (B,), ς (B, lmax + 1)): `fastest_mode` and the rates ς_l (docs/mathematics.md §5) for each β."""
    ks, rates = [], []
    for b in np.atleast_1d(betas):
        model = Model(beta=float(b), dim=dim, normalized=normalized)
        ks.append(fastest_mode(model)[0])
        rates.append(linear_growth_rates(model, lmax))
    return np.array(ks), np.array(rates)


def _sphere_neighbours(points):
    """Edges of the spherical Delaunay triangulation of unit vectors (the facets of their convex hull)."""
    from scipy.spatial import ConvexHull

    f = ConvexHull(points).simplices
    e = np.concatenate([f[:, [0, 1]], f[:, [1, 2]], f[:, [2, 0]]])
    return np.unique(np.sort(e, axis=1), axis=0)


def count_maxima(values, edges, prominence=0.05):
    """The number of local maxima of grid values with prominence >= ``prominence``·(max − min).

    The prominence of a maximum m is its height above the highest saddle joining it to a higher
    point: m counts when its component of the superlevel set {f > f(m) − ``prominence``·(max − min)}
    (connected along ``edges``) holds no higher value. The global maximum always counts; shallow
    maxima that the grid resolves along a nearly flat ridge do not.
    """
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    f = np.asarray(values, dtype=float)
    n = f.size
    src = np.concatenate([edges[:, 0], edges[:, 1]])
    dst = np.concatenate([edges[:, 1], edges[:, 0]])
    order = np.argsort(src, kind="stable")
    src, dst = src[order], dst[order]
    first = np.nonzero(np.diff(src, prepend=-1))[0]
    peaks = src[first][f[src[first]] > np.maximum.reduceat(f[dst], first)]
    threshold = prominence * float(f.max() - f.min())
    count = 0
    for m in peaks:
        keep = f > f[m] - threshold
        e = keep[edges[:, 0]] & keep[edges[:, 1]]
        g = coo_matrix((np.ones(int(e.sum())), (edges[e, 0], edges[e, 1])), shape=(n, n))
        lab = connected_components(g, directed=False)[1]
        count += not np.any(f[lab == lab[m]] > f[m])
    return int(count)


def harmonic_maxima(density, l, n=20000):
    """The number of local maxima of the degree-l term Y_l of a `SeededPerturbation`: l on S^1; on S^2
    counted on a Fibonacci set of n points (neighbours from its Delaunay triangulation)."""
    if density.dim == 2:
        return int(l)
    x = fibonacci(n).points
    return count_maxima(density.component(l, x), _sphere_neighbours(x))


def white_noise_prediction(beta, dim, n, samples=None, lmax=16, rng=0, normalized=True, grid=4000):
    """The linear theory for iid initial data: the distribution of the first cluster count.

    For n iid points the empirical measure has degree-l components of size ~n^{-1/2} (white noise):
    on S^1 the amplitude A_l = 2|ĉ_l| with ĉ_l = n^{-1}Σ_j e^{-ilθ_j} ≈ complex Gaussian of variance
    1/n; on S^2 the coefficients of the orthonormal Y_{lm} are ≈ N(0, 1/n). Each grows like e^{ς_l t}
    (docs/mathematics.md §5); the first to reach size 1, l̂ = argmin_l log(1/A_l)/ς_l, dominates
    when the clusters form. The predicted count is l̂ on S^1 and, on S^2, the number of maxima of that
    random degree-l̂ harmonic (`count_maxima` on a Fibonacci set of ``grid`` points). Returns
    {count: probability} over ``samples`` Gaussian draws (default 4000 on S^1, 400 on S^2).
    """
    rng = np.random.default_rng(rng)
    samples = check_int((4000 if dim == 2 else 400) if samples is None else samples, "samples", low=1)
    rates = linear_growth_rates(Model(beta=float(beta), dim=dim, normalized=normalized), lmax)[1:]
    ls = np.arange(1, lmax + 1)
    grow = rates > 0
    if dim == 2:
        amp = 2.0 * np.abs(rng.standard_normal((samples, lmax)) + 1j * rng.standard_normal((samples, lmax))) \
            / np.sqrt(2.0 * n)
        coef = None
    else:
        coef = [rng.standard_normal((samples, 2 * l + 1)) / np.sqrt(n) for l in ls]
        amp = np.stack([np.linalg.norm(c, axis=1) for c in coef], axis=1)
    t_reach = np.where(grow, np.log(1.0 / np.minimum(amp, 1.0 - 1e-12)) / np.where(grow, rates, 1.0), np.inf)
    dominant = ls[np.argmin(t_reach, axis=1)]
    if dim == 2:
        counts = dominant
    else:
        x = fibonacci(grid).points
        edges = _sphere_neighbours(x)
        counts = np.empty(samples, dtype=int)
        for l in np.unique(dominant):
            idx = np.nonzero(dominant == l)[0]
            Y = np.stack([real_sh(int(l), m, x) for m in range(-l, l + 1)], axis=1)    # (grid, 2l+1)
            counts[idx] = [count_maxima(v, edges) for v in coef[l - 1][idx] @ Y.T]
    values, freq = np.unique(counts, return_counts=True)
    return {int(v): float(f) / samples for v, f in zip(values, freq)}


# --------------------------------------------------------------------------------------------------
# cluster histories, events and plateaus
# --------------------------------------------------------------------------------------------------


def cluster_history(measures, tol=1e-3, min_mass=1e-2, stray=0.05):
    """`find_clusters` along a sequence of weighted measures (e.g. ``sol.measure(i)`` for every i).

    Returns a dict of arrays: ``count`` (float; NaN where not separated), ``clustered_mass``, and the
    lists ``masses`` and ``positions`` (per saved time, heaviest first).
    """
    out = {"count": [], "clustered_mass": [], "masses": [], "positions": []}
    for m in measures:
        c = find_clusters(m, tol, min_mass=min_mass, stray=stray)
        out["count"].append(np.nan if c.count is None else float(c.count))
        out["clustered_mass"].append(c.clustered_mass)
        out["masses"].append(c.masses)
        out["positions"].append(c.positions)
    out["count"] = np.array(out["count"])
    out["clustered_mass"] = np.array(out["clustered_mass"])
    return out


def history_events(t, count, energy=None):
    """The formation time, the first count, the changes of count and the plateaus of a count history.

    ``count`` is NaN where the measure is not separated; changes are read between separated times
    (a NaN transient in between does not end a plateau). Returns a dict: ``t_form`` (first separated
    time), ``first_count``, ``merges`` [(t, from, to)] (the first saved time with the new count),
    ``plateaus`` [{count, start, end, duration, censored, energy}] (``censored``: still running at
    the last time; ``energy``: the mean of ``energy`` over the plateau's separated times).
    """
    t = np.asarray(t, dtype=float)
    count = np.asarray(count, dtype=float)
    ok = np.nonzero(np.isfinite(count))[0]
    out = {"t_form": float("nan"), "first_count": float("nan"), "merges": [], "plateaus": []}
    if ok.size == 0:
        return out
    out["t_form"], out["first_count"] = float(t[ok[0]]), float(count[ok[0]])
    starts = [ok[0]]
    for i, j in zip(ok[:-1], ok[1:]):
        if count[j] != count[i]:
            out["merges"].append((float(t[j]), float(count[i]), float(count[j])))
            starts.append(j)
    bounds = starts + [None]
    for a, b in zip(bounds[:-1], bounds[1:]):
        end = float(t[-1]) if b is None else float(t[b])
        sel = ok[(ok >= a) & (ok < (len(t) if b is None else b))]
        e = float(np.mean(np.asarray(energy)[sel])) if energy is not None else float("nan")
        out["plateaus"].append({"count": float(count[a]), "start": float(t[a]), "end": end,
                                "duration": end - float(t[a]), "censored": b is None, "energy": e})
    return out


def energy_plateaus(t, energy, rel_slope=0.01, min_ratio=1.5, t_min=1.0):
    """Plateaus of E_β against log t: maximal intervals of t >= ``t_min`` on which |dE/d log t| <=
    ``rel_slope``·(E_max − E_min) and t_end/t_start >= ``min_ratio``. (Before the particles move,
    t ≪ 1, E is flat in log t too; ``t_min`` leaves that out.) Returns [{start, end, duration,
    energy}] (``energy``: the mean over the plateau)."""
    t = np.asarray(t, dtype=float)
    e = np.asarray(energy, dtype=float)
    keep = t >= t_min
    t, e = t[keep], e[keep]
    if t.size < 3:
        return []
    span = float(e.max() - e.min()) or 1.0
    slope = np.abs(np.gradient(e, np.log(t))) / span
    flat = slope <= rel_slope
    out = []
    i = 0
    while i < t.size:
        if not flat[i]:
            i += 1
            continue
        j = i
        while j + 1 < t.size and flat[j + 1]:
            j += 1
        if t[j] / t[i] >= min_ratio:
            out.append({"start": float(t[i]), "end": float(t[j]), "duration": float(t[j] - t[i]),
                        "energy": float(np.mean(e[i:j + 1]))})
        i = j + 1
    return out


def compare_events(reference, other, merge_before=200.0):
    """Relative differences of the formation time and of each merge time before ``merge_before``
    (merges paired in order) between two `history_events`; None for a merge the other lacks."""
    tf = abs(other["t_form"] - reference["t_form"]) / reference["t_form"]
    merges = []
    for k, (tm, _, _) in enumerate(reference["merges"]):
        if tm >= merge_before:
            break
        if k < len(other["merges"]):
            merges.append(abs(other["merges"][k][0] - tm) / tm)
        else:
            merges.append(None)
    return float(tf), merges


# --------------------------------------------------------------------------------------------------
# the runs (module-level functions: tasks of `map_tasks`)
# --------------------------------------------------------------------------------------------------


def time_grid(t_fine, t_end, dt=0.25, ratio=1.03):
    """Saved times: steps ``dt`` up to ``t_fine`` (formation), then a geometric grid (merges) to ``t_end``."""
    fine = np.arange(0.0, min(t_fine, t_end) + 0.5 * dt, dt)
    if t_end <= fine[-1]:
        return fine
    m = max(2, int(np.ceil(np.log(t_end / fine[-1]) / np.log(ratio))) + 1)
    return np.concatenate([fine, np.geomspace(fine[-1], t_end, m)[1:]])


def continuum_run(task, *, epsilon, degrees, t_end, tol, min_mass, stray, panels, nodes_sphere, rtol, adaptive_tol,
                  space_time=0):
    """One continuum run ``task = (dim, beta, seed)`` by `solvers.Lagrangian`: the cluster history and events.

    S^1: composite Gauss–Legendre panels refined by `Lagrangian.solve_adaptive` (W1 tolerance
    ``adaptive_tol`` at t_end, rounds saved at 16 times), then one run on the refined panels saved at
    every time of `time_grid`; S^2: ``nodes_sphere`` Gauss–Legendre × trapezoid labels.
    ``space_time``: also return the cell-averaged density on that many cells (S^1; the space–time picture).
    """
    import solvers

    dim, beta, seed = task
    model = Model(beta=float(beta), dim=dim)
    rho0 = seeded_perturbation(dim, epsilon, degrees, seed)
    k, rate = fastest_mode(model)
    t = time_grid(2.5 * np.log(1.0 / epsilon) / rate + 5.0, t_end)
    opts = dict(rtol=rtol, atol=rtol * 1e-2, dense_output=True)      # saved times do not cut the steps
    # E_β only at the saved times: the clusters are counted afterwards by `find_clusters`
    trajectory = dict(estimate=False, diagnostics=("energy",))
    w1, wall = np.nan, 0.0
    if dim == 2:
        rounds = solvers.Lagrangian(model, panels=panels, estimate=False, min_mass=min_mass).solve_adaptive(
            rho0, np.linspace(0.0, t[-1], 16), tol=adaptive_tol, max_rounds=4, **opts)
        w1, wall = float(rounds.stats["error_estimate"]), float(rounds.stats["wall_time"])
        sol = solvers.Lagrangian(model, panels=rounds.representation.panels, **trajectory).solve(rho0, t, **opts)
    else:
        sol = solvers.Lagrangian(model, nodes_sphere, **trajectory).solve(rho0, t, **opts)
    hist = cluster_history((sol.measure(i) for i in range(len(sol.t))), tol, min_mass, stray)
    energy = np.asarray(sol.energy, dtype=float)
    ev = history_events(sol.t, hist["count"], energy)
    out = {"t": np.asarray(sol.t), "count": hist["count"], "clustered_mass": hist["clustered_mass"],
           "energy": energy, "events": ev, "nodes": int(sol.representation.n), "k_star": k,
           "maxima": harmonic_maxima(rho0, k), "wall_time": wall + float(sol.stats.get("wall_time", np.nan)),
           "w1_estimate": w1}
    i0 = int(np.argmax(np.isfinite(hist["count"]))) if np.isfinite(hist["count"]).any() else len(sol.t) - 1
    out["first_masses"], out["first_positions"] = hist["masses"][i0], hist["positions"][i0]
    out["final_masses"], out["final_positions"] = hist["masses"][-1], hist["positions"][-1]
    if space_time and dim == 2:
        out["space_time"] = sol.representation.space_time(sol.data, space_time)
    return out


def particle_run(task, *, epsilon, degrees, tol, min_mass, stray, rtol, times):
    """One quasi-sampled particle run ``task = (dim, beta, seed, n, t_stop)``: cluster history and events.

    The particles are `meanfield.sample(ρ_0, n, dim, method="quasi")` (quadrature nodes weighted by ρ_0),
    solved by `solvers.Particles` on the saved times ``times[(dim, beta, seed)]`` up to ``t_stop``. A
    run that stops early (a formation run) records no energy (it would cost one n×n sum per saved time).
    """
    import solvers

    dim, beta, seed, n, t_stop = task
    t = np.asarray(times[(dim, beta, seed)], dtype=float)
    full = t_stop >= t[-1]
    t = t[t <= t_stop + 1e-9]
    rho0 = seeded_perturbation(dim, epsilon, degrees, seed)
    x, w = sample(rho0, int(n), dim, method="quasi")
    sol = solvers.Particles(Model(beta=float(beta), dim=dim), diagnostics="none").solve(
        (x, w), t, rtol=rtol, atol=rtol * 1e-2, dense_output=True)
    hist = cluster_history((sol.measure(i) for i in range(len(sol.t))), tol, min_mass, stray)
    energy = np.asarray(sol.energy, dtype=float) if full else None
    return {"t": np.asarray(sol.t), "count": hist["count"], "energy": energy,
            "events": history_events(sol.t, hist["count"], energy),
            "wall_time": float(sol.stats.get("wall_time", np.nan))}


def iid_run(task, *, seeds, t_end, tol, min_mass, stray, rtol, seed0=0):
    """``task = (dim, beta, n)``: ``seeds`` realisations of n iid uniform particles in one batched
    `solvers.Particles` run; per realisation the cluster count against time and its events. A cluster
    holds at least 4 particles (``min_mass`` is raised to 4/n): single particles are not clusters."""
    import solvers

    dim, beta, n = task
    min_mass = max(min_mass, 4.0 / n)
    rng = np.random.default_rng([seed0, dim, int(round(1000 * beta)), n])
    x0 = uniform_points(seeds * n, dim, rng).reshape(seeds, n, dim)
    t = np.concatenate([[0.0], np.geomspace(0.25, t_end, int(np.ceil(np.log(4 * t_end) / np.log(1.05))) + 1)])
    sol = solvers.Particles(Model(beta=float(beta), dim=dim), diagnostics="none").solve(
        x0, t, rtol=rtol, atol=rtol * 1e-2, dense_output=True)
    X = np.asarray(sol.positions)                                  # (T, B, n, d)
    w = np.full(n, 1.0 / n)
    count = np.array([[_count(X[i, b], w, tol, min_mass, stray) for i in range(len(t))] for b in range(seeds)])
    events = [history_events(t, count[b]) for b in range(seeds)]
    return {"t": t, "count": count, "events": events, "wall_time": float(sol.stats.get("wall_time", np.nan))}


def _count(x, w, tol, min_mass, stray):
    c = find_clusters((x, w), tol, min_mass=min_mass, stray=stray).count
    return np.nan if c is None else float(c)


def staircase_run(seed, *, n, beta, t_end, tol, rtol):
    """n iid uniform particles on S^1 at β, to ``t_end`` on a log grid: energy, cluster count, plateaus."""
    import solvers

    x0 = uniform_points(n, 2, seed)
    t = np.concatenate([[0.0], np.geomspace(1e-2, t_end, int(60 * np.log10(100 * t_end)) + 1)])
    sol = solvers.Particles(Model(beta=float(beta), dim=2), diagnostics="none").solve(
        x0, t, rtol=rtol, atol=rtol * 1e-2, dense_output=True)
    w = np.full(n, 1.0 / n)
    count = np.array([_count(np.asarray(sol.positions[i]), w, tol, 1e-2, 0.05) for i in range(len(t))])
    energy = np.asarray(sol.energy, dtype=float)
    plateaus = energy_plateaus(t, energy)
    for p in plateaus:                        # the clusters at the end of each plateau
        p["clusters"] = float(count[np.searchsorted(t, p["end"])])
    return {"t": t, "energy": energy, "count": count, "plateaus": plateaus, "seed": seed,
            "positions": np.asarray(sol.positions)}


# --------------------------------------------------------------------------------------------------
# the experiment
# --------------------------------------------------------------------------------------------------


@dataclass
class MetastabilityOptions(Options):
    """The options of `metastability` (and of ``meanfield metastability``)."""

    dims: tuple[int, ...] = option((2, 3), "ambient dimensions", choices=(2, 3))
    betas_circle: tuple[float, ...] = option((2.0, 4.0, 8.0), "beta values on S^1 (continuum and particles)",
                                             low=0.0, low_open=True)
    betas_sphere: tuple[float, ...] = option((3.0,), "beta values on S^2", low=0.0, low_open=True,
                                             quick="the first")
    epsilon: float = option(1e-4, "amplitude ε of each seeded degree in ρ_0 = 1 + ε Σ_{l<=L} Y_l", low=0.0,
                            low_open=True, high=0.01)
    degrees: int = option(8, "seeded degrees 1..L", low=1, high=32)
    seeds: int = option(5, "seeds per beta", low=1, quick="2")
    t_end: float = option(200.0, "last time on S^1 (merges)", low=1.0, quick="120")
    t_end_sphere: float = option(60.0, "last time on S^2", low=1.0, quick="40")
    tol: float = option(1e-3, "cluster tolerance in radians (`meanfield.diagnostics.find_clusters`)")
    min_mass: float = option(1e-2, "the smallest mass of a cluster (`find_clusters`)")
    stray: float = option(0.05, "the mass allowed outside the clusters (`find_clusters`)")
    quasi_ns: tuple[int, ...] = option((250, 1000, 4000), "particle numbers of the quasi samples", low=16,
                                       quick="the largest <= 1000")
    n_long: int = option(1000, "quasi runs with n <= n_long go to the last time (merges, plateaus); larger ones "
                         "stop shortly after the continuum's clusters formed", low=1)
    iid_ns: tuple[int, ...] = option((64, 256, 1024), "particle numbers of the iid samples on S^1", low=8,
                                     nonempty=False, quick="those <= 256")
    iid_seeds: int = option(32, "iid realisations per n", low=1, quick="8")
    iid_betas: tuple[float, ...] = option((4.0,), "beta values of the iid samples", low=0.0, low_open=True)
    iid_t_end: float = option(200.0, "last time of the iid runs", low=1.0, quick="60")
    figure4_betas: tuple[float, ...] | None = option(None, "beta values of the Figure 4 grid", low=0.0, low_open=True,
                                                     nonempty=False, shown="1, 2, 3, 4, 5, 6, 8, 10",
                                                     quick="2, 4, 8")
    figure4_n: int = option(256, "particles of the Figure 4 grid (iid, S^1)", low=8, quick="128")
    figure4_seeds: int = option(32, "realisations per beta of the Figure 4 grid", low=1, quick="8")
    staircase_seeds: tuple[int, ...] = option((0, 1, 2, 3), "seeds of the n = 5, beta = 4 staircases on S^1 (the "
                                              "first is drawn in bold and checked for two plateaus)", low=0,
                                              quick="the first")
    staircase_t_end: float = option(400.0, "last time of the staircases", low=1.0)


@experiment("metastability", MetastabilityOptions,
            help="the number of clusters: prediction, continuum, particles, Figure 4",
            description="Metastability (Figure 4, Problem 1): the fastest linear degree k*(beta) against the first "
                        "cluster count of the continuum (Lagrangian solver) and of particles (quasi and iid "
                        "samples) from a seeded near-uniform density on S^1 and S^2, the merge times, the mean "
                        "number of clusters over (t, beta), and the n = 5, beta = 4 energy staircase on the circle.")
def metastability(out, o, *, quick, progress, workers, scheduler):
    """Metastability and the number of clusters on S^1 and S^2 (Figure 4, Problem 1); returns the `Report`.

    ``workers``, ``scheduler``: runs spread over dask workers (`meanfield.experiments.parallel.map_tasks`);
    every run is seeded by its task, so the results do not depend on them.
    """
    find_clusters(np.eye(2), o.tol, min_mass=o.min_mass, stray=o.stray)     # the detector checks its arguments
    workers, scheduler = check_parallel(workers, scheduler)
    dims, betas_circle, betas_sphere, epsilon, degrees = o.dims, o.betas_circle, o.betas_sphere, o.epsilon, o.degrees
    seeds, t_end, t_end_sphere, quasi_ns, n_long = o.seeds, o.t_end, o.t_end_sphere, o.quasi_ns, o.n_long
    iid_ns, iid_seeds, iid_betas, iid_t_end = o.iid_ns, o.iid_seeds, o.iid_betas, o.iid_t_end
    figure4_n, figure4_seeds, staircase_seeds, staircase_t_end = (o.figure4_n, o.figure4_seeds, o.staircase_seeds,
                                                                  o.staircase_t_end)
    tol, min_mass, stray = o.tol, o.min_mass, o.stray
    if quick:
        seeds, t_end, t_end_sphere = min(seeds, 2), min(t_end, 120.0), min(t_end_sphere, 40.0)
        betas_sphere = betas_sphere[:1]
        quasi_ns = [n for n in quasi_ns if n <= 1000][-1:] or [min(quasi_ns)]
        iid_ns, iid_seeds, iid_t_end = [n for n in iid_ns if n <= 256] or [min(iid_ns)], min(iid_seeds, 8), 60.0
        figure4_n, figure4_seeds = min(figure4_n, 128), min(figure4_seeds, 8)
        staircase_seeds = tuple(staircase_seeds)[:1]
    figure4_betas = o.figure4_betas
    if figure4_betas is None:
        figure4_betas = (2.0, 4.0, 8.0) if quick else (1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0)
    progress = show_progress(progress)
    settings = {"dims": dims, "betas_circle": betas_circle, "betas_sphere": betas_sphere, "epsilon": epsilon,
                "degrees": degrees, "seeds": seeds, "t_end": t_end, "t_end_sphere": t_end_sphere, "tol": tol,
                "min_mass": min_mass, "stray": stray, "quasi_ns": quasi_ns, "n_long": n_long, "iid_ns": iid_ns,
                "iid_seeds": iid_seeds, "iid_betas": list(iid_betas), "iid_t_end": iid_t_end,
                "figure4_betas": figure4_betas, "figure4_n": figure4_n, "figure4_seeds": figure4_seeds,
                "staircase_seeds": list(staircase_seeds), "staircase_t_end": staircase_t_end, "quick": quick}
    report = Report("metastability", out, settings)
    report.write()
    detector = dict(tol=tol, min_mass=min_mass, stray=stray)
    res = report.results
    with report.guard(), cluster(workers, scheduler) as client:     # one cluster for every batch of tasks
        par = dict(scheduler=client, progress=progress)
        _prediction(report, dims)
        report.write()

        # -- continuum ----------------------------------------------------------------------------
        cases = [(2, b) for b in betas_circle if 2 in dims] + [(3, b) for b in betas_sphere if 3 in dims]
        ctasks = [(d, b, s) for d, b in cases for s in range(seeds)]
        runs = {}
        for d in sorted({d for d, _ in cases}):
            sub = [tk for tk in ctasks if tk[0] == d]
            shared = dict(epsilon=epsilon, degrees=degrees, t_end=t_end if d == 2 else t_end_sphere,
                          panels=16, nodes_sphere=512, rtol=1e-8, adaptive_tol=1e-3,
                          space_time=720 if d == 2 else 0, **detector)
            for tk, r in zip(sub, map_tasks(continuum_run, sub, shared=shared,
                                            desc=f"continuum on S^{d - 1}", **par)):
                runs[tk] = r
        _continuum_checks(report, cases, seeds, runs)
        report.write()

        # -- quasi particles ------------------------------------------------------------------------
        ptasks = []
        for (d, b, s), r in runs.items():
            tf = r["events"]["t_form"]
            for n in quasi_ns:
                stop = float(r["t"][-1]) if (n <= n_long or not np.isfinite(tf)) else min(1.25 * tf + 2.0,
                                                                                           float(r["t"][-1]))
                ptasks.append((d, b, s, n, stop))
        times = {k: r["t"] for k, r in runs.items()}
        pres = map_tasks(particle_run, ptasks, shared=dict(epsilon=epsilon, degrees=degrees, rtol=1e-7, times=times,
                                                           **detector), desc="quasi particles", **par)
        particles = {tk[:4]: r for tk, r in zip(ptasks, pres)}
        _particle_checks(report, cases, seeds, runs, particles, quasi_ns, n_long)
        report.write()

        # -- iid particles: first count against n, the white-noise prediction ------------------------
        iid = {}
        if 2 in dims and iid_ns:
            itasks = [(2, float(b), n) for b in iid_betas for n in iid_ns]
            for tk, r in zip(itasks, map_tasks(iid_run, itasks, shared=dict(seeds=iid_seeds, t_end=iid_t_end,
                                                                              rtol=1e-6, **detector),
                                               desc="iid particles", **par)):
                iid[tk] = r
            _iid_results(report, iid)
            report.write()

        # -- Figure 4: mean number of clusters over (t, β) ------------------------------------------
        fig4 = {}
        if 2 in dims and figure4_betas:
            ftasks = [(2, float(b), figure4_n) for b in figure4_betas]
            todo = [tk for tk in ftasks if tk not in iid or iid[tk]["count"].shape[0] != figure4_seeds]
            got = map_tasks(iid_run, todo, shared=dict(seeds=figure4_seeds, t_end=iid_t_end, rtol=1e-6, **detector),
                            desc="Figure 4", **par)
            fig4 = {tk: iid[tk] for tk in ftasks if tk not in todo}
            fig4.update(dict(zip(todo, got)))
            _figure4_results(report, ftasks, fig4)
            report.write()

        # -- the n = 5, β = 4 staircase ---------------------------------------------------------------
        stairs = map_tasks(staircase_run, list(staircase_seeds),
                           shared=dict(n=5, beta=4.0, t_end=staircase_t_end, tol=tol, rtol=1e-9), desc="staircase",
                           **par)
        _staircase_results(report, stairs)
        _save(report, cases, seeds, runs, particles, quasi_ns, iid, fig4, figure4_betas, stairs, dims)
        res["wall_time"] = report.to_dict()["wall_time"]
        report.finish()
    return report


# --------------------------------------------------------------------------------------------------
# checks and summaries
# --------------------------------------------------------------------------------------------------


def _prediction(report, dims):
    from scipy.special import ive

    res = report.results["prediction"] = {}
    worst = 0.0
    for d in dims:
        betas = np.round(np.arange(0.5, 12.01, 0.5), 2)
        ks, rates = growth_spectrum(betas, d)
        res[f"S{d - 1}"] = {"beta": betas, "k_star": ks, "rate": rates, "rate_star": rates[np.arange(len(ks)), ks]}
        l = np.arange(rates.shape[1])
        for b, r in zip(betas, rates):                # closed forms, docs/mathematics.md §5
            if d == 2:
                ref = l ** 2 * ive(l, b) / (b * ive(0, b))
            else:
                ref = l * (l + 1) * ive(l + 0.5, b) / (b * ive(0.5, b))
            worst = max(worst, float(np.max(np.abs(r - ref))))
    report.check("ς_l(β) equal the closed forms l²I_l/(βI_0) (S^1), l(l+1)i_l/(βi_0) (S^2)", worst <= 1e-13,
                 f"max |Δς| = {worst:.1e} over β ∈ [0.5, 12], l <= 16")
    known = {(2, 2.0): 2, (2, 4.0): 3, (2, 5.0): 3, (2, 8.0): 4, (3, 3.0): 2, (3, 5.0): 3, (3, 6.0): 3}
    got = {key: fastest_mode(Model(beta=key[1], dim=key[0]))[0] for key in known if key[0] in dims}
    report.check("k*(β): 2, 3, 3, 4 at β = 2, 4, 5, 8 on S^1; 2, 3, 3 at β = 3, 5, 6 on S^2",
                 all(got[k] == known[k] for k in got),
                 ", ".join(f"S^{d - 1} β={b:g}: {v}" for (d, b), v in got.items()))


def _continuum_checks(report, cases, seeds, runs):
    res = report.results["continuum"] = {}
    for d, b in cases:
        rs = [runs[(d, b, s)] for s in range(seeds)]
        first = [r["events"]["first_count"] for r in rs]
        k = rs[0]["k_star"]
        res[f"S{d - 1}_beta{b:g}"] = {
            "k_star": k, "first_count": first, "t_form": [r["events"]["t_form"] for r in rs],
            "harmonic_maxima": [r["maxima"] for r in rs],
            "merges": [r["events"]["merges"] for r in rs],
            "plateaus": [r["events"]["plateaus"] for r in rs], "nodes": [r["nodes"] for r in rs],
            "first_masses": [r["first_masses"] for r in rs], "final_count": [float(r["count"][-1]) for r in rs],
            "w1_estimate": [r["w1_estimate"] for r in rs], "wall_time": sum(r["wall_time"] for r in rs)}
        detail = f"first counts {[int(f) if np.isfinite(f) else None for f in first]}, k* = {k}"
        if d == 3:
            detail += f"; maxima of the seeded degree-{k} harmonic {[r['maxima'] for r in rs]}"
        report.check(f"continuum S^{d - 1}, β = {b:g}: the first cluster count is k* = {k} in every seed",
                     all(f == k for f in first), detail)
        rises = [float(np.min(np.diff(r["energy"])) / max(np.ptp(r["energy"]), 1e-300)) for r in rs]
        report.check(f"continuum S^{d - 1}, β = {b:g}: E_β never decreases ((3.6), (SA) attractive)",
                     min(rises) >= -1e-8, f"min ΔE / (E_max − E_min) = {min(rises):.1e}")


def _particle_checks(report, cases, seeds, runs, particles, quasi_ns, n_long):
    res = report.results["particles_quasi"] = {}
    nmax = max(quasi_ns)
    ncmp = max([n for n in quasi_ns if n <= n_long] or [nmax])
    for d, b in cases:
        entry = res[f"S{d - 1}_beta{b:g}"] = {}
        k = runs[(d, b, 0)]["k_star"]
        for n in quasi_ns:
            ps = [particles[(d, b, s, n)] for s in range(seeds)]
            entry[f"n{n}"] = {"first_count": [p["events"]["first_count"] for p in ps],
                              "t_form": [p["events"]["t_form"] for p in ps],
                              "merges": [p["events"]["merges"] for p in ps],
                              "plateaus": [p["events"]["plateaus"] for p in ps]}
        first = entry[f"n{nmax}"]["first_count"]
        report.check(f"quasi particles n = {nmax}, S^{d - 1}, β = {b:g}: first count k* = {k} in every seed",
                     all(f == k for f in first), f"first counts {[int(f) if np.isfinite(f) else None for f in first]}")
        tf = []
        mg = []
        for s in range(seeds):
            ref = runs[(d, b, s)]["events"]
            tf.append(compare_events(ref, particles[(d, b, s, nmax)]["events"])[0])
            mg += compare_events(ref, particles[(d, b, s, ncmp)]["events"])[1]
        entry["t_form_rel_diff"], entry["merge_rel_diff"] = tf, mg
        report.check(f"S^{d - 1}, β = {b:g}: continuum and particles (n = {nmax}) form the clusters at the same "
                     f"time within 10%", max(tf) <= 0.10, f"max relative difference {max(tf):.3f}")
        ok = [m for m in mg if m is not None]
        report.check(f"S^{d - 1}, β = {b:g}: merge times before t = 200 agree within 20% (particles n = {ncmp})",
                     len(ok) == len(mg) and all(m <= 0.20 for m in ok),
                     f"{len(mg)} merges, relative differences {[round(m, 3) if m is not None else None for m in mg]}")


def _iid_results(report, iid):
    res = report.results["particles_iid"] = {}
    for (d, b, n), r in iid.items():
        first = [e["first_count"] for e in r["events"]]
        vals, freq = np.unique([f for f in first if np.isfinite(f)], return_counts=True)
        durations = [p["duration"] for e in r["events"] for p in e["plateaus"] if not p["censored"]]
        res[f"S{d - 1}_beta{b:g}_n{n}"] = {
            "first_count_distribution": {int(v): int(c) for v, c in zip(vals, freq)},
            "not_separated": int(sum(not np.isfinite(f) for f in first)),
            "white_noise_prediction": white_noise_prediction(b, d, n),
            "t_form_median": _finite(np.median, [e["t_form"] for e in r["events"]]),
            "plateau_durations": durations, "wall_time": r["wall_time"]}
        entry = res[f"S{d - 1}_beta{b:g}_n{n}"]
        report.note(f"iid S^{d - 1} β = {b:g} n = {n}: first counts {entry['first_count_distribution']} vs "
                    f"white-noise theory {_fmt(entry['white_noise_prediction'])}")


def _finite(stat, values):
    """``stat`` of the finite values (NaN if there are none)."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    return float(stat(v)) if v.size else float("nan")


def _fmt(dist):
    return "{" + ", ".join(f"{k}: {v:.2f}" for k, v in dist.items()) + "}"


def _figure4_results(report, ftasks, fig4):
    t = fig4[ftasks[0]]["t"]
    counts = [fig4[tk]["count"] for tk in ftasks]                  # (seeds, time) each, NaN: not separated
    separated = np.array([np.isfinite(c).sum(axis=0) for c in counts])
    total = np.array([np.where(np.isfinite(c), c, 0.0).sum(axis=0) for c in counts])
    mean = total / np.where(separated > 0, separated, np.nan)
    separated = separated / np.array([[c.shape[0]] for c in counts])
    firsts = [[e["first_count"] for e in fig4[tk]["events"]] for tk in ftasks]
    report.results["figure4"] = {"beta": [tk[1] for tk in ftasks], "t": t, "mean_clusters": mean,
                                 "separated_fraction": separated,
                                 "k_star": [fastest_mode(Model(beta=tk[1], dim=2))[0] for tk in ftasks],
                                 "first_count_mean": [_finite(np.mean, f) for f in firsts]}


def _staircase_results(report, stairs):
    res = report.results["staircase"] = []
    for r in stairs:
        res.append({"seed": r["seed"], "plateaus": r["plateaus"], "final_energy": float(r["energy"][-1]),
                    "initial_energy": float(r["energy"][0])})
    main = stairs[0]
    report.check(f"staircase n = 5, β = 4 on S^1 to t = {main['t'][-1]:g}: at least two energy plateaus",
                 len(main["plateaus"]) >= 2,
                 "; ".join(f"E = {p['energy']:.4f} on t ∈ [{p['start']:.3g}, {p['end']:.3g}] "
                           f"({p['clusters']:.0f} clusters)" for p in main["plateaus"]))


# --------------------------------------------------------------------------------------------------
# files
# --------------------------------------------------------------------------------------------------


def _save(report, cases, seeds, runs, particles, quasi_ns, iid, fig4, figure4_betas, stairs, dims):
    if report.out is None:
        return
    import xarray as xr

    pred = report.results["prediction"]
    for d in dims:
        p = pred[f"S{d - 1}"]
        ds = xr.Dataset({"rate": (("beta", "degree"), p["rate"]), "k_star": (("beta",), p["k_star"])},
                        coords={"beta": p["beta"], "degree": np.arange(p["rate"].shape[1])})
        ds["rate"].attrs["long_name"] = "linear growth rate of degree-l perturbations of the uniform state"
        report.save_dataset(ds, f"prediction_S{d - 1}.nc")
    for d, b in cases:
        t = runs[(d, b, 0)]["t"]
        cont = np.full((seeds, len(t)), np.nan)
        energy = np.full((seeds, len(t)), np.nan)
        for s in range(seeds):
            r = runs[(d, b, s)]
            cont[s, :len(r["count"])] = r["count"][:len(t)]
            energy[s, :len(r["energy"])] = r["energy"][:len(t)]
        data = {"continuum_count": (("seed", "time"), cont), "continuum_energy": (("seed", "time"), energy)}
        for n in quasi_ns:
            c = np.full((seeds, len(t)), np.nan)
            for s in range(seeds):
                pr = particles[(d, b, s, n)]
                c[s, np.searchsorted(t, pr["t"])] = pr["count"]          # its saved times are among t
            data[f"particles_count_n{n}"] = (("seed", "time"), c)
        ds = xr.Dataset(data, coords={"seed": np.arange(seeds), "time": t})
        ds.attrs.update({"dim": d, "beta": b, "note": "count is NaN where the measure is not separated into clusters"})
        if "space_time" in runs[(d, b, 0)]:
            theta, cells = runs[(d, b, 0)]["space_time"]
            ds["density_seed0"] = (("time", "theta"), cells)
            ds = ds.assign_coords(theta=theta)
        report.save_dataset(ds, f"clusters_S{d - 1}_beta{b:g}.nc")
    if fig4:
        f4 = report.results["figure4"]
        ds = xr.Dataset({"mean_clusters": (("beta", "time"), f4["mean_clusters"]),
                         "separated_fraction": (("beta", "time"), f4["separated_fraction"]),
                         "k_star": (("beta",), np.array(f4["k_star"]))},
                        coords={"beta": f4["beta"], "time": f4["t"]})
        report.save_dataset(ds, "figure4.nc")
    st = stairs[0]
    report.save_dataset(xr.Dataset({"energy": (("time",), st["energy"]), "clusters": (("time",), st["count"])},
                                   coords={"time": st["t"]}, attrs={"n": 5, "beta": 4.0, "seed": st["seed"]}),
                        "staircase.nc")
    _figures(report, cases, seeds, runs, particles, quasi_ns, iid, fig4, stairs, dims)


def _figures(report, cases, seeds, runs, particles, quasi_ns, iid, fig4, stairs, dims):
    plt = pyplot()
    figs = {"prediction": plot_prediction(report.results["prediction"], dims),
            "continuum": plot_continuum(runs, cases, seeds, particles, quasi_ns),
            "staircase": plot_staircase(stairs)}
    if fig4:
        figs["figure4"] = plot_figure4(report.results["figure4"])
    if iid:
        figs["particles_iid"] = plot_iid(report.results["particles_iid"])
    for name, fig in figs.items():
        report.save_figure(fig, f"{name}.png")
    plt.close("all")


def plot_prediction(pred, dims):
    plt = pyplot()
    fig, axes = plt.subplots(1, len(dims), figsize=(5.5 * len(dims), 4), squeeze=False)
    for ax, d in zip(axes[0], dims):
        p = pred[f"S{d - 1}"]
        m = ax.pcolormesh(p["beta"], np.arange(p["rate"].shape[1]), p["rate"].T, shading="nearest", cmap="viridis")
        fig.colorbar(m, ax=ax, label=r"$\varsigma_l(\beta)$")
        ax.step(p["beta"], p["k_star"], "w-", where="mid", lw=2, label=r"$k^*(\beta)$")
        ax.set(xlabel=r"$\beta$", ylabel="degree l", ylim=(0.5, 10.5), title=f"growth rates on S^{d - 1} (SA)")
        ax.legend(loc="upper left")
    fig.tight_layout()
    return fig


def plot_continuum(runs, cases, seeds, particles, quasi_ns):
    """Space–time density of one S^1 continuum run through clustering and merging; the cluster counts
    of every run (continuum solid, particles dashed; seeds offset by 0.04); the energy staircases,
    (E_β − E_β[σ])/(E_β[δ] − E_β[σ]) between the uniform minimum and the Dirac maximum (Proposition 3.4)."""
    plt = pyplot()
    from matplotlib.colors import LogNorm

    from ..energy import dirac_energy, uniform_energy

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
                    title=f"continuum on S^1, β = {b:g}, seed 0")
    nmax = max(quasi_ns)
    for c, (d, b) in enumerate(cases):
        e_min, e_max = uniform_energy(b, d), dirac_energy(b)
        for s in range(seeds):
            r, p = runs[(d, b, s)], particles[(d, b, s, nmax)]
            lab = f"S^{d - 1} β={b:g}" if s == 0 else None
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


def plot_figure4(f4):
    """The mean number of clusters over (t, β) (white: no realisation separated yet), with k*(β)
    overlaid: red dashed lines where k* changes, k* written between them; and the mean first count."""
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
                title="Figure 4 analogue: iid particles on S^1")
    axes[1].step(fine, kf, "k-", where="mid", label=r"$k^*(\beta)$")
    axes[1].plot(betas, np.asarray(f4["first_count_mean"], dtype=float), "o", label="mean first count (particles)")
    axes[1].set(xlabel=r"$\beta$", ylabel="clusters", title="first cluster count against the linear theory")
    axes[1].legend()
    fig.tight_layout()
    return fig


def plot_iid(res):
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
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    for j, r in enumerate(stairs):
        main = j == 0
        ax.plot(r["t"][1:], r["energy"][1:], "-", lw=2 if main else 0.8, alpha=1 if main else 0.5,
                label=f"seed {r['seed']}" + (" (plateaus shaded)" if main else ""))
    for p in stairs[0]["plateaus"]:
        ax.axvspan(p["start"], p["end"], color="0.85", zorder=0)
        ax.text(np.sqrt(p["start"] * p["end"]), p["energy"], f"{p['clusters']:.0f}", ha="center", va="bottom")
    ax.set(xscale="log", xlabel="t", ylabel=r"$E_\beta$", title="n = 5 particles, β = 4 on S^1: the staircase")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig
