"""One blocked engine for the kernel sums of self-attention dynamics.

    S_i = Σ_j e^{β⟨x_i, M y_j⟩ − c_i} F_j,

the numerators and denominators of the attention field (Geshkovski, Letrouit, Polyanskiy, Rigollet,
*A mathematical perspective on Transformers* (2023), (2.3), (3.2)), its (USA) variant and the
interaction energy (3.5). The caller passes F_j already weighted (e.g. [w_j V y_j, w_j] for particles,
[q_j, q_j y_j] for a quadrature, [w_j, w_j y_j, w_j y_j ⊗ y_j] for second moments).

The sums are formed block by block: one matmul into a per-thread buffer of at most ``BLOCK``
entries (512 KB, which stays in the core's L2 cache), one in-place ``np.exp`` and one matmul with F.
A block is ``chunk`` columns by as many rows as fit, or, for many small problems (B realisations of
n ≤ a few hundred points), a group of whole problems. Memory is O((n + m)·d + BLOCK) per thread
whatever n, m and B, and a cached block costs less than ``np.exp`` over the same number of entries
out of cache (benchmarks/bench_kernelsums.py). Blocks are shared out among ``threads`` threads (numpy
releases the GIL in matmul and exp), with BLAS held to one thread meanwhile; every row is computed by the same operations in the same
order whatever the number of threads, so the results are bit-for-bit independent of it.

The shift c keeps e^{β⟨x_i, M y_j⟩ − c_i} a normal float (docs/mathematics.md §11.1):

* ``"none"``: c = 0, valid while |β|‖M‖₂·max|x|·max|y| <= 300;
* ``"fixed"``: c = |β|, the exact rescaling e^{β⟨x_i, y_j⟩} = e^{|β|} e^{β⟨x_i, y_j⟩ − |β|} for unit
  vectors and M = I (β⟨x_i, y_j⟩ <= |β|, for β of either sign), carried by the matmul as an extra
  coordinate; for β > 0 the rows do not underflow when each x_i has some y_j nearby (as when y = x);
* ``"running"``: c_i = max_j β⟨x_i, M y_j⟩, accumulated block by block as a running maximum with
  exact rescaling of the partial sums (log-sum-exp);
* ``"auto"``: none if allowed, else fixed when β > 0, M is None and the points are unit (to within
  1/β), else running.

Many small problems in d <= 3 (n <= ``FUSED_ROWS`` rows, shifts "none" and "fixed", at most 4 values:
the particle steps of Figure 3), and masked problems of any size (``ends`` or ``bias``, below), take
instead one compiled pass, `meanfield.sums._fused.exp_sums4`, when
numba is present: for each column it forms the inner products of a block of rows, their
exponentials (a vectorised polynomial within 1 ulp of np.exp) and the sums, so that nothing of size
n·m is stored, and the problems are shared among numba's (OpenMP) threads inside that one call,
without the GIL (two threads: 1.65× the speed of one within a particle step, where Python threads
handing numpy blocks to each other gained 1.0–1.3×: on this machine a thread waits 70–90 µs to be
woken); fewer problems than threads share their rows instead, each part a compiled call on its own
Python thread. `attention_sums` forms the values [v w_j y_j,
w_j] there too. The fused sums differ from the numpy ones by rounding only (the exponentials by an
ulp, the exponents by their own rounding: (10 + max|L|)·1e-15 of each row's size,
tests/test_kernelsums.py); both are bit-for-bit independent of the number of threads.

Causal attention (decoder-style tokens in order, docs/causal.md) passes ``ends``: row i
sums only the columns j < ends[i] (ends non-decreasing: k <= i is ends_i = i + 1, k < i is ends_i = i),
so that a block of rows stops at its last row's end and the sums cost about half of the full ones;
and ``bias`` = (a, b), which adds b_j − a_i to the exponent (the ALiBi weight e^{−λ(σ_i − σ_j)} with
a = b = λσ; it factorises into a row and a column term, so it costs one addition per pair).

The same blocks also count, when asked (``count_at=τ``), the columns with ⟨x_i, M y_j⟩ >= τ in
every row: the clustered pairs of Figure 3 of the paper (docs/mathematics.md §7) come with the
sums at no extra exponential; `gram_counts` counts without the sums.
"""
import threading

import numpy as np

from ..validation import check_beta, check_int, check_real
from ..threads import blas_single_threaded, check_threads, share_out
from . import compiled
from .compiled import add_row_counts
from ..errors import InvalidInput

NO_SHIFT_MAX = 300.0          # |β⟨x, M y⟩| below this: e^L is a normal float without a shift
EXP_FLOOR = -700.0            # shifted exponents are clamped here when they can be lower (e^-700 ~ 1e-304)
SHIFTS = ("auto", "none", "fixed", "running")
BLOCK = 1 << 16               # entries of one block (512 KB of float64; bench_kernelsums: fastest of 2^13..2^20)
_PARALLEL_MIN = 1 << 17       # fewer pairs than this: one thread (a thread hand-off costs more)
FUSED_ROWS = 256              # problems of at most this many rows use the fused sums (larger ones: BLAS)


_LOCAL = threading.local()


def _buffer(size):
    """A float64 work array of ``size`` entries, one per thread, reused from call to call (a fresh
    512 KB array would be mapped and faulted in by the kernel on every block)."""
    buf = getattr(_LOCAL, "buffer", None)
    if buf is None or buf.size < size:
        buf = _LOCAL.buffer = np.empty(max(size, BLOCK))
    return buf[:size]


def _operator_norm(M):
    """‖M‖₂ exactly for small matrices, else the cheaper upper bound min(‖M‖_F, sqrt(‖M‖_1‖M‖_∞));
    for a stack of matrices (..., d, d') the largest Frobenius norm (a bound on each ‖M‖₂)."""
    if M.ndim > 2:
        return float(np.sqrt(np.max(np.einsum("...ij,...ij->...", M, M)))) if M.size else 0.0
    if max(M.shape) <= 64:
        return float(np.linalg.norm(M, 2))
    return float(min(np.linalg.norm(M), np.sqrt(np.abs(M).sum(0).max() * np.abs(M).sum(1).max())))


def _radii(x):
    """(min |x_i|, max |x_i|) over all points (1, 1 for no points)."""
    if x.size == 0:
        return 1.0, 1.0
    r2 = np.square(x) @ np.ones(x.shape[-1])              # a matmul: .sum(axis=-1) over d = 3 is 5x slower
    return float(np.sqrt(r2.min())), float(np.sqrt(r2.max()))


def _extent(beta, x, y, M, unit=False):
    """|β|‖M‖₂·max|x|·max|y| (a bound on |β⟨x_i, M y_j⟩|) and max(|x| − 1, |y| − 1) over all points
    (|β|‖M‖₂ and 0 for points known to be ``unit``)."""
    norm = 1.0 if M is None else _operator_norm(M)
    if unit:
        return abs(beta) * norm, 0.0
    lox, hix = _radii(x)
    loy, hiy = (lox, hix) if y is x else _radii(y)
    scale = abs(beta) * norm * (hix if x.size else 0.0) * (hiy if y.size else 0.0)
    deviation = max(hix - 1.0, 1.0 - lox, hiy - 1.0, 1.0 - loy)
    return scale, deviation


def shift_kind(beta, x, y, M=None, shift="auto", unit=False):
    """The strategy ``shift`` resolves to for these points, and whether the shifted exponents can
    fall below EXP_FLOOR (then `kernel_sums` clamps them there)."""
    return _shift(beta, x, y, M, shift, unit)[:2]


def _shift(beta, x, y, M, shift, unit, bias=(0.0, 0.0)):
    """`shift_kind` and a bound on the largest shifted exponent; ``bias`` bounds (lo, hi) of the
    position bias b_j − a_i added to the exponents, and optionally the smallest over the rows of the
    row's largest bias (a row whose every term is far below 1, as under "causal-strict" with a steep
    ALiBi slope, takes the running shift, so that its terms are not clamped to one floor)."""
    if shift not in SHIFTS:
        raise InvalidInput(f"`shift` must be one of {SHIFTS}, got {shift!r}.")
    scale, deviation = _extent(beta, x, y, M, unit)
    lo, hi, top = bias if len(bias) == 3 else (*bias, 0.0)
    kind = shift
    if shift == "auto":
        fits = M is None and beta > 0 and beta * deviation <= 1.0    # β < 0: rows far from e^{|β|}: running
        kind = "none" if scale + max(hi, 0.0) <= NO_SHIFT_MAX else "fixed" if fits else "running"
        if top < -NO_SHIFT_MAX:     # some row's every term carries a tiny bias: each row its own shift
            kind = "running"
    lowest = {"none": -scale + lo, "fixed": -scale - abs(beta) + lo, "running": -2 * scale + lo - hi}[kind]
    highest = {"none": scale + hi, "fixed": scale - abs(beta) + hi, "running": 0.0}[kind]
    return kind, lowest < EXP_FLOOR, highest


def _check_pair(x, y, M):
    x = np.asarray(x, dtype=float)
    y = x if y is x else np.asarray(y, dtype=float)
    if x.ndim < 2 or y.ndim < 2:
        raise InvalidInput(f"`x` and `y` must have shape (..., n, d), got {x.shape} and {y.shape}.")
    if M is None:
        if x.shape[-1] != y.shape[-1]:
            raise InvalidInput(f"`x` and `y` must have the same last axis without `M`, got {x.shape} and {y.shape}.")
    else:
        M = np.asarray(M, dtype=float)
        try:                                            # a stack of M: one per leading index of x
            lead = np.broadcast_shapes(x.shape[:-2], M.shape[:-2])
        except ValueError:
            lead = None
        if M.shape[-2:] != (x.shape[-1], y.shape[-1]) or M.ndim > max(x.ndim, 2) or lead != x.shape[:-2]:
            raise InvalidInput(f"`M` must have shape ({x.shape[-1]}, {y.shape[-1]}), or (..., {x.shape[-1]}, "
                             f"{y.shape[-1]}) with the leading axes of `x`, got {M.shape}.")
    return x, y, M


def kernel_sums(x, y, values, beta, *, M=None, shift="auto", chunk=512, threads=None, count_at=None, unit=False,
                ends=None, bias=None):
    """S_i = Σ_j e^{β⟨x_i, M y_j⟩ − c_i} values_j and the shift c, in blocks.

    Parameters
    ----------
    x : (..., n, d) array, the rows (points where the sums are wanted).
    y : (..., m, d') array, the columns (sources).
    values : (..., m, p) array, F_j (already weighted by the caller).
    beta : float, of either sign.
    M : None (identity), a (d, d') matrix, e.g. Q^T K, or a stack (..., d, d') of them, one per
        leading index of x (per-realisation parameters; the leading axes broadcast).
    shift : "auto" | "none" | "fixed" | "running" (see the module docstring).
    chunk : int >= 1, columns per block (the rows fill a block of ``BLOCK`` entries; many small
        problems are grouped into one block).
    threads : int >= 1, or None for `meanfield.threads.default_threads`. The result does not
        depend on it.
    count_at : float, optional; also count, for every row, the columns with ⟨x_i, M y_j⟩ >= count_at
        (from the exponents of the blocks, so a pair within one rounding of the threshold may go
        either way).
    unit : bool; True when the caller knows that every x_i and y_j is a unit vector (to rounding):
        the bound β‖M‖₂ on the exponents is then used without measuring the points.
    ends : optional int array (n,), non-decreasing in [0, m]: row i sums only the columns j < ends[i]
        (a causal mask; a row with ends[i] = 0 has S_i = 0 and c_i = 0). Shared by the leading axes.
    bias : optional pair (a (n,), b (m,)) of finite arrays: the exponent of (i, j) gains b_j − a_i
        (the ALiBi position bias, a = b = λσ; meant to be <= 0 on the summed pairs). Shared by the
        leading axes.

    Returns
    -------
    (S, c), or (S, c, counts) with ``count_at``: S of shape (..., n, p); c a 0-d float64 (0 or |β|)
    for "none"/"fixed", an array (..., n) for "running"; counts an int64 array (..., n). The
    unshifted sums are e^{c_i} S_i.

    Notes
    -----
    Leading batch axes of x, y and values broadcast.

    When a shifted exponent can fall below EXP_FLOOR = −700 it is raised to it: np.exp is ~10×
    slower on arguments below −708 (subnormal results), and the change is at most
    m·e^{−700}·max|F| ≈ 1e-304·m·max|F| in each S_i.
    """
    values = np.asarray(values, dtype=float)
    if values.ndim < 2 or values.shape[-2] != np.shape(y)[-2]:
        raise InvalidInput(f"`values` must have shape (..., m, p) with m = {np.shape(y)[-2]} (the points y), got {values.shape}.")
    return _sums(x, y, values, None, beta, M, shift, chunk, threads, count_at, unit, ends, bias)


def attention_sums(x, y, w, beta, *, v=None, M=None, shift="auto", chunk=512, threads=None, count_at=None, unit=False,
                   ends=None, bias=None):
    """`kernel_sums` with the values of the attention field, [v·w_j y_j, w_j]: the numerators and
    the denominators Σ_j w_j e^{β⟨x_i, M y_j⟩ − c_i} [v y_j, 1] of (2.3) for V = v·I (docs/mathematics.md
    §2), ``v`` None for 1. ``w`` (m,) weights of the columns. Same returns as `kernel_sums`; the
    values are formed inside the fused pass when it applies (d <= 3), else by
    `meanfield.sums.compiled.weighted`, with the same bits."""
    w = np.ascontiguousarray(w, dtype=float)
    if w.ndim != 1 or w.shape[0] != np.shape(y)[-2]:
        raise InvalidInput(f"`w` must have shape (m,) with m = {np.shape(y)[-2]} (the points y), got {w.shape}.")
    return _sums(x, y, None, (w, v), beta, M, shift, chunk, threads, count_at, unit, ends, bias)


def masked_batch_sums(x, y, w, beta, ends, bias=None, threads=1):
    """K causal problems at once, each with its own mask and bias, for points on the unit sphere:

        S[k, i] = Σ_{j < ends[k, i]} w[k, j] e^{β⟨x_ki, y_kj⟩ − |β| + b[k, j] − a[k, i]} [y_kj, 1],

    x (K, r, d), y (K, m, d), w (K, m), ``ends`` (K, r) int64 non-decreasing in each row, ``bias`` = (a
    (K, r), b (K, m)) with b[k, j] <= a[k, i] for j < ends[k, i], or None. Row by row the same bits as
    `attention_sums(x[k], y[k], w[k], beta, shift="fixed", unit=True, ends=ends[k], bias=...)`: compiled
    calls on contiguous runs of problems (`masked_batch`: no per-problem Python), shared among ``threads``
    Python threads (each call holds no GIL; numba's own threads stay asleep, so that they do not spin
    beside the callers' threads); the callers' blocks (`meanfield.sums.spectralsums.causal_zonal_sums`)
    are checked there.
    None where the fused pass does not apply (no numba, d > 3): the caller then takes `attention_sums`."""
    batch = masked_batch(x, y, w, beta, ends, bias)
    if batch is None:
        return None
    K, r, d = x.shape
    S = np.empty((K, r, d + 1))

    def work(part):
        for a, b in part:
            batch(a, b, S[a:b])

    _run(work, _spans(K, 1 if threads == 1 else 4 * threads), threads, K * r * y.shape[1])
    return S


def masked_batch(x, y, w, beta, ends, bias=None):
    """The problems of `masked_batch_sums` as a function ``sums(a, b, out)`` that writes the sums of problems
    a..b−1 into ``out`` (b − a, r, d + 1): their masks and values made on the calling thread, then one compiled
    call holding no GIL. For callers that share runs of problems among their own threads; None where the
    fused pass does not apply."""
    K, r, d = x.shape
    m = y.shape[1]
    if not r * m or not compiled.fused_available(d + 1, d + 1):
        return None
    ends = np.asarray(ends, dtype=np.int64)
    lo = 0.0 if bias is None else float(np.min(bias[1].min(axis=1) - bias[0].max(axis=1)))
    clamp = -2.0 * abs(beta) + lo < EXP_FLOOR
    ra, cb = (None, None) if bias is None else (np.ascontiguousarray(a, dtype=float) for a in bias)
    x, y = np.ascontiguousarray(x, dtype=float), np.ascontiguousarray(y, dtype=float)

    def sums(a, b, out):                       # the problems' masks and values made here, on the caller's thread
        # column j enters row i >= start[k, j] = #{i : ends[k, i] <= j}: each problem's ends shifted into a
        # range of its own, so that one search serves them all
        shift = (m + 1) * np.arange(b - a)[:, None]
        flat = (np.clip(ends[a:b], 0, m) + shift).ravel()
        start = np.searchsorted(flat, (np.arange(m) + shift).ravel(), side="right").reshape(b - a, m)
        start -= r * np.arange(b - a)[:, None]
        values = np.empty((b - a, m, d + 1))
        np.multiply(y[a:b], w[a:b, :, None], out=values[..., :d])
        values[..., d] = w[a:b]
        mask = (start, None if ra is None else ra[a:b], None if cb is None else cb[a:b])
        compiled.exp_sums4(x[a:b], y[a:b], values, None, out, None, beta, (-abs(beta), 1.0), None, clamp, 1, mask)

    return sums


class Causal:
    """The checked ``ends`` and ``bias`` of the kernel sums: ends (n,) int64 or None, a (n,) and b (m,)
    or None, and (lo, hi), bounds on b_j − a_i over the summed pairs (0, 0 without a bias)."""

    def __init__(self, ends, bias, n, m):
        self.ends = self.a = self.b = None
        self.lo = self.hi = self.top = 0.0
        if ends is not None:
            e = np.asarray(ends)
            if (e.shape != (n,) or not np.issubdtype(e.dtype, np.integer) or (n and (e[0] < 0 or e[-1] > m))
                    or np.any(np.diff(e) < 0)):
                raise InvalidInput(f"`ends` must be a non-decreasing integer array of shape ({n},) with values in "
                                 f"[0, {m}] (row i sums the columns j < ends[i]), got {_describe(e)}.")
            self.ends = np.ascontiguousarray(e, dtype=np.int64)
        if bias is not None:
            try:
                a, b = (np.ascontiguousarray(v, dtype=float) for v in bias)
            except (TypeError, ValueError):
                raise InvalidInput("`bias` must be a pair (a, b) of real arrays of shapes (n,) and (m,).") from None
            if a.shape != (n,) or b.shape != (m,) or not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
                raise InvalidInput(f"`bias` must be a pair (a, b) of finite arrays of shapes ({n},) and ({m},), got "
                                 f"{a.shape} and {b.shape}.")
            self.a, self.b = a, b
            if n and m:
                self.lo = float(b.min() - a.max())
                if self.ends is None:
                    self.hi, self.top = float(b.max() - a.min()), float(b.max() - a.max())
                else:                                   # the largest b_j − a_i over j < ends[i], per row
                    seen = self.ends > 0
                    top = np.maximum.accumulate(b)[self.ends[seen] - 1] - a[seen]
                    self.hi = float(top.max()) if top.size else 0.0
                    self.top = float(top.min()) if top.size else 0.0

    @property
    def active(self):
        return self.ends is not None or self.a is not None

    def starts(self, m):
        """start[j]: the first row that sums column j (``ends`` None: 0 for every column)."""
        if self.ends is None:
            return np.zeros(m, dtype=np.int64)
        return np.searchsorted(self.ends, np.arange(m), side="right").astype(np.int64)


def _describe(a):
    return f"shape {a.shape} and dtype {a.dtype}" if a.ndim != 1 or not np.issubdtype(a.dtype, np.integer) else \
        f"values from {a.min() if a.size else '-'} to {a.max() if a.size else '-'}" + (
            ", decreasing somewhere" if np.any(np.diff(a) < 0) else "")


def _sums(x, y, values, attention, beta, M, shift, chunk, threads, count_at, unit, ends=None, bias=None):
    """`kernel_sums` (values given) or `attention_sums` (values [v w_j y_j, w_j] from ``attention`` = (w, v))."""
    beta = check_beta(beta)
    chunk = check_int(chunk, "chunk", low=1)
    threads = check_threads(threads)
    x, y, M = _check_pair(x, y, M)
    causal = Causal(ends, bias, x.shape[-2], y.shape[-2])
    if count_at is not None:
        if causal.ends is not None:
            raise InvalidInput("`count_at` counts every column; with `ends` (a causal mask) count with `gram_counts`.")
        count_at = check_real(count_at, "count_at")
    kind, clamp, highest = _shift(beta, x, y, M, shift, unit, (causal.lo, causal.hi, causal.top))
    xq = x if M is None else x @ M                      # row i: (M^T x_i)^T, so xq_i · y_j = ⟨x_i, M y_j⟩
    threshold = None
    if count_at is not None and beta > 0:         # β <= 0: the exponents do not order ⟨x_i, M y_j⟩ upwards
        threshold = beta * count_at - (beta if kind == "fixed" else 0.0)
    fixed = kind == "fixed"     # the shift rides in the inner product: [β x_i, −|β|]·[y_j, 1] = β⟨x_i, y_j⟩ − |β|
    out = None
    if kind != "running" and highest <= NO_SHIFT_MAX and (xq.shape[-2] <= FUSED_ROWS or causal.active):
        out = _fused_blocked(xq, y, values, beta, (-abs(beta), 1.0) if fixed else None, threads, threshold, attention,
                             clamp, causal)
    if out is None:
        if attention is not None:
            values = compiled.weighted(np.ascontiguousarray(y), attention[0], attention[1])
        yq = y
        if beta != 1.0:
            xq = beta * xq
        if fixed:
            xq = np.concatenate([xq, np.full(xq.shape[:-1] + (1,), -abs(beta))], axis=-1)
            yq = np.concatenate([y, np.ones(y.shape[:-1] + (1,))], axis=-1)
        if causal.a is not None:          # the bias rides in the inner product too: [x̃_i, −a_i, 1]·[ỹ_j, 1, b_j]
            xq = np.concatenate([xq, np.broadcast_to(np.stack([-causal.a, np.ones_like(causal.a)], -1),
                                                     xq.shape[:-1] + (2,))], axis=-1)
            yq = np.concatenate([yq, np.broadcast_to(np.stack([np.ones_like(causal.b), causal.b], -1),
                                                     yq.shape[:-1] + (2,))], axis=-1)
        out = _blocked(xq, yq, values, kind, clamp, chunk, threads, threshold, causal.ends)
    S, c, counts = out
    if kind != "running":
        c = np.float64(abs(beta) if kind == "fixed" else 0.0)
    if count_at is None:
        return S, c
    if threshold is None:                               # β = 0: the exponents carry no inner products
        counts = gram_counts(x, y, count_at, M=M, chunk=chunk, threads=threads)
        counts = np.broadcast_to(counts, S.shape[:-1]).copy()
    return S, c, counts


def gram_counts(x, y, threshold, *, M=None, chunk=512, threads=None):
    """For every row, the number of columns j with ⟨x_i, M y_j⟩ >= ``threshold`` (int64 (..., n)),
    in the blocks of `kernel_sums` without the exponentials. With y = x and threshold 1 − δ this is
    one more than the number of δ-close neighbours of each unit vector (Figure 3 of the paper)."""
    threshold = check_real(threshold, "threshold")
    chunk = check_int(chunk, "chunk", low=1)
    threads = check_threads(threads)
    x, y, M = _check_pair(x, y, M)
    xq = x if M is None else x @ M
    empty = np.empty(y.shape[:-1] + (0,))
    out = _fused_blocked(xq, y, None, 1.0, None, threads, threshold)
    return (out if out is not None else _blocked(xq, y, empty, "count", False, chunk, threads, threshold))[2]


def _flatten(xq, y, values):
    """(xq (K, n, d'), y (K, m, d'), values (K, m, P), unflatten) with the leading axes of x and y
    flattened to K and the leading axes that only ``values`` has folded into its columns (one block
    of exponentials then serves all of them)."""
    lead_xy = np.broadcast_shapes(xq.shape[:-2], y.shape[:-2])
    lead = np.broadcast_shapes(lead_xy, values.shape[:-2])
    n, m, p = xq.shape[-2], y.shape[-2], values.shape[-1]
    if xq.shape[:-2] == y.shape[:-2] == values.shape[:-2]:       # nothing to broadcast (the usual case)
        K = int(np.prod(lead, dtype=np.int64))

        def plain(S, c, counts):
            return (S.reshape(lead + (n, p)), None if c is None else c.reshape(lead + (n,)),
                    None if counts is None else counts.reshape(lead + (n,)))

        return (xq.reshape(K, n, xq.shape[-1]), y.reshape(K, m, y.shape[-1]), values.reshape(K, m, p), plain)
    k = len(lead)
    pad = (1,) * (k - len(lead_xy)) + lead_xy
    shared = [a for a in range(k) if pad[a] == 1 and lead[a] > 1]
    full = [a for a in range(k) if a not in shared]
    K = int(np.prod(lead_xy, dtype=np.int64))
    xf = np.broadcast_to(xq, lead_xy + xq.shape[-2:]).reshape(K, n, xq.shape[-1])
    yf = np.broadcast_to(y, lead_xy + y.shape[-2:]).reshape(K, m, y.shape[-1])
    vb = np.broadcast_to(values, lead + (m, p))
    shared_shape = tuple(lead[a] for a in shared)
    if shared:
        vb = vb.transpose(full + [k] + shared + [k + 1])
    vf = vb.reshape(K, m, int(np.prod(shared_shape, dtype=np.int64)) * p)

    def unflatten(S, c, counts):
        full_shape = tuple(lead[a] for a in full)
        S = S.reshape(full_shape + (n,) + shared_shape + (p,))
        if shared:
            order = np.argsort(full + [k] + shared + [k + 1])
            S = S.transpose(list(order))
        S = np.ascontiguousarray(S).reshape(lead + (n, p))
        out = []
        for a in (c, counts):
            if a is not None:
                a = a.reshape(lead_xy + (n,))
                if lead_xy != lead:
                    a = np.broadcast_to(a, lead + (n,)).copy()
            out.append(a)
        return S, out[0], out[1]

    return xf, yf, vf, unflatten


def _blocked(xq, y, values, kind, clamp, chunk, threads, threshold, ends=None):
    """The blocked loop of `kernel_sums` on β·M^T x (..., n, d') and y (..., m, d') (with the extra
    coordinates −β and 1 for the fixed shift, and −a_i, 1 and 1, b_j for a position bias); ``kind``
    "count" forms only the inner products; ``ends`` (n,) limits row i to the columns j < ends[i].
    Returns (S, c or None, counts or None) with the leading axes of the inputs."""
    xf, yf, vf, unflatten = _flatten(xq, y, values)
    K, n, m, P = xf.shape[0], xf.shape[1], yf.shape[1], vf.shape[-1]
    S = np.empty((K, n, P))
    c = np.empty((K, n)) if kind == "running" else None
    counts = np.zeros((K, n), dtype=np.int64) if threshold is not None else None
    cols = max(1, min(m, chunk))
    rows = min(n, max(1, BLOCK // cols))
    grouped = rows == n and cols == m
    if grouped:                                          # whole problems, grouped (many realisations)
        group = max(1, BLOCK // max(n * m, 1))
        tiles = [(s, min(s + group, K), 0, n) for s in range(0, K, group)]
    else:                                                # y^T once (matmul is 4x slower on a transposed view)
        tiles = [(b, b + 1, r, min(r + rows, n)) for b in range(K) for r in range(0, n, rows)]
        yf = np.ascontiguousarray(yf.swapaxes(1, 2))

    def work(part):
        for b0, b1, r0, r1 in part:
            yt = np.ascontiguousarray(yf[b0:b1].swapaxes(1, 2)) if grouped else yf[b0:b1]
            _tile(xf[b0:b1, r0:r1], yt, vf[b0:b1], kind, clamp, cols, threshold, S[b0:b1, r0:r1],
                  None if c is None else c[b0:b1, r0:r1], None if counts is None else counts[b0:b1, r0:r1],
                  None if ends is None else ends[r0:r1])

    if n * m == 0:
        S[...] = 0.0
        if c is not None:
            c[...] = -np.inf
    else:
        costs = None if ends is None else [(b1 - b0) * (r1 - r0) * int(ends[r1 - 1]) for b0, b1, r0, r1 in tiles]
        _run(work, tiles, threads, K * n * m // (1 if ends is None else 2), costs)
    return unflatten(S, c, counts)


def _run(work, tiles, threads, pairs, costs=None):
    """work(part) over contiguous parts of the tiles, a few per thread (load balance), on ``threads``
    threads with BLAS held to one; on the calling thread alone for one thread, one tile or few pairs.
    With ``costs`` (one per tile: the triangle of a causal mask) the parts carry equal costs and the
    costliest go first, so that no thread is left with the last, largest rows alone."""
    if threads == 1 or len(tiles) == 1 or pairs < _PARALLEL_MIN:
        return work(tiles)
    nparts = min(len(tiles), 4 * threads)
    if costs is None:
        bounds = np.linspace(0, len(tiles), nparts + 1).astype(int)
    else:
        total = np.concatenate([[0], np.cumsum(costs)])
        bounds = np.unique(np.searchsorted(total, np.linspace(0, total[-1], nparts + 1)[1:-1]))
        bounds = np.concatenate([[0], bounds[(bounds > 0) & (bounds < len(tiles))], [len(tiles)]])
    parts = [tiles[a:b] for a, b in zip(bounds[:-1], bounds[1:]) if b > a]
    if costs is not None:
        parts.reverse()                                   # the tiles' costs grow with the row: largest first
    with blas_single_threaded():
        share_out(work, parts, threads)


def _fused_blocked(xq, y, values, scale, last, threads, threshold, attention=None, clamp=True, causal=None):
    """The sums (S, None, counts or None) of `kernel_sums` for the shifts "none" and "fixed" (exponents
    ⟨x̃_i, ỹ_j⟩ with x̃_i = [scale·xq_i, last[0]], ỹ_j = [y_j, last[1]]), or, with ``values`` None, the
    counts (None, None, counts) of `gram_counts`, by the fused compiled pass
    (`meanfield.sums.compiled.exp_sums4`): one call, its problems shared among numba's threads, forms
    the inner products, the counts, the exponentials (a vectorised polynomial within 1 ulp of
    np.exp) and the sums together, column by column; with ``attention`` = (w, v) the values
    [v w_j y_j, w_j] are formed there too, and ``causal`` (a `Causal`) limits the rows of each
    column and adds the position bias. None where it does not apply (no numba, more than 4
    coordinates or values, no points)."""
    vals = np.empty(y.shape[:-2] + (y.shape[-2], 0)) if values is None else values
    xf, yf, vf, unflatten = _flatten(xq, y, vals)
    K, n, m = xf.shape[0], xf.shape[1], yf.shape[1]
    P = yf.shape[-1] + 1 if attention is not None else vf.shape[-1]
    if not n * m or not compiled.fused_available(xf.shape[-1] + (last is not None), P):
        return None
    xf, yf, vf = (np.ascontiguousarray(a, dtype=float) for a in (xf, yf, vf))
    counts = np.zeros((K, n), dtype=np.int64) if threshold is not None else None
    threads = 1 if K * n * m < _PARALLEL_MIN else threads
    if values is None and attention is None:
        def count(part):
            for a, b in part:
                compiled.gram_counts4(xf[a:b], yf[a:b], threshold, counts[a:b])

        _run(count, _spans(K, 1 if threads == 1 else 4 * threads), threads, K * n * m)
        return unflatten(np.empty((K, n, 0)), None, counts)
    S = np.empty((K, n, P))
    mask = None
    if causal is not None and causal.active:
        mask = (causal.starts(m), causal.a, causal.b)
    if threads > 1 and K < threads:                      # too few problems to share: share their rows
        _fused_rows(xf, yf, vf, threshold, S, counts, scale, last, attention, clamp, threads, mask)
    else:
        compiled.exp_sums4(xf, yf, vf, threshold, S, counts, scale, last, attention, clamp, threads, mask)
    if attention is not None:                            # no axes of values to restore: those of x and y
        lead = np.broadcast_shapes(xq.shape[:-2], y.shape[:-2])
        return S.reshape(lead + (n, P)), None, None if counts is None else counts.reshape(lead + (n,))
    return unflatten(S, None, counts)


def _fused_rows(x, y, values, threshold, S, counts, scale, last, attention, clamp, threads, mask):
    """`compiled.exp_sums4` on parts of the rows of each problem, shared among ``threads`` Python threads
    (each call holds no GIL): a part of rows [r0, r1) takes only the columns some of its rows see (the
    columns j with start[j] < r1 under a causal mask), and the parts carry equal numbers of pairs, the
    costliest first. A row's sums do not depend on the split (`compiled.exp_sums4`): the same bits."""
    K, n, m = x.shape[0], x.shape[1], y.shape[1]
    start, ra, cb = mask if mask is not None else (None, None, None)
    seen = np.full(n, m, dtype=np.int64) if start is None else np.searchsorted(start, np.arange(n), side="right")
    cost = np.concatenate([[0], np.cumsum(seen, dtype=float)])
    cuts = np.searchsorted(cost, np.linspace(0.0, cost[-1], 4 * threads + 1)[1:-1])
    bounds = np.unique(np.concatenate([[0], np.clip(cuts, 0, n), [n]]))
    parts = [(g, a, b) for g in range(K) for a, b in zip(bounds[:-1], bounds[1:])]
    parts.sort(key=lambda part: -(cost[part[2]] - cost[part[1]]))

    def work(part):
        g, a, b = part
        top = int(seen[b - 1])
        if top == 0:                                     # no row of the part sees a column
            S[g, a:b] = 0.0
            return
        w = None if attention is None else (attention[0][:top], attention[1])
        rows = None if start is None else (np.maximum(start[:top] - a, 0), None if ra is None else ra[a:b],
                                            None if cb is None else cb[:top])
        compiled.exp_sums4(x[g:g + 1, a:b], y[g:g + 1, :top], values[g:g + 1, :top], threshold, S[g:g + 1, a:b],
                           None if counts is None else counts[g:g + 1, a:b], scale, last, w, clamp, 1, rows)

    share_out(work, parts, threads)


def _spans(size, parts):
    """``parts`` contiguous (start, stop) ranges covering range(size), as even as possible (none empty)."""
    parts = min(parts, size)
    return [(k * size // parts, (k + 1) * size // parts) for k in range(parts)]


def _tile(xq, yt, values, kind, clamp, cols, threshold, S, c, counts, ends=None):
    """Rows xq (G, r, d') of G problems against all columns yt (G, d', m) (contiguous), ``cols`` at a
    time, into S (G, r, P), the running shift c (G, r) and the counts (G, r); with ``ends`` (r,), row i
    takes the columns j < ends[i] only."""
    G, r = xq.shape[:2]
    m = yt.shape[2]
    if ends is not None:
        m = int(ends[-1])
        if m == 0:                                        # no row of the tile sees a column
            S[...] = 0.0
            if c is not None:
                c[...] = 0.0
            return
    buf = _buffer(G * r * min(cols, m))
    for a in range(0, m, cols):
        b = min(a + cols, m)
        L = buf[:G * r * (b - a)].reshape(G, r, b - a)
        np.matmul(xq, yt[:, :, a:b], out=L)
        if counts is not None and not add_row_counts(L, threshold, counts):
            counts += _row_counts(L, threshold)
        if kind == "count":
            continue
        cut = None
        if ends is not None and b > ends[0]:              # the columns [lo, b) that some rows do not see
            lo = max(a, int(ends[0]))
            cut, Lcut = np.arange(lo, b) >= ends[:, None], L[..., lo - a:]
        if kind == "running":
            if cut is not None:
                np.copyto(Lcut, -np.inf, where=cut)
            top = L.max(axis=-1)
            if a == 0:
                if cut is not None:                       # rows with no column (ends[i] = 0)
                    top[~np.isfinite(top)] = 0.0
                c[...] = top
            else:
                c_new = np.maximum(c, top)
                S *= np.exp(c - c_new)[..., None]
                c[...] = c_new
            L -= c[..., None]
        if clamp:
            np.maximum(L, EXP_FLOOR, out=L)
        with np.errstate(over="ignore"):      # only columns a row does not see (b_j > a_i) overflow: set to 0 below
            np.exp(L, out=L)
        if cut is not None:
            np.copyto(Lcut, 0.0, where=cut)
        if a == 0:
            np.matmul(L, values[:, a:b], out=S)
        else:
            S += L @ values[:, a:b]


_BYTES = np.uint64(0x0101010101010101)
_LOW8 = np.uint64(0x00FF00FF00FF00FF)
_LANES16 = np.uint64(0x0001000100010001)


def _row_counts(L, threshold):
    """Σ_j [L_ij >= threshold] for every row of L (..., w): the comparison as bytes, added 8 at a time
    as uint64 words (each byte lane stays <= 255), then the lanes summed by two multiplications,
    4x faster than ``np.count_nonzero(..., axis=-1)``."""
    w = L.shape[-1]
    words = -(-w // 8)
    if words > 255:
        return np.count_nonzero(L >= threshold, axis=-1)
    flags = np.zeros(L.shape[:-1] + (8 * words,), dtype=bool)
    np.greater_equal(L, threshold, out=flags[..., :w])
    v = flags.view(np.uint64)
    s = v[..., 0].copy()
    if words <= 8:
        for k in range(1, words):
            s += v[..., k]
    else:
        s = v.sum(axis=-1, dtype=np.uint64)
    s = (s & _LOW8) + ((s >> np.uint64(8)) & _LOW8)          # 16-bit lanes
    return ((s * _LANES16) >> np.uint64(48)).astype(np.int64)


def kernel_energy(beta, x, w, chunk=1024, threads=None):
    """Σ_ij w_i w_j e^{β⟨x_i, x_j⟩ − |β|}: the interaction energy (3.5) times 2β e^{−|β|}, in blocks.

    x (..., n, d) unit vectors, w (n,) or (..., n). Returns a float array of shape (...,), each in
    [e^{−2|β|}(Σw)², (Σw)²]. This is `kernel_sums` with values w and the fixed shift c = |β|.
    """
    x = np.asarray(x, dtype=float)
    w = np.asarray(w, dtype=float)
    S, _ = kernel_sums(x, x, w[..., None], beta, shift="fixed", chunk=chunk, threads=threads)
    return np.einsum("...i,...i->...", S[..., 0], w)
