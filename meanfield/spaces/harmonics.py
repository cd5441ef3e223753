"""The real spherical harmonics Y_lm of L²(S², σ): the basis of every spectral state on S² (the
harmonics representation, its solver, the densities built from coefficients and the moments of the
diagnostics), kept on the floor of the function spaces so that all of them can read it
(docs/mathematics.md §3; docs/conventions.md).
"""
import numpy as np
from scipy.special import assoc_legendre_p, gammaln


def real_sh(l, m, x):
    """Real spherical harmonic of degree l, order m on S^2, orthonormal in L²(σ) ('4π' normalisation).

    m > 0: sqrt(2)·N P_l^m(cos θ) cos(mφ); m < 0: sqrt(2)·N P_l^|m|(cos θ) sin(|m|φ); m = 0: N P_l.
    No Condon–Shortley phase (pyshtools csphase=1 convention). N = sqrt((2l+1)(l−|m|)!/(l+|m|)!), so
    that ∫ Y_lm Y_l'm' dσ = δ_ll' δ_mm' for the uniform probability σ (docs/mathematics.md §3).

    Parameters
    ----------
    l : int
        The degree, l >= 0.
    m : int
        The order, −l <= m <= l.
    x : array (..., 3)
        Points of S^2.

    Returns
    -------
    array (...)
        Y_lm at the points.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.spaces.harmonics import real_sh
    >>> from meanfield.spaces.quadrature import gauss_legendre_grid
    >>> _, _, x, w = gauss_legendre_grid(4, 8)          # exact for degree <= 7
    >>> y21, y2m1 = real_sh(2, 1, x), real_sh(2, -1, x)
    >>> [abs(round(float(np.sum(w * f)), 12)) for f in (y2m1 * y2m1, y21 * y2m1, y21)]   # orthonormal
    [1.0, 0.0, 0.0]
    """
    z = np.clip(x[..., 2], -1.0, 1.0)
    phi = np.arctan2(x[..., 1], x[..., 0])
    am = abs(m)
    p = np.asarray(assoc_legendre_p(l, am, z, norm=False))[0]
    # remove the Condon-Shortley phase (-1)^m that scipy includes
    p = p * (-1.0) ** am
    norm = np.sqrt((2 * l + 1) * np.exp(gammaln(l - am + 1) - gammaln(l + am + 1)))
    if m == 0:
        return norm * p
    trig = np.cos(am * phi) if m > 0 else np.sin(am * phi)
    return np.sqrt(2.0) * norm * p * trig
