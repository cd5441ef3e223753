"""The lost-in-the-middle experiment: the response profile S_τ(s) of the last token and its threshold τ_crit(β).

A signal placed at the position s of a causal sequence reaches the last position σ = 1 through the
layered continuity equation (docs/causal.md). About the uniform state its response is, in the
kinetic paper's time τ = t/β (Duerinckx, Geshkovski, Rossi, *Kinetic theory for Transformers and the
lost-in-the-middle phenomenon*, arXiv 2605.09213; `meanfield.transformer.causal`),

    S_τ(s) = Σ_{n=1}^{n_max} ω_{n,M} g_{b_n}(τ, 1; s),   b_n = n² I_n(β),   ω_{n,M} = e^{−π²n²/(2M²)},

U-shaped (both ends of the sequence answer more than the middle) until its slope at s → 1 changes
sign at τ_crit(β) = 2(1 − e^{−λ}) Σ ω_n b_n / Σ ω_n b_n²; beyond it the last positions answer least.

This experiment measures the same from the nonlinear layered equation (`solvers.FourierCircle` with
``positions``; (USA), strictly causal mask, position bias λ): the initial density
ρ0(σ, θ) = 1 + ε φ_h(σ − s) Σ_n ω_n 2cos nθ with a narrow normalised Gaussian φ_h in σ, one run per
position s, S measured as Σ_n c_n(τ, σ = 1)/ε; τ_crit from the end slope of a degree-4 fit of the
measured S over s ∈ [0.8, 0.95]. Beyond the linear theory: the same at finite amplitude ε, and the
masked particles of the same initial law.
"""
from dataclasses import dataclass

import numpy as np

from ..transformer import causal as linear
from ..transformer.kernels import minimum_degree
from ..transformer.model import Model
from .options import Options, experiment, option
from .report import Report
import solvers
from ..errors import InvalidInput

BUMP_WIDTH = 0.01                                     # h of φ_h in σ
SLOPE_POSITIONS = np.linspace(0.8, 0.95, 7)          # where the end slope is fitted (degree 4)
PROFILE_FRACTIONS = (0.25, 0.5, 0.8, 1.2, 2.0)        # profile times in units of τ_crit
SLOPE_FRACTIONS = np.linspace(0.9, 1.1, 11)          # times around τ_crit where the end slope is measured
LINEAR_EPSILON = 1e-6


@dataclass
class LostInTheMiddleOptions(Options):
    """The response S_tau(s) of the last token to a signal at position s under a causal mask with ALiBi
    slope lambda: closed form (the kinetic paper's linear theory), measured from the layered continuity
    equation, at finite amplitude and with particles; the threshold tau_crit(beta) where the U shape ends.

    The options of `lost_in_the_middle` and of ``meanfield lost-in-the-middle``.
    """

    betas: tuple[float, ...] = option((1.0, 2.0, 3.0), "beta values of the measured profiles", low=0.0, low_open=True)
    position_bias: float = option(1.0, "lambda, the ALiBi slope (in units of the whole sequence)", low=0.0,
                                  low_open=True)
    signal_width: float = option(8.0, "M of the signal weights omega_n = exp(-pi^2 n^2/(2 M^2))", low=0.0,
                                 low_open=True)
    signal_modes: int = option(20, "n_max, the Fourier modes of the signal", low=1, high=64)
    positions: int = option(768, "positions of the layered equation (a multiple of 8)", low=8, quick=512)
    amplitudes: tuple[float, ...] = option((1e-3, 3e-3), "finite amplitudes epsilon beyond the linear theory",
                                           low=0.0, low_open=True, high=3.5e-3)
    particles: bool = option(True, "run the masked particles of the same initial law", flags=("--no-particles",),
                             flag_help="skip the particle runs")
    n_particles: int = option(8192, "tokens of the particle runs", low=64, flags=("-n", "--particles-n"), quick=2048)
    profile_step: float = option(0.1, "spacing of the measured positions s of the profile", low=0.0, low_open=True,
                                 high=0.5, quick=0.2)

    heads: str | None = option(None, "the multi-head profile instead: weight:beta:lambda per head, comma-separated "
                                     "(e.g. 1:0.2:3,-27.5:0.2:0.25)", shown="none: one head, the measurements")
    heads_tau: float = option(1.5, "the kinetic time tau of the multi-head profile", low=0.0, low_open=True)

    def __post_init__(self):
        super().__post_init__()
        if self.positions % 8:
            raise InvalidInput(f"`positions` must be a multiple of 8 (panels of 8 nodes in σ), got {self.positions}.")
        if self.heads is not None:
            parse_heads(self.heads)


def parse_heads(text):
    """[(weight, β, λ)] from "w:β:λ,w:β:λ,..." (ValueError naming `heads`; β > 0, λ >= 0)."""
    heads = []
    for k, part in enumerate(str(text).split(",")):
        items = part.strip().split(":")
        try:
            if len(items) != 3:
                raise InvalidInput
            heads.append(tuple(float(v) for v in items))
        except ValueError:
            raise InvalidInput(f"`heads` must be weight:beta:lambda triples separated by commas, e.g. 1:1:1,0.5:2:4; "
                             f"head {k + 1} is {part.strip()!r}.") from None
    linear.response_profile(1.0, [0.5], heads=heads)          # the ranges, named `heads[k] ...`
    return heads


def signal(s, epsilon, weights, width=BUMP_WIDTH):
    """ρ0(x, σ) = 1 + ε φ_h(σ − s) Σ_n ω_n 2cos nθ (σ-normalised Gaussian φ_h of width h)."""
    n = np.arange(1, len(weights) + 1)

    def rho0(x, sigma):
        theta = np.arctan2(x[..., 1], x[..., 0])
        bump = np.exp(-0.5 * ((sigma - s) / width) ** 2) / (width * np.sqrt(2 * np.pi))
        return 1 + epsilon * bump * (2 * np.cos(theta[..., None] * n) @ weights)

    return rho0


def smoothed_profile(tau, s, beta, o, width=BUMP_WIDTH):
    """∫_0^1 S_τ(r) φ_h(r − s) dr: the closed form seen through the same bump (40 Gauss–Legendre points on
    s ± 6h, cut at 0 and 1)."""
    g, gw = np.polynomial.legendre.leggauss(40)
    a, b = max(s - 6 * width, 0.0), min(s + 6 * width, 1.0)        # the signal lives on (0, 1]
    r = 0.5 * (a + b) + 0.5 * (b - a) * g
    w = 0.5 * (b - a) * gw * np.exp(-0.5 * ((r - s) / width) ** 2) / (width * np.sqrt(2 * np.pi))
    return np.array([w @ linear.response_profile(t, r, beta, o.position_bias, o.signal_width, o.signal_modes)
                     for t in np.atleast_1d(tau)])


def layered_solver(beta, o, positions, modes=0):
    """`solvers.FourierCircle` of the (USA) strictly causal model, modes >= n_max and the kernel's minimum
    (finite amplitudes fill the modes above n_max: they are given more)."""

    model = Model(beta, 2, normalized=False, mask="causal-strict", position_bias=o.position_bias)
    modes = max(o.signal_modes, minimum_degree(beta, 2), modes)
    return solvers.FourierCircle(model, modes, positions=positions)


def measured_response(solver, s, tau, epsilon, o):
    """S(τ) = Σ_n [c_n(τ, σ = 1) − c_n(0, σ = 1)]/ε of the layered run from `signal` at position s (τ = t/β):
    the initial value at σ = 1 (the bump's tail there) does not grow in the linear theory and is taken off."""
    weights = linear.signal_weights(o.signal_width, o.signal_modes)
    t = np.concatenate([[0.0], solver.model.beta * np.asarray(tau)])
    sol = solver.solve(signal(s, epsilon, weights), t, rtol=1e-10, atol=1e-13 * epsilon, progress=False)
    at_end = np.array([sol.representation.at(d, 1.0)[1:o.signal_modes + 1].real.sum() for d in sol.data])
    return (at_end[1:] - at_end[0]) / epsilon


def end_slope(values, positions=SLOPE_POSITIONS):
    """dS/ds at s = 1 of a degree-4 fit of S over ``positions`` (last axis)."""
    return np.array([np.polynomial.Polynomial.fit(positions, v, 4).deriv()(1.0) for v in np.atleast_2d(values)])


def threshold(tau, slope):
    """τ where the end slope changes sign (linear interpolation between the bracketing times); NaN if none."""
    change = np.nonzero(np.diff(np.sign(slope)))[0]
    if not change.size:
        return float("nan")
    i = int(change[0])
    return float(tau[i] - slope[i] * (tau[i + 1] - tau[i]) / (slope[i + 1] - slope[i]))


def is_u_shaped(profile):
    """An interior minimum below both ends."""
    i = int(np.argmin(profile))
    return 0 < i < len(profile) - 1


def _times(beta, o):
    tc = linear.critical_time(beta, o.position_bias, o.signal_width, o.signal_modes)
    return tc, np.sort(np.concatenate([tc * np.array(PROFILE_FRACTIONS), tc * SLOPE_FRACTIONS]))


def _closed_form_checks(report, o):
    """τ_crit(β) of the formula against the root of the end slope of the closed-form profile itself."""
    betas = np.round(np.arange(0.1, 4.85, 0.1), 10)
    tcrit = np.array([linear.critical_time(b, o.position_bias, o.signal_width, o.signal_modes) for b in betas])
    report.results["closed_form"] = {"betas": betas.tolist(), "tau_crit": tcrit.tolist()}
    worst = 0.0
    for beta in o.betas:
        tc, _ = _times(beta, o)
        taus = tc * SLOPE_FRACTIONS
        h = 1e-4
        ends = [linear.response_profile(t, [1 - 2 * h, 1 - h], beta, o.position_bias, o.signal_width, o.signal_modes)
                for t in taus]
        slope = np.array([(e[1] - e[0]) / h for e in ends])
        worst = max(worst, abs(threshold(taus, slope) / tc - 1))
    report.check("closed form: τ_crit(β) is where the end slope of S_τ changes sign", worst <= 2e-3,
                 f"max relative gap {worst:.2e} over β = {', '.join(f'{b:g}' for b in o.betas)}",
                 compared="the formula 2(1 − e^{−λ})Σω b/Σω b² with the root in τ of a finite difference of "
                          "S_τ at s = 1 − 1e-4", tolerance="<= 2e-3 (the finite difference's own error)")
    return betas, tcrit


def _measure_beta(report, beta, o, positions):
    """The linear measurement at one β: profiles and τ_crit, with their checks; returns the curves."""
    tc, tau = _times(beta, o)
    solver = layered_solver(beta, o, positions)
    profile_s = np.concatenate([np.arange(0.05, 0.8, o.profile_step), SLOPE_POSITIONS])
    measured = np.array([measured_response(solver, s, tau, LINEAR_EPSILON, o) for s in profile_s]).T
    closed = np.array([smoothed_profile(tau, s, beta, o) for s in profile_s]).T
    err = float(np.max(np.abs(measured / closed - 1)))
    where = f"β = {beta:g}"
    report.check(f"{where}: measured S_τ(s) = closed form through the same bump", err <= 1e-3,
                 f"max relative difference {err:.2e} over {len(profile_s)} positions × {len(tau)} times",
                 compared="Σ_n c_n(τ, 1)/ε of the layered run (ε = 1e-6) with ∫ S_τ(r) φ_h(r − s) dr",
                 tolerance="<= 1e-3 relative")
    fit = np.isin(profile_s, SLOPE_POSITIONS)
    slope_times = np.isin(tau, tc * SLOPE_FRACTIONS)
    t_measured = threshold(tau[slope_times], end_slope(measured[slope_times][:, fit]))
    gap = abs(t_measured / tc - 1)
    report.check(f"{where}: τ_crit measured from the layered equation = closed form", gap <= 0.01,
                 f"measured {t_measured:.6g}, closed form {tc:.6g}, relative gap {gap:.2e}",
                 compared="the root of the end slope of a degree-4 fit of the measured S over s ∈ [0.8, 0.95] "
                          "with 2(1 − e^{−λ})Σω b/Σω b²", tolerance="<= 1% relative")
    shapes = {f: is_u_shaped(measured[np.isclose(tau, f * tc)][0]) for f in PROFILE_FRACTIONS}
    below = all(shapes[f] for f in PROFILE_FRACTIONS if f < 1)
    above = not any(shapes[f] for f in PROFILE_FRACTIONS if f > 1)
    report.check(f"{where}: U shape below τ_crit, none above", below and above,
                 ", ".join(f"τ = {f:g} τ_crit: {'U' if u else 'no U'}" for f, u in shapes.items()),
                 compared="measured profiles over s ∈ [0.05, 0.95]: an interior minimum below both ends",
                 tolerance="U at every time below τ_crit and at none above (a yes/no property)")
    return {"tau_crit": tc, "tau_crit_measured": t_measured, "tau": tau.tolist(), "s": profile_s.tolist(),
            "measured": measured.tolist(), "closed_form": closed.tolist(), "max_relative_difference": err}


def _finite_amplitude(report, o, positions):
    """S at β = first of ``betas`` for each finite ε, against the linear response: the gap is first order in ε."""
    beta = o.betas[0]
    tc, _ = _times(beta, o)
    tau = tc * np.array([0.5, 1.0, 2.0])
    solver = layered_solver(beta, o, positions, 4 * o.signal_modes)
    s = np.array([0.2, 0.5, 0.8])
    base = np.array([measured_response(solver, si, tau, LINEAR_EPSILON, o) for si in s])
    gaps = []
    for eps in o.amplitudes:
        finite = np.array([measured_response(solver, si, tau, eps, o) for si in s])
        gaps.append(float(np.max(np.abs(finite / base - 1))))
    report.results["finite_amplitude"] = {"beta": beta, "epsilon": list(o.amplitudes), "tau": tau.tolist(),
                                          "s": s.tolist(), "max_relative_gap": gaps}
    if len(gaps) >= 2:
        ratio = gaps[-1] / gaps[0]
        expected = o.amplitudes[-1] / o.amplitudes[0]
        report.check(f"β = {beta:g}: the response at finite ε leaves the linear theory at first order in ε",
                     abs(ratio / expected - 1) <= 0.2,
                     f"max relative gaps {', '.join(f'{g:.3g}' for g in gaps)} at ε = "
                     f"{', '.join(f'{e:g}' for e in o.amplitudes)}; ratio {ratio:.3g} (ε ratio {expected:.3g})",
                     compared="max |S_ε/S_lin − 1| at two amplitudes", tolerance="ratio within 20% of the ε ratio")
    return gaps


def _particles(report, o, n):
    """Masked particles with the law of `signal` at a wide bump (h = 0.05, ε = 0.01, β = first of ``betas``):
    the Fourier coefficients c_1..c_4 of the last tenth of the tokens, minus those of the tokens drawn
    from the same quasi-random numbers without the signal, against the layered continuum's mean over
    σ ∈ [0.9, 1] of the same run, at τ_crit."""

    beta, width, eps = o.betas[0], 0.05, 0.01
    tc, _ = _times(beta, o)
    weights = linear.signal_weights(o.signal_width, o.signal_modes)
    solver = layered_solver(beta, o, 256, 4 * o.signal_modes)
    particles = solvers.Particles(solver.model, diagnostics="none")
    g, gw = np.polynomial.legendre.leggauss(8)
    modes = np.arange(1, 5)

    def last_tenth(rho0):
        x = particles.solve(_quasi_tokens(rho0, n), [0.0, beta * tc]).positions[-1][-n // 10:]
        return np.exp(-1j * np.outer(modes, np.arctan2(x[:, 1], x[:, 0]))).mean(axis=1)

    reference = last_tenth(signal(0.5, 0.0, weights, width))
    rows = []
    for s in (0.3, 0.6):
        rho0 = signal(s, eps, weights, width)
        cont = solver.solve(rho0, [0.0, beta * tc], rtol=1e-9, atol=1e-12, progress=False)
        window = sum(w / 2 * cont.representation.at(cont.data[-1], 0.95 + 0.05 * gi) for gi, w in zip(g, gw))[modes]
        gap = float(np.max(np.abs(last_tenth(rho0) - reference - window)))
        rows.append((s, gap, float(np.max(np.abs(window)))))
    report.results["particles"] = {"n": n, "beta": beta, "epsilon": eps, "width": width, "tau": tc,
                                   "rows": [{"s": s, "max_gap": gap, "signal": sig} for s, gap, sig in rows]}
    worst = max(gap / sig for _, gap, sig in rows)
    report.check(f"particles (n = {n}): the last tenth of the tokens carries the continuum's response",
                 worst <= 0.1, "; ".join(f"s = {s:g}: gap {gap:.2e} of a signal {sig:.2e}" for s, gap, sig in rows),
                 compared="c_1..c_4 of the last n/10 tokens (minus the same tokens without the signal) with the "
                          "layered continuum's mean over σ ∈ [0.9, 1]", tolerance="max gap <= 10% of the largest "
                                                                                   "coefficient")


def _quasi_tokens(rho0, n):
    """Token j at σ_j = j/n with the angle F_σ^{-1}(frac(jφ)) (golden-ratio Kronecker sequence) of ρ0(·, σ_j)."""
    grid = np.linspace(0, 2 * np.pi, 512, endpoint=False) + np.pi / 512
    sigma = np.arange(1, n + 1) / n
    cdf = np.cumsum(rho0(np.stack([np.cos(grid), np.sin(grid)], -1), sigma[:, None]), axis=1)
    cdf = np.concatenate([np.zeros((n, 1)), cdf / cdf[:, -1:]], axis=1)
    u = np.mod(np.arange(1, n + 1) * (np.sqrt(5) - 1) / 2, 1.0)
    edges = np.linspace(0, 2 * np.pi, 513)
    theta = np.array([np.interp(uj, row, edges) for uj, row in zip(u, cdf)])
    return np.stack([np.cos(theta), np.sin(theta)], -1)


def _figures(report, o, curves, betas, tcrit):
    """The U-shaped profiles (closed form lines, measured points; each over its maximum) at several times
    for each β, and τ_crit(β) (closed form curve, measured points)."""
    fig, axes = report.subplots(1, len(curves) + 1, figsize=(4.2 * (len(curves) + 1), 3.8), layout="constrained")
    s_fine = np.linspace(0.02, 0.98, 200)
    for ax, (beta, c) in zip(axes, curves.items()):
        tau, s, measured = np.array(c["tau"]), np.array(c["s"]), np.array(c["measured"])
        for k, f in enumerate(PROFILE_FRACTIONS):
            i = int(np.argmin(np.abs(tau - f * c["tau_crit"])))
            line = linear.response_profile(tau[i], s_fine, beta, o.position_bias, o.signal_width, o.signal_modes)
            top = line.max()
            ax.plot(s_fine, line / top, color=f"C{k}", label=rf"$\tau = {f:g}\,\tau_{{crit}}$")
            ax.plot(s, measured[i] / top, "o", ms=3, color=f"C{k}")
        ax.set(xlabel="position s of the signal", ylabel=r"$S_\tau(s)/\max_s S_\tau$",
               title=rf"$\beta = {beta:g}$, $\tau_{{crit}} = {c['tau_crit']:.4g}$")
    axes[0].legend(fontsize="small", loc="upper center")
    ax = axes[-1]
    ax.semilogy(betas, tcrit, label="closed form")
    ax.semilogy([b for b in curves], [c["tau_crit_measured"] for c in curves.values()], "o",
                label="measured (layered equation)")
    ax.set(xlabel=r"$\beta$", ylabel=r"$\tau_{crit}$", title=rf"$\lambda = {o.position_bias:g}$, "
           rf"$M = {o.signal_width:g}$, $n_{{max}} = {o.signal_modes}$")
    ax.legend(fontsize="small")
    report.save_figure(fig, "lost_in_the_middle.png")


def _save_profiles(report, curves):
    """profiles.nc: measured and closed-form S over (β, τ/τ_crit, s), τ_crit and its measurement per β."""
    import xarray as xr  # deferred: xarray is heavy

    betas = list(curves)
    first = curves[betas[0]]
    fraction = np.array(first["tau"]) / first["tau_crit"]
    ds = xr.Dataset(
        {"response_measured": (("beta", "tau_fraction", "s"), [curves[b]["measured"] for b in betas],
                               {"long_name": "response S of the last position measured from the layered equation"}),
         "response_closed_form": (("beta", "tau_fraction", "s"), [curves[b]["closed_form"] for b in betas],
                                  {"long_name": "closed-form response S seen through the same bump in sigma"}),
         "tau_crit": (("beta",), [curves[b]["tau_crit"] for b in betas], {"long_name": "closed-form tau_crit"}),
         "tau_crit_measured": (("beta",), [curves[b]["tau_crit_measured"] for b in betas],
                               {"long_name": "tau_crit measured from the end slope of the layered response"})},
        coords={"beta": betas, "tau_fraction": fraction, "s": first["s"]})
    ds["tau_fraction"].attrs.update(long_name="kinetic time tau = t/beta over tau_crit(beta)", units="1")
    ds["s"].attrs.update(long_name="token position of the signal", units="1")
    report.save_dataset(ds, "profiles.nc")


@experiment("lost-in-the-middle", LostInTheMiddleOptions, parallel=False,
            help="the U-shaped response profile of causal attention and its threshold t_crit(beta)")
def lost_in_the_middle(out, o, *, quick, progress):
    """The lost-in-the-middle profile and τ_crit(β): closed form, layered equation, finite amplitude and
    particles (module docstring); returns the `Report`."""
    positions, n = o.positions, o.n_particles
    settings = {"betas": o.betas, "position_bias": o.position_bias, "signal_width": o.signal_width,
                "signal_modes": o.signal_modes, "positions": positions, "amplitudes": o.amplitudes,
                "particles": o.particles, "n_particles": n, "bump_width": BUMP_WIDTH, "quick": quick}
    if o.heads is not None:
        return _multi_head(out, o)
    report = Report("lost-in-the-middle", out, settings)
    report.write()
    with report.guard():
        betas, tcrit = _closed_form_checks(report, o)
        curves = {}
        for beta in o.betas:
            curves[beta] = report.results[f"beta_{beta:g}"] = _measure_beta(report, beta, o, positions)
            report.write()
        _finite_amplitude(report, o, positions)
        report.write()
        if o.particles:
            _particles(report, o, n)
        _save_profiles(report, curves)
        _figures(report, o, curves, betas, tcrit)
        report.finish()
    return report


def _multi_head(out, o):
    """The closed-form multi-head profile Σ_h weight_h S_τ(s; β_h, λ_h) at τ = ``heads_tau`` and at half and
    twice it, on s ∈ [0.02, 0.98] (the kinetic paper's grid of 800 points): its local minima (two for the
    paper's double well), ``summary.json``, ``profiles.nc`` and ``multi_head_profile.png``."""
    import xarray as xr  # deferred: xarray is heavy

    heads = parse_heads(o.heads)
    settings = {"heads": [list(h) for h in heads], "tau": o.heads_tau, "signal_width": o.signal_width,
                "signal_modes": o.signal_modes}
    report = Report("lost-in-the-middle", out, settings)
    report.write()
    with report.guard():
        s = 0.02 + 0.96 * np.arange(800) / 799
        taus = o.heads_tau * np.array([0.5, 1.0, 2.0])
        profiles = np.array([linear.response_profile(t, s, M=o.signal_width, n_max=o.signal_modes, heads=heads)
                             for t in taus])
        inner = (profiles[:, 1:-1] < profiles[:, :-2]) & (profiles[:, 1:-1] < profiles[:, 2:])
        minima = [s[1:-1][row].tolist() for row in inner]
        report.results["multi_head"] = {"tau": taus.tolist(), "local_minima": minima,
                                        "minimum": [float(p.min()) for p in profiles]}
        report.check(f"the multi-head profile at τ = {o.heads_tau:g} is finite", bool(np.all(np.isfinite(profiles))),
                     f"local minima at s = {', '.join(f'{m:.3f}' for m in minima[1]) or 'none'}",
                     compared="Σ_h weight_h Σ_n ω_n g_{b_n}(τ, 1; s) on 800 positions",
                     tolerance="finite everywhere")
        ds = xr.Dataset({"response": (("tau", "s"), profiles, {"long_name": "multi-head response S of the last "
                                                                           "position (closed form)"})},
                        coords={"tau": taus, "s": s})
        report.save_dataset(ds, "profiles.nc")
        fig, ax = report.subplots(figsize=(5.5, 3.8), layout="constrained")
        for k, (t, p) in enumerate(zip(taus, profiles)):
            ax.plot(s, p - p.min(), color=f"C{k}", label=rf"$\tau = {t:g}$")
        ax.set(xlabel="position s of the signal", ylabel=r"$S_\tau(s) - \min_s S_\tau$",
               title=f"{len(heads)} heads (weight, β, λ)")
        ax.legend(fontsize="small")
        report.save_figure(fig, "multi_head_profile.png")
        report.finish()
    return report
