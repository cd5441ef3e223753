"""A certified bracket lower <= W1 <= upper on S^2 for large measures (docs/mathematics.md §8; docs/wasserstein.md).

Against a density ν = ρσ (semi-discrete transport, Kantorovich duality):

* lower: W1(μ, ν) = sup_φ Σ_i φ_i w_i + ∫ min_i (d(x_i, y) − φ_i) dν(y); at φ = 0 this is
  L = ∫ d(y, nearest atom) dν = Σ_i ∫_{Vor_i} d(x_i, y) ρ(y) dσ(y), summed over the spherical
  Voronoi cells of the atoms (scipy's `SphericalVoronoi`, O(n log n));
* upper: moving each y to its nearest atom is a coupling of ν with μ' = Σ_i ν(Vor_i) δ_{x_i}, of
  cost L; then W1(μ, ν) <= L + W1(μ', μ), and W1(μ', μ) is bounded by a tree coupling of the
  imbalance a_i = ν(Vor_i) − w_i on the cube-sphere quadtree (`tree_bound`): each cell matches the
  excess of its children within its diameter.

The cell integrals use Gauss–Legendre rules in geodesic polar coordinates about each atom (a fan of
triangles per cell); the bracket is widened by the difference of two rules (an a-posteriori
estimate of their error). Atoms closer than 1e-9 rad are merged first (their moves widen it too).

Between two clouds: the tree coupling with exact local transport in each leaf of the quadtree
(upper), and the exact transport between the two measures gathered on the occupied cells of a
coarse level, less the cost of gathering them (lower, by the triangle inequality).
"""
import threading
from dataclasses import dataclass, field

import numpy as np
from scipy.spatial import SphericalVoronoi

from ..spaces.geodesic import geodesic_distance, merge_on_grid
from ..threads import check_threads, share_out
from ..validation import check_callable, check_measure
from ..errors import InvalidInput

MERGE = 1e-9                # atoms closer than this (radians) are merged before the Voronoi diagram
LEAF_ATOMS = 8              # the quadtree's leaves hold about this many atoms
COARSE_CELLS = 2500         # the lower bound between clouds: an exact LP between at most this many cells
RULES = ((3, 2), (4, 2))    # the density's means over a triangle: Gauss nodes (angle, radius) of a rule and of the finer one used


@dataclass(frozen=True)
class W1Bracket:
    """lower <= W1 <= upper, certified (up to the estimated quadrature error, included); ``parts``
    says what each side is made of.

    Parameters
    ----------
    lower : float
        The lower bound, in radians.
    upper : float
        The upper bound, in radians.
    parts : dict
        What each side is made of (costs, errors, counts).

    Examples
    --------
    >>> from meanfield import W1Bracket
    >>> b = W1Bracket(0.9, 1.0)
    >>> round(b.value, 6), round(b.width, 6), float(b)
    (0.95, 0.1, 0.95)
    """

    lower: float
    upper: float
    parts: dict = field(default_factory=dict, compare=False)

    @property
    def value(self):
        """The midpoint of the bracket."""
        return 0.5 * (self.lower + self.upper)

    @property
    def width(self):
        """(upper − lower) / upper: the relative width."""
        return (self.upper - self.lower) / self.upper if self.upper > 0 else 0.0

    def __float__(self):
        return self.value


# -- the cube-sphere quadtree --------------------------------------------------------------------------------
def cube_cells(x, level):
    """The index of the cube-sphere cell of level ``level`` (6·4^level cells) holding each point x (n, 3)."""
    ax = np.argmax(np.abs(x), axis=1)
    rows = np.arange(len(x))
    major = x[rows, ax]
    face = 2 * ax + (major < 0)
    other = np.stack([x[rows, (ax + 1) % 3], x[rows, (ax + 2) % 3]], axis=1) / np.abs(major)[:, None]
    k = 1 << level
    ij = np.clip(((other + 1) * 0.5 * k).astype(np.int64), 0, k - 1)
    return (face * k + ij[:, 0]) * k + ij[:, 1]


def cell_diameter(level):
    """A bound on the geodesic diameter of every cube-sphere cell of ``level`` (the gnomonic cell at a
    face's centre is the largest: 2·atan(√2/2^level)); π for the whole sphere (level −1)."""
    return np.pi if level < 0 else 2 * np.arctan(np.sqrt(2.0) / (1 << level))


def leaf_level(n):
    return max(0, int(np.ceil(np.log(max(n, 1) / (6 * LEAF_ATOMS)) / np.log(4))))


def tree_bound(x, imbalance, level=None, leaf_cost=None):
    """An upper bound of W1(α, β) for measures on the atoms x with α − β = ``imbalance`` (total ~0): the
    greedy coupling of the cube-sphere quadtree. At each cell the positive and negative excess of its
    children meet: min(P, N) is moved within the cell's diameter (at the leaves, by ``leaf_cost(cells)``
    if given: the exact cost of matching there), the rest goes up. The top matches what is left within π."""
    level = leaf_level(len(x)) if level is None else level
    ids = cube_cells(x, level)
    cells, inverse = np.unique(ids, return_inverse=True)
    pos = np.bincount(inverse, np.maximum(imbalance, 0.0), len(cells))
    neg = np.bincount(inverse, np.maximum(-imbalance, 0.0), len(cells))
    cost = leaf_cost(inverse, pos, neg) if leaf_cost is not None else cell_diameter(level) * np.minimum(pos, neg).sum()
    net = pos - neg
    for lev in range(level - 1, -2, -1):
        parent = cells // 4 if lev >= 0 else np.zeros_like(cells)
        cells, inverse = np.unique(parent, return_inverse=True)
        pos = np.bincount(inverse, np.maximum(net, 0.0), len(cells))
        neg = np.bincount(inverse, np.maximum(-net, 0.0), len(cells))
        cost += cell_diameter(lev) * np.minimum(pos, neg).sum()
        net = pos - neg
    return float(cost)


# -- against a density -----------------------------------------------------------------------------------------
def _fans(x):
    """The Voronoi fan triangles (centre index, vertex a, vertex b) of the atoms x (n, 3)."""

    sv = SphericalVoronoi(x, radius=1.0, center=np.zeros(3))
    sv.sort_vertices_of_regions()
    sizes = np.fromiter((len(r) for r in sv.regions), dtype=np.int64, count=len(sv.regions))
    flat = np.concatenate([np.asarray(r, dtype=np.int64) for r in sv.regions])
    following = np.arange(flat.size) + 1
    following[np.cumsum(sizes) - 1] = np.cumsum(sizes) - sizes          # wrap each polygon around
    centre = np.repeat(np.arange(len(x)), sizes)
    return centre, sv.vertices[flat], sv.vertices[flat[following]]


def _triangle_frames(c, a, b):
    """For the spherical triangles (c, a, b): an orthonormal tangent frame (e1 towards a, e2 turning
    towards b) at c, the angle ``span`` of the triangle at c, and the distance ``height`` of c to the
    great circle through a and b with its unit normal ``normal`` (pointing away from c)."""
    e1 = a - np.sum(a * c, axis=1, keepdims=True) * c
    e1 /= np.linalg.norm(e1, axis=1, keepdims=True)
    e2 = np.cross(c, e1)
    pb = b - np.sum(b * c, axis=1, keepdims=True) * c
    span = np.arctan2(np.sum(pb * e2, axis=1), np.sum(pb * e1, axis=1))      # |span| < π for a convex cell
    e2 *= np.where(span < 0, -1.0, 1.0)[:, None]
    normal = np.cross(a, b)
    normal /= np.linalg.norm(normal, axis=1, keepdims=True)
    normal *= -np.sign(np.sum(normal * c, axis=1))[:, None]
    return e1, e2, np.abs(span), normal


def _radii(frames, c, n_psi):
    """Gauss–Legendre angles ψ in [0, span], their weights, the directions u(ψ) and the distance R(ψ)
    from c to the triangle's far side along them (tan R = −⟨c, n⟩/⟨u, n⟩)."""
    e1, e2, span, normal = frames
    t, w = np.polynomial.legendre.leggauss(n_psi)
    psi = 0.5 * (t[None, :] + 1) * span[:, None]
    u = np.cos(psi)[..., None] * e1[:, None, :] + np.sin(psi)[..., None] * e2[:, None, :]
    R = np.arctan2(-np.sum(c * normal, axis=1)[:, None], np.einsum("mpk,mk->mp", u, normal))
    return 0.5 * span[:, None] * w[None, :], u, R


def _geometric_moments(frames, c, n_psi=16):
    """∫_T dσ and ∫_T d(c, y) dσ over the triangles (σ-normalised): ∫(1 − cos R)dψ and ∫(sin R − R cos R)dψ."""
    w, _, R = _radii(frames, c, n_psi)
    return (w * (1 - np.cos(R))).sum(axis=1) / (4 * np.pi), (w * (np.sin(R) - R * np.cos(R))).sum(axis=1) / (4 * np.pi)


def _density_ratios(frames, c, density, rule):
    """The mean of ρ over each triangle against dσ and against d(c, y)dσ, by a product Gauss rule
    (``rule`` = nodes in ψ and in r ∈ [0, R(ψ)]): the ratios of the ρ-weighted to the plain sums."""
    wp, u, R = _radii(frames, c, rule[0])
    tr, wr = np.polynomial.legendre.leggauss(rule[1])
    r = 0.5 * (tr[None, None, :] + 1) * R[..., None]
    y = np.cos(r)[..., None] * c[:, None, None, :] + np.sin(r)[..., None] * u[:, :, None, :]
    rho = np.asarray(density(y.reshape(-1, 3)), dtype=float).reshape(r.shape)
    w = wp[..., None] * (0.5 * R[..., None] * wr[None, None, :]) * np.sin(r)
    return (w * rho).sum(axis=(1, 2)) / w.sum(axis=(1, 2)), (w * r * rho).sum(axis=(1, 2)) / (w * r).sum(axis=(1, 2))


def _triangle_integrals(c, a, b, density, rule):
    """(ν(T), ∫_T d(c, y) dν) over the spherical triangles T = (c, a, b): the geometric moments to
    quadrature precision (16 angles, no density) times the density's means over T by ``rule``."""
    frames = _triangle_frames(c, a, b)
    g0, g1 = _geometric_moments(frames, c)
    m0, m1 = _density_ratios(frames, c, density, rule)
    return g0 * m0, g1 * m1


def _cell_integrals(x, fans, density, threads=1, chunk=1 << 16):
    """ν(Vor_i) and ∫_{Vor_i} d(x_i, y) dν for each atom (``fans`` its Voronoi fan triangles), with the
    fine rule, and the total absolute difference of the two rules (their error estimate) for each;
    the chunks of triangles are shared among ``threads`` (`meanfield.threads.share_out`)."""
    centre, a, b = fans
    n = len(x)
    mass, cost, err = np.zeros(n), np.zeros(n), np.zeros(2)
    lock = threading.Lock()

    def work(s):
        sl = slice(s, s + chunk)
        (m0, d0), (m1, d1) = (_triangle_integrals(x[centre[sl]], a[sl], b[sl], density, rule) for rule in RULES)
        with lock:
            np.add.at(mass, centre[sl], m1)
            np.add.at(cost, centre[sl], d1)
            err[:] += (np.abs(m1 - m0).sum(), np.abs(d1 - d0).sum())

    share_out(work, range(0, len(centre), chunk), threads)
    return mass, cost, float(err[0]), float(err[1])


def _voronoi_ready(x, w):
    """The atoms with those closer than `MERGE` merged (`meanfield.spaces.geodesic.merge_on_grid`, the
    spacing grown tenfold until the Voronoi diagram accepts them), and the cost of the moves."""
    spacing = MERGE
    while True:
        xm, wm, moved = merge_on_grid(x, w, spacing) if spacing else (x, w, 0.0)
        try:
            return _fans(xm), xm, wm, moved
        except ValueError:             # duplicate generators within qhull's precision
            if spacing > 1e-4:
                raise
            spacing *= 10


def bracket_to_density(measure, density, threads=None):
    """`W1Bracket` of W1(μ, ρσ) on S^2: μ = (points (n, 3), weights), ρ a σ-relative density of mass 1
    (``density`` is called from ``threads`` threads at once, on separate chunks of points)."""
    check_callable(density, "density")
    threads = check_threads(threads)
    x, w = check_measure(measure, "measure", dim=3)
    fans, x, w, moved = _voronoi_ready(x, w)
    mass, cost, err_mass, err_cost = _cell_integrals(x, fans, density, threads)
    total = float(mass.sum())
    if not abs(total - 1.0) < 1e-6 + 10 * err_mass:
        raise InvalidInput(f"`density` must have mass 1 against σ within 1e-6, got {total:.9g} (by the cells' rule, "
                         f"error about {err_mass:.1g}).")
    lower = float(cost.sum())
    imbalance = mass - w
    imbalance -= imbalance.sum() * w                  # the rule's mass error, spread; it is counted below
    tree = tree_bound(x, imbalance)
    slack = err_cost + np.pi * (err_mass + abs(total - 1.0)) + moved
    parts = {"nearest_atom_cost": lower, "imbalance_transport": tree, "quadrature_error": err_cost,
             "mass_error": err_mass + abs(total - 1.0), "merge_moves": moved,
             "imbalance_l1": float(np.abs(imbalance).sum()), "atoms": len(x)}
    return W1Bracket(max(lower - slack, 0.0), lower + tree + slack, parts)


# -- between two clouds ------------------------------------------------------------------------------------------
def _gathered(points, weights, cells, reps):
    """The measure gathered on the representatives of its cells, and the cost of gathering it."""
    idx = np.searchsorted(reps[0], cells)
    masses = np.bincount(idx, weights, len(reps[0]))
    moves = float(np.sum(weights * np.arccos(np.clip(np.sum(points * reps[1][idx], axis=1), -1.0, 1.0))))
    return masses, moves


def bracket_between(a, b):
    """`W1Bracket` of W1(a, b) for two discrete measures (points, weights) on S^2, total weights equal."""
    import ot        # POT, deferred like everywhere in the package

    xa, wa = check_measure(a, "a", dim=3)
    xb, wb = check_measure(b, "b", dim=3)
    wa, wb = wa / wa.sum(), wb / wb.sum()
    x = np.concatenate([xa, xb])
    level = leaf_level(len(x))
    while level > 0 and np.unique(cube_cells(x, level)).size > COARSE_CELLS:
        level -= 1
    cells = cube_cells(x, level)
    ids, inverse = np.unique(cells, return_inverse=True)
    centroid = np.zeros((len(ids), 3))
    np.add.at(centroid, inverse, x)
    centroid /= np.linalg.norm(centroid, axis=1, keepdims=True)
    ma, move_a = _gathered(xa, wa, cells[:len(xa)], (ids, centroid))
    mb, move_b = _gathered(xb, wb, cells[len(xa):], (ids, centroid))
    coarse = float(ot.emd2(ma, mb, geodesic_distance(centroid[:, None], centroid[None]), numItermax=10 ** 7))
    leaf = _leaf_transport(x, np.concatenate([wa, -wb]))
    upper = min(coarse + move_a + move_b, tree_bound(x, np.concatenate([wa, -wb]), leaf_cost=leaf))
    parts = {"coarse_transport": coarse, "gathering": move_a + move_b, "coarse_cells": len(ids)}
    return W1Bracket(max(coarse - move_a - move_b, 0.0), upper, parts)


def _leaf_transport(x, signed):
    """The leaf cost of `tree_bound` between clouds: in each leaf, the exact transport between the
    positive part and the negative part scaled down to the smaller mass."""
    import ot        # POT, deferred like everywhere in the package

    def cost(inverse, pos, neg):
        total = 0.0
        order = np.argsort(inverse, kind="stable")
        bounds = np.searchsorted(inverse[order], np.arange(len(pos) + 1))
        for k in np.flatnonzero(np.minimum(pos, neg) > 0):
            members = order[bounds[k]:bounds[k + 1]]
            s = signed[members]
            p, q = np.maximum(s, 0.0), np.maximum(-s, 0.0)
            matched = min(p.sum(), q.sum())
            p, q = p * (matched / p.sum()), q * (matched / q.sum())
            keep_p, keep_q = p > 0, q > 0
            xm = x[members]
            total += float(ot.emd2(p[keep_p], q[keep_q], geodesic_distance(xm[keep_p][:, None], xm[keep_q][None])))
        return total

    return cost


def w1_bracket(measure, other, threads=None):
    """lower <= W1(measure, other) <= upper on S^2 (`W1Bracket`): ``other`` a σ-relative density
    callable (`bracket_to_density`, whose cell integrals ``threads`` share, `meanfield.threads`) or a
    discrete measure (points, weights) (`bracket_between`).

    Parameters
    ----------
    measure : (points, weights)
        Points (n, 3) on S^2, weights summing to 1.
    other : callable or (points, weights)
        A σ-relative density of mass 1, or a discrete measure on S^2.
    threads : int >= 1, optional
        Threads of the density's cell integrals.

    Returns
    -------
    W1Bracket

    Raises
    ------
    ValueError
        Not on S^2, weights negative or not summing to 1, a density whose mass is not 1 by the cells'
        rule.

    Examples
    --------
    >>> import meanfield as mf
    >>> x = mf.sample(mf.densities.uniform(), 500, 3, method="quasi")
    >>> b = mf.w1_bracket(x, mf.densities.uniform())
    >>> round(b.lower, 4), round(b.upper, 4), b.lower <= b.upper
    (0.0606, 0.0634, True)
    """
    if callable(other):
        return bracket_to_density(measure, other, threads)
    return bracket_between(measure, other)


__all__ = ["W1Bracket", "w1_bracket", "bracket_to_density", "bracket_between", "tree_bound", "cube_cells"]
