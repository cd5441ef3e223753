"""Samples of a density as weighted discrete measures (points, weights) on S^{d-1}.

* ``method="iid"``: n independent draws from ρσ, equal weights 1/n. E W1 decays like n^{-1/2} on
  S^1, like sqrt(log n / n) on S^2 and like n^{-1/(d-1)} for d >= 4 (SPEC §3.3).
* ``method="quasi"``: a deterministic low-discrepancy point set with quadrature weights
  w_j ∝ ρ(x_j) q_j, where (x_j, q_j) is a quadrature for σ:
    - S^1: the n equispaced midpoints θ_j = 2π(j + ½)/n (trapezoid rule, exact for Fourier modes
      |k| < n): W1(μ_n, ρσ) = O(1/n), measured ≈ π/(2n) for the uniform density;
    - S^2: the spherical Fibonacci lattice (equal-area points): W1 = O(n^{-1/2}), measured
      ≈ 0.6·n^{-1/2} for the uniform density — the optimal order for n points on a surface.
* ``method="quantile"`` (S^1 only): equal weights at the quantiles F^{-1}((j + ½)/n): W1 = O(1/n).
"""
import numpy as np

from ._checks import check_callable, check_dim, check_int
from .densities import Uniform, VonMisesFisher
from .quadrature import circle_points, sphere_quadrature, trapezoid

quadrature = sphere_quadrature   # mf.quadrature(n, dim): midpoints on S^1, Fibonacci on S^2 (meanfield.quadrature)


def uniform_points(n, dim, rng=None):
    """n iid uniform points on S^{dim-1} (normalised Gaussians)."""
    rng = np.random.default_rng(rng)
    x = rng.standard_normal((n, dim))
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def _values(density, x):
    v = np.asarray(density(x), dtype=float)
    if v.shape != x.shape[:-1]:
        raise ValueError(f"`density` must return one value per point (shape {x.shape[:-1]}), got shape {v.shape}.")
    if not np.all(np.isfinite(v)):
        raise ValueError("`density` returned NaN or inf values.")
    if np.any(v < 0):
        raise ValueError(f"`density` must be non-negative; it returned {v.min():.3g}.")
    return v


def _iid(density, n, dim, rng):
    """Rejection sampling against σ with an envelope estimated on a dense set and re-checked."""
    if isinstance(density, Uniform):
        return uniform_points(n, dim, rng)
    if isinstance(density, VonMisesFisher) and density.dim == dim:
        return _sample_vmf(density, n, rng)
    probe = uniform_points(max(20000, 4 * n) if n < 250000 else n, dim, rng)
    bound = 1.5 * float(_values(density, probe).max())
    if bound <= 0:
        raise ValueError("`density` vanishes on every probe point; cannot sample it.")
    out = []
    count = 0
    while count < n:
        m = int(min(max(2 * (n - count) * bound, 1000), 5e6))
        y = uniform_points(m, dim, rng)
        v = _values(density, y)
        if v.max() > bound:
            raise ValueError("`density` exceeds the rejection envelope estimated from 20000 probe points "
                             "(it is too peaked for iid rejection sampling); sample it yourself.")
        keep = y[rng.random(m) * bound < v]
        out.append(keep)
        count += len(keep)
    return np.concatenate(out)[:n]


def _sample_vmf(density, n, rng):
    """Exact von Mises–Fisher sampler (Wood 1994): t = ⟨μ, x⟩ from its 1-D law, then a uniform tangent."""
    d, kappa, mu = density.dim, density.kappa, density.mean
    if kappa == 0:
        return uniform_points(n, d, rng)
    b = (d - 1) / (2 * kappa + np.sqrt(4 * kappa ** 2 + (d - 1) ** 2))
    x0 = (1 - b) / (1 + b)
    c = kappa * x0 + (d - 1) * np.log(1 - x0 ** 2)
    t = np.empty(n)
    filled = 0
    while filled < n:
        m = 2 * (n - filled) + 10
        z = rng.beta((d - 1) / 2, (d - 1) / 2, size=m)
        w = (1 - (1 + b) * z) / (1 - (1 - b) * z)
        u = rng.random(m)
        ok = kappa * w + (d - 1) * np.log(1 - x0 * w) - c >= np.log(u)
        take = w[ok][: n - filled]
        t[filled:filled + take.size] = take
        filled += take.size
    v = rng.standard_normal((n, d))
    v -= (v @ mu)[:, None] * mu
    v /= np.linalg.norm(v, axis=-1, keepdims=True)
    return t[:, None] * mu + np.sqrt(np.clip(1 - t * t, 0, None))[:, None] * v


def sample(density, n, dim, rng=None, method="iid"):
    """Discretise ρσ as a weighted discrete measure.

    Parameters
    ----------
    density : callable f(x) -> values
        A σ-relative density (e.g. from `meanfield.densities`).
    n : int >= 1
        Number of points.
    dim : int >= 2
        Ambient dimension d.
    rng : None, int or numpy Generator
        Seed for ``method="iid"``.
    method : "iid", "quasi" or "quantile"
        See the module docstring for each method's W1 rate.

    Returns
    -------
    (points, weights) : arrays of shape (n, d) and (n,), weights >= 0 summing to 1.
    """
    check_callable(density, "density")
    n = check_int(n, "n", low=1)
    dim = check_dim(dim)
    if getattr(density, "dim", None) not in (None, dim):
        raise ValueError(f"`density` lives on S^{density.dim - 1} but `dim`={dim}.")
    if method == "iid":
        x = _iid(density, n, dim, np.random.default_rng(rng))
        return x, np.full(n, 1.0 / n)
    if method == "quasi":
        if dim not in (2, 3):
            raise ValueError(f"`method`='quasi' supports dim 2 and 3, got dim={dim}; use method='iid'.")
        x, q = quadrature(n, dim)
        v = _values(density, x) * q
        s = v.sum()
        if s <= 0:
            raise ValueError("`density` is zero at every quadrature node.")
        return x, v / s
    if method == "quantile":
        if dim != 2:
            raise ValueError("`method`='quantile' is only defined on S^1 (dim=2).")
        return _quantiles(density, n), np.full(n, 1.0 / n)
    raise ValueError(f"`method` must be 'iid', 'quasi' or 'quantile', got {method!r}.")


def _quantiles(density, n):
    """Equal-weight points at the quantiles (j + ½)/n of ρ on S^1 (CDF on a fine midpoint grid)."""
    m = max(8 * n, 1 << 14)
    v = _values(density, trapezoid(m).points)
    cdf = np.concatenate([[0.0], np.cumsum(v)])
    cdf /= cdf[-1]
    edges = 2 * np.pi * np.arange(m + 1) / m
    q = (np.arange(n) + 0.5) / n
    return circle_points(np.interp(q, cdf, edges))
