"""The fused kernel sums for points of at most 4 coordinates, compiled with numba (imported by
`meanfield.sums.compiled` only when numba is present).

One pass over the columns j forms, for a block of rows i at once, the inner products ⟨x̃_i, ỹ_j⟩,
the counts of those >= a threshold, the exponentials and the weighted sums Σ_j e^{⟨x̃_i, ỹ_j⟩} F_j
(`meanfield.sums.kernelsums`, docs/mathematics.md §11): a block is one call that holds no GIL, so that
two threads run at nearly twice the speed of one, and nothing of size n·m is written to memory.
The functions are module-level (not closures) so that numba's on-disk cache finds them again.
"""
import numpy as np
from numba import njit, prange

# e^z for EXP_LOW <= z <= 300 (the callers raise z to EXP_LOW when it can be lower): z = k ln 2 + r with k = round(z/ln 2) and ln 2 split into
# ln2_hi + ln2_lo (Cody–Waite: k·ln2_hi is exact), |r| <= ln 2/2, e^r by its minimax polynomial of
# degree 11 on [−ln 2/2, ln 2/2] (mpmath.chebyfit; error 3.2e-18), then 2^k by adding k to the
# exponent bits of 1.0. Within 1 ulp of the correctly rounded e^z on [−700, 300] (tests/test_compiled.py),
# as np.exp is. No branches, so LLVM vectorises it. The callers keep z <= 300.
EXP_LOW = -700.0
_LOG2E, _LN2_HI, _LN2_LO = 1.4426950408889634, 6.93147180369123816490e-01, 1.90821492927058770002e-10
_ROUND = 6755399441055744.0                                   # 1.5·2^52: (z + _ROUND) − _ROUND rounds z
_ONE_BITS = np.int64(1023 << 52)                              # the bits of 1.0: (k << 52) + these are 2^k's
P11, P10, P9, P8, P7, P6, P5, P4, P3, P2, P1, P0 = (
    2.5110037605963777e-08, 2.763263963904103e-07, 2.755724091857897e-06, 2.4801485482328494e-05,
    0.00019841269890047113, 0.0013888888952314775, 0.008333333333319601, 0.0416666666664881,
    0.1666666666666668, 0.5000000000000019, 1.0, 1.0)     # highest degree first

# no bounds checks; x/0 as in numpy; a·b + c may be one fused multiply-add (the same in every call)
_OPTS = dict(nogil=True, boundscheck=False, error_model="numpy", fastmath={"contract"})
_INLINE = dict(inline="always", **_OPTS)


@njit(**_INLINE)
def expo(z):
    t = z * _LOG2E + _ROUND                  # = _ROUND + k exactly: k sits in the low bits of t
    k = t - _ROUND
    r = (z - k * _LN2_HI) - k * _LN2_LO
    q = P11 * r + P10
    q = q * r + P9
    q = q * r + P8
    q = q * r + P7
    q = q * r + P6
    q = q * r + P5
    q = q * r + P4
    q = q * r + P3
    q = q * r + P2
    q = q * r + P1
    q = q * r + P0
    scale = np.int64((np.float64(t).view(np.int64) << 52) + _ONE_BITS)                  # the bits of 2^k
    return q * scale.view(np.float64)


@njit(**_INLINE)
def _dot4(xt, i, p):
    return ((xt[0, i] * p[0] + xt[1, i] * p[1]) + xt[2, i] * p[2]) + xt[3, i] * p[3]


@njit(**_INLINE)
def _point4(a, g, j, k, extra, last):
    """a[g, j] (k <= 4 coordinates) as 4: then ``last`` if ``extra``, then zeros."""
    return (a[g, j, 0],
            a[g, j, 1] if k > 1 else (last if extra else 0.0),
            a[g, j, 2] if k > 2 else (last if extra and k == 2 else 0.0),
            a[g, j, 3] if k > 3 else (last if extra and k == 3 else 0.0))


@njit(**_INLINE)
def _values4(values, y, g, j, ky, w, v, scaled):
    """values[g, j] as 4 (zeros appended) or, with weights w, [v·w_j y[g, j], w_j] (y·v·w in the
    order of `meanfield.sums.compiled.weighted`); ``w is None`` is resolved when the kernel is compiled."""
    if w is None:
        return _point4(values, g, j, values.shape[2], False, 0.0)
    wj = w[j]
    return ((y[g, j, 0] * v if scaled else y[g, j, 0]) * wj,
            (y[g, j, 1] * v if scaled else y[g, j, 1]) * wj if ky > 1 else wj,
            (y[g, j, 2] * v if scaled else y[g, j, 2]) * wj if ky > 2 else (wj if ky == 2 else 0.0),
            wj if ky == 3 else 0.0)


@njit(**_INLINE)
def _rows4(x, g, scale, extra, last, xt):
    """xt[:, i] = [scale·x[g, i], last if extra, 0, …] (the rows, transposed, as 4 coordinates)."""
    k = x.shape[2]
    for c in range(4):
        for i in range(x.shape[1]):
            xt[c, i] = x[g, i, c] * scale if c < k else (last if extra and c == k else 0.0)


@njit(**_INLINE)
def _column(g, j, i0, i1, xt, y, ky, extra, ylast, values, w, v, scaled, threshold, count, clamp, ra, cb, hb, cnt,
            a0, a1, a2, a3):
    """Column j of problem g added to the rows [i0, i1) (the tail of `_problem`). The bounds are uint64, as
    in `_problem`'s loops: numba then drops its negative-index checks, and LLVM vectorises the loop."""
    p = _point4(y, g, j, ky, extra, ylast)
    u0, u1, u2, u3 = _values4(values, y, g, j, ky, w, v, scaled)
    for i in range(i0, i1):
        La = _dot4(xt, i, p)
        if count:
            cnt[i] += La >= threshold
        if ra is not None:
            La = (La + cb[hb, j]) - ra[hb, i]
        Ea = expo(max(La, EXP_LOW) if clamp else La)
        a0[i] += Ea * u0
        a1[i] += Ea * u1
        a2[i] += Ea * u2
        a3[i] += Ea * u3


@njit(**_OPTS)                # not inlined in numba's IR (the parallel pass's array analysis fails on it)
def _problem(g, x, scale, y, extra, xlast, ylast, values, w, v, scaled, threshold, count, clamp, S, counts, scratch,
             start, ra, cb):
    """The sums and counts of problem g (see `exp_sums4`)."""
    r, m, ky = x.shape[1], y.shape[1], y.shape[2]
    hs = hb = 0                                 # the mask's and the bias's row: g's own, or one for all
    if start is not None:                       # a causal mask: column j enters the rows i >= start[j]
        hs = g if start.shape[0] > 1 else 0
        m = 0
        while m < start.shape[1] and start[hs, m] < r:
            m += 1
    if ra is not None:
        hb = g if ra.shape[0] > 1 else 0
    P = S.shape[2]
    xt, a0, a1, a2, a3 = scratch[:4], scratch[4], scratch[5], scratch[6], scratch[7]
    _rows4(x, g, scale, extra, xlast, xt)
    a0[:r] = 0.0
    a1[:r] = 0.0
    a2[:r] = 0.0
    a3[:r] = 0.0
    cnt = counts[g]
    j = 0
    rows = np.uint64(r)
    while j + 3 < m:
        lo = sb = sc = sd = np.uint64(0)
        ba = bb = bc = bd = 0.0
        if ra is not None:                      # the column bias b_j, read before the loop (hoisted)
            ba, bb, bc, bd = cb[hb, j], cb[hb, j + 1], cb[hb, j + 2], cb[hb, j + 3]
        if start is not None:                   # the rows from column j's first; columns j+1..j+3 start later
            lo, sb, sc, sd = (np.uint64(start[hs, j]), np.uint64(start[hs, j + 1]), np.uint64(start[hs, j + 2]),
                              np.uint64(start[hs, j + 3]))
        p, q, s, t = (_point4(y, g, j, ky, extra, ylast), _point4(y, g, j + 1, ky, extra, ylast),
                      _point4(y, g, j + 2, ky, extra, ylast), _point4(y, g, j + 3, ky, extra, ylast))
        u0, u1, u2, u3 = _values4(values, y, g, j, ky, w, v, scaled)
        w0, w1, w2, w3 = _values4(values, y, g, j + 1, ky, w, v, scaled)
        h0, h1, h2, h3 = _values4(values, y, g, j + 2, ky, w, v, scaled)
        k0, k1, k2, k3 = _values4(values, y, g, j + 3, ky, w, v, scaled)
        for i in range(lo, rows):
            La, Lb, Lc, Ld = _dot4(xt, i, p), _dot4(xt, i, q), _dot4(xt, i, s), _dot4(xt, i, t)
            if count:
                cnt[i] += ((La >= threshold) + (Lb >= threshold)) + ((Lc >= threshold) + (Ld >= threshold))
            if ra is not None:                  # the position bias b_j − a_i
                ai = ra[hb, i]
                La, Lb, Lc, Ld = (La + ba) - ai, (Lb + bb) - ai, (Lc + bc) - ai, (Ld + bd) - ai
            if clamp:
                La, Lb, Lc, Ld = max(La, EXP_LOW), max(Lb, EXP_LOW), max(Lc, EXP_LOW), max(Ld, EXP_LOW)
            Ea, Eb, Ec, Ed = expo(La), expo(Lb), expo(Lc), expo(Ld)
            if start is not None:
                Eb, Ec, Ed = Eb if i >= sb else 0.0, Ec if i >= sc else 0.0, Ed if i >= sd else 0.0
            a0[i] = (((a0[i] + Ea * u0) + Eb * w0) + Ec * h0) + Ed * k0
            a1[i] = (((a1[i] + Ea * u1) + Eb * w1) + Ec * h1) + Ed * k1
            a2[i] = (((a2[i] + Ea * u2) + Eb * w2) + Ec * h2) + Ed * k2
            a3[i] = (((a3[i] + Ea * u3) + Eb * w3) + Ec * h3) + Ed * k3
        j += 4
    while j < m:
        _column(g, j, np.uint64(0 if start is None else start[hs, j]), rows, xt, y, ky, extra, ylast, values, w, v,
                scaled, threshold, count, clamp, ra, cb, hb, cnt, a0, a1, a2, a3)
        j += 1
    for i in range(r):
        total = (a0[i], a1[i], a2[i], a3[i])
        for c in range(P):
            S[g, i, c] = total[c]


@njit(cache=True, **_OPTS)
def exp_sums4(x, scale, y, extra, xlast, ylast, values, w, v, scaled, threshold, count, clamp, S, counts, scratch,
              start=None, ra=None, cb=None):
    """S[g, i] = Σ_j e^{⟨x̃_i, ỹ_j⟩} F_j with x̃_i = [scale·x[g, i], xlast], ỹ_j = [y[g, j], ylast]
    (the last coordinates if ``extra``; zeros up to 4) and F_j = values[g, j], or [v·w_j y[g, j], w_j]
    when the weights ``w`` are given (v if ``scaled``); the columns are added in order, four at a
    time, the exponents raised to EXP_LOW if ``clamp``. counts[g, i] += #{j : ⟨x̃_i, ỹ_j⟩ >= threshold}
    if ``count``. Each column's coordinates and values are read into locals before the loop over the
    rows i, which LLVM vectorises (it could not hoist loads that the stores to the scratch rows might
    alias). ``scratch``: (8, r). With ``start`` (H, m) (non-decreasing rows), column j of problem g
    enters only the rows i >= start[h, j] (a causal mask), and with ``ra`` (H, r), ``cb`` (H, m) the
    exponent of (i, j) gains cb[h, j] − ra[h, i] (a position bias): h = g for H > 1 (each problem its
    own mask), h = 0 for H = 1 (one for all)."""
    for g in range(x.shape[0]):
        _problem(g, x, scale, y, extra, xlast, ylast, values, w, v, scaled, threshold, count, clamp, S, counts, scratch,
                 start, ra, cb)


@njit(cache=True, parallel=True, **_OPTS)
def exp_sums4_parallel(x, scale, y, extra, xlast, ylast, values, w, v, scaled, threshold, count, clamp, S, counts,
                       parts, start=None, ra=None, cb=None):
    """`exp_sums4` with the problems in ``parts`` contiguous parts shared among numba's threads (the
    same operations for every problem: the bits do not depend on the threads)."""
    G = x.shape[0]
    for k in prange(parts):
        scratch = np.empty((8, x.shape[1]))
        for g in range(k * G // parts, (k + 1) * G // parts):
            _problem(g, x, scale, y, extra, xlast, ylast, values, w, v, scaled, threshold, count, clamp, S, counts,
                     scratch, start, ra, cb)


@njit(cache=True, **_OPTS)
def gram_counts4(x, y, threshold, counts, scratch):
    """counts[g, i] += #{j : ⟨x[g, i], y[g, j]⟩ >= threshold}, the inner products as in exp_sums4."""
    G, r, m, ky = x.shape[0], x.shape[1], y.shape[1], y.shape[2]
    xt = scratch[:4]
    for g in range(G):
        _rows4(x, g, 1.0, False, 0.0, xt)
        cnt = counts[g]
        for j in range(m):
            p = _point4(y, g, j, ky, False, 0.0)
            for i in range(r):
                cnt[i] += _dot4(xt, i, p) >= threshold


@njit(cache=True, **_OPTS)
def cluster_counts4(x, threshold, out, scratch, parent):
    """out[g] = the number of connected components of the graph i ~ j ⟺ ⟨x[g, i], x[g, j]⟩ >= threshold
    (the inner products as in `gram_counts4`), by union–find with path halving."""
    G, n, k = x.shape[0], x.shape[1], x.shape[2]
    xt, hit = scratch[:4], scratch[4]
    for g in range(G):
        _rows4(x, g, 1.0, False, 0.0, xt)
        for i in range(n):
            parent[i] = i
        components = n
        for j in range(1, n):
            p = _point4(x, g, j, k, False, 0.0)
            for i in range(j):                                # vectorised: the column's inner products
                hit[i] = _dot4(xt, i, p)
            b = j                                             # the root of j, kept as the unions go
            while parent[b] != b:
                b = parent[b]
            for i in range(j):
                if hit[i] >= threshold:
                    a = i
                    while parent[a] != a:
                        parent[a] = parent[parent[a]]
                        a = parent[a]
                    if a != b:
                        parent[max(a, b)] = min(a, b)
                        b = min(a, b)
                        components -= 1
        out[g] = components


@njit(cache=True, **_OPTS)
def exp_values(z, out):
    """out = expo(max(z, EXP_LOW)) elementwise (the exponential of the fused sums, for its test)."""
    for i in range(z.shape[0]):
        out[i] = expo(max(z[i], EXP_LOW))


# -- Fourier sums on the circle, block by block (the causal spectral sums of `meanfield.sums.spectralsums`) --

CHUNK = 256      # points per pass over the modes: their powers stay in the L1 cache


@njit(**_OPTS)
def _circle_coefficients(k, cos, sin, w, bounds, out, pr, pi):
    """out[k, 0] = (Re, Im) of Σ_{j in block k} w_j e^{−imθ_j}, m = 0..L: the powers e^{imθ_j} by the recurrence
    p ← p·e^{iθ_j}, CHUNK points at a time; each mode's sum in four running parts (the points j mod 4), added
    at the end. The same operations for a block whichever call makes it."""
    a, b = bounds[k], bounds[k + 1]
    acc = np.zeros((out.shape[3], 8))
    for c0 in range(a, b, CHUNK):
        c1 = min(c0 + CHUNK, b)
        r, q4 = c1 - c0, (c1 - c0) // 4 * 4
        cs, sn, ww = cos[c0:c1], sin[c0:c1], w[c0:c1]
        for j in range(r):
            pr[j], pi[j] = ww[j], 0.0
        for m in range(out.shape[3]):
            r0, r1, r2, r3, i0, i1, i2, i3 = acc[m]
            for j in range(0, q4, 4):
                r0, r1, r2, r3 = r0 + pr[j], r1 + pr[j + 1], r2 + pr[j + 2], r3 + pr[j + 3]
                i0, i1, i2, i3 = i0 - pi[j], i1 - pi[j + 1], i2 - pi[j + 2], i3 - pi[j + 3]
                for u in range(j, j + 4):
                    pr[u], pi[u] = pr[u] * cs[u] - pi[u] * sn[u], pr[u] * sn[u] + pi[u] * cs[u]
            for j in range(q4, r):
                r0, i0 = r0 + pr[j], i0 - pi[j]
                pr[j], pi[j] = pr[j] * cs[j] - pi[j] * sn[j], pr[j] * sn[j] + pi[j] * cs[j]
            acc[m, 0], acc[m, 1], acc[m, 2], acc[m, 3], acc[m, 4], acc[m, 5], acc[m, 6], acc[m, 7] = \
                r0, r1, r2, r3, i0, i1, i2, i3
    for m in range(out.shape[3]):
        out[k, 0, 0, m] = (acc[m, 0] + acc[m, 1]) + (acc[m, 2] + acc[m, 3])
        out[k, 0, 1, m] = (acc[m, 4] + acc[m, 5]) + (acc[m, 6] + acc[m, 7])


@njit(**_OPTS)
def _circle_synthesis(k, cos, sin, g, bounds, out, pr, pi):
    """out[:, j] = Re Σ_{m=-L..L} g[k, :, m] e^{imθ_j} for the points j of block k, with g[k, q, −m] the
    conjugate of g[k, q, m] (real fields): g_0 + 2 Re Σ_{m>0} g_m e^{imθ_j}; g (K, P, 2, L+1) as (Re, Im),
    P <= 3 fields made in one pass over CHUNK points per mode, each point in the same operations."""
    a, b = bounds[k], bounds[k + 1]
    P = g.shape[1]
    spare = np.empty((2, CHUNK))                # the rows of P < 3
    for c0 in range(a, b, CHUNK):
        c1 = min(c0 + CHUNK, b)
        cs, sn = cos[c0:c1], sin[c0:c1]
        o0 = out[0, c0:c1]
        o1 = out[1, c0:c1] if P > 1 else spare[0, :c1 - c0]
        o2 = out[2, c0:c1] if P > 2 else spare[1, :c1 - c0]
        for j in range(c1 - c0):
            pr[j], pi[j] = 1.0, 0.0
            o0[j] = o1[j] = o2[j] = 0.0
        for m in range(g.shape[3]):
            f = 1.0 if m == 0 else 2.0
            a0, b0 = f * g[k, 0, 0, m], f * g[k, 0, 1, m]
            a1, b1 = (f * g[k, 1, 0, m], f * g[k, 1, 1, m]) if P > 1 else (0.0, 0.0)
            a2, b2 = (f * g[k, 2, 0, m], f * g[k, 2, 1, m]) if P > 2 else (0.0, 0.0)
            for j in range(c1 - c0):
                p, q = pr[j], pi[j]
                o0[j] += a0 * p - b0 * q
                o1[j] += a1 * p - b1 * q
                o2[j] += a2 * p - b2 * q
                pr[j], pi[j] = p * cs[j] - q * sn[j], p * sn[j] + q * cs[j]


@njit(cache=True, **_OPTS)
def circle_blocks(cos, sin, w, g, bounds, out, synthesis):
    """Block k = points bounds[k]..bounds[k+1] of the circle (θ given by its cos and sin): with ``synthesis``
    False, g[k, 0] = the coefficients (Re, Im) (2, L+1) of Σ_j w_j δ_{θ_j} (`_circle_coefficients`); with
    ``synthesis``, out (P, n) = the real fields of the coefficients g[k] (P, 2, L+1) at the block's points
    (`_circle_synthesis`). Each block in the same operations, whichever call does it: the callers share
    runs of blocks among threads with the same bits."""
    pr, pi = np.empty(CHUNK), np.empty(CHUNK)          # the powers e^{imθ_j} of a chunk of points
    for k in range(bounds.shape[0] - 1):
        if synthesis:
            _circle_synthesis(k, cos, sin, g, bounds, out, pr, pi)
        else:
            _circle_coefficients(k, cos, sin, w, bounds, g, pr, pi)


@njit(cache=True, **_OPTS)
def circle_near(cos, sin, S, w, bounds, Zs, G, g):
    """The first pass of the causal spectral sums on S^1 over a run of blocks (block k = points
    bounds[k]..bounds[k+1]): the own sums S[k] (rows of [Σ e y_j, Σ e]) into Zs and the tangent part of G,
    G_j = s_j − ⟨x_j, s_j⟩x_j, then the block's coefficients g[k, 0] of Σ_j w_j δ_{θ_j} (`_circle_coefficients`)."""
    pr, pi = np.empty(CHUNK), np.empty(CHUNK)          # the powers e^{imθ_j} of a chunk of points
    for k in range(bounds.shape[0] - 1):
        a = bounds[k]
        for j in range(bounds[k + 1] - a):
            s0, s1 = S[k, j, 0], S[k, j, 1]
            c, s = cos[a + j], sin[a + j]
            t = c * s0 + s * s1
            Zs[a + j] = S[k, j, 2]
            G[a + j, 0] = s0 - t * c
            G[a + j, 1] = s1 - t * s
        _circle_coefficients(k, cos, sin, w, bounds, g, pr, pi)


@njit(cache=True, **_OPTS)
def circle_far(cos, sin, g, bounds, decay, Zs, G):
    """The second pass of the causal spectral sums on S^1 over a run of blocks: the fields f_0, f_1 of the
    coefficients g[k] (P = 2, `_circle_synthesis`) at block k's points j, added as Zs_j += d_j f_0 and
    G_j += d_j f_1 (−sin θ_j, cos θ_j), d = ``decay``."""
    pr, pi = np.empty(CHUNK), np.empty(CHUNK)          # the powers e^{imθ_j} of a chunk of points
    out = np.empty((2, bounds[bounds.shape[0] - 1]))
    for k in range(bounds.shape[0] - 1):
        _circle_synthesis(k, cos, sin, g, bounds, out, pr, pi)
        for j in range(bounds[k], bounds[k + 1]):
            Zs[j] += decay[j] * out[0, j]
            f = decay[j] * out[1, j]
            G[j, 0] += f * -sin[j]
            G[j, 1] += f * cos[j]


# the spectral sums on S^2 (`meanfield.sums.spectralsums`): the points' angles and frame, the field in that frame
@njit(**_INLINE)
def atan2(y, x):
    """arctan2 within 3 ulp of numpy's, in selects that vectorise (libm's atan2 does not): Cephes' rational
    approximation of atan on |u| <= tan(π/8) after the reductions t = min/max(|x|, |y|) and
    u = (t − 1)/(t + 1) above tan(π/8)."""
    ay, ax = abs(y), abs(x)
    swap = ay > ax
    top, bottom = (ax, ay) if swap else (ay, ax)
    t = top / bottom if bottom > 0 else 0.0
    mid = t > 0.41421356237309504880
    u = (t - 1.0) / (t + 1.0) if mid else t
    z = u * u
    p = (((-8.750608600031904122785e-1 * z - 1.615753718733365076637e1) * z - 7.500855792314704667340e1) * z
         - 1.228866684490136173410e2) * z - 6.485021904942025371773e1
    q = ((((z + 2.485846490142306297962e1) * z + 1.650270098316988542046e2) * z + 4.328810604912902668951e2) * z
         + 4.853903996359136964868e2) * z + 1.945506571482613964425e2
    r = u + u * (z * p / q)
    r = 0.7853981633974483 + (r + 3.061616997868382943065e-17) if mid else r     # π/4 (and its low bits)
    r = 1.5707963267948966 - r + 6.123233995736765886130e-17 if swap else r      # π/2
    r = 3.141592653589793 - r + 1.224646799147353177226e-16 if x < 0 else r      # π
    return -r if y < 0 else r


@njit(cache=True, **_OPTS)
def sphere_angles(x, loc, ct, st, cp, sp):
    """loc (n, 2) = (θ, φ mod 2π) and the frame (cos θ, sin θ, cos φ, sin φ) of the directions of x (n, k >= 3)."""
    n = x.shape[0]
    a, b, c, theta, phi = np.empty(n), np.empty(n), np.empty(n), np.empty(n), np.empty(n)
    for i in range(n):
        a[i], b[i], c[i] = x[i, 0], x[i, 1], x[i, 2]
    for i in range(n):                                # on contiguous columns: these loops vectorise
        theta[i] = atan2(np.sqrt(a[i] * a[i] + b[i] * b[i]), c[i])
        f = atan2(b[i], a[i])                         # in [−π, π]: numpy's mod 2π adds 2π below 0
        phi[i] = f + 2 * np.pi if f < 0 else f
    for i in range(n):
        rho2 = a[i] * a[i] + b[i] * b[i]
        rho = np.sqrt(rho2)
        inverse = 1.0 / rho
        cp[i] = a[i] * inverse if rho > 0 else 1.0    # φ = 0 at the poles, as arctan2 gives
        sp[i] = b[i] * inverse if rho > 0 else 0.0
        r = 1.0 / np.sqrt(rho2 + c[i] * c[i])
        ct[i], st[i] = c[i] * r, rho * r
    for i in range(n):
        loc[i, 0], loc[i, 1] = theta[i], phi[i]


@njit(cache=True, **_OPTS)
def frame_field(Zs, g, H, F, beta, normalized, scale, out):
    """out[a, :, :d] = X, out[a, :, d] = div_S X for the k groups a of n points (`compiled.frame_field`) from the
    syntheses Zs, H (k, n) and g (k, d − 1, n) in the points' frame F: on S^2 F = (cos θ, sin θ, cos φ, sin φ)
    (4, k, n), g = (G_θ, G_φ); on S^1 F = (cos θ, sin θ) (2, k, n), g = G_θ, G = g (−sin θ, cos θ). CHUNK points
    at a time in contiguous rows (the loops over them vectorise), then into out."""
    sphere = F.shape[0] == 4
    d = 3 if sphere else 2
    rows = np.empty((4, CHUNK))
    for a in range(Zs.shape[0]):
        for c0 in range(0, Zs.shape[1], CHUNK):
            c1 = min(c0 + CHUNK, Zs.shape[1])
            r = c1 - c0
            G0, G1, G2, div = rows[0, :r], rows[1, :r], rows[2, :r], rows[3, :r]
            Z, Hc, gt, ct, st = Zs[a, c0:c1], H[a, c0:c1], g[a, 0, c0:c1], F[0, a, c0:c1], F[1, a, c0:c1]
            if sphere:
                gp, cp, sp = g[a, 1, c0:c1], F[2, a, c0:c1], F[3, a, c0:c1]
                for i in range(r):
                    G0[i], G1[i], G2[i] = gt[i] * ct[i] * cp[i] - gp[i] * sp[i], gt[i] * ct[i] * sp[i] + gp[i] * cp[i], \
                        -gt[i] * st[i]
            else:
                for i in range(r):
                    G0[i], G1[i], G2[i] = gt[i] * -st[i], gt[i] * ct[i], 0.0
            if normalized:
                for i in range(r):
                    z = Z[i]
                    u, v, w = G0[i] / z, G1[i] / z, G2[i] / z
                    div[i] = scale * (Hc[i] / z - beta * (u * u + v * v + w * w))
                    G0[i], G1[i], G2[i] = scale * u, scale * v, scale * w
            else:
                for i in range(r):
                    div[i] = scale * Hc[i]
                    G0[i], G1[i], G2[i] = scale * G0[i], scale * G1[i], scale * G2[i]
            for i in range(r):
                for q in range(d):
                    out[a, c0 + i, q] = rows[q, i]
                out[a, c0 + i, d] = div[i]


@njit(cache=True, **_OPTS)
def circle_directions(z, out):
    """out[:, a·n + i] = (cos θ, sin θ) of the point z[a, i] (k, n, 2) of the plane: z/|z| (the bits of
    `compiled.normalise`): the coordinates copied into out's rows, then divided there (the loop vectorises)."""
    n = z.shape[1]
    for a in range(z.shape[0]):
        u, v = out[0, a * n:(a + 1) * n], out[1, a * n:(a + 1) * n]
        for i in range(n):
            u[i], v[i] = z[a, i, 0], z[a, i, 1]
        for i in range(n):
            r = np.sqrt(u[i] * u[i] + v[i] * v[i])
            u[i], v[i] = u[i] / r, v[i] / r


# the spherical median of `meanfield.observables.wasserstein.w1_to_dirac` on S^2
@njit(cache=True, **_OPTS)
def dirac_distances(a, b, c, w, z, out):
    """out[0, j] = d(x_j, z) and out[1, j] = sin d(x_j, z) = |x_j − z||x_j + z|/2 (unit vectors) for the columns
    (a, b, c) of the points; returns Σ_j w_j d(x_j, z)."""
    ang, sine = out[0], out[1]
    for i in range(a.shape[0]):                     # vectorises; the sum below runs in order
        m0, m1, m2, p0, p1, p2 = a[i] - z[0], b[i] - z[1], c[i] - z[2], a[i] + z[0], b[i] + z[1], c[i] + z[2]
        minus, plus = np.sqrt(m0 * m0 + m1 * m1 + m2 * m2), np.sqrt(p0 * p0 + p1 * p1 + p2 * p2)
        ang[i] = 2.0 * atan2(minus, plus)
        sine[i] = 0.5 * minus * plus
    total = 0.0
    for i in range(a.shape[0]):
        total += w[i] * ang[i]
    return total


@njit(cache=True, **_OPTS)
def dirac_gradient(a, b, c, w, z, dist, g, terms):
    """g = −Σ w_j t_j/|t_j| and the returned curvature of `compiled.dirac_gradient` (−1 when no atom counts),
    from ``dist`` of `dirac_distances`; ``terms`` (5, n) scratch."""
    for i in range(a.shape[0]):                     # vectorises; the sums below run in order
        s = a[i] * z[0] + b[i] * z[1] + c[i] * z[2]
        t0, t1, t2 = a[i] - s * z[0], b[i] - s * z[1], c[i] - s * z[2]
        norm = np.sqrt(t0 * t0 + t1 * t1 + t2 * t2)
        ok = norm > 1e-14
        coef = w[i] / norm if ok else 0.0
        terms[0, i], terms[1, i], terms[2, i] = coef * t0, coef * t1, coef * t2
        curvature = w[i] * dist[0, i] / max(dist[1, i], 1e-14) / max(dist[0, i], 1e-14)
        terms[3, i] = curvature if ok else 0.0
        terms[4, i] = 1.0 if ok else 0.0
    g[0], g[1], g[2], hess, count = 0.0, 0.0, 0.0, 0.0, 0.0
    for i in range(a.shape[0]):
        g[0], g[1], g[2] = g[0] - terms[0, i], g[1] - terms[1, i], g[2] - terms[2, i]
        hess += terms[3, i]
        count += terms[4, i]
    return hess if count > 0 else -1.0
