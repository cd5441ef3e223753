"""One blocked engine for the kernel sums of self-attention dynamics.

    S_i = Σ_j e^{β⟨x_i, M y_j⟩ − c_i} F_j,

the numerators and denominators of the attention field (Geshkovski, Letrouit, Polyanskiy, Rigollet,
*A mathematical perspective on Transformers* (2023), (2.3), (3.2)), its (USA) variant and the
interaction energy (3.5). The caller passes F_j already weighted (e.g. [w_j V y_j, w_j] for particles,
[q_j, q_j y_j] for a quadrature, [w_j, w_j y_j, w_j y_j ⊗ y_j] for second moments).

The sums are formed in blocks of ``chunk`` rows × ``chunk`` columns, so memory is O((n + m)·d + chunk²)
per realisation whatever n and m; each block is one matmul into a preallocated buffer, one in-place
``np.exp`` and one matmul with F (benchmarks/bench_kernelsums.py: about the cost of ``np.exp`` over
the n×m array). The shift c keeps e^{β⟨x_i, M y_j⟩ − c_i} a normal float (docs/mathematics.md §11.1):

* ``"none"``: c = 0, valid while β‖M‖₂·max|x|·max|y| <= 300;
* ``"fixed"``: c = β, the exact rescaling e^{β⟨x_i, y_j⟩} = e^β e^{β(⟨x_i, y_j⟩ − 1)} for unit vectors
  and M = I (⟨x_i, y_j⟩ <= 1), carried by the matmul as an extra coordinate; the rows do not
  underflow when each x_i has some y_j nearby (as when y = x);
* ``"running"``: c_i = max_j β⟨x_i, M y_j⟩, accumulated block by block as a running maximum with
  exact rescaling of the partial sums (log-sum-exp);
* ``"auto"``: none if allowed, else fixed when M is None and the points are unit (to within 1/β),
  else running.
"""
import numpy as np

from ._checks import check_beta, check_int

NO_SHIFT_MAX = 300.0          # |β⟨x, M y⟩| below this: e^L is a normal float without a shift
EXP_FLOOR = -700.0            # shifted exponents are clamped here when they can be lower (e^-700 ~ 1e-304)
SHIFTS = ("auto", "none", "fixed", "running")


def _operator_norm(M):
    """‖M‖₂ exactly for small matrices, else the cheaper upper bound min(‖M‖_F, sqrt(‖M‖_1‖M‖_∞))."""
    if max(M.shape) <= 64:
        return float(np.linalg.norm(M, 2))
    return float(min(np.linalg.norm(M), np.sqrt(np.abs(M).sum(0).max() * np.abs(M).sum(1).max())))


def _extent(beta, x, y, M):
    """β‖M‖₂·max|x|·max|y| (a bound on |β⟨x_i, M y_j⟩|) and max(|x| − 1, |y| − 1) over all points."""
    rx = np.sqrt(np.einsum("...d,...d->...", x, x))
    ry = rx if y is x else np.sqrt(np.einsum("...d,...d->...", y, y))
    norm = 1.0 if M is None else _operator_norm(M)
    scale = beta * norm * float(rx.max(initial=0.0)) * float(ry.max(initial=0.0))
    deviation = max(float(np.abs(rx - 1.0).max(initial=0.0)), float(np.abs(ry - 1.0).max(initial=0.0)))
    return scale, deviation


def shift_kind(beta, x, y, M=None, shift="auto"):
    """The strategy ``shift`` resolves to for these points, and whether the shifted exponents can
    fall below EXP_FLOOR (then `kernel_sums` clamps them there)."""
    if shift not in SHIFTS:
        raise ValueError(f"`shift` must be one of {SHIFTS}, got {shift!r}.")
    scale, deviation = _extent(beta, x, y, M)
    kind = shift
    if shift == "auto":
        kind = "none" if scale <= NO_SHIFT_MAX else "fixed" if M is None and beta * deviation <= 1.0 else "running"
    lowest = {"none": -scale, "fixed": -scale - beta, "running": -2 * scale}[kind]
    return kind, lowest < EXP_FLOOR


def kernel_sums(x, y, values, beta, *, M=None, shift="auto", chunk=512):
    """S_i = Σ_j e^{β⟨x_i, M y_j⟩ − c_i} values_j and the shift c, in blocks.

    Parameters
    ----------
    x : (..., n, d) array, the rows (points where the sums are wanted).
    y : (..., m, d') array, the columns (sources).
    values : (..., m, p) array, F_j (already weighted by the caller).
    beta : float >= 0.
    M : None (identity) or a (d, d') matrix, e.g. Q^T K.
    shift : "auto" | "none" | "fixed" | "running" (see the module docstring).
    chunk : int >= 1, block size in rows and columns (memory O(chunk²) per realisation; batches of
        small problems are grouped so that one block holds at most 4·chunk² entries).

    Leading batch axes of x, y and values broadcast.

    Returns
    -------
    (S, c): S of shape (..., n, p); c a 0-d float64 (0 or β) for "none"/"fixed", an array (..., n)
    for "running". The unshifted sums are e^{c_i} S_i.

    Notes
    -----
    When a shifted exponent can fall below EXP_FLOOR = −700 it is raised to it: np.exp is ~10×
    slower on arguments below −708 (subnormal results), and the change is at most
    m·e^{−700}·max|F| ≈ 1e-304·m·max|F| in each S_i.
    """
    beta = check_beta(beta)
    chunk = check_int(chunk, "chunk", low=1)
    x = np.asarray(x, dtype=float)
    y = x if y is x else np.asarray(y, dtype=float)
    values = np.asarray(values, dtype=float)
    if x.ndim < 2 or y.ndim < 2:
        raise ValueError(f"`x` and `y` must have shape (..., n, d), got {x.shape} and {y.shape}.")
    if values.ndim < 2 or values.shape[-2] != y.shape[-2]:
        raise ValueError(f"`values` must have shape (..., m, p) with m = {y.shape[-2]} (the points y), got {values.shape}.")
    if M is None:
        if x.shape[-1] != y.shape[-1]:
            raise ValueError(f"`x` and `y` must have the same last axis without `M`, got {x.shape} and {y.shape}.")
    else:
        M = np.asarray(M, dtype=float)
        if M.shape != (x.shape[-1], y.shape[-1]):
            raise ValueError(f"`M` must have shape ({x.shape[-1]}, {y.shape[-1]}), got {M.shape}.")
    kind, clamp = shift_kind(beta, x, y, M, shift)
    xq = x if M is None else x @ M                      # row i: (M^T x_i)^T, so xq_i · y_j = ⟨x_i, M y_j⟩
    if beta != 1.0:
        xq = beta * xq
    if kind == "fixed":         # the shift rides in the matmul: [β x_i, −β]·[y_j, 1] = β(⟨x_i, y_j⟩ − 1)
        xq = np.concatenate([xq, np.full(xq.shape[:-1] + (1,), -beta)], axis=-1)
        y = np.concatenate([y, np.ones(y.shape[:-1] + (1,))], axis=-1)
    yt = np.ascontiguousarray(np.swapaxes(y, -1, -2))
    return _sums(xq, yt, values, beta, kind, clamp, chunk)


def _sums(xq, yt, values, beta, kind, clamp, chunk):
    """The blocked loop of `kernel_sums` on β·M^T x (..., n, d') and y^T (..., d', m) (with the extra
    coordinates −β and 1 for the fixed shift)."""
    n, m, p = xq.shape[-2], yt.shape[-1], values.shape[-1]
    lead = np.broadcast_shapes(xq.shape[:-2], yt.shape[:-2], values.shape[:-2])
    batch = int(np.prod(lead))
    c0 = np.float64(beta if kind == "fixed" else 0.0)
    rows, cols = min(chunk, n), min(chunk, m)
    if rows == n and cols == m and batch * n * m <= 4 * chunk * chunk:
        # one block (small clouds, possibly many realisations): no accumulation
        L = xq @ yt
        if kind == "running":
            c = L.max(axis=-1)
            L -= c[..., None]
        if clamp:
            np.maximum(L, EXP_FLOOR, out=L)
        np.exp(L, out=L)
        S = L @ values
        return S, (np.broadcast_to(c, S.shape[:-1]).copy() if kind == "running" else c0)
    if batch > 1 and batch * rows * cols > 4 * chunk * chunk:
        # many realisations of a large problem: slice the batch to keep memory O(chunk²)
        xf = np.broadcast_to(xq, lead + xq.shape[-2:]).reshape((batch,) + xq.shape[-2:])
        yf = np.broadcast_to(yt, lead + yt.shape[-2:]).reshape((batch,) + yt.shape[-2:])
        vf = np.broadcast_to(values, lead + values.shape[-2:]).reshape((batch,) + values.shape[-2:])
        per = max(1, 4 * chunk * chunk // (rows * cols))
        parts = [_sums(xf[s:s + per], yf[s:s + per], vf[s:s + per], beta, kind, clamp, chunk) for s in range(0, batch, per)]
        S = np.concatenate([q[0] for q in parts]).reshape(lead + (n, p))
        if kind == "running":
            return S, np.concatenate([q[1] for q in parts]).reshape(lead + (n,))
        return S, c0
    lead_L = np.broadcast_shapes(xq.shape[:-2], yt.shape[:-2])
    nL = int(np.prod(lead_L))
    buf = np.empty(nL * rows * cols)
    S = np.zeros(lead + (n, p))
    c = np.full(lead_L + (n,), -np.inf) if kind == "running" else c0
    for a in range(0, n, rows):
        b = min(a + rows, n)
        for a2 in range(0, m, cols):
            b2 = min(a2 + cols, m)
            L = buf[:nL * (b - a) * (b2 - a2)].reshape(lead_L + (b - a, b2 - a2))
            np.matmul(xq[..., a:b, :], yt[..., :, a2:b2], out=L)
            if kind == "running":
                c_new = np.maximum(c[..., a:b], L.max(axis=-1))
                with np.errstate(invalid="ignore"):
                    S[..., a:b, :] *= np.exp(c[..., a:b] - c_new)[..., None]
                c[..., a:b] = c_new
                L -= c_new[..., None]
            if clamp:
                np.maximum(L, EXP_FLOOR, out=L)
            np.exp(L, out=L)
            S[..., a:b, :] += L @ values[..., a2:b2, :]
    if kind == "running" and lead_L != lead:
        c = np.broadcast_to(c, S.shape[:-1]).copy()
    return S, c


def kernel_energy(beta, x, w, chunk=1024):
    """Σ_ij w_i w_j e^{β(⟨x_i, x_j⟩ − 1)}: the interaction energy (3.5) times 2β e^{−β}, in blocks.

    x (..., n, d) unit vectors, w (n,) or (..., n). Returns a float array of shape (...,), each in
    [e^{−2β}(Σw)², (Σw)²]. This is `kernel_sums` with values w and the fixed shift c = β.
    """
    x = np.asarray(x, dtype=float)
    w = np.asarray(w, dtype=float)
    S, _ = kernel_sums(x, x, w[..., None], beta, shift="fixed", chunk=chunk)
    return np.einsum("...i,...i->...", S[..., 0], w)
