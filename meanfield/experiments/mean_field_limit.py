"""``meanfield mean-field-limit``: particles against the continuum on S^1 and S^2 (Remark 3.3; docs/mathematics.md §8).

One problem — (SA) with β = 1, V = I, from a von Mises–Fisher density — is solved twice:

* by the PDE solver (`solvers.FourierCircle` on S^1, `solvers.SphericalHarmonics` on S^2), whose ρ_t is
  the reference: on S^1 W1 is computed against the density itself (`circle_w1_to_density`, exact),
  and the kernel distance against its values at 2^18 points (exact for the kernel's degrees); on S^2
  the quasi samples' W1 is the midpoint of the certified bracket lower <= W1 <= upper against ρ_t
  itself (`meanfield.observables.w1bracket`, relative width below 1% from N = 10^4 on), the iid samples' W1 the
  exact LP against a randomly rotated Fibonacci set with weights ∝ ρ_t of M = 6000 points (error
  ≈ 0.6·M^{-1/2}), and the kernel distance uses 2·10^5 such points (error far below it);
* by `solvers.Particles` from N iid or quasi (quadrature-weighted) samples of ρ0, N from 10^2 to
  10^6: the particle sums are spectral beyond a few hundred particles (O(N) per step).

It reports, against N at several t, W1(μ^N_t, ρ_t) (exact: on S^1 for every N; on S^2 bracketed for
quasi samples up to N = 10^6, exact for iid ones while N·M <= 2.5e7) and the kernel distance D_κ(μ^N_t, ρ_t) of `meanfield.kernel_distance` (κ = 4, for every N;
D_κ <= 2·W1), with the fitted exponents p of ≈ C·N^{-p}. docs/mathematics.md §8 predicts for W1 p = 1/2
for iid samples on S^1 and sqrt(log N / N) on S^2 (a fitted p slightly below 1/2), p = 1 for quasi
samples on S^1 and p = 1/2 with a smaller constant on S^2; D_κ decays like N^{-1/2} for iid samples
in any dimension, and faster for quasi ones.
Dobrushin's estimate W1(μ^N_t, ρ_t) <= e^{Lt}·W1(μ^N_0, ρ_0) is compared, with the crude constant
L(β) = 2 + 2(1 + 2β)e^{2β} (Lipschitz constants of (x, μ) ↦ X[μ](x) for (SA); the paper's constant is
not given, docs/mathematics.md §8), with the measured growth. Particles with N above
``n_dynamic_max`` are compared at t = 0 only.

Wasserstein decay: W1 of ρ_t to the nearest Dirac mass (attractive) or to σ (repulsive) against t,
for the PDE and for particles, with the fitted exponential rates. Near a single cluster (SA) contracts
at rate 1 and (USA) at rate e^β (Lemma 6.4; docs/mathematics.md §8); the repulsive flow approaches σ
at the rate |ς_1| of docs/mathematics.md §5. The attractive PDE is followed through the clustering:
the spectral solver hands over to `solvers.Lagrangian` when it stops resolving the density, and the
PDE's own rate is fitted where 1e-10 < W1 < 1e-3 (t from about 7 to 24; `fit_decay_rate`).
"""
import warnings
from dataclasses import dataclass

import numpy as np
from scipy.optimize import least_squares

from ..measures import densities
from ..errors import InvalidInput, UnderResolved
from ..transformer.kernels import linear_growth_rates
from ..transformer.model import Model
from ..spaces.quadrature import sphere_quadrature
from ..measures.sampling import sample
from ..sums.spectralsums import kernel_distance
from ..observables.wasserstein import EXACT_MAX_SIZE, circle_w1_to_density, w1_to_dirac, w1_to_uniform, wasserstein
from .report import Report, fit_exponential, fit_power_law, pyplot, show_progress
from .options import Options, experiment, option
from .parallel import check_parallel, map_tasks
import solvers
from ..results.plotting import model_label, suptitle


def dobrushin_constant(beta):
    """A crude Lipschitz constant L(β) = 2 + 2(1 + 2β)e^{2β} of (x, μ) ↦ X[μ](x) for (SA).

    Dobrushin's estimate (Remark 3.3; docs/mathematics.md §8) uses it as W1(μ_t, ν_t) <= e^{Lt} W1(μ_0, ν_0).
    """
    return 2.0 + 2.0 * (1.0 + 2.0 * beta) * np.exp(2.0 * beta)


def _rotation(dim, rng):
    q, r = np.linalg.qr(rng.standard_normal((dim, dim)))
    return q * np.sign(np.diag(r))


KAPPA = 4.0                 # the kernel distance's κ
M_KERNEL = 200_000          # S^2: reference points for the kernel distance
ONE_SEED_FROM = 100_000     # iid samples of this size or more: one realisation (their spread is a few %)
KERNEL_SEEDS = 16           # iid samples below ONE_SEED_FROM: realisations of D_κ (O(N) each; W1 takes ``seeds``)


def reference_measure(sol, i, m=None, rng=None):
    """A fine discretisation of the PDE density ρ at saved index i, independent of the sample points."""
    d = sol.model.dim
    if d == 2 and hasattr(sol.representation, "grid_values"):
        # ρ at the m points 2π(j + 3/4)/m (a quarter-cell shift from the quasi samples' midpoints), by FFT
        m = m or (1 << 18)
        values = sol.representation.grid_values(sol.data[i], 2 * m)[1::2]
        theta = 2 * np.pi * (np.arange(m) + 0.75) / m
        w = np.clip(values, 0.0, None)
        return np.stack([np.cos(theta), np.sin(theta)], -1), w / w.sum()
    if d == 2:
        m = m or (1 << 16)
        x, q = sphere_quadrature(m, 2)
        # a half-cell shift, so the reference never shares points with the quasi samples
        c, s = np.cos(np.pi / m), np.sin(np.pi / m)
        x = x @ np.array([[c, s], [-s, c]])
    else:
        m = m or 6000
        x, q = sphere_quadrature(m, d)
        x = x @ _rotation(d, np.random.default_rng(rng)).T
    w = np.clip(np.asarray(sol.density(x, i), dtype=float), 0.0, None) * q
    return x, w / w.sum()


DECADES = [100, 316, 1000, 3162, 10_000, 31_623, 100_000, 316_228, 1_000_000]     # the N of W1 against N


def _pde(model, rho0, t_eval, coarse, progress, handover="raise"):
    """The spectral run (FourierCircle, SphericalHarmonics); ``handover``: its ``on_underresolved``."""

    if model.dim == 2:
        solver = solvers.FourierCircle(model, modes=128 if coarse else 256)
    else:
        solver = solvers.SphericalHarmonics(model, lmax=40 if coarse else 63)
    try:
        sol = solver.solve(rho0, t_eval, progress=progress, rtol=1e-9, atol=1e-12, on_underresolved=handover)
    except UnderResolved as exc:
        return exc.solution, f"PDE stopped by UnderResolved at t = {exc.t:.3g}"
    if "handover_t" in sol.stats:
        return sol, (f"the spectral solver until t = {sol.stats['handover_t']:.3g} (under-resolved), then "
                     f"solvers.Lagrangian ({sol.stats['nodes']} labels)")
    return sol, ""


def graded_panels(antipode, panels=32, levels=36):
    """Panel edges on S^1 for `solvers.Lagrangian`: ``panels`` equal panels, and towards the angle
    ``antipode`` panels halving ``levels`` times (down to π·2^-levels).

    The antipode of a single cluster is a fixed point the flow leaves at rate 1, as fast as the
    cluster contracts: a label at distance δ from it reaches the cluster only after t ≈ log(1/δ),
    so W1 to the Dirac mass is followed up to t ≈ ``levels``·log 2 (25 for 36 levels) instead of
    log(number of labels).
    """
    fine = np.pi * 2.0 ** -np.arange(1, levels + 1)
    e = np.sort(np.concatenate([-np.pi + 2 * np.pi * np.arange(panels + 1) / panels, fine, -fine, [0.0]]))
    keep = np.concatenate([[True], np.diff(e) > 1e-9 * np.maximum(np.abs(e[1:]), np.abs(e[:-1]))])
    return antipode + e[keep]


def _handover(model, rho0, coarse):
    """The Lagrangian labels a decay run hands over to: graded towards the antipode of the mean of ρ0
    on S^1 (`graded_panels`), Gauss–Legendre on S^2 (the antipode holds too little mass to matter)."""
    if model.dim == 3:
        return {"nodes": 512 if coarse else 1152}
    x, q = sphere_quadrature(4096, 2)
    m = (q * rho0(x)) @ x
    return {"panels": graded_panels(float(np.arctan2(-m[1], -m[0])))}


def fit_decay_rate(t, w, low=1e-10, high=1e-3):
    """The decay rate λ of W1 on the saved times where ``low`` < W1 < ``high``: least squares for
    log W1 ≈ log a + log(1 + r(t − t_0)) − λ(t − t_0), r >= 0, t_0 the window's start.

    The factor 1 + r(t − t_0) is the algebraic prefactor of W1 ≈ (a + bt)e^{−t} that a density positive
    at the antipode of a single cluster gives on S^1 (the integral of tan(θ/2) against ρ_0 diverges
    logarithmically there, docs/experiments.md); on S^2 r is 0. Returns a dict with ``rate`` (λ),
    ``prefactor`` (r), ``exponential`` (the rate of a plain exponential fit), ``window`` and ``points``.
    """

    t, w = np.asarray(t, dtype=float), np.asarray(w, dtype=float)
    sel = np.isfinite(w) & (w > low) & (w < high)
    out = {"rate": float("nan"), "prefactor": float("nan"), "exponential": float("nan"), "window": [float("nan")] * 2,
           "points": int(sel.sum())}
    if sel.sum() < 5:
        return out
    tt, lw = t[sel], np.log(w[sel])
    s = tt - tt[0]
    plain = fit_exponential(tt, w[sel])[0]

    def residual(p):
        return p[1] + np.log1p(p[2] * s) - p[0] * s - lw

    fit = least_squares(residual, [plain, lw[0], 0.0], bounds=([0.0, -np.inf, 0.0], [np.inf, np.inf, np.inf]),
                        xtol=1e-14, ftol=1e-14, gtol=1e-14)
    out.update(rate=float(fit.x[0]), prefactor=float(fit.x[2]), exponential=float(plain),
               window=[float(tt[0]), float(tt[-1])])
    return out


BRACKET_WIDTH = 0.2         # S^2, quasi samples: W1 is the midpoint of its certified bracket when that is this narrow


class DensityAt:
    """ρ at one saved time of a PDE Solution ``part`` (one time slice), as a density callable."""

    def __init__(self, part):
        self.part = part

    def __call__(self, x):
        return self.part.density(x, 0)


@dataclass(frozen=True)
class SphereReference:
    """The W1 references on S^2: a fine discretisation of ρ_t (exact LP, iid samples) and ρ_t itself
    (the certified bracket, quasi samples)."""

    measure: tuple
    density: DensityAt


def distance_sample(task, *, model, rho0, times, refs, n_dynamic_max, w1_seeds=None):
    """(W1, D_κ)(μ^N_t, ρ_t) at the saved times for one sample ``task = (method, j, N, s)`` (a task of
    `map_tasks`); W1 is NaN on S^2 where the exact linear program would be too large, and for the
    samples s >= ``w1_seeds`` (those that only add realisations of D_κ).

    The sample's seed 1000·s + j depends only on the task, so the result does not depend on how the
    tasks are spread over workers. The particles are integrated to a tolerance below their sampling
    error (rtol 1e-7 for iid samples, 1e-9 for quasi ones, whose W1 is O(1/N)).
    """

    method, j, n, s = task
    x0, w0 = sample(rho0, int(n), model.dim, rng=1000 * s + j, method=method)
    if n <= n_dynamic_max and times.size > 1:
        rtol = 1e-7 if method == "iid" else 1e-9
        ps = solvers.Particles(model, diagnostics="none").solve(x0, times, weights=w0, rtol=rtol, atol=1e-3 * rtol,
                                                                progress=False)
        xs = [np.asarray(ps.measure(i)[0]) for i in range(times.size)]
    else:
        xs = [x0]
    out = []
    for i, x in enumerate(xs):
        ref_w1, ref_kernel = refs[i]
        if w1_seeds is not None and s >= w1_seeds:
            w1 = np.nan
        elif model.dim == 2:
            w1 = circle_w1_to_density((x, w0), ref_w1)
        elif method == "quasi":     # the certified bracket against ρ_t itself, narrow for quasi points
            bracket = wasserstein((x, w0), ref_w1.density, method="bracket")
            w1 = bracket.value if bracket.width <= BRACKET_WIDTH else np.nan
        else:
            w1 = wasserstein((x, w0), ref_w1.measure) if len(x) * len(ref_w1.measure[1]) <= EXACT_MAX_SIZE else np.nan
        out.append((w1, kernel_distance((x, w0), ref_kernel, KAPPA)))
    return out


def sampling_study(dim, model, rho0, times, ns, methods, seeds, n_dynamic_max, coarse=False, progress=False, m_ref=None,
                   workers=None, scheduler=None):
    """W1(μ^N_t, ρ_t) and D_κ(μ^N_t, ρ_t) for N in ``ns`` at every t in ``times``. iid samples below
    N = 10^5: W1 averaged over ``seeds`` realisations, D_κ the root mean square over max(``seeds``,
    `KERNEL_SEEDS`) (E D_κ² = (1 − ∬k)/N, and D_κ² of one sample spreads widely: its few low degrees
    carry it); one realisation beyond.

    Returns dicts method -> array (len(times), len(ns)) of W1 and of D_κ (NaN where N > n_dynamic_max
    and t > 0, and for W1 where it is not computed), and the PDE Solution. ``workers``, ``scheduler``:
    one task per sample (see `map_tasks`).
    """
    times = times_all = np.asarray(times, dtype=float)
    sol, note = _pde(model, rho0, times, coarse, progress)
    reached = len(sol.t)            # the PDE may stop (UnderResolved) before the last time: NaN rows there
    times = times[:reached]
    refs = []                       # per time: (the W1 reference, the kernel-distance reference)
    for i in range(reached):
        if dim == 2:                # W1 against the Fourier coefficients themselves
            refs.append((np.asarray(sol.data[i]), reference_measure(sol, i, m_ref)))
        else:
            refs.append((SphereReference(reference_measure(sol, i, m_ref, rng=100 + i), DensityAt(sol[i])),
                         reference_measure(sol, i, M_KERNEL, rng=200 + i)))
    tasks = [(method, j, n, s) for method in methods for j, n in enumerate(ns)
             for s in range(max(seeds, KERNEL_SEEDS) if method == "iid" and n < ONE_SEED_FROM else 1)]
    values = map_tasks(distance_sample, tasks, workers=workers, scheduler=scheduler, progress=progress,
                       desc=f"W1 against N on S^{dim - 1}", priority=[n for _, _, n, _ in tasks],   # largest N first
                       shared=dict(model=model, rho0=rho0, times=times, refs=refs, n_dynamic_max=n_dynamic_max,
                                   w1_seeds=seeds))
    w1, kd = {}, {}
    for method in methods:
        mean = np.full((2, len(np.atleast_1d(times_all)), len(ns)), np.nan)
        for j in range(len(ns)):
            # seeds in order, as a serial loop adds them: W1 averaged, D_κ as sqrt(mean D_κ²)
            rows = [np.asarray(w, dtype=float).T for (m, jj, _, _), w in zip(tasks, values) if (m, jj) == (method, j)]
            part = np.full((len(rows), 2, times.size), np.nan)
            for r, w in enumerate(rows):
                part[r, :, :w.shape[1]] = w
            with np.errstate(invalid="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)          # all-NaN columns stay NaN
                mean[0, :reached, j] = np.nanmean(part[:, 0], axis=0)
                mean[1, :reached, j] = np.sqrt(np.nanmean(part[:, 1] ** 2, axis=0))
        w1[method], kd[method] = mean
    return w1, kd, sol


def decay_study(dim, model, rho0, t_end, n_particles, coarse=False, progress=False):
    """W1 to the nearest Dirac (V = I) or to σ (V = −I) against t, PDE and particles, with fitted rates.

    Attractive, without noise: the PDE is followed through the clustering (the spectral solver hands
    over to `solvers.Lagrangian` when it stops resolving the density, `_handover`), and its rate is
    fitted where 1e-10 < W1 < 1e-3 (`fit_decay_rate`); below 1e-10 positions on the unit sphere reach
    round-off. W1 of the spectral part uses `reference_measure`, of the Lagrangian part its nodes.
    """

    attractive = model.v > 0
    t = np.linspace(0.0, t_end, int(round(2 * t_end)) + 1 if coarse else int(round(4 * t_end)) + 1)
    handover = _handover(model, rho0, coarse) if attractive and model.noise == 0 else "raise"
    sol, note = _pde(model, rho0, t, coarse, progress, handover)
    def dist(m):
        return w1_to_dirac(m) if attractive else w1_to_uniform(m, n_reference=None if dim == 2 else 1500)
    n_meas = 8192 if dim == 2 else 1500
    w_pde = np.array([dist(seg.measure(i) if seg.representation.keeps_identity else
                           reference_measure(seg, i, n_meas, rng=7))
                      for seg in sol.segments for i in range(len(seg.t))])
    x0, w0 = sample(rho0, n_particles, dim, method="quasi")
    ps = solvers.Particles(model).solve(x0, t, weights=w0, rtol=1e-8, atol=1e-10, progress=False)
    w_par = np.array([dist((np.asarray(ps.positions[i]), w0)) for i in range(len(ps.t))])
    if attractive:
        predicted = 1.0 if model.normalized else float(np.exp(model.beta))
    else:
        predicted = -float(linear_growth_rates(model, 1)[1])
    # fit on the second half of each curve (the asymptotic regime), above round-off
    def fit(tt, ww):
        # attractive: down to round-off; repulsive: particles level off at their sampling error
        floor = 1e-9 if attractive else 5 * float(np.min(ww))
        tt, ww = tt[ww > floor], ww[ww > floor]
        if tt.size < 3:
            return float("nan")
        sel = tt >= 0.5 * tt[-1]
        if sel.sum() < 3:
            sel = np.ones_like(tt, dtype=bool)
        return fit_exponential(tt[sel], ww[sel])[0] if sel.sum() >= 3 else float("nan")
    window = fit_decay_rate(sol.t, w_pde) if attractive else None
    return {"t_pde": sol.t, "w1_pde": w_pde, "t_particles": ps.t, "w1_particles": w_par,
            "rate_pde": window["rate"] if attractive else fit(sol.t, w_pde), "fit_pde": window,
            "rate_particles": fit(ps.t, w_par), "predicted_rate": predicted, "note": note, "attractive": attractive,
            "handover_t": sol.stats.get("handover_t", float("nan")), "solution": sol,
            "particles": ps}


@dataclass
class MeanFieldLimitOptions(Options):
    """W1 between N particles and the PDE solution against N (iid and quasi samples) and t on S^1 and S^2,
    fitted rates, the Dobrushin bound, and the Wasserstein decay to the nearest Dirac (or to uniform with
    --repulsive).

    The options of `mean_field_limit` and of ``meanfield mean-field-limit``.
    """

    dims: tuple[int, ...] = option((2, 3), "ambient dimensions", choices=(2, 3))
    beta: float = option(1.0, "inverse temperature", low=0.0)
    normalized: bool = option(True, "(SA) if true, (USA) otherwise", flags=("--usa",),
                              flag_help="the unnormalised model (USA) instead of (SA)")
    V: float = option(1.0, "the value matrix V·I, non-zero: +1 attractive, -1 repulsive", flags=("--repulsive",),
                      const=-1.0, flag_help="V = -I instead of V = I")
    kappa: float = option(2.0, "concentration of the von Mises-Fisher initial density", low=0.0)
    times: tuple[float, ...] = option((0.0, 0.5, 1.0), "saved times for W1 against N", low=0.0, quick=(0.0, 1.0))
    ns: dict | None = option(None, "dim -> list of N", shown="10^2 ... 10^6 on S^1 and S^2 (half decades)",
                             quick={2: DECADES[:5], 3: DECADES[:5]})
    seeds: int = option(4, "iid repetitions per N", low=1, quick=2)
    n_dynamic_max: int = option(1_000_000, "particles are evolved for N up to this; larger N are compared at "
                                "t = 0 only", low=1, quick=10_000)
    coarse: bool = option(False, "coarser continuum runs: 128 modes / lmax 40, half the saved times of the decay "
                          "run, 512 hand-over labels on S^2", quick=True)
    decay_t_end: float = option(26.0, "end time of the Wasserstein-decay run (W1 to the Dirac mass is below "
                                "1e-10 from t = 24)", low=0.0, low_open=True)


@experiment("mean-field-limit", MeanFieldLimitOptions, help="particles against the PDE: W1 against N and time")
def mean_field_limit(out, o, *, quick, progress, workers, scheduler):
    """Particles against the continuum (see the module docstring); returns the `Report`.

    The model is (``beta``, ``normalized``, ``V``); ρ0 is a von Mises–Fisher density with concentration
    ``kappa``. Times the PDE does not reach (it stops when the cluster is no longer resolved) are
    reported as NaN. ``workers``, ``scheduler``: one task per (sampling, N, seed) on dask workers (see
    `meanfield.experiments.parallel.map_tasks`); the seeds do not depend on them.
    """
    dims, beta, normalized, V, kappa, decay_t_end = o.dims, o.beta, o.normalized, o.V, o.kappa, o.decay_t_end
    if V == 0:
        raise InvalidInput("`V` must be non-zero (+1 attractive, −1 repulsive).")
    workers, scheduler = check_parallel(workers, scheduler)
    times, seeds = np.asarray(o.times, dtype=float), o.seeds
    ns = {**{d: DECADES for d in (2, 3)}, **{int(d): list(v) for d, v in (o.ns or {}).items()}}   # TOML keys: strings
    n_dynamic_max = {d: o.n_dynamic_max for d in (2, 3)}
    progress = show_progress(progress)
    settings = {"dims": dims, "beta": beta, "normalized": normalized, "V": V, "kappa": kappa, "times": times,
                "ns": {str(d): ns[d] for d in dims}, "seeds": seeds, "n_dynamic_max": n_dynamic_max,
                "decay_t_end": decay_t_end, "quick": quick, "dobrushin_L": dobrushin_constant(beta)}
    report = Report("mean-field-limit", out, settings)
    report.write()
    plt = pyplot() if report.out is not None else None
    with report.guard():
        for dim in dims:
            model = Model(beta=beta, dim=dim, normalized=normalized, V=V)
            rho0 = densities.von_mises_fisher(np.eye(dim)[-1], kappa)
            w1, kd, sol = sampling_study(dim, model, rho0, times, ns[dim], ("iid", "quasi"), seeds, n_dynamic_max[dim],
                                     coarse=o.coarse, progress=progress, workers=workers, scheduler=scheduler)
            report.save_dataset(sol, f"pde_d{dim}.nc")
            res = report.results.setdefault(f"S{dim - 1}", {})
            nn = np.asarray(ns[dim], dtype=float)
            rates = {m: [fit_power_law(nn, w1[m][i])[0] for i in range(times.size)] for m in w1}
            krates = {m: [fit_power_law(nn, kd[m][i])[0] for i in range(times.size)] for m in kd}
            res.update({"N": nn, "times": times, "w1_iid": w1["iid"], "w1_quasi": w1["quasi"], "rate_iid": rates["iid"],
                        "rate_quasi": rates["quasi"], "kernel_kappa": KAPPA, "kernel_iid": kd["iid"],
                        "kernel_quasi": kd["quasi"], "kernel_rate_iid": krates["iid"],
                        "kernel_rate_quasi": krates["quasi"]})
            L = _sampling_checks(report, res, dim, nn, times, w1, kd, rates, krates, beta)
            report.write()

            dec = decay_study(dim, model, rho0, decay_t_end, 1000 if dim == 2 else 600, coarse=o.coarse,
                              progress=progress)
            report.save_dataset(dec["particles"], f"particles_decay_d{dim}.nc")
            report.save_dataset(dec["solution"], f"pde_decay_d{dim}.nc")
            res["decay"] = {k: dec[k] for k in ("t_pde", "w1_pde", "t_particles", "w1_particles", "rate_pde",
                                                "fit_pde", "rate_particles", "predicted_rate", "note", "handover_t")}
            _decay_checks(report, res, dim, dec)
            report.write()
            if plt is not None:
                _plot(report, dim, nn, times, w1, kd, dec, L, model)
        report.finish()
    return report


def _sampling_checks(report, res, dim, nn, times, w1, kd, rates, krates, beta):
    """The checks of W1 and D_κ against N on S^{dim−1} (fitted exponents, quasi against iid samples) and
    Dobrushin's bound (drawn); returns its constant L(β)."""
    report.check(f"S^{dim - 1}: iid kernel-distance exponent at t = {times[-1]:g} within ±0.1 of 1/2 "
                 f"(N up to {int(nn[-1])})", abs(krates["iid"][-1] - 0.5) <= 0.1,
                 f"fitted {krates['iid'][-1]:.3f}; quasi samples: {krates['quasi'][-1]:.3f}",
                 compared=f"the exponent p of D_κ ≈ C N^-p (κ = {KAPPA:g}, iid particles against the PDE, "
                          f"t = {times[-1]:g}) with 1/2 (E D_κ² = (1 − ∬k)/N)", tolerance="|p − 1/2| <= 0.1")
    growth = [float(np.nanmax(w1["iid"][i] / w1["iid"][0])) for i in range(times.size)]
    res["measured_growth_iid"] = growth
    expected_iid = 0.5
    tol_iid = 0.15
    report.check(f"S^{dim - 1}: iid W1 exponent at t = 0 within ±{tol_iid} of 1/2",
                 abs(rates["iid"][0] - expected_iid) <= tol_iid,
                 f"fitted {rates['iid'][0]:.3f} (docs/mathematics.md §8: "
                 f"{'N^-1/2' if dim == 2 else 'sqrt(log N/N), slope a little below 1/2'})",
                 compared="the exponent p of a least-squares fit W1 ≈ C N^-p (iid samples against the PDE, "
                          "t = 0) with 1/2", tolerance=f"|p − 1/2| <= {tol_iid}")
    if times.size > 1:
        report.check(f"S^{dim - 1}: iid W1 exponent at t = {times[-1]:g} within ±{tol_iid} of 1/2 "
                     "(mean-field limit)",
                     abs(rates["iid"][-1] - expected_iid) <= tol_iid, f"fitted {rates['iid'][-1]:.3f}",
                     compared=f"the exponent p of W1 ≈ C N^-p (iid particles against the PDE, t = {times[-1]:g}) "
                              "with 1/2", tolerance=f"|p − 1/2| <= {tol_iid}")
    if dim == 2:
        report.check("S^1: quasi W1 exponent at t = 0 close to 1 (quantile/midpoint rate O(1/N))",
                     rates["quasi"][0] >= 0.85, f"fitted {rates['quasi'][0]:.3f}",
                     compared="the exponent p of W1 ≈ C N^-p (quasi samples, t = 0)", tolerance="p >= 0.85")
    else:
        measured = int(np.sum(np.isfinite(w1["quasi"][0])))
        report.check("S^2: quasi W1 exponent at t = 0 within ±0.1 of 1/2 (certified brackets against ρ itself)",
                     abs(rates["quasi"][0] - 0.5) <= 0.1 and measured == len(nn),
                     f"fitted {rates['quasi'][0]:.3f} over {measured} of {len(nn)} N up to {int(nn[-1])} "
                     "(any N points quantise the sphere at the scale N^-1/2)",
                     compared="the exponent p of W1 ≈ C N^-p, W1 the midpoint of the bracket lower <= W1 <= upper "
                              f"(meanfield.observables.w1bracket, relative width <= {BRACKET_WIDTH:g})",
                     tolerance="|p − 1/2| <= 0.1, every N bracketed")
    both = np.isfinite(w1["quasi"][0]) & np.isfinite(w1["iid"][0])
    better = bool(np.all(w1["quasi"][0][both] < w1["iid"][0][both]))
    report.check(f"S^{dim - 1}: quasi samples beat iid samples at every N (t = 0)", better,
                 f"W1 ratio quasi/iid at the largest N: "
                 f"{np.nanmin(w1['quasi'][0] / w1['iid'][0]):.3f}",
                 compared="W1 to the PDE of quasi and of iid samples at each N (t = 0)",
                 tolerance="quasi < iid at every N")
    # Dobrushin's bound with the crude L(β) holds by orders of magnitude: drawn, not counted as a check
    L = dobrushin_constant(beta)
    res["dobrushin_bound"] = [float(np.exp(L * t)) for t in times]
    report.note(f"S^{dim - 1}: measured growth W1(t)/W1(0) = {', '.join(f'{g:.2f}' for g in growth)} "
                f"(largest over N) against Dobrushin's e^(Lt) = "
                f"{', '.join(f'{np.exp(L * t):.3g}' for t in times)}, L = {L:.3g} (figure)")
    return L


def _decay_checks(report, res, dim, dec):
    """The checks of the Wasserstein decay on S^{dim−1}: the PDE's and the particles' rates against the
    prediction (Lemma 6.4), and the two curves against each other."""
    fit = dec["fit_pde"]
    if fit is not None:
        report.check(f"S^{dim - 1}: PDE W1 decay rate to the nearest Dirac within 2% of "
                     f"{dec['predicted_rate']:.3g} (Lemma 6.4)",
                     abs(fit["rate"] - dec["predicted_rate"]) <= 0.02 * dec["predicted_rate"],
                     f"λ = {fit['rate']:.5f} on t in [{fit['window'][0]:.3g}, {fit['window'][1]:.3g}] "
                     f"({fit['points']} saved times, 1e-10 < W1 < 1e-3), prefactor r = {fit['prefactor']:.3g}; "
                     f"a plain exponential fits {fit['exponential']:.4f}; {dec['note']}",
                     compared="λ of W1 ≈ a(1 + r(t − t_0))e^(−λ(t − t_0)) (r >= 0; the factor a density "
                              "positive at the antipode gives on S^1) with the predicted rate",
                     tolerance="relative difference <= 2%")
    overlap = min(len(dec["t_pde"]), len(dec["t_particles"]))
    agree = float(np.max(np.abs(dec["w1_pde"][:overlap] - dec["w1_particles"][:overlap])))
    res["decay"]["max_difference"] = agree
    report.check(f"S^{dim - 1}: particle decay rate within 10% of {dec['predicted_rate']:.3g}",
                 abs(dec["rate_particles"] - dec["predicted_rate"]) <= 0.1 * dec["predicted_rate"],
                 f"fitted particles {dec['rate_particles']:.3f}, PDE {dec['rate_pde']:.3f} "
                 f"(until t = {dec['t_pde'][-1]:.3g}); {dec['note']}",
                 compared="the fitted exponential decay rate of W1 for the particles with the predicted rate",
                 tolerance="relative difference <= 10%")
    scale = float(dec["w1_pde"][0])
    report.check(f"S^{dim - 1}: PDE and particle decay curves agree", agree <= 0.05 * scale,
                 f"max |W1_PDE − W1_particles| = {agree:.2e} (W1 at t = 0: {scale:.3f})",
                 compared="max over the common saved times of |W1_PDE(t) − W1_particles(t)|",
                 tolerance="<= 5% of W1 at t = 0")


def _plot(report, dim, nn, times, w1, kd, dec, L, model):
    fig, axes = report.subplots(1, 3, figsize=(15, 4.6))
    suptitle(fig, f"mean-field limit: {model_label(model)}; N = {int(nn[0])} to {int(nn[-1])} particles against the PDE")
    ax = axes[0]
    for i, t in enumerate(times):
        for method, style in (("iid", "o-"), ("quasi", "s--")):
            y = w1[method][i]
            ok = np.isfinite(y)
            if ok.any():
                ax.loglog(nn[ok], y[ok], style, color=f"C{i}", ms=4, label=f"{method}, t = {t:g}")
    for method, style in (("iid", "o:"), ("quasi", "s:")):
        y = kd[method][-1]
        ok = np.isfinite(y) & (y > 0)
        if ok.any():
            ax.loglog(nn[ok], y[ok], style, color="0.4", ms=3, label=fr"{method}: $D_\kappa$, t = {times[-1]:g}")
    p, c = fit_power_law(nn, w1["iid"][0])
    ax.loglog(nn, c * nn ** -p, "k-", lw=0.6, alpha=0.6, label=f"fit iid $t = 0$: $N^{{-{p:.2f}}}$")
    ax.set(xlabel="$N$", ylabel=r"$W_1(\mu^N_t, \rho_t)$", title=fr"$S^{{{dim - 1}}}$: particles vs PDE")
    ax.legend(fontsize=7, ncol=2)
    # the measured growth of the error; Dobrushin's W1(t) <= e^{Lt} W1(0) with the crude L(β) is orders
    # of magnitude above it (a vertical line on any common scale): stated as a number
    ax = axes[1]
    for method, mk in (("iid", "o-"), ("quasi", "s--")):
        ok = np.all(np.isfinite(w1[method]), axis=0)
        if ok.any():
            j = np.nonzero(ok)[0][-1]
            ax.semilogy(times, w1[method][:, j] / w1[method][0, j], mk, label=f"{method}, N = {int(nn[j])}")
    t_last = float(times[-1])
    ax.text(0.02, 0.97, f"Dobrushin's bound $e^{{Lt}}$ at $t = {t_last:g}$: {np.exp(L * t_last):.1e}\n"
                        f"($L = {L:.3g}$; far above this scale)", transform=ax.transAxes, va="top", fontsize=8)
    ax.set(xlabel="$t$", ylabel=r"$W_1(\mu^N_t,\rho_t)\,/\,W_1(\mu^N_0,\rho_0)$", title="growth of the error")
    ax.legend(fontsize=8, loc="lower right")
    ax = axes[2]
    ax.semilogy(dec["t_pde"], dec["w1_pde"], "-", lw=2, label=f"PDE (rate {dec['rate_pde']:.4f})")
    if np.isfinite(dec.get("handover_t", np.nan)):
        ax.axvline(dec["handover_t"], color="0.5", ls="--", lw=0.8, label="PDE: spectral → Lagrangian")
    ax.semilogy(dec["t_particles"], dec["w1_particles"], "o", ms=3,
                label=f"particles (rate {dec['rate_particles']:.3f})")
    tt = np.asarray(dec["t_particles"])
    ax.semilogy(tt, dec["w1_particles"][-1] * np.exp(-dec["predicted_rate"] * (tt - tt[-1])), "k:", lw=1,
                label=f"predicted rate {dec['predicted_rate']:.3g}")
    ax.set(xlabel="$t$", ylabel=r"$W_1$ to the nearest Dirac" if dec["attractive"] else r"$W_1$ to uniform",
           title="Wasserstein decay")
    ax.legend(fontsize=8)
    fig.tight_layout()
    report.save_figure(fig, f"mean_field_limit_d{dim}.png")
