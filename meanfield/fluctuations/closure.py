"""The first BBGKY equation of n tokens on S^1 and the closure by molecular chaos (Problem 4 of the paper;
docs/fluctuations.md, docs/mathematics.md §18).

The empirical measure μ of (USA) particles solves ∂_t μ + ∂_θ(μ v[μ]) = 0 with v[μ] = (v/β) ∂_θ (e^{β cos} ∗ μ)
(v = ±1 the value matrix), exactly. In Fourier (μ̂_k = (1/n) Σ_j e^{−ikθ_j}, v̂_m = i m c_m μ̂_m,
c_m = v I_m(β)/β) it reads dμ̂_k/dt = k Σ_m m c_m μ̂_m μ̂_{k−m}, and its expectation is the first equation of
the hierarchy:

    d E μ̂_k/dt = J_k,   J_k = k Σ_m m c_m E[μ̂_m μ̂_{k−m}]      (− ν k² E μ̂_k with noise).

The interaction term J_k needs the two-token moments E[μ̂_a μ̂_b] = ((n−1)/n) f̂_2(a, b) + f̂_1(a+b)/n, with f_2
the density of two distinct tokens; the diagonal drops out of J_k (Σ_m m c_m = 0), so
J_k = ((n−1)/n) k Σ_m m c_m f̂_2(m, k−m). Molecular chaos (f_2 = f_1 ⊗ f_1) replaces f̂_2(m, k−m) by
E μ̂_m E μ̂_{k−m}: exact for i.i.d. tokens, it fails as the fluctuations grow (`linear_prediction`).

The second equation, for f_2(θ_1, θ_2), holds the three-token term ((n−2)/n) ∂_1 ∫ K(θ_1 − θ_3) f_3 dσ(θ_3)
(and its mirror in θ_2), K(φ) = −v sin φ e^{β cos φ} the velocity one token gives another. Kirkwood's
superposition closes it with f_3 = f_2(1,2) f_2(2,3) f_2(1,3) / (f_1(1) f_1(2) f_1(3)), exact for i.i.d.
tokens; `second_equation` compares the integral I(θ_1, θ_2) = ∫ K(θ_1 − θ_3) f_3 dσ(θ_3) from the measured
f_3 and from Kirkwood's, on the bins of the ensemble (``grid=G``).
"""
from dataclasses import dataclass

import numpy as np

from ..errors import InvalidInput
from ..validation import check_int
from .linear import velocity_coefficients


@dataclass
class FirstEquation:
    """The interaction term of the first BBGKY equation, k = 1..K (see `first_equation`).

    Attributes
    ----------
    t : (T,) times; k : (K,) frequencies.
    measured : (T, K) complex J_k from the measured pair moments E[μ̂_m μ̂_{k−m}].
    chaos : (T, K) complex J_k from molecular chaos, ((n−1)/n) E μ̂_m E μ̂_{k−m} in place of E[μ̂_m μ̂_{k−m}].
    derivative : (T, K) complex d E μ̂_k/dt by finite differences of the measured E μ̂_k (second order).
    diffusion : (T, K) complex −ν k² E μ̂_k (zero without noise).
    residual : (T,) |J_measured − J_chaos| / |J_measured| (Euclidean norms over k): the closure's error.
    tail : float, max |m c_m| over the truncated |m| > P − K (an upper bound of the neglected terms' factors).
    """

    t: np.ndarray
    k: np.ndarray
    measured: np.ndarray
    chaos: np.ndarray
    derivative: np.ndarray
    diffusion: np.ndarray
    residual: np.ndarray
    tail: float


def first_equation(ens, modes=4):
    """The interaction term of the first BBGKY equation on S^1, from the measured pair moments and from
    molecular chaos, and d E μ̂_k/dt to compare them with.

    Parameters
    ----------
    ens : Ensemble
        From `ensemble` on S^1 with ``pair_modes=P``, a (USA) model (``normalized=False``).
    modes : int >= 1
        K: the frequencies k = 1..K (K < P; the sum over m runs over k − P <= m <= P).

    Returns
    -------
    FirstEquation

    Raises
    ------
    ValueError
        ``ens`` without pair moments or not of a (USA) model on S^1, ``modes`` not in 1..P − 1.

    Examples
    --------
    Tokens of density 1 + 0.8 cos θ at β = 1: i.i.d. at t = 0, where molecular chaos holds (to sampling error).

    >>> import numpy as np
    >>> import meanfield as mf
    >>> from meanfield import fluctuations
    >>> model = mf.Model(beta=1.0, dim=2, normalized=False)
    >>> ens = fluctuations.ensemble(model, 100, 32, np.linspace(0, 1, 5), rng=0, pair_modes=12,
    ...                             initial=mf.densities.perturbed_uniform(0.8, 1))
    >>> eq = fluctuations.first_equation(ens, modes=3)
    >>> eq.measured.shape, bool(eq.residual[0] < 0.1), eq.tail < 1e-8
    ((5, 3), True, True)
    """
    from .ensemble import Ensemble

    if not isinstance(ens, Ensemble) or ens.pair_moments is None:
        raise InvalidInput("`ens` must be an Ensemble with pair moments (ensemble(..., pair_modes=P) on S^1).")
    if ens.model.normalized or ens.model.dim != 2:
        raise InvalidInput("`ens` must come from a (USA) model on S^1 (Model(beta, 2, normalized=False)): the "
                           "(SA) velocity divides by Z(x) and is not a pair sum.")
    P = ens.pair_modes
    K = check_int(modes, "modes", low=1, high=P - 1)
    c = velocity_coefficients(ens.model, P)
    cm = np.concatenate([c[:0:-1], c])                  # c_{|m|}, m = −P..P (c is even in m)
    ms = np.arange(-P, P + 1)
    mean, pair = ens.moments, ens.pair_moments
    ks = np.arange(1, K + 1)
    measured = np.empty((len(ens.t), K), complex)
    chaos = np.empty_like(measured)
    for i, k in enumerate(ks):
        m = np.arange(k - P, P + 1)                      # both m and k − m in −P..P
        weight = k * m * cm[m + P]
        measured[:, i] = pair[:, m + P, k - m + P] @ weight
        chaos[:, i] = (mean[:, m + P] * mean[:, k - m + P]) @ weight * ((ens.n - 1) / ens.n)
    own = mean[:, ks + P]
    derivative = np.gradient(own, ens.t, axis=0, edge_order=2) if len(ens.t) > 2 else np.full_like(own, np.nan)
    norm = np.linalg.norm(measured, axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        residual = np.linalg.norm(measured - chaos, axis=1) / norm
    tail = float(np.max(np.abs(ms * cm)[np.abs(ms) > P - K])) if P > K else np.inf
    return FirstEquation(ens.t, ks, measured, chaos, derivative, -ens.model.noise * ks ** 2 * own, residual, tail)


@dataclass
class SecondEquation:
    """The three-token term of the second BBGKY equation on a grid of the circle (see `second_equation`).

    Attributes
    ----------
    t : (T,) times; angles : (G,) bin centres.
    measured, kirkwood : (T, G, G) I(θ_i, θ_j) = ∫ K(θ_i − θ_3) f_3(θ_i, θ_j, θ_3) dσ(θ_3) (midpoint rule on
        the bins; K scaled by e^{−|β|}) from the measured f_3 and from Kirkwood's superposition.
    residual : (T,) ‖measured − kirkwood‖ / ‖measured‖ (over the grid).
    """

    t: np.ndarray
    angles: np.ndarray
    measured: np.ndarray
    kirkwood: np.ndarray
    residual: np.ndarray


def kirkwood(f1, f2):
    """Kirkwood's superposition f_3(i, j, k) = f_2(i, j) f_2(j, k) f_2(i, k) / (f_1(i) f_1(j) f_1(k)) on a grid,
    (..., G, G, G); 0 where a bin is empty (f_1 = 0)."""
    inv = np.where(f1 > 0, 1.0 / np.where(f1 > 0, f1, 1.0), 0.0)
    g = f2 * inv[..., :, None] * inv[..., None, :]              # f_2(i, j) / (f_1(i) f_1(j))
    return g[..., :, :, None] * g[..., None, :, :] * g[..., :, None, :] * f1[..., :, None, None] \
        * f1[..., None, :, None] * f1[..., None, None, :]


def second_equation(ens):
    """The three-token term of the second BBGKY equation on S^1 from the measured f_3 and from Kirkwood's
    superposition (module docstring).

    Parameters
    ----------
    ens : Ensemble
        From `ensemble` on S^1 with ``grid=G``, a (USA) model.

    Returns
    -------
    SecondEquation

    Raises
    ------
    ValueError
        ``ens`` without the binned densities, or not of a (USA) model on S^1.

    Examples
    --------
    Kirkwood's superposition is exact for the i.i.d. tokens of t = 0:

    >>> import meanfield as mf
    >>> from meanfield import fluctuations
    >>> usa = mf.Model(beta=1.0, dim=2, normalized=False)
    >>> ens = fluctuations.ensemble(usa, 100, 32, [0.0, 1.0], rng=0, grid=16,
    ...                             initial=mf.densities.perturbed_uniform(0.5, 1))
    >>> eq = fluctuations.second_equation(ens)
    >>> eq.measured.shape, bool(eq.residual[0] < 0.1)
    ((2, 16, 16), True)
    """
    from .ensemble import Ensemble

    if not isinstance(ens, Ensemble) or ens.f3 is None:
        raise InvalidInput("`ens` must be an Ensemble with the binned densities (ensemble(..., grid=G) on S^1).")
    if ens.model.normalized or ens.model.dim != 2:
        raise InvalidInput("`ens` must come from a (USA) model on S^1 (Model(beta, 2, normalized=False)).")
    G = ens.f1.shape[1]
    angles = 2 * np.pi * (np.arange(G) + 0.5) / G
    phi = angles[:, None] - angles[None, :]
    v = float(ens.model.heads[0][2][0, 0])
    K = -v * np.sin(phi) * np.exp(ens.model.beta * np.cos(phi) - abs(ens.model.beta)) / G
    measured = np.einsum("ik,tijk->tij", K, ens.f3)
    closed = np.einsum("ik,tijk->tij", K, kirkwood(ens.f1, ens.f2))
    with np.errstate(divide="ignore", invalid="ignore"):
        residual = np.linalg.norm((measured - closed).reshape(len(ens.t), -1), axis=1) \
            / np.linalg.norm(measured.reshape(len(ens.t), -1), axis=1)
    return SecondEquation(ens.t, angles, measured, closed, residual)
