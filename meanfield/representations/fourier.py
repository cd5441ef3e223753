"""Trigonometric polynomials on S^1 with σ-relative coefficients (SPEC L1, §9)."""
import numpy as np

from ..energy import energy_from_spectrum
from .base import Representation


class FourierSeries(Representation):
    """ρ(θ) = Σ_{|k|<=K} c_k e^{ikθ} with c_{-k} = conj(c_k), stored as c_0..c_K (complex).

    The c_k are σ-relative: c_k = ∫ ρ e^{-ikθ} dσ = (1/2π)∫ ρ e^{-ikθ} dθ, so c_0 is the mass.
    Degree powers in an L²(σ)-orthonormal basis: power_0 = c_0², power_k = 2|c_k|².
    """

    name = "fourier"
    dim = 2

    def __init__(self, modes):
        self.modes = int(modes)

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
        c = np.asarray(data)
        theta = np.asarray(theta, dtype=float)
        flat = theta.ravel()
        out = np.empty(flat.shape)
        k = np.arange(1, c.shape[-1])
        for s in range(0, flat.size, 4096):
            e = np.exp(1j * np.outer(flat[s:s + 4096], k))
            out[s:s + 4096] = c[0].real + 2 * (e @ c[1:]).real
        return out.reshape(theta.shape)

    def grid_values(self, data, n):
        """ρ at the n midpoints θ_j = 2π(j + ½)/n (n >= 2K + 1), via one inverse FFT."""
        c = np.asarray(data)
        K = c.shape[-1] - 1
        if n < 2 * K + 1:
            return self.evaluate_angles(c, 2 * np.pi * (np.arange(n) + 0.5) / n)
        full = np.zeros(n, dtype=complex)
        full[:K + 1] = c
        full[n - K:] = np.conj(c[1:][::-1])
        shift = np.exp(1j * np.pi * np.fft.fftfreq(n, 1.0 / n) / n)   # midpoint offset ½·2π/n
        return np.fft.ifft(full * shift).real * n

    def mass(self, data):
        return float(np.asarray(data)[..., 0].real)

    def energy(self, beta, data):
        return float(energy_from_spectrum(beta, 2, self.power(data)))

    def measure(self, data, n=None):
        """Midpoint quadrature: θ_j = 2π(j+½)/n, weights ∝ max(ρ(θ_j), 0). Default n = max(4(2K+1), 1024)."""
        K = np.asarray(data).shape[-1] - 1
        n = max(4 * (2 * K + 1), 1024) if n is None else int(n)
        theta = 2 * np.pi * (np.arange(n) + 0.5) / n
        w = np.clip(self.grid_values(data, n), 0.0, None)
        w = w / w.sum()
        return np.stack([np.cos(theta), np.sin(theta)], axis=-1), w

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

    def plot_state(self, fig, data_all, t, times=None):
        """Space-time map of ρ(θ, t)."""
        ax = fig.add_subplot(1, 2, 1)
        n = 512
        theta = 2 * np.pi * (np.arange(n) + 0.5) / n
        rho = np.array([self.grid_values(c, n) for c in data_all])
        tt = np.asarray(t)
        mesh = ax.pcolormesh(theta, tt, rho, shading="auto", cmap="magma")
        fig.colorbar(mesh, ax=ax, label=r"$\rho(\theta, t)$ (relative to $\sigma$)")
        ax.set_xlabel(r"$\theta$")
        ax.set_ylabel("t")
        ax.set_title("density on $S^1$")
        return ax
