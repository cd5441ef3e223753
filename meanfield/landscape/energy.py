"""The interaction energy of n tokens, its Riemannian gradient and Hessian on (S^{d−1})^n
(Problem 3 of the paper; docs/mathematics.md §17.1).

E_β(x) = (1/2β) Σ_{i,j} w_i w_j A_ij e^{β⟨x_i, x_j⟩}, with weights w_i > 0 and a symmetric non-negative
adjacency A (all ones: every token sees every other; a ring of k neighbours: Kuramoto on a graph).
The diagonal of A is ignored (the term i = j is constant on the sphere). At β = 0 the energy is the
limit of E_β − (1/2β) Σ w_i w_j A_ij, namely ½ Σ w_i w_j A_ij ⟨x_i, x_j⟩ (as in
`meanfield.energy.interaction_energy`); the gradient and Hessian are continuous in β there.

Tangent vectors are written in coordinates: at x_i an orthonormal basis B_i (d × (d−1)) of x_i^⊥
(`tangent_basis`), so a tangent vector of the configuration is an (n, d−1) array and the Hessian an
(n(d−1)) × (n(d−1)) symmetric matrix. On S^1 the basis is (−sin θ_i, cos θ_i) and the coordinates are
the derivatives in the angles θ_i.
"""
import numpy as np

from ..errors import InvalidInput
from ..validation import check_beta, check_int, check_points, check_vector


# -------------------------------------------------------------------------------------------------
# input
# -------------------------------------------------------------------------------------------------
def check_weights(weights, n):
    """Positive finite token weights (default 1/n); InvalidInput naming `weights`."""
    if weights is None:
        return np.full(n, 1.0 / n)
    w = check_vector(weights, n, "weights", f"a 1-D array of {n} positive finite numbers", "(one per token)")
    if np.any(w <= 0):
        raise InvalidInput(f"`weights` must be positive (finite, > 0), got smallest {w.min():.3g}.")
    return w


def check_adjacency(adjacency, n):
    """A symmetric, non-negative, finite (n, n) adjacency with a zero diagonal (default all ones)."""
    if adjacency is None:
        a = np.ones((n, n))
    else:
        try:
            a = np.array(adjacency, dtype=float)
        except (TypeError, ValueError):
            raise InvalidInput(f"`adjacency` must be an ({n}, {n}) array of non-negative numbers.") from None
        if a.shape != (n, n):
            raise InvalidInput(f"`adjacency` must have shape ({n}, {n}), got {a.shape}.")
        if not np.all(np.isfinite(a)):
            raise InvalidInput("`adjacency` must be finite (no NaN or inf).")
        if np.any(a < 0):
            raise InvalidInput(f"`adjacency` must be non-negative, got smallest {a.min():.3g}.")
        if not np.array_equal(a, a.T):
            i, j = np.argwhere(a != a.T)[0]
            raise InvalidInput(f"`adjacency` must be symmetric, got A[{i},{j}] = {a[i, j]:g} != A[{j},{i}] = {a[j, i]:g}.")
    np.fill_diagonal(a, 0.0)
    return a


def ring_adjacency(n, k):
    """The ring graph: token i sees its k nearest neighbours on each side (A_ij = 1 for 0 < |i−j|_n <= k).

    Examples
    --------
    >>> ring_adjacency(5, 1).astype(int)[0]
    array([0, 1, 0, 0, 1])
    """
    n = check_int(n, "n", low=2)
    k = check_int(k, "k", low=1)
    d = np.abs(np.subtract.outer(np.arange(n), np.arange(n)))
    d = np.minimum(d, n - d)
    return ((d > 0) & (d <= k)).astype(float)


def as_points(config, dim=None):
    """Angles (n,) on S^1 or points (n, d) as points (n, d) on the sphere (checked)."""
    a = np.asarray(config, dtype=float)
    if a.ndim == 1:
        if not np.all(np.isfinite(a)):
            raise InvalidInput("`points` (angles) must be finite.")
        a = np.stack([np.cos(a), np.sin(a)], axis=-1)
    x = check_points(a, "points", dim=dim, min_ndim=2, tol=1e-8)
    if x.ndim != 2 or x.shape[0] < 2:
        raise InvalidInput(f"`points` must have shape (n, d) with n >= 2 tokens, got {x.shape}.")
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def angles(x):
    """The angles θ_i of points (n, 2) on S^1."""
    return np.arctan2(x[:, 1], x[:, 0])


# -------------------------------------------------------------------------------------------------
# the energy and its derivatives
# -------------------------------------------------------------------------------------------------
class Energy:
    """E_β for n tokens with weights and adjacency: value, Riemannian gradient and Hessian.

    Parameters
    ----------
    beta : float, of either sign (β = 0: the limit stated in the module docstring).
    n : int >= 2, the number of tokens.
    dim : int >= 2, the ambient dimension d (tokens on S^{d−1}).
    weights : (n,) positive, default 1/n.
    adjacency : (n, n) symmetric, non-negative; default all ones.

    Examples
    --------
    >>> import numpy as np
    >>> E = Energy(-2.0 / 3.0, 3)
    >>> x = np.stack([np.cos(2 * np.pi * np.arange(3) / 3), np.sin(2 * np.pi * np.arange(3) / 3)], 1)
    >>> float(np.abs(E.gradient(x)).max()) < 1e-15
    True
    >>> float(np.abs(E.hessian(x)).max()) < 1e-15        # the triangle is degenerate at β = −2/3
    True
    """

    def __init__(self, beta, n, dim=2, weights=None, adjacency=None):
        self.n = check_int(n, "n", low=2)
        self.dim = check_int(dim, "dim", low=2)
        self.beta = check_beta(beta)
        self.w = check_weights(weights, self.n)
        self.A = check_adjacency(adjacency, self.n)
        self.C = np.outer(self.w, self.w) * self.A          # c_ij = w_i w_j A_ij

    def at(self, beta):
        """The same tokens, weights and graph at another β."""
        other = object.__new__(Energy)
        other.__dict__.update(self.__dict__)
        other.beta = check_beta(beta)
        return other

    def _kernel(self, x):
        g = x @ x.T
        return g, self.C * np.exp(self.beta * g)

    def value(self, x):
        """E_β(x) (the β = 0 limit at β = 0)."""
        g, k = self._kernel(x)
        if self.beta == 0.0:
            return 0.5 * float(np.sum(self.C * g))
        return float(np.sum(k)) / (2 * self.beta)

    def euclidean_gradient(self, x):
        """∂E/∂x_i = Σ_j w_i w_j A_ij e^{β⟨x_i,x_j⟩} x_j, (n, d)."""
        return self._kernel(x)[1] @ x

    def gradient(self, x):
        """The Riemannian gradient in tangent coordinates, (n, d−1): B_iᵀ ∂E/∂x_i."""
        return np.einsum("ida,id->ia", tangent_basis(x), self.euclidean_gradient(x))

    def beta_derivative(self, x):
        """∂/∂β of the Riemannian gradient, (n, d−1) (continuation in β)."""
        g, k = self._kernel(x)
        return np.einsum("ida,id->ia", tangent_basis(x), (k * g) @ x)

    def hessian(self, x):
        """The Riemannian Hessian in tangent coordinates, (n(d−1), n(d−1)), symmetric.

        Off the diagonal H_ij = c_ij e_ij (B_iᵀB_j + β (B_iᵀx_j)(x_iᵀB_j)); on it
        H_ii = B_iᵀ(Σ_j β c_ij e_ij x_j x_jᵀ)B_i − ⟨x_i, ∂E/∂x_i⟩ I (docs/mathematics.md §17.1).
        """
        n, d = x.shape
        B = tangent_basis(x)
        _, k = self._kernel(x)
        bx = np.einsum("ida,jd->ija", B, x)                 # B_iᵀ x_j
        bb = np.einsum("ida,jdb->ijab", B, B)               # B_iᵀ B_j
        H = k[:, :, None, None] * (bb + self.beta * bx[:, :, :, None] * bx.transpose(1, 0, 2)[:, :, None, :])
        idx = np.arange(n)
        H[idx, idx] = 0.0
        diag = self.beta * np.einsum("ij,ija,ijb->iab", k, bx, bx)
        radial = np.einsum("ij,ij->i", k, x @ x.T)          # ⟨x_i, ∂E/∂x_i⟩
        H[idx, idx] = diag - radial[:, None, None] * np.eye(d - 1)
        H = H.transpose(0, 2, 1, 3).reshape(n * (d - 1), n * (d - 1))
        return 0.5 * (H + H.T)

    def scale(self, x):
        """A size of the gradient's terms: max_i Σ_j c_ij e^{β⟨x_i,x_j⟩} (tolerances scale with it)."""
        return float(np.max(np.sum(self._kernel(x)[1], axis=1)))


def tangent_basis(x):
    """Orthonormal bases B_i of x_i^⊥, (n, d, d−1): the last d−1 columns of the Householder reflection
    that maps e_1 to x_i (on S^1 this is (−sin θ_i, cos θ_i) up to sign; we fix it to that)."""
    n, d = x.shape
    if d == 2:
        return np.stack([-x[:, 1], x[:, 0]], axis=-1)[:, :, None]
    e1 = np.zeros(d)
    e1[0] = 1.0
    v = x + np.where(x[:, 0] >= 0, 1.0, -1.0)[:, None] * e1     # |v|² >= 2: no cancellation
    vv = np.einsum("id,id->i", v, v)
    H = np.eye(d)[None] - 2.0 * v[:, :, None] * v[:, None, :] / vv[:, None, None]
    return H[:, :, 1:]


def retract(x, B, step):
    """x_i + B_i step_i projected back onto the sphere."""
    y = x + np.einsum("ida,ia->id", B, step)
    return y / np.linalg.norm(y, axis=-1, keepdims=True)


def rotation_directions(x):
    """The tangent vectors (Ω x_i)_i of the rotations Ω ∈ so(d), an orthonormal basis of their span,
    (r, n(d−1)); r = 1 on S^1, up to d(d−1)/2 (less when the configuration has a continuous stabiliser)."""
    n, d = x.shape
    B = tangent_basis(x)
    vecs = []
    for a in range(d):
        for b in range(a + 1, d):
            omega = np.zeros((d, d))
            omega[a, b], omega[b, a] = -1.0, 1.0
            vecs.append(np.einsum("ida,id->ia", B, x @ omega.T).ravel())
    u, s, _ = np.linalg.svd(np.array(vecs).T, full_matrices=False)
    return u[:, s > 1e-9 * max(1.0, s.max())].T


def reduced_hessian(energy, x):
    """The Hessian on the complement of the rotation directions, with the basis of that complement:
    (Bᵀ H B, B) where B is (n(d−1), n(d−1) − r) orthonormal."""
    H = energy.hessian(x)
    R = rotation_directions(x)
    q, _ = np.linalg.qr(np.concatenate([R.T, np.eye(H.shape[0])], axis=1))
    comp = q[:, R.shape[0]:H.shape[0]]
    return comp.T @ H @ comp, comp
