"""Critical points of E_β: Newton on the Riemannian gradient with deflation, classification by the Morse
index, and equivalence modulo the symmetries (docs/landscape.md, docs/mathematics.md §17.2).

The symmetries of E_β are the orthogonal group O(d) acting on every token at once, and the permutations
of tokens that keep the weights and the adjacency. Every critical point comes with the rotation
directions (Ω x_i)_i, Ω ∈ so(d), in the kernel of its Hessian; the Morse index is counted on their
complement. Since the flows ascend E_β, the *index* here is the number of positive eigenvalues (the
unstable directions of the ascent): a strict local maximum has index 0 and no zero eigenvalue, a strict
saddle has index >= 1, a degenerate point has index 0 and a zero eigenvalue.
"""
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import linear_sum_assignment

from .energy import reduced_hessian, retract, tangent_basis

KINDS = ("synchronised", "local max", "saddle", "degenerate")
GRAD_TOL = 1e-12        # ‖grad‖ <= GRAD_TOL·scale: converged
EIG_TOL = 1e-13         # |λ| <= EIG_TOL·scale: a zero eigenvalue (rounding: about n·eps·scale)
SAME = 1e-6             # tokens closer than this are one cluster; signatures closer than this are one point


@dataclass
class CriticalPoint:
    """One critical point of E_β modulo the symmetries (made by `critical_points`).

    Parameters
    ----------
    points : (n, d) the tokens.
    beta : float.
    energy : E_β(points).
    morse_index : the number of positive eigenvalues of the Riemannian Hessian on the complement of the
        rotation directions (unstable directions of the ascent).
    kind : "synchronised" | "local max" | "saddle" | "degenerate".
    certified : True when an interval Newton (Krawczyk) test proved a unique critical point within
        ``radius`` of ``points`` (modulo rotation) and interval bounds fixed the sign of every eigenvalue
        used in ``kind``; False otherwise (reported, never dropped).
    radius : the certified radius (max-norm, in angles on S^1), or None.
    eigenvalues : the eigenvalues of the reduced Hessian, ascending.
    clusters : the sizes of the groups of coincident tokens, largest first.

    Examples
    --------
    >>> from meanfield import landscape
    >>> p = landscape.critical_points(3, -1.0)[1]
    >>> p.kind, p.clusters, p.certified, p.top_eigenvalue < 0
    ('local max', (1, 1, 1), True, True)
    """

    points: np.ndarray
    beta: float
    energy: float
    morse_index: int
    kind: str
    certified: bool = False
    radius: float | None = None
    eigenvalues: np.ndarray = field(default=None, repr=False)
    clusters: tuple = ()

    @property
    def top_eigenvalue(self):
        """The largest non-trivial Hessian eigenvalue (< 0 at a strict local maximum)."""
        return float(self.eigenvalues[-1]) if self.eigenvalues is not None and self.eigenvalues.size else float("nan")

    @property
    def angles(self):
        """The angles on S^1 (d = 2), rotated so that the first token is at 0."""
        t = np.arctan2(self.points[:, 1], self.points[:, 0])
        return np.mod(t - t[0], 2 * np.pi)

    def __repr__(self):
        cert = f"certified r={self.radius:.1e}" if self.certified else "uncertified"
        return (f"CriticalPoint(beta={self.beta:g}, kind={self.kind!r}, morse_index={self.morse_index}, "
                f"energy={self.energy:.12g}, clusters={self.clusters}, {cert})")


# -------------------------------------------------------------------------------------------------
# Newton with deflation
# -------------------------------------------------------------------------------------------------
def _deflation_slope(x, B, known, power=2.0):
    """∇ log M(x) in tangent coordinates for M(x) = Π_k (D_k^{−p/2} + 1), D_k = ‖G(x) − G_k‖²_F, G = xxᵀ
    (Farrell, Birkisson and Funke 2015): M blows up at every known point and at its rotations."""
    G = x @ x.T
    slope = np.zeros((x.shape[0], B.shape[2]))
    for Gk in known:
        diff = G - Gk
        D = float(np.sum(diff * diff))
        if D == 0.0:
            return None
        grad_D = 4.0 * np.einsum("ida,id->ia", B, diff @ x)
        m = D ** (-power / 2)
        slope += (-power / 2) * m / D / (m + 1.0) * grad_D
    return slope


def newton(energy, x0, known=(), maxiter=60, tol=GRAD_TOL):
    """Newton's method on the Riemannian gradient from ``x0`` (n, d); with ``known`` Gram matrices the
    step is deflated (Farrell et al.), so that it does not converge to them or their rotations.

    The Newton step is the least-squares (minimum norm) solution of H δ = −grad, which ignores the
    rotation directions in the kernel of H. Returns (x, converged).
    """
    x = np.array(x0, dtype=float)
    x /= np.linalg.norm(x, axis=-1, keepdims=True)
    scale = energy.scale(x)
    for _ in range(maxiter):
        B = tangent_basis(x)
        g = energy.gradient(x)
        gnorm = float(np.max(np.abs(g)))
        if not np.isfinite(gnorm):
            return x, False
        if gnorm <= tol * scale:
            return x, True
        H = energy.hessian(x)
        step = np.linalg.lstsq(H, -g.ravel(), rcond=1e-12)[0].reshape(g.shape)
        if known:
            slope = _deflation_slope(x, B, known)
            if slope is None:
                return x, False
            denom = 1.0 - float(np.sum(slope * step))
            if abs(denom) > 1e-12:
                step = step / denom
        big = float(np.max(np.abs(step)))
        if big > 0.5:                                        # keep each token's move below half a radian
            step *= 0.5 / big
        x = retract(x, B, step)
    g = energy.gradient(x)
    return x, bool(np.max(np.abs(g)) <= tol * energy.scale(x) * 10)


# -------------------------------------------------------------------------------------------------
# classification and symmetry
# -------------------------------------------------------------------------------------------------
def cluster_sizes(x, tol=SAME):
    """Sizes of the groups of coincident tokens (distance < tol), largest first."""
    n = x.shape[0]
    label = -np.ones(n, int)
    for i in range(n):
        if label[i] < 0:
            label[(label < 0) & (np.linalg.norm(x - x[i], axis=1) < tol)] = i
    return tuple(sorted(np.bincount(label)[np.bincount(label) > 0].tolist(), reverse=True))


def classify(energy, x):
    """(eigenvalues ascending, morse_index, kind) of the critical point x of ``energy``."""
    Hr, _ = reduced_hessian(energy, x)
    lam = np.linalg.eigvalsh(Hr)
    tol = EIG_TOL * energy.scale(x)
    index = int(np.sum(lam > tol))
    sync = len(cluster_sizes(x)) == 1
    if sync:
        kind = "synchronised"
    elif index > 0:
        kind = "saddle"
    elif np.any(np.abs(lam) <= tol):
        kind = "degenerate"
    else:
        kind = "local max"
    return lam, index, kind


def make_point(energy, x):
    """The `CriticalPoint` of ``energy`` at the converged x (classified, not certified)."""
    lam, index, kind = classify(energy, x)
    return CriticalPoint(points=x, beta=energy.beta, energy=energy.value(x), morse_index=index, kind=kind,
                         eigenvalues=lam, clusters=cluster_sizes(x))


def signature(energy, x):
    """Row features invariant under O(d): for each token, its weight and, for each class of partners
    (same A_ij and w_j), the sorted inner products ⟨x_i, x_j⟩. Two configurations are equivalent modulo
    O(d) and the permutations keeping w and A when their rows match (`equivalent`)."""
    n = x.shape[0]
    G = x @ x.T
    rows = []
    for i in range(n):
        keys = sorted({(energy.A[i, j], energy.w[j]) for j in range(n) if j != i})
        parts = [np.sort([G[i, j] for j in range(n) if j != i and (energy.A[i, j], energy.w[j]) == k]) for k in keys]
        rows.append(np.concatenate(parts + [[energy.w[i] * 1e3]]))
    return np.array(rows)


def equivalent(sig_a, sig_b, tol=SAME):
    """Whether two signatures match row for row (an assignment of tokens with every row within tol)."""
    if sig_a.shape != sig_b.shape:
        return False
    cost = np.max(np.abs(sig_a[:, None, :] - sig_b[None, :, :]), axis=-1)
    r, c = linear_sum_assignment(cost)
    return bool(np.max(cost[r, c]) < tol)


class PointSet:
    """Critical points found so far at one β, kept once each modulo the symmetries."""

    def __init__(self, energy):
        self.energy = energy
        self.points, self.signatures = [], []

    def add(self, x):
        """Add x if it is new; returns its index in ``points``."""
        s = signature(self.energy, x)
        e = self.energy.value(x)
        tol_e = 1e-8 * max(1.0, abs(e))
        for k, (p, sk) in enumerate(zip(self.points, self.signatures)):
            if abs(p.energy - e) <= tol_e and equivalent(s, sk):
                return k
        self.points.append(make_point(self.energy, x))
        self.signatures.append(s)
        return len(self.points) - 1

    def grams(self):
        return [p.points @ p.points.T for p in self.points]
