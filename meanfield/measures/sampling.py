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
  in W1 whatever d (compare with `meanfield.observables.wasserstein.w1_marginal`).
"""
import numpy as np

from ..validation import check_callable, check_dim, check_int
from ..transformer.masks import token_positions
from ..transformer.positions import takes_position
from .densities import Uniform, VonMisesFisher, zonal_profile
from ..spaces.quadrature import circle_points, sphere_quadrature, trapezoid
from ..errors import InvalidInput


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


def _quasi(density, n, dim):
    """The nodes x_j of `sphere_quadrature` (dim 2 and 3) with the weights ρ(x_j)q_j / Σ_k ρ(x_k)q_k."""
    if dim not in (2, 3):
        raise InvalidInput(f"`method`='quasi' supports dim 2 and 3, got dim={dim}; use method='iid'.")
    x, q = sphere_quadrature(n, dim)
    v = _values(density, x) * q
    s = v.sum()
    if s <= 0:
        raise InvalidInput("`density` is zero at every quadrature node.")
    return x, v / s

def sample(density, n, dim, rng=None, method="iid"):
    """Discretise ρσ as a weighted discrete measure.

    Parameters
    ----------
    density : callable f(x) -> values
        A σ-relative density (e.g. from `meanfield.measures.densities`).
    n : int >= 1
        Number of points.
    dim : int >= 2
        Ambient dimension d.
    rng : None, int or numpy Generator
        Seed for ``method="iid"``.
    method : "iid", "quasi", "quantile" or "stratified"
        See the module docstring for each method's W1 rate. For a density known to be zonal
        (`meanfield.measures.densities.zonal_profile`: `zonal`, von Mises–Fisher, uniform) in dim >= 4,
        "iid" and "quasi" use the exact law of s = ⟨x, e⟩ (`sample_zonal`); "stratified" does so in
        any dim.

    Returns
    -------
    points : (n, d) array
        Unit vectors of R^d (points of S^{d-1}).
    weights : (n,) array
        Non-negative, summing to 1 (equal for "iid" and "quantile").

    Raises
    ------
    ValueError
        ``density`` not callable or on another sphere, ``n`` < 1, ``dim`` < 2, an unknown ``method``
        or one that does not apply to ``dim`` ("quasi": dim 2 and 3; "quantile": S^1; "stratified": a
        density known to be zonal), a density that is negative, not finite or zero at every node.

    Warnings
    --------
    The points of ``method="quasi"``, "quantile" and "stratified" come in the order of their quadrature
    (sorted by angle on S^1, by height on S^2, ...), and "quasi" has unequal weights. Used as tokens in
    order under a causal mask (`meanfield.Model(mask=...)`), position would follow direction (the
    quarters of 10^4 quasi tokens on S^1 have mean angles 0.79, 2.36, −2.36, −0.79). For tokens in
    order draw them with `sample_tokens`, whose order carries no direction.

    Examples
    --------
    >>> import numpy as np
    >>> import meanfield as mf
    >>> x, w = mf.sample(mf.densities.uniform(), 4, 2, method="quasi")     # midpoints θ_j = 2π(j + ½)/4
    >>> np.round(x, 6).tolist(), w.tolist()
    ([[0.707107, 0.707107], [-0.707107, 0.707107], [-0.707107, -0.707107], [0.707107, -0.707107]], [0.25, 0.25, 0.25, 0.25])
    >>> x, w = mf.sample(mf.densities.von_mises_fisher([0.0, 0.0, 1.0], 10.0), 500, 3, rng=0)
    >>> x.shape, round(float(w.sum()), 12), round(float(x[:, 2].mean()), 1)     # E⟨x, μ⟩ = coth κ − 1/κ
    ((500, 3), 1.0, 0.9)
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
            raise InvalidInput("`method`='stratified' needs a density known to be zonal (meanfield.measures.densities.zonal, "
                             "von_mises_fisher or uniform).")
    if method == "iid":
        x = _iid(density, n, dim, np.random.default_rng(rng))
        return x, np.full(n, 1.0 / n)
    if method == "quasi":
        return _quasi(density, n, dim)
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


_PHI = (np.sqrt(5.0) - 1.0) / 2.0                      # golden-ratio Kronecker step (S^1)
_PLASTIC = 1.324717957244746                          # the R2 sequence's steps 1/g, 1/g² (S^2)
_CELLS = {2: (1, 1024), 3: (64, 128)}                 # inverse-transform grid: cells in (z, φ) or (·, θ)
_CHUNK = 1 << 22                                      # density values evaluated at once


def sample_tokens(rho0, n, dim, positions=None, method="iid", rng=None):
    """n tokens in order for a causal run: token j + 1 (``x[j]``) at the position σ_j drawn from ρ0(·, σ_j).

    Parameters
    ----------
    rho0 : callable ρ0(x) or ρ0(x, s)
        A σ-relative density of the direction, independent of the position, or one for each position
        s ∈ (0, 1]: called with points (k, d) and positions (k,) (one per point), returning (k,) values
        (mass 1 at each s; it is normalised per position).
    n : int >= 1, the number of tokens.
    dim : int, the ambient dimension d (2 or 3 for ρ0(x, s) and for "quasi"; any d for "iid" of ρ0(x)).
    positions : (n,) token positions in (0, 1], non-decreasing, default σ_j = j/n (j = 1..n).
    method : "iid" | "quasi"
        "iid": independent draws (`sample` for ρ0(x); for ρ0(x, s) the inverse transform of ρ0(·, σ_j)
        on a grid, with independent uniform numbers). "quasi": the inverse transform of a randomly
        shifted Kronecker sequence taken in token order (the golden ratio on S^1; the R2 sequence of the
        plastic number on S^2, through z then φ), so every block of consecutive tokens is itself a
        low-discrepancy set: the tokens of each quarter of the positions carry the law of their
        positions with a discrepancy O(log n / n) instead of the O(n^{-1/2}) of iid draws.
    rng : seed or numpy Generator (the iid draws, the quasi sequence's random shift).

    Returns
    -------
    (x, w) : tokens (n, d) in order and equal weights (n,) 1/n.

    Notes
    -----
    The order of the tokens carries no direction unless ρ0 does: the law of x[j] is ρ0(·, σ_j). The
    inverse transform works on a grid (S^1: 1024 cells in θ; S^2: 64 cells in z times 128 in φ, the
    density piecewise constant on each): the law is that of ρ0 up to the grid's O(h²) in the
    moments. `sample` with ``method="quasi"`` returns points sorted by angle and must not be used
    as tokens in order.

    Raises
    ------
    ValueError naming `rho0`, `n`, `dim`, `positions` or `method`.

    Examples
    --------
    >>> rho0 = lambda x, s: 1 + 0.6 * (x[..., 0] * np.cos(2 * s) + x[..., 1] * np.sin(2 * s))
    >>> x, w = sample_tokens(rho0, 4096, 2, method="quasi", rng=0)     # token j + 1 is x[j]
    """
    check_callable(rho0, "rho0")
    n = check_int(n, "n", low=1)
    dim = check_dim(dim)
    if method not in ("iid", "quasi"):
        raise InvalidInput(f"`method` must be 'iid' or 'quasi', got {method!r}.")
    sigma = token_positions(n, positions, "positions")
    rng = np.random.default_rng(rng)
    dependent = takes_position(rho0)
    if method == "iid" and not dependent:
        return sample(rho0, n, dim, rng, "iid")
    if dim not in _CELLS:
        raise InvalidInput(f"`dim` must be 2 or 3 for method={method!r} with a density of the position, got {dim}.")
    if method == "iid":
        u = rng.random((n, dim - 1))
    else:
        steps = [_PHI] if dim == 2 else [1.0 / _PLASTIC, 1.0 / _PLASTIC ** 2]
        u = np.mod(np.arange(1, n + 1)[:, None] * np.array(steps) + rng.random(dim - 1), 1.0)
    return _inverse_transform(rho0, sigma, u, dim, dependent), np.full(n, 1.0 / n)


def _inverse_transform(rho0, sigma, u, dim, dependent=True):
    """x_j = T_{σ_j}(u_j), the inverse (Rosenblatt) transform of ρ0(·, σ_j) (ρ0(·) once when not
    ``dependent``) on the grid of `_CELLS`: on S^2, z from the marginal of the rows, then φ from the chosen
    row; linear within a cell."""
    rows, cols = _CELLS[dim]
    zc = 1.0 - 2.0 * (np.arange(rows) + 0.5) / rows if dim == 3 else np.zeros(1)
    ac = 2 * np.pi * (np.arange(cols) + 0.5) / cols
    r = np.sqrt(np.clip(1 - zc * zc, 0.0, None))
    grid = np.stack([r[:, None] * np.cos(ac), r[:, None] * np.sin(ac)] + ([np.broadcast_to(zc[:, None], (rows, cols))]
                                                                            if dim == 3 else []), -1).reshape(-1, dim)
    out = np.empty((len(sigma), dim))
    step = max(1, _CHUNK // len(grid))
    fixed = None if dependent else _grid_values(lambda x, s: rho0(x), grid, sigma[:1], dim)
    for start in range(0, len(sigma), step):
        part = slice(start, min(start + step, len(sigma)))
        k = part.stop - part.start
        values = _grid_values(rho0, grid, sigma[part], dim) if fixed is None else fixed
        out[part] = _invert(np.broadcast_to(values.reshape(-1, rows, cols), (k, rows, cols)), u[part], rows, cols, dim)
    return out


def _grid_values(rho0, grid, s, dim):
    """ρ0 at the grid points for each position of s: (len(s), len(grid)), checked (ValueError naming `rho0`)."""
    try:
        values = np.asarray(rho0(np.broadcast_to(grid, (len(s),) + grid.shape).reshape(-1, dim),
                                 np.repeat(s, len(grid))), dtype=float)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"`rho0` could not be evaluated at points (k, {dim}) and positions (k,): {exc}") from None
    if values.shape != (len(s) * len(grid),) or not np.all(np.isfinite(values)) or np.any(values < 0):
        raise InvalidInput(f"`rho0` must return one finite value >= 0 per point (called with points (k, {dim}) and "
                         f"positions (k,)), got shape {values.shape}.")
    return values.reshape(len(s), len(grid))


def _invert(values, u, rows, cols, dim):
    """The points of the uniform numbers u (k, dim − 1) for cell values (k, rows, cols)."""
    k = len(values)
    if dim == 3:
        marginal = values.sum(-1)
        row, fz = _cell(marginal, u[:, 0])
        z = 1.0 - 2.0 * (row + fz) / rows                  # cells of height 2/rows, z decreasing with the row
        line = values[np.arange(k), row]
        v = u[:, 1]
    else:
        z, line, v = np.zeros(k), values[:, 0], u[:, 0]
    col, fa = _cell(line, v)
    angle = 2 * np.pi * (col + fa) / cols
    r = np.sqrt(np.clip(1 - z * z, 0.0, None))
    xy = np.stack([r * np.cos(angle), r * np.sin(angle)], -1)
    return np.concatenate([xy, z[:, None]], -1) if dim == 3 else xy


def _cell(weights, u):
    """(cell, fraction in it) of u under the piecewise-constant law of the cell ``weights`` (k, m)."""
    cdf = np.cumsum(weights, axis=-1)
    total = cdf[:, -1]
    if np.any(total <= 0):
        raise InvalidInput("`rho0` vanishes at every grid point of some position; cannot sample it.")
    target = u * total
    cell = np.minimum((cdf < target[:, None]).sum(-1), weights.shape[-1] - 1)
    below = np.where(cell > 0, cdf[np.arange(len(cell)), cell - 1], 0.0)
    own = weights[np.arange(len(cell)), cell]
    return cell, np.clip((target - below) / np.where(own > 0, own, 1.0), 0.0, 1.0)
