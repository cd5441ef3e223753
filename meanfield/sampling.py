"""Samples of a density as weighted discrete measures (points, weights) on S^{d-1}.

* ``method="iid"``: n independent draws from ρσ, equal weights 1/n. E W1 decays like n^{-1/2} on
  S^1, like sqrt(log n / n) on S^2 and like n^{-1/(d-1)} for d >= 4 (Remark 3.3; docs/mathematics.md §8).
* ``method="quasi"``: a deterministic low-discrepancy point set with quadrature weights
  w_j ∝ ρ(x_j) q_j, where (x_j, q_j) is a quadrature for σ:
    - S^1: the n equispaced midpoints θ_j = 2π(j + ½)/n (trapezoid rule, exact for Fourier modes
      |k| < n): W1(μ_n, ρσ) = O(1/n), measured ≈ π/(2n) for the uniform density;
    - S^2: the spherical Fibonacci lattice (equal-area points): W1 = O(n^{-1/2}), measured
      ≈ 0.6·n^{-1/2} for the uniform density — the optimal order for n points on a surface.
* ``method="quantile"`` (S^1 only): equal weights at the quantiles F^{-1}((j + ½)/n): W1 = O(1/n).
* zonal densities ρ(x) = f(⟨x, e⟩) in any d (`sample_zonal`): s = ⟨x, e⟩ from its exact 1-D law, at
  the quantiles (j + ½)/n (``"stratified"``; ``"quasi"`` for d >= 4) or iid, then
  x = s e + sqrt(1 − s²) u with u uniform on the sphere of e^⊥: the law of s is matched to O(1/n)
  in W1 whatever d (compare with `meanfield.wasserstein.w1_marginal`).
"""
import numpy as np

from .validation import check_callable, check_dim, check_int
from .densities import Uniform, VonMisesFisher, zonal_profile
from .quadrature import circle_points, sphere_quadrature, trapezoid
from .errors import InvalidInput


def uniform_points(n, dim, rng=None):
    """n iid uniform points on S^{dim-1} (normalised Gaussians)."""
    rng = np.random.default_rng(rng)
    x = rng.standard_normal((n, dim))
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def _values(density, x):
    v = np.asarray(density(x), dtype=float)
    if v.shape != x.shape[:-1]:
        raise InvalidInput(f"`density` must return one value per point (shape {x.shape[:-1]}), got shape {v.shape}.")
    if not np.all(np.isfinite(v)):
        raise InvalidInput("`density` returned NaN or inf values.")
    if np.any(v < 0):
        raise InvalidInput(f"`density` must be non-negative; it returned {v.min():.3g}.")
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
        raise InvalidInput("`density` vanishes on every probe point; cannot sample it.")
    out = []
    count = 0
    while count < n:
        m = int(min(max(2 * (n - count) * bound, 1000), 5e6))
        y = uniform_points(m, dim, rng)
        v = _values(density, y)
        if v.max() > bound:
            raise InvalidInput("`density` exceeds the rejection envelope estimated from 20000 probe points "
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
    method : "iid", "quasi", "quantile" or "stratified"
        See the module docstring for each method's W1 rate. For a density known to be zonal
        (`meanfield.densities.zonal_profile`: `zonal`, von Mises–Fisher, uniform) in dim >= 4,
        "iid" and "quasi" use the exact law of s = ⟨x, e⟩ (`sample_zonal`); "stratified" does so in
        any dim.

    Returns
    -------
    (points, weights) : arrays of shape (n, d) and (n,), weights >= 0 summing to 1.
    """
    check_callable(density, "density")
    n = check_int(n, "n", low=1)
    dim = check_dim(dim)
    if getattr(density, "dim", None) not in (None, dim):
        raise InvalidInput(f"`density` lives on S^{density.dim - 1} but `dim`={dim}.")
    if method == "stratified" or (dim >= 4 and method in ("iid", "quasi")):
        known = None if isinstance(density, (Uniform, VonMisesFisher)) and method == "iid" else \
            zonal_profile(density, dim)
        if known is not None:
            return sample_zonal(known[0], n, dim, known[1], rng, "iid" if method == "iid" else "stratified")
        if method == "stratified":
            raise InvalidInput("`method`='stratified' needs a density known to be zonal (meanfield.densities.zonal, "
                             "von_mises_fisher or uniform).")
    if method == "iid":
        x = _iid(density, n, dim, np.random.default_rng(rng))
        return x, np.full(n, 1.0 / n)
    if method == "quasi":
        if dim not in (2, 3):
            raise InvalidInput(f"`method`='quasi' supports dim 2 and 3, got dim={dim}; use method='iid'.")
        x, q = sphere_quadrature(n, dim)
        v = _values(density, x) * q
        s = v.sum()
        if s <= 0:
            raise InvalidInput("`density` is zero at every quadrature node.")
        return x, v / s
    if method == "quantile":
        if dim != 2:
            raise InvalidInput("`method`='quantile' is only defined on S^1 (dim=2).")
        return _quantiles(density, n), np.full(n, 1.0 / n)
    raise InvalidInput(f"`method` must be 'iid', 'quasi', 'quantile' or 'stratified', got {method!r}.")


def zonal_quantiles(profile, dim, q, m=1 << 16):
    """s = F^{-1}(q) for the law of s = ⟨x, e⟩ under ρσ, ρ(x) = profile(⟨x, e⟩) on S^{dim−1}.

    In the angle θ = arccos s the law has the density ∝ profile(cos θ) sin^{d−2}θ on [0, π] (no
    endpoint singularity for any d >= 2; docs/mathematics.md §10); its CDF is formed by the midpoint
    rule on m cells (in log scale for the weight) and inverted piecewise linearly: error O(m^{-2}).
    """
    theta = np.pi * (np.arange(m) + 0.5) / m
    vals = np.asarray(profile(np.cos(theta)), dtype=float)
    if vals.shape != theta.shape or not np.all(np.isfinite(vals)) or np.any(vals < 0):
        raise InvalidInput("the zonal profile must return finite non-negative values, one per s.")
    log_w = (dim - 2) * np.log(np.sin(theta))
    g = vals * np.exp(log_w - log_w.max())
    cdf = np.concatenate([[0.0], np.cumsum(g)])
    if cdf[-1] <= 0:
        raise InvalidInput("the zonal profile has zero mass.")
    edges = np.pi * np.arange(m + 1) / m
    return np.cos(np.interp(1.0 - np.asarray(q, dtype=float), cdf / cdf[-1], edges))


def sample_zonal(profile, n, dim, axis=None, rng=None, method="stratified"):
    """n points x = s e + sqrt(1 − s²) u carrying the zonal law ρ(x) = profile(⟨x, e⟩) (equal weights).

    s is drawn from its one-dimensional law (`zonal_quantiles`): at the quantiles (j + ½)/n for
    ``method="stratified"`` (W1 of the law of s: O(1/n)), iid for ``method="iid"``. u is uniform on
    the unit sphere of e^⊥ (normalised projected Gaussians from ``rng``; deterministic for rng=None
    with "stratified"); for "stratified" consecutive points get antipodal directions ±u, so the
    sample is symmetric about the axis in pairs. ``axis`` defaults to e_d.
    """
    n = check_int(n, "n", low=1)
    dim = check_dim(dim)
    if axis is None:
        axis = np.eye(dim)[-1]
    axis = np.asarray(axis, dtype=float)
    if method not in ("stratified", "iid"):
        raise InvalidInput(f"`method` must be 'stratified' or 'iid', got {method!r}.")
    rng = np.random.default_rng(0 if rng is None and method == "stratified" else rng)
    q = (np.arange(n) + 0.5) / n if method == "stratified" else rng.random(n)
    s = zonal_quantiles(profile, dim, q)
    g = rng.standard_normal((n, dim))
    if method == "stratified":
        g[1::2] = -g[0:n - 1:2]
    g -= (g @ axis)[:, None] * axis
    u = g / np.linalg.norm(g, axis=-1, keepdims=True)
    x = s[:, None] * axis + np.sqrt(np.clip(1 - s * s, 0.0, None))[:, None] * u
    return x, np.full(n, 1.0 / n)


def _quantiles(density, n):
    """Equal-weight points at the quantiles (j + ½)/n of ρ on S^1 (CDF on a fine midpoint grid)."""
    m = max(8 * n, 1 << 14)
    v = _values(density, trapezoid(m).points)
    cdf = np.concatenate([[0.0], np.cumsum(v)])
    cdf /= cdf[-1]
    edges = 2 * np.pi * np.arange(m + 1) / m
    q = (np.arange(n) + 0.5) / n
    return circle_points(np.interp(q, cdf, edges))
