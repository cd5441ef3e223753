"""Closed forms of the transition with noise: the critical noise ν_c, the Landau coefficient and β_*.

Degree-l multipliers a_l(β) of `meanfield.kernel_multipliers` (Geshkovski, Letrouit, Polyanskiy,
Rigollet, *A mathematical perspective on Transformers* (2023), Problem 7; docs/mathematics.md §5–§6;
the derivations are in the docstring of `solvers.stationary`).
"""
import numpy as np
from scipy import optimize

from meanfield.transformer.kernels import kernel_multipliers, velocity_multipliers
from meanfield.validation import check_beta, check_dim


def multiplier_ratios(beta, dim, lmax):
    """(q_l = a_l/a_1 for l = 1..lmax, g = a_1/a_0), from scaled multipliers (finite for every β; for
    β < 0, q_l = (−1)^{l+1} q_l(|β|) and g = −g(|β|))."""
    c = velocity_multipliers(beta, dim, max(lmax, 2), scaled=True)          # a_l e^{-β}/β, finite at β = 0
    a0 = kernel_multipliers(beta, dim, 0, scaled=True)[0]
    return c[1:lmax + 1] / c[1], beta * c[1] / a0


def critical_noise(beta, dim, normalized=False):
    """ν_c, the noise below which the uniform density loses stability (degree 1).

    ν_c = a_1(β)/β for (USA) and a_1(β)/(β a_0(β)) for (SA): the zero of the exact linear rate of
    degree 1 (docs/mathematics.md §5). At β = 0 both equal 1/d. Both are even in β (a_1 is odd, a_0
    even), and for β < 0 degree 1 is still the first to lose stability (the even degrees never do).

    Parameters
    ----------
    beta : float, of either sign
        Inverse temperature β.
    dim : int >= 2
        Ambient dimension d (the sphere S^{d-1}).
    normalized : bool
        True for (SA), False for (USA).

    Returns
    -------
    float
        ν_c, in the units of the model's ``noise`` (the coefficient of Δ_S).

    Raises
    ------
    ValueError
        ``beta`` not finite, ``dim`` < 2.

    Examples
    --------
    >>> from scipy import special
    >>> from solvers import stationary
    >>> round(stationary.critical_noise(1.0, 2), 6), round(float(special.iv(1, 1.0)), 6)      # (USA): I_1(β)/β
    (0.565159, 0.565159)
    >>> round(stationary.critical_noise(1.0, 2, normalized=True), 6)                        # (SA): I_1/(β I_0)
    0.44639
    >>> round(stationary.critical_noise(0.0, 3), 12)                                        # 1/d at β = 0
    0.333333333333
    """
    beta = check_beta(beta)
    dim = check_dim(dim)
    if normalized:
        return float(velocity_multipliers(beta, dim, 1, scaled=True)[1] / kernel_multipliers(beta, dim, 0, scaled=True)[0])
    return float(velocity_multipliers(beta, dim, 1)[1])


def landau_coefficient(beta, dim, normalized=False):
    """The Landau coefficient c of the bifurcation at ν_c: ν = ν_c (1 + c r² + O(r⁴)) along the branch.

    From the third-order expansion of the self-consistency equation (docstring of `solvers.stationary`),
    with
    q = a_2/a_1, g = a_1/a_0, α = 2(d−1)/(d(d+2)), γ = 3/(d+2): c = d²·C,

        (USA)  C = α q / (2(1−q)) + γ/6 − 1/(2d),
        (SA)   C = α q (1−g)²/(2(1−q)) − α g/2 + γ(1 + 2g²)/6 − 1/(2d).

    c < 0: supercritical (continuous transition); c > 0: subcritical (discontinuous).
    """
    beta = check_beta(beta)
    d = check_dim(dim)
    (_, q), g = multiplier_ratios(beta, d, 2)
    alpha, gamma = 2.0 * (d - 1) / (d * (d + 2)), 3.0 / (d + 2)
    if normalized:
        C = alpha * q * (1 - g) ** 2 / (2 * (1 - q)) - alpha * g / 2 + gamma * (1 + 2 * g * g) / 6 - 1 / (2 * d)
    else:
        C = alpha * q / (2 * (1 - q)) + gamma / 6 - 1 / (2 * d)
    return float(d * d * C)


def beta_star(dim, normalized=False):
    """β_*(d): the root of `landau_coefficient` in β, where the transition turns discontinuous.

    For (USA) this is the root of I_{d/2+1}(β)/I_{d/2}(β) = 1/d (2.44692 for d = 2, 1.81615 for
    d = 3).

    Parameters
    ----------
    dim : int >= 2
        Ambient dimension d.
    normalized : bool
        True for (SA), False for (USA).

    Returns
    -------
    float
        β_*; inf if the coefficient stays negative up to β = 1000.

    Raises
    ------
    ValueError
        ``dim`` < 2.

    Examples
    --------
    >>> from solvers import stationary
    >>> round(stationary.beta_star(2), 5), round(stationary.beta_star(3), 5)
    (2.44692, 1.81615)
    """
    dim = check_dim(dim)
    f = lambda b: landau_coefficient(b, dim, normalized)  # noqa: E731
    lo, hi = 1e-6, 1.0
    while f(hi) < 0:
        lo, hi = hi, 2 * hi
        if hi > 1000:
            return float("inf")
    return float(optimize.brentq(f, lo, hi, xtol=1e-15, rtol=4 * np.finfo(float).eps, maxiter=200))


__all__ = ["critical_noise", "landau_coefficient", "beta_star", "multiplier_ratios"]
