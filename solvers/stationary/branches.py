"""Branches of zonal stationary states: pseudo-arclength continuation in (u, ν/ν_c), folds, stability.

The branch bifurcates from the uniform state at ν_c along the Landau direction
(`solvers.stationary.anchors.landau_coefficient`); each point is a solution of
`solvers.stationary.zonal.ZonalSelfConsistency` with its linear stability (docs/noise.md).
"""
from collections import namedtuple

import numpy as np
from scipy import linalg, optimize

from meanfield.transformer.model import Model
from meanfield.representations.gegenbauer import axis_vector
from meanfield.validation import check_beta, check_dim, check_int, check_real

from .anchors import beta_star, critical_noise, landau_coefficient
from .state import StationaryState, zonal_part, zonal_state
from .zonal import DEFAULT_RESOLUTION, ZonalSelfConsistency
from meanfield.errors import InvalidInput

Fold = namedtuple("Fold", ["nu", "order"])


def _tangent(Ju, Jt, tau):
    M = np.vstack([np.column_stack([Ju, Jt]), tau[None, :]])
    rhs = np.zeros(M.shape[0])
    rhs[-1] = 1.0
    v = np.linalg.solve(M, rhs)
    return v / np.linalg.norm(v)


def _correct(problem, X, Xprev, tau, ds, tol, maxiter=12):
    """Newton on R(X) = 0, τ·(X − X_prev) = ds; returns (X, iterations) or (None, maxiter)."""
    for it in range(maxiter):
        out = problem.jacobian(X[:-1], X[-1])
        if out is None or X[-1] <= 0:
            return None, maxiter
        R, Ju, Jt = out
        g = tau @ (X - Xprev) - ds
        if max(float(np.max(np.abs(R))), abs(g)) <= tol:
            return X, it
        M = np.vstack([np.column_stack([Ju, Jt]), tau[None, :]])
        try:
            X = X - np.linalg.solve(M, np.concatenate([R, [g]]))
        except np.linalg.LinAlgError:
            return None, maxiter
        if not np.all(np.isfinite(X)):
            return None, maxiter
    return None, maxiter


def _continue(problem, X, tau, *, ds, ds_max, ratio_min, ratio_max, r_max, max_points, tol, tail_tol, first=None):
    """Pseudo-arclength continuation from X along τ; returns (points, tangents, stop reason)."""
    points, tangents = [X], [tau]
    ds_min = 1e-9
    reason = "max_points"
    while len(points) < max_points:
        Xp = X + ds * tau if first is None else first(ds)
        Xn, iters = _correct(problem, Xp, X, tau, ds, tol)
        if Xn is None:
            ds /= 2
            if ds < ds_min:
                reason = "step size (the corrector failed)"
                break
            continue
        first = None
        _, Ju, Jt = problem.jacobian(Xn[:-1], Xn[-1])
        tau = _tangent(Ju, Jt, tau)
        X = Xn
        points.append(X)
        tangents.append(tau)
        if not ratio_min <= X[-1] <= ratio_max:
            reason = "nu range"
            break
        if problem.order(X[:-1]) > r_max:
            reason = "order parameter limit"
            break
        if problem.tail(X[:-1]) > tail_tol:
            reason = "resolution (spectral tail)"
            break
        ds = min(ds * (1.6 if iters <= 3 else 1.0 if iters <= 5 else 0.5), ds_max)
    return points, tangents, reason


def _refine_fold(problem, points, i, tol):
    """ν_fold/ν_c between points i−1 and i+1 (the tangent's ν-component changes sign at i): maximise
    ratio(r) = ν/ν_c with r = order, each ratio(r) from `ZonalSelfConsistency.at_order`."""
    lo, hi = points[i - 1], points[i + 1]
    guess = [points[i][:-1], points[i][-1]]

    def neg_ratio(u1):
        u, ratio = problem.at_order(u1, guess[0], guess[1], tol)
        guess[0], guess[1] = u, ratio
        return -ratio

    res = optimize.minimize_scalar(neg_ratio, bounds=tuple(sorted((lo[0], hi[0]))), method="bounded",
                                   options={"xatol": 1e-10 * max(1.0, abs(points[i][0]))})
    return -float(res.fun), abs(float(res.x)) / np.sqrt(problem.dim)


def branch(beta, dim, normalized=False, resolution=None, nu_min=None, nu_max=None, *, start=None, direction=-1,
           ds=1e-3, ds_max=0.05, max_points=400, sectors=None, tol=1e-12, tail_tol=1e-8, r_max=0.995,
           n_profile=201):
    """The branch of clustered stationary states bifurcating from the uniform state at ν_c.

    Pseudo-arclength continuation of the zonal self-consistency equation (docstring of
    `solvers.stationary`) in (u, ratio = ν/ν_c), started at the bifurcation along the Landau direction (u_1 = ds, ν from
    `landau_coefficient`), or from ``start`` (a zonal `StationaryState`) in the ``direction``
    (−1: decreasing ν first), following folds. Each point gets its stability from the spectrum of
    the linearised McKean–Vlasov operator (sectors m = 0..12, rotation mode removed).

    Parameters
    ----------
    beta : float
        The model's β (attractive, V = I).
    dim : int >= 2
        Ambient dimension d.
    normalized : bool
        (SA) (its zonal stationary states) or (USA).
    resolution : int >= 4, optional
        Degree L of the zonal series (default 64).
    nu_min : float > 0, optional
        Stop when ν falls below it (default 0.25 ν_c).
    nu_max : float > 0, optional
        Stop when ν rises above it (default 4 ν_c).
    start : StationaryState, optional
        A zonal state to continue from instead of the bifurcation.
    direction : -1 or 1
        The direction of ν followed first from ``start`` (−1: decreasing ν).
    ds : float > 0
        First arclength step.
    ds_max : float > 0
        Largest arclength step.
    max_points : int >= 3
        Cap on the points.
    sectors : sequence of int, optional
        Sectors m of the stability analysis (default 0..min(L, 12); (0, 1) on S^1).
    tol : float > 0
        Newton tolerance (max-norm of the residual).
    tail_tol : float > 0
        Stop when the density is no longer resolved at degree L.
    r_max : float in (0, 1)
        Stop beyond this order parameter.
    n_profile : int
        Number of s = ⟨x, e⟩ values at which the densities are stored.

    Returns
    -------
    xarray.Dataset
        Over ``point``: ``nu``, ``order`` (|∫ x ρ dσ|), ``free_energy`` (F[ρ] − F[1], USA), ``stable``
        (bool), ``leading_eigenvalue``, ``arclength``, ``coefficients`` (point, l) and ``density``
        (point, s); attributes ``nu_c``, ``nu_bifurcation`` (ν extrapolated to r = 0 along the
        branch), ``landau_coefficient`` (and ``landau_fit``, measured on the branch), ``transition``
        ("supercritical"/"subcritical"), ``beta_star``, ``nu_fold``/``order_fold`` (NaN if none),
        ``nu_maxwell`` (where F equals that of the uniform state on the stable branch, USA),
        ``stop_reason``.

    Raises
    ------
    ValueError
        Bad ``resolution``, ``ds``, ``ds_max``, ``max_points``, ``direction``, ``nu_min`` or ``nu_max``.

    Examples
    --------
    Below β_* the transition is continuous: the order parameter grows from 0 as ν falls below ν_c,
    on a stable branch (docs/noise.md):

    >>> import numpy as np
    >>> from solvers import stationary
    >>> ds = stationary.branch(1.0, 2, resolution=16, max_points=8)
    >>> ds.attrs["transition"], round(ds.attrs["nu_c"], 6)
    ('supercritical', 0.565159)
    >>> bool(np.all(np.diff(ds["order"].values) > 0)), bool(ds["stable"].all())
    (True, True)
    """
    problem, ds, c, opts = _setup(beta, dim, normalized, resolution, nu_min, nu_max, direction, ds, ds_max,
                                  max_points, tol, tail_tol, r_max)
    points, tangents, reason = _trace(problem, start, direction, ds, c, tol, opts)
    points = [X for X in points if opts["ratio_min"] <= X[-1] <= opts["ratio_max"]] or points[:1]
    return _measure(problem, points, tangents, c, start, sectors, n_profile, tol, reason)


def _setup(beta, dim, normalized, resolution, nu_min, nu_max, direction, ds, ds_max, max_points, tol, tail_tol,
           r_max):
    """The checked arguments of `branch`: its `ZonalSelfConsistency` problem, the first step ``ds``, the
    Landau coefficient c and the options of `_continue` (the range of ν as ratios to ν_c)."""
    beta = check_beta(beta)
    dim = check_dim(dim)
    L = DEFAULT_RESOLUTION if resolution is None else check_int(resolution, "resolution", low=4)
    ds = check_real(ds, "ds", low=0.0, low_open=True)
    ds_max = check_real(ds_max, "ds_max", low=ds)
    max_points = check_int(max_points, "max_points", low=3)
    if direction not in (-1, 1):
        raise InvalidInput(f"`direction` must be -1 (decreasing nu) or +1, got {direction!r}.")
    problem = ZonalSelfConsistency(beta, dim, L, normalized)
    nu_c = problem.nu_c
    nu_min = 0.25 * nu_c if nu_min is None else check_real(nu_min, "nu_min", low=0.0, low_open=True)
    nu_max = 4.0 * nu_c if nu_max is None else check_real(nu_max, "nu_max", low=nu_min, low_open=True)
    c = landau_coefficient(beta, dim, normalized)
    opts = dict(ds_max=ds_max, ratio_min=nu_min / nu_c, ratio_max=nu_max / nu_c, r_max=r_max, max_points=max_points,
                tol=tol, tail_tol=tail_tol)
    return problem, ds, c, opts


def _measure(problem, points, tangents, c, start, sectors, n_profile, tol, reason):
    """The branch's dataset (`_dataset`) from its points (u, ratio) and tangents: order, stability in
    ``sectors``, free energy, the fold, the densities at ``n_profile`` values of s, the bifurcation and
    Landau coefficient fitted on the branch (when it starts at the bifurcation) and the Maxwell point (USA)."""
    dim, normalized, nu_c = problem.dim, problem.normalized, problem.nu_c
    P = np.array(points)
    U, ratios = P[:, :-1], P[:, -1]
    arclength = np.concatenate([[0.0], np.cumsum(np.linalg.norm(np.diff(P, axis=0), axis=1))])
    order = np.abs(U[:, 0]) / np.sqrt(dim)
    secs = problem.sectors() if sectors is None else tuple(sectors)
    lead = np.array([problem.leading_eigenvalue(u, ratio, secs) for u, ratio in zip(U, ratios)])
    free = np.array([problem.free_energy(u, ratio) for u, ratio in zip(U, ratios)])
    nu_fold, r_fold = _fold(problem, points, tangents, ratios, tol)
    s_prof = np.linspace(-1.0, 1.0, n_profile)
    dens = 1.0 + problem.basis.values(s_prof) @ U.T
    # bifurcation point and Landau coefficient measured on the branch: ratio = r0(1 + c r² + c4 r⁴ + c6 r⁶)
    small = order < 0.05
    nu_bif, c_fit = float("nan"), float("nan")
    if start is None and small.sum() >= 5:
        coef = np.polyfit(order[small] ** 2, ratios[small], 3)
        nu_bif, c_fit = float(coef[3] * nu_c), float(coef[2] / coef[3])
    nu_maxwell = _maxwell(lead, order, free, ratios, nu_c, r_fold) if not normalized and np.isfinite(nu_fold) \
        else float("nan")
    return _dataset(problem, ratios, order, free, lead, arclength, U, s_prof, dens, dict(
        nu_bifurcation=nu_bif, landau_coefficient=c, landau_fit=c_fit, nu_fold=nu_fold, order_fold=r_fold,
        nu_maxwell=nu_maxwell, stop_reason=reason, sectors=list(secs)))


def _trace(problem, start, direction, ds, c, tol, opts):
    """The continuation's points and tangents and why it stopped: from the bifurcation along the Landau
    direction (``c``: the Landau coefficient), or from the zonal state ``start`` in ``direction``."""
    beta, dim, normalized, L, nu_c = problem.beta, problem.dim, problem.normalized, problem.lmax, problem.nu_c
    if start is None:
        X0 = np.zeros(L + 1)
        X0[-1] = 1.0
        tau = np.zeros(L + 1)
        tau[0] = 1.0

        def first(h):
            X = X0 + h * tau
            X[-1] = 1.0 + c * h * h / dim
            return X

        points, tangents, reason = _continue(problem, X0, tau, ds=ds, first=first, **opts)
        return points[1:], tangents[1:], reason        # the bifurcation point itself is the uniform state
    if not isinstance(start, StationaryState):
        raise InvalidInput("`start` must be a StationaryState (e.g. from `self_consistent`).")
    if start.model.beta != beta or start.model.dim != dim or start.model.normalized != bool(normalized):
        raise InvalidInput("`start` must be a state of the same beta, dim and kind as the branch.")
    axis, u = start.zonal if start.zonal is not None else zonal_part(start)
    u = np.concatenate([u[1:L + 1], np.zeros(max(0, L + 1 - u.size))])
    u, _ = problem.newton(u, start.nu / nu_c, tol)
    X0 = np.concatenate([u, [start.nu / nu_c]])
    _, Ju, Jt = problem.jacobian(u, X0[-1])
    tau = linalg.null_space(np.column_stack([Ju, Jt]))[:, 0]
    tau *= direction * np.sign(tau[-1]) if tau[-1] != 0 else 1.0
    return _continue(problem, X0, tau, ds=ds, **opts)


def _fold(problem, points, tangents, ratios, tol):
    """(ν, r) at the first fold of the branch (NaN if none): where the ν-component of the tangent changes sign."""
    dratio = np.array([tg[-1] for tg in tangents[:len(points)]])
    turn = np.nonzero((dratio[:-1] > 0) & (dratio[1:] <= 0))[0]        # ν increasing, then decreasing: a fold
    if not turn.size:
        return float("nan"), float("nan")
    j = int(turn[0]) + (1 if ratios[turn[0] + 1] > ratios[turn[0]] else 0)
    j = min(max(j, 1), len(points) - 2)
    ratio_fold, r_fold = _refine_fold(problem, points, j, tol)
    return ratio_fold * problem.nu_c, r_fold


def _maxwell(lead, order, free, ratios, nu_c, r_fold):
    """ν where the free energy of the stable branch (beyond the fold) equals that of the uniform state."""
    nu_maxwell = float("nan")
    stab = (lead < 0) & (order > r_fold)
    idx = np.nonzero(stab[:-1] & stab[1:] & (np.sign(free[:-1]) != np.sign(free[1:])))[0]
    if idx.size:
        k = idx[0]
        nu_maxwell = float(np.interp(0.0, [free[k], free[k + 1]], [ratios[k], ratios[k + 1]]) * nu_c) \
            if free[k] < free[k + 1] else float(np.interp(0.0, [free[k + 1], free[k]], [ratios[k + 1], ratios[k]]) * nu_c)
    return nu_maxwell


def _dataset(problem, ratios, order, free, lead, arclength, U, s_prof, dens, attrs):
    """The branch as an `xarray.Dataset` over ``point`` (see `branch`)."""
    import xarray as xr  # deferred: xarray is heavy

    beta, dim, normalized, L, nu_c = problem.beta, problem.dim, problem.normalized, problem.lmax, problem.nu_c
    c = attrs["landau_coefficient"]
    ds_out = xr.Dataset(
        {"nu": ("point", ratios * nu_c), "order": ("point", order), "free_energy": ("point", free),
         "stable": ("point", lead < 0), "leading_eigenvalue": ("point", lead), "arclength": ("point", arclength),
         "coefficients": (("point", "l"), np.column_stack([np.ones(len(ratios)), U])),
         "density": (("point", "s"), dens.T)},
        coords={"point": np.arange(len(ratios)), "l": np.arange(L + 1), "s": s_prof})
    ds_out["nu"].attrs["long_name"] = "noise nu"
    ds_out["order"].attrs["long_name"] = "order parameter r = |int x rho dsigma|"
    ds_out["free_energy"].attrs["long_name"] = "F[rho] - F[1], F = nu int rho log rho - E_beta (USA)"
    ds_out["leading_eigenvalue"].attrs["long_name"] = "largest real part of the linearised spectrum (rotations removed)"
    ds_out["coefficients"].attrs["long_name"] = "zonal coefficients u_l of rho = sum_l u_l G_l(<x, e>), orthonormal in L2(sigma)"
    ds_out["density"].attrs["long_name"] = "rho as a function of s = <x, e>"
    ds_out.attrs.update({
        "beta": beta, "dim": dim, "kind": "SA" if normalized else "USA", "resolution": L, "nu_c": nu_c,
        "transition": "supercritical" if c < 0 else "subcritical", "beta_star": beta_star(dim, normalized), **attrs})
    return ds_out


def fold_point(beta, dim, normalized=False, resolution=None):
    """ν_fold(β) and the order parameter there: the largest ν of the clustered branch when the
    bifurcation is subcritical (`landau_coefficient` > 0); Fold(nan, nan) when supercritical."""
    if landau_coefficient(beta, dim, normalized) <= 0:
        return Fold(float("nan"), float("nan"))
    ds = branch(beta, dim, normalized, resolution, nu_min=critical_noise(beta, dim, normalized) * 0.999,
                sectors=(0,))
    return Fold(float(ds.attrs["nu_fold"]), float(ds.attrs["order_fold"]))


def branch_state(ds, nu, *, stable=True, tol=1e-12):
    """The stationary state at ``nu`` on a branch from `branch`, solved exactly (Newton) from the
    branch points around it: on the stable part (``stable=True``), the unstable part (False), or
    the largest order parameter (None). Returns a `StationaryState` (zonal about e_d)."""
    nu = check_real(nu, "nu", low=0.0, low_open=True)
    nus, st, order = ds["nu"].values, ds["stable"].values, ds["order"].values
    cands = [i for i in range(nus.size - 1) if (nus[i] - nu) * (nus[i + 1] - nu) <= 0
             and (stable is None or (st[i] == stable and st[i + 1] == stable))]
    if not cands:
        raise InvalidInput(f"`nu`={nu:g} is not on the {'' if stable is None else ('stable ' if stable else 'unstable ')}"
                         f"part of the branch (nu from {nus.min():.6g} to {nus.max():.6g}).")
    i = max(cands, key=lambda k: order[k])
    a = 0.0 if nus[i + 1] == nus[i] else (nu - nus[i]) / (nus[i + 1] - nus[i])
    coeffs = ds["coefficients"].values
    u = (1 - a) * coeffs[i, 1:] + a * coeffs[i + 1, 1:]
    normalized = ds.attrs["kind"] == "SA"
    problem = ZonalSelfConsistency(ds.attrs["beta"], int(ds.attrs["dim"]), int(ds.attrs["resolution"]), normalized)
    ratio = nu / problem.nu_c
    u, _ = problem.newton(u, ratio, tol)
    model = Model(beta=ds.attrs["beta"], dim=int(ds.attrs["dim"]), normalized=normalized, noise=nu)
    return zonal_state(problem, u, ratio, model, axis_vector(None, problem.dim), np.inf)


__all__ = ["branch", "branch_state", "fold_point", "Fold"]
