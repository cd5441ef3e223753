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
from ..validation import check_int, check_real
from ..errors import InvalidInput

SIGNAL_M = 8          # the kinetic paper's signal width M in ω_{n,M}
SIGNAL_MODES = 20     # its n_max


def log_ratio(lam, sigma, r):
    """Y = log((e^{λσ} − 1)/(e^{λr} − 1)) for 0 < r <= σ (log(σ/r) at λ = 0).

    The variable in which the Volterra kernel k_λ(σ, r) dr = e^{−Y} dY (docs/causal.md).

    Parameters
    ----------
    lam : float >= 0
        λ, the ALiBi slope in units of the whole sequence.
    sigma : array_like
        Token position σ in (0, 1].
    r : array_like
        Token position 0 < r <= σ (broadcast with ``sigma``).

    Returns
    -------
    ndarray
        Y >= 0, of the broadcast shape.

    Examples
    --------
    >>> from meanfield import causal
    >>> round(float(causal.log_ratio(0.0, 1.0, 0.5)), 6)          # log 2
    0.693147
    >>> round(float(causal.log_ratio(1.0, 1.0, 0.5)), 6)          # log((e − 1)/(e^{1/2} − 1))
    0.974077
    """
    sigma, r = np.asarray(sigma, dtype=float), np.asarray(r, dtype=float)
    if lam == 0.0:
        return np.log(sigma) - np.log(r)
    return np.log(np.expm1(lam * sigma)) - np.log(np.expm1(lam * r))


def psi(c, y):
    """ψ_c(y) = Σ_k c^{k+1} y^k/(k!(k+1)!) = c·2I_1(z)/z with z = 2√(cy) (2J_1(w)/w, w = 2√(−cy), for cy < 0),
    from exponentially scaled Bessel functions (`scipy.special.ive`), so large arguments stay finite up
    to e^z in double precision.

    Parameters
    ----------
    c : array_like
        c = a·t, the rate times the time (dimensionless).
    y : array_like, >= 0
        Y of `log_ratio` (broadcast with ``c``).

    Returns
    -------
    ndarray
        ψ_c(y), of the broadcast shape.

    Examples
    --------
    >>> from scipy import special
    >>> from meanfield import causal
    >>> round(float(causal.psi(1.0, 1.0)), 6), round(float(special.iv(1, 2.0)), 6)     # √(c/y) I_1(2√(cy))
    (1.590637, 1.590637)
    >>> round(float(causal.psi(-1.0, 1.0)), 6), round(float(causal.psi(1.0, 0.0)), 6)  # −J_1(2); ψ_c(0) = c
    (-0.576725, 1.0)
    """
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
    perturbation (`meanfield.transformer.kernels.linear_growth_rates` without its noise), and μ = ν·l(l+d−2).

    Parameters
    ----------
    model : Model
        A zonal model (its mask and position bias play no part in the rates).
    degree : int >= 1
        The degree l (the Fourier mode k on S^1).

    Returns
    -------
    a : float
        The interaction rate, in units of 1/t.
    mu : float
        The noise rate μ, in units of 1/t.

    Raises
    ------
    ValueError
        ``degree`` < 1.
    UnsupportedModel
        A non-zonal model.

    Examples
    --------
    >>> from scipy import special
    >>> import meanfield as mf
    >>> from meanfield import causal
    >>> model = mf.Model(beta=1.0, dim=2, normalized=False, mask="causal", position_bias=1.0)
    >>> a, mu = causal.rate(model, 1)
    >>> round(a, 6), round(float(special.iv(1, 1.0)), 6), mu           # (USA) on S^1: I_1(β)/β
    (0.565159, 0.565159, 0.0)
    """
    l = check_int(degree, "degree", low=1)
    mu = model.noise * laplacian_eigenvalues(model.dim, l)[l]
    return float(linear_growth_rates(model, l)[l] + mu), float(mu)


def green_function(t, sigma, r, a, position_bias=0.0):
    """g(t, σ; r) = k_λ(σ, r) ψ_{at}(Y(σ, r)) for 0 < r < σ (0 for r >= σ), rate ``a``.

    The Green's function of the layered equation's Volterra equation (module docstring, docs/causal.md).

    Parameters
    ----------
    t : float
        Time (layer depth).
    sigma : array_like
        Position in (0, 1] of the responding token.
    r : array_like
        Position in (0, 1] of the perturbed token (broadcast with ``sigma``).
    a : float or array_like
        The interaction rate (`rate`).
    position_bias : float >= 0
        λ, the ALiBi slope.

    Returns
    -------
    ndarray
        g, of the broadcast shape.

    Raises
    ------
    ValueError
        ``position_bias`` < 0.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield import causal
    >>> g = causal.green_function(1.0, 1.0, np.array([0.5, 1.0]), 0.5)     # λ = 0: k = 1/σ, ψ_{1/2}(log 2)
    >>> np.round(g, 6).tolist()
    [0.591795, 0.0]
    """
    lam = check_real(position_bias, "position_bias", low=0.0)
    sigma, r = np.broadcast_arrays(np.asarray(sigma, dtype=float), np.asarray(r, dtype=float))
    inside = r < sigma
    y = log_ratio(lam, sigma, np.where(inside, r, 0.5 * sigma))
    return np.where(inside, position_kernel(lam, sigma, r) * psi(a * t, y), 0.0)


def linear_response(model, degree, amplitude0, t, sigma):
    """A(t, σ) of the module docstring for an initial amplitude A(0, ·) (a callable of σ): the exact
    Green's function integrated by adaptive quadrature in Y.

    Parameters
    ----------
    model : Model
        A zonal masked model (its ``position_bias`` is λ; its noise gives μ).
    degree : int >= 1
        The degree l of the perturbation.
    amplitude0 : callable
        A(0, σ), a function of the position σ ∈ (0, 1].
    t : float
        Time (layer depth).
    sigma : array_like
        Positions in (0, 1].

    Returns
    -------
    (n,) array
        A(t, σ) at each position.

    Examples
    --------
    A constant amplitude grows at the unmasked rate at every position: ∫_0^∞ ψ_c(Y) e^{−Y} dY = e^c − 1.

    >>> import numpy as np
    >>> import meanfield as mf
    >>> from meanfield import causal
    >>> model = mf.Model(beta=1.0, dim=2, normalized=False, mask="causal")
    >>> A = causal.linear_response(model, 1, lambda s: 1.0, 1.0, [0.5, 1.0])
    >>> np.round(A, 6).tolist(), round(float(np.exp(causal.rate(model, 1)[0])), 6)
    ([1.759728, 1.759728], 1.759728)
    """
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
    """ω_n = exp(−π²n²/(2M²)), n = 1..n_max: the Fourier weights of the kinetic paper's signal.

    Parameters
    ----------
    M : float > 0
        The signal's width parameter (default 8).
    n_max : int >= 1
        Number of modes (default 20).

    Returns
    -------
    (n_max,) array

    Raises
    ------
    ValueError
        ``M`` <= 0 or ``n_max`` < 1.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield import causal
    >>> w = causal.signal_weights()
    >>> w.shape, np.round(w[:2], 6).tolist()
    ((20,), [0.925791, 0.734603])
    """
    n = np.arange(1, check_int(n_max, "n_max", low=1) + 1)
    return np.exp(-np.pi ** 2 * n ** 2 / (2 * check_real(M, "M", low=0.0, low_open=True) ** 2))


def profile_rates(beta, n_max=SIGNAL_MODES):
    """b_n = n² I_n(β), n = 1..n_max (the kinetic paper's rates; (USA) rates of S^1 times β).

    Parameters
    ----------
    beta : float
        Inverse temperature β.
    n_max : int >= 1
        Number of modes (default 20).

    Returns
    -------
    (n_max,) array

    Examples
    --------
    >>> import numpy as np
    >>> from scipy import special
    >>> from meanfield import causal
    >>> b = causal.profile_rates(1.0, 2)
    >>> np.round(b, 6).tolist(), round(float(4 * special.iv(2, 1.0)), 6)
    ([0.565159, 0.542991], 0.542991)
    """
    I = kernel_multipliers(beta, 2, check_int(n_max, "n_max", low=1))
    n = np.arange(1, n_max + 1)
    return n ** 2 * I[1:]


def _check_heads(heads):
    """[(weight, β, λ)] checked: real weights (of either sign), β > 0 and λ >= 0 (ValueError naming `heads`)."""
    try:
        heads = [tuple(h) for h in heads]
    except TypeError:
        raise InvalidInput(f"`heads` must be a list of (weight, beta, position_bias) triples, got {heads!r}.") from None
    if not heads or any(len(h) != 3 for h in heads):
        raise InvalidInput(f"`heads` must be a non-empty list of (weight, beta, position_bias) triples, got {heads!r}.")
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
        raise InvalidInput("pass either `beta` (one head) or `heads` (a list of (weight, beta, position_bias)), "
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
        raise InvalidInput(f"`{name}` must be positions in (0, 1], got {s!r}.") from None
    if s.size and not (np.all(np.isfinite(s)) and s.min() > 0.0 and s.max() <= 1.0):
        raise InvalidInput(f"`{name}` must lie in (0, 1] (the profile diverges as s -> 0), got values from "
                         f"{np.nanmin(s):g} to {np.nanmax(s):g}.")
    return s


def critical_time(beta, position_bias=1.0, M=SIGNAL_M, n_max=SIGNAL_MODES):
    """τ_crit = 2(1 − e^{−λ}) Σ ω_n b_n / Σ ω_n b_n²: where the slope of S_τ at s → 1 changes sign.

    β > 0: as β → 0, b_1 ≈ β/2 dominates and τ_crit ≈ 2(1 − e^{−λ})/b_1 → ∞ (no finite limit), and for
    β < 0 the rates b_n = n² I_n(β) alternate in sign, so the threshold is not defined (ValueError naming
    `beta`).

    Parameters
    ----------
    beta : float
        Inverse temperature β.
    position_bias : float > 0
        λ, the ALiBi slope (default 1).
    M : float > 0
        The signal's width (`signal_weights`, default 8).
    n_max : int >= 1
        The signal's number of modes (`signal_weights`, default 20).

    Returns
    -------
    float
        τ_crit, in the kinetic paper's time τ = t/β.

    Raises
    ------
    ValueError
        ``beta`` <= 0 or ``position_bias`` <= 0.

    Examples
    --------
    >>> from meanfield import causal
    >>> round(causal.critical_time(4.0), 6)
    0.054588
    """
    beta = check_real(beta, "beta", low=0.0, low_open=True)
    lam = check_real(position_bias, "position_bias", low=0.0, low_open=True)
    w, b = signal_weights(M, n_max), profile_rates(beta, n_max)
    return float(-2 * np.expm1(-lam) * (w @ b) / (w @ b ** 2))


__all__ = ["SIGNAL_M", "SIGNAL_MODES", "check_positions", "critical_time", "green_function", "linear_response",
           "log_ratio", "psi", "profile_rates", "rate", "response_profile", "signal_weights"]
