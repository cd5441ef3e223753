"""``meanfield verify-prop34``: Proposition 3.4 checked numerically, in four parts (docs/mathematics.md §4).

1. **Coefficients.** The Gegenbauer coefficients a_l(β) of e^{βt} (proof of Proposition 3.4, in the
   closed form of docs/mathematics.md §3) are positive for every degree l >= 1 and every β on a
   grid from 1e-3 to 500, for d = 2, 3, 4, 8, and decrease in l. Floating point resolves them up to
   the degree ``l_underflow`` where a_l·e^{-β} underflows to 0 (``l_eps`` is where a_l/a_0 drops
   below machine epsilon, i.e. where they stop changing the kernel e^{βt} in double precision).
2. **Landscape.** E_β of random probability measures (von Mises–Fisher, mixtures, random
   band-limited densities, discretised by quadrature; iid clouds on S^3) lies in
   [a_0/(2β), e^β/(2β)] (docs/mathematics.md §4); the gaps to both ends are reported. Every β here is
   positive, as in Proposition 3.4; for β < 0 the ends are cosh β/(2β) (the antipodal pair) and
   e^β/(2β) (`meanfield.observables.energy.energy_bounds`, docs/mathematics.md §13.2, tests/test_negative_beta.py).
3. **Flows.** The repulsive flow (V = −I) from a random band-limited ρ0 converges to the uniform
   density in L∞ and W1, at the exact linear rate |ς_1| of docs/mathematics.md §5; the attractive
   flow increases E_β monotonically to within 1% of the Dirac value e^β/(2β) (one cluster). Both with
   the spectral solvers (`solvers.FourierCircle` on S^1, `solvers.SphericalHarmonics` on S^2); the
   attractive flow goes on along the characteristics (`solvers.Lagrangian`) once they stop resolving
   the concentrating density.
4. **Discrete contrast** (Section 9.1 of the paper; docs/mathematics.md §4). Minimising the
   discrete energy of n points on S^2 (Riemannian gradient descent from random starts) gives the
   sharp configurations: the tetrahedron, the octahedron and the icosahedron for n = 4, 6, 12
   (Cohn–Kumar), whereas the continuous minimiser is σ. Their energy exceeds a_0/(2β) and their
   moments Q_1..Q_t vanish (spherical t-designs).
"""
from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize
from scipy.special import eval_legendre

from ..measures import densities
from ..observables.energy import dirac_energy, uniform_energy
from ..transformer.kernels import kernel_multipliers, linear_growth_rates
from ..transformer.model import Model
from ..results.plotting import suptitle
from ..measures.sampling import sample, uniform_points
from .options import Options, experiment, option
from .report import Report, fit_exponential, show_progress
import solvers
from ..spaces.quadrature import gauss_legendre, sphere_quadrature, trapezoid
from ..observables.wasserstein import wasserstein

EPS = np.finfo(float).eps


# ---------------------------------------------------------------------------------------------------
# Part 1: coefficients
# ---------------------------------------------------------------------------------------------------
def coefficient_table(betas, dims, lmax=4096):
    """For each (β, d): positivity and monotonicity of a_l(β), l = 1..l_underflow−1 (docs/mathematics.md §3).

    Returns a list of dicts with ``beta, dim, l_underflow, l_eps, all_positive, decreasing,
    min_rel`` (the smallest resolved a_l/a_0), ``min_ratio`` (the smallest a_l/a_{l−1}, the smallest
    coefficient relative to its neighbour) and ``min_turan`` (min a_l²/(a_{l−1}a_{l+1}) >= 1, i.e.
    log-concavity).
    """
    rows = []
    for dim in dims:
        for beta in betas:
            a = kernel_multipliers(beta, dim, lmax, scaled=True)
            zero = np.nonzero(a <= 0)[0]
            l_uf = int(zero[0]) if zero.size else lmax + 1
            res = a[:l_uf]
            rel = res / res[0]
            below = np.nonzero(rel < EPS)[0]
            l_eps = int(below[0]) if below.size else l_uf
            ratio = res[1:] / res[:-1]
            # log-concavity on the normal (not subnormal) range, in logs
            la = np.log(res[res >= np.finfo(float).tiny])
            turan = np.exp(2 * la[1:-1] - la[:-2] - la[2:]) if la.size > 2 else np.array([np.inf])
            rows.append({
                "beta": float(beta), "dim": int(dim), "l_underflow": l_uf, "l_eps": l_eps,
                "all_positive": bool(np.all(res[1:] > 0)) and np.all(np.isfinite(a)),
                "decreasing": bool(np.all(ratio < 1)),
                "min_rel": float(rel[1:].min()) if rel.size > 1 else float("nan"),
                "min_ratio": float(ratio.min()) if ratio.size else float("nan"),
                "min_turan": float(turan.min()),
            })
    return rows


def _part_coefficients(report, betas, dims):
    rows = coefficient_table(betas, dims)
    report.results["coefficients"] = {
        "rows": rows,
        "min_turan": min(r["min_turan"] for r in rows),
        "l_eps_range": [min(r["l_eps"] for r in rows), max(r["l_eps"] for r in rows)],
        "l_underflow_range": [min(r["l_underflow"] for r in rows), max(r["l_underflow"] for r in rows)],
    }
    # a_l > 0 up to the first degree where it underflows holds by that degree's definition: a note, not a check
    report.note(f"1. a_l(β) > 0 up to underflow for {len(rows)} (β, d) pairs, β in [{min(betas):g}, {max(betas):g}], "
                f"d in {list(dims)}; smallest resolved a_l/a_0 = {min(r['min_rel'] for r in rows):.2e}")
    report.check("1. a_l(β) decreasing and log-concave in l", all(r["decreasing"] for r in rows)
                 and all(r["min_turan"] >= 1 - 1e-12 for r in rows),
                 f"min a_l/a_(l-1) = {min(r['min_ratio'] for r in rows):.2e}, "
                 f"min a_l²/(a_(l-1)a_(l+1)) = {min(r['min_turan'] for r in rows):.6f}",
                 compared="a_l/a_(l−1) and the Turán ratio a_l²/(a_(l−1)a_(l+1)) over the resolved degrees",
                 tolerance="a_l/a_(l−1) < 1; Turán ratio >= 1 − 1e-12")
    if report.out is not None:
        import xarray as xr  # deferred: xarray is heavy

        B, D = np.asarray(betas, float), np.asarray(dims)
        grid = {k: np.array([[next(r[k] for r in rows if r["beta"] == b and r["dim"] == d) for b in B] for d in D])
                for k in ("l_underflow", "l_eps", "min_rel", "min_ratio", "min_turan")}
        ds = xr.Dataset({k: (("dim", "beta"), v) for k, v in grid.items()}, coords={"dim": D, "beta": B})
        ds.attrs["description"] = "Gegenbauer coefficients a_l(beta) of exp(beta t) on S^(d-1) (docs/mathematics.md sec. 3)"
        report.save_dataset(ds, "coefficients.nc")
        fig, axes = report.subplots(1, 2, figsize=(11, 4.4))
        suptitle(fig, f"Proposition 3.4, part 1: coefficients $a_l(\\beta)$ of $e^{{\\beta t}}$, "
                      f"$\\beta$ in [{min(B):g}, {max(B):g}], $d$ = {', '.join(str(int(d)) for d in D)}")
        for b in [1e-3, 0.1, 1, 10, 100, 500]:
            a = kernel_multipliers(b, 3, 1100, scaled=True)
            l = np.arange(a.size)
            keep = a > 0
            axes[0].semilogy(l[keep], a[keep] / a[0], label=f"$\\beta = {b:g}$")
        axes[0].axhline(EPS, color="k", ls=":", lw=0.8)
        axes[0].set_ylim(1e-310, 10)
        axes[0].set(xlabel="degree $l$", ylabel=r"$a_l(\beta)/a_0(\beta)$", title="$d = 3$: every coefficient > 0")
        axes[0].legend(fontsize=8)
        for d in D:
            axes[1].semilogx(B, grid["l_eps"][list(D).index(d)], "-o", ms=3, label=f"$d = {d}$: $a_l/a_0 < \\epsilon$")
        axes[1].semilogx(B, grid["l_underflow"][0], "k--", lw=1, label="$d = 2$: underflow")
        axes[1].set(xlabel=r"$\beta$", ylabel="degree $l$", title="where double precision stops resolving $a_l$")
        axes[1].legend(fontsize=8)
        fig.tight_layout()
        report.save_figure(fig, "coefficients.png")


# ---------------------------------------------------------------------------------------------------
# Part 2: landscape
# ---------------------------------------------------------------------------------------------------
def random_measures(dim, count, rng, n=1500):
    """``count`` random probability measures on S^{dim-1} as (label, points, weights).

    dim 2, 3: quasi (quadrature) discretisations of von Mises–Fisher densities, mixtures and random
    band-limited densities, plus the uniform one; dim >= 4: iid clouds of such densities.
    """
    out = []
    kinds = ["uniform", "vmf", "mixture", "band"] if dim in (2, 3) else ["vmf", "mixture"]
    for k in range(count):
        kind = kinds[k % len(kinds)]
        if kind == "uniform":
            rho = densities.uniform()
        elif kind == "vmf":
            rho = densities.von_mises_fisher(uniform_points(1, dim, rng)[0], float(np.exp(rng.uniform(-2, 4))))
        elif kind == "mixture":
            m = int(rng.integers(2, 5))
            comps = [densities.von_mises_fisher(uniform_points(1, dim, rng)[0], float(np.exp(rng.uniform(-1, 3.5))))
                     for _ in range(m)]
            rho = densities.mixture(comps, rng.dirichlet(np.ones(m)))
        else:
            rho = densities.band_limited(dim, int(rng.integers(1, 7)), rng=rng, floor=float(rng.uniform(0.0, 0.5)))
        method = "quasi" if dim in (2, 3) else "iid"
        x, w = sample(rho, n, dim, rng=rng, method=method)
        out.append((kind, x, w))
    return out


def landscape(betas, dims, count, rng, n=1500):
    """E_β of random measures against the bounds a_0/(2β) <= E_β <= e^β/(2β) (Proposition 3.4).

    Works with the scaled energy E_β·e^{-β} = (1/2β) Σ w_i w_j e^{β(⟨x_i,x_j⟩−1)}, from one Gram matrix
    per measure. Returns rows (dim, kind, beta, gap_below, gap_above, position) where ``position``
    = (E − E_min)/(E_max − E_min) ∈ [0, 1].
    """
    rows = []
    for dim in dims:
        for kind, x, w in random_measures(dim, count, rng, n=n):
            g = x @ x.T - 1.0
            for beta in betas:
                e_scaled = float(w @ np.exp(beta * g) @ w) / (2 * beta)
                lo = kernel_multipliers(beta, dim, 0, scaled=True)[0] / (2 * beta)
                hi = 1.0 / (2 * beta)
                rows.append({"dim": dim, "kind": kind, "beta": float(beta),
                             "gap_below": (e_scaled - lo) * np.exp(beta), "gap_above": (hi - e_scaled) * np.exp(beta),
                             "rel_gap_below": (e_scaled - lo) / (hi - lo), "position": (e_scaled - lo) / (hi - lo)})
    return rows


def _part_landscape(report, betas, dims, count, rng):
    rows = landscape(betas, dims, count, rng)
    below = min(r["rel_gap_below"] for r in rows)
    above = min(1 - r["position"] for r in rows)
    report.results["landscape"] = {"measures": len(rows) // len(betas), "betas": list(betas), "dims": list(dims),
                                   "min_rel_gap_below": below, "min_rel_gap_above": above,
                                   "min_gap_below": min(r["gap_below"] for r in rows),
                                   "min_gap_above": min(r["gap_above"] for r in rows)}
    report.check("2. a_0/(2β) <= E_β[μ] for every random μ", below >= -1e-12,
                 f"{len(rows)} energies; smallest (E − a_0/2β)/(e^β/2β − a_0/2β) = {below:.3e}",
                 compared="(E_β[μ] − a_0/2β)/(e^β/2β − a_0/2β) over the random measures", tolerance=">= −1e-12")
    report.check("2. E_β[μ] <= e^β/(2β) for every random μ", above >= -1e-12,
                 f"smallest (e^β/2β − E)/(e^β/2β − a_0/2β) = {above:.3e}",
                 compared="(e^β/2β − E_β[μ])/(e^β/2β − a_0/2β) over the random measures", tolerance=">= −1e-12")
    if report.out is not None:
        import xarray as xr  # deferred: xarray is heavy

        ds = xr.Dataset({k: (("sample",), np.array([r[k] for r in rows])) for k in
                         ("dim", "beta", "gap_below", "gap_above", "position")})
        ds["kind"] = (("sample",), np.array([r["kind"] for r in rows], dtype=object).astype(str))
        report.save_dataset(ds, "landscape.nc")
        fig, ax = report.subplots(figsize=(7, 4.4))
        suptitle(fig, f"Proposition 3.4, part 2: {len(rows)} random measures, d in {sorted(set(dims))}")
        markers = {"uniform": "s", "vmf": "o", "mixture": "^", "band": "d"}
        for kind, mk in markers.items():
            sel = [r for r in rows if r["kind"] == kind]
            if sel:
                jitter = 1 + 0.08 * (np.array([r["dim"] for r in sel]) - 2.5)
                ax.semilogx(np.array([r["beta"] for r in sel]) * jitter, [r["position"] for r in sel], mk,
                            ms=4, alpha=0.6, label=kind)
        ax.axhline(0, color="C2", lw=1)
        ax.axhline(1, color="C3", lw=1)
        ax.set(xlabel="β", ylabel=r"$(E_\beta - a_0/2\beta)/(e^\beta/2\beta - a_0/2\beta)$",
               title="energy landscape: uniform (0) <= E <= Dirac (1)")
        ax.legend(fontsize=8)
        fig.tight_layout()
        report.save_figure(fig, "landscape.png")


# ---------------------------------------------------------------------------------------------------
# Part 3: flows
# ---------------------------------------------------------------------------------------------------
def _spectral_solver(model, coarse):
    if model.dim == 2:
        return solvers.FourierCircle(model, modes=128)
    return solvers.SphericalHarmonics(model, lmax=32 if coarse else 48)


def _product_grid(dim, degree):
    """A quadrature for σ exact for polynomials of degree <= ``degree``.

    Midpoints on S^1; Gauss–Legendre in z times equispaced φ on S^2.
    """

    return trapezoid(2 * degree + 2) if dim == 2 else gauss_legendre(degree // 2 + 2, degree + 2)


def distance_to_uniform(sol, i, m=None):
    """W1(ρ_t σ, σ) with both measures on one quadrature set (weights ∝ ρ against equal ones), so that
    the uniform density is at distance exactly 0 (no discretisation floor)."""

    d = sol.model.dim
    x, q = sphere_quadrature(m or (8192 if d == 2 else 1500), d)
    w = np.clip(sol.density(x, i), 0, None) * q
    return wasserstein((x, w / w.sum()), (x, q))


def repulsive_flow(dim, beta=4.0, t_end=8.0, seed=0, coarse=False, progress=False):
    """V = −I, (USA), from a random band-limited ρ0 (degree <= 2, min ρ0 = 0.9): distances to σ against time.

    Returns (solution, dict) with ``linf`` = max|ρ_t − 1|, ``w1`` = W1(ρ_t, σ), ``m`` = |∫x ρ_t dσ| (the
    degree-1 part, computed exactly by quadrature), its fitted decay rate and the exact rate |ς_1|
    of docs/mathematics.md §5.
    """
    model = Model(beta=beta, dim=dim, V=-1.0, normalized=False)
    rho0 = densities.band_limited(dim, 2, rng=seed, floor=0.9)
    t_eval = np.linspace(0.0, t_end, 17 if coarse else 33)
    sol = _spectral_solver(model, coarse).solve(rho0, t_eval, progress=progress, rtol=1e-10, atol=1e-13)
    probe = uniform_points(4000 if dim == 3 else 2000, dim, 12345)
    linf = np.array([np.max(np.abs(sol.density(probe, i) - 1.0)) for i in range(len(sol.t))])
    w1 = np.array([distance_to_uniform(sol, i) for i in range(len(sol.t))])
    x, q = _product_grid(dim, 160)
    m = np.array([np.linalg.norm((q * sol.density(x, i)) @ x) for i in range(len(sol.t))])
    sel = (sol.t >= 1.0) & (m > 1e-6 * m[0])
    rate, _ = fit_exponential(sol.t[sel], m[sel])
    exact = -float(linear_growth_rates(model, 1)[1])
    return sol, {"t": sol.t, "linf": linf, "w1": w1, "m": m, "rate": rate, "exact_rate": exact}


def attractive_flow(dim, beta=1.0, t_end=None, coarse=False, progress=False):
    """V = I, (SA), from the von Mises–Fisher density with κ = 1: E_β rises to its limit e^β/(2β).

    The density is symmetric about its mean e, so its mass gathers in one cluster at e and E_β tends
    to the Dirac value e^β/(2β) (docs/mathematics.md §4). The spectral solver runs until it stops
    resolving the concentrating density (S^1 at t ≈ 3.4; S^2 at t ≈ 2.3, or 1.8 if coarse), then the
    run goes on along the characteristics (``on_underresolved``, `solvers.Lagrangian`: 256 trapezoid
    labels on S^1, 512 (coarse) or 1152 Gauss–Legendre labels on S^2) to ``t_end`` (default 8, where
    E_β is within 0.1% of its limit; it is within 1% from t ≈ 5.3 on S^1 and 4.5 on S^2).

    Returns (solution, dict) with ``energy``, ``position`` = (E − E_unif)/(E_Dirac − E_unif), ``gap`` =
    (e^β/2β − E_β)/(e^β/2β), ``handover_t``, the clusters at the end (count, largest mass) and the
    Lagrangian error estimate (W1 to its coarser companion).
    """
    model = Model(beta=beta, dim=dim)
    rho0 = densities.von_mises_fisher(np.eye(dim)[-1], 1.0)
    t_eval = np.linspace(0.0, t_end or 8.0, 33 if coarse else 65)
    labels = {"nodes": 256} if dim == 2 else {"nodes": 512 if coarse else 1152}
    sol = _spectral_solver(model, coarse).solve(rho0, t_eval, progress=progress, on_underresolved=labels)
    e = np.asarray(sol.energy)
    lo, hi = uniform_energy(beta, dim), dirac_energy(beta)
    d = sol.diagnostics
    return sol, {"t": sol.t, "energy": e, "position": (e - lo) / (hi - lo), "gap": (hi - e) / hi,
                 "handover_t": sol.stats.get("handover_t", float("nan")), "nodes": sol.stats.get("nodes", 0),
                 "n_clusters": int(d["n_clusters"][-1]), "largest_cluster": float(d["largest_cluster"][-1]),
                 "error_estimate": float(d["error_estimate"][-1])}


def _part_flows(report, dims, coarse, progress):
    fig, axes = report.subplots(1, 2, figsize=(11, 4.4)) if report.out is not None else (None, None)
    if fig is not None:
        suptitle(fig, f"Proposition 3.4, part 3: flows on $S^{{{min(dims) - 1}}}$"
                      + (f" and $S^{{{max(dims) - 1}}}$" if len(dims) > 1 else "")
                      + r"; repulsive (USA) $\beta = 4$, $V = -I$, $\nu = 0$; attractive (SA) $\beta = 1$, $V = I$, $\nu = 0$")
    res = report.results.setdefault("flows", {})
    for dim in dims:
        sol, r = repulsive_flow(dim, coarse=coarse, progress=progress)
        report.save_dataset(sol, f"flow_repulsive_d{dim}.nc")
        res[f"repulsive_d{dim}"] = {"linf_initial": r["linf"][0], "linf_final": r["linf"][-1], "w1_initial": r["w1"][0],
                                    "w1_final": r["w1"][-1], "fitted_rate": r["rate"], "exact_rate": r["exact_rate"]}
        conv = r["linf"][-1] <= 1e-2 * r["linf"][0] and r["w1"][-1] <= 1e-2 * r["w1"][0]
        report.check(f"3. repulsive flow on S^{dim - 1} converges to σ (L∞ and W1)", conv,
                     f"L∞ {r['linf'][0]:.2e} → {r['linf'][-1]:.2e}, W1 {r['w1'][0]:.2e} → {r['w1'][-1]:.2e}",
                     compared="‖ρ − 1‖_∞ and W1(ρσ, σ) at the last saved time with their values at t = 0",
                     tolerance="both <= 1e-2 times their initial value")
        report.check(f"3. repulsive flow on S^{dim - 1}: |∫x ρ dσ| decays at the exact rate |ς_1| (mathematics §5)",
                     abs(r["rate"] - r["exact_rate"]) <= 0.05 * r["exact_rate"],
                     f"fitted {r['rate']:.4f}, exact {r['exact_rate']:.4f}",
                     compared="the fitted exponential decay rate of |∫x ρ dσ| with the exact |ς_1|",
                     tolerance="relative difference <= 5%")
        sol_a, ra = attractive_flow(dim, coarse=coarse, progress=progress)
        report.save_dataset(sol_a, f"flow_attractive_d{dim}.nc")
        e = ra["energy"]
        mono = bool(np.all(np.diff(e) >= -1e-10 * np.abs(e[:-1])))
        gap = ra["gap"]
        within = float(ra["t"][np.argmax(gap <= 0.01)]) if np.any(gap <= 0.01) else float("nan")
        res[f"attractive_d{dim}"] = {"position_initial": ra["position"][0], "position_final": ra["position"][-1],
                                     "gap_initial": gap[0], "gap_final": gap[-1], "t_within_1_percent": within,
                                     "t_final": float(ra["t"][-1]), "handover_t": ra["handover_t"],
                                     "lagrangian_nodes": ra["nodes"], "n_clusters": ra["n_clusters"],
                                     "largest_cluster": ra["largest_cluster"], "error_estimate": ra["error_estimate"]}
        report.check(f"3. attractive flow on S^{dim - 1}: E_β increases to within 1% of its limit e^β/(2β) "
                     "(one cluster)", mono and gap[-1] <= 0.01 and ra["n_clusters"] == 1,
                     f"(e^β/2β − E_β)/(e^β/2β) {gap[0]:.3f} → {gap[-1]:.2e} at t = {ra['t'][-1]:.3g}, within 1% from "
                     f"t = {within:.3g}; one cluster of mass {ra['largest_cluster']:.4f}; spectral until t = "
                     f"{ra['handover_t']:.3g} (under-resolved), then solvers.Lagrangian ({ra['nodes']} labels, W1 "
                     f"error estimate {ra['error_estimate']:.1e})",
                     compared="E_β between consecutive saved times; its final gap to the Dirac value e^β/(2β); "
                              "the clusters at the end", tolerance="steps >= −1e-10·|E_β|; gap <= 1%; one cluster")
        if axes is not None:
            axes[0].semilogy(r["t"], r["linf"], "-", label=fr"$S^{dim - 1}$: $\|\rho-1\|_\infty$")
            axes[0].semilogy(r["t"], r["w1"], "--", label=fr"$S^{dim - 1}$: $W_1(\rho,\sigma)$")
            axes[0].semilogy(r["t"], r["m"], "-.", label=fr"$S^{dim - 1}$: $|\int x\rho\,d\sigma|$")
            axes[0].semilogy(r["t"], r["m"][0] * np.exp(-r["exact_rate"] * r["t"]), ":", color="0.4", lw=0.8)
            line, = axes[1].plot(ra["t"], ra["position"], "-o", ms=3, label=fr"$S^{dim - 1}$")
            axes[1].axvline(ra["handover_t"], color=line.get_color(), ls="--", lw=0.8,
                            label=fr"$S^{dim - 1}$: spectral → Lagrangian")
    if axes is not None:
        axes[0].set(xlabel="t",
                    title="repulsive flow (V = −I, USA, β = 4) → uniform; dotted: $e^{-|\\varsigma_1| t}$")
        axes[0].legend(fontsize=8)
        axes[1].axhline(1, color="C3", ls=":")
        axes[1].set(xlabel="t", ylabel=r"$(E_\beta - a_0/2\beta)/(e^\beta/2\beta - a_0/2\beta)$",
                    title="attractive flow (V = I): energy → Dirac value")
        axes[1].legend(fontsize=8)
        fig.tight_layout()
        report.save_figure(fig, "flows.png")


# ---------------------------------------------------------------------------------------------------
# Part 4: discrete contrast
# ---------------------------------------------------------------------------------------------------
def discrete_energy(x, beta):
    """E_β of the empirical measure (1/n)Σδ_{x_i} ((3.5) for particles; docs/mathematics.md §4)."""
    n = x.shape[0]
    return float(np.exp(beta * (x @ x.T)).sum() / (2 * beta * n * n))


def minimise_discrete_energy(n, dim=3, beta=1.0, starts=8, rng=None, tol=1e-13, max_iter=5000):
    """Minimise E_β over n-point empirical measures on S^{dim-1} (Section 9.1) from ``starts`` random starts.

    Unconstrained L-BFGS (`scipy.optimize.minimize`) on y ∈ R^{n×dim} with x_i = y_i/|y_i|, for the
    scaled energy e^{-β}E_β; the gradient is ∂E/∂y_i = P_{x_i}(∂E/∂x_i)/|y_i| with
    ∂E/∂x_i = (1/(βn²)) Σ_j e^{β⟨x_i,x_j⟩} x_j. Returns the best configuration (n, dim) and E_β.
    """

    rng = np.random.default_rng(rng)

    def fun(yflat):
        y = yflat.reshape(n, dim)
        r = np.linalg.norm(y, axis=1, keepdims=True)
        x = y / r
        k = np.exp(beta * (x @ x.T - 1.0))
        e = k.sum() / (2 * beta * n * n)
        gx = (k @ x) / (beta * n * n) * beta            # ∂(e^{-β}E)/∂x_i
        gy = (gx - np.sum(gx * x, axis=1, keepdims=True) * x) / r
        return e, gy.ravel()

    best = None
    for _ in range(starts):
        y0 = uniform_points(n, dim, rng)
        res = minimize(fun, y0.ravel(), jac=True, method="L-BFGS-B",
                       options={"gtol": tol, "ftol": 1e-16, "maxiter": max_iter, "maxcor": 30})
        y = res.x.reshape(n, dim)
        x = y / np.linalg.norm(y, axis=1, keepdims=True)
        # polish on the gradient (E is flat to round-off near the minimum, the gradient is not):
        # fixed-step projected gradient steps x ← normalise(x − η P_x ∂E/∂x), η = n²/(4β + 4)
        for _ in range(300):
            _, g = fun(x.ravel())
            x = x - n * n / (4 * beta + 4) * g.reshape(n, dim)
            x /= np.linalg.norm(x, axis=1, keepdims=True)
        e = discrete_energy(x, beta)
        if best is None or e < best[1] - 1e-12 * abs(e):
            best = (x, e)
    return best


_DESIGNS = {
    4: ("tetrahedron", 2, {-1 / 3: 6}),
    6: ("octahedron", 3, {0.0: 12, -1.0: 3}),
    12: ("icosahedron", 5, {1 / np.sqrt(5): 30, -1 / np.sqrt(5): 30, -1.0: 6}),
}


def design_inner_products(n):
    """The sorted inner products ⟨x_i, x_j⟩, i < j, of the sharp configuration with n = 4, 6, 12 points."""
    _, _, counts = _DESIGNS[n]
    return np.sort(np.concatenate([np.full(c, v) for v, c in counts.items()]))


def gegenbauer_moments(x, tmax):
    """Q_k = (1/n²) Σ_ij P_k(⟨x_i, x_j⟩), k = 1..tmax on S^2 (Legendre): all 0 for a t-design.

    Definition 9.1; docs/mathematics.md §4.
    """

    g = np.clip(x @ x.T, -1, 1)
    return np.array([eval_legendre(k, g).mean() for k in range(1, tmax + 1)])


def _part_discrete(report, beta, starts, rng):
    res = report.results.setdefault("discrete", {})
    rows = []
    for n, (name, t, _) in _DESIGNS.items():
        x, e = minimise_discrete_energy(n, 3, beta, starts=starts, rng=rng)
        ip = np.sort((x @ x.T)[np.triu_indices(n, 1)])
        err = float(np.max(np.abs(ip - design_inner_products(n))))
        q = gegenbauer_moments(x, t + 1)
        rows.append((n, name, x, e))
        res[name] = {"n": n, "energy": e, "uniform_energy": uniform_energy(beta, 3), "inner_product_error": err,
                     "design_strength": t, "moments": q.tolist()}
        report.check(f"4. n = {n}: the minimiser is the {name}", err <= 1e-6 and e > uniform_energy(beta, 3),
                     f"max |⟨x_i,x_j⟩ − {name}| = {err:.1e}; Q_1..Q_{t} = {np.max(np.abs(q[:t])):.1e}, "
                     f"Q_{t + 1} = {q[t]:.3f}; E_β − a_0/2β = {e - uniform_energy(beta, 3):.4f} > 0",
                     compared=f"the sorted inner products ⟨x_i, x_j⟩ of the computed minimiser with those of the {name}, "
                              "and E_β with a_0/2β", tolerance="max difference <= 1e-6; E_β > a_0/2β")
    if report.out is not None:
        fig = report.figure(figsize=(11, 4.2))
        suptitle(fig, f"Proposition 3.4, part 4: minimisers of the discrete E_β on S^2, β = {beta:g} (SA), V = I")
        for k, (n, name, x, e) in enumerate(rows):
            ax = fig.add_subplot(1, 3, k + 1, projection="3d")
            u, v = np.mgrid[0:2 * np.pi:30j, 0:np.pi:15j]
            ax.plot_wireframe(np.cos(u) * np.sin(v), np.sin(u) * np.sin(v), np.cos(v), color="0.85", lw=0.3)
            g = x @ x.T
            near = np.max(g[~np.eye(n, dtype=bool)])
            for i in range(n):
                for j in range(i + 1, n):
                    if g[i, j] >= near - 1e-6:
                        ax.plot(*np.stack([x[i], x[j]]).T, "C0-", lw=1)
            ax.scatter(*x.T, c="C3", s=25)
            ax.set_box_aspect((1, 1, 1))
            ax.set_axis_off()
            ax.set_title(f"n = {n}: {name}", y=0.95)
        fig.subplots_adjust(left=0, right=1, bottom=0, top=0.88, wspace=0)
        report.save_figure(fig, "designs.png")


# ---------------------------------------------------------------------------------------------------
@dataclass
class VerifyProp34Options(Options):
    """Proposition 3.4: the uniform measure minimises E_beta and Dirac masses maximise it. Four parts:
    Gegenbauer coefficients, energy landscape, flows, discrete designs.

    The options of `verify_prop34` and of ``meanfield verify-prop34``.
    """

    seed: int = option(0, "random seed", low=0)
    parts: tuple[int, ...] = option((1, 2, 3, 4), "which parts to run, e.g. 1,2,4", choices=(1, 2, 3, 4),
                                    shown="all")
    coefficient_betas: int = option(40, "beta values of the coefficient table (log-spaced from 1e-3 to 500)", low=2,
                                    quick=12)
    landscape_betas: tuple[float, ...] = option((0.1, 1.0, 4.0, 16.0, 64.0), "beta values of the energy landscape",
                                                low=0.0, low_open=True, quick=(0.1, 2.0, 30.0))
    landscape_measures: int = option(24, "random measures per dimension in the landscape", low=1, quick=8)
    discrete_starts: int = option(10, "random starts of the discrete maximisation", low=1, quick=4)
    coarse: bool = option(False, "coarser flows: lmax 32 on S^2 (else 48), half the saved times, 512 hand-over "
                          "labels on S^2 (else 1152)", quick=True)


@experiment("verify-prop34", VerifyProp34Options, parallel=False, help="check Proposition 3.4 numerically")
def verify_prop34(out, o, *, quick, progress):
    """Run the four parts (see the module docstring); returns the `Report` (``report.passed``).

    ``quick`` takes fewer β values, random measures, random starts and coarser flows (well under a
    minute); the full run takes a few minutes.
    """
    seed, parts = o.seed, o.parts
    progress = show_progress(progress)
    rng = np.random.default_rng(seed)
    coeff_betas = np.logspace(-3, np.log10(500), o.coefficient_betas)
    land_betas = list(o.landscape_betas)
    settings = {"quick": quick, "seed": seed, "coefficient_betas": coeff_betas, "coefficient_dims": [2, 3, 4, 8],
                "landscape_betas": land_betas, "landscape_measures_per_dim": o.landscape_measures,
                "flow_repulsive": "USA, beta = 4", "flow_attractive": "SA, beta = 1", "discrete_beta": 6.0,
                "discrete_starts": o.discrete_starts, "coarse": o.coarse}
    report = Report("verify-prop34", out, settings)
    report.write()
    with report.guard():
        if 1 in parts:
            _part_coefficients(report, coeff_betas, [2, 3, 4, 8])
            report.write()
        if 2 in parts:
            _part_landscape(report, land_betas, [2, 3, 4], settings["landscape_measures_per_dim"], rng)
            report.write()
        if 3 in parts:
            try:
                _part_flows(report, [2, 3], o.coarse, progress)
            except (AttributeError, ImportError) as exc:
                report.check("3. flows (spectral solvers)", False, f"solvers unavailable: {exc}",
                             compared="whether the spectral solvers import", tolerance="they import")
            report.write()
        if 4 in parts:
            _part_discrete(report, settings["discrete_beta"], settings["discrete_starts"], rng)
        report.finish()
    return report
