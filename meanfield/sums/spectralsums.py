"""Kernel sums of zonal attention in O(n) through the kernel's spectral expansion (S^1 and S^2).

For weighted points μ = Σ_j w_j δ_{y_j} on S^{d−1}, d ∈ {2, 3}, the partition function of
(2.3), (3.3) (Geshkovski, Letrouit, Polyanskiy, Rigollet, *A mathematical perspective on
Transformers* (2023)) is a convolution with the zonal kernel e^{β⟨x,y⟩}, diagonal in Fourier modes
and spherical harmonics (Funk–Hecke, docs/mathematics.md §3, §12):

    S^1:  Z(θ) = Σ_j w_j e^{β cos(θ − θ_j)} = Σ_k I_k(β) μ̂_k e^{ikθ},          μ̂_k = Σ_j w_j e^{−ikθ_j},
    S^2:  Z(x) = Σ_j w_j e^{β⟨x, y_j⟩}    = Σ_{l,m} 4π i_l(β) μ̂_lm Y_lm(x),    μ̂_lm = Σ_j w_j Y*_lm(y_j).

The coefficients μ̂ come from one adjoint nonuniform transform of the weights (ducc0's type-1
NUFFT on S^1, ``adjoint_synthesis_general`` on S^2), and Z, its surface gradient and its
Laplace–Beltrami operator at the points x_i from nonuniform syntheses (type-2 NUFFT; spin-0 and
spin-1 ``synthesis_general``): O(n + m + L² log L) instead of the n·m exponentials of
`meanfield.sums.kernelsums`. On S^1 up to degree 64 (with numba) both are Fourier sums by the
recurrence of e^{ikθ} instead (`recurrences`: O((n + m)L), cheaper there and exact to about L ulp). Everything is scaled by e^{−|β|}, the bound of the kernel on the sphere
for β of either sign (multipliers ã_l = a_l(β) e^{−|β|}, of alternating signs (−1)^l for β < 0), and
returned as

    Zs = e^{−|β|} Z,    G = e^{−|β|} ∇_S Z / β,    H = e^{−|β|} Δ_S Z / β,

with the multipliers ã_l/β of G and H finite at β = 0 (`meanfield.transformer.kernels.velocity_multipliers`).
The attention field is X = v G/Zs for (SA) and X = v e^{|β|} G for (USA) (docs/mathematics.md §2), its
divergence v(H/Zs − β|G/Zs|²) and v e^{|β|} H (§9).

Truncation and accuracy (docs/mathematics.md §12): the series is cut at the degree L where
Σ_{l>L} N_l (1 + l(l+d−2)) |ã_l| falls below ε (N_l the multiplicity of degree l), and the
transforms are accurate to ε relative to the coefficients' size (ducc0). Every error is therefore
at most about ε·Σ_j w_j in Zs, ε/β-relative in G and H. The field is G/Zs, so its relative error at
x_i is at most about ε·Σ_j w_j / Zs(x_i), and Zs(x_i) is bounded below: by e^{−2|β|}Σ_j w_j (the
scaled kernel is at least e^{−2|β|}), and for β > 0, when x_i is also a source (particles,
Lagrangian labels), by its own weight w_i (its own term is e^{β − β} = 1; for β < 0 it is e^{−2|β|}).
Hence the bound ε / max(w_i/Σw, e^{−2β}) for β > 0 and ε e^{2|β|} for β < 0 (`error_bound`): ε e^{2|β|}
for small |β|, ε·n for equal weights at large β > 0.

Under a causal mask: tokens in order by blocks of positions with running coefficients
(`causal_zonal_sums`), and labels in (σ, x), whose prefix mean over the positions is taken of the
coefficients (`layered_zonal_sums`, docs/causal.md).
"""
import functools

import numpy as np
import ducc0.nufft as nufft
from ducc0.sht.experimental import adjoint_synthesis_general, synthesis_general

from ..transformer.kernels import kernel_multipliers, velocity_multipliers
from . import compiled
from .kernelsums import attention_sums, masked_batch, masked_batch_sums
from ..threads import blas_single_threaded, check_threads, share_out
from ..validation import check_beta, check_int, check_measure, check_real
from ..errors import InvalidInput

EPSILON = 3e-13             # ducc0's transforms need epsilon > 2e-13 in double precision
DIMENSIONS = (2, 3)
MIN_DEGREE = 8


def multiplicity(dim, degrees):
    """N_l: 2 Fourier modes ±k (1 for k = 0) on S^1, 2l + 1 harmonics on S^2."""
    degrees = np.asarray(degrees)
    return np.where(degrees == 0, 1, 2) if dim == 2 else 2 * degrees + 1


@functools.lru_cache(maxsize=256)
def truncation_degree(beta, dim, epsilon=EPSILON):
    """The smallest L with Σ_{l>L} N_l (1 + l(l+d−2)) |a_l(β)| e^{−|β|} <= ε: the degree at which the
    expansions of Zs, G and H are cut (their truncation error is then below ε·Σ_j w_j); at least
    MIN_DEGREE = 8, since ducc0's transforms lose accuracy on tinier grids (2e-10 at degree 1)."""
    beta = check_beta(beta)
    epsilon = check_real(epsilon, "epsilon", low=0.0, low_open=True)
    if dim not in DIMENSIONS:
        raise InvalidInput(f"`dim` must be 2 or 3 for the spectral sums, got {dim}.")
    L = 32
    while True:
        ls = np.arange(L + 1)
        a = np.abs(kernel_multipliers(beta, dim, L, scaled=True))
        tail = (multiplicity(dim, ls) * (1.0 + ls * (ls + dim - 2)) * a)[::-1].cumsum()[::-1]
        ok = np.nonzero(tail <= epsilon)[0]          # tail[l] = Σ_{l' >= l}, decreasing in l
        if ok.size and ok[0] <= L // 2:
            return max(int(ok[0]) - 1, MIN_DEGREE)
        L *= 2


def error_bound(weights, beta, epsilon=EPSILON):
    """ε / max(min_j w_j/Σw, e^{−2β}) (over the positive weights) for β >= 0, ε e^{2|β|} for β < 0: the
    bound on the relative error of the spectral field at the points that carry the weights (module
    docstring)."""
    w = np.asarray(weights, dtype=float)
    beta = check_beta(beta)
    positive = w[w > 0]
    if not positive.size:
        return 0.0
    if beta < 0:
        with np.errstate(over="ignore"):                # inf beyond |β| ≈ 355: no spectral sums there
            return float(epsilon * np.exp(2.0 * abs(beta)))
    return float(epsilon / max(positive.min() / positive.sum(), np.exp(-2.0 * beta)))


def circle_angles(x):
    return np.arctan2(x[..., 1], x[..., 0])


def _slices(n, threads):
    """Contiguous parts of range(n) for ``threads`` threads (one part on one thread)."""
    parts = 1 if threads <= 1 else 2 * threads
    return [slice(k * n // parts, (k + 1) * n // parts) for k in range(parts) if (k + 1) * n // parts > k * n // parts]


def sphere_angles(x, threads=1):
    """loc (n, 2) = (colatitude, longitude) for ducc0, and the frame (e_θ, e_φ) at x: (cos θ, sin θ,
    cos φ, sin φ) (4, n), computed in parts shared among ``threads``."""
    loc, frame = np.empty((len(x), 2)), np.empty((4, len(x)))
    share_out(lambda part: _angles_into(x[part], loc[part], frame[:, part]), _slices(len(x), threads), threads)
    return loc, frame


def _angles_into(x, loc, frame):
    if compiled.sphere_angles_into(x, loc, frame):      # one compiled pass, else numpy's
        return
    rho = np.hypot(x[:, 0], x[:, 1])
    np.arctan2(rho, x[:, 2], out=loc[:, 0])
    np.arctan2(x[:, 1], x[:, 0], out=loc[:, 1])
    np.mod(loc[:, 1], 2 * np.pi, out=loc[:, 1])
    with np.errstate(invalid="ignore", divide="ignore"):
        np.divide(x[:, 0], rho, out=frame[2])
        np.divide(x[:, 1], rho, out=frame[3])
    pole = rho == 0                                     # φ = 0 at the poles, as arctan2 gives
    frame[2, pole], frame[3, pole] = 1.0, 0.0
    norm = np.hypot(rho, x[:, 2])                       # cos θ and sin θ of the unit vector x/|x|
    np.divide(x[:, 2], norm, out=frame[0])
    np.divide(rho, norm, out=frame[1])


def tangent_vectors(g, frame, threads=1):
    """The vectors of R^3 (n, 3) of the tangent components g = (g_θ, g_φ) (2, n) along (e_θ, e_φ) of
    ``frame`` (`sphere_angles`): g_θ e_θ + g_φ e_φ, in parts shared among ``threads``."""
    ct, st, cp, sp = frame
    out = np.empty((g.shape[-1], 3))

    def part(p):
        out[p, 0] = g[0, p] * ct[p] * cp[p] - g[1, p] * sp[p]
        out[p, 1] = g[0, p] * ct[p] * sp[p] + g[1, p] * cp[p]
        out[p, 2] = -g[0, p] * st[p]

    share_out(part, _slices(len(out), threads), threads)
    return out


class ZonalSums:
    """The spectral sums of one zonal kernel e^{β⟨x,y⟩} on S^1 or S^2 (see the module docstring).

    ``sums(x, y, w)`` returns (Zs, G) or, with ``laplacian=True``, (Zs, G, H) at the points x
    (n, d) for the sources y (m, d) with weights w (m,); leading batch axes are looped over.

    Parameters
    ----------
    beta : float, of either sign
    dim : 2 or 3
    epsilon : float, the accuracy of the transforms and of the truncation (default 3e-13).
    threads : int >= 1, ducc0's threads.
    """

    def __init__(self, beta, dim, epsilon=EPSILON, threads=1):
        self.beta = check_beta(beta)
        if dim not in DIMENSIONS:
            raise InvalidInput(f"`dim` must be 2 or 3 for the spectral sums, got {dim}.")
        self.dim = dim
        self.epsilon = check_real(epsilon, "epsilon", low=2.0001e-13, high=1e-1)
        self.threads = check_int(threads, "threads", low=1)
        self.lmax = L = truncation_degree(self.beta, dim, self.epsilon)
        a = kernel_multipliers(self.beta, dim, L, scaled=True)
        c = velocity_multipliers(self.beta, dim, L, scaled=True)
        ls = np.arange(L + 1)
        lap = -ls * (ls + dim - 2.0)
        if dim == 2:
            k = np.arange(-L, L + 1)
            ak, ck, lk = a[np.abs(k)], c[np.abs(k)], lap[np.abs(k)]
            self._multipliers = np.stack([ak, 1j * k * ck, lk * ck])       # Zs, ∂_θ Zs/β, Δ Zs/β
        else:
            l_of = np.concatenate([np.arange(m, L + 1) for m in range(L + 1)])   # healpy (l, m) order
            self._multipliers = 4 * np.pi * np.stack([a[l_of], c[l_of], lap[l_of] * c[l_of]])

    def sums(self, x, y, w, laplacian=False):
        x = np.asarray(x, dtype=float)
        y = x if y is x else np.asarray(y, dtype=float)
        w = np.asarray(w, dtype=float)
        lead = np.broadcast_shapes(x.shape[:-2], y.shape[:-2], w.shape[:-1])
        if not lead:
            return self._one(x, y, w, laplacian)
        xb = np.broadcast_to(x, lead + x.shape[-2:])
        yb = np.broadcast_to(y, lead + y.shape[-2:])
        wb = np.broadcast_to(w, lead + w.shape[-1:])
        parts = [self._one(xb[i], yb[i], wb[i], laplacian) for i in np.ndindex(lead)]
        return tuple(np.stack([p[k] for p in parts]).reshape(lead + parts[0][k].shape) for k in range(len(parts[0])))

    def _one(self, x, y, w, laplacian):
        if self.dim == 3 and y is x:                    # the angles of the points, once for both transforms
            angles = sphere_angles(x, self.threads)
            coeff = coefficients(x, w, self.lmax, self.epsilon, self.threads, loc=angles[0])
            return self._sphere(x, coeff, laplacian, angles)
        return self.synthesis(self.coefficients(y, w), x, laplacian)

    def coefficients(self, y, w):
        """The coefficients μ̂ of Σ_j w_j δ_{y_j} (y (m, d), w (m,)) up to ``lmax`` (`coefficients`)."""
        return coefficients(y, w, self.lmax, self.epsilon, self.threads)

    def synthesis(self, coeff, x, laplacian=False):
        """(Zs, G) or (Zs, G, H) at the points x (n, d) of the measure with the coefficients ``coeff``."""
        if self.dim == 2:
            return self._circle(x, coeff, laplacian)
        return self._sphere(x, coeff, laplacian)

    def _circle(self, x, coeff, laplacian, angles=None):

        if angles is None and recurrences(self.lmax):   # Fourier sums by recurrence, block by block
            cos, sin = frame = circle_frame(x)
            values = self._recurrent_values(coeff, frame, 3 if laplacian else 2)
        else:
            tx = circle_angles(x) if angles is None else angles
            values = self._circle_values(coeff, tx, laplacian)
            cos, sin = np.cos(tx), np.sin(tx)
        out = (values[0], values[1][:, None] * np.stack([-sin, cos], -1))
        return out + (values[2],) if laplacian else out

    def _recurrent_values(self, coeff, frame, parts):
        """S^1 by recurrence (`recurrences`): Zs, g and, for ``parts`` = 3, H at the points of ``frame``
        (`circle_frame`), their blocks of POINTS_PER_THREAD shared among the threads ((parts, n))."""
        L, bounds = self.lmax, point_blocks(frame.shape[1])
        g = np.broadcast_to(self._multipliers[:parts, L:] * coeff[L:], (len(bounds) - 1, parts, L + 1))
        return compiled.circle_block_synthesis(frame[0], frame[1], g, bounds, min(self.threads, len(bounds) - 1))

    def _circle_values(self, coeff, tx, laplacian):
        """S^1: Zs, g = ∂_θ(e^{−|β|}Z)/β and, with ``laplacian``, H at the angles tx ((2 or 3, n))."""
        return nufft.u2nu(grid=self._multipliers[:3 if laplacian else 2] * coeff, coord=tx[:, None], forward=False,
                          epsilon=self.epsilon, nthreads=self.threads).real

    def _sphere(self, x, coeff, laplacian, angles=None):

        loc_x, frame = sphere_angles(x, self.threads) if angles is None else angles
        Zs, g, H = self._syntheses(coeff, loc_x, laplacian)
        G = tangent_vectors(g, frame, self.threads)             # ∂_θ e_θ + (∂_φ / sin θ) e_φ
        return (Zs, G, H) if laplacian else (Zs, G)

    def _syntheses(self, coeff, loc, laplacian):
        """S^2: Zs, g = (∂_θ, ∂_φ/sin θ) of e^{−|β|}Z/β (2, n) and H (None without ``laplacian``) at ``loc``."""
        L, eps, nt = self.lmax, self.epsilon, self.threads
        coeff = coeff[None, :]
        a, c, lap = self._multipliers
        Zs = synthesis_general(alm=a * coeff, spin=0, lmax=L, loc=loc, epsilon=eps, nthreads=nt)[0]
        g = synthesis_general(alm=c * coeff, spin=1, lmax=L, loc=loc, epsilon=eps, nthreads=nt, mode="DERIV1")
        if not laplacian:
            return Zs, g, None
        return Zs, g, synthesis_general(alm=lap * coeff, spin=0, lmax=L, loc=loc, epsilon=eps, nthreads=nt)[0]

    def frame_sums(self, z, y=None, w=None):
        """(Zs, g, H, frame) at the points z (n, k >= d) for the sources y (m, k >= d; default: z itself) with
        weights w, as `sums` with ``laplacian`` but G in the points' frame: on S^2 that of `sphere_angles`,
        g (2, n) = (G_θ, G_φ), G = g_θ e_θ + g_φ e_φ; on S^1 (cos θ, sin θ) (2, n), g (1, n) = G_θ,
        G = g_θ (−sin θ, cos θ) (`meanfield.sums.compiled.frame_field` assembles the field from them in one
        pass). The points need not be of unit length: their directions count."""
        if self.dim == 2:
            return self._circle_frame_sums(z, y, w)
        loc, frame = sphere_angles(z, self.threads)
        if y is None:
            coeff = coefficients(z, w, self.lmax, self.epsilon, self.threads, loc=loc)
        else:
            coeff = self.coefficients(y, w)
        return self._syntheses(coeff, loc, True) + (frame,)

    def _circle_frame_sums(self, z, y, w):
        if recurrences(self.lmax):
            frame = circle_frame(z)
            coeff = (_recurrent_coefficients(frame, w, self.lmax, self.threads) if y is None else
                     self.coefficients(y, w))
            values = self._recurrent_values(coeff, frame, 3)
        else:
            tx = circle_angles(z)
            values = self._circle_values(self.coefficients(z if y is None else y, w), tx, True)
            frame = np.stack([np.cos(tx), np.sin(tx)])
        return values[0], values[1:2], values[2], frame


POINTS_PER_THREAD = 1 << 15      # fewer points per thread: ducc0 on one thread (waking threads costs more)
ADJOINT_PARTS = 8                # at most this many parts of the points in the adjoint transform (`coefficients`)


def zonal_sums(beta, dim, epsilon=EPSILON, threads=1, points=None):
    """The `ZonalSums` of (β, dim, ε), built once (its multipliers are cached), on ``threads``
    threads, or fewer for ``points`` points (at least POINTS_PER_THREAD = 32768 points a thread)."""
    if points is not None:
        threads = max(1, min(threads, points // POINTS_PER_THREAD))
    return _zonal_sums(beta, dim, epsilon, threads)


@functools.lru_cache(maxsize=32)
def _zonal_sums(beta, dim, epsilon, threads):
    return ZonalSums(beta, dim, epsilon, threads)


def causal_block(dim, lmax):
    """The positions per block of `causal_zonal_sums`, balancing the exact sums inside a block (b²/2
    pairs) against the transforms per block: 512 on S^1, 512·⌊(L + 32)/32⌋ on S^2 (the fastest of 128 ..
    4096 at n = 2^16, β = 1, 4, 30; benchmarks/bench_causal_particles.py)."""
    return 512 if dim == 2 else 512 * ((lmax + 32) // 32)


def causal_zonal_sums(sums, x, w, ends, positions, slope=0.0, block=None, threads=1):
    """The sums of a `ZonalSums` over a causal mask with the ALiBi bias (docs/causal.md):

        Zs_i = Σ_{j<ends_i} w_j e^{β⟨x_i, x_j⟩ − |β| − λ(σ_i − σ_j)},   G_i = P_{x_i} Σ_{j<ends_i} (same) x_j

    (G = e^{−|β|}∇_S Z/β as in `ZonalSums`), for tokens in order: ``ends`` (n,) non-decreasing (row i
    takes the columns j < ends_i), ``positions`` σ (n,) non-decreasing, λ = ``slope`` >= 0. The tokens
    go in blocks of ``block`` positions (default `causal_block`), cut where every later row sees the
    whole of the earlier blocks (ends[s] >= s). A block's rows take the earlier blocks from the
    running coefficients c = Σ_{j<s} w_j e^{−λ(σ_s − σ_j)} μ̂(δ_{x_j}), synthesised at the rows and
    multiplied by e^{−λ(σ_i − σ_s)}, and the columns of their own block exactly (`kernelsums.attention_sums`
    with ``ends`` and ``bias``); every block's columns give their part of c (one adjoint transform, all
    factors <= 1). Cost O(n·b + (n/b)·L² log L). The transforms' error is at most
    ε·Σ_{j<s} w_j e^{−λ(σ_i − σ_j)} in Zs and G (`masked_error_bound`). x (..., n, d), w (n,) or (..., n);
    leading axes looped over.

    With numba the own blocks' sums are compiled calls on runs of blocks (`kernelsums.masked_batch`), and on
    S^1 so are the blocks' transforms (`_causal_circle`: Fourier sums by recurrence, within the same bound;
    `_causal_sphere` on S^2).

    ``threads``: the blocks' exact sums and transforms (each on one thread) are shared among threads in
    two passes, the running coefficients summed in between in order: the result has the same bits
    whatever ``threads``."""
    x = np.asarray(x, dtype=float)
    w = np.asarray(w, dtype=float)
    lead = np.broadcast_shapes(x.shape[:-2], w.shape[:-1])
    if lead:
        xb, wb = np.broadcast_to(x, lead + x.shape[-2:]), np.broadcast_to(w, lead + w.shape[-1:])
        parts = [causal_zonal_sums(sums, xb[i], wb[i], ends, positions, slope, block, threads)
                 for i in np.ndindex(lead)]
        return tuple(np.stack([p[k] for p in parts]).reshape(lead + parts[0][k].shape) for k in range(2))
    n, d = x.shape
    if not x.flags.writeable:           # (a broadcast view) numba would compile its passes again for read-only arrays
        x = x.copy()
    sigma = np.asarray(positions, dtype=float)
    ends = np.asarray(ends, dtype=np.int64)
    b = causal_block(sums.dim, sums.lmax) if block is None else check_int(block, "block", low=1)
    cuts = _causal_blocks(ends, n, b)
    if compiled.fused_available(d + 1, d + 1):
        batch = _block_batch(x, w, ends, sigma, slope, cuts)
        if batch is not None:
            return (_causal_circle if d == 2 else _causal_sphere)(sums, x, w, sigma, slope, cuts, batch, threads)
    return _causal_by_block(sums, x, w, ends, sigma, slope, cuts, threads)


def _causal_by_block(sums, x, w, ends, sigma, slope, cuts, threads):
    """`causal_zonal_sums` without numba, block by block: each block's own sums (`attention_sums`) and its
    ducc0 transforms on one thread, the blocks shared among ``threads``."""
    n, d = x.shape
    one = _zonal_sums(sums.beta, sums.dim, sums.epsilon, 1)            # each block's transforms on one thread
    # on S^2 the angles of all the tokens at once: a block's transforms then hold the GIL for no numpy work
    angles = sphere_angles(x, threads) if sums.dim == 3 else None
    Zs, G = np.empty(n), np.empty((n, d))
    parts = [None] * len(cuts)

    def near(k):                                              # the own block exactly, and its part of c
        start, stop = cuts[k]
        rows, top = slice(start, stop), int(ends[stop - 1])
        cols = slice(start, max(top, start))
        bias = None if slope == 0.0 else (slope * sigma[rows], slope * sigma[cols])
        block, _ = attention_sums(x[rows], x[cols], w[cols], sums.beta, shift="fixed", unit=True, threads=1,
                                  ends=np.maximum(ends[rows] - start, 0), bias=bias)
        Zs[rows] = block[:, d]
        G[rows] = block[:, :d] - np.einsum("id,id->i", x[rows], block[:, :d])[:, None] * x[rows]
        if stop < n:                                          # referred to σ_stop
            weights = w[rows] * np.exp(-slope * (sigma[stop] - sigma[rows]))
            parts[k] = (one.coefficients(x[rows], weights) if angles is None else
                        coefficients(x[rows], weights, one.lmax, one.epsilon, 1, loc=angles[0][rows]))

    with blas_single_threaded():
        share_out(near, range(len(cuts)), max(1, min(threads, len(cuts))))
    running = _running(parts, sigma[[start for start, _ in cuts]], slope) if len(cuts) > 1 else None

    def far(k):                                               # the earlier blocks through c
        start, stop = cuts[k]
        rows = slice(start, stop)
        far_Z, far_G = (one.synthesis(running[k], x[rows]) if angles is None else
                        one._sphere(x[rows], running[k], False, (angles[0][rows], tuple(f[rows] for f in angles[1]))))
        decay = np.exp(-slope * (sigma[start:stop] - sigma[start]))
        Zs[start:stop] += decay * far_Z
        G[start:stop] += decay[:, None] * far_G

    with blas_single_threaded():
        share_out(far, range(1, len(cuts)), max(1, min(threads, len(cuts) - 1)))
    return Zs, G


def _causal_circle(sums, x, w, sigma, slope, cuts, batch, threads):
    """`causal_zonal_sums` on S^1 with numba, in two passes over runs of blocks shared among ``threads``,
    each run one or two compiled calls holding no GIL: (1) its own triangles (``batch``, `_block_batch`,
    `kernelsums.masked_batch`) and its blocks' coefficients c_m = Σ_j w_j e^{−λ(σ_s − σ_j)} e^{−imθ_j}
    (`compiled.circle_near`); (2) the running coefficients' fields at its blocks' points (`compiled.circle_far`):
    Fourier sums by the recurrence of e^{imθ}, exact to about L ulp, where the nonuniform FFTs of the other
    path err by ε. The running coefficients are summed in order in between: the same bits on any threads."""
    n, d, L, K = len(x), x.shape[1], sums.lmax, len(cuts)
    cos, sin = np.ascontiguousarray(x[:, 0]), np.ascontiguousarray(x[:, 1])
    blocks = _Blocks(sums.beta, x, w, sigma, slope, cuts, batch, threads)
    bounds, runs = blocks.bounds, blocks.runs
    Zs, G, coeff = np.empty(n), np.empty((n, d)), np.empty((K, 1, 2, L + 1))

    def near(run):
        a, b = run
        blocks.prepare(a, b)
        compiled.circle_near(cos, sin, blocks.S[a:b], blocks.weights, bounds[a:b + 1], Zs, G, coeff[a:b])

    def far(run):
        a, b = max(run[0], 1), run[1]
        if a < b:
            compiled.circle_far(cos, sin, g[a:b], bounds[a:b + 1], blocks.decay, Zs, G)

    share_out(near, runs, threads)
    running = _running(coeff[:, 0, 0] + 1j * coeff[:, 0, 1], sigma[bounds[:-1]], slope)
    g = sums._multipliers[:2, L:] * running[:, None, :]
    g = np.ascontiguousarray(np.stack([g.real, g.imag], axis=2))
    share_out(far, runs, threads)
    return Zs, G


class _Blocks:
    """The blocks of `causal_zonal_sums` with numba, for the passes of `_causal_circle` and `_causal_sphere`:
    ``bounds`` (K + 1,) their first tokens and n, ``runs`` the runs of blocks shared among the threads
    (2 per thread), ``prepare(a, b)`` (on a run's thread) the own sums S[a:b] (`kernelsums.masked_batch`),
    the weights w_j e^{−λ(σ_s − σ_j)} referred to the next block's first token s and the decay
    e^{−λ(σ_j − σ_f)} from the own block's first f, of the run's tokens."""

    def __init__(self, beta, x, w, sigma, slope, cuts, batch, threads):
        n, K = len(x), len(cuts)
        X, Y, W, E, bias = batch
        self.w, self.sigma, self.slope = w, sigma, slope
        self.bounds = np.array([start for start, _ in cuts] + [n])
        sizes = np.diff(self.bounds)
        self.first = np.repeat(self.bounds[:-1], sizes)
        self.ahead = np.repeat(np.minimum(self.bounds[1:], n - 1), sizes)
        self.own = masked_batch(X, Y, W, beta, E, bias)
        self.S = np.empty((K, X.shape[1], x.shape[1] + 1))
        self.weights, self.decay = np.empty(n), np.empty(n)
        parts = 1 if threads <= 1 else min(K, 2 * threads)
        self.runs = [(k * K // parts, (k + 1) * K // parts) for k in range(parts)]

    def prepare(self, a, b):
        self.own(a, b, self.S[a:b])
        rows, sigma = slice(self.bounds[a], self.bounds[b]), self.sigma
        self.weights[rows] = self.w[rows] * np.exp(-self.slope * (sigma[self.ahead[rows]] - sigma[rows]))
        self.decay[rows] = np.exp(-self.slope * (sigma[rows] - sigma[self.first[rows]]))



def _running(parts, starts, slope):
    """The running coefficients of `causal_zonal_sums`: c_0 = 0, c_k = e^{−λ(s_k − s_{k−1})} c_{k−1} + parts[k−1]
    (all the blocks before block k, referred to its first position s_k = ``starts[k]``), summed in order."""
    factors = np.exp(-slope * np.diff(starts))
    out = np.zeros((len(starts),) + np.shape(parts[0]), dtype=complex)
    for k in range(1, len(starts)):
        out[k] = out[k - 1] * factors[k - 1] + parts[k - 1]
    return out


def _causal_sphere(sums, x, w, sigma, slope, cuts, batch, threads):
    """`causal_zonal_sums` on S^2 with numba, in the two passes of `_causal_circle` over runs of blocks:
    (1) a run's own triangles (`kernelsums.masked_batch`) and one ducc0 adjoint transform per block;
    (2) one scalar and one spin-1 synthesis per block of the running coefficients. ducc0 runs on one
    thread and holds no GIL; the tangent vectors and the decay go by runs. The same bits on any threads."""
    n, d, K = len(x), x.shape[1], len(cuts)
    one = _zonal_sums(sums.beta, sums.dim, sums.epsilon, 1)
    L, eps = one.lmax, one.epsilon
    blocks = _Blocks(sums.beta, x, w, sigma, slope, cuts, batch, threads)
    bounds = blocks.bounds
    loc, frame = sphere_angles(x, threads)
    Zs, G = np.empty(n), np.empty((n, d))
    coeff = np.zeros((K, (L + 1) * (L + 2) // 2), dtype=complex)

    def near(run):
        a, b = run
        blocks.prepare(a, b)
        for k in range(a, b):
            r = slice(bounds[k], bounds[k + 1])
            own = blocks.S[k, :r.stop - r.start]
            Zs[r], G[r] = own[:, d], own[:, :d]
            if k < K - 1:
                coeff[k] = coefficients(x[r], blocks.weights[r], L, eps, 1, loc=loc[r])
        rows = slice(bounds[a], bounds[b])
        G[rows] = compiled.project(x[rows], G[rows])

    def far(run):
        a, b = max(run[0], 1), run[1]
        if a >= b:
            return
        rows = slice(bounds[a], bounds[b])
        Z, g = np.empty(rows.stop - rows.start), np.empty((2, rows.stop - rows.start))
        for k in range(a, b):
            r, q = slice(bounds[k], bounds[k + 1]), slice(bounds[k] - rows.start, bounds[k + 1] - rows.start)
            Z[q], g[:, q], _ = one._syntheses(running[k], loc[r], False)
        decay = blocks.decay[rows]
        Zs[rows] += decay * Z
        G[rows] += decay[:, None] * tangent_vectors(g, tuple(f[rows] for f in frame))

    share_out(near, blocks.runs, threads)
    running = _running(coeff, sigma[bounds[:-1]], slope)
    share_out(far, blocks.runs, threads)
    return Zs, G


def _block_batch(x, w, ends, sigma, slope, cuts):
    """The blocks of `causal_zonal_sums` as one padded batch of problems for `kernelsums.masked_batch_sums`:
    (X (K, b, d), Y (K, c, d), W (K, c), ends (K, b), bias or None), block k's rows first, padded rows seeing
    every column and padded columns of weight 0; None where no block sees a column."""
    K, d = len(cuts), x.shape[1]
    sizes = [(stop - start, max(int(ends[stop - 1]), start) - start) for start, stop in cuts]
    B, C = max(r for r, _ in sizes), max(c for _, c in sizes)
    if not C:
        return None
    if all(start == k * B for k, (start, _) in enumerate(cuts)):
        return _even_blocks(x, w, ends, sigma, slope, B, [c for _, c in sizes])
    X, Y, W = np.zeros((K, B, d)), np.zeros((K, C, d)), np.zeros((K, C))
    E = np.empty((K, B), dtype=np.int64)
    a, b = np.empty((K, B)), np.empty((K, C))
    for k, ((start, stop), (r, c)) in enumerate(zip(cuts, sizes)):
        X[k, :r], Y[k, :c], W[k, :c] = x[start:stop], x[start:start + c], w[start:start + c]
        E[k, :r], E[k, r:] = np.maximum(ends[start:stop] - start, 0), c        # padded rows: every column
        a[k, :r], a[k, r:] = slope * sigma[start:stop], slope * sigma[stop - 1]
        b[k, :c], b[k, c:] = slope * sigma[start:start + c], slope * sigma[start + max(c - 1, 0)]
    return X, Y, W, E, None if slope == 0.0 else (a, b)


def _even_blocks(x, w, ends, sigma, slope, B, columns):
    """`_block_batch` for blocks of ``B`` positions each (the last one shorter), by reshaping: block k's own
    points serve as its rows and its columns (the columns beyond its ``columns[k]`` of weight 0, and
    outside its mask)."""
    n, K = len(x), len(columns)
    pad = K * B - n
    X = (x if not pad else np.concatenate([x, np.zeros((pad, x.shape[1]))])).reshape(K, B, -1)
    starts = np.arange(K)[:, None] * B
    W = np.concatenate([w, np.zeros(pad)]).reshape(K, B)
    W[np.arange(B)[None, :] >= np.asarray(columns)[:, None]] = 0.0
    E = np.maximum(np.concatenate([ends, np.full(pad, columns[-1])]).reshape(K, B) - starts, 0)
    E[-1, B - pad:] = columns[-1]                                   # padded rows: every column
    a = slope * np.concatenate([sigma, np.full(pad, sigma[-1])]).reshape(K, B)
    return X, X, W, E, None if slope == 0.0 else (a, a)


def _causal_blocks(ends, n, b):
    """The blocks (start, stop) of `causal_zonal_sums`: ``b`` positions, longer where tied positions under
    "causal-strict" would cut a row's own columns (ends[stop] < stop)."""
    stops = np.arange(b, n, b)
    if np.all(ends[stops] >= stops):                          # the usual case: no block grows
        return [(start, min(start + b, n)) for start in range(0, n, b)]
    cuts, start = [], 0
    while start < n:
        stop = min(start + b, n)
        while stop < n and ends[stop] < stop:
            stop += 1
        cuts.append((start, stop))
        start = stop
    return cuts


def masked_error_bound(weights, beta, normaliser, includes_self, epsilon=EPSILON):
    """The bound on the relative error of the masked spectral field (`causal_zonal_sums`) at the tokens:
    the transforms err by at most ε·D_i (D_i = Σ_{j∈C(i)} w_j e^{−λ(σ_i−σ_j)}, the positional normaliser),
    and Zs_i >= e^{−2|β|}D_i, and >= w_i when token i sees itself (mask "causal") and β >= 0. Hence
    max_i ε·D_i / max(w_i, e^{−2|β|}D_i) over the tokens with D_i > 0 (ε e^{2|β|} under "causal-strict")."""
    w = np.asarray(weights, dtype=float)
    D = np.asarray(normaliser, dtype=float)
    beta = check_beta(beta)
    live = D > 0
    if not live.any():
        return 0.0
    with np.errstate(over="ignore", divide="ignore"):
        floor = np.exp(-2.0 * abs(beta)) * D[live]
        own = w[live] if includes_self and beta >= 0 else 0.0
        return float(np.max(epsilon * D[live] / np.maximum(own, floor)))


def layered_zonal_sums(sums, x, w, rule, threads=1, each=None):
    """The sums of a `ZonalSums` for labels in (σ, x) (docs/causal.md, "Through clustering"): at the n labels
    x_ik of each node s_i of the position rule, for the prefix mean ρ̄(s_i) = Σ_m W_im ρ(s_m),

        Zs_ik = Σ_m W_im Σ_j w_mj e^{β⟨x_ik, x_mj⟩ − |β|},   G_ik = e^{−|β|}∇_S Z/β,   H_ik = e^{−|β|}Δ_S Z/β,

    (as in `ZonalSums`, with Laplacian). The sums are linear in the measure, so the prefix mean is taken
    of the coefficients: μ̂_m of each node's labels (one adjoint transform per node), c_i = Σ_m W_im μ̂_m by
    the O(M) recursion of `PositionRule.prefix_mean` (the ALiBi factor e^{−λ(s_i − b_p)} over the earlier
    panels and the own panel's q × q weights alike, exact for any weights), then Zs, G, H at the labels of
    node i from c_i (one synthesis per node). Cost O(M·(n + L² log L)) against the O((Mn)²) of the direct
    sums. The transforms err by at most about ε·A_i, A_i = Σ_m |W_im| Σ_j |w_mj| (`layered_error_bound`).
    On S^1 with numba the transforms are Fourier sums by recurrence (`compiled.circle_block_coefficients`,
    `compiled.circle_block_synthesis`, the nodes as blocks: within the same bound), else ducc0's.

    ``x`` (M, n, d) the labels of the nodes of ``rule`` (a `meanfield.transformer.positions.PositionRule`,
    axis 0 in order), ``w`` (M, n) their weights. ``threads``: runs of nodes (`node_runs`, each on one thread and
    taken by the next free one) shared among threads in two passes, the prefix recursion in
    between: the result has the same bits whatever ``threads``. ``each``: each(run, Zs, g, H, frame) is called
    for every run of nodes (a slice of axis 0, k nodes) on the thread of its second pass, with the sums at their
    labels in the labels' frame (g (k, d − 1, n) and frame (2 or 4, k, n), as `frame_vectors` and
    `meanfield.sums.compiled.frame_field` take them; work on the sums shared with them; then None is returned).
    The labels need not be of unit length: their directions count. Returns (Zs (M, n), G (M, n, d), H (M, n))."""
    x = np.asarray(x, dtype=float)
    w = np.asarray(w, dtype=float)
    M, n, d = x.shape
    transforms = _LayeredTransforms(_zonal_sums(sums.beta, sums.dim, sums.epsilon, 1), x, w)
    out = None
    if each is None:
        out = Zs, G, H = np.empty((M, n)), np.empty((M, n, d)), np.empty((M, n))

        def each(run, Zs_run, g, H_run, frame):
            Zs[run], H[run] = Zs_run, H_run
            for j, i in enumerate(range(run.start, run.stop)):
                G[i] = frame_vectors(g[j], frame[:, j])

    runs = node_runs(M, threads, n, d)
    workers = max(1, min(threads, len(runs)))
    share_out(transforms.analysis, runs, workers)
    prefix = rule.prefix_mean(transforms.coeff)
    share_out(lambda run: each(run, *transforms.synthesis(run, prefix[run])), runs, workers)
    return out


def frame_vectors(g, frame):
    """The tangent vectors (n, d) of the components g (d − 1, n) in the points' ``frame``: on S^1 (cos θ, sin θ),
    G = g_θ (−sin θ, cos θ); on S^2 (cos θ, sin θ, cos φ, sin φ) of `sphere_angles`, `tangent_vectors`."""
    if len(frame) == 2:
        return g[0][:, None] * np.stack([-frame[1], frame[0]], axis=-1)
    return tangent_vectors(g, frame)


RUN_LABELS = {2: 1 << 15, 3: 1 << 12}    # labels per run of nodes: about a millisecond of transforms on S^1, S^2


def node_runs(M, threads=1, n=1, dim=2):
    """The runs of nodes (slices of range(M)) that `layered_zonal_sums` shares among ``threads``, each taken by
    the next free thread: about RUN_LABELS[dim] labels a run for n labels a node (fewer runs cost less Python
    between the compiled calls), and at least 4 runs a thread when M allows (for the balance). The same runs
    on one and two threads at M = 32 (S^1 n = 8192: 4 nodes, S^2 n = 2048: 2)."""
    size = max(1, min(RUN_LABELS.get(dim, 1 << 12) // max(n, 1), M // (4 * threads)))
    return [slice(a, min(a + size, M)) for a in range(0, M, size)]


class _LayeredTransforms:
    """The transforms of `layered_zonal_sums` on runs of nodes (slices of axis 0 of x (M, n, d)), each on
    one thread: ``analysis(run)`` sets the nodes' coefficients ``coeff[run]`` (and keeps the labels' angles),
    ``synthesis(run, c)`` returns (Zs, g, H, frame) at the labels of the run's k nodes from their
    coefficients c (k, ...), in the labels' frame (`frame_vectors`)."""

    def __init__(self, one, x, w):
        M, n, d = x.shape
        self.one, self.x, self.w = one, x, w
        self.compiled = d == 2 and compiled.fused_available(3, 3)
        size = one.lmax + 1 if self.compiled else (2 * one.lmax + 1 if d == 2 else len(one._multipliers[0]))
        self.coeff = np.empty((M, size), dtype=complex)
        self.angles = {}                            # of each run's labels, once for both passes

    def analysis(self, run):
        one, w, z = self.one, self.w, self.x[run]
        k, n, d = z.shape
        if self.compiled:                           # cos θ, sin θ of the directions z/|z|
            angles = self.angles[run.start] = compiled.circle_directions(z)
            self.coeff[run] = compiled.circle_block_coefficients(*angles, w[run].ravel(), np.arange(k + 1) * n,
                                                                 one.lmax, 1)
            return
        flat = z.reshape(-1, d)
        angles = self.angles[run.start] = circle_angles(flat) if d == 2 else sphere_angles(flat)
        loc = angles if d == 2 else angles[0]
        for j, i in enumerate(range(run.start, run.stop)):
            self.coeff[i] = coefficients(z[j], w[i], one.lmax, one.epsilon, 1, loc=loc[j * n:(j + 1) * n])

    def synthesis(self, run, c):
        one, z, angles = self.one, self.x[run], self.angles[run.start]
        k, n, d = z.shape
        if self.compiled:
            cos, sin = angles
            values = compiled.circle_block_synthesis(cos, sin, one._multipliers[:, one.lmax:] * c[:, None],
                                                     np.arange(k + 1) * n)
            return values[0].reshape(k, n), values[1].reshape(k, 1, n), values[2].reshape(k, n), \
                angles.reshape(2, k, n)
        if d == 2:
            values = np.stack([one._circle_values(c[j], angles[j * n:(j + 1) * n], True) for j in range(k)])
            return values[:, 0], values[:, 1:2], values[:, 2], np.stack([np.cos(angles), np.sin(angles)]).reshape(2, k, n)
        loc, frame = angles
        Zs, g, H = np.empty((k, n)), np.empty((k, 2, n)), np.empty((k, n))
        for j in range(k):                            # ducc0 on one thread, without the GIL
            r = slice(j * n, (j + 1) * n)
            Zs[j], g[j], H[j] = one._syntheses(c[j], loc[r], True)
        return Zs, g, H, frame.reshape(4, k, n)


def layered_error_bound(Zs, weights, rule, epsilon=EPSILON):
    """The bound on the relative error of the layered spectral field (`layered_zonal_sums`) at the labels:
    the transforms err by at most ε·A_i, A_i = Σ_m |W_im| Σ_j |w_mj| (the prefix weights W_im take both signs,
    Σ_m |W_im| <= 2.6), relative to Zs_ik; hence max_ik ε·A_i/Zs_ik, computed from the sums themselves
    (``Zs`` (M, n) as returned, or each node's least (M, 1); inf where some Zs_ik <= 0); ``weights`` (M, n), or
    each node's Σ_j |w_mj| (M,). A posteriori: the
    prefix measure Σ_m W_im μ_m is signed (its atoms sit at different labels), so Zs has no lower bound a
    priori, unlike the bounds of `error_bound` and `masked_error_bound`."""
    Zs = np.asarray(Zs, dtype=float)
    w = np.abs(np.asarray(weights, dtype=float))
    A = np.abs(rule.prefix_matrix) @ (w.sum(axis=1) if w.ndim == 2 else w)
    if np.any(Zs <= 0):
        return np.inf
    return float(np.max(epsilon * A[:, None] / Zs))


def coefficients(x, w, lmax, epsilon=EPSILON, threads=1, loc=None):
    """The coefficients of μ = Σ_j w_j δ_{x_j} on S^1 or S^2 up to degree ``lmax``, by one adjoint
    nonuniform transform: μ̂_k = Σ_j w_j e^{−ikθ_j}, k = −lmax..lmax (S^1), or μ̂_lm = Σ_j w_j Y*_lm(x_j),
    m >= 0 in ducc0's (healpy) order (S^2; orthonormal Y_lm on the unit sphere). ``loc``: the points'
    (colatitude, longitude) when they are known (`sphere_angles`; on S^1 the angles θ_j)."""

    x = np.asarray(x, dtype=float)
    w = np.ascontiguousarray(w, dtype=float)
    threads = max(1, min(threads, len(x) // POINTS_PER_THREAD))
    if x.shape[-1] == 2:
        if loc is None and recurrences(lmax):            # Fourier sums by recurrence, block by block
            return _recurrent_coefficients(circle_frame(x), w, lmax, threads)
        coord = circle_angles(x) if loc is None else loc
        return nufft.nu2u(points=w.astype(complex), coord=coord[:, None], forward=True, epsilon=epsilon,
                          nthreads=threads, out=np.empty(2 * lmax + 1, dtype=complex))
    loc = sphere_angles(x, threads)[0] if loc is None else loc
    # ducc0's adjoint transform shares its points poorly among threads (1.2x on two): the points go
    # in parts (their number set by n alone, so the sum is the same on any number of threads), one
    # transform per part on one thread, the parts shared among the threads
    count = min(ADJOINT_PARTS, max(1, len(x) // POINTS_PER_THREAD // 4))
    bounds = (0, len(x)) if count == 1 else np.linspace(0, len(x), count + 1).astype(int)
    parts = [None] * (len(bounds) - 1)

    def part(k):
        a, b = bounds[k], bounds[k + 1]
        parts[k] = adjoint_synthesis_general(map=w[None, a:b], spin=0, lmax=lmax, loc=loc[a:b], epsilon=epsilon,
                                             nthreads=1)[0]

    share_out(part, range(len(parts)), threads)
    return functools.reduce(np.add, parts)


RECURRENCE_LMAX = 64    # S^1: Fourier sums by recurrence up to this degree (O(n·L)), ducc0's NUFFTs beyond


def recurrences(lmax):
    """Whether the S^1 sums to degree ``lmax`` go by the compiled recurrence e^{i(m+1)θ} = e^{imθ}e^{iθ}
    (`compiled.circle_block_coefficients`, `compiled.circle_block_synthesis`): numba present and lmax <= 64,
    where they cost less than ducc0's type-1 and type-2 NUFFTs (at L = 21, n = 8192: 0.29 against 0.84 ms)."""
    return lmax <= RECURRENCE_LMAX and compiled.fused_available(3, 3)


def circle_frame(x):
    """(cos θ, sin θ) (2, n) of the points x (n, 2) of the plane (their directions; one compiled pass)."""
    return compiled.circle_directions(np.asarray(x, dtype=float)[None])


def _recurrent_coefficients(frame, w, lmax, threads):
    """μ̂_k, k = −lmax..lmax, of Σ_j w_j δ_{θ_j} (real weights) by recurrence, block by block (`recurrences`)."""
    bounds = point_blocks(frame.shape[1])
    c = compiled.circle_block_coefficients(frame[0], frame[1], np.ascontiguousarray(w, dtype=float), bounds, lmax,
                                           min(threads, len(bounds) - 1)).sum(axis=0)
    return np.concatenate([np.conj(c[:0:-1]), c])                 # μ̂_{−k} = conj μ̂_k


def point_blocks(n):
    """The bounds of the blocks of POINTS_PER_THREAD points that the recurrences share among threads (set by n
    alone: the same sums on any number of threads)."""
    return np.append(np.arange(0, n, POINTS_PER_THREAD), n)


def weighted_power(coeff, multipliers, dim, lmax):
    """Σ_l c_l Σ_m |μ̂_lm|² (S^2, with 4π: the L²(σ) normalisation) or Σ_k c_|k| |μ̂_k|² (S^1) for real
    measures, from `coefficients` (m > 0 stands for ±m on S^2)."""
    c = np.asarray(multipliers, dtype=float)
    power = np.abs(coeff) ** 2
    if dim == 2:
        return float(np.sum(c[np.abs(np.arange(-lmax, lmax + 1))] * power))
    l_of = np.concatenate([np.arange(m, lmax + 1) for m in range(lmax + 1)])
    power[lmax + 1:] *= 2.0
    return float(4 * np.pi * np.sum(c[l_of] * power))


def spectral_energy(beta, x, w, epsilon=EPSILON, threads=None):
    """Σ_ij w_i w_j e^{β⟨x_i, x_j⟩ − |β|} = Σ_l ã_l |μ̂_l|² (the interaction energy (3.5) times 2β e^{−|β|})
    from the coefficients of one adjoint transform, for unit vectors x (..., n, d), d ∈ {2, 3}: for
    β > 0 every term is positive, so the result is accurate to ε relative to (Σ w)² whatever n (for
    β < 0 the odd degrees count negatively, and the result, at least e^{−2|β|}(Σ w)², is accurate to
    ε(Σ w)² absolutely). ``threads``: ducc0's (`meanfield.threads`)."""
    threads = check_threads(threads)
    x = np.asarray(x, dtype=float)
    w = np.asarray(w, dtype=float)
    dim = x.shape[-1]
    L = truncation_degree(check_beta(beta), dim, epsilon)
    a = kernel_multipliers(beta, dim, L, scaled=True)
    lead = np.broadcast_shapes(x.shape[:-2], w.shape[:-1])
    xb, wb = np.broadcast_to(x, lead + x.shape[-2:]), np.broadcast_to(w, lead + w.shape[-1:])
    out = np.array([weighted_power(coefficients(xb[i], wb[i], L, epsilon, threads), a, dim, L)
                    for i in np.ndindex(lead)]).reshape(lead)
    return out if lead else float(out[()])


def kernel_distance(a, b, kappa=4.0, epsilon=EPSILON, threads=None):
    """The kernel (MMD) distance between probability measures a = (x, w) and b = (y, v) on S^1 or S^2,
    for the kernel k(x, y) = e^{κ(⟨x, y⟩ − 1)} of the attention itself (docs/mathematics.md §8):
        D_κ(μ, ν)² = ∬ k d(μ − ν) d(μ − ν) = Σ_l a_l(κ) e^{−κ} ‖μ̂_l − ν̂_l‖²,

    a metric on probability measures (every a_l > 0, Proposition 3.4), computed in O(n + m + L² log L)
    from one adjoint transform of each measure. It bounds integrals of functions of the kernel's
    RKHS, |∫f d(μ − ν)| <= ‖f‖_H D_κ, and is bounded by W1: D_κ <= √κ·W1 (the feature map is
    √κ-Lipschitz for the geodesic distance). For n iid samples of ν, E D_κ(μ_n, ν)² = (1 − ∬k dν dν)/n,
    so D_κ decays like n^{−1/2} in every dimension.

    Parameters
    ----------
    a, b : (points, weights)
        Discrete measures on the same sphere S^1 or S^2: points (n, d), weights summing to 1.
    kappa : float > 0
        κ, the kernel's inverse temperature.
    epsilon : float > 0
        Accuracy of the nonuniform transforms and of the kernel's truncation.
    threads : int >= 1, optional
        ducc0's threads (default `meanfield.threads.default_threads`).

    Returns
    -------
    float
        D_κ(a, b) (dimensionless).

    Raises
    ------
    ValueError
        Measures not on S^1 or S^2 or not on the same sphere, ``kappa`` <= 0.

    Examples
    --------
    >>> import meanfield as mf
    >>> a = mf.sample(mf.densities.uniform(), 200, 3, method="quasi")
    >>> b = mf.sample(mf.densities.von_mises_fisher([0.0, 0.0, 1.0], 20.0), 200, 3, rng=0)
    >>> mf.kernel_distance(a, a), round(mf.kernel_distance(a, b), 4), round(mf.kernel_distance(b, a), 4)
    (0.0, 0.7636, 0.7636)
    """
    threads = check_threads(threads)

    x, w = check_measure(a, "a")
    y, v = check_measure(b, "b", dim=x.shape[1])
    dim = x.shape[1]
    if dim not in DIMENSIONS:
        raise InvalidInput(f"`a` must be a measure on S^1 or S^2 (points of dimension 2 or 3), got dimension {dim}.")
    kappa = check_real(kappa, "kappa", low=0.0, low_open=True)
    L = truncation_degree(kappa, dim, epsilon)
    c = kernel_multipliers(kappa, dim, L, scaled=True)
    diff = coefficients(x, w / w.sum(), L, epsilon, threads) - coefficients(y, v / v.sum(), L, epsilon, threads)
    return float(np.sqrt(max(weighted_power(diff, c, dim, L), 0.0)))


SUMS = ("auto", "direct", "spectral")


def spectral_unavailable(model, domain="sphere", heads=False):
    """Why the spectral sums cannot serve ``model`` (a sentence), or None when they can; with ``heads`` a
    caller that sums several zonal heads of their own β (`meanfield.Model.head_models`) accepts them."""
    if domain != "sphere":
        return f"applies on the sphere, not with domain={domain!r} (R^d)"
    if getattr(model, "attention", "softmax") != "softmax":
        return (f"sums softmax attention; attention={model.attention!r} sums its kernel with column terms "
                "(docs/attention.md); use sums='direct'")
    if model.dim not in DIMENSIONS:
        return f"needs S^1 or S^2 (dim 2 or 3), got dim={model.dim}; use sums='direct'"
    if heads and model.head_models is not None:
        pass
    elif not model.is_zonal:
        return ("needs a zonal model (one head, Q^T K = I, V = v·I): the kernel e^{β⟨Qx, Ky⟩} of this model is not "
                "a function of ⟨x, y⟩; use sums='direct'")
    if model.normalization != "post":
        return (f"gives the tangent part P_x A of the attention output only, and normalization="
                f"{model.normalization!r} needs all of A (its norm, its radial part); use sums='direct'")
    return None


def check_sums(sums, model, domain="sphere", heads=False):
    """``sums`` among SUMS, and "spectral" only where it applies (ValueError naming `sums` and the reason)."""
    if not isinstance(sums, str) or sums not in SUMS:
        raise InvalidInput(f"`sums` must be one of {SUMS}, got {sums!r}.")
    if sums == "spectral":
        reason = spectral_unavailable(model, domain, heads)
        if reason:
            raise InvalidInput(f"`sums`='spectral' {reason}.")
    return sums


def crossover(dim, lmax):
    """The number of points from which the spectral sums are faster than the direct ones (one
    thread, benchmarks/bench_fast_sums.py): the direct sums cost about 2.5 ns·n², the spectral ones
    O(n) plus a fixed O(L² log L)."""
    return 256 if dim == 2 else 16 * (lmax + 10)


def choose_sums(sums, model, n, weights, *, domain="sphere", tol=1e-6, epsilon=EPSILON, causal=None, heads=False):
    """The sums a run of n points uses, and the bound on the spectral field's relative error.

    "auto" takes the spectral sums when they apply (`spectral_unavailable`; ``heads``: several zonal heads
    accepted), n >= `crossover` (under a mask, whose direct sums cost half, twice that and at least two
    blocks of `causal_block`) and the bound ε/max(min_j w_j, e^{−2β}) (`error_bound`; under a mask
    ``causal``, a `meanfield.transformer.masks.TokenMask` or one per head, `masked_error_bound`; the largest over the
    heads, each with its own β) is at most ``tol``; else the direct ones (bound 0: exact up to rounding).
    Returns (kind, bound)."""
    check_sums(sums, model, domain, heads)
    if sums == "direct" or spectral_unavailable(model, domain, heads):
        return "direct", 0.0
    models = model.head_models if heads else [model]
    masks = (None,) * len(models) if causal is None else (
        causal if isinstance(causal, tuple) else (causal,) * len(models))
    if any(mask is not None and np.any(~mask.silent & (mask.normaliser < np.finfo(float).tiny)) for mask in masks):
        if sums == "spectral":        # the blocked transforms carry D_i, which underflows (a slope λ/n >~ 700)
            raise InvalidInput("`sums`='spectral' cannot sum a mask whose positional normaliser underflows (an ALiBi "
                               "slope steeper than about 700 per token under 'causal-strict'); use sums='direct'.")
        return "direct", 0.0
    bound = max(error_bound(weights, m.beta, epsilon) if mask is None else
                masked_error_bound(weights, m.beta, mask.normaliser, mask.includes_self, epsilon)
                for m, mask in zip(models, masks))
    if sums == "auto":
        lmax = max(truncation_degree(m.beta, model.dim, epsilon) for m in models)
        least = crossover(model.dim, lmax) if causal is None else max(2 * crossover(model.dim, lmax),
                                                                       2 * causal_block(model.dim, lmax))
        if n < least or bound > tol:
            return "direct", 0.0
    return "spectral", bound


def choose_layered_sums(sums, model, x, w, rule, *, tol=1e-6, epsilon=EPSILON, threads=1):
    """The sums of labels in (σ, x) (``x`` (M, n, d), weights ``w`` (M, n), position rule ``rule``), and the
    bound on the spectral field's relative error at these labels. "auto" takes the spectral prefix sums
    (`layered_zonal_sums`) when they apply (`spectral_unavailable`), are faster (M·n >= `crossover` and n >=
    `crossover`/4: the direct sums cost about those of one unmasked run of all M·n labels, the spectral ones
    M transforms of n labels; measured on one thread at β = 4, M = 8 and 32, S^1 and S^2) and the bound
    (`layered_error_bound`, from one evaluation of the sums at ``x``) is at most ``tol``; else the direct
    ones (bound 0). Returns (kind, bound)."""
    check_sums(sums, model)
    if sums == "direct" or spectral_unavailable(model):
        return "direct", 0.0
    M, n, d = x.shape
    zs = zonal_sums(model.beta, d, epsilon)
    least = crossover(d, zs.lmax)
    if sums == "auto" and (M * n < least or 4 * n < least):
        return "direct", 0.0
    bound = layered_error_bound(layered_zonal_sums(zs, x, w, rule, threads)[0], w, rule, epsilon)
    if sums == "auto" and bound > tol:
        return "direct", 0.0
    return "spectral", bound
