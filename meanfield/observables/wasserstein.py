"""Wasserstein distances between discrete measures on S^1 and S^2 with the geodesic cost (docs/mathematics.md §8).

The cost is the angle d(x, y) = arccos⟨x, y⟩ ∈ [0, π]. W_p(a, b) = (min_π ∫ d^p dπ)^{1/p}.

* S^1, p = 1: exact in O(m log m) (m = total number of atoms) through cumulative distributions:
  W1 = min_c ∫_0^{2π} |F_a(θ) − F_b(θ) − c| dθ, attained at a weighted median c of F_a − F_b
  (Rabin, Delon & Gousseau 2011; Hundrieser et al. 2022). Any size.
* S^1, p > 1: POT's `ot.wasserstein_circle` (binary search, Delon et al.), which works on [0, 1) and
  returns W_p^p there; we rescale by 2π.
* S^{d-1}, d >= 3: ``method="exact"`` solves the linear program with POT's network simplex
  (`ot.emd2`) on the dense geodesic cost matrix. It is used automatically while n·m <= 2.5e7
  (`EXACT_MAX_SIZE`, about 200 MB of cost matrix and a few tens of seconds); beyond that, choose
    - ``method="sinkhorn"``: stabilised entropic OT (POT, absorption), rounded to a feasible coupling with regularisation ``reg`` (radians), an upper
      bound W1 <= W1_ε <= W1 + O(ε log(1/ε)); memory O(n·m);
    - ``method="binned"``: both measures are moved to the nearest of ``n_bins`` Fibonacci nodes
      (a common partition of the sphere) and the exact LP is solved between the two binned
      measures. By the triangle inequality the error is at most the binning cost
      ∫d(x, Q(x))da + ∫d(x, Q(x))db (returned with ``return_bound=True``); when a ≈ b both are
      binned alike, so the estimate is far better than this bound. Cost: one k-d tree query per
      point plus one n_bins² LP;
    - ``method="sliced"``: POT's spherical sliced Wasserstein (Bonet et al. 2023), a different
      (smaller) metric, O((n+m) log(n+m)) per projection: cheap, but not W1.
"""
import numpy as np
import ducc0.nufft as nufft
from scipy.optimize import minimize_scalar
from scipy.spatial import cKDTree

from .._docs import doc_params
from ..spaces.geodesic import geodesic_distance, merge_on_grid
from ..validation import check_int, check_measure, check_real
from ..spaces.quadrature import sphere_quadrature
from .w1bracket import w1_bracket
from ..errors import InvalidInput
from ..sums import compiled

EXACT_MAX_SIZE = 25_000_000
SMALL_CIRCLE = 10_000       # circle_w1_to_density: up to this many atoms Φ(c) is also minimised exactly


def _angles(x):
    return np.mod(np.arctan2(x[:, 1], x[:, 0]), 2 * np.pi)


def _weighted_median(values, weights):
    order = np.argsort(values, kind="stable")
    cw = np.cumsum(weights[order])
    k = int(np.searchsorted(cw, 0.5 * cw[-1]))
    return values[order[min(k, len(order) - 1)]]


def circle_w1(theta_a, wa, theta_b, wb):
    """Exact W1 on the circle between Σ wa δ_{θa} and Σ wb δ_{θb} (angles in radians, arc-length cost)."""
    theta = np.concatenate([np.mod(theta_a, 2 * np.pi), np.mod(theta_b, 2 * np.pi)])
    mass = np.concatenate([wa, -np.asarray(wb)])
    order = np.argsort(theta, kind="stable")
    theta, mass = theta[order], mass[order]
    diff = np.cumsum(mass)                              # F_a − F_b on [θ_k, θ_{k+1})
    lengths = np.diff(np.append(theta, theta[0] + 2 * np.pi))
    c = _weighted_median(diff, lengths)
    return float(np.sum(np.abs(diff - c) * lengths))


def circle_w1_to_density(measure, coefficients):
    """Exact W1 on S^1 between a discrete measure Σ w_j δ_{θ_j} and the density
    ρ(θ) = Σ_{|k|<=K} c_k e^{ikθ} (c_{−k} = conj(c_k); σ-relative, so c_0 is the mass), with no
    discretisation of ρ: O(n log n + K log K).

    W1 = min_c Φ(c), Φ(c) = ∫_0^{2π} |F_μ(θ) − F_ρ(θ) − c| dθ (docs/mathematics.md §8.1). F_μ is constant
    between consecutive atoms, and F_ρ(θ) = (1/2π)∫_0^θ ρ and G(θ) = ∫_0^θ F_ρ are Fourier series
    evaluated at the atoms (nonuniform FFTs). On an interval [a, b] where F_μ − F_ρ − c keeps its sign
    the integral is exactly |(F_μ − c)(b − a) − (G(b) − G(a))|; F_ρ increases, so the sign changes at
    most once, at the root of F_ρ(θ) = F_μ − c (Newton's method, safeguarded by the interval), and
    the two parts are integrated the same way. The minimising c is the median of F_μ − F_ρ for dθ,
    found by bisection with F_ρ linear on each interval; Φ is flat there (an error δ in c changes Φ
    by O(δ²)), and for at most SMALL_CIRCLE = 10^4 atoms Φ is also minimised exactly (bounded Brent).
    ``coefficients``: c_0..c_K, as a `FourierSeries` stores them.
    """

    x, w = check_measure(measure, dim=2)
    primitives = _CirclePrimitives(np.asarray(coefficients, dtype=complex))
    angles = _angles(x)
    order = np.argsort(angles, kind="stable")
    level = np.concatenate([[0.0], np.cumsum(w[order]) / w.sum()])    # F_μ on [edges[i], edges[i+1])
    edges = np.concatenate([[0.0], angles[order], [2 * np.pi]])
    F, G = primitives(edges)
    lengths = np.diff(edges)

    def phi(shift):
        return _phi(primitives, level - shift, edges, F, G)

    shift, low, high = _median_shift(level - F[:-1], level - F[1:], lengths)
    if len(lengths) > SMALL_CIRCLE:
        return phi(shift)
    # few atoms, long intervals where h is far from linear: minimise the exact Φ over c as well
    best = minimize_scalar(phi, bounds=(low, high), method="bounded", options={"xatol": 1e-14})
    return min(float(best.fun), phi(shift))


class _CirclePrimitives:
    """F_ρ(θ) = (1/2π)∫_0^θ ρ, G(θ) = ∫_0^θ F_ρ and F_ρ' = ρ/2π of ρ = Σ_{|k|<=K} c_k e^{ikθ} at any angles
    (one nonuniform FFT of the three series)."""

    def __init__(self, c):
        K = self.K = c.size - 1
        k = np.arange(-K, K + 1)
        full = np.concatenate([np.conj(c[1:][::-1]), c])          # c_{−K} .. c_K
        nz = k != 0
        self.series = np.zeros((3, 2 * K + 1), dtype=complex)
        self.series[0, nz] = full[nz] / (2j * np.pi * k[nz])       # F_ρ = c_0θ/2π + Σ f_k (e^{ikθ} − 1)
        self.series[1, nz] = -full[nz] / (2 * np.pi * k[nz] ** 2)  # G = c_0θ²/4π + Σ g_k (e^{ikθ} − 1) + slope·θ
        self.series[2] = full / (2 * np.pi)                        # F_ρ' = ρ/2π
        self.offsets = self.series[:2].sum(axis=1).real
        self.slope = (1j * full[nz] / (2 * np.pi * k[nz])).sum().real
        self.c0 = c[0].real

    def __call__(self, theta, parts=2):
        if self.K > 0:
            v = nufft.u2nu(grid=self.series[:parts], coord=np.asarray(theta, dtype=float)[:, None], forward=False,
                           epsilon=1e-13).real
        else:
            v = np.zeros((parts, np.size(theta)))
            if parts == 3:
                v[2] = self.c0 / (2 * np.pi)
        F = self.c0 * theta / (2 * np.pi) + v[0] - self.offsets[0]
        G = self.c0 * theta ** 2 / (4 * np.pi) + v[1] - self.offsets[1] + self.slope * theta
        return (F, G) if parts == 2 else (F, G, v[2])


def _phi(primitives, s, edges, F, G):
    """Φ = Σ over the intervals of ∫ |s − F_ρ| (s = F_μ − c): exact on each, split at the root of F_ρ = s
    where the sign changes (Newton's method kept inside the interval)."""
    lengths, dG = np.diff(edges), np.diff(G)
    ua, ub = s - F[:-1], s - F[1:]
    total = np.abs(s * lengths - dG)
    change = np.nonzero((ua > 0) & (ub < 0))[0]
    if change.size:
        a, b, target = edges[change], edges[change + 1], s[change]
        root = a + lengths[change] * ua[change] / (ua[change] - ub[change])
        for _ in range(12):                                # Newton on F_ρ(θ) = target, kept in [a, b]
            Fr, _, dF = primitives(root, 3)
            err = Fr - target
            a, b = np.where(err < 0, root, a), np.where(err > 0, root, b)
            step = np.where(dF > 0, err / np.where(dF > 0, dF, 1.0), np.inf)
            new = root - step
            new = np.where((new > a) & (new < b), new, 0.5 * (a + b))
            done = np.all(np.abs(new - root) <= 1e-10 * (edges[change + 1] - edges[change]))
            root = new
            if done:
                break
        Gr = primitives(root)[1]
        left = target * (root - edges[change]) - (Gr - G[change])
        right = (G[change + 1] - Gr) - target * (edges[change + 1] - root)
        total[change] = left + right
    return float(np.sum(total))


def _median_shift(ua, ub, lengths):
    """The median c of h = F_μ − F_ρ for dθ (|{h < c}| = π), h linear on each interval between its values
    ``ua``, ``ub`` at the ends, by bisection; and the range of h."""
    def below(shift):                                          # |{θ: h(θ) < c}|, h linear on each interval
        frac = np.clip(np.where(ua != ub, (ua - shift) / np.where(ua != ub, ua - ub, 1.0), (ua < shift) * 1.0),
                       0.0, 1.0)
        return float(np.sum(lengths * np.where(ua < shift, 1.0, 1.0 - frac)))

    low, high = lo, hi = float(min(ua.min(), ub.min())), float(max(ua.max(), ub.max()))
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if below(mid) < np.pi else (lo, mid)
    return 0.5 * (lo + hi), low, high


def _geodesic_cost(xa, xb, p, chunk=256):
    c = np.empty((xa.shape[0], xb.shape[0]))
    for s in range(0, xa.shape[0], chunk):
        c[s:s + chunk] = geodesic_distance(xa[s:s + chunk, None, :], xb[None, :, :])
    return c if p == 1 else c ** p


def _round_to_marginals(plan, wa, wb):
    """Altschuler–Weed–Rigollet rounding: a feasible coupling close to ``plan``, so its cost >= W_p^p."""
    r = plan.sum(1)
    plan = plan * np.minimum(1.0, wa / np.where(r > 0, r, 1.0))[:, None]
    c = plan.sum(0)
    plan = plan * np.minimum(1.0, wb / np.where(c > 0, c, 1.0))[None, :]
    ea, eb = wa - plan.sum(1), wb - plan.sum(0)
    s = ea.sum()
    if s > 0:
        plan = plan + np.outer(ea, eb) / s
    return plan


def _bin(x, w, nodes, tree):
    """Move the mass of (x, w) to its nearest node; returns (node weights, binning cost ∫d(x,Qx)dμ)."""
    _, idx = tree.query(x)
    mass = np.bincount(idx, weights=w, minlength=nodes.shape[0])
    cost = float(w @ geodesic_distance(x, nodes[idx]))
    return mass, cost


def _binned(xa, wa, xb, wb, p, n_bins):
    import ot  # deferred: POT is heavy


    nodes = sphere_quadrature(n_bins, xa.shape[1])[0]
    tree = cKDTree(nodes)
    ma, ca = _bin(xa, wa, nodes, tree)
    mb, cb = _bin(xb, wb, nodes, tree)
    keep = (ma > 0) | (mb > 0)
    cost = _geodesic_cost(nodes[keep], nodes[keep], p)
    val = float(max(ot.emd2(ma[keep], mb[keep], cost, numItermax=10_000_000), 0.0) ** (1 / p))
    return val, ca + cb


def _merged(xa, wa, xb, wb, p, spacing=1e-7):
    """The exact linear program between the two measures merged on the finest grid (`merge_on_grid`,
    side doubled from ``spacing``) whose supports fit EXACT_MAX_SIZE; returns (value, merging costs)."""
    import ot  # deferred: POT is heavy

    while True:
        ma = merge_on_grid(xa, wa, spacing)
        mb = merge_on_grid(xb, wb, spacing)
        if len(ma[1]) * len(mb[1]) <= EXACT_MAX_SIZE:
            break
        spacing *= 2.0
    cost = _geodesic_cost(ma[0], mb[0], p)
    val = float(max(ot.emd2(ma[1], mb[1], cost, numItermax=10_000_000), 0.0) ** (1 / p))
    return val, ma[2] + mb[2]


def wasserstein(a, b, p=1, method="auto", reg=None, n_projections=200, seed=0, n_bins=3000,
                return_bound=False, threads=None):
    """Wasserstein distance W_p between discrete measures on the same sphere, geodesic cost.

    Parameters
    ----------
    a, b : (points, weights)
        Points of shape (n, d) and (m, d) on S^{d-1}, weights non-negative summing to 1. With
        ``method="bracket"`` (S^2, p = 1), ``b`` may also be a σ-relative density callable.
    p : float >= 1
    method : "auto", "exact", "merged", "sinkhorn", "binned", "sliced" or "bracket"
        "bracket" (S^2, p = 1): a `meanfield.observables.w1bracket.W1Bracket`, lower <= W1 <= upper, certified,
        in O(n log n) for clouds of any size against a density or another cloud (docs/wasserstein.md).
        On S^1 the distance is always exact (this argument is ignored). On S^{d-1}, d >= 3, "auto"
        means "exact" up to n·m = `EXACT_MAX_SIZE` and raises beyond, asking for a method.
        "merged": the exact linear program after merging the atoms of each measure on the finest
        cubic grid (side 1e-7, doubled as needed) whose supports fit `EXACT_MAX_SIZE`; the bound is
        the merging cost, tiny for clustered measures (`merge_on_grid`).
    reg : float, optional
        Entropic regularisation for "sinkhorn", in units of the cost (default 1e-3·π^p).
    n_projections : int
        Number of great circles for "sliced".
    seed : int
        Seed of the random great circles of "sliced".
    n_bins : int
        Number of Fibonacci nodes for "binned" (at most 6000).
    return_bound : bool
        Return (value, bound) where |W_p − value| <= bound: the binning cost for "binned", the
        merging cost for "merged" (p = 1), 0 on S^1 and for "exact". "sinkhorn" and "sliced" raise.
    threads : int >= 1 or None
        Threads of the "bracket" cell integrals (`meanfield.threads`; the other methods run on one).

    Returns
    -------
    float or (float, float) or W1Bracket
        W_p(a, b) in radians (for "sliced": the spherical sliced Wasserstein distance); with
        ``return_bound`` the pair (value, bound); for "bracket" the certified bracket.

    Raises
    ------
    ValueError
        Measures not on the same sphere, points off it, weights negative or not summing to 1,
        ``p`` < 1, an unknown ``method`` or one that does not apply (p != 1 for "merged", "binned" and
        "bracket"; "binned", "sliced" off S^2), measures too large for "auto" (n·m > `EXACT_MAX_SIZE`),
        ``return_bound`` with "sinkhorn" or "sliced".

    Examples
    --------
    >>> import numpy as np
    >>> import meanfield as mf
    >>> a = (np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]), np.array([0.5, 0.5]))
    >>> b = (np.array([[0.0, 0.0, 1.0]]), np.ones(1))
    >>> round(mf.wasserstein(a, b), 6)                 # every atom is a quarter circle away: π/2
    1.570796
    >>> value, bound = mf.wasserstein(a, b, return_bound=True)
    >>> round(value, 6), bound
    (1.570796, 0.0)
    """
    if method == "bracket":
        if check_real(p, "p", low=1.0) != 1.0:
            raise InvalidInput(f"`method`='bracket' bounds W1: `p` must be 1, got {p!r}.")
        return w1_bracket(a, b, threads)
    xa, wa = check_measure(a, "a")
    xb, wb = check_measure(b, "b", dim=xa.shape[1])
    p = check_real(p, "p", low=1.0)
    d = xa.shape[1]
    if d == 2:
        val = _circle_wp(xa, wa, xb, wb, p)
        return (val, 0.0) if return_bound else val
    return _on_sphere(xa, wa, xb, wb, p, method, return_bound, reg, n_bins, n_projections, seed)


def _on_sphere(xa, wa, xb, wb, p, method, return_bound, reg, n_bins, n_projections, seed):
    """W_p between checked measures on S^{d−1}, d >= 3, by ``method`` (the options of `wasserstein`):
    exact LP, merged or binned (with an error bound), entropic (Sinkhorn) or sliced, through POT."""
    import ot  # deferred: POT is heavy
    d = xa.shape[1]
    size = xa.shape[0] * xb.shape[0]
    if method == "auto":
        if size > EXACT_MAX_SIZE:
            raise InvalidInput(f"`a` and `b` are too large for the exact solver (n·m = {size:.3g} > {EXACT_MAX_SIZE:.3g}); "
                             "pass method='binned' (exact LP between binned measures, with an error bound), "
                             "method='sinkhorn' (entropic upper bound) or method='sliced'.")
        method = "exact"
    if method == "exact":
        cost = _geodesic_cost(xa, xb, p)
        val = float(max(ot.emd2(wa, wb, cost, numItermax=10_000_000), 0.0) ** (1 / p))
        return (val, 0.0) if return_bound else val
    if method == "merged":
        if p != 1:
            raise InvalidInput("`method`='merged' is implemented for p = 1.")
        val, bound = _merged(xa, wa, xb, wb, p)
        return (val, bound) if return_bound else val
    if return_bound and method != "binned":
        raise InvalidInput(f"`return_bound`=True needs method 'exact', 'merged' or 'binned', got {method!r}.")
    if method == "sinkhorn":
        return _sinkhorn(xa, wa, xb, wb, p, reg)
    if method == "binned":
        if p != 1:
            raise InvalidInput("`method`='binned' is implemented for p = 1.")
        if d != 3:
            raise InvalidInput("`method`='binned' is implemented on S^2 only.")
        n_bins = check_int(n_bins, "n_bins", low=2, high=6000)
        val, bound = _binned(xa, wa, xb, wb, p, n_bins)
        return (val, bound) if return_bound else val
    if method == "sliced":
        if d != 3:
            raise InvalidInput("`method`='sliced' is implemented on S^2 only.")
        n_projections = check_int(n_projections, "n_projections", low=1)
        return float(ot.sliced_wasserstein_sphere(xa, xb, wa, wb, n_projections=n_projections, p=p, seed=seed))
    raise InvalidInput(f"`method` must be 'auto', 'exact', 'merged', 'sinkhorn', 'binned' or 'sliced', got {method!r}.")


def _circle_wp(xa, wa, xb, wb, p):
    """W_p on S^1, exact: the median formula for p = 1, POT's circle solver otherwise."""
    if p == 1:
        return circle_w1(_angles(xa), wa, _angles(xb), wb)
    import ot  # deferred: POT is heavy
    u = _angles(xa) / (2 * np.pi)
    v = _angles(xb) / (2 * np.pi)
    return 2 * np.pi * max(float(np.asarray(ot.wasserstein_circle(u, v, wa, wb, p=p)).ravel()[0]), 0.0) ** (1 / p)


def _sinkhorn(xa, wa, xb, wb, p, reg):
    """The entropic upper bound: Sinkhorn's plan (regularisation ``reg``, default 1e-3·π^p) rounded to the
    marginals, its cost."""
    import ot  # deferred: POT is heavy
    reg = 1e-3 * np.pi ** p if reg is None else check_real(reg, "reg", low=0.0, low_open=True)
    cost = _geodesic_cost(xa, xb, p)
    plan = ot.sinkhorn(wa, wb, cost, reg, method="sinkhorn_stabilized", numItermax=5000, stopThr=1e-8, warn=False)
    plan = _round_to_marginals(plan, wa, wb)
    return float(np.sum(plan * cost) ** (1 / p))


@doc_params
def w1_to_dirac(measure):
    """min_x W1(μ, δ_x) = min_x ∫ arccos⟨x, y⟩ dμ(y): the distance to the nearest Dirac mass.

    The minimiser is a spherical (Fréchet-type L1) median; we take the best of the atoms and the
    normalised mean as starting points and refine by Weiszfeld iterations on the sphere.

    Parameters
    ----------
    measure : (points, weights)
        Points (n, d) on the sphere, weights summing to 1.

    Returns
    -------
    float
        The distance in radians.

    {measure_raises}

    Examples
    --------
    >>> import numpy as np
    >>> import meanfield as mf
    >>> x = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    >>> round(mf.w1_to_dirac((x, np.array([0.5, 0.5]))), 6)      # the midpoint of the arc: π/4
    0.785398
    """
    x, w = check_measure(measure)
    distances, gradient = _median_steps(x, w)
    m = w @ x
    cands = [x[int(np.argmax(w))]]
    if np.linalg.norm(m) > 1e-12:
        cands.append(m / np.linalg.norm(m))
    # a few heavy atoms as further starts (cheap, avoids the antipodal trap of the mean)
    for k in np.argsort(w)[-8:]:
        cands.append(x[k])
    costs = [distances(c)[0] for c in cands]
    best = cands[int(np.argmin(costs))]
    z = best
    f_best, ang = distances(best)
    f_z = f_best
    for _ in range(100):
        step = gradient(z, ang)
        if step is None:
            break
        g, hess = step
        step = -g / max(hess, 1e-12)
        moved = False
        for _halving in range(2):                       # the Newton-like step, else half of it
            s = np.linalg.norm(step)
            if s < 1e-13:
                break
            znew = np.cos(s) * z + np.sin(s) * step / s
            f_new, ang_new = distances(znew)
            if f_new <= f_z:
                converged = f_z - f_new <= 1e-14 * f_z
                z, ang, f_z, moved = znew, ang_new, f_new, not converged
                break
            step *= 0.5
        if not moved:
            break
    return min(f_z, f_best)


def _median_steps(x, w):
    """The two passes of `w1_to_dirac`'s iteration for the atoms (x, w): z ↦ (∫ d(x, z) dμ, the distances d_j
    (with their sines, compiled)) and (z, those) ↦ (the Riemannian gradient −Σ_j w_j t_j/|t_j|,
    t_j = x_j − ⟨x_j, z⟩z, and the curvature Σ_j w_j d_j/(sin d_j · d_j)) over the atoms with |t_j| > 1e-14,
    or None when there is none: compiled on S^2 (`meanfield.sums.compiled.dirac_distances`), numpy otherwise."""
    columns = compiled.dirac_columns(x)
    if columns is not None:
        return (lambda z: compiled.dirac_distances(columns, w, z),
                lambda z, ang: compiled.dirac_gradient(columns, w, z, ang))

    def distances(z):
        ang = geodesic_distance(x, z)                   # accurate for small angles (arccos is not)
        return float(w @ ang), ang

    def gradient(z, ang):
        tangent = x - (x @ z)[:, None] * z
        norms = np.sqrt(np.einsum("nd,nd->n", tangent, tangent))
        ok = norms > 1e-14
        if not np.any(ok):
            return None
        hess = np.sum(w[ok] * ang[ok] / np.maximum(np.sin(ang[ok]), 1e-14) / np.maximum(ang[ok], 1e-14))
        return -(w[ok] / norms[ok]) @ tangent[ok], hess

    return distances, gradient


@doc_params
def w1_to_uniform(measure, n_reference=None):
    """W1(μ, σ), the distance to the uniform measure, in radians.

    On S^1 against the midpoint rule of σ with n_reference points (default max(2^16, 8n)), exact for
    that rule (the median formula); on S^2 against a Fibonacci quadrature of σ with n_reference
    points (default 2000; exact LP up to `EXACT_MAX_SIZE`, Sinkhorn beyond; error O(n_reference^{-1/2})).

    Parameters
    ----------
    measure : (points, weights)
        Points (n, d) on S^1 or S^2, weights summing to 1.
    n_reference : int, optional
        Size of the quadrature of σ.

    Returns
    -------
    float

    {measure_raises}

    Examples
    --------
    A Dirac mass on S^1 is at mean distance π/2 from the uniform measure:

    >>> import numpy as np
    >>> import meanfield as mf
    >>> round(mf.w1_to_uniform((np.array([[1.0, 0.0]]), np.ones(1))), 6), round(np.pi / 2, 6)
    (1.570796, 1.570796)
    """

    x, w = check_measure(measure)
    d = x.shape[1]
    if d == 2:
        m = n_reference or max(1 << 16, 8 * len(w))
        ref = sphere_quadrature(m, 2)
        return circle_w1(_angles(x), w, _angles(ref[0]), ref[1])
    m = n_reference or 2000
    ref = sphere_quadrature(m, d)
    return wasserstein((x, w), ref, method="exact" if len(w) * m <= EXACT_MAX_SIZE else "sinkhorn")


def w1_marginal(a, b, axis=None, n_grid=4096):
    """W1 between the laws of s = ⟨x, axis⟩ under a and b on [−1, 1]: ∫_{−1}^{1} |F_a(s) − F_b(s)| ds.

    Each of ``a``, ``b`` is a discrete measure (points, weights) on S^{d−1}, or a callable F(s), the
    CDF of a continuous law on [−1, 1] (e.g. ``lambda s: rep.marginal_cdf(data, s)`` of a
    `GegenbauerSeries` state). Two discrete measures: exact (piecewise-constant CDFs). With a
    callable: the integral is split at every atom and at n_grid points s = cos(πk/n_grid) and each
    piece is integrated by 8-point Gauss–Legendre (error far below 1e-8 for smooth CDFs).
    ``axis`` (default e_d) is used for the discrete measures.
    """
    ends = [np.empty(0)]
    parts = []
    for name, m in (("a", a), ("b", b)):
        if callable(m):
            parts.append(m)
            continue
        x, w = check_measure(m, name)
        e = np.eye(x.shape[1])[-1] if axis is None else np.asarray(axis, dtype=float)
        if e.shape != (x.shape[1],):
            raise InvalidInput(f"`axis` must have length d={x.shape[1]}, got shape {e.shape}.")
        s = np.clip(x @ (e / np.linalg.norm(e)), -1.0, 1.0)
        order = np.argsort(s, kind="stable")
        parts.append((s[order], np.cumsum(w[order])))
        ends.append(s)

    def cdf(part, t):
        if callable(part):
            return np.asarray(part(t), dtype=float)
        s, cw = part
        k = np.searchsorted(s, t, side="right")
        return np.where(k > 0, cw[np.maximum(k - 1, 0)], 0.0)

    if not any(callable(p) for p in parts):
        t = np.unique(np.concatenate(ends + [[-1.0, 1.0]]))
        return float(np.sum(np.abs(cdf(parts[0], t[:-1]) - cdf(parts[1], t[:-1])) * np.diff(t)))
    n_grid = check_int(n_grid, "n_grid", low=2)
    t = np.unique(np.concatenate(ends + [np.cos(np.pi * np.arange(n_grid + 1) / n_grid)]))
    gx, gw = np.polynomial.legendre.leggauss(8)
    mid, half = 0.5 * (t[1:] + t[:-1]), 0.5 * np.diff(t)
    nodes = (mid[:, None] + half[:, None] * gx[None, :]).ravel()
    gap = np.abs(cdf(parts[0], nodes) - cdf(parts[1], nodes)).reshape(-1, 8)
    return float(np.sum(half * (gap @ gw)))
