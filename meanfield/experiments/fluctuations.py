"""``meanfield fluctuations``: n tokens about the mean field (Problem 4 of the paper; docs/fluctuations.md,
docs/mathematics.md §18).

Three parts:

* **Ensemble.** R realisations of n i.i.d. uniform tokens (`meanfield.fluctuations.ensemble`): the
  measured n·E P_k(t) against the linear theory (`linear_prediction`) and, for (USA) on S^1 without
  noise, against the theory with the leading mode coupling (``order=2``); the pair correlation g_2 and
  the law of the order parameter. Checked: every mode within 3 standard errors of the linear theory
  while its coupling excess is below one standard error, and where a mode leaves that band while the
  fastest mode's power per harmonic E P/N is below ``WINDOW`` (0.01), the coupled theory is closer. The first time a mode
  leaves the linear theory's band is reported with the fastest mode's E P at that time, and the largest
  |z| of each theory over the window.
* **Onset.** For n = 10^2 .. 10^5 the clustering time of particle runs (the first time a mode's
  amplitude reaches 1/2: max_{k <= 8} |ρ̂_k| on S^1, the order parameter |(1/n) Σ_j x_j| on S^2) against
  the linear theory's onset t_*(n) = log(n/4)/(2ς_max) (`onset_time`): checked, the slope of the clustering time against log n is 1/(2ς_max) within 3 standard errors of the fit.
* **Closure** (S^1, (USA)). From tokens of density 1 + ε cos θ, the interaction term of the first BBGKY
  equation from the measured pair moments and from molecular chaos (`first_equation`), and the
  three-token term of the second equation from the measured f_3 and from Kirkwood's superposition
  (`second_equation`): checked, the measured term is d E ρ̂_k/dt (the first equation holds), both
  closures hold at t = 0 (i.i.d. tokens), and molecular chaos holds to 10 % for longer at larger n;
  reported, for each n and closure the time until which it holds to 10 %, against t_*(n).
"""
from dataclasses import dataclass

import numpy as np

from ..fluctuations import ensemble, first_equation, linear_prediction, onset_time, second_equation
from ..fluctuations.ensemble import circle_coefficients
from ..fluctuations.linear import coupling_excess, growth_rates, multiplicity
from ..measures import densities
from ..transformer.kernels import kernel_multipliers
from ..transformer.model import Model
from .options import Options, experiment, option
from .report import Report, show_progress

WINDOW = 0.01          # the fastest mode's E P below which the issue asks for the linear theory
CHAOS_TOL = 0.1        # a closure "holds" while its relative residual is below this
GRID = 24              # bins of the circle for f_1, f_2, f_3 (Kirkwood's superposition)


@dataclass
class FluctuationsOptions(Options):
    """Fluctuations of n tokens about the mean field (Problem 4): an ensemble of n-token runs against the
    linear theory and its mode coupling, the onset of clustering against log n, and the first BBGKY
    equation against molecular chaos.

    The options of `fluctuations` and of ``meanfield fluctuations``.
    """

    n: int = option(2000, "tokens per realisation of the ensemble", low=2, quick=500)
    realizations: int = option(400, "realisations of the ensemble", low=2, quick=100)
    beta: float = option(1.0, "inverse temperature beta (0: the limit, kernel 1)")
    dim: int = option(2, "ambient dimension (tokens on S^(dim-1))", choices=(2, 3))
    dynamics: str = option("usa", "the dynamics: (USA) or (SA)", choices=("usa", "sa"))
    noise: float = option(0.0, "noise nu (the particles then take Euler-Maruyama steps of dt)", low=0.0)
    dt: float = option(0.005, "step of the Euler-Maruyama particles (with noise)", low=0.0, low_open=True)
    t_end: float = option(4.0, "last saved time of the ensemble", low=0.0, low_open=True, quick=3.0)
    t_count: int = option(17, "saved times of the ensemble", low=2, quick=13)
    modes: tuple[int, ...] = option((1, 2, 3, 4), "frequencies (S^1) or degrees of the power", low=1)
    onset_n: tuple[int, ...] = option((100, 1000, 10_000, 100_000), "numbers of tokens of the onset runs "
                                      "(empty: skip)", low=2, nonempty=False, quick=(100, 1000, 10_000))
    onset_realizations: int = option(8, "realisations per n of the onset runs", low=1, quick=4)
    closure_n: tuple[int, ...] = option((200, 2000), "numbers of tokens of the closure test (S^1, USA; empty: "
                                        "skip)", low=3, nonempty=False, quick=(200, 800))
    closure_realizations: int = option(100, "realisations of the closure test", low=2, quick=48)
    closure_amplitude: float = option(0.2, "epsilon of the closure test's initial density 1 + epsilon cos(theta)",
                                      low=0.0, high=1.0, low_open=True)
    seed: int = option(0, "seed of the initial tokens", low=0)


def fastest(model, modes):
    """The mode of ``modes`` with the largest growth rate."""
    return int(modes[int(np.argmax(growth_rates(model, np.asarray(modes))))])


# -------------------------------------------------------------------------------------------------
# part 1: the ensemble against the linear theory
# -------------------------------------------------------------------------------------------------
def compare_ensemble(ens, window=WINDOW):
    """The ensemble against the linear theory (and the coupled one where it is derived): a dict of numbers."""
    model, modes = ens.model, ens.modes
    k1 = fastest(model, modes)
    i1 = int(np.where(modes == k1)[0][0])
    inside = ens.power[:, i1] / multiplicity(model.dim, [k1])[0] < window       # the power per harmonic
    inside &= np.cumprod(inside).astype(bool)               # up to the first time the fastest mode reaches it
    z1 = ens.z_scores()
    coupled = model.dim == 2 and not model.normalized and model.noise == 0
    if coupled:
        excess = coupling_excess(model, ens.n, modes, ens.t)
        z2 = (ens.power - linear_prediction(model, ens.n, modes, ens.t, order=2)) / ens.power_se
        linear_valid = inside[:, None] & (excess < ens.power_se)
    else:
        z2, linear_valid = None, np.repeat(inside[:, None], len(modes), axis=1)
    out_band = np.argwhere(np.abs(z1) > 3)
    first = None
    if len(out_band):
        ti, mi = out_band[np.argmin(out_band[:, 0])]
        first = {"t": float(ens.t[ti]), "mode": int(modes[mi]), "z": float(z1[ti, mi]),
                 "fastest_power": float(ens.power[ti, i1])}
    return {"fastest_mode": k1, "window_end": float(ens.t[inside][-1]) if inside.any() else None,
            "z_linear": z1, "z_coupled": z2, "inside": inside, "linear_valid": linear_valid,
            "max_z_linear_valid": float(np.max(np.abs(z1[linear_valid]), initial=0.0)),
            "max_z_linear_window": float(np.max(np.abs(z1[inside]), initial=0.0)),
            "max_z_coupled_window": None if z2 is None else float(np.max(np.abs(z2[inside]), initial=0.0)),
            "first_departure": first}


def _part_ensemble(report, model, o, rng, progress):
    t = np.linspace(0.0, o.t_end, o.t_count)
    extra = {"dt": o.dt} if model.noise > 0 else {}
    ens = ensemble(model, o.n, o.realizations, t, rng=rng, modes=o.modes, progress=progress, **extra)
    cmp = compare_ensemble(ens)
    count = int(cmp["linear_valid"].sum())
    report.check("the linear theory within 3 standard errors where the mode coupling is below one",
                 cmp["max_z_linear_valid"] <= 3, f"max |z| = {cmp['max_z_linear_valid']:.2f} over {count} (t, k)",
                 compared=f"n E P_k(t), k = {list(o.modes)}, against linear_prediction; (t, k) with the fastest "
                          f"mode's E P < {WINDOW} and the coupling excess E|B_k|^2 < the standard error",
                 tolerance=f"|z| <= 3 at each (t, k) (about {count * 0.0027:.2f} false alarms expected if independent)")
    if cmp["z_coupled"] is not None:
        out = cmp["inside"][:, None] & (np.abs(cmp["z_linear"]) > 3)
        closer = bool(np.all(np.abs(cmp["z_coupled"][out]) < np.abs(cmp["z_linear"][out])))
        report.check("the mode coupling accounts for the departures from the linear theory",
                     closer and cmp["max_z_coupled_window"] < cmp["max_z_linear_window"] or not out.any(),
                     f"{int(out.sum())} (t, k) beyond 3 SE of the linear theory while E P_{cmp['fastest_mode']} < "
                     f"{WINDOW}; max |z|: linear {cmp['max_z_linear_window']:.2f}, with the coupling "
                     f"{cmp['max_z_coupled_window']:.2f}",
                     compared="|z| of linear_prediction(order=2) against |z| of the linear theory at those (t, k)",
                     tolerance="smaller at each, and a smaller maximum over the window")
    first = cmp["first_departure"]
    report.note(f"ensemble n = {o.n}, R = {o.realizations}: the fastest mode k = {cmp['fastest_mode']} has "
                f"E P/N < {WINDOW} up to t = {cmp['window_end']}; linear theory within 3 SE up to there: "
                f"max |z| = {cmp['max_z_linear_window']:.2f}" + (
                    f"; first departure at t = {first['t']:g}, mode {first['mode']} (z = {first['z']:.1f}), "
                    f"when E P_{cmp['fastest_mode']} = {first['fastest_power']:.4f}" if first else ""))
    report.results["ensemble"] = {
        "n": o.n, "realizations": o.realizations, "t": t, "modes": list(o.modes),
        "n_power": o.n * ens.power, "n_power_se": o.n * ens.power_se, "n_linear": o.n * ens.prediction(),
        "n_coupled": None if cmp["z_coupled"] is None else o.n * linear_prediction(model, o.n, ens.modes, t, order=2),
        "fastest_mode": cmp["fastest_mode"], "window_end": cmp["window_end"],
        "max_z_linear_in_window": cmp["max_z_linear_window"], "max_z_coupled_in_window": cmp["max_z_coupled_window"],
        "first_departure_from_linear": first, "order_mean": ens.order.mean(axis=1)}
    return ens, cmp


# -------------------------------------------------------------------------------------------------
# part 2: the onset of clustering against log n
# -------------------------------------------------------------------------------------------------
def clustering_time(t, r, level=0.5):
    """The first time the order parameter r (T,) reaches ``level`` (linear interpolation), or NaN."""
    above = np.nonzero(r >= level)[0]
    if not len(above) or above[0] == 0:
        return float("nan") if not len(above) else float(t[0])
    i = above[0]
    return float(t[i - 1] + (level - r[i - 1]) * (t[i] - t[i - 1]) / (r[i] - r[i - 1]))


def cluster_amplitude(x):
    """The amplitude of the largest mode of clouds x (T, n, d): max_{1 <= k <= 8} |ρ̂_k| on S^1 (k clusters
    give |ρ̂_k| near 1), the order parameter |(1/n) Σ_j x_j| on S^{d−1}, d >= 3."""
    if x.shape[-1] == 2:
        return np.abs(circle_coefficients(x, 8)[..., 1:]).max(axis=-1)
    return np.linalg.norm(x.mean(axis=-2), axis=-1)


def onset_runs(model, ns, realizations, rng, dt=None, progress=False):
    """Clustering times (`cluster_amplitude` >= 1/2) of ``realizations`` particle runs for each n of ``ns``: {n: array}."""
    import solvers
    from tqdm.auto import tqdm

    solver = solvers.Particles(model, diagnostics="none")
    extra = {} if model.noise == 0 else {"dt": dt}
    out = {}
    with tqdm(total=len(ns) * realizations, desc="onset runs", disable=not progress) as bar:
        for n in ns:
            t_star = onset_time(model, n)
            t = np.linspace(0.0, 2.0 * t_star + 4.0, 121)
            times = []
            for _ in range(realizations):
                x0 = rng.standard_normal((n, model.dim))
                x0 /= np.linalg.norm(x0, axis=1, keepdims=True)
                if model.noise > 0:
                    extra["rng"] = int(rng.integers(2 ** 63))
                sol = solver.solve(x0, t, progress=False, **extra)
                times.append(clustering_time(t, cluster_amplitude(sol.positions)))
                bar.update(1)
            out[n] = np.array(times)
    return out


def _part_onset(report, model, o, rng, progress):
    rates = growth_rates(model, np.arange(1, 33))
    if not o.onset_n or rates.max() <= 0:
        report.note("onset: skipped (no n given, or no growing mode)")
        return None
    ns = sorted(set(o.onset_n))
    runs = onset_runs(model, ns, o.onset_realizations, rng, o.dt, progress)
    mean = np.array([np.nanmean(runs[n]) if np.isfinite(runs[n]).any() else np.nan for n in ns])
    predicted = np.array([onset_time(model, n) for n in ns])
    expected = 1.0 / (2.0 * rates.max())
    logn = np.concatenate([np.full(len(runs[n]), np.log(n)) for n in ns])
    tc = np.concatenate([runs[n] for n in ns])
    ok = np.isfinite(tc)
    slope = se = float("nan")
    if len(np.unique(logn[ok])) >= 2 and ok.sum() >= 3:
        fit, cov = np.polyfit(logn[ok], tc[ok], 1, cov="unscaled")
        resid = tc[ok] - np.polyval(fit, logn[ok])
        slope = float(fit[0])
        se = float(np.sqrt(cov[0, 0] * resid @ resid / max(ok.sum() - 2, 1)))
        report.check("the clustering time grows as log n / (2 lambda_max)", abs(slope - expected) <= 3 * se,
                     f"slope {slope:.3f} ± {se:.3f} against 1/(2 lambda_max) = {expected:.3f}",
                     compared="least-squares slope of the clustering times (a mode's amplitude >= 1/2) of every run "
                              "against log n", tolerance="within 3 standard errors of the slope")
    for n, m, p in zip(ns, mean, predicted):
        report.note(f"onset n = {n}: clustering time {m:.2f}, linear onset t_* = {p:.2f} (difference {m - p:.2f})")
    report.results["onset"] = {"n": ns, "clustering_time": {str(n): runs[n] for n in ns}, "mean": mean,
                               "linear_onset": predicted, "slope": slope, "slope_se": se, "expected_slope": expected}
    return ns, runs, predicted


# -------------------------------------------------------------------------------------------------
# part 3: the first BBGKY equation against molecular chaos
# -------------------------------------------------------------------------------------------------
def pair_modes_for(beta, K=3, tol=1e-12, cap=64):
    """The smallest P > K with max_{|m| > P − K} |m c_m| < tol · max |m c_m| (c_m ∝ I_m(β)), at most ``cap``."""
    c = np.abs(kernel_multipliers(beta, 2, cap, scaled=True)) * np.arange(cap + 1)
    for P in range(K + 1, cap + 1):
        if c[P - K + 1:].max(initial=0.0) < tol * c.max():
            return P
    return cap


def holds_until(t, residual, tol=CHAOS_TOL):
    """The last saved time before ``residual`` first reaches ``tol`` (t[-1] if it never does)."""
    above = np.nonzero(~(residual < tol))[0]
    return float(t[-1] if not len(above) else t[max(above[0] - 1, 0)])


def _part_closure(report, model, o, rng, progress):
    if not o.closure_n or model.dim != 2 or model.normalized:
        report.note("closure: skipped (it is for (USA) on S^1, with closure_n given)")
        return None
    K = 3
    P = pair_modes_for(model.beta, K)
    t_star = onset_time(model, max(o.closure_n))
    t = np.linspace(0.0, t_star + 2.0, 33)
    extra = {"dt": o.dt} if model.noise > 0 else {"rtol": 1e-10, "atol": 1e-12}
    initial = densities.perturbed_uniform(o.closure_amplitude, 1)
    rows = {}
    for n in sorted(set(o.closure_n)):
        ens = ensemble(model, n, o.closure_realizations, t, rng=rng, initial=initial, pair_modes=P, grid=GRID,
                       progress=progress, **extra)
        eq = first_equation(ens, K)
        kw = second_equation(ens).residual
        scale = np.abs(eq.measured).max()
        mismatch = float(np.abs(eq.measured + eq.diffusion - eq.derivative).max() / scale)
        rows[n] = {"residual": eq.residual, "mismatch": mismatch, "chaos_holds_until": holds_until(t, eq.residual),
                   "kirkwood_residual": kw, "kirkwood_holds_until": holds_until(t, kw), "onset": onset_time(model, n)}
        report.note(f"closure n = {n}: molecular chaos (first equation) within {CHAOS_TOL:g} until t = "
                    f"{rows[n]['chaos_holds_until']:.2f}, Kirkwood (second equation) until t = "
                    f"{rows[n]['kirkwood_holds_until']:.2f}; linear onset t_* = {rows[n]['onset']:.2f}")
    worst = max(r["mismatch"] for r in rows.values())
    if model.noise > 0:
        report.note(f"closure: with noise the first equation holds in expectation only (largest difference "
                    f"{worst:.3f} between J_k and finite differences of the sample mean); not checked")
    else:
        report.check("the first BBGKY equation: the measured interaction term is d E rho_k/dt", worst <= 0.05,
                     f"max relative difference {worst:.3f}",
                     compared=f"J_k from the measured pair moments against second-order finite differences of "
                              f"E rho_k, k = 1..{K}, {len(t)} times", tolerance="<= 0.05 of max |J| (time discretisation)")
    ns = sorted(rows)
    start = max(float(r["residual"][0]) for r in rows.values())
    start_kw = max(float(r["kirkwood_residual"][0]) for r in rows.values())
    report.check("molecular chaos and Kirkwood's superposition hold for the i.i.d. tokens at t = 0",
                 max(start, start_kw) <= CHAOS_TOL, f"largest residual at t = 0: chaos {start:.3f}, Kirkwood {start_kw:.3f}",
                 compared="the relative residuals of the two closures at t = 0, every n",
                 tolerance=f"<= {CHAOS_TOL:g} (sampling error)")
    if len(ns) >= 2:
        until = [rows[n]["chaos_holds_until"] for n in ns]
        report.check("molecular chaos holds longer for more tokens", all(np.diff(until) > 0),
                     ", ".join(f"n = {n}: t = {u:.2f}" for n, u in zip(ns, until)),
                     compared=f"the time until which |J - J_chaos| / |J| < {CHAOS_TOL:g}", tolerance="increasing in n")
    report.results["closure"] = {"t": t, "pair_modes": P, "amplitude": o.closure_amplitude,
                                 "n": {str(n): r for n, r in rows.items()}}
    return t, rows


# -------------------------------------------------------------------------------------------------
# figures
# -------------------------------------------------------------------------------------------------
def _figures(report, ens, cmp, onset, closure):
    fig, ax = report.subplots(1, 3, figsize=(13, 4))
    n = ens.n
    for i, k in enumerate(ens.modes):
        line = ax[0].errorbar(ens.t, n * ens.power[:, i], yerr=3 * n * ens.power_se[:, i], fmt="o", ms=3,
                              label=f"k = {k}")
        colour = line[0].get_color()
        ax[0].plot(ens.t, n * ens.prediction()[:, i], "-", color=colour, lw=1)
        if cmp["z_coupled"] is not None:
            ax[0].plot(ens.t, n * linear_prediction(ens.model, n, [k], ens.t, order=2)[:, 0], "--", color=colour, lw=1)
    if cmp["window_end"] is not None:
        ax[0].axvline(cmp["window_end"], color="0.5", lw=0.8)
    ax[0].set(yscale="log", xlabel="t", ylabel="n E P_k(t)", title="power: measured (±3 SE), linear —, coupled --")
    ax[0].legend(fontsize=7)
    for j in np.unique(np.linspace(0, len(ens.t) - 1, 4).astype(int)):
        ax[1].plot(ens.angles, ens.g2[j], label=f"t = {ens.t[j]:g}")
        ax[2].hist(ens.order[j], bins=30, histtype="step", density=True, label=f"t = {ens.t[j]:g}")
    ax[1].set(xlabel="angle ψ", ylabel="g_2(t, ψ)", title="pair correlation")
    ax[2].set(xlabel="r = |mean x_j|", ylabel="density", title="order parameter")
    ax[1].legend(fontsize=7)
    ax[2].legend(fontsize=7)
    report.save_figure(fig, "fluctuations.png")
    if onset is not None:
        ns, runs, predicted = onset
        fig, ax = report.subplots(figsize=(5, 4))
        for n in ns:
            ax.plot([n] * len(runs[n]), runs[n], "k.", ms=4)
        ax.plot(ns, [np.nanmean(runs[n]) for n in ns], "ko-", label="clustering time (a mode >= 1/2)")
        ax.plot(ns, predicted, "r--", label="linear onset t_*(n)")
        ax.set(xscale="log", xlabel="n", ylabel="t", title="onset of clustering")
        ax.legend(fontsize=8)
        report.save_figure(fig, "fluctuations_onset.png")
    if closure is not None:
        t, rows = closure
        fig, ax = report.subplots(figsize=(5, 4))
        for n, r in rows.items():
            line = ax.plot(t, r["residual"], label=f"n = {n}: molecular chaos")
            ax.plot(t, r["kirkwood_residual"], "--", color=line[0].get_color(), label=f"n = {n}: Kirkwood")
            ax.axvline(r["onset"], color=line[0].get_color(), ls=":", lw=0.8)
        ax.axhline(CHAOS_TOL, color="0.5", lw=0.8)
        ax.set(yscale="log", xlabel="t", ylabel="relative residual", title="closures of the BBGKY hierarchy")
        ax.legend(fontsize=8)
        report.save_figure(fig, "fluctuations_closure.png")


@experiment("fluctuations", FluctuationsOptions, parallel=False,
            help="n tokens about the mean field: ensembles, linear theory, onset, BBGKY closure (Problem 4)")
def fluctuations(out, o, *, quick, progress):
    """Run the three parts (see the module docstring); returns the `Report`."""
    progress = show_progress(progress)
    model = Model(o.beta, o.dim, normalized=o.dynamics == "sa", noise=o.noise)
    settings = {f: getattr(o, f) for f in o.__dataclass_fields__} | {"quick": quick}
    report = Report("fluctuations", out, settings)
    report.write()
    rng = np.random.default_rng(o.seed)
    with report.guard():
        ens, cmp = _part_ensemble(report, model, o, rng, progress)
        if out is not None:
            report.save_dataset(ens.to_dataset(), "fluctuations.nc")
        report.write()
        onset = _part_onset(report, model, o, rng, progress)
        report.write()
        closure = _part_closure(report, model, o, rng, progress)
        if out is not None:
            _figures(report, ens, cmp, onset, closure)
        report.finish()
    return report
