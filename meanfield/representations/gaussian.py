"""A Gaussian measure N(m, Σ) on R^d: the exact continuum of (SA) without normalisation (docs/gaussian.md).

One time slice of data is the flat vector [m (d), Σ (d·d, row-major)]; the density is relative to
the Lebesgue measure of R^d (there is no uniform measure σ off the sphere).
"""
import numpy as np
from scipy.special import ndtri
from scipy.stats import qmc

from .base import Representation

DEFAULT_SAMPLES = 4096


def split_moments(data, dim):
    """(m, Σ) from a slice [m, vec Σ] (or a stack of slices on leading axes)."""
    data = np.asarray(data, dtype=float)
    m = data[..., :dim]
    S = data[..., dim:].reshape(data.shape[:-1] + (dim, dim))
    return m, S


def join_moments(m, S):
    """The slice [m, vec Σ] of a mean ``m`` (d,) and a covariance ``S`` (d, d)."""
    return np.concatenate([np.asarray(m, dtype=float).ravel(), np.asarray(S, dtype=float).ravel()])


def gaussian_samples(m, S, n, seed=0):
    """n equally weighted quasi-random points of N(m, S): a scrambled Sobol' set mapped through Φ^{-1}
    and the symmetric square root of S (S positive semi-definite)."""
    d = m.size
    u = qmc.Sobol(d, scramble=True, seed=seed).random(n)
    z = ndtri(np.clip(u, 1e-16, 1 - 1e-16))
    vals, vecs = np.linalg.eigh(S)
    root = (vecs * np.sqrt(np.clip(vals, 0.0, None))) @ vecs.T
    return m + z @ root, np.full(n, 1.0 / n)


class GaussianMoments(Representation):
    """N(m, Σ) on R^d, stored as its mean and covariance."""

    name = "gaussian"
    domain = "euclidean"

    def __init__(self, dim):
        self.dim = int(dim)

    def moments(self, data):
        return split_moments(data, self.dim)

    def mean(self, data):
        return self.moments(data)[0]

    def covariance(self, data):
        return self.moments(data)[1]

    def evaluate(self, data, x):
        """The Lebesgue density (2π)^{-d/2} det(Σ)^{-1/2} e^{-(x−m)ᵀΣ^{-1}(x−m)/2} at points x (..., d)."""
        m, S = self.moments(data)
        x = np.asarray(x, dtype=float)
        chol = np.linalg.cholesky(S)
        z = np.linalg.solve(chol, (x - m).reshape(-1, self.dim).T).T
        log_det = 2 * np.sum(np.log(np.diag(chol)))
        logp = -0.5 * np.sum(z * z, axis=-1) - 0.5 * (self.dim * np.log(2 * np.pi) + log_det)
        return np.exp(logp).reshape(x.shape[:-1])

    def mass(self, data):
        return 1.0

    def energy(self, beta, data):
        """No E_β off the sphere (docs/mathematics.md §1): NaN, as for particles in R^d."""
        return np.nan

    def measure(self, data, n=None, seed=0):
        """``n`` (default 4096) equally weighted quasi-random samples of N(m, Σ) (`gaussian_samples`)."""
        m, S = self.moments(data)
        return gaussian_samples(m, S, DEFAULT_SAMPLES if n is None else int(n), seed=seed)

    def to_dataset(self, data_all):
        m, S = split_moments(data_all, self.dim)
        data_vars = {"mean": (("time", "component"), m),
                     "covariance": (("time", "component", "component_2"), S)}
        attrs = {"representation": self.name, "dim": self.dim, "domain": self.domain,
                 "normalisation": "N(mean, covariance) on R^dim; density relative to the Lebesgue measure"}
        return data_vars, {}, attrs

    @classmethod
    def from_dataset(cls, ds):
        m = np.asarray(ds["mean"].values, dtype=float)
        S = np.asarray(ds["covariance"].values, dtype=float)
        return cls(m.shape[-1]), np.concatenate([m, S.reshape(S.shape[0], -1)], axis=1)
