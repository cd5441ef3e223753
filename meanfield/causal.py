"""The linear theory of the layered continuity equation of causal attention, in closed form (docs/causal.md).

About the uniform state, ρ = 1 + ε A(t, σ) Y(x) + O(ε²) with Y a degree-l harmonic (a Fourier mode
cos kθ on S^1) gives the Volterra equation in the position σ (Duerinckx, Geshkovski, Rossi, *Kinetic
theory for Transformers and the lost-in-the-middle phenomenon*, arXiv 2605.09213)

    ∂_t A(t, σ) = a ∫_0^σ k_λ(σ, r) A(t, r) dr − μ A(t, σ),

with the rate a of the unmasked model (`rate`: v·l(l+d−2)·a_l(β)/β for (USA), divided by a_0(β) for
(SA); docs/mathematics.md §5) and μ = ν l(l+d−2) the noise. Its solution is

    A(t, σ) = e^{−μt} [A(0, σ) + ∫_0^σ g(t, σ; r) A(0, r) dr],   g = k_λ(σ, r) ψ_{at}(Y),
    Y = log((e^{λσ} − 1)/(e^{λr} − 1))  (log(σ/r) at λ = 0),
    ψ_c(y) = Σ_{k>=0} c^{k+1} y^k/(k!(k+1)!) = √(c/y) I_1(2√(cy))   (`psi`).

Since k_λ(σ, r) dr = e^{−Y} dY, ∫_0^σ g A(0, r) dr = ∫_0^∞ ψ_{at}(Y) e^{−Y} A(0, r(Y)) dY (`linear_response`).

The lost-in-the-middle profile (the kinetic paper's time τ = t/β and (USA) field times β): the response
of the last position to a signal at position s with Fourier weights ω_n = exp(−π²n²/(2M²)),

    S_τ(s) = Σ_{n=1}^{n_max} ω_n g_{b_n}(τ, 1; s),   b_n = n² I_n(β)   (`response_profile`),

whose slope at s → 1 changes sign at τ_crit = 2(1 − e^{−λ}) Σ ω_n b_n / Σ ω_n b_n² (`critical_time`):
below it the last positions respond most (recency), above it the profile is U-shaped.
"""
import numpy as np
from scipy import integrate, special

from .kernels import kernel_multipliers, laplacian_eigenvalues, linear_growth_rates
from .positions import position_kernel
from .validation import check_int, check_real

SIGNAL_M = 8          # the kinetic paper's signal width M in ω_{n,M}
SIGNAL_MODES = 20     # its n_max


def log_ratio(lam, sigma, r):
    """Y = log((e^{λσ} − 1)/(e^{λr} − 1)) for 0 < r <= σ (log(σ/r) at λ = 0)."""
    sigma, r = np.asarray(sigma, dtype=float), np.asarray(r, dtype=float)
    if lam == 0.0:
        return np.log(sigma) - np.log(r)
    return np.log(np.expm1(lam * sigma)) - np.log(np.expm1(lam * r))


def psi(c, y):
    """ψ_c(y) = Σ_k c^{k+1} y^k/(k!(k+1)!) = c·2I_1(z)/z with z = 2√(cy) (2J_1(w)/w, w = 2√(−cy), for cy < 0),
    from exponentially scaled Bessel functions (`scipy.special.ive`), so large arguments stay finite up
    to e^z in double precision."""
    c, y = np.broadcast_arrays(np.asarray(c, dtype=float), np.asarray(y, dtype=float))
    cy = c * y
    z = 2 * np.sqrt(np.abs(cy))
    small = z < 1e-4
    zs = np.where(small, 1.0, z)
    with np.errstate(over="ignore"):
        grow = 2 * special.ive(1, zs) / zs * np.exp(zs)
    oscillate = 2 * special.j1(zs) / zs
    ratio = np.where(cy >= 0, grow, oscillate)
    series = 1 + cy / 2 + cy * cy / 12
    return c * np.where(small, series, ratio)


def rate(model, degree):
    """(a, μ): the interaction rate a = v·l(l+d−2)·a_l/β ((USA); divided by a_0 for (SA)) of a degree-l
    perturbation (`meanfield.kernels.linear_growth_rates` without its noise), and μ = ν·l(l+d−2)."""
    l = check_int(degree, "degree", low=1)
    mu = model.noise * laplacian_eigenvalues(model.dim, l)[l]
    return float(linear_growth_rates(model, l)[l] + mu), float(mu)


def green_function(t, sigma, r, a, position_bias=0.0):
    """g(t, σ; r) = k_λ(σ, r) ψ_{at}(Y(σ, r)) for 0 < r < σ (0 for r >= σ), rate ``a``."""
    lam = check_real(position_bias, "position_bias", low=0.0)
    sigma, r = np.broadcast_arrays(np.asarray(sigma, dtype=float), np.asarray(r, dtype=float))
    inside = r < sigma
    y = log_ratio(lam, sigma, np.where(inside, r, 0.5 * sigma))
    return np.where(inside, position_kernel(lam, sigma, r) * psi(a * t, y), 0.0)


def linear_response(model, degree, amplitude0, t, sigma):
    """A(t, σ) of the module docstring for an initial amplitude A(0, ·) (a callable of σ): the exact
    Green's function integrated by adaptive quadrature in Y. ``t`` scalar, ``sigma`` array."""
    a, mu = rate(model, degree)
    lam = model.position_bias
    sigma = np.atleast_1d(np.asarray(sigma, dtype=float))
    c = a * float(t)

    def r_of(y, s):          # the position r with Y(s, r) = y
        if lam == 0.0:
            return s * np.exp(-y)
        return np.log1p(np.expm1(lam * s) * np.exp(-y)) / lam

    out = np.empty(sigma.shape)
    for i, s in enumerate(sigma):
        tail, _ = integrate.quad(lambda y: psi(c, y) * np.exp(-y) * amplitude0(r_of(y, s)), 0.0, np.inf,
                                 epsabs=1e-14, epsrel=1e-12, limit=200)
        out[i] = amplitude0(s) + tail
    return np.exp(-mu * float(t)) * out


def signal_weights(M=SIGNAL_M, n_max=SIGNAL_MODES):
    """ω_n = exp(−π²n²/(2M²)), n = 1..n_max: the Fourier weights of the kinetic paper's signal."""
    n = np.arange(1, check_int(n_max, "n_max", low=1) + 1)
    return np.exp(-np.pi ** 2 * n ** 2 / (2 * check_real(M, "M", low=0.0, low_open=True) ** 2))


def profile_rates(beta, n_max=SIGNAL_MODES):
    """b_n = n² I_n(β), n = 1..n_max (the kinetic paper's rates; (USA) rates of S^1 times β)."""
    I = kernel_multipliers(beta, 2, check_int(n_max, "n_max", low=1))
    n = np.arange(1, n_max + 1)
    return n ** 2 * I[1:]


def _check_heads(heads):
    """[(weight, β, λ)] checked: real weights (of either sign), β > 0 and λ >= 0 (ValueError naming `heads`)."""
    try:
        heads = [tuple(h) for h in heads]
    except TypeError:
        raise ValueError(f"`heads` must be a list of (weight, beta, position_bias) triples, got {heads!r}.") from None
    if not heads or any(len(h) != 3 for h in heads):
        raise ValueError(f"`heads` must be a non-empty list of (weight, beta, position_bias) triples, got {heads!r}.")
    out = []
    for k, (weight, beta, lam) in enumerate(heads):
        out.append((check_real(weight, f"heads[{k}] weight"),
                    check_real(beta, f"heads[{k}] beta", low=0.0, low_open=True),
                    check_real(lam, f"heads[{k}] position_bias", low=0.0)))
    return out


def response_profile(tau, s, beta=None, position_bias=1.0, M=SIGNAL_M, n_max=SIGNAL_MODES, *, heads=None):
    """S_τ(s) = Σ_n ω_n g_{b_n}(τ, 1; s), the response of the last position to a signal at s (kinetic paper's
    time τ = t/β), or for several heads the weighted sum Σ_h weight_h S_τ(s; β_h, λ_h) of the kinetic
    paper's multi-head profile.

    Parameters
    ----------
    tau : float >= 0, the time (at τ = 0 the profile is 0).
    s : float or array of positions in (0, 1]. At s = 1 the value is the limit s → 1 (Y = 0,
        ψ_c(0) = c, finite); as s → 0 it grows without bound (Y → ∞), so s = 0 is refused.
    beta : float > 0, one head's β (``heads`` instead for several).
    position_bias : float >= 0, that head's ALiBi slope λ.
    M, n_max : the signal's width and number of Fourier modes (ω_n = exp(−π²n²/(2M²)), n <= n_max).
    heads : list of (weight, β, λ), optional: the multi-head profile (weights of either sign, β > 0, λ >= 0).

    Returns
    -------
    S : array of the shape of ``s``.

    Raises
    ------
    ValueError naming `tau`, `s`, `beta` or `heads` (both `beta` and `heads`, or neither, is refused).

    Examples
    --------
    >>> double_well = [(1.0, 0.2, 3.0), (-27.519314453632965, 0.2, 0.25), (-1.5515192155322617, 0.5, 0.25),
    ...                (3.9262326774050965e-06, 3.0, 2.0)]
    >>> S = response_profile(1.5, np.linspace(0.02, 0.98, 800), heads=double_well)   # minima near 0.13 and 0.79
    """
    if (beta is None) == (heads is None):
        raise ValueError("pass either `beta` (one head) or `heads` (a list of (weight, beta, position_bias)), "
                         "not both or neither.")
    tau = check_real(tau, "tau", low=0.0)
    s = check_positions(s, "s")
    if heads is None:
        heads = [(1.0, check_real(beta, "beta", low=0.0, low_open=True), check_real(position_bias, "position_bias",
                                                                                    low=0.0))]
    w = signal_weights(M, n_max)
    total = np.zeros(s.shape)
    for weight, b, lam in _check_heads(heads):
        y = log_ratio(lam, 1.0, s[..., None])
        g = position_kernel(lam, 1.0, s[..., None]) * psi(profile_rates(b, n_max) * tau, y)
        total = total + weight * (g @ w)
    return total


def check_positions(s, name):
    """Positions as a float array in (0, 1] (ValueError naming ``name``)."""
    try:
        s = np.asarray(s, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"`{name}` must be positions in (0, 1], got {s!r}.") from None
    if s.size and not (np.all(np.isfinite(s)) and s.min() > 0.0 and s.max() <= 1.0):
        raise ValueError(f"`{name}` must lie in (0, 1] (the profile diverges as s -> 0), got values from "
                         f"{np.nanmin(s):g} to {np.nanmax(s):g}.")
    return s


def critical_time(beta, position_bias=1.0, M=SIGNAL_M, n_max=SIGNAL_MODES):
    """τ_crit = 2(1 − e^{−λ}) Σ ω_n b_n / Σ ω_n b_n²: where the slope of S_τ at s → 1 changes sign.

    β > 0: as β → 0, b_1 ≈ β/2 dominates and τ_crit ≈ 2(1 − e^{−λ})/b_1 → ∞ (no finite limit), and for
    β < 0 the rates b_n = n² I_n(β) alternate in sign, so the threshold is not defined (ValueError naming
    `beta`)."""
    beta = check_real(beta, "beta", low=0.0, low_open=True)
    lam = check_real(position_bias, "position_bias", low=0.0, low_open=True)
    w, b = signal_weights(M, n_max), profile_rates(beta, n_max)
    return float(-2 * np.expm1(-lam) * (w @ b) / (w @ b ** 2))


__all__ = ["SIGNAL_M", "SIGNAL_MODES", "check_positions", "critical_time", "green_function", "linear_response",
           "log_ratio", "psi", "profile_rates", "rate", "response_profile", "signal_weights"]
