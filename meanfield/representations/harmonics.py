"""Real spherical harmonics on S^2, orthonormal in L²(σ) (docs/mathematics.md §2–§3; pyshtools '4pi', csphase=1).

A time slice is the pyshtools array ``clm`` of shape (2, lmax+1, lmax+1):

    ρ(x) = Σ_{l<=lmax} Σ_{m=0}^{l} [clm[0,l,m]·R^c_lm(x) + clm[1,l,m]·R^s_lm(x)],

with R^c_lm = N_lm P_l^m(cos θ) cos(mφ), R^s_lm = N_lm P_l^m(cos θ) sin(mφ), no Condon–Shortley phase,
∫ R² dσ = 1 (σ the uniform probability measure). So clm[0,0,0] is the mass and the degree power
Σ_m (clm[0,l,m]² + clm[1,l,m]²) is ‖ρ_l‖²_{L²(σ)} (what `energy_from_spectrum` needs).

Transforms use ducc0.sht, whose coefficients are complex a_lm (healpy layout: m >= 0, index
m(2L+1−m)/2 + l), orthonormal for the area measure dA and with the Condon–Shortley phase:

    a_l0 = sqrt(4π)·C_l0,    a_lm = sqrt(2π)·(−1)^m·(C_lm − i S_lm)  (m > 0).

`real_to_alm` / `alm_to_real` implement this map (tested against pyshtools). They, and the basis
(`SphericalHarmonicBasis`, held as ``SphericalHarmonicSeries.basis``), live in `meanfield.spaces.harmonics`
and are re-exported here.

pyshtools. ``clm`` is exactly a pyshtools real coefficient array in the '4pi' normalisation with
``csphase=1``: '4pi' is the normalisation in which ∫ Y_lm² dΩ = 4π, i.e. the real harmonics are
orthonormal for σ = dΩ/4π, which is ours, and csphase=1 leaves out the Condon–Shortley phase, as we
do. So `SphericalHarmonicSeries.to_pyshtools` and `meanfield.measures.densities.from_pyshtools` copy the numbers unchanged (the
round trip is exact), the '4pi' power spectrum of pyshtools (``SHCoeffs.spectrum()``) is the degree
power ‖ρ_l‖²_{L²(σ)} of `meanfield.representations.State.spectrum`, and ``coeffs.coeffs[0, 0, 0]`` is
the mass. pyshtools' other normalisations ('ortho', 'schmidt', 'unnorm') and the complex kind would
scale every coefficient; `from_pyshtools` converts them with pyshtools' own ``convert``.
"""
import functools

import numpy as np
from ducc0.sht import synthesis, synthesis_2d

from ..observables.energy import energy_from_spectrum
from ..spaces.gridded import point_dataarray
from ..spaces.harmonics import (EVAL_EPSILON, SphericalHarmonicBasis, alm_cross, alm_degrees, alm_index,  # noqa: F401
                                alm_power, alm_size, alm_to_real, real_to_alm, spherical_angles, synthesis_points)
from ..threads import transform_threads
from ..spaces.quadrature import gauss_legendre_grid   # also re-exported: the ducc0 "GL" grid
from .base import Representation
from ..errors import InvalidInput
PYSHTOOLS_NORMALIZATION = "4pi"    # real harmonics orthonormal for σ = dΩ/4π (see the module docstring)
PYSHTOOLS_CSPHASE = 1              # no Condon–Shortley phase


def pyshtools_ducc(nthreads=1):
    """The pyshtools module with its ducc0 backend selected and ``nthreads`` threads set explicitly
    (``pyshtools.backends.select_preferred_backend("ducc", nthreads=...)``; pyshtools keeps this one
    choice for the whole process, so later ``expand()`` calls of the caller use it too)."""
    import pyshtools  # deferred: pyshtools is heavy

    pyshtools.backends.select_preferred_backend("ducc", nthreads=int(nthreads))
    return pyshtools


class SphericalHarmonicSeries(Representation):
    """ρ as real spherical harmonics up to ``lmax``, orthonormal in L²(σ) (see the module docstring)."""

    name = "harmonics"
    dim = 3

    def resolution_label(self, data=None):
        return f"lmax = {self.lmax}"

    def __init__(self, lmax, nthreads=1):
        self.lmax = int(lmax)
        self.nthreads = transform_threads(nthreads, self.lmax)

    @functools.cached_property
    def basis(self):
        """The `meanfield.spaces.harmonics.SphericalHarmonicBasis` of degree lmax (its grid is built on first use)."""
        return SphericalHarmonicBasis(self.lmax, nthreads=self.nthreads)

    def _alm(self, data):
        return real_to_alm(data)

    def power(self, data):
        """Degree powers Σ_m (C_lm² + S_lm²) = ‖ρ_l‖²_{L²(σ)}, shape (..., lmax+1)."""
        c = np.asarray(data, dtype=float)
        return (c ** 2).sum(axis=(-3, -1))

    def evaluate(self, data, x):
        """ρ(x) at points x (..., 3): vectorised NUFFT synthesis (ducc0 synthesis_general, accuracy 1e-13)."""
        return self.basis.values_at(self._alm(data), x)

    def mass(self, data):
        return float(np.asarray(data)[0, 0, 0])

    def to_pyshtools(self, data):
        """The state as a ``pyshtools.SHCoeffs`` (real, lmax = this lmax, normalization '4pi',
        csphase=1: the numbers of ``data`` unchanged, see the module docstring), with pyshtools'
        ducc0 backend selected with this representation's ``nthreads`` (`pyshtools_ducc`)."""
        pysh = pyshtools_ducc(self.nthreads)
        return pysh.SHCoeffs.from_array(np.array(data, dtype=float), normalization=PYSHTOOLS_NORMALIZATION,
                                        csphase=PYSHTOOLS_CSPHASE, lmax=self.lmax, copy=True)

    def embed(self, data_all, source):
        """Coefficients up to a lower (or equal) degree, zero-padded to this lmax."""
        c = np.asarray(data_all, dtype=float)
        L = c.shape[-1] - 1
        if source.name != self.name or L > self.lmax:
            raise InvalidInput(f"cannot carry {source.name!r} data of degree {L} into lmax={self.lmax}.")
        out = np.zeros(c.shape[:-3] + (2, self.lmax + 1, self.lmax + 1))
        out[..., :L + 1, :L + 1] = c
        return out

    def to_grid(self, data, n=None):
        """ρ on a Gauss–Legendre grid of n latitudes (default lmax + 2) and 2n longitudes, as a DataArray
        with lat (degrees north, north to south) and lon (degrees east, from 0)."""
        n = self.lmax + 2 if n is None else int(n)
        theta, phi = gauss_legendre_grid(n, 2 * n)[:2]
        return point_dataarray(self.grid_values(data, n, 2 * n), lat=90 - np.degrees(theta), lon=np.degrees(phi))

    @property
    def default_cells(self):
        return {3: self.lmax + 2}

    def cell_means(self, data, grid):
        """The mean of ρ over each cell of ``grid`` (`meanfield.spaces.gridded.sphere_cells`: n latitude bands
        of equal angle × 2n longitude cells), μ(cell)/σ(cell).

        In longitude exactly: the mean of e^{imφ} over a cell of width Δ about φ_j is e^{imφ_j}·sinc(mΔ/2),
        so one synthesis with a_lm·sin(mΔ/2)/(mΔ/2) at the cell centres gives the longitude means. In
        latitude, ∫ sin θ (·) dθ over each band by q Gauss–Legendre points in θ: the integrand is a
        trigonometric polynomial of degree <= lmax + 1, and q = ⌈3(lmax + 1)/n⌉ + 8 points integrate it
        over a band of width π/n to round-off. The grid's mass Σ ρ̄ σ(cell) is clm[0, 0, 0] to round-off."""

        n, nphi = grid.shape
        L = self.lmax
        _, ms = alm_degrees(L)
        alm = self._alm(data) * np.sinc(ms / nphi)               # the longitude cell means
        q = int(np.ceil(3 * (L + 1) / n)) + 8
        g, gw = np.polynomial.legendre.leggauss(q)
        edges = np.pi * np.arange(n + 1) / n                      # colatitude edges, north to south
        half = 0.5 * np.diff(edges)
        theta = (0.5 * (edges[:-1] + edges[1:])[:, None] + half[:, None] * g[None, :]).ravel()
        rings = theta.size
        values = synthesis(alm=alm[None], theta=theta, lmax=L, spin=0, nthreads=self.nthreads,
                           nphi=np.full(rings, nphi, dtype=np.uintp), phi0=np.full(rings, np.pi / nphi),
                           ringstart=(np.arange(rings) * nphi).astype(np.uintp))[0].reshape(n, q, nphi)
        w = (half[:, None] * gw[None, :]) * np.sin(theta).reshape(n, q) / 2      # σ of each ring's share / Δφ·2π
        return np.einsum("iq,iqj->ij", w, values) / (nphi * grid.weights)

    def energy(self, beta, data):
        """E_β = (1/2β) Σ_l i_l(β)‖ρ_l‖² (docs/mathematics.md §4)."""
        return float(energy_from_spectrum(beta, 3, self.power(data)))

    def grid_values(self, data, ntheta, nphi, geometry="GL", phi0=0.0):
        """ρ on a ducc0 grid (ntheta rings, nphi longitudes from phi0), exact (one synthesis)."""

        return synthesis_2d(alm=self._alm(data)[None], spin=0, lmax=self.lmax, geometry=geometry, ntheta=ntheta,
                            nphi=nphi, phi0=phi0, nthreads=self.nthreads)[0]

    def measure(self, data, n=None):
        """Gauss–Legendre quadrature of ρσ: about ``n`` points (ntheta = round(sqrt(n/2)) rings of
        2·ntheta points), weights ∝ max(ρ, 0)·w_quad. Default n = 2(lmax+1)², i.e. lmax+1 rings:
        moments ∫ Y dμ of degree <= lmax+1 are then exact (for ρ >= 0).
        """
        if n is None:
            ntheta = self.lmax + 1
        else:
            if int(n) < 8:
                raise InvalidInput(f"`n` must be >= 8 (number of quadrature points), got {n}.")
            ntheta = max(2, int(round(np.sqrt(int(n) / 2))))
        nphi = 2 * ntheta
        _, _, pts, w = gauss_legendre_grid(ntheta, nphi)
        rho = self.grid_values(data, ntheta, nphi)
        wt = np.clip(rho, 0.0, None) * w
        wt = wt / wt.sum()
        return pts.reshape(-1, 3), wt.ravel()

    def to_dataset(self, data_all):
        c = np.asarray(data_all, dtype=float)
        data_vars = {"clm": (("time", "cs", "l", "m"), c)}
        coords = {"cs": np.array([0, 1]), "l": np.arange(self.lmax + 1), "m": np.arange(self.lmax + 1)}
        attrs = {"representation": self.name, "lmax": self.lmax,
                 "normalisation": "real spherical harmonics orthonormal in L2(sigma) (pyshtools '4pi'), csphase=1; "
                                  "clm[0]: cos(m phi), clm[1]: sin(m phi)"}
        return data_vars, coords, attrs

    @classmethod
    def from_dataset(cls, ds):
        return cls(int(ds.attrs["lmax"])), np.asarray(ds["clm"].values, dtype=float)
