"""``meanfield noise-transition``: the phase transition of the noisy dynamics (docs/noise.md).

With noise ν the uniform density loses stability at ν_c = a_1(β)/β (USA) or a_1/(β a_0) (SA)
(docs/mathematics.md §5, §6; Geshkovski, Letrouit, Polyanskiy, Rigollet, *A
mathematical perspective on Transformers* (2023), Problem 7). For (USA) the stationary states are
the solutions of the self-consistency equation ρ = e^{(K*ρ)/(βν)}/Z; `solvers.stationary` follows
them in ν (the branch), classifies the bifurcation by the Landau coefficient (continuous below
β_*(d), discontinuous above) and gives the stability of every state.

For each β (default β_*(d)/2 and 2β_*(d)) on S^1 and S^2 this experiment draws the bifurcation
diagram r(ν) (r = |∫ x ρ dσ|; stable branches solid, unstable dashed) and overlays the long-time
dynamics at several ν:

* the PDE with noise (`solvers.FourierCircle` on S^1, `solvers.SphericalHarmonics` on S^2) and
  noisy particles (`solvers.Particles`, Euler–Maruyama), each from a perturbed uniform density
  and from clustered initial data (the most clustered stable state of the sweep, perturbed);
* where the transition is discontinuous, a hysteresis sweep: ν down from above ν_fold to below
  ν_c, then back up, each stage starting from the end of the previous one (particles on S^1 and
  S^2; the PDE on S^1 as well unless ``coarse``);
* (SA): the dynamics only, with the linear threshold a_1/(β a_0) marked (and the branch of its
  zonal stationary states, which solve ρ = (K*ρ)^{1/(βν)}/Z).

Checks: β_*(d) against the root of I_{d/2+1}(β)/I_{d/2}(β) = 1/d; every branch bifurcates at
a_1/β; the Landau coefficient against the branch; the fold and the hysteresis; every PDE and
particle run ends at a stable state of the diagram (within a tolerance set by the run length and,
for particles, by 3/√n); (SA) uniform above its threshold, clustered below.
"""
from dataclasses import dataclass

import numpy as np
from scipy import optimize, special

from ..errors import SolverError
from ..transformer.model import Model
from ..representations.gegenbauer import GegenbauerSeries, axis_vector
from .report import Report
from .options import Options, experiment, option
from .parallel import check_parallel, cluster, map_tasks
import solvers
from ..transformer.kernels import minimum_degree
from ..results.plotting import legend, suptitle
from ..measures.sampling import sample
from solvers import stationary
from solvers.spectral import spectral_tail


def bessel_beta_star(dim):
    """The root of I_{d/2+1}(β)/I_{d/2}(β) = 1/d (the literature value of β_*(d)), by Brent's method."""
    f = lambda b: special.ive(dim / 2 + 1, b) / special.ive(dim / 2, b) - 1.0 / dim  # noqa: E731
    return float(optimize.brentq(f, 1e-3, 100.0, xtol=1e-15, rtol=4 * np.finfo(float).eps))


def _zonal_density(coefficients, dim, perturb=0.0):
    """ρ(x) = Σ_l u_l p_l(⟨x, e_d⟩)·(1 + perturb·⟨x, e_d⟩²) (`GegenbauerSeries`), for `solvers` (``normalize=True``)."""

    rep = GegenbauerSeries(len(coefficients) - 1, dim)
    u = np.asarray(coefficients, dtype=float)
    e = rep.axis

    def rho(x):
        x = np.asarray(x, dtype=float)
        return np.clip(rep.evaluate(u, x), 0.0, None) * (1.0 + perturb * (x @ e) ** 2)
    return rho


UNIFORM_AMPLITUDE = 0.01     # ρ0 = 1 + a·√d⟨x, e⟩: order parameter a/√d


def _uniform_perturbed(dim, amplitude=UNIFORM_AMPLITUDE):
    e = axis_vector(None, dim)
    return lambda x: 1.0 + amplitude * np.sqrt(dim) * (np.asarray(x) @ e)


def _order_of_solution(sol, i=-1):
    """r = |∫ x ρ dσ| of a PDE solution at saved index i (exact from the degree-1 coefficients)."""
    data = np.asarray(sol.data[i])
    if sol.model.dim == 2:
        return float(abs(data[1]))
    return float(np.sqrt(data[0, 1, 0] ** 2 + data[0, 1, 1] ** 2 + data[1, 1, 1] ** 2) / np.sqrt(3))


def _pde_solver(model, resolution):
    if model.dim == 2:
        return solvers.FourierCircle(model, modes=resolution)
    return solvers.SphericalHarmonics(model, lmax=resolution)


def _initial(task):
    d = task["dim"]
    if task["start"] == "uniform":
        return _uniform_perturbed(d)
    return _zonal_density(task["cluster"], d, perturb=0.2)


def dynamics_run(task):
    """One long-time run (a task of `map_tasks`): returns the final order parameter r (and, for
    particles, its time average over the second half and the standard error of that average)."""
    model = Model(beta=task["beta"], dim=task["dim"], normalized=task["normalized"], noise=task["nu"])
    t = np.linspace(0.0, task["t_end"], task.get("n_times", 21))
    if task["method"] == "pde":
        try:
            sol = _pde_solver(model, task["resolution"]).solve(_initial(task), t, normalize=True, rtol=1e-7,
                                                               atol=1e-10, progress=False)
        except SolverError as exc:
            sol = exc.solution
            if sol is None or len(sol.t) < 2:
                return {"order": float("nan"), "se": 0.0, "t_reached": 0.0, "message": str(exc)}
        r = np.array([_order_of_solution(sol, i) for i in range(len(sol.t))])
        return {"order": float(r[-1]), "se": 0.0, "t_reached": float(sol.t[-1]), "history": r}
    return _particle_run(model, task, t)


def _particle_run(model, task, t, x0=None):


    n, d = task["n"], task["dim"]
    rng = np.random.default_rng(task["seed"])
    if x0 is None:
        x0 = sample(_initial(task), n, d, rng=rng)[0] if task["start"] != "uniform" else None
        if x0 is None:
            x0 = rng.standard_normal((n, d))
            x0 /= np.linalg.norm(x0, axis=1, keepdims=True)
    sol = solvers.Particles(model, diagnostics="none").solve(x0, t, rng=int(task["seed"]) + 1,
                                                             dt=task["dt"], progress=False)
    x = np.asarray(sol.positions)
    r = np.linalg.norm(x.mean(axis=-2), axis=-1)
    tail = r[r.size // 2:]
    blocks = np.array_split(tail, 4)
    means = np.array([b.mean() for b in blocks])
    return {"order": float(tail.mean()), "se": float(means.std(ddof=1) / 2), "t_reached": float(t[-1]),
            "history": r, "positions": x[-1]}


def hysteresis_run(task):
    """ν swept down then up (``task["nus"]``), each stage continuing from the previous end state:
    the order parameter at the end of every stage (PDE) or averaged over its second half (particles)."""
    d, nus = task["dim"], task["nus"]
    out = []
    state = None
    for k, nu in enumerate(nus):
        model = Model(beta=task["beta"], dim=d, normalized=task["normalized"], noise=float(nu))
        t = np.linspace(0.0, task["t_stage"], 11)
        if task["method"] == "pde":
            rho0 = _uniform_perturbed(d, 1e-3) if state is None else _seeded(state, d)
            try:
                sol = _pde_solver(model, task["resolution"]).solve(rho0, t, normalize=True, rtol=1e-7, atol=1e-10,
                                                                   progress=False)
            except SolverError as exc:
                if exc.solution is None or len(exc.solution.t) < 2:
                    out.extend([float("nan")] * (len(nus) - k))
                    break
                sol = exc.solution
            state = sol
            out.append(_order_of_solution(sol))
        else:
            res = _particle_run(model, dict(task, start="uniform", seed=task["seed"] + k), t, x0=state)
            state = res["positions"]
            out.append(res["order"])
    return np.array(out)


def _seeded(sol, d, seed=1e-3):
    """The last state of a PDE run plus a small degree-1 seed (so that an unstable uniform state can leave)."""
    e = axis_vector(None, d)
    return lambda x: np.clip(sol.density(x, -1), 0.0, None) + seed * (1.0 + np.sqrt(d) * (np.asarray(x) @ e))


def _resolution(states, dim, tol=1e-7, beta=0.0):
    """The smallest cut-off among 16, 24, …, 64 (then 96, 128) that resolves every state (spectral tail < tol)."""


    need = minimum_degree(beta, dim)
    for L in (16, 24, 32, 40, 48, 64, 96, 128):
        if L >= need and all(spectral_tail(np.asarray(u[:L + 1]) ** 2) < tol for u in states):
            return L
    return 128


@dataclass
class NoiseTransitionOptions(Options):
    """Stationary states of the noisy dynamics on S^1 and S^2: the bifurcation diagram r(nu) (stable
    solid, unstable dashed) from the self-consistency equation, the Landau classification (continuous
    below beta_*, discontinuous above), noisy PDE and particle runs overlaid, hysteresis sweeps, and (SA)
    with its linear threshold.

    The options of `noise_transition` and of ``meanfield noise-transition``.
    """

    dims: tuple[int, ...] = option((2, 3), "ambient dimensions", choices=(2, 3))
    betas: tuple[float, ...] | None = option(None, "beta values on every sphere", low=0.0, low_open=True,
                                             shown="--factors times beta_*(d)")
    factors: tuple[float, ...] = option((0.5, 2.0), "multiples of beta_*(d) used without --betas (both sides of "
                                        "beta_*)", low=0.0, low_open=True)
    nus: tuple[float, ...] | None = option(None, "nu/nu_c at which the dynamics run", low=0.0, low_open=True,
                                           shown="chosen from each branch")
    sa: bool = option(True, "also run (SA): dynamics, its linear threshold and its zonal stationary states",
                      flags=("--no-sa",), flag_help="skip the (SA) dynamics")
    particles: bool = option(True, "noisy particle runs", flags=("--no-particles",),
                             flag_help="skip the particle runs")
    n_particles: int = option(500, "particles per run", low=10, flags=("-n", "--particles"), quick=250)
    tau: float = option(40.0, "the longest run in units of 1/nu_c; runs last `run_length` (from the exact "
                        "linear rates), and runs cut at tau are reported but not judged", low=0.0, low_open=True,
                        quick=20.0)
    coarse: bool = option(False, "fewer and coarser runs: two nu/nu_c per branch without --nus, no PDE runs on S^1 "
                          "between the folds, a shorter hysteresis loop, the PDE checked to 5% (else 1%)", quick=True)
    seed: int = option(0, "random seed", low=0)


@experiment("noise-transition", NoiseTransitionOptions,
            help="the phase transition with noise: branches, dynamics, hysteresis")
def noise_transition(out, o, *, quick, progress, workers, scheduler):
    """The noise-driven phase transition on S^1 and S^2: branches, dynamics and hysteresis; returns the `Report`.

    ``workers``, ``scheduler``: run the independent runs on dask workers (see
    `meanfield.experiments.parallel`).
    """

    dims, betas, factors, nus, sa, particles, seed = o.dims, o.betas, o.factors, o.nus, o.sa, o.particles, o.seed
    n, tau, coarse = o.n_particles, o.tau, o.coarse
    workers, scheduler = check_parallel(workers, scheduler)
    settings = {"dims": dims, "betas": betas, "factors": factors, "nus": nus, "sa": sa, "particles": particles,
                "n_particles": n, "tau": tau, "quick": quick, "seed": seed}
    report = Report("noise-transition", out, settings)
    report.write()
    pde_tol = 0.05 if coarse else 0.01
    with report.guard(), cluster(workers, scheduler) as client:     # one cluster for every batch of runs
        workers, scheduler = None, client
        for d in dims:
            bs = stationary.beta_star(d)
            ref = bessel_beta_star(d)
            report.results[f"d{d}"] = res_d = {"beta_star": bs, "beta_star_bessel": ref, "beta": {}}
            report.check(f"S^{d - 1}: β_*(d) from the Landau coefficient = root of I_(d/2+1)/I_(d/2) = 1/d",
                         abs(bs - ref) <= 1e-8, f"β_* = {bs:.10f}, Bessel root {ref:.10f}, |Δ| = {abs(bs - ref):.1e}",
                         compared="β_* where the Landau coefficient changes sign with the root of "
                                  "I_(d/2+1)(β)/I_(d/2)(β) = 1/d", tolerance="|Δ| <= 1e-8")
            panels = []
            for beta in (betas if betas is not None else [f * bs for f in factors]):
                panels.append(_usa_panel(report, res_d, stationary, d, beta, nus, particles, n, tau, coarse, seed,
                                         pde_tol, progress, workers, scheduler))
                report.write()
            sa_panel = _sa_panel(report, res_d, stationary, d, max(betas or [f * bs for f in factors]), nus, tau,
                                 coarse, pde_tol, progress, workers, scheduler) if sa else None
            _figure(report, d, panels, sa_panel)
            report.write()
        report.finish()
    return report


def _states_at(stationary, ds, nu_c, ratios):
    """The stable clustered state of the branch at each ν = ratio·ν_c (None where there is none)."""
    out = {}
    for x in ratios:
        try:
            out[x] = stationary.branch_state(ds, x * nu_c, stable=True)
        except ValueError:
            out[x] = None
    return out


def run_length(d, nu, nu_c, start, state, r0):
    """How long the dynamics need to settle, from the exact linear rates (docs/mathematics.md §5):

    * from the perturbed uniform density (order parameter r0) below ν_c: growth at
      g = (d−1)(ν_c − ν) to r ~ 1/2, then saturation: t = (log(1/(2 r0)) + 6)/g; above ν_c the
      perturbation only decays (r <= r0 throughout): t = 2/ν_c;
    * from a cluster: relaxation to the stable state at its leading eigenvalue λ, t = 8/|λ|, or, when
      there is no stable cluster, decay to uniform at g = (d−1)(ν − ν_c): t = 10/g.
    """
    g = (d - 1) * abs(nu_c - nu)
    if start == "uniform":
        return (np.log(1 / (2 * r0)) + 6) / g if nu < nu_c else 2 / nu_c
    if state is not None:
        return 8 / abs(state.leading_eigenvalue)
    return 10 / g


def particle_fluctuation(n, nu, nu_c):
    """Typical |m| of n noisy particles near the uniform state: E|m|² = ν/(n(ν − ν_c)) (ν > ν_c; the
    degree-1 mode decays at (d−1)(ν − ν_c) instead of (d−1)ν, under the same noise)."""
    return float(np.sqrt(nu / (n * (nu - nu_c)))) if nu > nu_c else 0.0


def _dynamics(report, where, d, beta, normalized, nu_c, runs, states, cluster, L, n, cap, seed, tol, progress,
              workers, scheduler):
    """PDE and particle runs ``runs`` = [(ratio, start, method)]; runs longer than ``cap``/ν_c are cut
    there (particles) or skipped (PDE). Returns the table of final order parameters and the checks."""
    r0 = UNIFORM_AMPLITUDE / np.sqrt(d)
    tasks = []
    for x, start, method in runs:
        t_end = run_length(d, x * nu_c, nu_c, start, states[x], r0)
        capped = t_end > cap / nu_c
        if capped and method == "pde":
            continue
        base = {"dim": d, "beta": beta, "normalized": normalized, "nu": x * nu_c, "ratio": x, "start": start,
                "cluster": cluster, "t_end": min(t_end, cap / nu_c), "capped": capped, "seed": seed, "method": method}
        tasks.append(dict(base, resolution=L) if method == "pde" else
                     dict(base, n=n, dt=0.01 / nu_c, seed=seed + len(tasks)))
    outcome = map_tasks(dynamics_run, tasks, workers=workers, scheduler=scheduler, progress=progress,
                        desc=f"noise-transition {where}")
    rows = []
    for task, o in zip(tasks, outcome):
        s = states[task["ratio"]]
        refs = ([0.0] if task["ratio"] > 1 else []) + ([s.order] if s is not None else [])
        dist = min(abs(o["order"] - r0) for r0 in refs) if refs and np.isfinite(o["order"]) else float("inf")
        rows.append({"nu": task["nu"], "ratio": task["ratio"], "method": task["method"], "start": task["start"],
                     "t_end": task["t_end"], "capped": task["capped"], "order": o["order"], "se": o["se"],
                     "distance": dist})
    for m in ("pde", "particles"):
        mine = [row for row in rows if row["method"] == m]
        if not mine:
            continue
        # a run is judged where the diagram has a stable state at its ν (not beyond the computed branch)
        mine_ref = [row for row in mine if row["ratio"] > 1 or states[row["ratio"]] is not None]
        if m == "pde":
            judged = mine_ref
            limits = [tol] * len(judged)
        else:
            # finite n: |m| fluctuates by ~1/√n, and near the uniform state by the critical
            # fluctuation sqrt(ν/(n(ν − ν_c))); judged where the latter stays below 0.2
            judged = [row for row in mine_ref
                      if not row["capped"] and particle_fluctuation(n, row["nu"], nu_c) < 0.2]
            limits = [3 * max(1 / np.sqrt(n), particle_fluctuation(n, row["nu"], nu_c)) for row in judged]
        worst = max((row["distance"] / lim for row, lim in zip(judged, limits)), default=float("nan"))
        what = "the noisy PDE" if m == "pde" else f"noisy particles (n = {n})"
        report.check(f"{where}: {what} ends at a stable state of the diagram", bool(judged) and worst <= 1,
                     f"{'passed' if bool(judged) and worst <= 1 else 'FAILED'}: the largest |r − r_stable| is "
                     f"{worst:.2g} of its tolerance (needs <= 1) over {len(judged)} runs (tolerance "
                     + (f"{tol:g}" if m == "pde" else "3·max(1/√n, sqrt(ν/(n(ν − ν_c))))") + ")"
                     + (f" ({len(mine) - len(judged)} runs near ν_c, beyond the branch or cut at t = {cap:g}/ν_c "
                        "not judged)"
                        if len(judged) < len(mine) else "")
                     + (f"; {'modes' if d == 2 else 'lmax'} = {L}" if m == "pde" else ""),
                     compared="the final order parameter r of each run with the stable branch of the diagram at its ν",
                     tolerance=(f"|r − r_stable| <= {tol:g}" if m == "pde" else
                                "|r − r_stable| <= 3·max(1/√n, sqrt(ν/(n(ν − ν_c))))"))
    return rows


def _save_rows(report, rows, name, **attrs):
    import xarray as xr  # deferred: xarray is heavy

    if not rows:
        return
    num = ("nu", "order", "se", "distance", "t_end")
    ds = xr.Dataset({k: ("run", np.array([row[k] for row in rows], dtype=float)) for k in num}
                    | {k: ("run", np.array([row[k] for row in rows], dtype=str)) for k in ("method", "start")},
                    attrs=attrs)
    report.save_dataset(ds, name)


def _usa_panel(report, res_d, stationary, d, beta, nus, particles, n, cap, coarse, seed, tol, progress, workers,
               scheduler):
    nu_c = stationary.critical_noise(beta, d)
    c = stationary.landau_coefficient(beta, d)
    sub = c > 0
    ds = stationary.branch(beta, d, nu_min=0.45 * nu_c, resolution=96 if sub and not coarse else None,
                           sectors=None if not coarse else tuple(range(0, 2 if d == 2 else 5)))
    key = f"beta={beta:.6g}"
    a1 = float(ds.attrs["nu_c"])
    res = res_d["beta"][key] = {
        "beta": beta, "nu_c": nu_c, "nu_bifurcation": ds.attrs["nu_bifurcation"], "landau_coefficient": c,
        "landau_fit": ds.attrs["landau_fit"], "transition": ds.attrs["transition"], "nu_fold": ds.attrs["nu_fold"],
        "order_fold": ds.attrs["order_fold"], "nu_maxwell": ds.attrs["nu_maxwell"], "branch_points": ds.sizes["point"]}
    where = f"S^{d - 1}, β = {beta:.4g}"
    err = abs(ds.attrs["nu_bifurcation"] - a1) / a1
    report.check(f"{where}: the branch bifurcates at ν_c = a_1/β", err <= 1e-9,
                 f"ν_c = {a1:.12g}, branch extrapolated to r = 0: {ds.attrs['nu_bifurcation']:.12g} (rel. {err:.1e})",
                 compared="the branch's ν extrapolated to r = 0 with ν_c = a_1/β", tolerance="relative error <= 1e-9")
    cerr = abs(ds.attrs["landau_fit"] - c) / abs(c)
    report.check(f"{where}: Landau coefficient (exact, from a_1, a_2) = the branch's ν/ν_c − 1 ∝ r²",
                 cerr <= 1e-4 and (c > 0) == (beta > res_d["beta_star"]),
                 f"c = {c:.8f}, fitted {ds.attrs['landau_fit']:.8f}: {ds.attrs['transition']}",
                 compared="the exact Landau coefficient c with the fit ν/ν_c − 1 ≈ c r² on the branch, and the sign of c "
                          "with β against β_*", tolerance="relative error <= 1e-4; sign as predicted")
    report.save_dataset(ds, f"branch_d{d}_beta{beta:.4g}.nc")
    f_fold = ds.attrs["nu_fold"] / nu_c if sub else 1.0
    if sub:
        nu, r, st = ds["nu"].values, ds["order"].values, ds["stable"].values
        lower = (r < ds.attrs["order_fold"]) & (nu > nu_c)
        report.check(f"{where}: subcritical: fold at ν_fold > ν_c, branch unstable between ν_c and the fold",
                     f_fold > 1 and lower.any() and not st[lower].any() and st[r > 1.05 * ds.attrs["order_fold"]].all(),
                     f"ν_fold/ν_c = {f_fold:.6f}, r_fold = {ds.attrs['order_fold']:.4f}, "
                     f"Maxwell point ν/ν_c = {ds.attrs['nu_maxwell'] / nu_c:.6f}",
                     compared="ν_fold/ν_c, and the stability of the branch below and above the fold",
                     tolerance="ν_fold > ν_c; unstable for r below r_fold, stable above 1.05 r_fold")
    if nus is not None:
        ratios = list(nus)
    elif sub:
        mid = [1 + 0.5 * (f_fold - 1)] if coarse else [1 + 0.3 * (f_fold - 1), 1 + 0.7 * (f_fold - 1)]
        ratios = ([] if coarse else [0.75]) + mid + [1.25 * f_fold]
    else:
        ratios = [0.5, 1.5] if coarse else [0.5, 0.65, 0.8, 1.25, 1.5]
    states = _states_at(stationary, ds, nu_c, ratios)
    clustered = [s for s in states.values() if s is not None]
    cluster = min(clustered, key=lambda s: s.nu).zonal[1] if clustered else np.asarray(ds["coefficients"].values[-1])
    runs = [(x, start, m) for x in ratios for start in ("uniform", "clustered")
            for m in ("pde",) + (("particles",) if particles else ())]
    if d == 3 and sub:
        # the S^2 subcritical PDE needs lmax >= 48 (tens of seconds a run): in the bistable window only,
        # and not in coarse mode
        runs = [(x, s_, m) for x, s_, m in runs if m == "particles" or (not coarse and 1 < x < f_fold)]
    pde_states = [states[x].zonal[1] for x, _, m in runs if m == "pde" and states[x] is not None]
    L = _resolution([cluster] + pde_states, d, beta=beta)
    rows = _dynamics(report, where, d, beta, False, nu_c, runs, states, cluster, L, n, cap, seed, tol, progress,
                     workers, scheduler)
    res["runs"] = rows
    res["pde_resolution"] = L
    hyst = None
    if sub:
        hyst = _hysteresis(report, res, d, beta, nu_c, f_fold, ds.attrs["order_fold"], L, n, coarse, seed,
                           progress, workers, scheduler, where)
    _save_rows(report, rows, f"dynamics_d{d}_beta{beta:.4g}.nc", beta=beta, dim=d, kind="USA", nu_c=nu_c)
    return {"beta": beta, "branch": ds, "rows": rows, "hysteresis": hyst, "kind": "USA", "nu_c": nu_c}


def _hysteresis(report, res, d, beta, nu_c, f_fold, r_fold, L, n, coarse, seed, progress, workers, scheduler, where):
    import xarray as xr  # deferred: xarray is heavy

    # down to 0.7 ν_c: a deterministic PDE leaves the uniform state only after its degree-1 seed has
    # grown by ∫(d−1)(ν_c − ν)dt, i.e. well below ν_c at a finite sweep rate (a delayed bifurcation)
    k = 6 if coarse else 9
    down = np.linspace(f_fold + 0.08, 0.7, k)
    nus = np.concatenate([down, down[::-1][1:]]) * nu_c
    stage = (6.0 if coarse else 10.0) / nu_c
    tasks = [{"dim": d, "beta": beta, "normalized": False, "nus": nus, "t_stage": stage, "method": "particles",
              "n": 2 * n, "dt": 0.01 / nu_c, "seed": seed + 1000}]
    if d == 2 and not coarse:
        tasks.append({"dim": d, "beta": beta, "normalized": False, "nus": nus, "t_stage": stage, "method": "pde",
                      "resolution": "auto"})
    sweeps = map_tasks(hysteresis_run, tasks, workers=workers, scheduler=scheduler, progress=progress,
                       desc=f"hysteresis {where}")
    out = {}
    window = (nus > nu_c * 1.01) & (nus < nu_c * (f_fold - 0.01))
    half = len(down)
    for task, r in zip(tasks, sweeps):
        m = task["method"]
        out[m] = r
        low, high = r[:half][window[:half]], r[half:][window[half:]]
        thr = 3.0 / np.sqrt(2 * n) if m == "particles" else 1e-2
        ok = low.size > 0 and high.size > 0 and np.all(low < max(thr, 0.5 * r_fold)) and np.all(high > 0.8 * r_fold)
        report.check(f"{where}: hysteresis ({m}): uniform on the way down, clustered on the way up, for ν_c < ν < ν_fold",
                     ok, f"down: r = {np.round(low, 3).tolist()}, up: r = {np.round(high, 3).tolist()} "
                         f"(r_fold = {r_fold:.3f})",
                     compared="the order parameter r at each ν in (ν_c, ν_fold), sweeping ν down and then up",
                     tolerance=f"down: r < max({thr:.3g}, r_fold/2); up: r > 0.8 r_fold")
    res["hysteresis"] = {"nu": nus, **{m: r for m, r in out.items()}}
    ds = xr.Dataset({f"order_{m}": ("stage", r) for m, r in out.items()} | {"nu": ("stage", nus)},
                    attrs={"beta": beta, "dim": d, "nu_c": nu_c, "stages_down": half})
    report.save_dataset(ds, f"hysteresis_d{d}_beta{beta:.4g}.nc")
    return {"nu": nus, **out, "half": half}


def _sa_panel(report, res_d, stationary, d, beta, nus, cap, coarse, tol, progress, workers, scheduler):
    nu_c = stationary.critical_noise(beta, d, normalized=True)
    ds = stationary.branch(beta, d, normalized=True, nu_min=0.45 * nu_c, sectors=(0, 1))
    ratios = list(nus) if nus is not None else ([0.5, 1.5] if coarse else [0.5, 0.65, 0.8, 1.25, 1.5])
    states = _states_at(stationary, ds, nu_c, ratios)
    clustered = [s for s in states.values() if s is not None]
    cluster = min(clustered, key=lambda s: s.nu).zonal[1] if clustered else np.asarray(ds["coefficients"].values[-1])
    L = _resolution([cluster] + [s.zonal[1] for s in clustered], d, beta=beta)
    where = f"S^{d - 1}, (SA) β = {beta:.4g}"
    runs = [(x, start, "pde") for x in ratios for start in ("uniform", "clustered")]
    rows = _dynamics(report, where, d, beta, True, nu_c, runs, states, cluster, L, 0, cap, 0, tol, progress,
                     workers, scheduler)
    above = [row["order"] for row in rows if row["ratio"] > 1 and not row["capped"]]
    below = [row["order"] for row in rows if row["ratio"] < 1 and not row["capped"]]
    report.check(f"{where}: uniform above the linear threshold a_1/(β a_0), clustered below (PDE)",
                 bool(above) and bool(below) and max(above) <= tol and min(below) > 0.1,
                 f"ν_c = {nu_c:.6g}; r above: {np.round(above, 4).tolist()}; r below: {np.round(below, 4).tolist()}",
                 compared="the final order parameter r of the PDE runs above and below ν_c",
                 tolerance=f"r <= {tol:g} above ν_c; r > 0.1 below")
    res_d["sa"] = {"beta": beta, "nu_c": nu_c, "landau_coefficient": ds.attrs["landau_coefficient"],
                   "nu_bifurcation": ds.attrs["nu_bifurcation"], "runs": rows}
    report.save_dataset(ds, f"branch_sa_d{d}_beta{beta:.4g}.nc")
    _save_rows(report, rows, f"dynamics_sa_d{d}_beta{beta:.4g}.nc", beta=beta, dim=d, kind="SA", nu_c=nu_c)
    return {"beta": beta, "branch": ds, "rows": rows, "kind": "SA", "nu_c": nu_c}


def _figure(report, d, panels, sa_panel):
    allp = panels + ([sa_panel] if sa_panel else [])
    fig, axes = report.subplots(1, len(allp), figsize=(4.6 * len(allp), 5.4), squeeze=False)
    for ax, p in zip(axes[0], allp):
        _draw_panel(ax, p)
    betas = ", ".join(f"{p['beta']:.4g} ({p['kind']})" for p in allp)
    suptitle(fig, f"noise-driven transition on $S^{{{d - 1}}}$: $V = I$, $d = {d}$, $\\beta$ = {betas}\n"
                  f"order parameter $r = |\\int x\\,\\rho\\,d\\sigma|$ against $\\nu/\\nu_c$")
    fig.tight_layout()
    report.save_figure(fig, f"noise_transition_d{d}.png")


def draw_branch(ax, ds, label=None, color="C0", uniform=True):
    """Draw r(ν/ν_c) of a branch (stable solid, unstable dashed) and, with ``uniform``, the uniform state (r = 0)."""
    nu, r, st = ds["nu"].values, ds["order"].values, ds["stable"].values
    nu_c = ds.attrs["nu_c"]
    cuts = np.nonzero(st[1:] != st[:-1])[0] + 1
    for seg in np.split(np.arange(nu.size), cuts):
        idx = np.r_[seg, seg[-1] + 1] if seg[-1] + 1 < nu.size else seg
        ax.plot(nu[idx] / nu_c, r[idx], color=color, ls="-" if st[seg[0]] else "--", lw=2,
                label=label if seg[0] == 0 else None)
    if uniform:
        have = set(ax.get_legend_handles_labels()[1])
        ax.plot([1.0, max(1.3, nu.max() / nu_c)], [0, 0], color="k", lw=2,
                label=None if "uniform state" in have else "uniform state")
        ax.plot([min(0.45, nu.min() / nu_c), 1.0], [0, 0], color="k", lw=2, ls="--")


def _draw_panel(ax, p):
    ds, nu_c = p["branch"], p["nu_c"]
    draw_branch(ax, ds, label="stationary states")
    markers = {("pde", "uniform"): ("o", "C1", "PDE from uniform"), ("pde", "clustered"): ("s", "C3", "PDE from cluster"),
               ("particles", "uniform"): ("x", "C2", "particles from uniform"),
               ("particles", "clustered"): ("+", "C4", "particles from cluster")}
    for (m, s), (mk, col, lab) in markers.items():
        rows = [row for row in p["rows"] if row["method"] == m and row["start"] == s]
        if rows:
            ax.errorbar([row["nu"] / nu_c for row in rows], [row["order"] for row in rows],
                        yerr=[row["se"] for row in rows], fmt=mk, color=col, mfc="none" if mk == "s" else None,
                        ms=8, label=lab, ls="none")
    h = p.get("hysteresis")
    if h:
        half = h["half"]
        for m, col in (("particles", "C2"), ("pde", "C1")):
            if m in h:
                ax.plot(h["nu"][:half] / nu_c, h[m][:half], "v-", color=col, alpha=0.6, ms=5, lw=1,
                        label=f"sweep down ({m})")
                ax.plot(h["nu"][half - 1:] / nu_c, h[m][half - 1:], "^-", color=col, alpha=0.6, ms=5, lw=1,
                        label=f"sweep up ({m})")
    right = max([1.3] + [row["nu"] / nu_c + 0.05 for row in p["rows"]])
    ax.plot([1.0, right], [0, 0], color="k", lw=2)
    ax.axvline(1.0, color="grey", lw=0.8, ls=":")
    if p["kind"] == "SA":
        ax.text(1.01, 0.02, "linear threshold", rotation=90, fontsize=8, color="grey", va="bottom")
    if np.isfinite(ds.attrs.get("nu_fold", np.nan)):
        ax.axvline(ds.attrs["nu_fold"] / nu_c, color="grey", lw=0.8, ls="-.")
    ax.set(xlabel=r"$\nu/\nu_c$", ylabel="$r$", ylim=(-0.03, 1.0),
           title=f"({p['kind']}) $\\beta = {p['beta']:.3g}$, {ds.attrs['transition']}")
    from matplotlib.transforms import offset_copy  # deferred: matplotlib is heavy

    below = offset_copy(ax.transAxes, fig=ax.figure, y=-30, units="points")      # under the ν/ν_c label, off the data
    legend(ax, fontsize=6.5, loc="upper center", bbox_to_anchor=(0.5, 0.0), bbox_transform=below, ncol=2, frameon=False)
