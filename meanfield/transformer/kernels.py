"""Kernel multipliers of e^{β⟨x,y⟩} in spherical harmonics (docs/mathematics.md §3).

Convolution against σ, (K*ρ)(x) = ∫ e^{β⟨x,y⟩} ρ(y) dσ(y), is diagonal in spherical harmonics:
the degree-l part of K*ρ is a_l(β)·ρ_l with (Funk–Hecke; the closed form of docs/mathematics.md §3,
from the proof of Proposition 3.4)

    a_l(β) = Γ(d/2) (2/β)^{(d-2)/2} I_{l+(d-2)/2}(β),

so a_l = I_l(β) on S^1 and a_l = i_l(β) = sqrt(π/(2β)) I_{l+1/2}(β) on S^2. β may have either sign:
e^{−β⟨x,y⟩} = e^{β⟨x,−y⟩} and Y_l(−y) = (−1)^l Y_l(y) give the parity

    a_l(−β) = (−1)^l a_l(β)        (I_l(−β) = (−1)^l I_l(β) on S^1),

so every multiplier is evaluated at |β| and given the sign (−1)^l for β < 0 (docs/mathematics.md §3).
Every function here works with the exponentially scaled values a_l·e^{−|β|} (`scipy.special.ive`;
|β| is the maximum of β⟨x,y⟩) and multiplies by e^{|β|} only on request, so |β| up to several
thousand stays finite in scaled form.
"""
import numpy as np
from scipy import special

from .._docs import doc_params
from ..validation import check_beta, check_dim, check_int, check_real
from ..errors import InvalidInput, UnsupportedModel


def parity(beta, degrees):
    """(−1)^l for β < 0, 1 for β >= 0: the sign that a_l(β) = (−1)^l a_l(|β|) carries (float array)."""
    degrees = np.asarray(degrees)
    return np.where((degrees % 2 == 1) & (beta < 0), -1.0, 1.0)


def _log_prefactor(beta, dim):
    """log of Γ(d/2) (2/β)^{(d-2)/2}; only called with β > 0 (log 2 − log β: 2/β overflows for subnormal β)."""
    lam = 0.5 * (dim - 2)
    return special.gammaln(0.5 * dim) + lam * (np.log(2.0) - np.log(beta))


def kernel_multipliers(beta, dim, lmax, scaled=False):
    """Funk–Hecke multipliers a_l(β), l = 0..lmax, of the kernel e^{β⟨x,y⟩} on S^{dim-1}.

    ∫ e^{β⟨x,y⟩} Y_l(y) dσ(y) = a_l(β) Y_l(x) for every degree-l harmonic Y_l (docs/mathematics.md §3).

    Parameters
    ----------
    beta : float, of either sign
        Inverse temperature β of the kernel (dimensionless).
    dim : int >= 2
        Ambient dimension d; the sphere is S^{d-1}.
    lmax : int >= 0
        Highest degree l.
    scaled : bool
        Return a_l(β)·e^{−|β|} instead (finite for every β; use it for |β| >~ 700).

    Returns
    -------
    ndarray of shape (lmax + 1,)
        a_l(β) for l = 0..lmax: I_l(β) on S^1 (d = 2), the modified spherical Bessel functions i_l(β)
        on S^2 (d = 3). All entries are positive for β > 0 (Proposition 3.4), and for β < 0 they
        alternate in sign, a_l(β) = (−1)^l a_l(|β|); entries below the double-precision range
        underflow to 0.

    Raises
    ------
    ValueError
        ``beta`` not finite, ``dim`` < 2, ``lmax`` < 0, or a_l(β) overflowing double precision
        without ``scaled=True``.

    Notes
    -----
    Evaluated as Γ(d/2)(2/|β|)^λ ive(l+λ, |β|) with λ = (d-2)/2, i.e. from exponentially scaled
    modified Bessel functions, never by quadrature, times the parity (−1)^l for β < 0 (`parity`; for
    half-integer orders ive of a negative argument is not real, the parity of the multipliers is).
    At β = 0, a_0 = 1 and a_l = 0 for l >= 1.

    Examples
    --------
    On the circle the multipliers are the modified Bessel functions I_l(β):

    >>> import numpy as np
    >>> from scipy import special
    >>> import meanfield as mf
    >>> a = mf.kernel_multipliers(1.0, 2, 3)
    >>> print(np.round(a, 6).tolist())
    [1.266066, 0.565159, 0.135748, 0.022168]
    >>> bool(np.allclose(a, special.iv([0, 1, 2, 3], 1.0)))
    True
    >>> print(np.round(mf.kernel_multipliers(-1.0, 2, 3), 6).tolist())
    [1.266066, -0.565159, 0.135748, -0.022168]
    >>> a = mf.kernel_multipliers(500.0, 3, 2048, scaled=True)
    >>> a.shape, bool(np.all(np.isfinite(a))), round(float(a[0]), 6)
    ((2049,), True, 0.001)
    """
    beta = check_beta(beta)
    dim = check_dim(dim)
    lmax = check_int(lmax, "lmax", low=0)
    a = np.zeros(lmax + 1)
    if beta == 0.0:
        a[0] = 1.0
        return a
    if beta < 0:
        return parity(beta, np.arange(lmax + 1)) * kernel_multipliers(-beta, dim, lmax, scaled)
    a = _scaled_multipliers(beta, dim, lmax)
    if not scaled:
        with np.errstate(over="raise"):
            try:
                a = a * np.exp(beta)
            except FloatingPointError:
                raise InvalidInput(f"`beta`={beta:g} overflows a_l(β) in double precision; "
                                 "use kernel_multipliers(..., scaled=True) (a_l·e^-β).") from None
    return a


def _scaled_multipliers(beta, dim, lmax):
    """a_l(β)e^{−β}, l = 0..lmax, for β > 0: Γ(d/2)(2/β)^λ ive(l + λ, β), λ = (d − 2)/2, in logs, and
    by the series (`_log_scaled_multipliers_series`) where ive underflows."""
    lam = 0.5 * (dim - 2)
    orders = np.arange(lmax + 1) + lam
    with np.errstate(under="ignore", divide="ignore"):
        ive = special.ive(orders, beta)
        if not np.all(np.isfinite(ive)):
            raise InvalidInput(f"`beta`={beta:g} is beyond the range where the kernel multipliers a_l(β) can be "
                             f"evaluated (scipy.special.ive is finite up to about beta = 1e9).")
        log_a = _log_prefactor(beta, dim) + np.log(ive)
        low = ~(ive > 1e-280)
        if np.any(low):
            # high dimension or degree: I_ν(β) underflows (and Γ(d/2)(2/β)^λ overflows); sum the series
            log_a[low] = _log_scaled_multipliers_series(beta, dim, np.arange(lmax + 1)[low])
        return np.exp(log_a)

def _log_scaled_multipliers_series(beta, dim, ls):
    """log(a_l(β)e^{−β}) from the power series of I_ν (docs/mathematics.md §3):

        a_l(β) = Γ(d/2)/Γ(l + d/2) (β/2)^l Σ_{k>=0} (β²/4)^k / (k! (l + d/2)_k),

    all terms positive (no cancellation), summed in log space; used where I_{l+λ}(β) underflows."""
    ls = np.asarray(ls, dtype=float)
    nu = ls + 0.5 * dim
    q = 0.25 * beta * beta
    kmax = int(np.ceil(0.5 * beta + 12 * np.sqrt(0.5 * beta + 1) + 40))
    if kmax * ls.size > 2 ** 26:
        raise InvalidInput(f"`beta`={beta:g}: the power series of a_l(β) for the {ls.size} degrees where I_ν(β) "
                         "underflows would need more than 2^26 terms; use a smaller beta or degree.")
    k = np.arange(kmax + 1, dtype=float)[:, None]
    log_terms = special.xlogy(k, q) - special.gammaln(k + 1) - (special.gammaln(nu + k) - special.gammaln(nu))
    return (special.gammaln(0.5 * dim) - special.gammaln(nu) + ls * (np.log(beta) - np.log(2.0))
            + special.logsumexp(log_terms, axis=0) - beta)


@doc_params
def velocity_multipliers(beta, dim, lmax, scaled=False):
    """c_l = a_l(β)/β for l >= 1 and c_0 = 0: the multipliers of φ = (K*ρ)/β up to a constant.

    The constant mode does not move anything (∇_S kills it), so c_0 is set to 0. The ratios stay
    finite as β → 0: c_1 → 1/d and c_l → 0 for l >= 2 (docs/mathematics.md §3), which gives (4.1) at β = 0.
    For β < 0, c_l(β) = (−1)^{l+1} c_l(|β|): the odd ones stay positive.

    Parameters
    ----------
    {beta_dim}
    lmax : int >= 0
        Highest degree l.
    scaled : bool
        Return c_l·e^{−|β|}.

    Returns
    -------
    ndarray of shape (lmax + 1,)

    Raises
    ------
    ValueError
        As `kernel_multipliers`.

    Examples
    --------
    >>> import numpy as np
    >>> import meanfield as mf
    >>> mf.velocity_multipliers(0.0, 3, 3).tolist()                  # c_1 = 1/d at β = 0: (4.1)
    [0.0, 0.3333333333333333, 0.0, 0.0]
    >>> np.round(mf.velocity_multipliers(1.0, 2, 3), 6).tolist()     # I_l(1)/1 on S^1
    [0.0, 0.565159, 0.135748, 0.022168]
    """
    beta = check_beta(beta)
    dim = check_dim(dim)
    lmax = check_int(lmax, "lmax", low=0)
    c = np.zeros(lmax + 1)
    if lmax == 0:
        return c
    if beta == 0.0:
        c[1] = 1.0 / dim
        return c
    if beta < 0:
        return -parity(beta, np.arange(lmax + 1)) * velocity_multipliers(-beta, dim, lmax, scaled)
    if beta < 1e-3:
        # series a_l/β = Γ(d/2)/Γ(l+d/2) (β/2)^l / β · (1 + (β/2)^2/(l+d/2) + ...), exact to rounding
        l = np.arange(1, lmax + 1)
        nu = l + 0.5 * dim
        with np.errstate(under="ignore"):
            log_lead = special.gammaln(0.5 * dim) - special.gammaln(nu) + l * (np.log(beta) - np.log(2.0)) - np.log(beta)
            q = (beta / 2) ** 2
            series = 1 + q / nu + q ** 2 / (2 * nu * (nu + 1)) + q ** 3 / (6 * nu * (nu + 1) * (nu + 2))
            c[1:] = np.exp(log_lead) * series
        if scaled:
            c *= np.exp(-beta)
        return c
    a = kernel_multipliers(beta, dim, lmax, scaled=scaled)
    c[1:] = a[1:] / beta
    return c


def radial_multipliers(beta, dim, lmax, scaled=False):
    """∂_β a_l(β) = a_{l+1}(β) + l·a_l(β)/β, l = 0..lmax: the multipliers of the kernel ⟨x,y⟩e^{β⟨x,y⟩}.

    So ∫⟨x,y⟩e^{β⟨x,y⟩}ρ(y)dσ(y) = ∂_β(K*ρ)(x), the radial part ⟨x, A⟩ of the attention output times
    its partition function (docs/normalization.md). From I_ν' = I_{ν+1} + (ν/β)I_ν and the closed form of
    a_l (docs/mathematics.md §3), with l·a_l/β the velocity multipliers (finite at β = 0, where the only
    non-zero value is 1/d at l = 1). ``scaled``: times e^{−|β|}.
    """
    return kernel_multipliers(beta, dim, lmax + 1, scaled)[1:] + np.arange(lmax + 1) * velocity_multipliers(
        beta, dim, lmax, scaled)


def laplacian_eigenvalues(dim, lmax):
    """l(l + d - 2), l = 0..lmax: minus the Laplace–Beltrami eigenvalues on S^{dim-1} (docs/mathematics.md §3)."""
    dim = check_dim(dim)
    lmax = check_int(lmax, "lmax", low=0)
    l = np.arange(lmax + 1, dtype=float)
    return l * (l + dim - 2)


def harmonic_dimension(dim, l):
    """dim H_l on S^{dim-1}: (2l+d-2)(l+d-3)!/(l!(d-2)!) (docs/mathematics.md §3); 1 for l = 0."""
    dim = check_dim(dim)
    l = np.asarray(l)
    if dim == 2:
        return np.where(l == 0, 1, 2)
    out = (2 * l + dim - 2) * special.comb(l + dim - 3, l, exact=False) / (dim - 2)
    if np.all(out < 2.0 ** 53):
        return np.rint(out).astype(np.int64)
    return out      # beyond 2^53 the dimension is returned as a float (not exactly representable)


def linear_growth_rates(model, lmax):
    """Exact growth rates ς_l of degree-l perturbations of the uniform density (docs/mathematics.md §5).

    ς_l = v·l(l+d−2)·a_l/β for (USA), v·l(l+d−2)·a_l/(β a_0) for (SA), minus ν·l(l+d−2) with noise
    (v = +1 attractive, −1 repulsive). Returns an array of length lmax + 1 (ς_0 = 0). For β < 0,
    a_l/β = (−1)^{l+1} a_l(|β|)/|β|: the odd degrees grow (v = 1) and the even ones decay.

    Parameters
    ----------
    model : Model
        A zonal model (one head, Q^T K = I, V = v·I), with or without noise.
    lmax : int >= 0
        Highest degree.

    Returns
    -------
    ndarray of shape (lmax + 1,)
        ς_l in units of 1/t: a degree-l perturbation of amplitude ε grows as ε e^{ς_l t}.

    Raises
    ------
    UnsupportedModel
        A non-zonal model.

    Examples
    --------
    >>> import numpy as np
    >>> import meanfield as mf
    >>> np.round(mf.linear_growth_rates(mf.Model(beta=1.0, dim=2, normalized=False), 3), 6).tolist()
    [0.0, 0.565159, 0.542991, 0.199516]
    >>> np.round(mf.linear_growth_rates(mf.Model(beta=1.0, dim=2, normalized=False, noise=0.3), 3), 6).tolist()
    [0.0, 0.265159, -0.657009, -2.500484]
    """

    if not model.is_zonal:
        raise UnsupportedModel("linear_growth_rates needs a zonal model (Q^T K = I, V = v·I).")
    lmax = check_int(lmax, "lmax", low=0)
    lap = laplacian_eigenvalues(model.dim, lmax)
    c = velocity_multipliers(model.beta, model.dim, lmax, scaled=True)
    if model.normalized:
        c = c / kernel_multipliers(model.beta, model.dim, 0, scaled=True)[0]
    else:
        c = c * np.exp(abs(model.beta))
    return model.v * lap * c - model.noise * lap


def fastest_mode(model, lmax=None):
    """(k*, ς_{k*}): the degree whose perturbations of the uniform state grow fastest, and its rate.

    k* = argmax_{l >= 0} ς_l over the exact rates of `linear_growth_rates` (docs/mathematics.md §5;
    smallest l on ties), the number of incipient clusters on S^1 (metastability, Section 6.3 and
    Problem 1 of the paper).

    Parameters
    ----------
    model : Model
        A zonal model (one head, Q^T K = I, V = v·I), with or without noise.
    lmax : int >= 0, optional
        Highest degree compared; defaults to `minimum_degree` (beyond it a_l/a_0 < 1e-14).

    Returns
    -------
    k : int
        The degree k* (on S^1: the Fourier mode, the number of incipient clusters).
    rate : float
        ς_{k*}, in units of 1/t (per unit layer depth). A linearly stable uniform state (every
        ς_l <= 0: repulsive, or strong noise) gives (0, 0.0).

    Raises
    ------
    UnsupportedModel
        The model is not zonal.

    Examples
    --------
    >>> import meanfield as mf
    >>> k, rate = mf.fastest_mode(mf.Model(beta=9.0, dim=2))
    >>> k, round(rate, 6)
    (4, 0.704497)
    >>> mf.fastest_mode(mf.Model(beta=1.0, dim=2, V=-1.0))
    (0, 0.0)
    """
    if lmax is None:
        lmax = max(minimum_degree(model.beta, model.dim), 2)
    rates = linear_growth_rates(model, lmax)
    k = int(np.argmax(rates))
    return k, float(rates[k]) + 0.0          # ς_0 = v·0 may be −0.0


def minimum_degree(beta, dim, tol=1e-14):
    """Smallest L with |a_l(β)/a_0(β)| < tol for every l >= L (resolution needed for the kernel; the
    same for β and −β).

    Spectral solvers refuse a cut-off below this degree, because the kernel itself is not resolved.
    """
    beta = check_beta(beta)
    dim = check_dim(dim)
    tol = check_real(tol, "tol", low=0.0, low_open=True)
    if beta == 0.0:
        return 2
    L = 16
    while True:
        a = kernel_multipliers(beta, dim, L, scaled=True)
        ratio = np.abs(a / a[0])
        if not np.all(np.isfinite(ratio)):
            raise InvalidInput(f"`beta`={beta:g}: the kernel multipliers a_l(β) are not finite in dimension {dim}.")
        above = np.nonzero(ratio >= tol)[0]
        if above.size and above[-1] < L:
            return max(int(above[-1]) + 1, 2)
        L *= 2
