"""Trigonometric polynomials on S^1 with σ-relative coefficients (docs/mathematics.md §2)."""
import functools

import numpy as np

from ..observables.energy import energy_from_spectrum
from ..spaces.fourier import FourierBasis, midpoint_values, series_at_angles
from ..spaces.gridded import point_dataarray
from ..spaces.quadrature import trapezoid
from .base import Representation
from ..errors import InvalidInput


class FourierSeries(Representation):
    """ρ(θ) = Σ_{|k|<=K} c_k e^{ikθ} with c_{-k} = conj(c_k), stored as c_0..c_K (complex).

    The c_k are σ-relative: c_k = ∫ ρ e^{-ikθ} dσ = (1/2π)∫ ρ e^{-ikθ} dθ, so c_0 is the mass.
    Degree powers in an L²(σ)-orthonormal basis: power_0 = c_0², power_k = 2|c_k|².
    """

    name = "fourier"
    dim = 2

    def resolution_label(self, data=None):
        return f"K = {self.modes} modes"

    def __init__(self, modes):
        self.modes = int(modes)

    @functools.cached_property
    def basis(self):
        """The `meanfield.spaces.fourier.FourierBasis` of these modes."""
        return FourierBasis(self.modes)

    def power(self, data):
        c = np.asarray(data)
        p = 2 * np.abs(c) ** 2
        p[..., 0] = c[..., 0].real ** 2
        return p

    def evaluate(self, data, x):
        x = np.asarray(x, dtype=float)
        theta = np.arctan2(x[..., 1], x[..., 0])
        return self.evaluate_angles(data, theta)

    def evaluate_angles(self, data, theta):
        """ρ at angles θ of any shape, by direct sums (`meanfield.spaces.fourier.series_at_angles`)."""
        return series_at_angles(data, theta)

    def grid_values(self, data, n):
        """ρ at the n midpoints θ_j = 2π(j + ½)/n (`meanfield.spaces.fourier.midpoint_values`: one inverse
        FFT when n >= 2K + 1)."""
        return midpoint_values(data, n)

    def mass(self, data):
        return float(np.asarray(data)[..., 0].real)

    def embed(self, data_all, source):
        """Coefficients of a lower (or equal) number of modes, zero-padded to this K."""
        c = np.asarray(data_all)
        if source.name != self.name or c.shape[-1] > self.modes + 1:
            raise InvalidInput(f"cannot carry {source.name!r} data with {c.shape[-1] - 1} modes into {self.modes} modes.")
        out = np.zeros(c.shape[:-1] + (self.modes + 1,), dtype=complex)
        out[..., :c.shape[-1]] = c
        return out

    def to_grid(self, data, n=None):
        """ρ at the midpoints θ_j = 2π(j + ½)/n (default n = max(4(2K + 1), 512)), as a DataArray."""
        n = max(4 * (2 * self.modes + 1), 512) if n is None else int(n)
        return point_dataarray(self.grid_values(data, n), theta=trapezoid(n).angles)

    @property
    def default_cells(self):
        return {2: max(4 * (2 * self.modes + 1), 512)}

    def cell_means(self, data, grid):
        """The mean of ρ over each cell [2πj/n, 2π(j + 1)/n] of ``grid`` (`meanfield.spaces.gridded.circle_cells`),
        exactly: the mean of e^{ikθ} over a cell of width h = 2π/n about θ_j is e^{ikθ_j}·sinc(kh/2), so
        the cell means are the midpoint values of the series with c_k·sin(πk/n)/(πk/n). They sum to n·c_0
        for any n (sinc vanishes at the aliases k = n, 2n, ...)."""
        c = np.asarray(data)
        n = grid.shape[0]
        return self.grid_values(c * np.sinc(np.arange(c.shape[-1]) / n), n)

    def energy(self, beta, data):
        return float(energy_from_spectrum(beta, 2, self.power(data)))

    def measure(self, data, n=None):
        """Midpoint quadrature: θ_j = 2π(j+½)/n, weights ∝ max(ρ(θ_j), 0). Default n = max(4(2K+1), 16384).

        Its W1 distance to ρσ is at most about 2π/(4n) (half a cell on average), i.e. <= 1e-4 by
        default, so that comparisons with particles (`meanfield.observables.wasserstein`) see the dynamics, not
        this discretisation.
        """
        K = np.asarray(data).shape[-1] - 1
        n = max(4 * (2 * K + 1), 16384) if n is None else int(n)
        w = np.clip(self.grid_values(data, n), 0.0, None)
        return trapezoid(n).points, w / w.sum()

    def w1_to_dirac(self, data):
        """(min_φ W1(ρσ, δ_φ), φ*) computed exactly from the coefficients (docs/mathematics.md §8).

        W1(ρσ, δ_φ) = f(φ) = ∫ d(φ, θ) ρ(θ) dσ(θ) with d the arc length; f = d*ρ is a trigonometric
        polynomial of degree K with f_k = d_k c_k, d_0 = π/2, d_k = −2/(πk²) for odd k, 0 for even k.
        Minimised on a grid of >= 16K points, then refined by Newton steps on f.
        """
        c = np.asarray(data, dtype=complex)
        K = c.shape[-1] - 1
        k = np.arange(K + 1)
        dk = np.where(k % 2 == 1, -2.0 / (np.pi * np.maximum(k, 1) ** 2), 0.0)
        dk[0] = np.pi / 2
        f = dk * c
        n = max(16 * K, 1024)
        grid = self.grid_values(f, n)                          # f at the midpoints 2π(j+½)/n
        phi = 2 * np.pi * (int(np.argmin(grid)) + 0.5) / n
        k1 = k[1:]
        for _ in range(8):                                      # Newton on f'(φ) = 0
            e = np.exp(1j * k1 * phi) * f[1:]
            d1 = -2 * float(np.sum(k1 * e.imag))
            d2 = -2 * float(np.sum(k1 ** 2 * e.real))
            if d2 <= 0:
                break
            step = -d1 / d2
            phi += step
            if abs(step) < 1e-15:
                break
        value = float(f[0].real + 2 * np.sum((np.exp(1j * k1 * phi) * f[1:]).real))
        return min(value, float(grid.min())), float(np.mod(phi, 2 * np.pi))

    def to_dataset(self, data_all):
        c = np.asarray(data_all)
        data_vars = {"rho_hat_real": (("time", "k"), c.real), "rho_hat_imag": (("time", "k"), c.imag)}
        coords = {"k": np.arange(c.shape[-1])}
        attrs = {"representation": self.name, "modes": self.modes,
                 "normalisation": "rho(theta) = sum_{|k|<=K} c_k exp(i k theta), c_k relative to sigma = dtheta/2pi"}
        return data_vars, coords, attrs

    @classmethod
    def from_dataset(cls, ds):
        c = ds["rho_hat_real"].values + 1j * ds["rho_hat_imag"].values
        return cls(int(ds.attrs["modes"])), c

    def space_time(self, data_all, n=None):
        """(θ midpoints (n,), ρ (T, n)) at every saved time, one FFT each (n >= 2K + 1, default
        max(1024, 2K + 2)); what `meanfield.results.plotting` draws."""
        n = max(1024, 2 * self.modes + 2) if n is None else int(n)
        return trapezoid(n).angles, np.array([self.grid_values(c, n) for c in np.asarray(data_all)])
