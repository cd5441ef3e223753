"""Spectral bases on spheres, shared by the time-dependent and the stationary solvers.

A basis owns a truncation (the degrees it keeps), a grid with its quadrature for σ, the transforms
between coefficients and grid values, the gradient, and how its coefficients are zero-padded onto
a finer basis (docs/mathematics.md §2–§3; Geshkovski, Letrouit, Polyanskiy, Rigollet, *A
mathematical perspective on Transformers* (2023), §3):

* `FourierBasis` (S^1): ρ(θ) = Σ_{|k|<=K} c_k e^{ikθ}, c_{−k} = conj(c_k), c_k relative to
  σ = dθ/2π; the grid θ_j = 2πj/M with weights 1/M is exact for modes |k| < M; FFTs.
* `SphericalHarmonicBasis` (S^2): ρ = Σ_{l<=L} a_lm Y_lm with the dA-orthonormal ducc0 a_lm
  (healpy layout); a Gauss–Legendre grid exact for harmonics of degree `degree`; ducc0 transforms,
  the gradient by one spin-1 synthesis and the divergence of a tangent field by one spin-1 analysis.
* `GegenbauerBasis` (zonal functions on S^{d−1}, any d >= 2): f(s) = Σ_l c_l p_l(s), s = ⟨x, e⟩,
  p_l orthonormal for the law of s under σ; Gauss–Gegenbauer nodes; matrix transforms. Its
  ``sector`` m >= 1 spans the functions G_l^m(s)·Y_m(ξ) (x = s e + (1−s²)^{1/2} ξ) used by the
  stability analysis of zonal states.

`ResolutionPolicy` is the one rule for an automatic resolution (``modes="auto"`` / ``lmax="auto"``):
where it starts, how it grows on refinement, and the checks of a fixed resolution. Each basis
carries its numbers as ``Basis.policy``; a solver adds its memory estimate (`ResolutionPolicy.with_memory`).

How a solver uses a basis: build it in ``_setup(resolution)``; synthesise the fields it needs on
``basis.points`` (``synthesis``, ``gradient``), form the nonlinear products there, come back with
``analysis`` (or ``divergence`` on S^2); on refinement, ``basis.pad(state, finer_basis)``.
"""
from dataclasses import dataclass, replace
from typing import Callable, Optional

import numpy as np
import scipy.fft as sfft
from ducc0.fft import good_size
import ducc0.nufft as nufft
from ducc0.sht import adjoint_synthesis, analysis_2d, synthesis, synthesis_2d_deriv1
from ducc0.sht.experimental import synthesis_general
from scipy.special import eval_jacobi

from meanfield.transformer.kernels import minimum_degree
from meanfield.sums.spectralsums import EPSILON, circle_angles, sphere_angles, tangent_vectors
from meanfield.spaces.quadrature import circle_points, gauss_gegenbauer, gauss_legendre_grid
from meanfield.threads import blas_single_threaded, share_out, transform_threads
from meanfield.validation import check_int, check_memory
from .spectral import check_kernel_resolution
from meanfield.representations.gegenbauer import gegenbauer_table
from meanfield.representations.harmonics import SphericalHarmonicSeries, alm_degrees, alm_to_real, real_to_alm
from meanfield.errors import InvalidInput


def _readonly(a):
    a = np.ascontiguousarray(a)
    a.setflags(write=False)
    return a


# -- resolution policy --------------------------------------------------------------------------------
@dataclass(frozen=True)
class ResolutionPolicy:
    """The resolution of a spectral solver: a fixed integer, or "auto" (start coarse, refine).

    The refined quantity is the bandwidth n = resolution + ``offset`` (the number of Fourier modes
    K, or of degrees L + 1 with ``offset`` = 1 on S^2). Refinement doubles it, up to the cap:
    ``refine(r, cap) = min(2(r + offset) − offset, cap)``. The automatic start is the smallest
    resolution that resolves the kernel (`meanfield.transformer.kernels.minimum_degree`: a_l(β)/a_0(β) < 1e-14
    beyond it), at least ``auto_start``; with ``round_start`` its bandwidth is rounded up to a power
    of two, so that the refinements stay on powers of two. Without it (spherical harmonics, whose
    transforms cost O(L³)) the start is the kernel's minimum itself.

    Every solver states its resolution this way (``Solver.policy``), so that a configuration reads
    it: a solver without "auto" gives only ``name`` and ``low`` (e.g. ``ResolutionPolicy("nodes", low=1)``).

    Parameters
    ----------
    name, cap_name : the solver's argument names ("modes"/"max_modes", "lmax"/"max_lmax"); ``cap_name``
        None: no "auto".
    low, high : the accepted range of a resolution (``high`` None: no upper bound).
    auto_start : the smallest automatic start; auto_cap : the default cap of "auto".
    offset : bandwidth − resolution (0 or 1).
    round_start : round the automatic start up to a power-of-two bandwidth.
    memory : estimated working memory in bytes of a run at a resolution (None: not checked).
    """

    name: str
    cap_name: Optional[str] = None
    low: int = 1
    auto_start: Optional[int] = None
    auto_cap: Optional[int] = None
    high: Optional[int] = None
    offset: int = 0
    round_start: bool = True
    memory: Optional[Callable[[int], float]] = None

    @property
    def automatic(self):
        """Whether the resolution may be "auto"."""
        return self.cap_name is not None

    def check(self, value):
        """An integer in [low, high], or "auto" where the policy has a cap (ValueError naming ``name``)."""
        if isinstance(value, str) and self.automatic:
            if value != "auto":
                raise InvalidInput(f"`{self.name}` must be an integer >= {self.low} or 'auto', got {value!r}.")
            return value
        return check_int(value, self.name, low=self.low, high=self.high)

    def fixed(self, value, beta, dim):
        """Check a fixed resolution: an integer in [low, high], within the machine's memory, and
        resolving the kernel e^{β⟨x,y⟩} (ValueError naming the argument otherwise)."""
        r = check_int(value, self.name, low=self.low)
        if self.memory is not None:
            check_memory(self.memory(r), self.name, r)
        if self.high is not None:
            r = check_int(r, self.name, high=self.high)
        check_kernel_resolution(beta, dim, r, self.name)
        return r

    def start(self, beta, dim):
        """The first resolution of "auto" for the kernel e^{β⟨x,y⟩} on S^{dim−1}."""
        need = minimum_degree(beta, dim)
        if self.round_start:
            bandwidth = 1 << int(np.ceil(np.log2(max(need + self.offset, 2))))
            need = bandwidth - self.offset
        return max(self.auto_start, need)

    def choose(self, value, cap, beta, dim):
        """(resolution, cap, automatic) for the solver's arguments ``value`` (an integer or "auto")
        and ``cap`` (used with "auto"; a fixed resolution is its own cap, but a cap given with it must
        still be an integer >= low: a misspelt cap is refused, not ignored)."""
        if not isinstance(value, str):
            r = self.fixed(value, beta, dim)
            if cap is not None and self.cap_name is not None:
                check_int(cap, self.cap_name, low=self.low)
            return r, r, False
        if value != "auto":
            raise InvalidInput(f"`{self.name}` must be an integer >= {self.low} or 'auto', got {value!r}.")
        cap = check_int(cap, self.cap_name, low=self.low, high=self.high)
        r = self.start(beta, dim)
        if r > cap:
            raise InvalidInput(f"`{self.cap_name}`={cap} is below the resolution {self.name}={r} needed to resolve "
                             f"the kernel at beta={beta:g}.")
        return r, cap, True

    def refine(self, resolution, cap):
        """The next resolution: the bandwidth doubled, at most ``cap``."""
        return min(2 * (int(resolution) + self.offset) - self.offset, int(cap))

    def with_memory(self, memory):
        """The same policy with a solver's estimate ``memory(resolution)`` of its working memory in bytes."""
        return replace(self, memory=memory)


# -- S^1 ------------------------------------------------------------------------------------------------
def fourier_grid_size(degree):
    """M = the smallest fast FFT length >= degree + 1: the trapezoid rule on M points is exact for
    the modes |k| <= degree."""
    return int(sfft.next_fast_len(int(degree) + 1, real=True))


def midpoint_coefficients(values, J):
    """c_0..c_J = (1/n) Σ_j ρ_j e^{−ikθ_j} of values at the midpoints θ_j = 2π(j + ½)/n (J < n/2)."""
    n = values.shape[-1]
    return sfft.rfft(values, norm="forward")[..., :J + 1] * np.exp(-1j * np.pi * np.arange(J + 1) / n)


class FourierBasis:
    """Fourier modes c_0..c_K on S^1, ρ(θ) = c_0 + 2 Re Σ_{k=1}^{K} c_k e^{ikθ} (c_k relative to σ).

    Parameters
    ----------
    modes : K >= 1.
    degree : the grid θ_j = 2πj/M has M = `fourier_grid_size`(degree) points, so that products of
        total degree <= ``degree`` are transformed back exactly (default 3K: the 3/2 rule, a product
        of two degree-K fields tested against a degree-K mode).

    Notes
    -----
    ``FourierBasis.policy``: K >= 8 (at most 2^26); "auto" starts at 64 modes and stops at 16384 by default.

    Attributes: ``modes``, ``M``, ``degrees`` and ``wavenumbers`` k = 0..K (int, float), ``angles`` θ_j,
    ``points`` (M, 2), ``weights`` 1/M, ``laplacian`` k² (−Δ e^{ikθ} = k² e^{ikθ}).
    """

    policy = ResolutionPolicy("modes", "max_modes", low=8, auto_start=64, auto_cap=16384, high=2 ** 26)

    def __init__(self, modes, degree=None, threads=1):
        self.threads = check_int(threads, "threads", low=1)      # pocketfft's workers over a batch of rows
        self.modes = K = check_int(modes, "modes", low=1)
        self.degree = 3 * K if degree is None else check_int(degree, "degree", low=K)
        self.M = fourier_grid_size(self.degree)
        self.degrees = _readonly(np.arange(K + 1))
        self.wavenumbers = _readonly(np.arange(K + 1, dtype=float))
        self.laplacian = _readonly(self.wavenumbers ** 2)

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
        one type-2 nonuniform FFT (ducc0, accurate to 3e-13 relative to Σ|c_k|), shape (rows, m)."""
        c = np.atleast_2d(c)
        full = np.concatenate([np.conj(c[:, :0:-1]), c], axis=1)          # k = −K..K
        return nufft.u2nu(grid=full, coord=circle_angles(points)[:, None], forward=False, epsilon=EPSILON,
                          nthreads=1).real

    def pad(self, c, finer):
        """Coefficients (last axis) zero-padded with the modes of ``finer`` beyond this basis."""
        out = np.zeros(c.shape[:-1] + (c.shape[-1] + finer.modes - self.modes,), dtype=c.dtype)
        out[..., :c.shape[-1]] = c
        return out


# -- S^2 ------------------------------------------------------------------------------------------------
def harmonic_grid_shape(degree):
    """(ntheta, nphi) of the Gauss–Legendre grid exact for harmonics of degree <= ``degree``:
    ntheta = ⌊degree/2⌋ + 1 rings (2·ntheta − 1 >= degree) of nphi >= degree + 1 longitudes."""

    return int(degree) // 2 + 1, int(good_size(int(degree) + 1, True))


class SphericalHarmonicBasis:
    """Spherical harmonics of degree <= lmax on S^2, in ducc0's complex a_lm (healpy layout, dA-orthonormal).

    Parameters
    ----------
    lmax : L >= 1.
    degree : the Gauss–Legendre grid (`harmonic_grid_shape`) integrates σ-exactly the harmonics of
        degree <= ``degree`` (default 3L: a product of two degree-L fields tested against degree L).
    nthreads : ducc0 threads (one below lmax `meanfield.threads.SHARE_LMAX`: `transform_threads`).

    Notes
    -----
    ``SphericalHarmonicBasis.policy``: 4 <= L <= 8191; "auto" starts at degree 31 and stops at 1023.

    Attributes: ``lmax``, ``ntheta``, ``nphi``, ``theta`` (colatitudes of the rings), ``points``
    (ntheta, nphi, 3), ``weights`` (summing to 1), ``degrees``/``orders`` l, m of each a_lm,
    ``laplacian`` l(l+1).
    """

    # the bandwidth is L + 1; the automatic start is the kernel's minimum degree itself (O(L³) transforms)
    policy = ResolutionPolicy("lmax", "max_lmax", low=4, auto_start=31, auto_cap=1023, high=8191, offset=1,
                              round_start=False)

    def __init__(self, lmax, degree=None, nthreads=1):
        self.lmax = L = check_int(lmax, "lmax", low=1)
        self.degree = 3 * L if degree is None else check_int(degree, "degree", low=L)
        self.threads = check_int(nthreads, "nthreads", low=1)
        self.nthreads = transform_threads(self.threads, L)
        self.ntheta, self.nphi = harmonic_grid_shape(self.degree)
        self.theta, _, self.points, self.weights = gauss_legendre_grid(self.ntheta, self.nphi)
        self._geometry = dict(theta=self.theta, lmax=L, nphi=np.full(self.ntheta, self.nphi, dtype=np.uintp),
                              phi0=np.zeros(self.ntheta),
                              ringstart=(np.arange(self.ntheta) * self.nphi).astype(np.uintp))
        ls, ms = alm_degrees(L)
        self.degrees, self.orders = _readonly(ls), _readonly(ms)
        self.laplacian = _readonly(ls * (ls + 1.0))
        self.zonal = _readonly(ms == 0)
        self._divergence = _readonly(np.sqrt(self.laplacian))
        self._area_weights = _readonly(4 * np.pi * self.weights.reshape(self.ntheta, self.nphi))   # dΩ per node

    @property
    def frame(self):
        """The unit tangents (e_θ, e_φ) at the grid points, (2, ntheta, nphi, 3): the components of
        ``gradient`` and ``divergence``, e_θ = (cos θ cos φ, cos θ sin φ, −sin θ), e_φ = (−sin φ, cos φ, 0)."""
        phi = 2 * np.pi * np.arange(self.nphi) / self.nphi
        st, ct = np.sin(self.theta)[:, None], np.cos(self.theta)[:, None]
        cp, sp = np.broadcast_to(np.cos(phi), st.shape[:1] + phi.shape), np.broadcast_to(np.sin(phi), (st.size, phi.size))
        e_theta = np.stack([ct * cp, ct * sp, np.broadcast_to(-st, cp.shape)], axis=-1)
        e_phi = np.stack([-sp, cp, np.zeros_like(cp)], axis=-1)
        return np.stack([e_theta, e_phi])

    def synthesis(self, alm):
        """Grid values (..., ntheta, nphi) of coefficient vectors alm (..., nalm)."""

        alm = np.asarray(alm)
        batch = alm.reshape(-1, 1, alm.shape[-1])
        out = self._batched(lambda a, nt: synthesis(alm=a, spin=0, nthreads=nt, **self._geometry), batch)
        return out.reshape(alm.shape[:-1] + (self.ntheta, self.nphi))

    def _batched(self, transform, batch):
        """transform(batch, nthreads) of a batch of maps (axis 0): below `meanfield.threads.SHARE_LMAX`, where
        one transform does not share its work, the maps are shared among ``threads`` threads in parts, each
        part one ducc0 call on one thread (every map is transformed alone: the same bits whatever the
        parts); else one call on ducc0's threads."""
        parts = min(len(batch), 2 * self.threads)
        if parts <= 1 or self.threads == 1 or self.nthreads > 1:
            return transform(batch, self.nthreads)
        bounds = np.linspace(0, len(batch), parts + 1).astype(int)
        results = [None] * parts

        def work(k):
            results[k] = transform(batch[bounds[k]:bounds[k + 1]], 1)

        with blas_single_threaded():
            share_out(work, range(parts), self.threads)
        return np.concatenate(results)

    def analysis(self, values):
        """a_lm (..., nalm) of grid values (..., ntheta, nphi), exact for degree <= 2·ntheta − 1 − L;
        the m = 0 coefficients of a real field are real."""

        values = np.asarray(values, dtype=float)
        batch = values.reshape((-1,) + values.shape[-2:])
        alm = self._batched(lambda a, nt: analysis_2d(map=a, spin=0, lmax=self.lmax, geometry="GL", nthreads=nt),
                            batch)
        alm[:, self.zonal] = alm[:, self.zonal].real
        return alm.reshape(values.shape[:-2] + (alm.shape[-1],))

    def gradient(self, alm):
        """(∂_θ f, ∂_φ f / sin θ) (..., 2, ntheta, nphi) of f = Σ a_lm Y_lm (..., nalm): one spin-1 synthesis
        (a batch: one spin-1 synthesis of the E-modes sqrt(l(l+1))·a_lm for all of them)."""

        alm = np.asarray(alm)
        if alm.ndim > 1:
            e = (self._divergence * alm).reshape(-1, 1, alm.shape[-1])
            modes = np.concatenate([e, np.zeros_like(e)], axis=1)
            out = self._batched(lambda a, nt: synthesis(alm=a, spin=1, nthreads=nt, **self._geometry), modes)
            return out.reshape(alm.shape[:-1] + (2, self.ntheta, self.nphi))
        return synthesis_2d_deriv1(alm=alm[None], lmax=self.lmax, geometry="GL", ntheta=self.ntheta,
                                   nphi=self.nphi, nthreads=self.nthreads)

    def divergence(self, field):
        """Coefficients of −div_S F for a tangent field F = (F_θ, F_φ) on the grid: sqrt(l(l+1))·E_lm[F],
        E_lm the gradient (E-mode) part of its spin-1 analysis. A batch (..., 2, ntheta, nphi) is analysed
        in one call (the Gauss–Legendre analysis is the adjoint synthesis of the quadrature-weighted field)."""

        field = np.asarray(field)
        if field.ndim > 3:
            weighted = (field * self._area_weights).reshape((-1, 2, self.ntheta * self.nphi))
            e = self._batched(lambda a, nt: adjoint_synthesis(map=a, spin=1, nthreads=nt, **self._geometry),
                              weighted)[:, 0]
            return self._divergence * e.reshape(field.shape[:-3] + (e.shape[-1],))
        e = analysis_2d(map=field, spin=1, lmax=self.lmax, geometry="GL", nthreads=self.nthreads)[0]
        return self._divergence * e

    def values_at(self, alm, points):
        """Σ a_lm Y_lm at the points (m, 3) of S^2: ducc0's synthesis_general (accurate to 3e-13
        relative to the coefficients), shape (m,)."""
        return synthesis_general(alm=np.ascontiguousarray(alm)[None], spin=0, lmax=self.lmax,
                                 loc=sphere_angles(points)[0], epsilon=EPSILON, nthreads=self.nthreads)[0].real

    def gradient_at(self, alm, points):
        """The surface gradient ∇_S f (m, 3) of f = Σ a_lm Y_lm at the points (m, 3) of S^2: one spin-1
        synthesis_general of the same accuracy."""
        loc, frame = sphere_angles(points)
        g = synthesis_general(alm=np.ascontiguousarray(alm)[None], spin=1, lmax=self.lmax, loc=loc, epsilon=EPSILON,
                              nthreads=self.nthreads, mode="DERIV1")
        return tangent_vectors(g, frame)

    def pad(self, alm, finer):
        """a_lm zero-padded to the degrees of ``finer``."""

        clm = alm_to_real(alm, self.lmax)[None]
        return real_to_alm(SphericalHarmonicSeries(finer.lmax).embed(clm, SphericalHarmonicSeries(self.lmax))[0])


# -- S^{d-1}, zonal -------------------------------------------------------------------------------------
def node_count(lmax):
    """Gauss–Gegenbauer nodes for degree L: n = ceil((3L + 1)/2) + 1, exact for degree 2n − 1 >= 3L + 2."""
    return (3 * int(lmax) + 2) // 2 + 1


class GegenbauerBasis:
    """Orthonormal functions of sector m on S^{d−1} about an axis e, degrees l = max(m, lowest)..lmax.

    Sector 0 (zonal functions): p_l(s), s = ⟨x, e⟩, the orthonormal polynomials of the law
    c_d (1 − s²)^{(d−3)/2} ds of s under σ (`meanfield.representations.gegenbauer.gegenbauer_table`).
    Sector m >= 1: G_l^m(s) = (1−s²)^{m/2} P_{l−m}^{(α,α)}(s)/N_l, α = (d−3)/2 + m, the s-part of
    G_l^m(s)·Y_m(ξ), with N_l fixed by Σ_j w_j G_l(s_j)² = 1 (exact: a polynomial of degree 2l).

    Parameters
    ----------
    lmax, dim : the top degree L and d >= 2.
    nodes : Gauss–Gegenbauer nodes (default `node_count`(L), exact for degree 3L + 2).
    sector : m >= 0.
    lowest : the lowest degree kept (e.g. 1 without the mass).
    rule : (nodes, weights) of a Gauss–Gegenbauer rule already computed (instead of ``nodes``),
        as `in_sector` passes it.

    Notes
    -----
    ``GegenbauerBasis.policy``: L >= 4; "auto" starts at degree 32 and stops at 1024 by default.

    Attributes: ``degrees``, ``nodes`` s_j, ``weights`` w_j (summing to 1), ``table`` G (n, k) of
    the values at the nodes, ``projection`` Gᵀdiag(w) (k, n), ``derivative_table`` (sector 0:
    p_l'(s_j)), ``laplacian`` l(l + d − 2).
    """

    policy = ResolutionPolicy("lmax", "max_lmax", low=4, auto_start=32, auto_cap=1024)

    def __init__(self, lmax, dim, nodes=None, *, sector=0, lowest=0, rule=None):
        self.lmax = L = check_int(lmax, "lmax", low=0)
        self.dim = d = check_int(dim, "dim", low=2)
        self.sector = m = check_int(sector, "sector", low=0, high=L)
        if rule is None:
            n = node_count(L) if nodes is None else check_int(nodes, "nodes", low=1)
            rule = gauss_gegenbauer(n, d)
        s, w = (_readonly(np.asarray(a, dtype=float)) for a in rule)
        self.nodes, self.weights = s, w
        self.degrees = _readonly(np.arange(max(m, lowest), L + 1))
        self.alpha = 0.5 * (d - 3) + m
        if m == 0:
            P, dP = gegenbauer_table(L, d, s, derivative=True)
            self.norm = None
            self.table, self.derivative_table = _readonly(P[:, self.degrees]), _readonly(dP[:, self.degrees])
        else:
            raw = self._jacobi(s)
            self.norm = np.sqrt(w @ raw ** 2)
            self.table, self.derivative_table = _readonly(raw / self.norm), None
        self.projection = _readonly((self.table * w[:, None]).T)
        self.laplacian = _readonly(self.degrees * (self.degrees + d - 2.0))

    def in_sector(self, m, lowest=None):
        """The basis of sector ``m`` on the same nodes (the quadrature is not computed again)."""
        return GegenbauerBasis(self.lmax, self.dim, sector=m, lowest=self.degrees[0] if lowest is None else lowest,
                               rule=(self.nodes, self.weights))

    def _jacobi(self, s):
        s = np.asarray(s, dtype=float)[..., None]
        m = self.sector
        return (1 - s * s) ** (0.5 * m) * eval_jacobi(self.degrees - m, self.alpha, self.alpha, s)

    def values(self, s):
        """G_l(s) at any s (shape s.shape + (k,))."""
        if self.sector:
            return self._jacobi(s) / self.norm

        return gegenbauer_table(self.lmax, self.dim, s)[..., self.degrees]

    def derivatives(self, s):
        """p_l'(s) at any s (sector 0)."""

        if self.sector:
            raise InvalidInput("`derivatives` is defined for sector 0 only.")
        return gegenbauer_table(self.lmax, self.dim, s, derivative=True)[1][..., self.degrees]

    def synthesis(self, c):
        """f(s_j) = Σ_l c_l G_l(s_j) at the nodes."""
        return self.table @ c

    def analysis(self, values):
        """c_l = Σ_j w_j f(s_j) G_l(s_j), exact for f polynomial of degree <= 2n − 1 − L."""
        return self.projection @ values

    def gradient(self, c):
        """∂_s f at the nodes (sector 0); the tangential gradient is ∂_s f·(e − s x), so
        |∇f|² = (1 − s²)(∂_s f)²."""
        return self.derivative_table @ c

    def pad(self, c, finer):
        """Coefficients (last axis) zero-padded to the degrees of ``finer``."""
        out = np.zeros(c.shape[:-1] + (finer.degrees.size,), dtype=c.dtype)
        out[..., :c.shape[-1]] = c
        return out


__all__ = ["ResolutionPolicy", "FourierBasis", "SphericalHarmonicBasis", "GegenbauerBasis", "fourier_grid_size",
           "harmonic_grid_shape", "midpoint_coefficients", "node_count"]
