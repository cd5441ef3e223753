"""Tensor Gauss–Hermite quadrature of a Gaussian N(m, Σ) in R^d, shared by the tests of the Gaussian continuum."""
import numpy as np


def gauss_hermite(m, S, k):
    """(y (k^d, d), W (k^d,), Z (k^d, d)): the nodes y = m + L Z (LLᵀ = Σ, Z the standard nodes) and the
    weights of the k-point rule per axis, normalised to sum 1; exact for polynomials of degree 2k − 1 per axis."""
    d = len(m)
    z, q = np.polynomial.hermite_e.hermegauss(k)
    Z = np.stack(np.meshgrid(*[z] * d, indexing="ij"), -1).reshape(-1, d)
    W = np.prod(np.stack(np.meshgrid(*[q] * d, indexing="ij"), -1).reshape(-1, d), axis=1)
    return m + Z @ np.linalg.cholesky(S).T, W / W.sum(), Z
