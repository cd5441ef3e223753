"""Attention with other normalisations than softmax rows: L2 attention and Sinkhorn's doubly stochastic
attention, through the one kernel-sum engine (`meanfield.sums.kernelsums`; docs/attention.md).

Both are kernel sums whose exponent carries a row and a column term besides β⟨x_i, M y_j⟩,

    S_i = Σ_j e^{β⟨x_i, M y_j⟩ + col_j − row_i − c_i} F_j            (`biased_sums`),

which `meanfield.sums.kernelsums.kernel_sums` forms with two more coordinates, x̃_i = [βMᵀx_i, −row_i, 1]
and ỹ_j = [y_j, 1, col_j] (the device its own ``bias`` uses for the ALiBi weights), so that the terms
may differ between realisations (leading axes) and the sums stay stabilised by the engine's shift.

* L2 attention (Kim, Papamakarios and Mnih, *The Lipschitz constant of self-attention*, ICML 2021):
  the weights e^{−(β/2)‖Qx_i − Kx_j‖²} normalised over j. The factor e^{−(β/2)‖Qx_i‖²} cancels, so
  they are softmax's e^{β⟨Qx_i, Kx_j⟩} with the column term col_j = −(β/2)‖Kx_j‖².
* Sinkhorn attention (Sander, Ablin, Blondel and Peyré, *Sinkformers*, AISTATS 2022, arXiv 2110.11773):
  the entropic transport plan between μ = Σ_j w_j δ_{x_j} and itself for the gain β⟨Qx, Ky⟩ and the
  regularisation ε,

      π_ij = w_i w_j e^{β⟨Qx_i, Kx_j⟩/ε + f_i + g_j},   Σ_j π_ij = w_i,   Σ_i π_ij = w_j,

  and the attention matrix A_ij = π_ij / w_i: rows of sum 1, and Σ_i w_i A_ij = w_j (for equal
  weights, A is doubly stochastic). The potentials solve f_i = −log Σ_j w_j e^{C_ij + g_j},
  g_j = −log Σ_i w_i e^{C_ij + f_i} (C = β⟨Qx_i, Kx_j⟩/ε), iterated in the log domain (Sinkhorn's
  algorithm; Peyré and Cuturi, *Computational optimal transport*, §4.4) from a warm start. The plan
  does not change when C_ij gains a_i + b_j, so the tokens are centred at their weighted mean x̄ first
  (⟨x_i, M x_j⟩ = ⟨x_i − x̄, M(x_j − x̄)⟩ + a_i + b_j): the exponents, and their rounding, stay of the
  size of the cloud's spread rather than of its distance to the origin.
"""
from dataclasses import dataclass

import numpy as np

from ..errors import SolverError
from ..validation import check_int, check_real
from .kernelsums import kernel_sums

MAX_ITERATIONS = 10_000       # Sinkhorn iterations before `SinkhornNotConverged`


class SinkhornNotConverged(SolverError):
    """Sinkhorn's iterations did not reach the tolerance on the marginals (``iterations``, ``error``)."""

    def __init__(self, message, solution=None, iterations=None, error=None):
        super().__init__(message, solution)
        self.iterations, self.error = iterations, error


def biased_sums(x, y, values, beta, *, M=None, row=None, col=None, chunk=512, threads=None, ends=None):
    """S_i = Σ_j e^{β⟨x_i, M y_j⟩ + col_j − row_i − c_i} values_j and the shift c_i.

    Parameters
    ----------
    x : (..., n, d) array, the rows.
    y : (..., m, d') array, the columns.
    values : (..., m, p) array, F_j (weighted by the caller).
    beta : float.
    M : None (identity), (d, d') or a stack (..., d, d').
    row, col : None (0) or arrays (..., n) and (..., m): the row and column terms, which may differ
        between the leading indices (realisations).
    chunk, threads : as `meanfield.sums.kernelsums.kernel_sums`.
    ends : optional (n,) non-decreasing ints: row i sums the columns j < ends[i] (a causal mask).

    Returns
    -------
    (S, c): S (..., n, p) and c (..., n), so that the unshifted sums are e^{c_i} S_i.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.array([[0.0, 1.0], [1.0, 0.0]])
    >>> S, c = biased_sums(x, x, np.ones((2, 1)), 2.0, col=np.array([0.0, -1.0]))
    >>> np.allclose(np.exp(c) * S[:, 0], [np.exp(2.0) + np.exp(-1.0), 1.0 + np.exp(1.0)])
    True
    """
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    xq = beta * (x if M is None else x @ M)
    lead = np.broadcast_shapes(xq.shape[:-2], y.shape[:-2])
    n, m = xq.shape[-2], y.shape[-2]
    row = np.zeros(lead + (n,)) if row is None else np.broadcast_to(row, lead + (n,))
    col = np.zeros(lead + (m,)) if col is None else np.broadcast_to(col, lead + (m,))
    xt = np.concatenate([np.broadcast_to(xq, lead + xq.shape[-2:]), -row[..., None], np.ones(lead + (n, 1))], axis=-1)
    yt = np.concatenate([np.broadcast_to(y, lead + y.shape[-2:]), np.ones(lead + (m, 1)), col[..., None]], axis=-1)
    S, c = kernel_sums(xt, yt, values, 1.0, chunk=chunk, threads=threads, ends=ends)
    return S, np.broadcast_to(c, S.shape[:-1])


def l2_bias(y, beta, KtK=None):
    """The column term −(β/2)‖Ky_j‖² of L2 attention (..., m), ``KtK`` = KᵀK (None: the identity)."""
    y = np.asarray(y, dtype=float)
    Ky2 = np.einsum("...d,...d->...", y, y) if KtK is None else np.einsum("...d,...d->...", y @ KtK, y)
    return -0.5 * beta * Ky2


@dataclass
class SinkhornPotentials:
    """The outcome of `sinkhorn`: the potentials f, g (..., n), the attention output ``out`` (..., n, p)
    (Σ_j A_ij values_j), the ``iterations`` done and the ``error``, max_i |Σ_j π_ij/w_i − 1| of the plan
    before the last row update (the columns of the returned plan are within about ``error`` of w_j,
    its rows exact to rounding)."""

    f: np.ndarray
    g: np.ndarray
    out: np.ndarray
    iterations: int
    error: float


def _row_update(z, x, w, values, gain, M, g, chunk, threads):
    """(−log Σ_j w_j e^{C_ij + g_j}, Σ_j w_j e^{C_ij + g_j} values_j / Σ_j w_j e^{C_ij + g_j}) at the rows z."""
    p = values.shape[-1]
    F = np.concatenate([values * w[:, None], np.broadcast_to(w[:, None], values.shape[:-1] + (1,))], axis=-1)
    S, c = biased_sums(z, x, F, gain, M=M, col=g, chunk=chunk, threads=threads)
    den = S[..., p]
    return -(np.log(den) + c), S[..., :p] / den[..., None]


def _column_update(x, w, gain, M, f, chunk, threads):
    """−log Σ_i w_i e^{C_ij + f_i}: the rows' sums of the transposed kernel (Mᵀ)."""
    Mt = None if M is None else np.swapaxes(M, -1, -2)
    S, c = biased_sums(x, x, np.broadcast_to(w[:, None], x.shape[:-1] + (1,)), gain, M=Mt, col=f, chunk=chunk,
                       threads=threads)
    return -(np.log(S[..., 0]) + c)


ANDERSON_DEPTH = 5            # the differences kept by the symmetric iteration's Anderson acceleration


def _symmetric(x, w, values, gain, M, f, tol, max_iterations, chunk, threads):
    """Sinkhorn for a symmetric M, where the plan has f = g: one sum per iteration, T f_i = −log Σ_j w_j
    e^{C_ij + f_j}, and the fixed point f = G(f) = Tf − r̄/2 (r = Tf − f, r̄ its w-mean), which removes at
    once the constant mode that T flips (T(f + c) = Tf − c); the other modes contract by the spectrum
    −λ of the plan's Markov operator (λ in [0, 1) for a positive semi-definite kernel). The iterates are
    Anderson-accelerated (depth `ANDERSON_DEPTH`, restarted when the error grows tenfold; Walker and
    Ni, SIAM J. Numer. Anal. 2011): about a third fewer iterations than the plain map. Stopped when
    max|e^{f − Tf} − 1| <= tol/2; returns the potentials (Tf, f), whose rows are exact and whose columns
    are within 2·max|e^{f − Tf} − 1| <= tol."""
    return symmetric_potentials(lambda f: _row_update(x, x, w, values, gain, M, f, chunk, threads), f, w, tol,
                                max_iterations)


def symmetric_potentials(update, f, w, tol=1e-12, max_iterations=MAX_ITERATIONS):
    """The symmetric Sinkhorn iteration of `_symmetric` for any way of forming the row update:
    ``update(f)`` returns (Tf, out), Tf_i = −log Σ_j w_j e^{C_ij + f_j} (..., n) and the attention output
    out_i = Σ_j A_ij values_j of the potentials (Tf, f); ``w`` (n,) the marginal weights. Returns
    `SinkhornPotentials` (Tf, f, out, iterations, error) or raises `SinkhornNotConverged`."""
    wn = w / w.sum()

    def step(f):
        Tf, out = update(f)
        r = Tf - f
        error = 2.0 * _max_expm1(-r)
        return Tf - 0.5 * (r @ wn)[..., None], error, SinkhornPotentials(Tf, f, out, 0, error)

    return _accelerated(step, f, tol, max_iterations)


def _accelerated(step, f, tol, max_iterations):
    """The fixed point f = G(f) of a Sinkhorn iteration, Anderson-accelerated (depth `ANDERSON_DEPTH`,
    restarted when the error grows tenfold; Walker and Ni, SIAM J. Numer. Anal. 2011): ``step(f)`` returns
    (G(f), the marginal error of the plan it formed, that plan as `SinkhornPotentials`), and the plan is
    returned once its error is at most ``tol``."""
    error, best = np.inf, np.inf
    dG, dR, prev = [], [], None
    for k in range(1, max_iterations + 1):
        G, error, plan = step(f)
        if error <= tol:
            plan.iterations = k
            return plan
        if error > 10.0 * best:                              # the safeguard: restart the acceleration
            dG, dR, prev = [], [], None
        best = min(best, error)
        R = G - f
        if prev is not None:
            dG.append(G - prev[0])
            dR.append(R - prev[1])
            del dG[:-ANDERSON_DEPTH], dR[:-ANDERSON_DEPTH]
        prev = (G, R)
        f = G if not dG else G - _anderson(np.stack(dG, -1), np.stack(dR, -1), R)
    raise SinkhornNotConverged(f"Sinkhorn's iterations did not reach `sinkhorn_tol`={tol:g} on the marginals in "
                               f"{max_iterations} iterations (error {error:.3g}); raise sinkhorn_eps or sinkhorn_tol.",
                               iterations=max_iterations, error=error)


def _anderson(DG, DR, R):
    """ΔG γ with γ = argmin |R − ΔR γ| (per leading index; a 1e-12 relative ridge keeps it solvable)."""
    A = np.einsum("...nm,...nk->...mk", DR, DR)
    b = np.einsum("...nm,...n->...m", DR, R)
    ridge = 1e-12 * np.trace(A, axis1=-2, axis2=-1)[..., None, None] * np.eye(A.shape[-1])
    gamma = np.linalg.solve(A + ridge + 1e-300 * np.eye(A.shape[-1]), b[..., None])[..., 0]
    return np.einsum("...nm,...m->...n", DG, gamma)


def sinkhorn(x, w, beta, *, M=None, values=None, eps=1.0, tol=1e-12, f=None, g=None, max_iterations=MAX_ITERATIONS,
             chunk=512, threads=None):
    """Sinkhorn's doubly stochastic attention of the points x with weights w, in the log domain.

    Parameters
    ----------
    x : (..., n, d) array, the tokens (leading axes: realisations, each with its own plan); the
        potentials returned are those of the tokens centred at their weighted mean.
    w : (n,) array, positive weights of sum 1 (the marginals).
    beta : float, the gain β of β⟨x_i, M x_j⟩.
    M : None (identity), (d, d) or (..., d, d): QᵀK.
    values : (..., n, p) array, optional (default x): what the attention matrix averages.
    eps : float > 0, the entropic parameter ε: the kernel is e^{β⟨x_i, M x_j⟩/ε}.
    tol : float > 0, the tolerance on the marginals (max over rows of |Σ_j π_ij/w_i − 1|).
    f, g : (..., n) arrays, optional: the potentials to start from (a warm start; default 0, where the
        first row update is softmax attention).
    max_iterations : int >= 1.
    chunk, threads : as `meanfield.sums.kernelsums.kernel_sums`.

    Returns
    -------
    SinkhornPotentials

    Raises
    ------
    SinkhornNotConverged
        After ``max_iterations`` iterations without reaching ``tol``.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> x = rng.standard_normal((50, 3))
    >>> w = np.full(50, 1 / 50)
    >>> res = sinkhorn(x, w, 1.0)
    >>> A = sinkhorn_matrix(x, w, 1.0, f=res.f, g=res.g)
    >>> bool(np.abs(A.sum(1) - 1).max() < 1e-13), bool(np.abs(A.sum(0) - 1).max() < 1e-11)
    (True, True)
    >>> bool(np.allclose(res.out, A @ x, rtol=0, atol=1e-12))
    True
    """
    x = np.asarray(x, dtype=float)
    w = np.asarray(w, dtype=float)
    tol = check_real(tol, "sinkhorn_tol", low=0.0, low_open=True)
    eps = check_real(eps, "sinkhorn_eps", low=0.0, low_open=True)
    max_iterations = check_int(max_iterations, "max_iterations", low=1)
    gain = beta / eps
    values = x if values is None else np.asarray(values, dtype=float)
    x = _centred(x, w)[0]                   # the same plan, smaller exponents
    shape = np.broadcast_shapes(x.shape[:-1], values.shape[:-1], () if M is None else np.shape(M)[:-2] + (1,))
    f = np.zeros(shape) if f is None else np.array(np.broadcast_to(f, shape))
    g = np.zeros(shape) if g is None else np.array(np.broadcast_to(g, shape))
    if M is None or (np.ndim(M) == 2 and np.array_equal(M, np.swapaxes(M, -1, -2))):
        return _symmetric(x, w, values, gain, M, 0.5 * (f + g), tol, max_iterations, chunk, threads)
    return _alternating(x, w, values, gain, M, f, tol, max_iterations, chunk, threads)


def _max_expm1(a):
    return float(np.max(np.abs(np.expm1(a)))) if a.size else 0.0


def _alternating(x, w, values, gain, M, f, tol, max_iterations, chunk, threads):
    """Sinkhorn's alternating updates as the fixed point f = G(f) = T_r(T_c f) (g = T_c f, then the row
    update), Anderson-accelerated (`_accelerated`; the constant shift f + c is a line of fixed points that
    the residual does not see). The plan (T_r g, g) formed at each step has exact rows and columns within
    its error max|e^{f − T_r g} − 1|, at most ``tol`` when returned. The rate of the plain iteration tends
    to 1 as the plan approaches a permutation; the acceleration keeps the count in the tens to hundreds
    there (β⟨Qx_i, Kx_j⟩/ε spanning about 30: some 300 iterations instead of more than 10 000)."""
    def step(f):
        g = _column_update(x, w, gain, M, f, chunk, threads)
        Tr, out = _row_update(x, x, w, values, gain, M, g, chunk, threads)
        error = _max_expm1(f - Tr)
        return Tr, error, SinkhornPotentials(Tr, g, out, 0, error)

    return _accelerated(step, f, tol, max_iterations)


def _centred(x, w, *others):
    """x − x̄ (x̄ = Σ_j w_j x_j / Σ_j w_j), and the same shift of the points ``others``; and x̄."""
    mean = np.einsum("j,...jd->...d", w, x)[..., None, :] / w.sum()
    return (x - mean,) + tuple(np.asarray(z, dtype=float) - mean for z in others) + (mean[..., 0, :],)


def sinkhorn_output(z, x, w, beta, g, *, M=None, values=None, eps=1.0, chunk=512, threads=None):
    """The Sinkhorn attention output at points z (..., k, d) that are not tokens (tracers): with the column
    potentials g of the tokens x (as `sinkhorn` returns them), Σ_j w_j e^{β⟨z, M x_j⟩/ε + g_j} values_j /
    Σ_j w_j e^{β⟨z, M x_j⟩/ε + g_j}, the conditional mean of the plan extended to z (its row potential
    is the c-transform of g); at a token it is that token's output."""
    x, w = np.asarray(x, dtype=float), np.asarray(w, dtype=float)
    values = x if values is None else np.asarray(values, dtype=float)
    xc, zc, _ = _centred(x, w, z)
    return _row_update(zc, xc, w, values, beta / eps, M, g, chunk, threads)[1]


def sinkhorn_matrix(x, w, beta, *, M=None, eps=1.0, f, g):
    """The dense attention matrix A_ij = w_j e^{β⟨ξ_i, M ξ_j⟩/ε + f_i + g_j} (..., n, n) of the potentials
    f, g that `sinkhorn` returns (ξ = x − x̄, the centred tokens), for checks and small n (O(n²) memory)."""
    w = np.asarray(w, dtype=float)
    xc, _ = _centred(np.asarray(x, dtype=float), w)
    xq = xc if M is None else xc @ M
    C = (beta / eps) * (xq @ np.swapaxes(xc, -1, -2))
    return w[None, :] * np.exp(C + np.asarray(f)[..., :, None] + np.asarray(g)[..., None, :])


def sinkhorn_energy(x, w, beta, eps, f, g, M=None):
    """F(μ) = (ε/2β) max_{π∈Π(μ,μ)} [Σ π_ij β⟨x_i, M x_j⟩/ε − KL(π | w⊗w)]
    = −(ε/2β)(⟨w, f⟩ + ⟨w, g⟩) + ⟨x̄, M x̄⟩/2 (f, g the potentials of the centred tokens, x̄ their mean).

    The entropic self-transport value of μ = Σ w_j δ_{x_j} divided by 2β/ε; with M = QᵀK symmetric
    and V = M the Sinkhorn flow is its Wasserstein gradient ascent, dF/dt = Σ_i w_i |ẋ_i|²
    (docs/attention.md). (...,) per realisation; β ≠ 0."""
    w = np.asarray(w, dtype=float)
    x = np.asarray(x, dtype=float)
    mean = np.einsum("j,...jd->...d", w, x) / w.sum()
    Mm = mean if M is None else np.einsum("...ij,...j->...i", M, mean)
    return -(eps / (2.0 * beta)) * (np.asarray(f) @ w + np.asarray(g) @ w) + 0.5 * np.einsum("...d,...d->...", mean, Mm)


__all__ = ["biased_sums", "l2_bias", "sinkhorn", "symmetric_potentials", "sinkhorn_output", "sinkhorn_matrix", "sinkhorn_energy", "SinkhornPotentials",
           "SinkhornNotConverged", "MAX_ITERATIONS", "ANDERSON_DEPTH"]
