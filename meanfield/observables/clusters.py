"""The clusters of one particle configuration (Figure 3, Lemma 6.4; docs/mathematics.md §7–§8).

Plain functions on arrays of points of shape (..., n, d): every leading axis is a batch axis (saved
times, independent realisations) and the result has one value per leading index, shape
``positions.shape[:-2]`` (a plain float/int for a single configuration (n, d)). Average the result
yourself when you want one number over a batch (e.g. ``clustered_pair_fraction(x, δ).mean()`` is the
Figure 3 estimate of p_d(t, β) over realisations). Memory is O(chunk²) per batch element for large n.
`find_clusters` counts the clusters of one weighted measure (particles, Lagrangian nodes, a density's
quadrature nodes) with masses and positions, and says when there are none to count. Their history
through a run is in `meanfield.observables.diagnostics`.
"""
from typing import NamedTuple, Optional

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components
from scipy.spatial import ConvexHull, cKDTree
from scipy.special import betainc

from ..sums import compiled
from ..validation import check_int, check_measure, check_real
from .wasserstein import w1_to_dirac
from ..errors import InvalidInput

_CHUNK = 2048
LARGE = 4096       # clouds of more points are counted with a spatial index (no n² pairs)


def _as_positions(positions, name="positions"):
    try:
        x = np.asarray(positions, dtype=float)
    except (TypeError, ValueError):
        raise InvalidInput(f"`{name}` must be an array of points of shape (..., n, d).") from None
    if x.ndim < 2 or x.shape[-2] < 1 or x.shape[-1] < 1:
        raise InvalidInput(f"`{name}` must have shape (..., n, d) with n >= 1, got {x.shape}.")
    if not np.all(np.isfinite(x)):
        raise InvalidInput(f"`{name}` contains NaN or inf.")
    return x


def _scalar_or_array(a):
    a = np.asarray(a)
    return a.item() if a.ndim == 0 else a


def _blocks(n, chunk):
    return [(s, min(s + chunk, n)) for s in range(0, n, chunk)]


def clustered_pair_fraction(positions, delta, *, chunk=_CHUNK):
    """Fraction of ordered pairs i ≠ j with ⟨x_i, x_j⟩ >= 1 − δ (the quantity of Figure 3, docs/mathematics.md §7).

    Parameters
    ----------
    positions : (..., n, d) array; leading axes are batch axes.
    delta : float in (0, 2].
    chunk : rows per block (memory O(chunk·n) per batch element).

    Returns
    -------
    float for (n, d) input, else an array of shape positions.shape[:-2] (one value per leading
    index; no averaging). For n = 1 the fraction is defined as 1 (a single cluster).

    Notes
    -----
    Clouds of more than ``LARGE`` = 4096 unit vectors in d <= 3 are counted with a k-d tree
    (scipy's ``cKDTree.count_neighbors`` at the chord |x_i − x_j| <= sqrt(2δ)), which counts node
    pairs that lie wholly within the chord in bulk: O(n log n) for clustered clouds, plus about
    n²δ/2 distance checks for spread ones (50 s for 10^6 uniform points on S^2 at δ = 1e-3).
    """
    x = _as_positions(positions)
    delta = check_real(delta, "delta", low=0.0, low_open=True, high=2.0)
    chunk = check_int(chunk, "chunk", low=1)
    n = x.shape[-2]
    if n == 1:
        return _scalar_or_array(np.ones(x.shape[:-2]))
    if n > LARGE and x.shape[-1] <= 3:
        chord = np.sqrt(2.0 * delta)
        xb = x.reshape(-1, n, x.shape[-1])
        pairs = np.array([cKDTree(c).count_neighbors(cKDTree(c), chord) for c in xb], dtype=float)
        selfs = np.count_nonzero(np.einsum("bid,bid->bi", xb, xb) >= 1.0 - delta, axis=-1)
        return _scalar_or_array(((pairs - selfs) / (n * (n - 1))).reshape(x.shape[:-2]))
    count = np.zeros(x.shape[:-2])
    xt = np.swapaxes(x, -1, -2)
    for a, b in _blocks(n, chunk):
        g = x[..., a:b, :] @ xt
        count += np.count_nonzero(g >= 1.0 - delta, axis=(-1, -2))
        # the diagonal ⟨x_i, x_i⟩ = |x_i|² is not a pair; remove it exactly as it was counted
        diag = np.einsum("...id,...id->...i", x[..., a:b, :], x[..., a:b, :])
        count -= np.count_nonzero(diag >= 1.0 - delta, axis=-1)
    return _scalar_or_array(count / (n * (n - 1)))


def count_clusters(positions, delta, *, chunk=_CHUNK, max_iter=10_000):
    """Number of clusters at tolerance δ: connected components of the graph i ~ j ⟺ ⟨x_i, x_j⟩ >= 1 − δ.

    Clouds of more than ``LARGE`` = 4096 unit vectors in d <= 3 use the cell index of
    `find_clusters` (O(n log n), no pairs enumerated inside dense clusters: 12 s for 10^6 uniform
    points on S^2). Smaller ones, for d <= 4 with numba: union–find over the pairs in one compiled
    pass per cloud (memory O(n)); otherwise by transitive closure (n <= 256) or min-label
    propagation with pointer jumping, vectorised over the leading axes and in row blocks of
    ``chunk`` (memory O(chunk·n) per batch element). Returns an int for (n, d) input, else an int
    array of shape positions.shape[:-2].
    """
    x = _as_positions(positions)
    delta = check_real(delta, "delta", low=0.0, low_open=True, high=2.0)
    chunk = check_int(chunk, "chunk", low=1)
    lead, (n, d) = x.shape[:-2], x.shape[-2:]
    xb = x.reshape(-1, n, d)
    if n > LARGE and d <= 3:
        tol = 2.0 * np.arcsin(min(1.0, 0.5 * np.sqrt(2.0 * delta)))       # geodesic angle of ⟨x, y⟩ = 1 − δ
        counts = np.array([linked_components(c, tol).max() + 1 for c in xb])
        return _scalar_or_array(counts.reshape(lead).astype(int))
    if compiled.fused_available(d, 0):
        counts = compiled.cluster_counts4(np.ascontiguousarray(xb, dtype=np.float64), 1.0 - delta)
        return _scalar_or_array(counts.reshape(lead).astype(int))
    xt = np.swapaxes(xb, -1, -2)
    labels = np.broadcast_to(np.arange(n), xb.shape[:-1]).copy()
    if n <= 256:
        # small clouds (many realisations): the number of components is Σ_i 1/|component(i)|
        sizes = _component_sizes(xb, delta)
        counts = np.rint((1.0 / sizes).sum(axis=-1)).astype(int).reshape(lead)
        return _scalar_or_array(counts)
    blocks = _blocks(n, chunk)
    small = len(blocks) == 1
    adj = (xb @ xt >= 1.0 - delta) if small else None
    for _ in range(max_iter):
        new = np.empty_like(labels)
        for a, b in blocks:
            A = adj if small else (xb[:, a:b] @ xt >= 1.0 - delta)
            new[:, a:b] = np.where(A, labels[:, None, :], n).min(axis=-1)
        new = np.minimum(new, labels)
        new = np.take_along_axis(new, new, axis=-1)          # pointer jumping
        if np.array_equal(new, labels):
            break
        labels = new
    counts = np.count_nonzero(labels == np.arange(n), axis=-1).reshape(lead)
    return _scalar_or_array(counts.astype(int))


def _component_sizes(xb, delta):
    """|component(i)| (G, n) of the graph i ~ j ⟺ ⟨x_i, x_j⟩ >= 1 − δ for clouds xb (G, n, d), from
    the transitive closure R by repeated squaring (|component(i)| = Σ_j R_ij; O(n³ log n) per cloud)."""
    n = xb.shape[-2]
    R = (xb @ np.swapaxes(xb, -1, -2) >= 1.0 - delta).astype(np.float32)
    for _ in range(max(1, int(np.ceil(np.log2(max(n, 2))))) + 1):
        R2 = (R @ R > 0).astype(np.float32)
        if np.array_equal(R2, R):
            break
        R = R2
    return R.sum(axis=-1, dtype=float)


def cluster_sizes(positions, delta):
    """The cluster-size distribution: counts[..., s − 1] = the number of clusters of s particles, the
    clusters being the connected components of i ~ j ⟺ ⟨x_i, x_j⟩ >= 1 − δ (as in `count_clusters`).

    Returns an int array of shape positions.shape[:-2] + (n,); Σ_s counts[s − 1] is the number of
    clusters and Σ_s s·counts[s − 1] = n. O(n³ log n) per cloud (the transitive closure).
    """
    x = _as_positions(positions)
    delta = check_real(delta, "delta", low=0.0, low_open=True, high=2.0)
    lead, (n, d) = x.shape[:-2], x.shape[-2:]
    sizes = np.rint(_component_sizes(x.reshape(-1, n, d), delta)).astype(np.int64)     # (G, n), each in 1..n
    G = sizes.shape[0]
    members = np.bincount((np.arange(G)[:, None] * n + sizes - 1).ravel(), minlength=G * n).reshape(G, n)
    return (members // np.arange(1, n + 1)).reshape(lead + (n,))       # s particles in each cluster of size s


def renyi_centres(positions, delta, *, chunk=_CHUNK):
    """The strong Rényi centres of tokens in order: x_j is one when its geodesic distance to every
    earlier token x_k (k < j) exceeds δ, i.e. max_{k<j} ⟨x_j, x_k⟩ < cos δ; the first token always is.

    Under causal attention with V = I the tokens gather into metastable clusters around these centres
    before they all reach the first token (Karagodin, Polyanskiy, Rigollet, *Clustering in causal
    attention masking* (2024); docs/causal.md). positions (..., n, d) unit vectors in order,
    δ in (0, π]. Returns a boolean array (..., n); ``.sum(-1)`` is the number of centres, whose
    expectation for iid uniform tokens is `expected_renyi_centres`. Memory O(chunk·n) per cloud.
    """
    x = _as_positions(positions)
    delta = check_real(delta, "delta", low=0.0, low_open=True, high=np.pi)
    chunk = check_int(chunk, "chunk", low=1)
    n = x.shape[-2]
    out = np.empty(x.shape[:-1], dtype=bool)
    clouds = int(np.prod(x.shape[:-2], dtype=np.int64))
    for a, b in _blocks(n, max(1, min(chunk, chunk * chunk // max(1, clouds * n)))):
        gram = x[..., a:b, :] @ np.swapaxes(x[..., :b, :], -1, -2)              # rows a..b, columns 0..b
        gram[..., np.arange(b)[None, :] >= np.arange(a, b)[:, None]] = -np.inf    # only earlier tokens
        out[..., a:b] = gram.max(axis=-1) < np.cos(delta)
    return out


def cap_fraction(delta, dim):
    """p_δ, the fraction of S^{d−1} within geodesic distance δ of a point: ½ I_{sin²δ}((d−1)/2, ½) for
    δ <= π/2 (the regularised incomplete beta function), 1 minus that beyond; δ/π on S^1 and
    sin²(δ/2) on S^2."""
    delta = check_real(delta, "delta", low=0.0, high=np.pi)
    dim = check_int(dim, "dim", low=2)
    half = 0.5 * betainc(0.5 * (dim - 1), 0.5, np.sin(delta) ** 2)
    return float(half if delta <= np.pi / 2 else 1.0 - half)


def expected_renyi_centres(n, delta, dim):
    """E[#centres] = Σ_{j=1}^n (1 − p_δ)^{j−1} = (1 − (1 − p_δ)^n)/p_δ for n iid uniform tokens on
    S^{d−1} (token j is a centre when none of the j − 1 earlier ones is within δ; p_δ = `cap_fraction`):
    1/p_δ as n → ∞, π/δ on S^1 and 1/sin²(δ/2) on S^2."""
    n = check_int(n, "n", low=1)
    p = cap_fraction(delta, dim)
    return float(n) if p == 0.0 else float(-np.expm1(n * np.log1p(-p)) / p) if p < 1.0 else 1.0


def span_dimension(positions, tol=1e-3):
    """The dimension of the span of the points (rank collapse): the number of eigenvalues of the Gram
    matrix (⟨x_i, x_j⟩)_ij above ``tol`` (1e-3 in the authors' phase diagrams), from the d × d matrix
    Σ_i x_i x_iᵀ, which has the same nonzero eigenvalues. Returns an int, or an int array of shape
    positions.shape[:-2]."""
    x = _as_positions(positions)
    tol = check_real(tol, "tol", low=0.0)
    xt = np.swapaxes(x, -1, -2)
    gram = xt @ x if x.shape[-1] <= x.shape[-2] else x @ xt
    return _scalar_or_array(np.count_nonzero(np.linalg.eigvalsh(gram) > tol, axis=-1))


def w1_to_nearest_dirac(positions, weights=None):
    """min_z W1(μ, δ_z) for μ = Σ_j w_j δ_{x_j} (geodesic cost; see `meanfield.w1_to_dirac`).

    ``positions`` (..., n, d) on the sphere; ``weights`` (n,) (default 1/n). One value per
    leading index (a Python loop over them: keep it for modest batches).
    """

    x = _as_positions(positions)
    n = x.shape[-2]
    w = np.full(n, 1.0 / n) if weights is None else np.asarray(weights, dtype=float)
    flat = x.reshape(-1, n, x.shape[-1])
    out = np.array([w1_to_dirac((xi, w)) for xi in flat]).reshape(x.shape[:-2])
    return _scalar_or_array(out)


class Clusters(NamedTuple):
    """What `find_clusters` reports about one weighted measure (masses are fractions of its total).

    count : the number of clusters, or None when the measure is not separated into clusters.
    separated : at least a fraction 1 − ``stray`` of the mass lies within ``tol`` of the centre of
        its own cluster (a component of mass >= ``min_mass``).
    masses, positions, spread : per cluster, heaviest first: the component's mass, its centre (the
        normalised weighted mean) and its mass-weighted RMS geodesic radius about the centre. Given
        also when not separated (the heavy components found at ``tol``).
    labels : (n,) the cluster index of each point in that order, −1 outside the clusters.
    clustered_mass : the mass within ``tol`` of its cluster's centre; components : their number.
    """
    count: Optional[int]
    separated: bool
    masses: np.ndarray
    positions: np.ndarray
    spread: np.ndarray
    labels: np.ndarray
    clustered_mass: float
    components: int


def chord_geodesic(x, y):
    """Geodesic distance 2 arcsin(|x − y|/2) between unit vectors (accurate at small angles)."""
    return 2.0 * np.arcsin(np.clip(0.5 * np.linalg.norm(x - y, axis=-1), 0.0, 1.0))


def linked_components(x, tol):
    """Labels (n,) of the components of the graph i ~ j ⟺ geodesic distance <= ``tol`` between unit
    vectors x (n, d), d in {2, 3} (single linkage), in O(n log n): sorted angles on S^1, a cell index
    on S^2 that never enumerates the pairs inside dense clusters."""
    return _components_circle(x, tol) if x.shape[1] == 2 else _components_sphere(x, tol)


def _components_circle(x, tol):
    """Components on S^1: runs of consecutive points (in angle) with gaps <= tol; O(n log n)."""
    n = len(x)
    theta = np.arctan2(x[:, 1], x[:, 0])
    order = np.argsort(theta, kind="stable")
    ts = theta[order]
    gaps = np.diff(np.append(ts, ts[0] + 2 * np.pi))          # gap after each sorted point (cyclic)
    cut = gaps > tol
    lab = np.zeros(n, dtype=np.int64)
    if cut.any():
        lab[1:] = np.cumsum(cut[:-1])
        if not cut[-1]:
            lab[lab == lab[-1]] = 0                            # the last run wraps around to the first
    out = np.empty(n, dtype=np.int64)
    out[order] = np.unique(lab, return_inverse=True)[1]
    return out


def _cell_keys(x, side):
    """The cells of side ``side`` that hold the unit vectors x (n, d): their integer coordinates in one int64
    each, in the lexicographic order of the coordinates (a 1-D `np.unique` is 20x faster than one of rows),
    or as rows (n, d) when the number of cells along an axis, B, has B^d beyond int64."""
    keys = np.floor(x / side).astype(np.int64)
    K = int(np.ceil(1.0 / side)) + 1                  # |x_i| <= 1: the coordinates lie in [−K, K]
    B = 2 * K + 1
    if B ** x.shape[1] >= 2 ** 62:
        return keys
    keys += K
    flat = keys[:, 0]
    for i in range(1, x.shape[1]):
        flat = flat * B + keys[:, i]
    return flat


def _components_sphere(x, tol):
    """Components of the graph |x_i − x_j| <= chord(tol), exactly, without enumerating the pairs
    inside dense clusters: points sharing a cell of diameter chord are linked; two cells are linked
    at once when their first points are within the chord, and otherwise (first points within 3·chord)
    by an exact check of their members, done only when they are not yet in one component."""

    n, d = x.shape
    chord = 2.0 * np.sin(0.5 * tol)
    _, first, cell = np.unique(_cell_keys(x, chord / np.sqrt(d)), axis=0, return_index=True, return_inverse=True)
    cell = cell.ravel()
    reps = x[first]
    m = len(reps)
    size = np.bincount(cell, minlength=m)
    pairs = cKDTree(reps).query_pairs(3.0 * chord, output_type="ndarray").reshape(-1, 2)
    dist = np.linalg.norm(reps[pairs[:, 0]] - reps[pairs[:, 1]], axis=1)
    sure = dist <= chord
    g = coo_matrix((np.ones(int(sure.sum())), (pairs[sure, 0], pairs[sure, 1])), shape=(m, m))
    lab = connected_components(g, directed=False)[1]
    # the other pairs can only link when one cell holds several points (else the first points decide)
    unsure = ~sure & (lab[pairs[:, 0]] != lab[pairs[:, 1]]) & ((size[pairs[:, 0]] > 1) | (size[pairs[:, 1]] > 1))
    if unsure.any():
        order = np.argsort(cell, kind="stable")
        start = np.concatenate([[0], np.cumsum(size)[:-1]])
        parent = np.arange(lab.max() + 1)

        def root(c):
            while parent[c] != c:
                parent[c] = parent[parent[c]]
                c = parent[c]
            return c

        for k in np.nonzero(unsure)[0][np.argsort(dist[unsure], kind="stable")]:
            a, b = pairs[k]
            ra, rb = root(lab[a]), root(lab[b])
            if ra == rb:
                continue
            pa = x[order[start[a]:start[a] + size[a]]]
            pb = x[order[start[b]:start[b] + size[b]]]
            if pa.shape[0] * pb.shape[0] <= 4096:
                near = np.min(np.linalg.norm(pa[:, None, :] - pb[None, :, :], axis=-1)) <= chord
            else:
                near = cKDTree(pa).query(pb, distance_upper_bound=chord)[0].min() <= chord
            if near:
                parent[rb] = ra
        lab = np.unique([root(c) for c in lab], return_inverse=True)[1].ravel()
    return lab[cell]


def find_clusters(measure, tol=1e-3, *, min_mass=1e-2, stray=0.05, gap=5.0):
    """Clusters of a weighted measure Σ_j w_j δ_{x_j} on S^{d-1}: particles, Lagrangian nodes, the
    nodes of a density's quadrature (``sol.measure(i)`` of any solver) alike.

    The components are the connected components of the graph x_i ~ x_j ⟺ d(x_i, x_j) <= ``tol``
    (geodesic distance; single linkage). A *cluster* is a component of mass >= ``min_mass``, at its
    centre c (the normalised weighted mean). The measure is *separated* when the mass within ``tol``
    of the centre of its own cluster is at least 1 − ``stray`` and distinct clusters are more than
    ``gap``·``tol`` apart (a cluster and a satellite that has not yet fallen in are not two clusters
    at this resolution); only then is a count reported.
    That gap criterion is measured on the mass, not on the points: a near-uniform cloud, which at a
    large ``tol`` chains into one component (and at a small one falls apart into light ones), is
    never counted as a cluster, and particles and a continuum discretised by any number of nodes
    agree up to their difference in W1. Once the clusters are sharp (radius ≪ ``tol``) and their
    distances ≫ ``tol``, the result does not depend on ``tol`` (e.g. over a factor 10). This is the
    counting of metastable clusters (Section 6.3 and Figure 4 of the paper; docs/mathematics.md §7).

    Parameters
    ----------
    measure : (points (n, d), weights (n,)) or points (n, d) with equal weights; the weights are
        normalised to mass 1 and the points projected onto the sphere.
    tol : linking distance and cluster radius, in radians, in [1e-12, π/4] (a ball of radius π/4
        holds at most a quarter of the uniform measure, so no tolerance makes a uniform cloud separated).
    min_mass : smallest mass of a cluster, in (0, 1].
    stray : largest mass allowed outside the clusters' balls of radius ``tol``, in [0, 0.5).
    gap : smallest distance between the centres of two clusters, in units of ``tol``, >= 1.

    Returns
    -------
    `Clusters` (count, separated, masses, positions, spread, labels, clustered_mass, components).
    Cost O(n log n) on S^1 (sorted angles); on S^2 and beyond a k-d tree over cells of diameter tol/8
    (pairs inside a dense cluster are never enumerated).
    """

    if not (isinstance(measure, (tuple, list)) and len(measure) == 2):
        measure = (_as_positions(measure, "measure"), None)
        if measure[0].ndim != 2:
            raise InvalidInput(f"`measure` must be points (n, d) or a pair (points, weights), got {measure[0].shape}.")
        measure = (measure[0], np.full(measure[0].shape[0], 1.0 / measure[0].shape[0]))
    x, w = check_measure(measure, "measure", normalize=True)
    tol = check_real(tol, "tol", low=1e-12, high=np.pi / 4)
    min_mass = check_real(min_mass, "min_mass", low=0.0, low_open=True, high=1.0)
    stray = check_real(stray, "stray", low=0.0, high=0.5)
    if stray >= 0.5:
        raise InvalidInput(f"`stray` must be in [0, 0.5), got {stray!r}.")
    gap = check_real(gap, "gap", low=1.0)
    lab = linked_components(x, tol)
    ncomp = int(lab.max()) + 1
    mass = np.bincount(lab, weights=w, minlength=ncomp)
    centre = np.stack([np.bincount(lab, weights=w * x[:, i], minlength=ncomp) for i in range(x.shape[1])], -1)
    norm = np.linalg.norm(centre, axis=1)
    centre /= np.maximum(norm, 1e-300)[:, None]
    dist = chord_geodesic(x, centre[lab])
    dist[norm[lab] <= 1e-12 * mass[lab]] = np.pi                 # no centre (a balanced ring): not compact
    spread = np.sqrt(np.bincount(lab, weights=w * dist ** 2, minlength=ncomp) / np.maximum(mass, 1e-300))
    heavy = np.nonzero(mass >= min_mass)[0]
    heavy = heavy[np.argsort(-mass[heavy], kind="stable")]
    rank = np.full(ncomp, -1)
    rank[heavy] = np.arange(len(heavy))
    labels = rank[lab]
    clustered = float(np.sum(w[(labels >= 0) & (dist <= tol)]))
    c = centre[heavy]
    apart = len(heavy) < 2 or chord_geodesic(c[:, None, :], c[None, :, :])[np.triu_indices(len(heavy), 1)].min() > gap * tol
    separated = bool(len(heavy) and clustered >= 1.0 - stray - 1e-12 and apart)
    return Clusters(len(heavy) if separated else None, separated, mass[heavy], centre[heavy], spread[heavy], labels,
                    clustered, ncomp)


def sphere_neighbours(points):
    """Edges (m, 2) of the spherical Delaunay triangulation of unit vectors (n, 3): the edges of the facets
    of their convex hull; the neighbours along which `count_maxima` compares grid values on S^2."""

    f = ConvexHull(points).simplices
    e = np.concatenate([f[:, [0, 1]], f[:, [1, 2]], f[:, [2, 0]]])
    return np.unique(np.sort(e, axis=1), axis=0)


def count_maxima(values, edges, prominence=0.05):
    """The number of local maxima of grid values with prominence >= ``prominence``·(max − min).

    The prominence of a maximum m is its height above the highest saddle joining it to a higher
    point: m counts when its component of the superlevel set {f > f(m) − ``prominence``·(max − min)}
    (connected along ``edges``) holds no higher value. The global maximum always counts; shallow
    maxima that the grid resolves along a nearly flat ridge do not. ``edges`` (m, 2): index pairs of
    neighbouring points (`sphere_neighbours` on S^2). On S^2 a degree-l pattern need not give l
    clusters: the number of maxima of the seeded harmonic is the continuum's prediction
    (docs/mathematics.md §5; Problem 1 of the paper).
    """

    f = np.asarray(values, dtype=float)
    n = f.size
    src = np.concatenate([edges[:, 0], edges[:, 1]])
    dst = np.concatenate([edges[:, 1], edges[:, 0]])
    order = np.argsort(src, kind="stable")
    src, dst = src[order], dst[order]
    first = np.nonzero(np.diff(src, prepend=-1))[0]
    peaks = src[first][f[src[first]] > np.maximum.reduceat(f[dst], first)]
    threshold = prominence * float(f.max() - f.min())
    count = 0
    for m in peaks:
        keep = f > f[m] - threshold
        e = keep[edges[:, 0]] & keep[edges[:, 1]]
        g = coo_matrix((np.ones(int(e.sum())), (edges[e, 0], edges[e, 1])), shape=(n, n))
        lab = connected_components(g, directed=False)[1]
        count += not np.any(f[lab == lab[m]] > f[m])
    return int(count)
