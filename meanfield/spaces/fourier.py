"""Fourier modes on S^1: the one basis of the circle's spectral states and solvers (docs/mathematics.md §2;
Geshkovski, Letrouit, Polyanskiy, Rigollet, *A mathematical perspective on Transformers* (2023), §3).

ρ(θ) = Σ_{|k|<=K} c_k e^{ikθ}, c_{−k} = conj(c_k), c_k relative to σ = dθ/2π (so c_0 is the mass);
the grid θ_j = 2πj/M with weights 1/M is exact for the modes |k| < M. `FourierBasis` owns the
truncation, its grid, the transforms (FFTs), the gradient, the values at any points and the padding
onto a finer basis; `meanfield.representations.fourier.FourierSeries` and `solvers.FourierCircle` both
hold one.
"""
import ducc0.nufft as nufft
import numpy as np
import scipy.fft as sfft

from ..validation import check_int
from .quadrature import circle_points, readonly

NUFFT_EPSILON = 3e-13     # accuracy of ducc0's nonuniform FFT (it needs epsilon > 2e-13 in double precision)


def fourier_grid_size(degree):
    """M = the smallest fast FFT length >= degree + 1: the trapezoid rule on M points is exact for
    the modes |k| <= degree."""
    return int(sfft.next_fast_len(int(degree) + 1, real=True))


def midpoint_coefficients(values, J):
    """c_0..c_J = (1/n) Σ_j ρ_j e^{−ikθ_j} of values at the midpoints θ_j = 2π(j + ½)/n (J < n/2)."""
    n = values.shape[-1]
    return sfft.rfft(values, norm="forward")[..., :J + 1] * np.exp(-1j * np.pi * np.arange(J + 1) / n)


def series_at_angles(c, theta):
    """c_0 + 2 Re Σ_{k>=1} c_k e^{ikθ} at angles θ of any shape, by direct sums (exact to rounding;
    O(K) per angle, in blocks of 4096 angles)."""
    c = np.asarray(c)
    theta = np.asarray(theta, dtype=float)
    flat = theta.ravel()
    out = np.empty(flat.shape)
    k = np.arange(1, c.shape[-1])
    for s in range(0, flat.size, 4096):
        e = np.exp(1j * np.outer(flat[s:s + 4096], k))
        out[s:s + 4096] = c[0].real + 2 * (e @ c[1:]).real
    return out.reshape(theta.shape)


def midpoint_values(c, n):
    """ρ at the n midpoints θ_j = 2π(j + ½)/n of coefficients c_0..c_K: one inverse FFT when n >= 2K + 1,
    else the direct sums of `series_at_angles`."""
    c = np.asarray(c)
    K = c.shape[-1] - 1
    if n < 2 * K + 1:
        return series_at_angles(c, 2 * np.pi * (np.arange(n) + 0.5) / n)
    full = np.zeros(n, dtype=complex)
    full[:K + 1] = c
    full[n - K:] = np.conj(c[1:][::-1])
    shift = np.exp(1j * np.pi * np.fft.fftfreq(n, 1.0 / n) / n)   # midpoint offset ½·2π/n
    return np.fft.ifft(full * shift).real * n


class FourierBasis:
    """Fourier modes c_0..c_K on S^1, ρ(θ) = c_0 + 2 Re Σ_{k=1}^{K} c_k e^{ikθ} (c_k relative to σ).

    Parameters
    ----------
    modes : K >= 1.
    degree : the grid θ_j = 2πj/M has M = `fourier_grid_size`(degree) points, so that products of
        total degree <= ``degree`` are transformed back exactly (default 3K: the 3/2 rule, a product
        of two degree-K fields tested against a degree-K mode).
    threads : pocketfft's workers over a batch of rows.

    Attributes: ``modes``, ``M``, ``degrees`` and ``wavenumbers`` k = 0..K (int, float), ``angles`` θ_j,
    ``points`` (M, 2), ``weights`` 1/M, ``laplacian`` k² (−Δ e^{ikθ} = k² e^{ikθ}).

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.spaces.fourier import FourierBasis
    >>> basis = FourierBasis(16)              # M = 50 grid points, exact for degree 48
    >>> c = np.zeros(17, dtype=complex); c[0], c[3] = 1.0, 0.25        # ρ = 1 + cos 3θ/2
    >>> bool(np.allclose(basis.synthesis(c), 1 + 0.5 * np.cos(3 * basis.angles)))
    True
    """

    def __init__(self, modes, degree=None, threads=1):
        self.threads = check_int(threads, "threads", low=1)
        self.modes = K = check_int(modes, "modes", low=1)
        self.degree = 3 * K if degree is None else check_int(degree, "degree", low=K)
        self.M = fourier_grid_size(self.degree)
        self.degrees = readonly(np.arange(K + 1))
        self.wavenumbers = readonly(np.arange(K + 1, dtype=float))
        self.laplacian = readonly(self.wavenumbers ** 2)

    @property
    def angles(self):
        return 2 * np.pi * np.arange(self.M) / self.M

    @property
    def points(self):
        return circle_points(self.angles)

    @property
    def weights(self):
        return np.full(self.M, 1.0 / self.M)

    @property
    def frame(self):
        """The unit tangent e_θ = (−sin θ, cos θ) at the grid points, (1, M, 2): the direction of ``gradient``."""
        return circle_points(self.angles + np.pi / 2)[None]

    def synthesis(self, c):
        """Values ρ(θ_j) on the grid of coefficients c_0..c_J (last axis, J <= M/2: zero-padded)."""
        return sfft.irfft(c, n=self.M, axis=-1, norm="forward", workers=self._workers(c))

    def analysis(self, values):
        """c_0..c_K of grid values (last axis): c_k = (1/M) Σ_j ρ_j e^{−ikθ_j}, exact for modes |k| < M − K."""
        return sfft.rfft(values, axis=-1, norm="forward", workers=self._workers(values))[..., :self.modes + 1]

    def _workers(self, a):
        """pocketfft's workers for a batch ``a``: the rows (every axis but the last) are shared among
        ``threads`` when there are several, each transformed whole on one worker (the same bits)."""
        return self.threads if np.ndim(a) > 1 and np.size(a) > 4 * np.shape(a)[-1] else 1

    def derivative(self, c):
        """Coefficients of ∂_θ ρ: ik c_k."""
        return 1j * self.wavenumbers * c

    def gradient(self, c):
        """∂_θ ρ on the grid (the tangential gradient along (−sin θ, cos θ))."""
        return self.synthesis(self.derivative(c))

    def values_at(self, c, points):
        """c_0 + 2 Re Σ_{k>=1} c_k e^{ikθ} at the points (m, 2) of S^1 for each row of c (rows, K + 1):
        one type-2 nonuniform FFT (ducc0, accurate to 3e-13 relative to Σ|c_k|), shape (rows, m).
        `series_at_angles` sums exactly (O(mK)); `midpoint_values` gives the values on a midpoint grid."""
        c = np.atleast_2d(c)
        full = np.concatenate([np.conj(c[:, :0:-1]), c], axis=1)          # k = −K..K
        theta = np.arctan2(points[..., 1], points[..., 0])
        return nufft.u2nu(grid=full, coord=theta[:, None], forward=False, epsilon=NUFFT_EPSILON, nthreads=1).real

    def pad(self, c, finer):
        """Coefficients (last axis) zero-padded with the modes of ``finer`` beyond this basis."""
        out = np.zeros(c.shape[:-1] + (c.shape[-1] + finer.modes - self.modes,), dtype=c.dtype)
        out[..., :c.shape[-1]] = c
        return out


__all__ = ["FourierBasis", "fourier_grid_size", "midpoint_coefficients", "midpoint_values", "series_at_angles"]
