"""Branches of critical points in β on S^1: pseudo-arclength continuation through folds, the events on a
branch (folds, eigenvalues through zero) and the thresholds (docs/landscape.md, docs/mathematics.md §17.4).

A branch is a curve y(s) = (θ_2..θ_n, β)(s) of zeros of F(θ, β) = (∂_{θ_2}E_β, ..., ∂_{θ_n}E_β) with θ_1 = 0
(the rotation removed). Each step predicts along the unit tangent t (the null vector of the n−1 × n
Jacobian [J | ∂_βF], oriented like the previous one) and corrects by Newton on F = 0, t·(y − y_pred) = 0
(Keller 1977). A *fold* is where t's β-component changes sign (the branch turns back in β; a pair of
critical points is born or dies there); a *stability change* is where the largest non-trivial Hessian
eigenvalue changes sign along the branch away from a fold (a bifurcation: another branch crosses).

For the regular n-gon with equal weights the Hessian is circulant and its eigenvalues are explicit
(`polygon_eigenvalues`, docs/mathematics.md §17.5).
"""
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import brentq

from ..errors import InvalidInput
from ..validation import check_beta, check_int
from .critical import classify, make_point, newton
from .energy import Energy, as_points


# -------------------------------------------------------------------------------------------------
# the regular polygon: closed forms
# -------------------------------------------------------------------------------------------------
def polygon_eigenvalues(n, beta):
    """The eigenvalues λ_m, m = 0..n−1, of the Hessian of E_β at the regular n-gon (weights 1/n):
    λ_m = n^{−2} Σ_{k=1}^{n−1} φ''(2πk/n)(1 − cos(2πmk/n)), φ''(u) = (β sin²u − cos u)e^{β cos u}
    (λ_0 = 0 is the rotation).

    Examples
    --------
    >>> import numpy as np
    >>> lam = polygon_eigenvalues(3, -2.0 / 3.0)
    >>> bool(np.all(np.abs(lam) < 1e-15))
    True
    """
    n = check_int(n, "n", low=2)
    beta = check_beta(beta)
    u = 2 * np.pi * np.arange(1, n) / n
    phi2 = (beta * np.sin(u) ** 2 - np.cos(u)) * np.exp(beta * np.cos(u))
    m = np.arange(n)[:, None]
    return (phi2[None, :] * (1 - np.cos(m * u[None, :]))).sum(axis=1) / n ** 2


def polygon_top_eigenvalue(n, beta):
    """max_{m >= 1} λ_m: < 0 exactly where the regular n-gon is a strict local maximum."""
    return float(np.max(polygon_eigenvalues(n, beta)[1:]))


def polygon_threshold(n, low=None, step=0.01):
    """The β at which the regular n-gon becomes a strict local maximum: the largest β in [low, 0] at which
    its top non-trivial eigenvalue changes sign from negative (below) to positive (above), to 1e-12;
    None when it stays >= 0 on [low, 0] (even n: never, docs/mathematics.md §17.5). The default ``low``
    is −(20 + n²/4), below every threshold for n <= 30.

    Examples
    --------
    >>> round(polygon_threshold(3), 12), polygon_threshold(4)
    (-0.666666666667, None)
    """
    n = check_int(n, "n", low=2)
    low = -(20.0 + n * n / 4) if low is None else check_beta(low, "low")
    grid = np.arange(0.0, low - step / 2, -step)
    u = 2 * np.pi * np.arange(1, n) / n
    phi2 = (grid[:, None] * np.sin(u) ** 2 - np.cos(u)) * np.exp(grid[:, None] * np.cos(u))
    top = np.max(phi2 @ (1 - np.cos(np.arange(1, n)[None, :] * u[:, None])), axis=1)
    below = np.nonzero(top < 0)[0]
    if below.size == 0:
        return None
    k = below[0]
    return brentq(lambda b: polygon_top_eigenvalue(n, b), grid[k], grid[k - 1], xtol=1e-14, rtol=1e-15)


# -------------------------------------------------------------------------------------------------
# continuation
# -------------------------------------------------------------------------------------------------
@dataclass
class Branch:
    """A branch followed in β: ``beta`` (S,), ``angles`` (S, n) with θ_1 = 0, ``top`` (S,) the largest
    non-trivial Hessian eigenvalue, ``kinds`` (S,), and ``events``: dicts with ``type`` ("fold" |
    "stability") and ``beta`` (refined to about 1e-12)."""

    beta: np.ndarray
    angles: np.ndarray
    top: np.ndarray
    kinds: list
    events: list = field(default_factory=list)


def _points(theta):
    return np.stack([np.cos(theta), np.sin(theta)], axis=-1)


def _F(energy, y):
    """F(θ_2..θ_n, β) and its Jacobian (n−1, n)."""
    theta = np.concatenate([[0.0], y[:-1]])
    x = _points(theta)
    e = energy.at(y[-1])
    F = e.gradient(x)[1:, 0]
    J = np.concatenate([e.hessian(x)[1:, 1:], e.beta_derivative(x)[1:, :1]], axis=1)
    return F, J


def _tangent(J, previous=None):
    t = np.linalg.svd(J)[2][-1]
    if previous is not None and t @ previous < 0:
        t = -t
    return t


def _correct(energy, y_pred, t, tol=1e-13, maxiter=30):
    y = y_pred.copy()
    for _ in range(maxiter):
        F, J = _F(energy, y)
        G = np.concatenate([F, [t @ (y - y_pred)]])
        scale = energy.at(y[-1]).scale(_points(np.concatenate([[0.0], y[:-1]])))
        if np.max(np.abs(F)) <= tol * scale and abs(G[-1]) < 1e-14:
            return y, True
        dy = np.linalg.solve(np.vstack([J, t]), -G)
        y = y + dy
        if np.max(np.abs(dy)) < 1e-15:
            return y, True
    F, _ = _F(energy, y)
    return y, bool(np.max(np.abs(F)) <= 1e3 * tol * energy.at(y[-1]).scale(_points(np.concatenate([[0.0], y[:-1]]))))


def _top(energy, y):
    e = energy.at(y[-1])
    x = _points(np.concatenate([[0.0], y[:-1]]))
    lam, _, kind = classify(e, x)
    return float(lam[-1]) if lam.size else float("nan"), kind


def follow(energy, theta, beta, betas, h=0.02, max_steps=4000):
    """Follow the branch through the critical point ``theta`` (angles, corrected at ``beta``) in both
    directions until β leaves ``betas`` = (low, high); returns a `Branch` (its points ordered along the
    branch) with the folds and stability changes refined."""
    low, high = betas
    x, ok = newton(energy.at(beta), _points(theta))
    if not ok:
        raise InvalidInput(f"`points` is not near a critical point of E_β at beta = {beta:g} (Newton did not converge).")
    th = np.arctan2(x[:, 1], x[:, 0])
    y0 = np.concatenate([np.angle(np.exp(1j * (th[1:] - th[0]))), [beta]])
    halves = []
    for sign in (1.0, -1.0):
        t = _tangent(_F(energy, y0)[1])
        t = t * (sign if t[-1] >= 0 else -sign) if abs(t[-1]) > 1e-12 else t * sign
        ys, ts, step = [y0], [t], h
        for _ in range(max_steps):
            y_pred = ys[-1] + step * ts[-1]
            y, ok = _correct(energy, y_pred, ts[-1])
            if not ok or np.max(np.abs(y - ys[-1])) > 4 * step:
                step /= 2
                if step < 1e-8:
                    break
                continue
            ys.append(y)
            ts.append(_tangent(_F(energy, y)[1], ts[-1]))
            step = min(step * 1.3, h)
            if not low <= y[-1] <= high:
                break
            if len(ys) > 3 and np.max(np.abs(np.angle(np.exp(1j * (y[:-1] - y0[:-1]))))) < 1e-7 \
                    and abs(y[-1] - y0[-1]) < 1e-7:
                break                                          # a closed loop
        halves.append((ys, ts))
    ys = halves[1][0][::-1] + halves[0][0][1:]
    ts = [-t for t in halves[1][1][::-1]] + halves[0][1][1:]
    tops, kinds = zip(*(_top(energy, y) for y in ys))
    branch = Branch(beta=np.array([y[-1] for y in ys]), angles=np.array([np.concatenate([[0.0], y[:-1]]) for y in ys]),
                    top=np.array(tops), kinds=list(kinds))
    branch.events = _events(energy, ys, ts, branch, low, high)
    return branch


def _events(energy, ys, ts, branch, low, high):
    """Folds (sign change of dβ/ds) and stability changes (sign change of ``top`` not at a fold)."""
    events = []
    for k in range(len(ys) - 1):
        if not (low <= ys[k][-1] <= high and low <= ys[k + 1][-1] <= high):
            continue
        if ts[k][-1] * ts[k + 1][-1] < 0:
            events.append({"type": "fold", "beta": _refine_fold(energy, ys[k], ts[k], ys[k + 1], ts[k + 1])})
        elif branch.top[k] * branch.top[k + 1] < 0:
            b = _refine_crossing(energy, ys[k], ys[k + 1])
            if b is not None:
                events.append({"type": "stability", "beta": b})
    return events


def _refine_fold(energy, ya, ta, yb, tb):
    """The fold's β by bisection in the arclength on the sign of dβ/ds (β is quadratic in s there, so a
    step of 1e-7 in s gives β to about 1e-14)."""
    s_hi = float(np.linalg.norm(yb - ya))
    s_lo, y_best = 0.0, ya
    for _ in range(60):
        s = 0.5 * (s_lo + s_hi)
        y, ok = _correct(energy, ya + s * ta, ta)
        if not ok:
            break
        t = _tangent(_F(energy, y)[1], ta)
        if t[-1] * ta[-1] > 0:
            s_lo, y_best = s, y
        else:
            s_hi = s
        if s_hi - s_lo < 1e-9:
            break
    return float(y_best[-1])


def _refine_crossing(energy, ya, yb):
    """The β where the top eigenvalue vanishes between ya and yb (natural parametrisation, Newton at each β)."""
    def top_at(b):
        frac = (b - ya[-1]) / (yb[-1] - ya[-1])
        guess = ya[:-1] + frac * (yb[:-1] - ya[:-1])
        x, ok = newton(energy.at(b), _points(np.concatenate([[0.0], guess])), tol=1e-14)
        e = energy.at(b)
        return float(classify(e, x)[0][-1])
    try:
        return float(brentq(top_at, ya[-1], yb[-1], xtol=1e-14, rtol=1e-15))
    except ValueError:
        return None


# -------------------------------------------------------------------------------------------------
# thresholds
# -------------------------------------------------------------------------------------------------
def _check_betas(betas):
    try:
        low, high = (float(b) for b in betas)
    except (TypeError, ValueError):
        raise InvalidInput(f"`betas` must be a pair (low, high) of numbers, got {betas!r}.") from None
    if not (np.isfinite(low) and np.isfinite(high) and low < high):
        raise InvalidInput(f"`betas` must be finite with low < high, got {betas!r}.")
    return low, high


def stability_threshold(points, betas=(-10.0, -0.01), *, beta=None, weights=None, adjacency=None, branch=False):
    """The β at which the branch through ``points`` gains or loses being a strict local maximum (its top
    non-trivial Hessian eigenvalue through zero, or a fold where it is born), to about 1e-12: of the
    events on the branch in the range, the nearest to ``beta``.

    Parameters
    ----------
    points : (n, 2) points on S^1, or (n,) angles: a critical point of E_β at ``beta`` (or close to one).
    betas : (low, high), the range followed.
    beta : the β at which ``points`` is critical; default: ``high`` for a configuration that is critical
        there, else ``low``.
    weights, adjacency : as in `critical_points`.
    branch : also return the `Branch`.

    Returns
    -------
    float or None : that β (None when the branch never changes in the range), and the `Branch` when
    ``branch`` (with every event).

    Examples
    --------
    >>> import numpy as np
    >>> round(stability_threshold(2 * np.pi * np.arange(3) / 3), 10)
    -0.6666666667
    """
    low, high = _check_betas(betas)
    x = as_points(points, dim=2)
    energy = Energy(high, x.shape[0], 2, weights, adjacency)
    if beta is None:
        beta = high if newton(energy.at(high), x)[1] else low
    beta = check_beta(beta)
    theta = np.arctan2(x[:, 1], x[:, 0])
    b = follow(energy, theta, beta, (low, high))
    values = [e["beta"] for e in b.events if low <= e["beta"] <= high]
    found = min(values, key=lambda v: abs(v - beta)) if values else None
    return (found, b) if branch else found


def first_spurious_maximum(n, betas=(-6.0, 0.0), *, step=0.05, dim=2, weights=None, adjacency=None,
                           random_starts=4):
    """The largest β in ``betas`` at which a non-synchronised strict local maximum of E_β exists, with it.

    A census (`critical_points`, without certification) runs on the grid high, high − step, ... down to
    low, each seeded with the points of the previous β. At the first β with a non-synchronised local
    maximum, its branch is followed up to the previous grid value and the threshold refined
    (`stability_threshold`, d = 2; on S^{d−1}, d >= 3, the grid value is returned). A maximum born and
    gone within one step is missed.

    Parameters
    ----------
    n : int >= 2, the number of tokens.
    betas : (low, high), the range searched (from high down).
    step : the spacing of the β grid.
    dim : int >= 2, tokens on S^{dim−1}.
    weights, adjacency : as in `critical_points`.
    random_starts : random starts of the census at each β.

    Returns
    -------
    (beta, CriticalPoint) or (None, None) when there is none in the range. ``beta`` is the supremum of the
    β at which the maximum is strict; the point is the maximum at the first grid value below it,
    certified on S^1.

    Examples
    --------
    >>> beta, where = first_spurious_maximum(3, betas=(-2.0, 0.0), step=0.1)
    >>> round(beta, 10), where.clusters
    (-0.6666666667, (1, 1, 1))
    """
    from .census import census

    low, high = _check_betas(betas)
    energy = Energy(high, check_int(n, "n", low=2), dim, weights, adjacency)
    previous, prev_beta = [], None
    for b in np.arange(high, low - step / 2, -step):
        found = census(energy.at(b), extra=previous, random_starts=random_starts)
        maxima = [p for p in found.points if p.kind == "local max"]
        if maxima:
            best = max(maxima, key=lambda p: p.energy)
            if dim != 2 or prev_beta is None:
                return float(b), best
            thresholds = []
            for p in maxima:
                th = np.arctan2(p.points[:, 1], p.points[:, 0])
                t = stability_threshold(th, (b, prev_beta), beta=b, weights=weights, adjacency=adjacency)
                thresholds.append((t if t is not None else b, p))
            beta_f, where = max(thresholds, key=lambda tp: tp[0])
            from .certify import certify_point    # deferred: mpmath

            return float(beta_f), certify_point(energy.at(b), where)
        previous, prev_beta = [p.points for p in found.points], b
    return None, None
