"""The single runs of the metastability experiment (`meanfield.experiments.metastability`): each takes
one task (a tuple) and keyword arguments shared by its batch, and returns the cluster history it
recorded, so that `meanfield.experiments.parallel.map_tasks` can spread them over dask workers.

* `continuum_run`: ρ_0 = `meanfield.measures.densities.seeded_perturbation` by `solvers.Lagrangian` through
  clustering and merging (Section 6.3 of the paper; docs/mathematics.md §9);
* `particle_run`: the same ρ_0 sampled by quasi-random points (`meanfield.sample(..., method="quasi")`);
* `iid_run`: batches of iid uniform particles (the first count against n, Figure 4);
* `staircase_run`: n = 5 particles at β = 4 on S^1, the energy staircase (Geshkovski, Koubbi,
  Polyanskiy, Rigollet (2024)).

The clusters are those of `meanfield.observables.diagnostics.find_clusters`, counted along the saved times by
`meanfield.observables.diagnostics.cluster_history`; NaN where the measure is not separated.
"""
import numpy as np

from ..measures.densities import seeded_perturbation
from ..observables.diagnostics import cluster_history, harmonic_maxima, history_events, energy_plateaus
from ..transformer.kernels import fastest_mode
from ..transformer.model import Model
from ..results.plotting import cell_rows
from ..measures.sampling import sample, uniform_points
import solvers


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
        grid, cells = cell_rows(sol.representation, sol.data, space_time)
        out["space_time"] = (grid.centres["theta"], cells)
    return out


def particle_run(task, *, epsilon, degrees, tol, min_mass, stray, rtol, times):
    """One quasi-sampled particle run ``task = (dim, beta, seed, n, t_stop)``: cluster history and events.

    The particles are `meanfield.sample(ρ_0, n, dim, method="quasi")` (quadrature nodes weighted by ρ_0),
    solved by `solvers.Particles` on the saved times ``times[(dim, beta, seed)]`` up to ``t_stop``. A
    run that stops early (a formation run) records no energy (it would cost one n×n sum per saved time).
    """

    dim, beta, seed, n, t_stop = task
    t = np.asarray(times[(dim, beta, seed)], dtype=float)
    full = t_stop >= t[-1]
    t = t[t <= t_stop + 1e-9]
    rho0 = seeded_perturbation(dim, epsilon, degrees, seed)
    x, w = sample(rho0, int(n), dim, method="quasi")
    sol = solvers.Particles(Model(beta=float(beta), dim=dim), diagnostics="none").solve(
        (x, w), t, rtol=rtol, atol=rtol * 1e-2, dense_output=True, save="positions")    # every time: clusters below
    hist = cluster_history((sol.measure(i) for i in range(len(sol.t))), tol, min_mass, stray)
    energy = np.asarray(sol.energy, dtype=float) if full else None
    return {"t": np.asarray(sol.t), "count": hist["count"], "energy": energy,
            "events": history_events(sol.t, hist["count"], energy),
            "wall_time": float(sol.stats.get("wall_time", np.nan))}


def iid_run(task, *, seeds, t_end, tol, min_mass, stray, rtol, seed0=0):
    """``task = (dim, beta, n)``: ``seeds`` realisations of n iid uniform particles in one batched
    `solvers.Particles` run; per realisation the cluster count against time and its events. A cluster
    holds at least 4 particles (``min_mass`` is raised to 4/n): single particles are not clusters."""

    dim, beta, n = task
    min_mass = max(min_mass, 4.0 / n)
    rng = np.random.default_rng([seed0, dim, int(round(1000 * beta)), n])
    x0 = uniform_points(seeds * n, dim, rng).reshape(seeds, n, dim)
    t = np.concatenate([[0.0], np.geomspace(0.25, t_end, int(np.ceil(np.log(4 * t_end) / np.log(1.05))) + 1)])
    sol = solvers.Particles(Model(beta=float(beta), dim=dim), diagnostics="none").solve(
        x0, t, rtol=rtol, atol=rtol * 1e-2, dense_output=True)
    X = np.asarray(sol.positions)                                  # (T, B, n, d)
    w = np.full(n, 1.0 / n)
    count = np.array([cluster_history(((X[i, b], w) for i in range(len(t))), tol, min_mass, stray)["count"]
                      for b in range(seeds)])
    events = [history_events(t, count[b]) for b in range(seeds)]
    return {"t": t, "count": count, "events": events, "wall_time": float(sol.stats.get("wall_time", np.nan))}


def staircase_run(seed, *, n, beta, t_end, tol, rtol):
    """n iid uniform particles on S^1 at β, to ``t_end`` on a log grid: energy, cluster count, plateaus."""

    x0 = uniform_points(n, 2, seed)
    t = np.concatenate([[0.0], np.geomspace(1e-2, t_end, int(60 * np.log10(100 * t_end)) + 1)])
    sol = solvers.Particles(Model(beta=float(beta), dim=2), diagnostics="none").solve(
        x0, t, rtol=rtol, atol=rtol * 1e-2, dense_output=True)
    w = np.full(n, 1.0 / n)
    count = cluster_history(((np.asarray(sol.positions[i]), w) for i in range(len(t))), tol, 1e-2, 0.05)["count"]
    energy = np.asarray(sol.energy, dtype=float)
    plateaus = energy_plateaus(t, energy)
    for p in plateaus:                        # the clusters at the end of each plateau
        p["clusters"] = float(count[np.searchsorted(t, p["end"])])
    return {"t": t, "energy": energy, "count": count, "plateaus": plateaus, "seed": seed,
            "positions": np.asarray(sol.positions)}
