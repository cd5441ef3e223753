"""Small loops that numpy runs slowly, compiled with numba when it is installed.

numpy's elementwise loops cost ~10 ns per innermost run, and an array of points (..., n, 3) divided
by a per-point scalar runs 3 elements at a time: y/|y|, the (SA) quotient S_x/S_1 and the weighted
values [w_j x_j, w_j] of a step take ~0.3 ms each for 32 768 points, as long as the exponentials of a
1024 × 32 × 32 block. The compiled loops below do the same IEEE operations in the same order (no
fused multiply-add, sums of squares from the first coordinate on, as numpy adds d < 8 terms), so
they give the same bits as their numpy twins, which run when numba is missing or ``ENABLED`` is
False (tests/test_compiled.py compares both). Each takes C-contiguous float64 arrays. The
benchmark: one euler-normalize step of B = 1024 clouds of n = 32 points on S^2 takes 1.9 ms with
them and 3.0 ms without (benchmarks/bench_phase_diagram.py; the exp floor is 0.76 ms).
"""
import os

import numpy as np

from ..threads import share_out
from ..errors import InvalidInput

ENABLED = os.environ.get("MEANFIELD_NUMBA", "1") != "0"
_KERNELS = None
# numba's threads (OpenMP) are not usable in a child forked after the parent used them: GNU OpenMP
# terminates it. A forked process runs the compiled passes on its own thread (the same bits).
_THREADS_OK = [True]
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=lambda: _THREADS_OK.__setitem__(0, False))


def _kernels():
    """The compiled loops (compiled on first use, cached on disk), or None without numba."""
    global _KERNELS
    if _KERNELS is None:
        try:
            from numba import njit  # deferred: numba is heavy
        except ImportError:                                     # numba missing: the numpy twins run
            _KERNELS = False
            return None
        # flat arrays, the common d = 3 and d = 2 written out so that LLVM vectorises them; error_model="numpy":
        # x/0 is inf or nan as in numpy (the default Python check stops vectorisation)
        jit = njit(cache=True, nogil=True, boundscheck=False, error_model="numpy")
        _KERNELS = {**_sums_loops(jit), **_sphere_loops(jit)}
        from . import _fused  # deferred: compiles with numba

        _KERNELS.update(exp_sums4=_fused.exp_sums4, exp_sums4_parallel=_fused.exp_sums4_parallel,
                        gram_counts4=_fused.gram_counts4, cluster_counts4=_fused.cluster_counts4,
                        circle_blocks=_fused.circle_blocks, circle_near=_fused.circle_near,
                        circle_far=_fused.circle_far, sphere_angles=_fused.sphere_angles,
                        frame_field=_fused.frame_field, circle_directions=_fused.circle_directions,
                        dirac_distances=_fused.dirac_distances,
                        dirac_gradient=_fused.dirac_gradient)
    return _KERNELS or None


def _sums_loops(jit):
    """The compiled loops of the kernel sums: the ratio of the accumulated sums, the weighted right-hand
    sides, the counts of a row above a threshold."""

    @jit
    def ratio(acc, p, out):
        N, d = acc.shape[0] // p, p - 1
        if p == 4:
            for i in range(N):
                den = acc[4 * i + 3]
                out[3 * i] = acc[4 * i] / den
                out[3 * i + 1] = acc[4 * i + 1] / den
                out[3 * i + 2] = acc[4 * i + 2] / den
        else:
            for i in range(N):
                den = acc[i * p + d]
                for k in range(d):
                    out[i * d + k] = acc[i * p + k] / den

    @jit
    def weighted(x, d, w, v, scale, out):
        N, n, p = x.shape[0] // d, w.shape[0], d + 1
        for i in range(N):
            wi = w[i % n]
            for k in range(d):
                out[i * p + k] = ((x[i * d + k] * v) if scale else x[i * d + k]) * wi
            out[i * p + d] = wi

    @jit
    def row_counts(L, m, threshold, out):
        for i in range(out.shape[0]):
            c = 0
            for j in range(m):
                if L[i * m + j] >= threshold:
                    c += 1
            out[i] += c
    return {"ratio": ratio, "weighted": weighted, "row_counts": row_counts}


def _sphere_loops(jit):
    """The compiled loops on the sphere: the retraction (normalise) and the tangent projection."""
    @jit
    def normalise(y, f, h, step, d, out):
        """(y + h·f)/|y + h·f| if ``step``, else y/|y|, row by row."""
        N = y.shape[0] // d
        if d == 3:
            for i in range(N):
                a, b, c = y[3 * i], y[3 * i + 1], y[3 * i + 2]
                if step:
                    a, b, c = a + h * f[3 * i], b + h * f[3 * i + 1], c + h * f[3 * i + 2]
                r = np.sqrt(a * a + b * b + c * c)
                out[3 * i] = a / r
                out[3 * i + 1] = b / r
                out[3 * i + 2] = c / r
        elif d == 2:
            for i in range(N):
                a, b = y[2 * i], y[2 * i + 1]
                if step:
                    a, b = a + h * f[2 * i], b + h * f[2 * i + 1]
                r = np.sqrt(a * a + b * b)
                out[2 * i] = a / r
                out[2 * i + 1] = b / r
        else:
            for i in range(N):
                r2 = 0.0
                for k in range(d):
                    u = y[i * d + k] + h * f[i * d + k] if step else y[i * d + k]
                    out[i * d + k] = u
                    r2 = u * u if k == 0 else r2 + u * u
                r = np.sqrt(r2)
                for k in range(d):
                    out[i * d + k] = out[i * d + k] / r

    @jit
    def project(x, f, d, out):
        N = x.shape[0] // d
        if d == 3:
            for i in range(N):
                a, b, c = x[3 * i], x[3 * i + 1], x[3 * i + 2]
                s = a * f[3 * i] + b * f[3 * i + 1] + c * f[3 * i + 2]
                out[3 * i] = f[3 * i] - s * a
                out[3 * i + 1] = f[3 * i + 1] - s * b
                out[3 * i + 2] = f[3 * i + 2] - s * c
        else:
            for i in range(N):
                s = x[i * d] * f[i * d]
                for k in range(1, d):
                    s += x[i * d + k] * f[i * d + k]
                for k in range(d):
                    out[i * d + k] = f[i * d + k] - s * x[i * d + k]
    return {"normalise": normalise, "project": project}


def _kernels_for(a, short=8):
    """The compiled loops when they apply: numba present and enabled, C-contiguous float64 points of
    fewer than ``short`` coordinates."""
    if not ENABLED or a.dtype != np.float64 or not a.flags.c_contiguous or a.ndim < 2 or a.shape[-1] >= short:
        return None
    return _kernels()


def ratio(acc):
    """acc[..., :d] / acc[..., d:] for acc (..., d + 1): the (SA) quotient of the sums."""
    k = _kernels_for(acc, short=9)
    if k is None:
        return acc[..., :-1] / acc[..., -1:]
    out = np.empty(acc.shape[:-1] + (acc.shape[-1] - 1,))
    k["ratio"](acc.reshape(-1), acc.shape[-1], out.reshape(-1))
    return out


def weighted(x, w, v=None):
    """[(x_j·v)·w_j, w_j] (..., n, d + 1) for x (..., n, d) and weights w (n,) (v: None or a scalar)."""
    k = _kernels_for(x)
    w = np.ascontiguousarray(w, dtype=float)
    if k is None:
        d = x.shape[-1]
        out = np.empty(x.shape[:-1] + (d + 1,))
        np.multiply(x if v is None else x * v, w[:, None], out=out[..., :d])
        out[..., d] = w
        return out
    out = np.empty(x.shape[:-1] + (x.shape[-1] + 1,))
    k["weighted"](x.reshape(-1), x.shape[-1], w, 1.0 if v is None else float(v), v is not None, out.reshape(-1))
    return out


def normalise(y):
    """y/|y| row by row, |y|² summed from the first coordinate on (numpy's order for d < 8)."""
    d = y.shape[-1]
    if d >= 8:
        return y / np.linalg.norm(y, axis=-1, keepdims=True)
    k = _kernels_for(y)
    if k is None:
        r2 = y[..., 0] * y[..., 0]
        for j in range(1, d):
            r2 += y[..., j] * y[..., j]
        return y / np.sqrt(r2)[..., None]
    out = np.empty_like(y)
    flat = y.reshape(-1)
    k["normalise"](flat, flat, 0.0, False, d, out.reshape(-1))
    return out


def euler_normalise(y, h, f):
    """(y + h·f)/|y + h·f| row by row: the Euler update and the retraction onto the sphere in one
    pass, the bits of ``normalise(y + h * f)``."""
    d = y.shape[-1]
    k = _kernels_for(y) if d < 8 and f.flags.c_contiguous and f.dtype == np.float64 and f.shape == y.shape else None
    if k is None:
        return normalise(y + h * f)
    out = np.empty_like(y)
    k["normalise"](y.reshape(-1), f.reshape(-1), float(h), True, d, out.reshape(-1))
    return out


def project(x, f):
    """f − ⟨x, f⟩x row by row (the tangent part of f at unit x), ⟨x, f⟩ summed from the first coordinate on."""
    d = x.shape[-1]
    k = _kernels_for(x) if f.flags.c_contiguous and f.dtype == np.float64 else None
    if k is None:
        s = x[..., 0] * f[..., 0]
        for j in range(1, d):
            s += x[..., j] * f[..., j]
        return f - s[..., None] * x
    out = np.empty_like(f)
    k["project"](x.reshape(-1), f.reshape(-1), d, out.reshape(-1))
    return out


def add_row_counts(L, threshold, out):
    """out += Σ_j [L_ij >= threshold] for L (..., m) (C-contiguous) and an int64 ``out`` (...); False
    when the compiled loop does not apply (the caller counts with numpy)."""
    if not ENABLED or not L.flags.c_contiguous or not out.flags.c_contiguous or L.dtype != np.float64:
        return False
    k = _kernels()
    if k is None:
        return False
    k["row_counts"](L.reshape(-1), L.shape[-1], float(threshold), out.reshape(-1))
    return True


def fused_available(width, p):
    """Whether the fused kernel sums apply: numba present and enabled, points with ``width`` <= 4
    coordinates (the operands of the inner products, the shift's included) and ``p`` <= 4 values."""
    return ENABLED and width <= 4 and p <= 4 and _kernels() is not None


def exp_sums4(x, y, values, threshold, S, counts, scale=1.0, last=None, attention=None, clamp=True, threads=1,
              causal=None):
    """S (G, r, p) = Σ_j e^{⟨x̃_i, ỹ_j⟩} values_j for x (G, r, k), y (G, m, k) and values (G, m, p),
    k, p <= 4 (with ``last``: x̃_i = [scale·x_i, last[0]], ỹ_j = [y_j, last[1]], k <= 3; else x̃_i =
    scale·x_i, ỹ_j = y_j), the exponents raised to EXP_LOW if ``clamp`` (they must be <= 300, and
    >= EXP_LOW without ``clamp``: the caller's shift); with
    ``attention`` = (w, v), w (m,), the values are [v·w_j y_j, w_j] (p = k + 1, v None for 1, the
    bits of `weighted`) and ``values`` is not read. counts (G, r) += #{j : ⟨x̃_i, ỹ_j⟩ >= threshold}
    unless ``counts`` is None. One compiled pass without the GIL (`meanfield.sums._fused`), the problems
    shared among ``threads`` of numba's threads; the columns are added in order, so a row's sums do
    not depend on how the rows are split among calls or threads. All arrays C-contiguous float64
    (counts int64). ``causal`` = (start, ra, cb): column j enters the rows i >= start[j] (int64 (m,),
    non-decreasing) and the exponent of (i, j) gains cb[j] − ra[i] (ra (r,), cb (m,), or both None);
    or each problem its own: start (G, m), ra (G, r), cb (G, m)."""
    count = counts is not None
    extra = last is not None
    xlast, ylast = (float(last[0]), float(last[1])) if extra else (0.0, 0.0)
    w, v = attention if attention is not None else (None, None)
    args = (x, float(scale), y, extra, xlast, ylast, values, w, 1.0 if v is None else float(v), v is not None,
            float(threshold) if count else 0.0, count, bool(clamp), S,
            counts if count else np.empty((x.shape[0], 0), dtype=np.int64))
    mask = (None, None, None) if causal is None else tuple(None if a is None else np.atleast_2d(a) for a in causal)
    if threads > 1 and x.shape[0] > 1 and _THREADS_OK[0]:
        import numba  # deferred: numba is heavy

        threads = min(threads, numba.config.NUMBA_NUM_THREADS, x.shape[0])
        numba.set_num_threads(threads)
        _kernels()["exp_sums4_parallel"](*args, min(x.shape[0], 4 * threads), *mask)
    else:
        _kernels()["exp_sums4"](*args, np.empty((8, x.shape[1])), *mask)


def _circle_blocks(cos, sin, w, g, bounds, out, synthesis, threads):
    """`_fused.circle_blocks` on runs of blocks shared among ``threads`` Python threads (each call holds no
    GIL): block k's rows g[k] and the points bounds[k]..bounds[k+1]."""
    cos, sin, w = (np.ascontiguousarray(a, dtype=float) for a in (cos, sin, w))
    bounds = np.ascontiguousarray(bounds, dtype=np.int64)
    K = len(bounds) - 1
    parts = min(K, 1 if threads <= 1 or not _THREADS_OK[0] else 4 * threads)
    cuts = [(k * K // parts, (k + 1) * K // parts) for k in range(parts)]

    def work(part):
        a, b = part
        _kernels()["circle_blocks"](cos, sin, w, g[a:b], bounds[a:b + 1], out, synthesis)

    share_out(work, cuts, min(threads, parts))


def circle_block_coefficients(cos, sin, w, bounds, lmax, threads=1):
    """c[k, m] = Σ_{bounds[k] <= j < bounds[k+1]} w_j e^{−imθ_j}, m = 0..lmax (K, lmax + 1) complex, for
    points θ_j on the circle given by cos θ_j and sin θ_j: the powers by the recurrence e^{i(m+1)θ} =
    e^{imθ}e^{iθ} (relative error about m ulp), runs of blocks shared among ``threads`` threads (the
    same bits on any number). Needs numba (`fused_available`)."""
    K = len(bounds) - 1
    g = np.empty((K, 1, 2, lmax + 1))
    _circle_blocks(cos, sin, w, g, bounds, np.empty((0, 0)), False, threads)
    return g[:, 0, 0] + 1j * g[:, 0, 1]


def circle_block_synthesis(cos, sin, g, bounds, threads=1):
    """f[q, j] = Re Σ_{m=−L..L} g[k, q, m] e^{imθ_j} = Re(g_0) + 2 Re Σ_{m>0} g[k, q, m] e^{imθ_j} at the
    points j of block k (bounds[k] <= j < bounds[k+1]), for the coefficients g (K, P, L + 1), m >= 0, of
    real fields (g_{−m} the conjugate of g_m), P <= 3: (P, n). As `circle_block_coefficients`."""
    if g.shape[1] > 3:
        raise InvalidInput(f"`g`: at most 3 fields (axis 1), got {g.shape[1]}.")
    g = np.ascontiguousarray(np.stack([g.real, g.imag], axis=2))
    out = np.empty((g.shape[1], len(cos)))
    _circle_blocks(cos, sin, np.empty(0), g, bounds, out, True, threads)
    return out


def circle_near(cos, sin, S, w, bounds, Zs, G, coeff):
    """The first pass of the causal spectral sums on S^1 over a run of blocks k (points bounds[k]..bounds[k+1]),
    in one call holding no GIL: block k's own sums S[k] (its rows of [Σ e y_j, Σ e], from `masked_batch`)
    into Zs_j and the tangent part G_j of Σ e y_j, then ``coeff`` (K, 1, 2, L + 1) = the (Re, Im) of block k's
    coefficients of Σ_j w_j δ_{θ_j}, as `circle_block_coefficients`. Zs (n,), G (n, 2) written in place."""
    _kernels()["circle_near"](cos, sin, S, w, bounds, Zs, G, coeff)


def circle_far(cos, sin, g, bounds, decay, Zs, G):
    """The second pass: the two fields of the coefficients g[k] (K, 2, 2, L + 1), (Re, Im) as in
    `circle_block_synthesis`, at block k's points j, added as Zs_j += d_j f_0 and G_j += d_j f_1 (−sin θ_j,
    cos θ_j) with d = ``decay`` (n,), in one call holding no GIL."""
    _kernels()["circle_far"](cos, sin, g, bounds, decay, Zs, G)


def gram_counts4(x, y, threshold, counts):
    """counts (G, r) += #{j : ⟨x_i, y_j⟩ >= threshold} for x (G, r, k), y (G, m, k), k <= 4."""
    _kernels()["gram_counts4"](x, y, float(threshold), counts, np.empty((4, x.shape[1])))


def cluster_counts4(x, threshold):
    """The number of connected components of i ~ j ⟺ ⟨x_i, x_j⟩ >= threshold for each cloud of x
    (G, n, k), k <= 4, C-contiguous float64: int64 (G,). One compiled pass per cloud, memory O(n)."""
    G, n = x.shape[0], x.shape[1]
    out = np.empty(G, dtype=np.int64)
    _kernels()["cluster_counts4"](x, float(threshold), out, np.empty((5, max(n, 1))), np.empty(max(n, 1), np.int64))
    return out


def compile_all():
    """Compile every loop above with the argument types the library passes it, and cache them on disk.

    numba compiles a loop the first time it meets a new combination of argument types (read-only or
    writable arrays, ``None`` or an array for the optional weights and causal mask): about 3 s each, so
    a fresh checkout's first particle runs, or the first minutes of its test suite (once in each of
    pytest's worker processes), pay for the same compilations again and again. `.ci/setup` calls this
    once after installing; later processes read the cache (``__pycache__/*.nbi``). Returns the number of
    calls made (42), 0 without numba.
    """
    if not ENABLED or _kernels() is None:
        return 0
    rng = np.random.default_rng(0)
    x = normalise(rng.standard_normal((1, 5, 3)))
    w = np.full(5, 0.2)
    calls = [lambda: ratio(np.abs(rng.standard_normal((1, 5, 4))) + 1.0), lambda: weighted(x, w),
             lambda: weighted(x, w, 2.0), lambda: euler_normalise(x, 0.1, x[..., ::-1].copy()),
             lambda: project(x, x[..., ::-1].copy()), lambda: add_row_counts(x[0] @ x[0].T, 0.5, np.zeros(5, np.int64)),
             lambda: gram_counts4(x, x, 0.5, np.zeros((1, 5), np.int64)), lambda: cluster_counts4(x, 0.5)]
    start, ra, cb = np.arange(5, dtype=np.int64), np.zeros(5), np.zeros(5)

    def sums(readonly, attention, causal, threads=1):
        G = 1 if threads == 1 else 2                              # threads share the problems (G of them)
        a, b, weights = np.repeat(x, G, axis=0), np.repeat(x, G, axis=0), w.copy()
        for array, frozen in zip((a, b, weights), readonly):
            array.setflags(write=not frozen)
        exp_sums4(a, b, np.ones((G, 5, 4)), 0.5, np.zeros((G, 5, 4)), np.zeros((G, 5), np.int64),
                  attention=None if attention is None else (weights, None), causal=causal, threads=threads)

    # the combinations the library makes: writable points with any weights and mask, read-only ones
    # (a model's frozen arrays) with the attention weights or alone
    writable, frozen = (False, False, False), (True, True, True)
    combinations = [(writable, a, c) for a in (None, True) for c in (None, (start, None, None), (start, ra, cb))]
    combinations += [(frozen, True, (start, None, None)), (frozen, True, (start, ra, cb)), (frozen, None, None),
                     ((True, False, False), None, None)]
    calls += [lambda r=r, a=a, c=c: sums(r, a, c) for r, a, c in combinations]
    calls += [lambda: sums((False,) * 3, None, None, threads=2), lambda: sums((False,) * 3, True, None, threads=2)]
    # masked batches on several threads (causal particles of B realisations: masked sums always take this pass)
    calls += [lambda r=r, a=a, c=c: sums(r, a, c, threads=2) for r, a, c in
              [(writable, a, c) for a in (None, True) for c in ((start, None, None), (start, ra, cb))]
              + [(frozen, True, (start, None, None)), (frozen, True, (start, ra, cb))]]
    # the causal spectral sums on S^1: the blocks' coefficients and synthesis (one loop, on any threads)
    bounds = np.array([0, 2, 5])
    cos, sin = x[0, :, 0].copy(), x[0, :, 1].copy()
    calls.append(lambda: circle_block_synthesis(cos, sin, circle_block_coefficients(cos, sin, w, bounds, 3)[:, None],
                                                bounds))
    Zs, G, coeff = np.empty(5), np.empty((5, 2)), np.empty((2, 1, 2, 4))
    calls.append(lambda: circle_near(cos, sin, np.ones((2, 3, 3)), w, bounds, Zs, G, coeff))
    calls.append(lambda: circle_far(cos, sin, np.ones((2, 2, 2, 4)), bounds, w, Zs, G))
    # the spectral sums on S^2: the angles of contiguous points and of the columns of a state's rows, the field
    # in the frame; the median of `w1_to_dirac`
    rows = np.concatenate([x[0], np.zeros((5, 1))], axis=1)
    frozen_points = x[0].copy()
    frozen_points.setflags(write=False)                   # a read-only state (a broadcast view)
    for points in (x[0], rows[:, :3], frozen_points):
        calls.append(lambda p=points: sphere_angles_into(p, np.empty((5, 2)), np.empty((4, 5))))
    # read-only values of the plain sums (a frozen array of values)
    frozen_values = np.ones((1, 5, 4))
    frozen_values.setflags(write=False)
    calls.append(lambda: exp_sums4(x.copy(), x.copy(), frozen_values, 0.5, np.zeros((1, 5, 4)), np.zeros((1, 5), np.int64)))
    # the field in the points' frame, on S^2 and S^1, of one group or of labels in (σ, x) (rows of a state, with
    # and without a companion); the directions of the labels on S^1
    labels = np.ones((2, 5, 6))
    for p, e in ((4, 4), (2, 3)):
        calls.append(lambda p=p, e=e: frame_field(w, np.ones((p // 2, 5)), w, np.ones((p, 5)), 1.0, True, 1.0,
                                                  np.empty((5, e))))
        for groups in (np.empty((2, 5, e)), labels[:, :4, :e]):
            calls.append(lambda p=p, o=groups: frame_field(np.ones((2, o.shape[1])), np.ones((2, p // 2, o.shape[1])),
                                                           np.ones((2, o.shape[1])), np.ones((p, 2, o.shape[1])),
                                                           1.0, True, 1.0, o))
    for z in (labels[..., :2], labels[..., :2].copy()):
        calls.append(lambda z=z: circle_directions(z))
    columns = dirac_columns(x[0])
    calls.append(lambda: dirac_gradient(columns, w, x[0, 0], dirac_distances(columns, w, x[0, 0])[1]))
    for call in calls:
        call()
    return len(calls)


def sphere_angles_into(x, loc, frame):
    """loc (n, 2) = (colatitude, longitude in [0, 2π)) of the points x (n, k >= 3, not necessarily of unit
    length: their directions) and the frame rows (cos θ, sin θ, cos φ, sin φ) (4 arrays (n,)), in one
    compiled pass; False when numba is missing or disabled (the caller computes them with numpy,
    `meanfield.sums.spectralsums.sphere_angles`)."""
    if not ENABLED or x.dtype != np.float64 or x.ndim != 2 or x.shape[1] < 3 or _kernels() is None:
        return False
    _kernels()["sphere_angles"](x, loc, *frame)
    return True


def frame_field(Zs, g, H, frame, beta, normalized, v, out):
    """The attention field and its divergence from the spectral sums in the frame of the points: on S^2
    (`sphere_angles_into`: frame (cos θ, sin θ, cos φ, sin φ), g = (g_θ, g_φ)) G = g_θ e_θ + g_φ e_φ, on S^1
    (frame (cos θ, sin θ), g = (g_θ,)) G = g_θ (−sin θ, cos θ); (SA) X = v G/Zs, div_S X = v(H/Zs − β|G/Zs|²),
    (USA) X = v e^{|β|} G, div_S X = v e^{|β|} H (docs/mathematics.md §9, §12), written to out[..., :d] and
    out[..., d]. Points: Zs, H (n,), g (d − 1, n), frame (2 or 4, n) and out (n, e > d) as
    `meanfield.sums.spectralsums.ZonalSums.frame_sums` returns them, or k groups of n (labels in (σ, x)):
    Zs, H (k, n), g (k, d − 1, n), frame (2 or 4, k, n), out (k, n, e). One compiled pass, or numpy where numba
    is missing."""
    scale = float(v) if normalized else float(v) * np.exp(abs(beta))    # the spectral sums carry e^{−|β|}
    frame = np.asarray(frame)
    if np.ndim(Zs) == 1:                                       # one group
        Zs, g, H, frame, groups = Zs[None], g[None], H[None], frame[:, None], out[None]
    else:
        groups = out
    if ENABLED and frame.flags.c_contiguous and _kernels() is not None:
        _kernels()["frame_field"](Zs, g, H, frame, float(beta), bool(normalized), scale, groups)
        return out
    if len(frame) == 2:
        G = g[:, 0, :, None] * np.stack([-frame[1], frame[0]], axis=-1)
    else:
        ct, st, cp, sp = frame
        G = np.stack([g[:, 0] * ct * cp - g[:, 1] * sp, g[:, 0] * ct * sp + g[:, 1] * cp, -g[:, 0] * st], axis=-1)
    d = G.shape[-1]
    if normalized:
        G /= Zs[..., None]
        groups[..., d] = scale * (H / Zs - beta * np.einsum("...d,...d->...", G, G))
    else:
        groups[..., d] = scale * H
    groups[..., :d] = scale * G
    return out


def circle_directions(z):
    """(cos θ, sin θ) (2, k·n) of the points z (k, n, 2) of the plane (any strides): z/|z|, in one compiled pass
    (the bits of `normalise`), or numpy's."""
    out = np.empty((2, z.shape[0] * z.shape[1]))
    if ENABLED and z.dtype == np.float64 and _kernels() is not None:
        # a read-only z (a broadcast view) is copied: numba would compile the pass again for it
        _kernels()["circle_directions"](z if z.flags.writeable else z.copy(), out)
        return out
    unit = normalise(np.ascontiguousarray(z)).reshape(-1, 2)
    out[0], out[1] = unit[:, 0], unit[:, 1]
    return out


def dirac_columns(x):
    """The columns (3, n) of points x (n, 3) for `dirac_distances` and `dirac_gradient`, or None where the
    compiled loops do not apply (numba missing or disabled, points not on S^2)."""
    if not ENABLED or x.ndim != 2 or x.shape[1] != 3 or _kernels() is None:
        return None
    return np.ascontiguousarray(x.T, dtype=float)


def dirac_distances(columns, w, z):
    """(Σ_j w_j d(x_j, z), [d(x_j, z), sin d(x_j, z)] (2, n)) with d the geodesic distance
    2·atan2(|x − z|, |x + z|) (`meanfield.spaces.geodesic.geodesic_distance`, to a few ulp) and its sine
    |x − z||x + z|/2, for the columns of `dirac_columns` (unit vectors) and a unit z."""
    dist = np.empty((2, columns.shape[1]))
    total = _kernels()["dirac_distances"](*columns, w, np.ascontiguousarray(z, dtype=float), dist)
    return float(total), dist


def dirac_gradient(columns, w, z, dist):
    """The Riemannian gradient g = −Σ_j w_j t_j/|t_j| (t_j = x_j − ⟨x_j, z⟩z) of ∫ d(x, z) dμ(x) at z and the
    curvature Σ_j w_j d_j/(sin d_j · d_j) of `meanfield.observables.wasserstein.w1_to_dirac`'s step, over the
    atoms with |t_j| > 1e-14; (g, hess), or None when there is none. ``dist``: from `dirac_distances` at z."""
    g = np.empty(3)
    hess = _kernels()["dirac_gradient"](*columns, w, np.ascontiguousarray(z, dtype=float), dist, g,
                                        np.empty((5, columns.shape[1])))
    return None if hess < 0 else (g, hess)
