"""The census: every critical point of E_β that symmetric seeds, random starts and deflation find at one β
(docs/landscape.md).

Seeds on S^1:

* regular k-gons with multiplicities: the tokens 1..n cut, in order, into k consecutive clusters of sizes
  m_1 + ... + m_k = n (every composition of n; modulo rotation and reversal of the sizes when the
  weights are equal and every token sees every other), cluster j at angle 2πj/k. Antipodal
  configurations are the k = 2 compositions;
* twisted states θ_i = 2π q i/n, q = 0..n−1 (the equilibria of Kuramoto on a ring);
* random starts, each followed by deflated restarts until Newton fails.

On S^{d−1}, d >= 3, the same planar seeds, the Platonic solids and antiprisms with their vertices
loaded as evenly as possible, and random starts. Newton from a seed whose clusters coincide stays in
the subspace where they coincide (symmetric criticality), so such seeds find clustered critical points.
"""
import itertools

import numpy as np

from ..validation import check_int
from .critical import PointSet, newton
from .energy import Energy


def compositions(n, k):
    """Every composition of n into k positive parts (tuples)."""
    for cuts in itertools.combinations(range(1, n), k - 1):
        edges = (0, *cuts, n)
        yield tuple(edges[i + 1] - edges[i] for i in range(k))


def _necklace(sizes):
    """The smallest of the rotations and reversals of ``sizes`` (compositions modulo the dihedral group)."""
    k = len(sizes)
    forms = [sizes[i:] + sizes[:i] for i in range(k)]
    forms += [tuple(reversed(f)) for f in forms]
    return min(forms)


def _place(sizes, directions):
    """Tokens in order: sizes[j] of them at directions[j]."""
    return np.repeat(np.asarray(directions, float), sizes, axis=0)


def _polygon(k, dim):
    """The regular k-gon on the great circle of the first two axes."""
    return _circle(2 * np.pi * np.arange(k) / k, dim)


def _solids():
    """Platonic solids and square/pentagonal antiprisms on S^2."""
    phi = (1 + 5 ** 0.5) / 2
    tetra = np.array([[1, 1, 1], [1, -1, -1], [-1, 1, -1], [-1, -1, 1]], float)
    octa = np.vstack([np.eye(3), -np.eye(3)])
    cube = np.array(list(itertools.product([-1, 1], repeat=3)), float)
    ico = np.array([p for a in (-1, 1) for b in (-phi, phi) for p in ([0, a, b], [a, b, 0], [b, 0, a])], float)

    def antiprism(m):
        t = 2 * np.pi * np.arange(m) / m
        h = 0.5
        top = np.stack([np.cos(t), np.sin(t), np.full(m, h)], 1)
        bot = np.stack([np.cos(t + np.pi / m), np.sin(t + np.pi / m), np.full(m, -h)], 1)
        return np.vstack([top, bot])

    out = [tetra, octa, cube, ico, antiprism(3), antiprism(4), antiprism(5)]
    return [s / np.linalg.norm(s, axis=1, keepdims=True) for s in out]


def _plain(energy):
    """Whether rotating or reversing the order of the clusters is a symmetry (equal weights, complete graph)."""
    return bool(np.allclose(energy.w, energy.w[0]) and np.all(energy.A + np.eye(energy.n) > 0))


def cluster_sizes(energy, smallest=1):
    """Every composition of n into k >= ``smallest`` parts, modulo rotation and reversal when that is a
    symmetry (`_plain`)."""
    for k in range(smallest, energy.n + 1):
        seen = set()
        for sizes in compositions(energy.n, k):
            key = _necklace(sizes) if _plain(energy) else sizes
            if key not in seen:
                seen.add(key)
                yield key


def _circle(t, dim):
    """Points at the angles t on the great circle of the first two axes of R^dim."""
    x = np.zeros((len(t), dim))
    x[:, 0], x[:, 1] = np.cos(t), np.sin(t)
    return x


def seeds(energy, random_starts=8, rng=0):
    """The symmetric seeds (n, d) of the census and ``random_starts`` random ones (module docstring)."""
    n, dim = energy.n, energy.dim
    out = [_place(sizes, _polygon(len(sizes), dim)) for sizes in cluster_sizes(energy)]
    if not _plain(energy):
        out += [_circle(2 * np.pi * q * np.arange(n) / n, dim) for q in range(n)]
    if dim >= 3:
        for solid in _solids():
            k = solid.shape[0]
            if k <= n:
                sizes = [n // k + (j < n % k) for j in range(k)]
                x = np.zeros((n, dim))
                x[:, :3] = _place(sizes, solid)
                out.append(x)
    gen = np.random.default_rng(rng)
    for _ in range(random_starts):
        x = gen.standard_normal((n, dim))
        out.append(x / np.linalg.norm(x, axis=1, keepdims=True))
    return out


def scattered(energy, placements=2, rng=0):
    """Every composition of n (modulo rotation and reversal when that is a symmetry) with its clusters at
    ``placements`` sets of random angles on a great circle: clustered critical points off the regular
    polygon (an asymmetric (3, 1, 1) for n = 5, say) are found from these."""
    gen = np.random.default_rng(rng)
    return [_place(sizes, _circle(np.sort(gen.uniform(0, 2 * np.pi, len(sizes))), energy.dim))
            for sizes in cluster_sizes(energy, smallest=2) for _ in range(placements)]


def census(energy, extra=(), random_starts=8, rng=0, deflations=3, placements=4):
    """Every critical point found at ``energy.beta``, modulo the symmetries, as a `PointSet`.

    Newton runs from every seed of `seeds`, of `scattered` (``placements`` per composition) and from
    ``extra`` (for example the points found at a
    neighbouring β); from each random start, Newton is deflated by the points found so far and
    restarted up to ``deflations`` times, so that one start yields several points.
    """
    found = PointSet(energy)
    sym = seeds(energy, random_starts=0) + scattered(energy, placements, rng)
    for x0 in [*extra, *sym]:
        x, ok = newton(energy, x0)
        if ok:
            found.add(x)
    gen = np.random.default_rng(rng)
    for _ in range(random_starts):
        x0 = gen.standard_normal((energy.n, energy.dim))
        x0 /= np.linalg.norm(x0, axis=1, keepdims=True)
        for _ in range(deflations + 1):
            x, ok = newton(energy, x0, known=found.grams())
            if not ok:
                break
            before = len(found.points)
            found.add(x)
            if len(found.points) == before:
                break
    return found


def critical_points(n, beta, dim=2, weights=None, adjacency=None, *, random_starts=None, rng=0, certify=True,
                    extra=()):
    """The critical points of E_β for n tokens that the census finds, modulo the symmetries.

    E_β(x) = (1/2β) Σ_{i,j} w_i w_j A_ij e^{β⟨x_i, x_j⟩} (Problem 3 of the paper; docs/mathematics.md §17).

    Parameters
    ----------
    n : int >= 2, the number of tokens.
    beta : float, of either sign (β = 0: the limit ½ Σ w_i w_j A_ij ⟨x_i, x_j⟩ of E_β − (1/2β)Σ w_i w_j A_ij).
    dim : int >= 2, tokens on S^{dim−1}.
    weights : (n,) positive finite weights, default 1/n.
    adjacency : (n, n) symmetric non-negative adjacency, default all ones (`ring_adjacency` for a ring).
    random_starts : random starts (each with deflated restarts), default 20n. For n = 5 at β = −3, 8 starts
        find 12 to 14 of the 16 classes that the branch-and-bound proves; 100 find all 16.
    rng : seed of the random starts.
    certify : on S^1, run the Krawczyk test and the interval eigenvalue signs on every point
        (`meanfield.landscape.certify`); on S^{d−1}, d >= 3, points stay uncertified.
    extra : more starting configurations (n, d).

    Returns
    -------
    list of `CriticalPoint`, by decreasing energy (the synchronised configuration first).

    Raises
    ------
    InvalidInput
        n < 2, a non-finite β, bad ``weights`` (non-finite, not positive) or ``adjacency`` (not
        symmetric, negative, non-finite), naming the argument.

    Examples
    --------
    >>> from meanfield import landscape
    >>> pts = landscape.critical_points(3, -1.0)
    >>> [(p.kind, p.clusters, p.morse_index, p.certified) for p in pts]
    [('synchronised', (3,), 0, True), ('local max', (1, 1, 1), 0, True), ('saddle', (1, 1, 1), 1, True), ('saddle', (2, 1), 2, True)]
    """
    energy = Energy(beta, check_int(n, "n", low=2), dim, weights, adjacency)
    starts = 20 * energy.n if random_starts is None else check_int(random_starts, "random_starts", low=0)
    found = census(energy, extra=extra, random_starts=starts, rng=rng)
    points = sorted(found.points, key=lambda p: -p.energy)
    if certify and energy.dim == 2:
        from .certify import certify_point    # deferred: mpmath

        for p in points:
            certify_point(energy, p)
    return points
