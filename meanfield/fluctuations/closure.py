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
