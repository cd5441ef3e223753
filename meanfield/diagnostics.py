"""Clustering diagnostics of particle configurations (Figure 3, Lemma 6.4; docs/mathematics.md §7–§8).

Plain functions on arrays of points of shape (..., n, d): every leading axis is a batch axis
(saved times, independent realisations) and the result has one value per leading index, shape
``positions.shape[:-2]`` (a plain float/int for a single configuration (n, d)). Average the result
yourself when you want one number over a batch (e.g. ``clustered_pair_fraction(x, δ).mean()`` is
the Figure 3 estimate of p_d(t, β) over realisations). Memory is O(chunk²) per batch element for
large n. This module imports no solver.
"""
import numpy as np

from ._checks import check_int, check_real

_CHUNK = 2048


def _as_positions(positions, name="positions"):
    try:
        x = np.asarray(positions, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"`{name}` must be an array of points of shape (..., n, d).") from None
    if x.ndim < 2 or x.shape[-2] < 1 or x.shape[-1] < 1:
        raise ValueError(f"`{name}` must have shape (..., n, d) with n >= 1, got {x.shape}.")
    if not np.all(np.isfinite(x)):
        raise ValueError(f"`{name}` contains NaN or inf.")
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
    """
    x = _as_positions(positions)
    delta = check_real(delta, "delta", low=0.0, low_open=True, high=2.0)
    chunk = check_int(chunk, "chunk", low=1)
    n = x.shape[-2]
    if n == 1:
        return _scalar_or_array(np.ones(x.shape[:-2]))
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

    Computed by min-label propagation with pointer jumping, vectorised over the leading axes and
    in row blocks of ``chunk`` (memory O(chunk·n) per batch element). Returns an int for (n, d)
    input, else an int array of shape positions.shape[:-2].
    """
    x = _as_positions(positions)
    delta = check_real(delta, "delta", low=0.0, low_open=True, high=2.0)
    chunk = check_int(chunk, "chunk", low=1)
    lead, (n, d) = x.shape[:-2], x.shape[-2:]
    xb = x.reshape(-1, n, d)
    xt = np.swapaxes(xb, -1, -2)
    labels = np.broadcast_to(np.arange(n), xb.shape[:-1]).copy()
    if n <= 256:
        # small clouds (many realisations): transitive closure R by repeated squaring, then the number
        # of components is Σ_i 1/|component(i)| = Σ_i 1/Σ_j R_ij
        R = (xb @ xt >= 1.0 - delta).astype(np.float32)
        for _ in range(max(1, int(np.ceil(np.log2(max(n, 2))))) + 1):
            R2 = (R @ R > 0).astype(np.float32)
            if np.array_equal(R2, R):
                break
            R = R2
        counts = np.rint((1.0 / R.sum(axis=-1, dtype=float)).sum(axis=-1)).astype(int).reshape(lead)
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


def w1_to_nearest_dirac(positions, weights=None):
    """min_z W1(μ, δ_z) for μ = Σ_j w_j δ_{x_j} (geodesic cost; see `meanfield.w1_to_dirac`).

    ``positions`` (..., n, d) on the sphere; ``weights`` (n,) (default 1/n). One value per
    leading index (a Python loop over them: keep it for modest batches).
    """
    from .wasserstein import w1_to_dirac

    x = _as_positions(positions)
    n = x.shape[-2]
    w = np.full(n, 1.0 / n) if weights is None else np.asarray(weights, dtype=float)
    flat = x.reshape(-1, n, x.shape[-1])
    out = np.array([w1_to_dirac((xi, w)) for xi in flat]).reshape(x.shape[:-2])
    return _scalar_or_array(out)
