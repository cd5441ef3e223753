"""``meanfield metastability``: how many clusters form first, and how they merge (Section 6.3, Figure 4
and Problem 1 of the paper; docs/mathematics.md §5, §7 and §9).

From a nearly uniform start the dynamics (SA) form k clusters quickly; these persist for long times
and merge one at a time, in a staircase of the energy E_β (3.5). The linear theory (docs/mathematics.md
§5) predicts k: the degree k*(β) = argmax_l ς_l of the exact growth rates (`meanfield.fastest_mode`).

* **Prediction.** k*(β) and the spectrum ς_l(β) over a β grid, on S^1 and S^2.
* **Continuum.** ρ_0 = 1 + ε Σ_{l=1..L} Y_l with equal amplitudes (`meanfield.measures.densities.seeded_perturbation`:
  random phases on S^1, random coefficients on S^2), solved by `solvers.Lagrangian` (adaptive panels on S^1,
  `Lagrangian.solve_adaptive`) through clustering and merging. Recorded: the clusters against time
  (`meanfield.observables.diagnostics.find_clusters`: count, masses, positions), the formation and merge times,
  the energy staircase. On S^2 a degree-l pattern need not give l clusters: the number of maxima of
  the seeded degree-k* harmonic is reported beside the observed count.
* **Particles.** The same ρ_0 sampled by `meanfield.sample(..., method="quasi")` (quadrature nodes with
  weights ∝ ρ_0) for several n: first count, formation and merge times against the continuum, plateau
  durations. With iid samples the sampling noise (of size n^{-1/2}, far above ε) seeds the
  instability: the distribution of the first count over seeds, beside the linear theory for
  white-noise data (`meanfield.observables.diagnostics.white_noise_prediction`).
* **Figure 4.** The mean number of clusters of iid particles over a (t, β) grid, with k*(β).
* **Staircase.** n = 5 particles on the circle, β = 4, t <= 400 (Geshkovski, Koubbi, Polyanskiy,
  Rigollet, *Dynamic metastability in the self-attention model* (2024)): E_β against log t, its
  plateaus (`meanfield.observables.diagnostics.energy_plateaus`) with their energies and durations.

A cluster is counted only when the measure is separated: at least 95% of the mass within ``tol`` of
the centre of its own cluster (`find_clusters`); before that the count is NaN ("not separated").
The formation time is the first saved time at which the measure is separated. The single runs are
in `meanfield.experiments.metastability_runs`, the pictures in `meanfield.results.plotting`.
"""
from dataclasses import asdict, dataclass

import numpy as np
from scipy.special import ive

from ..observables.diagnostics import compare_events, find_clusters, white_noise_prediction
from ..transformer.kernels import fastest_mode, linear_growth_rates
from ..transformer.model import Model
from ..results.plotting import (plot_cluster_histories, plot_first_counts, plot_growth_rates, plot_mean_clusters,
                        plot_staircase)
from .metastability_runs import continuum_run, iid_run, particle_run, staircase_run
from .report import Report, pyplot, show_progress
from .options import FIRST, Options, Quick, experiment, option
from .parallel import check_parallel, cluster, map_tasks

# --------------------------------------------------------------------------------------------------
# the linear prediction
# --------------------------------------------------------------------------------------------------


def growth_spectrum(betas, dim, lmax=16, normalized=True):
    """(k* (B,), ς (B, lmax + 1)): `fastest_mode` and the rates ς_l (docs/mathematics.md §5) for each β."""
    ks, rates = [], []
    for b in np.atleast_1d(betas):
        model = Model(beta=float(b), dim=dim, normalized=normalized)
        ks.append(fastest_mode(model)[0])
        rates.append(linear_growth_rates(model, lmax))
    return np.array(ks), np.array(rates)


# --------------------------------------------------------------------------------------------------
# the experiment
# --------------------------------------------------------------------------------------------------


@dataclass
class MetastabilityOptions(Options):
    """Metastability (Figure 4, Problem 1): the fastest linear degree k*(beta) against the first cluster
    count of the continuum (Lagrangian solver) and of particles (quasi and iid samples) from a seeded
    near-uniform density on S^1 and S^2, the merge times, the mean number of clusters over (t, beta), and
    the n = 5, beta = 4 energy staircase on the circle.

    The options of `metastability` and of ``meanfield metastability``.
    """

    dims: tuple[int, ...] = option((2, 3), "ambient dimensions", choices=(2, 3))
    betas_circle: tuple[float, ...] = option((2.0, 4.0, 8.0), "beta values on S^1 (continuum and particles)",
                                             low=0.0, low_open=True)
    betas_sphere: tuple[float, ...] = option((3.0,), "beta values on S^2", low=0.0, low_open=True,
                                             quick=FIRST)
    epsilon: float = option(1e-4, "amplitude ε of each seeded degree in ρ_0 = 1 + ε Σ_{l<=L} Y_l", low=0.0,
                            low_open=True, high=0.01)
    degrees: int = option(8, "seeded degrees 1..L", low=1, high=32)
    seeds: int = option(5, "seeds per beta", low=1, quick=2)
    t_end: float = option(200.0, "last time on S^1 (merges)", low=1.0, quick=120.0)
    t_end_sphere: float = option(60.0, "last time on S^2", low=1.0, quick=40.0)
    tol: float = option(1e-3, "cluster tolerance in radians (`meanfield.observables.diagnostics.find_clusters`)")
    min_mass: float = option(1e-2, "the smallest mass of a cluster (`find_clusters`)")
    stray: float = option(0.05, "the mass allowed outside the clusters (`find_clusters`)")
    quasi_ns: tuple[int, ...] = option((250, 1000, 4000, 100_000), "particle numbers of the quasi samples (spectral "
                                       "sums beyond a few hundred)", low=16,
                                       quick=Quick("the largest <= 1000", lambda ns: [n for n in ns if n <= 1000][-1:]
                                                   or [min(ns)]))
    n_long: int = option(1000, "quasi runs with n <= n_long go to the last time (merges, plateaus); larger ones "
                         "stop shortly after the continuum's clusters formed", low=1)
    iid_ns: tuple[int, ...] = option((64, 256, 1024), "particle numbers of the iid samples on S^1", low=8,
                                     nonempty=False,
                                     quick=Quick("those <= 256", lambda ns: [n for n in ns if n <= 256] or ns[:1]))
    iid_seeds: int = option(32, "iid realisations per n", low=1, quick=8)
    iid_betas: tuple[float, ...] = option((4.0,), "beta values of the iid samples", low=0.0, low_open=True)
    iid_t_end: float = option(200.0, "last time of the iid runs", low=1.0, quick=60.0)
    figure4_betas: tuple[float, ...] = option((1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0), "beta values of the Figure 4 "
                                              "grid", low=0.0, low_open=True, nonempty=False, quick=(2.0, 4.0, 8.0))
    figure4_n: int = option(256, "particles of the Figure 4 grid (iid, S^1)", low=8, quick=128)
    figure4_seeds: int = option(32, "realisations per beta of the Figure 4 grid", low=1, quick=8)
    staircase_seeds: tuple[int, ...] = option((0, 1, 2, 3), "seeds of the n = 5, beta = 4 staircases on S^1 (the "
                                              "first is drawn in bold and checked for two plateaus)", low=0,
                                              quick=FIRST)
    staircase_t_end: float = option(400.0, "last time of the staircases", low=1.0)


@experiment("metastability", MetastabilityOptions,
            help="the number of clusters: prediction, continuum, particles, Figure 4")
def metastability(out, o, *, quick, progress, workers, scheduler):
    """Metastability and the number of clusters on S^1 and S^2 (Figure 4, Problem 1); returns the `Report`.

    ``workers``, ``scheduler``: runs spread over dask workers (`meanfield.experiments.parallel.map_tasks`);
    every run is seeded by its task, so the results do not depend on them.
    """
    find_clusters(np.eye(2), o.tol, min_mass=o.min_mass, stray=o.stray)     # the detector checks its arguments
    workers, scheduler = check_parallel(workers, scheduler)
    progress = show_progress(progress)
    settings = {**asdict(o), "quick": quick}
    report = Report("metastability", out, settings)
    report.write()
    detector = dict(tol=o.tol, min_mass=o.min_mass, stray=o.stray)
    res = report.results
    with report.guard(), cluster(workers, scheduler) as client:     # one cluster for every batch of tasks
        par = dict(scheduler=client, progress=progress)
        _prediction(report, o.dims)
        report.write()

        # -- continuum ----------------------------------------------------------------------------
        cases = [(2, b) for b in o.betas_circle if 2 in o.dims] + [(3, b) for b in o.betas_sphere if 3 in o.dims]
        ctasks = [(d, b, s) for d, b in cases for s in range(o.seeds)]
        runs = {}
        for d in sorted({d for d, _ in cases}):
            sub = [tk for tk in ctasks if tk[0] == d]
            shared = dict(epsilon=o.epsilon, degrees=o.degrees, t_end=o.t_end if d == 2 else o.t_end_sphere,
                          panels=16, nodes_sphere=512, rtol=1e-8, adaptive_tol=1e-3,
                          space_time=720 if d == 2 else 0, **detector)
            for tk, r in zip(sub, map_tasks(continuum_run, sub, shared=shared,
                                            desc=f"continuum on S^{d - 1}", **par)):
                runs[tk] = r
        _continuum_checks(report, cases, o.seeds, runs)
        report.write()

        # -- quasi particles ------------------------------------------------------------------------
        ptasks = []
        for (d, b, s), r in runs.items():
            tf = r["events"]["t_form"]
            for n in o.quasi_ns:
                stop = float(r["t"][-1]) if (n <= o.n_long or not np.isfinite(tf)) else min(1.25 * tf + 2.0,
                                                                                           float(r["t"][-1]))
                ptasks.append((d, b, s, n, stop))
        times = {k: r["t"] for k, r in runs.items()}
        pres = map_tasks(particle_run, ptasks, shared=dict(epsilon=o.epsilon, degrees=o.degrees, rtol=1e-7,
                                                           times=times, **detector), desc="quasi particles", **par)
        particles = {tk[:4]: r for tk, r in zip(ptasks, pres)}
        _particle_checks(report, cases, o.seeds, runs, particles, o.quasi_ns, o.n_long)
        report.write()

        # -- iid particles: first count against n, the white-noise prediction ------------------------
        iid = {}
        if 2 in o.dims and o.iid_ns:
            itasks = [(2, float(b), n) for b in o.iid_betas for n in o.iid_ns]
            for tk, r in zip(itasks, map_tasks(iid_run, itasks, shared=dict(seeds=o.iid_seeds, t_end=o.iid_t_end,
                                                                              rtol=1e-6, **detector),
                                               desc="iid particles", **par)):
                iid[tk] = r
            _iid_results(report, iid)
            report.write()

        # -- Figure 4: mean number of clusters over (t, β) ------------------------------------------
        fig4 = {}
        if 2 in o.dims and o.figure4_betas:
            ftasks = [(2, float(b), o.figure4_n) for b in o.figure4_betas]
            todo = [tk for tk in ftasks if tk not in iid or iid[tk]["count"].shape[0] != o.figure4_seeds]
            got = map_tasks(iid_run, todo, shared=dict(seeds=o.figure4_seeds, t_end=o.iid_t_end, rtol=1e-6,
                                                       **detector), desc="Figure 4", **par)
            fig4 = {tk: iid[tk] for tk in ftasks if tk not in todo}
            fig4.update(dict(zip(todo, got)))
            _figure4_results(report, ftasks, fig4)
            report.write()

        # -- the n = 5, β = 4 staircase ---------------------------------------------------------------
        stairs = map_tasks(staircase_run, list(o.staircase_seeds), desc="staircase",
                           shared=dict(n=5, beta=4.0, t_end=o.staircase_t_end, tol=o.tol, rtol=1e-9), **par)
        _staircase_results(report, stairs)
        _save(report, cases, o.seeds, runs, particles, o.quasi_ns, iid, fig4, o.figure4_betas, stairs, o.dims)
        res["wall_time"] = report.to_dict()["wall_time"]
        report.finish()
    return report


# --------------------------------------------------------------------------------------------------
# checks and summaries
# --------------------------------------------------------------------------------------------------


def _prediction(report, dims):
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
    import xarray as xr  # deferred: xarray is heavy

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
    figs = {"prediction": plot_growth_rates(report.results["prediction"], dims),
            "continuum": plot_cluster_histories(runs, cases, seeds, particles, quasi_ns),
            "staircase": plot_staircase(stairs)}
    if fig4:
        figs["figure4"] = plot_mean_clusters(report.results["figure4"])
    if iid:
        figs["particles_iid"] = plot_first_counts(report.results["particles_iid"])
    for name, fig in figs.items():
        report.save_figure(fig, f"{name}.png")
    plt.close("all")


