"""Labels carried by the flow: positions and log-Jacobians along characteristics (docs/mathematics.md §9).

A Lagrangian state discretises μ_0 = ρ_0σ by a quadrature Σ_j w_j δ_{y_j} (labels y_j, weights
w_j = q_j ρ_0(y_j)) and follows each label along the flow Φ_t of the velocity:

    x_j(t) = Φ_t(y_j),    ℓ_j(t) = log J_t(y_j),    ρ_t(x_j) = ρ_0(y_j) e^{−ℓ_j(t)},

so μ_t ≈ Σ_j w_j δ_{x_j(t)} with the *same* weights (masses are exact) and the density is exact at
the moving nodes (Geshkovski, Letrouit, Polyanskiy, Rigollet, *A mathematical perspective on
Transformers* (2023), continuity equation (3.1)). One time slice of data is an array (n, d + 1):
the positions x_j (n, d) and ℓ_j. A run may carry a second, coarser set of labels (the
*companion*) in rows n..n + m − 1: the same equation on a coarser quadrature, whose distance to the
fine one is the run's error estimate (`LagrangianNodes.error_estimate`).

Densities between the nodes:

* **S^1.** The flow keeps the cyclic order of the labels, so the lift Θ(y) of y ↦ Φ_t(y) is an
  increasing map with Θ(y + 2π) = Θ(y) + 2π and Θ'(y_j) = J_j = e^{ℓ_j}. Between two consecutive
  labels Θ is interpolated by the monotone rational-quadratic Hermite interpolant of Gregory and
  Delbourgo (1982), which matches Θ and Θ' at both ends and is increasing for any positive data.
  It is inverted in closed form (one quadratic), and ρ_t(x) = ρ_0(y)/Θ'(y) at the label y with
  Θ(y) = x (ρ_0 interpolated linearly between labels): exact at the nodes, positive, and the exact
  push-forward of ρ_0 under the interpolated map, so ∫ρ_t dσ between two nodes equals the mass
  between their labels (up to the linear interpolation of ρ_0). Error O(h³) in Θ where the map is
  smooth (h the label spacing); across a gap between clusters it is a monotone bridge of tiny density.
* **S^2.** While the labels resolve the density (at every label, log ρ of its 30 nearest labels spans
  less than 1), exact at the moving nodes, and between them log ρ is fitted by weighted least squares
  with a cubic in tangent-plane coordinates through the 30 nearest nodes (Gaussian weights on the scale
  of the 10th neighbour distance), i.e. moving least squares, error O(h⁴) in log ρ, limited to the
  nodes' range widened by a quarter of its span (so at most e^{1/4} times the largest ρ of those
  nodes). Measured against `SphericalHarmonics` for a smooth state (docs/lagrangian.md): relative error
  2e-6 with 2048 nodes. Once they do not (clusters: a local fit would extrapolate without bound across
  them, and no fixed quadrature resolves them), it is the band-limited kernel density of the labels'
  measure, everywhere (continuous, so that a quadrature through a label integrates it too; the exact
  values at the labels remain `LagrangianNodes.node_density`),

      ρ_L(x) = Σ_j w_j K_L(⟨x, x_j⟩),   K_L(t) = (L + 1) ((1 + t)/2)^L,

  a polynomial of degree L on the sphere with ∫ K_L(⟨x, y⟩) dσ(x) = 1 for every y (σ the uniform
  probability measure, dσ = dt dφ/4π: ∫_{−1}^{1} ((1 + t)/2)^L dt/2 = 1/(L + 1)), so its mass is Σ_j w_j
  exactly, and any quadrature exact to degree L (`meanfield.spaces.quadrature.gauss_legendre` with L/2 + 1
  rings and L + 1 meridians) integrates it to round-off. It is positive; K_L(cos θ) ≈ (L + 1) e^{−Lθ²/4}
  is a Gaussian of variance 2/L per axis, and L = ⌊n/(2π)⌋ (n labels) sets that variance to the area
  4π/n of a label's initial cell, so the kernels of neighbouring labels overlap where the flow has not
  moved them together. It is capped at e^{1/4} times the largest ρ at the nodes only if it would pass
  it (a cluster of mass m reads about m(L + 1), far below its labels' ρ).

Clusters (`LagrangianNodes.clusters`): single-linkage components of the nodes at geodesic distance
``cluster_tol`` (on S^1: runs of consecutive nodes separated by angular gaps <= ``cluster_tol``),
kept when they hold at least two nodes and a mass of at least ``min_mass``.
"""
import numpy as np
from scipy.spatial import cKDTree

from ..observables.energy import discrete_energy
from ..spaces.geodesic import tangent_frame
from ..spaces.gridded import LAT_ATTRS, LON_ATTRS, THETA_ATTRS, bin_masses
from .base import Representation
from ..observables.diagnostics import linked_components
from ..observables.wasserstein import EXACT_MAX_SIZE, w1_to_dirac, wasserstein
from ..errors import InvalidInput

_SWAP_TOL = 1e-9     # S^1: consecutive nodes closer than this (in angle) may swap by round-off
_NODE_TOL = 4e-15    # S^1: a query angle this close to a node's is that node
_FIT_MARGIN = 0.25   # S^2: the fit of log ρ may leave its nodes' range by this fraction of its span
_SMOOTH = 1.0        # S^2: log ρ of the nearest nodes spans less than this: they resolve the density
_KDE_BLOCK = 1 << 20  # S^2: values per block of the kernel density (query points × labels; 8 MB)


def _angles(x):
    return np.arctan2(x[..., 1], x[..., 0])


def monotone_lift(theta):
    """The increasing lift Θ_j = θ_j + 2πk_j of angles θ_j of points in cyclic order.

    Consecutive differences are taken in [0, 2π): a difference in (−``_SWAP_TOL``, 0) is round-off
    inside a cluster (the flow keeps the order), any other negative one wraps around. Θ_j is θ_j
    plus a whole number of turns (no accumulated rounding), made non-decreasing.
    """
    theta = np.asarray(theta, dtype=float)
    d = np.diff(theta)
    d = np.where(d < -np.pi, d + 2 * np.pi, np.where(d >= np.pi, d - 2 * np.pi, d))       # in [−π, π)
    d = np.where(d >= 0, d, np.where(d > -_SWAP_TOL, 0.0, d + 2 * np.pi))
    approx = theta[0] + np.concatenate([[0.0], np.cumsum(d)])
    turns = np.rint((approx - theta) / (2 * np.pi))
    return np.maximum.accumulate(theta + 2 * np.pi * turns)


def rational_quadratic_inverse(r, dtheta, h, d0, d1):
    """Invert the Gregory–Delbourgo monotone rational quadratic on one interval.

    The interpolant of Θ(0) = 0, Θ(h) = ``dtheta``, Θ'(0) = d0, Θ'(h) = d1 (all > 0) is, with
    ξ = y/h and s = dtheta/h,  Θ = dtheta·[sξ² + d0ξ(1−ξ)] / [s + (d0 + d1 − 2s)ξ(1−ξ)].
    Returns (ξ, Θ'(ξ)) with Θ(ξ) = r, 0 <= r <= dtheta; Θ' = s²[d1ξ² + 2sξ(1−ξ) + d0(1−ξ)²]/den².
    """
    s = dtheta / h
    k = d0 + d1 - 2 * s
    a = dtheta * (s - d0) + r * k
    b = dtheta * d0 - r * k
    c = -s * r
    disc = np.sqrt(np.clip(b * b - 4 * a * c, 0.0, None))
    # the root 2c/(−b − √disc) = (√disc − b)/(2a), each form where it has no cancellation
    q = -0.5 * (b + np.where(b >= 0, disc, -disc))
    with np.errstate(invalid="ignore", divide="ignore"):
        xi = np.where(b >= 0, np.where(q != 0, c / q, 0.0), np.where(a != 0, q / a, -c / b))
    xi = np.clip(np.nan_to_num(xi, nan=0.0), 0.0, 1.0)
    e = xi * (1 - xi)
    denom = s + k * e
    with np.errstate(invalid="ignore", divide="ignore"):
        slope = s * s * (d1 * xi * xi + 2 * s * e + d0 * (1 - xi) ** 2) / (denom * denom)
    slope = np.where(dtheta > 0, slope, d0)
    return xi, slope


def _hermite_inverse(r, dtheta, h, d0, d1, xi, iterations=4):
    """ξ ∈ [0, 1] with H(ξ) = r for the cubic Hermite H of (0, 0, d0) and (h, dtheta, d1), by Newton
    from ``xi`` (monotone here: the slopes are within e^{1/2} of the secant)."""
    for _ in range(iterations):
        x2, x3 = xi * xi, xi * xi * xi
        H = (-2 * x3 + 3 * x2) * dtheta + (x3 - 2 * x2 + xi) * h * d0 + (x3 - x2) * h * d1
        dH = (-6 * x2 + 6 * xi) * dtheta + (3 * x2 - 4 * xi + 1) * h * d0 + (3 * x2 - 2 * xi) * h * d1
        xi = np.clip(xi - (H - r) / dH, 0.0, 1.0)
    return xi


def _lagrange_weights(nodes, x):
    """Weights λ_k(x) of the Lagrange interpolant through ``nodes`` (q, m) at x (q,)."""
    m = nodes.shape[1]
    lam = np.ones(nodes.shape)
    for a in range(m):
        for b in range(m):
            if a != b:
                lam[:, a] *= (x - nodes[:, b]) / (nodes[:, a] - nodes[:, b])
    return lam


def _mls_log_fit(pos, logr, tree, q, k, degree=3):
    """Weighted least-squares fit of log ρ through the k nearest nodes of each query point q (m, 3),
    in tangent-plane coordinates with Gaussian weights on the scale of the (k/3)-th neighbour distance.
    Returns (log ρ(q), ok) where ok marks the fits that are well conditioned (cond < 1e10).

    The fit is limited to the range of its k nodes' log ρ widened by `_FIT_MARGIN` of its span on each
    side: where the nodes are clustered and q lies away from them the polynomial extrapolates, and
    without a limit grows without bound (e^{100} and beyond); for a smooth density it interpolates and
    the limit does not bind (the margin leaves room for a maximum between nodes)."""
    dist, idx = tree.query(q, k=k)
    dist, idx = dist.reshape(len(q), k), idx.reshape(len(q), k)
    e1, e2 = tangent_frame(q)
    diff = pos[idx] - q[:, None, :]
    scale = np.maximum(dist[:, k // 3], 1e-300)[:, None]
    u = np.einsum("qkd,qd->qk", diff, e1) / scale
    v = np.einsum("qkd,qd->qk", diff, e2) / scale
    cols = [u ** (a - b) * v ** b for a in range(degree + 1) for b in range(a + 1)]
    A = np.stack(cols, axis=-1)
    W = A * np.exp(-(dist / scale) ** 2)[..., None]
    G = np.swapaxes(W, 1, 2) @ A
    rhs = np.swapaxes(W, 1, 2) @ logr[idx][..., None]
    ok = np.linalg.cond(G) < 1e10
    G[~ok] += 1e-12 * np.eye(A.shape[-1])
    low, high = logr[idx].min(axis=1), logr[idx].max(axis=1)
    margin = _FIT_MARGIN * (high - low)
    return np.clip(np.linalg.solve(G, rhs)[:, 0, 0], low - margin, high + margin), ok


def kernel_degree(n):
    """L = max(2, ⌊n/(2π)⌋): the degree of the band-limited kernel density of n labels on S^2 (module
    docstring: the kernel's variance 2/L per axis equals a label's initial cell 4π/n)."""
    return max(2, int(n / (2 * np.pi)))


def band_limited_density(points, weights, x, degree):
    """ρ_L(x) = Σ_j w_j (L + 1) ((1 + ⟨x, x_j⟩)/2)^L at x (q, 3) for labels ``points`` (n, 3) of masses
    ``weights`` (n,), L = ``degree`` (module docstring): positive, of mass Σ_j w_j exactly, a polynomial
    of degree L (integrated to round-off by any quadrature exact to degree L); in blocks of query points.

    Examples
    --------
    >>> import meanfield as mf
    >>> y = mf.sphere_quadrature(50, 3).points
    >>> rule = mf.quadrature.gauss_legendre(6, 11)                      # exact to degree 10
    >>> rho = band_limited_density(y, np.full(50, 0.02), rule.points, 10)
    >>> round(float(rule.weights @ rho), 12), bool(rho.min() > 0)
    (1.0, True)
    """
    x = np.asarray(x, dtype=float)
    out = np.empty(len(x))
    scale = (degree + 1) * np.asarray(weights, dtype=float)
    rows = max(1, _KDE_BLOCK // max(len(points), 1))
    for a in range(0, len(x), rows):
        half = np.clip(0.5 * (1.0 + x[a:a + rows] @ points.T), 0.0, 1.0)
        with np.errstate(under="ignore"):                     # far labels: ((1 + t)/2)^L below the smallest double
            out[a:a + rows] = np.power(half, degree) @ scale
    return out


def _disk_points(m):
    """m equal-area points of the unit disk (rings of radius sqrt((i + ½)/m) at golden-angle turns), (m, 2)."""
    i = np.arange(m)
    r, psi = np.sqrt((i + 0.5) / m), i * np.pi * (3.0 - np.sqrt(5.0))
    return np.stack([r * np.cos(psi), r * np.sin(psi)], -1)


class LagrangianNodes(Representation):
    """Moving labels: one time slice is (n [+ m], d + 1) = [positions, log-Jacobians] (module docstring).

    Parameters
    ----------
    labels : (n, d) initial positions y_j (on S^1 in increasing angle, one turn).
    weights : (n,) w_j = q_j ρ_0(y_j) (the masses of the labels; Σ w_j is the mass).
    rho0 : (n,) ρ_0(y_j), the density at the labels at the start of the run.
    companion : None or (labels (m, d), weights (m,), rho0 (m,)) of the coarser companion rule.
    panels : None, or (S^1) the edges of the composite Gauss–Legendre panels of the labels.
    cluster_tol : float, geodesic distance that links two nodes into one cluster (radians).
    min_mass : float, the smallest mass a cluster must carry to count.
    """

    name = "lagrangian"
    is_density = True
    keeps_identity = True

    def resolution_label(self, data=None):
        return f"{self.n} moving nodes"

    def __init__(self, labels, weights, rho0, companion=None, panels=None, cluster_tol=1e-3, min_mass=1e-2):
        self.labels = np.asarray(labels, dtype=float)
        self.weights = np.asarray(weights, dtype=float)
        self.rho0 = np.asarray(rho0, dtype=float)
        self.dim = int(self.labels.shape[1])
        self.n = int(self.labels.shape[0])
        if companion is not None:
            companion = tuple(np.asarray(a, dtype=float) for a in companion)
        self.companion = companion
        self.panels = None if panels is None else np.asarray(panels, dtype=float)
        self.cluster_tol = float(cluster_tol)
        self.min_mass = float(min_mass)
        if self.dim == 2:
            self.label_angles = monotone_lift(_angles(self.labels))

    # -- the fine nodes of one slice -----------------------------------------------------------------
    def nodes(self, data):
        """(positions (n, d), log-Jacobians (n,)) of the fine labels in one time slice."""
        a = np.asarray(data, dtype=float)
        return a[:self.n, :self.dim], a[:self.n, self.dim]

    def radii(self, data):
        """The radii r_j (n,) of the fine labels (columns d + 1 of a run whose labels carry them, else 1)."""
        a = np.asarray(data, dtype=float)
        return a[:self.n, self.dim + 1] if a.shape[1] > self.dim + 1 else np.ones(self.n)

    def node_density(self, data):
        """ρ_t(x_j) = ρ_0(y_j) e^{−ℓ_j} at the moving nodes (exact along the characteristics)."""
        return self.rho0 * np.exp(-self.nodes(data)[1])

    def _slice_shape(self, data_all):
        return (self.n + (0 if self.companion is None else len(self.companion[1])), np.shape(data_all)[-1])

    # -- Representation contract ------------------------------------------------------------------------
    def evaluate(self, data, x):
        x = np.asarray(x, dtype=float)
        if self.dim == 2:
            return self._evaluate_circle(data, _angles(x))
        return self._evaluate_sphere(data, x)

    def _evaluate_circle(self, data, phi):
        """ρ_t at angles φ by inverting the interpolated monotone map (module docstring)."""
        pos, ell = self.nodes(data)
        n = self.n
        Theta = monotone_lift(_angles(pos))
        turn = np.array([-2 * np.pi, 0.0, 2 * np.pi])
        # nodes j − 1 .. j + 2 of every interval j, periodically extended (index k ↦ k + 1)
        ye = np.concatenate([self.label_angles[-1:] + turn[0], self.label_angles, self.label_angles[:2] + turn[2]])
        Te = np.concatenate([Theta[-1:] + turn[0], Theta, Theta[:2] + turn[2]])
        le = np.concatenate([ell[-1:], ell, ell[:2]])
        re = np.concatenate([self.rho0[-1:], self.rho0, self.rho0[:2]])
        phi = np.asarray(phi, dtype=float)
        p = Theta[0] + np.mod(phi.ravel() - Theta[0], 2 * np.pi)
        j = np.clip(np.searchsorted(Theta, p, side="right") - 1, 0, n - 1) + 1
        h, dT = ye[j + 1] - ye[j], Te[j + 1] - Te[j]
        J0, J1 = np.exp(le[j]), np.exp(le[j + 1])
        r = np.clip(p - Te[j], 0.0, dT)
        xi, slope = rational_quadratic_inverse(r, dT, h, J0, J1)
        rho = ((1 - xi) * re[j] + xi * re[j + 1]) / np.where(slope > 0, slope, np.nan)
        # where the map is resolved (J varies by less than e^{1/2} over the interval and matches the
        # secant), the cubic Hermite map and cubic interpolation of ℓ and ρ_0 are used instead: O(h⁴)
        with np.errstate(divide="ignore", invalid="ignore"):
            sec = np.log(dT / h)
        smooth = ((np.abs(le[j + 1] - le[j]) < 0.5) & (np.abs(sec - le[j]) < 0.5) & (np.abs(sec - le[j + 1]) < 0.5))
        if smooth.any():
            k = j[smooth]
            u = _hermite_inverse(r[smooth], dT[smooth], h[smooth], J0[smooth], J1[smooth], xi[smooth])
            ys = ye[k] + u * h[smooth]
            nodes = ye[k[:, None] + np.arange(-1, 3)]
            lam = _lagrange_weights(nodes, ys)
            ell_s = np.einsum("qk,qk->q", lam, le[k[:, None] + np.arange(-1, 3)])
            rho0_s = np.maximum(np.einsum("qk,qk->q", lam, re[k[:, None] + np.arange(-1, 3)]), 0.0)
            rho[smooth] = rho0_s * np.exp(-ell_s)
        # at a node (to round-off) its exact value: near the steep end of a gap between clusters the
        # interpolant's slope changes faster than the last bits of an angle resolve
        at = np.abs(r) <= _NODE_TOL
        rho[at] = re[j[at]] * np.exp(-le[j[at]])
        at = np.abs(dT - r) <= _NODE_TOL
        rho[at] = re[j[at] + 1] * np.exp(-le[j[at] + 1])
        return rho.reshape(phi.shape)

    def _evaluate_sphere(self, data, x):
        """ρ_t at points x (..., 3): while the labels resolve the density (at every label, log ρ of its 30
        nearest labels spans less than `_SMOOTH`) exact at the nodes and moving least squares of log ρ
        between them, else the band-limited kernel density of the labels everywhere (`band_limited_density`,
        degree `kernel_degree`: mass exact; the exact values at the labels are `node_density`). Never
        above e^{1/4} times the largest ρ at the nodes."""

        pos, _ = self.nodes(data)
        rho = self.node_density(data)
        logr = np.log(np.maximum(rho, np.finfo(float).tiny))
        q = x.reshape(-1, 3)
        tree = cKDTree(pos)
        if self.resolves(data, tree):
            out = np.full(len(q), np.nan)
            todo = np.arange(len(q))
            # 30 neighbours; more where they do not determine a cubic (all on one ring of the Gauss grid
            # near a pole); the linear fit as the last resort
            for k in (30, 90, 270):
                k = min(k, self.n)
                value, ok = _mls_log_fit(pos, logr, tree, q[todo], k)
                out[todo[ok]] = value[ok]
                todo = todo[~ok]
                if not todo.size or k == self.n:
                    break
            if todo.size:
                out[todo] = _mls_log_fit(pos, logr, tree, q[todo], min(30, self.n), degree=1)[0]
            out = np.exp(out)
            dist, idx = tree.query(q)
            exact = dist < 1e-13
            out[exact] = rho[idx[exact]]
        else:               # continuous, also at the labels: a quadrature through a label integrates it
            out = np.minimum(band_limited_density(pos, self.weights, q, kernel_degree(self.n)),
                             np.exp(_FIT_MARGIN) * rho.max())
        return out.reshape(x.shape[:-1])

    def resolves(self, data, tree=None):
        """S^2: whether the labels resolve the density of this slice: at every label, log ρ over its 30
        nearest labels spans less than `_SMOOTH` (then the density between them is the moving least-squares
        fit, else the band-limited kernel density; module docstring)."""
        pos, _ = self.nodes(data)
        logr = np.log(np.maximum(self.node_density(data), np.finfo(float).tiny))
        tree = cKDTree(pos) if tree is None else tree
        near = logr[tree.query(pos, k=min(30, self.n))[1].reshape(self.n, -1)]
        return bool(np.ptp(near, axis=1).max() < _SMOOTH)

    def mass(self, data):
        """Σ_j w_j: exact and constant in time (the masses ride on the labels)."""
        return float(self.weights.sum())

    def energy(self, beta, data):
        """E_β (3.5) of Σ_j w_j δ_{x_j}, (1/2β) Σ_ij w_i w_j e^{β⟨x_i, x_j⟩}, via the kernel-sum engine."""
        return discrete_energy(beta, self.nodes(data)[0], self.weights)

    def measure(self, data, n=None):
        """(x_j, w_j/Σw): the moving nodes with their (exact) masses, as a probability measure."""
        return self.nodes(data)[0], self.weights / self.weights.sum()

    # -- diagnostics ----------------------------------------------------------------------------------
    def clusters(self, data, cluster_tol=None, min_mass=None):
        """(masses (k,), centres (k, d)) of the clusters, heaviest first.

        A cluster is a set of at least two nodes linked by chains of geodesic steps <= ``cluster_tol``
        (on S^1: consecutive nodes with angular gaps <= ``cluster_tol``) whose total weight is >=
        ``min_mass``; its centre is the normalised weighted mean of its nodes. The defaults are the
        representation's. ``cluster_tol`` must be below the spacing of the initial labels (else a
        uniform state is one "cluster").
        """
        tol = self.cluster_tol if cluster_tol is None else float(cluster_tol)
        min_mass = self.min_mass if min_mass is None else float(min_mass)
        pos, _ = self.nodes(data)
        labels = self._components(pos, tol)
        m = np.bincount(labels, weights=self.weights)
        size = np.bincount(labels)
        centre = np.stack([np.bincount(labels, weights=self.weights * pos[:, i]) for i in range(self.dim)], -1)
        keep = np.nonzero((m >= min_mass) & (size >= 2))[0]
        keep = keep[np.argsort(-m[keep], kind="stable")]
        c = centre[keep]
        c /= np.maximum(np.linalg.norm(c, axis=1, keepdims=True), 1e-300)
        return m[keep], c

    def _components(self, pos, tol):
        if self.dim == 2:
            Theta = monotone_lift(_angles(pos))
            gaps = np.diff(np.append(Theta, Theta[0] + 2 * np.pi))     # gap after node j
            cut = gaps > tol
            if not cut.any():
                return np.zeros(self.n, dtype=int)
            lab = np.concatenate([[0], np.cumsum(cut[:-1])])     # number of cuts before node j
            if not cut[-1]:
                lab[lab == lab[-1]] = 0                            # the last run wraps around to the first
            return np.unique(lab, return_inverse=True)[1]

        return linked_components(pos, min(tol, np.pi))

    def w1_to_dirac(self, data):
        """min_z W1(μ_t, δ_z) (`meanfield.w1_to_dirac`) of the node measure."""

        return float(w1_to_dirac(self.measure(data)))

    def error_estimate(self, data):
        """W1 (geodesic cost) between the fine node measure and the companion's, or NaN without one.

        The companion solves the same equation on a coarser quadrature, so this is an estimate of
        the companion's discretisation error, which bounds the fine one's while the method converges.
        Exact on S^1 (`meanfield.observables.wasserstein`); on S^2 the exact linear program while n·m <= 2.5e7,
        else the one between the measures merged on a fine grid (`method="merged"`) plus the merging
        cost (tiny once the labels sit in clusters).
        """
        if self.companion is None:
            return float("nan")

        a = np.asarray(data, dtype=float)
        wc = self.companion[1]
        b = (a[self.n:, :self.dim], wc / wc.sum())
        if self.dim == 2 or self.n * len(wc) <= EXACT_MAX_SIZE:
            return float(wasserstein(self.measure(data), b))
        val, bound = wasserstein(self.measure(data), b, method="merged", return_bound=True)
        return float(val + bound)

    # -- I/O ------------------------------------------------------------------------------------------
    def to_dataset(self, data_all):
        a = np.asarray(data_all, dtype=float)
        n, d = self.n, self.dim
        data_vars = {"positions": (("time", "node", "component"), a[:, :n, :d]),
                     "log_jacobian": (("time", "node"), a[:, :n, d]),
                     "labels": (("node", "component"), self.labels),
                     "weights": (("node",), self.weights),
                     "rho0": (("node",), self.rho0)}
        if self.companion is not None:
            yc, wc, rc = self.companion
            data_vars.update({"companion_positions": (("time", "coarse_node", "component"), a[:, n:, :d]),
                              "companion_log_jacobian": (("time", "coarse_node"), a[:, n:, d]),
                              "companion_labels": (("coarse_node", "component"), yc),
                              "companion_weights": (("coarse_node",), wc),
                              "companion_rho0": (("coarse_node",), rc)})
        if a.shape[-1] > d + 1:             # labels that carry their radius r and its gradient ∇_S r
            data_vars.update({"radius": (("time", "node"), a[:, :n, d + 1]),
                              "radius_gradient": (("time", "node", "component"), a[:, :n, d + 2:])})
            if self.companion is not None:
                data_vars.update({"companion_radius": (("time", "coarse_node"), a[:, n:, d + 1]),
                                  "companion_radius_gradient": (("time", "coarse_node", "component"), a[:, n:, d + 2:])})
        if self.panels is not None:
            data_vars["panel_edges"] = (("edge",), self.panels)
        attrs = {"representation": self.name, "dim": d, "cluster_tol": self.cluster_tol, "min_mass": self.min_mass,
                 "normalisation": "rho_t(x_j) = rho0_j * exp(-log_jacobian_j) relative to sigma; "
                                  "mu_t = sum_j weights_j delta_{positions_j}"}
        return data_vars, {}, attrs

    @classmethod
    def from_dataset(cls, ds):
        radial = "radius" in ds
        comp, parts = None, [np.asarray(ds["positions"].values), np.asarray(ds["log_jacobian"].values)[..., None]]
        if radial:
            parts += [ds["radius"].values[..., None], ds["radius_gradient"].values]
        if "companion_labels" in ds:
            comp = (ds["companion_labels"].values, ds["companion_weights"].values, ds["companion_rho0"].values)
            cparts = [ds["companion_positions"].values, ds["companion_log_jacobian"].values[..., None]]
            if radial:
                cparts += [ds["companion_radius"].values[..., None], ds["companion_radius_gradient"].values]
            cdata = np.concatenate(cparts, -1)
        data = np.concatenate(parts, axis=-1)
        if comp is not None:
            data = np.concatenate([data, cdata], axis=1)
        panels = ds["panel_edges"].values if "panel_edges" in ds else None
        rep = cls(ds["labels"].values, ds["weights"].values, ds["rho0"].values, companion=comp, panels=panels,
                  cluster_tol=float(ds.attrs.get("cluster_tol", 1e-3)), min_mass=float(ds.attrs.get("min_mass", 1e-2)))
        return rep, data

    def to_grid(self, data, n=None):
        """ρ on a grid as a DataArray: n midpoints in θ on S^1 (default 1024); on S^2 n latitudes
        (default 64, equal-angle cell centres) × 2n longitudes."""
        import xarray as xr  # deferred: xarray is heavy

        if self.dim == 2:
            n = 1024 if n is None else int(n)
            theta = 2 * np.pi * (np.arange(n) + 0.5) / n
            da = xr.DataArray(self._evaluate_circle(data, theta), coords={"theta": theta}, dims=("theta",), name="rho")
            da["theta"].attrs.update(THETA_ATTRS)
        else:
            n = 64 if n is None else int(n)
            lat = 90 - 180 * (np.arange(n) + 0.5) / n
            lon = 360 * np.arange(2 * n) / (2 * n)
            th, ph = np.meshgrid(np.radians(90 - lat), np.radians(lon), indexing="ij")
            x = np.stack([np.sin(th) * np.cos(ph), np.sin(th) * np.sin(ph), np.cos(th)], -1)
            da = xr.DataArray(self._evaluate_sphere(data, x), coords={"lat": lat, "lon": lon}, dims=("lat", "lon"),
                              name="rho")
            da["lat"].attrs.update(LAT_ATTRS)
            da["lon"].attrs.update(LON_ATTRS)
        da.attrs.update(long_name="density relative to the uniform probability measure", units="1")
        return da

    @property
    def default_cells(self):
        """1024 cells on S^1; on S^2 about four labels per cell (n = √(labels/8) bands, at least 8)."""
        return {2: 1024, 3: max(8, int(round(np.sqrt(self.n / 8))))}

    def cell_means(self, data, grid):
        """The mean density μ_t(cell)/σ(cell) over each cell of ``grid`` (`meanfield.spaces.gridded.CellGrid`);
        the masses of the labels are exact, so the grid's mass Σ ρ̄ σ(cell) is Σ_j w_j to round-off.

        * S^1: `cell_averages` (each label's mass spread evenly over the image of its cell).
        * S^2: the push-forward of the labels' quadrature cells. Label j stands for a cell of σ-measure
          q_j = w_j/ρ_0(y_j) about y_j; the flow maps it to a region of σ-measure q_j J_j = w_j/ρ_t(x_j)
          about x_j (J_j = e^{ℓ_j}, exact along the characteristics). Each label's mass is spread evenly
          over the spherical cap of that measure about x_j (equal-area points of the cap, as many as
          the cap needs to be resolved by the cells) and binned: inside a cluster the caps are far
          smaller than a cell (binning), where the density is smooth they tile the sphere at the
          labels' spacing."""
        if self.dim == 2:
            return self.cell_averages(data, grid.shape[0])[1]

        pos, ell = self.nodes(data)
        w = self.weights
        f1, f2 = tangent_frame(pos)
        M = self._cell_maps(pos, ell, (f1, f2))
        extent = np.linalg.norm(M, ord=2, axis=(1, 2))                  # the image cell's largest radius
        cell = np.pi / grid.shape[0]
        # points per cell: a power of 4 with spacing below a third of a grid cell, from 16 (a cell
        # across an edge of the grid is shared between the grid's cells) to 1024
        k = np.clip(np.ceil(np.log(np.maximum((3 * extent / cell) ** 2, 1.0)) / np.log(4)), 2, 5).astype(int)
        out = np.zeros(grid.shape)
        for level in np.unique(k):
            sel = np.nonzero(k == level)[0]
            m = 4 ** int(level)
            v = np.einsum("kab,mb->kma", M[sel], _disk_points(m))                     # tangent offsets
            v = v[..., :1] * f1[sel, None, :] + v[..., 1:] * f2[sel, None, :]
            norm = np.linalg.norm(v, axis=-1, keepdims=True)
            with np.errstate(invalid="ignore", divide="ignore"):
                pts = np.cos(norm) * pos[sel, None, :] + np.where(norm > 0, np.sin(norm) / norm, 1.0) * v
            out += bin_masses(grid, pts.reshape(-1, 3), np.repeat(w[sel] / m, m))
        return out / grid.weights

    def _cell_maps(self, pos, ell, frame, neighbours=8):
        """S^2: for each label, the 2×2 map M_j from the unit disk onto the flow's image of its
        quadrature cell, in the tangent plane at x_j (``frame``: `tangent_frame` of ``pos``): the
        label's cell is the ellipse of σ-measure q_j shaped by the offsets of its ``neighbours`` nearest
        labels (a Gauss–Legendre cell near a pole is long and thin); the flow's derivative there is the
        least-squares map of the neighbours' offsets, rescaled so that the image has the exact measure
        q_j J_j = w_j/ρ_t(x_j)."""
        if getattr(self, "_label_cells", None) is None:
            y = self.labels
            idx = cKDTree(y).query(y, k=min(neighbours + 1, self.n))[1][:, 1:]
            g1, g2 = tangent_frame(y)
            dy = y[idx] - y[:, None, :]
            Y = np.stack([np.einsum("knd,kd->kn", dy, g1), np.einsum("knd,kd->kn", dy, g2)], -1)     # (n, k, 2)
            C = np.einsum("kna,knb->kab", Y, Y)
            # the ellipse {L u : |u| <= 1} with L L^T ∝ C and area π det L = 4π q_j
            L = np.linalg.cholesky(C + 1e-300 * np.eye(2))
            q = np.where(self.rho0 > 0, self.weights / np.where(self.rho0 > 0, self.rho0, 1.0), 0.0)
            L *= np.sqrt(4 * q / np.abs(np.linalg.det(L)))[:, None, None]
            self._label_cells = (idx, Y, np.linalg.pinv(Y), L)
        idx, Y, Yinv, L = self._label_cells
        f1, f2 = frame
        dx = pos[idx] - pos[:, None, :]
        X = np.stack([np.einsum("knd,kd->kn", dx, f1), np.einsum("knd,kd->kn", dx, f2)], -1)
        A = np.swapaxes(Yinv @ X, 1, 2)                                   # X ≈ Y A^T
        M = A @ L
        det = np.abs(np.linalg.det(M))
        target = np.abs(np.linalg.det(L)) * np.exp(ell)                   # J_j times the label cell
        with np.errstate(invalid="ignore", divide="ignore"):
            scale = np.where(det > 0, np.sqrt(target / det), 0.0)
        M = M * scale[:, None, None]
        # a degenerate fit (the neighbours on a line) becomes a disk of the exact measure
        flat = ~(det > 0) | ~np.isfinite(scale)
        M[flat] = np.sqrt(target[flat])[:, None, None] * np.eye(2)
        return M

    def cell_averages(self, data, n=1024):
        """(θ (n,), ρ̄ (n,)) on S^1: the mean density over the n equal cells [2πk/n, 2π(k + 1)/n] centred at
        θ_k = 2π(k + ½)/n, n·μ_t(cell). Label j stands for a cell of σ-measure w_j/ρ_0(y_j); the flow
        maps it onto an arc of σ-measure w_j/ρ_t(x_j) (the Jacobian e^{ℓ_j} is exact along the
        characteristics), of length L_j = 2π w_j/ρ_t(x_j) centred at x_j, over which its mass w_j is
        spread evenly. Inside a cluster the arcs are far shorter than a cell, so each label's mass
        lands in the one cell holding it (clusters narrower than a cell keep their mass, and the
        same state gives the same cells); where the density is smooth the arcs tile the circle."""
        if self.dim != 2:
            raise InvalidInput("`cell_averages` is defined on S^1 (dim 2) only.")
        pos, _ = self.nodes(data)
        w = self.weights
        with np.errstate(divide="ignore", invalid="ignore"):
            length = np.nan_to_num(2 * np.pi * w / self.node_density(data), nan=0.0, posinf=0.0)
        length = np.clip(length, 0.0, np.pi)
        start = np.mod(_angles(pos) - 0.5 * length, 2 * np.pi)
        end = start + length
        edges = 2 * np.pi * np.arange(2 * n + 1) / n                    # two turns: an arc may pass 2π
        order = np.argsort(end)
        F = np.concatenate([[0.0], np.cumsum(w[order])])[np.searchsorted(end[order], edges, side="right")]
        # the arcs that hold an edge inside: their part left of the edge
        lo = np.searchsorted(edges, start, side="right")
        hi = np.searchsorted(edges, end, side="left")
        count = np.maximum(hi - lo, 0)
        j = np.repeat(np.arange(start.size), count)
        k = lo[j] + np.arange(j.size) - np.repeat(np.cumsum(count) - count, count)
        np.add.at(F, k, w[j] * (edges[k] - start[j]) / length[j])
        m = np.diff(F)
        return 2 * np.pi * (np.arange(n) + 0.5) / n, n * (m[:n] + m[n:])

    def space_time(self, data_all, n=1024):
        """(θ (n,), ρ̄ (T, n)): `cell_averages` at every saved time (S^1 only)."""
        rows = [self.cell_averages(a, n) for a in np.asarray(data_all)]
        return rows[0][0], np.array([r[1] for r in rows])
