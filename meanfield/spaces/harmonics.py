"""Spherical harmonics on S^2: the one basis of every spectral state on S^2 (the harmonics
representation, its solver, the densities built from coefficients and the moments of the diagnostics),
kept on the floor of the function spaces so that all of them can read it (docs/mathematics.md §2–§3;
docs/conventions.md; Geshkovski, Letrouit, Polyanskiy, Rigollet, *A mathematical perspective on
Transformers* (2023), §3).

* `real_sh`: the real harmonics Y_lm, orthonormal in L²(σ) (pyshtools '4pi', csphase=1);
* ducc0's complex a_lm (healpy layout: m >= 0, index m(2L+1−m)/2 + l; dA-orthonormal, Condon–Shortley
  phase) and their map to the real coefficients: a_l0 = sqrt(4π)·C_l0, a_lm = sqrt(2π)·(−1)^m·(C_lm − i S_lm)
  (`real_to_alm`, `alm_to_real`), degree powers and cross terms (`alm_power`, `alm_cross`);
* `SphericalHarmonicBasis`: the truncation L, a Gauss–Legendre grid with its quadrature for σ (built on
  first use), the transforms, the gradient by one spin-1 synthesis, the divergence of a tangent field by
  one spin-1 analysis, the values at any points and the padding onto a finer basis.
  `meanfield.representations.harmonics.SphericalHarmonicSeries` and `solvers.SphericalHarmonics` both hold one.
"""
import functools

import numpy as np
from ducc0.fft import good_size
from ducc0.sht import adjoint_synthesis, analysis_2d, synthesis
from ducc0.sht.experimental import synthesis_general
from scipy.special import assoc_legendre_p, gammaln

from ..threads import blas_single_threaded, share_out, transform_threads
from ..validation import check_int
from .quadrature import gauss_legendre_grid, readonly

EVAL_EPSILON = 1e-13        # accuracy of ducc0's synthesis_general at points (relative to the coefficient norm)


def real_sh(l, m, x):
    """Real spherical harmonic of degree l, order m on S^2, orthonormal in L²(σ) ('4π' normalisation).

    m > 0: sqrt(2)·N P_l^m(cos θ) cos(mφ); m < 0: sqrt(2)·N P_l^|m|(cos θ) sin(|m|φ); m = 0: N P_l.
    No Condon–Shortley phase (pyshtools csphase=1 convention). N = sqrt((2l+1)(l−|m|)!/(l+|m|)!), so
    that ∫ Y_lm Y_l'm' dσ = δ_ll' δ_mm' for the uniform probability σ (docs/mathematics.md §3).

    Parameters
    ----------
    l : int
        The degree, l >= 0.
    m : int
        The order, −l <= m <= l.
    x : array (..., 3)
        Points of S^2.

    Returns
    -------
    array (...)
        Y_lm at the points.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.spaces.harmonics import real_sh
    >>> from meanfield.spaces.quadrature import gauss_legendre_grid
    >>> _, _, x, w = gauss_legendre_grid(4, 8)          # exact for degree <= 7
    >>> y21, y2m1 = real_sh(2, 1, x), real_sh(2, -1, x)
    >>> [abs(round(float(np.sum(w * f)), 12)) for f in (y2m1 * y2m1, y21 * y2m1, y21)]   # orthonormal
    [1.0, 0.0, 0.0]
    """
    z = np.clip(x[..., 2], -1.0, 1.0)
    phi = np.arctan2(x[..., 1], x[..., 0])
    am = abs(m)
    p = np.asarray(assoc_legendre_p(l, am, z, norm=False))[0]
    # remove the Condon-Shortley phase (-1)^m that scipy includes
    p = p * (-1.0) ** am
    norm = np.sqrt((2 * l + 1) * np.exp(gammaln(l - am + 1) - gammaln(l + am + 1)))
    if m == 0:
        return norm * p
    trig = np.cos(am * phi) if m > 0 else np.sin(am * phi)
    return np.sqrt(2.0) * norm * p * trig


def alm_size(lmax):
    """Number of complex a_lm (m >= 0) up to degree lmax: (L+1)(L+2)/2."""
    return (lmax + 1) * (lmax + 2) // 2


def alm_degrees(lmax):
    """(l, m) of every entry of a healpy-ordered a_lm array (m-major, then l = m..lmax)."""
    ls = np.concatenate([np.arange(m, lmax + 1) for m in range(lmax + 1)])
    ms = np.concatenate([np.full(lmax + 1 - m, m) for m in range(lmax + 1)])
    return ls, ms


def alm_index(l, m, lmax):
    """Position of (l, m), m >= 0, in the healpy layout."""
    return m * (2 * lmax + 1 - m) // 2 + l


def real_to_alm(clm):
    """pyshtools real '4pi' coefficients (2, L+1, L+1) -> ducc0 complex a_lm (dA-orthonormal, CS phase)."""
    clm = np.asarray(clm, dtype=float)
    L = clm.shape[-1] - 1
    ls, ms = alm_degrees(L)
    sign = (-1.0) ** ms
    fac = np.where(ms == 0, np.sqrt(4 * np.pi), np.sqrt(2 * np.pi) * sign)
    return fac * (clm[0, ls, ms] - 1j * np.where(ms == 0, 0.0, clm[1, ls, ms]))


def alm_to_real(alm, lmax):
    """Inverse of `real_to_alm`: ducc0 a_lm -> real (2, L+1, L+1) array (σ-orthonormal, no CS phase)."""
    alm = np.asarray(alm)
    ls, ms = alm_degrees(lmax)
    z = alm * (-1.0) ** ms
    clm = np.zeros((2, lmax + 1, lmax + 1))
    clm[0, ls, ms] = np.where(ms == 0, alm.real / np.sqrt(4 * np.pi), z.real / np.sqrt(2 * np.pi))
    clm[1, ls, ms] = np.where(ms == 0, 0.0, -z.imag / np.sqrt(2 * np.pi))
    return clm


def alm_power(alm, lmax):
    """Degree powers ‖ρ_l‖²_{L²(σ)} = (|a_l0|² + 2Σ_{m>0}|a_lm|²)/(4π), l = 0..lmax."""
    ls, ms = alm_degrees(lmax)
    w = np.where(ms == 0, 1.0, 2.0) / (4 * np.pi)
    return np.bincount(ls, weights=w * np.abs(alm) ** 2, minlength=lmax + 1)


def alm_cross(alm, dalm, lmax):
    """Σ_m ρ_lm·∂_tρ_lm in the σ-orthonormal real basis, per degree (for `energy_rate_from_spectrum`)."""
    ls, ms = alm_degrees(lmax)
    w = np.where(ms == 0, 1.0, 2.0) / (4 * np.pi)
    return np.bincount(ls, weights=w * (alm * np.conj(dalm)).real, minlength=lmax + 1)


def spherical_angles(x):
    """(colatitude θ ∈ [0, π], longitude φ ∈ [0, 2π)) of unit vectors x (..., 3)."""
    x = np.asarray(x, dtype=float)
    theta = np.arctan2(np.hypot(x[..., 0], x[..., 1]), x[..., 2])
    phi = np.mod(np.arctan2(x[..., 1], x[..., 0]), 2 * np.pi)
    return theta, phi


def synthesis_points(alm, lmax, x, nthreads=1, epsilon=EVAL_EPSILON):
    """Σ a_lm Y_lm at arbitrary points x (..., 3): ducc0's synthesis_general (NUFFT, accuracy ``epsilon``
    relative to the coefficients; `SphericalHarmonicBasis.values_at`)."""

    x = np.asarray(x, dtype=float)
    shape = x.shape[:-1]
    theta, phi = spherical_angles(x.reshape(-1, 3))
    if theta.size == 0:
        return np.zeros(shape)
    loc = np.stack([theta, phi], -1)
    out = synthesis_general(alm=np.ascontiguousarray(alm, dtype=complex)[None], spin=0, lmax=lmax, loc=loc,
                            epsilon=epsilon, nthreads=nthreads)[0]
    return out.reshape(shape)


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

    Attributes: ``lmax``, ``ntheta``, ``nphi``, ``degrees``/``orders`` l, m of each a_lm, ``laplacian``
    l(l+1); the grid, built on first use (a basis that only evaluates at points never builds it):
    ``theta`` (colatitudes of the rings), ``phi`` (longitudes), ``points`` (ntheta, nphi, 3), ``weights``
    (summing to 1), ``frame``.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.spaces.harmonics import SphericalHarmonicBasis, alm_index
    >>> basis = SphericalHarmonicBasis(8)
    >>> alm = np.zeros(basis.degrees.size, dtype=complex); alm[alm_index(1, 0, 8)] = np.sqrt(4 * np.pi / 3)
    >>> bool(np.allclose(basis.synthesis(alm), basis.points[..., 2]))       # Y_10·sqrt(4π/3) = z
    True
    """

    def __init__(self, lmax, degree=None, nthreads=1):
        self.lmax = L = check_int(lmax, "lmax", low=1)
        self.degree = 3 * L if degree is None else check_int(degree, "degree", low=L)
        self.threads = check_int(nthreads, "nthreads", low=1)
        self.nthreads = transform_threads(self.threads, L)
        self.ntheta, self.nphi = harmonic_grid_shape(self.degree)
        ls, ms = alm_degrees(L)
        self.degrees, self.orders = readonly(ls), readonly(ms)
        self.laplacian = readonly(ls * (ls + 1.0))
        self.zonal = readonly(ms == 0)
        self._divergence = readonly(np.sqrt(self.laplacian))
        self._bands = {}            # band -> the positions of the degrees <= band (`band_limited`)

    @functools.cached_property
    def _grid(self):
        """(theta, phi, points, weights) of the Gauss–Legendre grid, on first use."""
        return gauss_legendre_grid(self.ntheta, self.nphi)

    theta = property(lambda self: self._grid[0])
    phi = property(lambda self: self._grid[1])
    points = property(lambda self: self._grid[2])
    weights = property(lambda self: self._grid[3])

    @functools.cached_property
    def _geometry(self):
        """The ring layout of the grid, as ducc0's ``synthesis`` and ``adjoint_synthesis`` take it."""
        return dict(theta=self.theta, lmax=self.lmax, nphi=np.full(self.ntheta, self.nphi, dtype=np.uintp),
                    phi0=np.zeros(self.ntheta), ringstart=(np.arange(self.ntheta) * self.nphi).astype(np.uintp))

    @functools.cached_property
    def _ring_area(self):
        """dΩ = 4π·w of a node on each ring, (ntheta,) (the weights are constant along a ring)."""
        return readonly(4 * np.pi * self.weights[:, 0])

    @functools.cached_property
    def frame(self):
        """The unit tangents (e_θ, e_φ) at the grid points, (2, ntheta, nphi, 3): the components of
        ``gradient`` and ``divergence``, e_θ = (cos θ cos φ, cos θ sin φ, −sin θ), e_φ = (−sin φ, cos φ, 0);
        computed on first use, read-only."""
        phi = self.phi
        st, ct = np.sin(self.theta)[:, None], np.cos(self.theta)[:, None]
        cp, sp = np.broadcast_to(np.cos(phi), st.shape[:1] + phi.shape), np.broadcast_to(np.sin(phi), (st.size, phi.size))
        e_theta = np.stack([ct * cp, ct * sp, np.broadcast_to(-st, cp.shape)], axis=-1)
        e_phi = np.stack([-sp, cp, np.zeros_like(cp)], axis=-1)
        return readonly(np.stack([e_theta, e_phi]))

    def synthesis(self, alm, band=None):
        """Grid values (..., ntheta, nphi) of coefficient vectors alm (..., nalm); with ``band`` < lmax only
        the degrees <= ``band`` are transformed (`band_limited`)."""
        alm = np.asarray(alm)
        batch, geometry = self.band_limited(alm.reshape(-1, 1, alm.shape[-1]), band)
        out = self._batched(lambda a, nt: synthesis(alm=a, spin=0, nthreads=nt, **geometry), batch)
        return out.reshape(alm.shape[:-1] + (self.ntheta, self.nphi))

    def band_limited(self, alm, band=None):
        """(the a_lm (..., nalm) of degree <= ``band`` in the layout of lmax = ``band``, the grid's ducc0
        geometry at that lmax): a field known to vanish beyond ``band`` (the potential of a smooth kernel,
        a_l(β) below rounding beyond a degree set by β) is synthesised at its own degree on this grid, at a
        cost O(band²·ntheta) instead of O(L²·ntheta) for the Legendre part. None or ``band`` >= lmax: all."""
        if band is None or band >= self.lmax:
            return alm, self._geometry
        band = check_int(band, "band", low=0)
        keep = self._bands.get(band)
        if keep is None:            # m-major, then l: the order of the layout of lmax = band
            keep = self._bands[band] = np.flatnonzero(self.degrees <= band)
        return alm[..., keep], dict(self._geometry, lmax=band)

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

    def gradient(self, alm, band=None):
        """(∂_θ f, ∂_φ f / sin θ) (..., 2, ntheta, nphi) of f = Σ a_lm Y_lm (..., nalm): one spin-1 synthesis
        of the gradient (E-mode) part sqrt(l(l+1))·a_lm alone (ducc0's "DERIV1": no curl part is
        transformed), all the maps of a batch in one call; ``band`` as in `synthesis`."""
        alm = np.asarray(alm)
        batch, geometry = self.band_limited(alm.reshape(-1, 1, alm.shape[-1]), band)
        out = self._batched(lambda a, nt: synthesis(alm=a, spin=1, nthreads=nt, mode="DERIV1", **geometry), batch)
        return out.reshape(alm.shape[:-1] + (2, self.ntheta, self.nphi))

    def divergence(self, field):
        """Coefficients of −div_S F for tangent fields F = (F_θ, F_φ) (..., 2, ntheta, nphi) on the grid:
        sqrt(l(l+1))·E_lm[F], E_lm the gradient (E-mode) part of its spin-1 analysis. The Gauss–Legendre
        analysis is the adjoint synthesis of the field weighted by dΩ, which ducc0 applies ring by ring
        (``ringfactor``); its "DERIV1" mode gives sqrt(l(l+1))·E_lm alone (the curl part is not computed),
        all the fields of a batch in one call."""
        field = np.asarray(field, dtype=float)
        maps = field.reshape((-1, 2, self.ntheta * self.nphi))
        e = self._batched(lambda a, nt: adjoint_synthesis(map=a, spin=1, nthreads=nt, mode="DERIV1",
                                                          ringfactor=self._ring_area, **self._geometry), maps)
        return e.reshape(field.shape[:-3] + (e.shape[-1],))

    def values_at(self, alm, points, epsilon=EVAL_EPSILON):
        """Σ a_lm Y_lm at the points (..., 3) of S^2 (`synthesis_points`: ducc0's synthesis_general,
        accurate to ``epsilon`` relative to the coefficients)."""
        return synthesis_points(alm, self.lmax, points, self.nthreads, epsilon)

    def gradient_at(self, alm, points, epsilon=EVAL_EPSILON):
        """The components (∂_θ f, ∂_φ f / sin θ) (2, m) of the surface gradient of f = Σ a_lm Y_lm at the
        points (m, 3) of S^2, along (e_θ, e_φ) there: one spin-1 synthesis_general of accuracy ``epsilon``."""
        theta, phi = spherical_angles(points)
        return synthesis_general(alm=np.ascontiguousarray(alm)[None], spin=1, lmax=self.lmax,
                                 loc=np.stack([theta, phi], -1), epsilon=epsilon, nthreads=self.nthreads,
                                 mode="DERIV1")

    def pad(self, alm, finer):
        """a_lm (last axis) zero-padded to the degrees of ``finer`` (each (l, m) moved to its place in the
        finer layout, exactly)."""
        alm = np.asarray(alm)
        out = np.zeros(alm.shape[:-1] + (finer.degrees.size,), dtype=alm.dtype)
        out[..., alm_index(self.degrees, self.orders, finer.lmax)] = alm
        return out
