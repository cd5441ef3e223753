"""Interaction energy E_β (3.5) for discrete measures, harmonic spectra and solutions (docs/mathematics.md §4)."""
import numpy as np

from .._docs import doc_params
from ..validation import check_beta, check_dim, check_measure
from ..transformer.kernels import kernel_multipliers, velocity_multipliers
from ..sums.kernelsums import kernel_energy
from ..sums.spectralsums import spectral_energy
from ..errors import InvalidInput

_CHUNK = 1024      # block size of the double sums (benchmarks/bench_kernelsums.py: fastest of 1024/2048/4096)
LARGE_CLOUD = 4096


def discrete_energy(beta, x, w, chunk=_CHUNK, scaled=False):
    """(1/2β) Σ_ij w_i w_j e^{β⟨x_i,x_j⟩} (3.5), times e^{−|β|} if ``scaled``, with β = 0 → ½|Σ w_i x_i|².

    x (n, d) or (..., n, d) for a batch of measures (then an array of energies); the double sum is
    `meanfield.sums.kernelsums.kernel_energy` (blocks of ``chunk``², the fixed shift e^{β⟨x_i,x_j⟩−|β|} ∈
    [e^{−2|β|}, 1]; docs/mathematics.md §11.1). On S^1 and S^2, for more than LARGE_CLOUD =
    4096 points and 0 < β <= 100, it is Σ_l ã_l |μ̂_l|² from one adjoint nonuniform transform instead
    (`meanfield.sums.spectralsums.spectral_energy`, O(n), relative error below 1e-12; not for β < 0, where the
    sum can be as small as e^{−2|β|} and the transform's error is absolute).
    """
    if beta == 0.0:
        m = np.einsum("i,...id->...d", w, x)
        e = 0.5 * np.einsum("...d,...d->...", m, m)
    else:
        n, d = np.shape(x)[-2:]
        if n > LARGE_CLOUD and d in (2, 3) and 0.0 < beta <= 100.0:
            total = spectral_energy(beta, x, w)
        else:
            total = kernel_energy(beta, x, w, chunk=chunk)
        e = energy_from_scaled_sum(beta, total, 0.0 if scaled else abs(beta))
    return float(e) if np.ndim(e) == 0 else e


def energy_from_scaled_sum(beta, total, shift):
    """E = e^{shift}·total/(2β) for β ≠ 0, from a double sum ``total`` = Σ_ij w_i w_j e^{β⟨x_i,x_j⟩ − shift}
    (docs/mathematics.md §11.1); through logarithms where e^{shift} would overflow (inf beyond double range)."""
    if shift < 700.0:
        return np.exp(shift) * total / (2 * beta)
    with np.errstate(over="ignore", divide="ignore"):
        return np.sign(beta) * np.exp(shift + np.log(total) - np.log(2 * abs(beta)))


@doc_params
def energy_from_spectrum(beta, dim, power):
    """E_β from the degree powers of a σ-relative density (docs/mathematics.md §4).

    ``power[l] = Σ_j |ρ_{l,j}|²`` with the coefficients ρ_{l,j} of ρ in a basis orthonormal in L²(σ)
    (so power[0] = mass²). Then E_β = (1/(2β)) Σ_l a_l(β) power[l]; at β = 0 the library reports
    E_0 = power[1]/(2d) = ½|∫ x ρ dσ|², the limit of E_β − 1/(2β) (docs/mathematics.md §4).

    Parameters
    ----------
    {beta_dim}
    power : (..., lmax + 1) array
        Degree powers, finite and non-negative (it works on the last axis).

    Returns
    -------
    float or ndarray of shape (...)

    Raises
    ------
    ValueError
        ``power`` without a degree axis, negative or not finite.

    Examples
    --------
    >>> import meanfield as mf
    >>> round(float(mf.energy_from_spectrum(1.0, 2, [1.0, 0.0])), 6), round(mf.uniform_energy(1.0, 2), 6)
    (0.633033, 0.633033)
    >>> round(float(mf.energy_from_spectrum(1.0, 2, [1.0, 0.02])), 6)      # 1 + 0.2 cos θ
    0.638685
    """
    beta = check_beta(beta)
    dim = check_dim(dim)
    power = np.asarray(power, dtype=float)
    if power.ndim < 1 or power.shape[-1] < 1:
        raise InvalidInput(f"`power` must have a last axis over degrees 0..lmax, got shape {power.shape}.")
    if not np.all(np.isfinite(power)) or np.any(power < 0):
        raise InvalidInput("`power` must be finite and non-negative (sums of squared coefficients).")
    lmax = power.shape[-1] - 1
    if beta == 0.0:
        return power[..., 1] / (2 * dim) if lmax >= 1 else np.zeros(power.shape[:-1])
    a = kernel_multipliers(beta, dim, lmax, scaled=True)
    with np.errstate(over="ignore"):
        return np.exp(abs(beta)) * (power @ a) / (2 * beta)


def energy_rate_from_spectrum(beta, dim, cross):
    """dE_β/dt = (1/β) Σ_{l>=1} a_l(β) cross[l], with cross[l] = Σ_j ρ_{l,j} ∂_tρ_{l,j} (σ-orthonormal basis).

    This is the exact time derivative of `energy_from_spectrum` along a discrete flow; at β = 0 it
    is cross[1]/d. The l = 0 term is dropped (mass is conserved).
    """
    beta = check_beta(beta)
    cross = np.asarray(cross, dtype=float)
    c = velocity_multipliers(beta, dim, cross.shape[-1] - 1)
    return cross @ c


def interaction_energy(beta, measure, scaled=False):
    """Interaction energy E_β[μ] = (1/(2β)) ∬ e^{β⟨x,y⟩} dμ(x) dμ(y)  (3.5).

    Parameters
    ----------
    beta : float, of either sign
        Inverse temperature β (dimensionless).
    measure : (points, weights) or Solution
        A discrete measure Σ w_j δ_{x_j} (points (n, d) on the sphere, weights summing to 1), or a
        `Solution` with a single saved time (``sol[i]``) — or any `Solution`, in which case the
        energies at all saved times are returned.
    scaled : bool
        Return E_β·e^{−|β|} (finite for every β).

    Returns
    -------
    float or ndarray of shape (T,)
        E_β of the measure; of each saved time of a `Solution` with T > 1 saved times.

    Raises
    ------
    ValueError
        ``beta`` not finite; points off the sphere or weights negative or not summing to 1.

    Notes
    -----
    O(n²) work in blocks of 1024 × 1024 (`meanfield.sums.kernelsums`), O(n + 1024²) memory. At β = 0 the library reports
    E_0[μ] = ½‖∫x dμ‖², the limit of E_β − 1/(2β) (docs/mathematics.md §4). For β > 0 the uniform measure gives
    a_0/(2β) (the minimum) and a Dirac mass e^β/(2β) (the maximum), Proposition 3.4; for β < 0 a Dirac mass
    is still the maximum and a balanced antipodal pair ½(δ_x + δ_{−x}) gives the minimum cosh β/(2β)
    (`energy_bounds`, docs/mathematics.md §4).

    Examples
    --------
    A Dirac mass reaches the maximum e^β/(2β); two orthogonal points give (e^β·½ + ½)/(2β):

    >>> import numpy as np
    >>> import meanfield as mf
    >>> x = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    >>> round(mf.interaction_energy(2.0, (x[:1], np.ones(1))), 6), round(float(np.exp(2.0)) / 4, 6)
    (1.847264, 1.847264)
    >>> round(mf.interaction_energy(2.0, (x, np.array([0.5, 0.5]))), 6)
    1.048632
    """
    beta = check_beta(beta)
    if hasattr(measure, "representation") and hasattr(measure, "data"):
        e = np.array([measure.representation.energy(beta, measure.data[i]) for i in range(len(measure.t))])
        if scaled:
            e = e * np.exp(-abs(beta))
        return float(e[0]) if e.size == 1 else e
    x, w = check_measure(measure)
    return discrete_energy(beta, x, w, scaled=scaled)


@doc_params
def uniform_energy(beta, dim):
    """E_β[σ] = a_0(β)/(2β): the minimum for β > 0 (Proposition 3.4), neither extreme for β < 0 (a saddle;
    `energy_bounds`); 0 at β = 0 (docs/mathematics.md §4).

    Parameters
    ----------
    {beta_dim}

    Returns
    -------
    float

    Examples
    --------
    >>> from scipy import special
    >>> import meanfield as mf
    >>> round(mf.uniform_energy(1.0, 2), 6), round(float(special.iv(0, 1.0)) / 2, 6)     # I_0(β)/(2β)
    (0.633033, 0.633033)
    """
    beta = check_beta(beta)
    dim = check_dim(dim)
    if beta == 0.0:
        return 0.0
    return float(kernel_multipliers(beta, dim, 0)[0] / (2 * beta))


def dirac_energy(beta):
    """E_β[δ_x] = e^β/(2β), the maximum for β of either sign (Proposition 3.4; docs/mathematics.md §4); ½ at β = 0.

    Parameters
    ----------
    beta : float, of either sign
        Inverse temperature β.

    Returns
    -------
    float

    Examples
    --------
    >>> import meanfield as mf
    >>> round(mf.dirac_energy(1.0), 6), mf.dirac_energy(0.0)
    (1.359141, 0.5)
    """
    beta = check_beta(beta)
    if beta == 0.0:
        return 0.5
    return float(np.exp(beta) / (2 * beta))


def energy_bounds(beta, dim):
    """(min, max) of E_β over probability measures on S^{dim−1} (docs/mathematics.md §4).

    β > 0: [a_0(β)/(2β), e^β/(2β)], the uniform measure and a Dirac mass (Proposition 3.4).
    β < 0: [cosh β/(2β), e^β/(2β)]: ∬e^{β⟨x,y⟩}dμdμ >= e^β, with equality only at a Dirac mass, and
    <= cosh β, with equality only at a balanced antipodal pair ½(δ_x + δ_{−x}) (the odd part
    sinh(β⟨x,y⟩) has the multipliers a_l(β) < 0 of the odd degrees, and cosh(β⟨x,y⟩) <= cosh β).
    β = 0: [0, ½] for the reported E_0 = ½‖∫x dμ‖².
    """
    beta = check_beta(beta)
    dim = check_dim(dim)
    if beta == 0.0:
        return 0.0, 0.5
    low = uniform_energy(beta, dim) if beta > 0 else float(np.cosh(beta) / (2 * beta))
    return low, dirac_energy(beta)
