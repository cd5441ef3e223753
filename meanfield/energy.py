"""Interaction energy E_β (3.5) for discrete measures, harmonic spectra and solutions (SPEC L5)."""
import numpy as np

from ._checks import check_beta, check_dim, check_measure
from .kernels import kernel_multipliers, velocity_multipliers

_CHUNK = 2048


def _discrete_energy(beta, x, w, chunk=_CHUNK):
    """(1/2β) Σ_ij w_i w_j e^{β⟨x_i,x_j⟩}, in chunks (O(n·chunk) memory), with β = 0 → ½|Σ w_i x_i|²."""
    if beta == 0.0:
        m = w @ x
        return 0.5 * float(m @ m)
    # e^{β⟨x_i,x_j⟩} = e^β e^{β(⟨x_i,x_j⟩-1)}: the scaled sum stays in [e^{-2β}, 1].
    total = 0.0
    for start in range(0, x.shape[0], chunk):
        g = x[start:start + chunk] @ x.T
        np.subtract(g, 1.0, out=g)
        np.multiply(g, beta, out=g)
        np.exp(g, out=g)
        total += float(w[start:start + chunk] @ (g @ w))
    if beta < 700.0:
        return float(np.exp(beta) * total / (2 * beta))
    with np.errstate(over="ignore"):
        return float(np.exp(beta + np.log(total) - np.log(2 * beta)))


def energy_from_spectrum(beta, dim, power):
    """E_β from the degree powers of a σ-relative density (SPEC §4.4, L5).

    ``power[l] = Σ_j |ρ_{l,j}|²`` with the coefficients ρ_{l,j} of ρ in a basis orthonormal in L²(σ)
    (so power[0] = mass²). Then E_β = (1/(2β)) Σ_l a_l(β) power[l]; at β = 0 the library reports
    E_0 = power[1]/(2d) = ½|∫ x ρ dσ|², the limit of E_β − 1/(2β) (SPEC L5).
    Works on the last axis, so ``power`` may be (..., lmax + 1).
    """
    beta = check_beta(beta)
    dim = check_dim(dim)
    power = np.asarray(power, dtype=float)
    if power.ndim < 1 or power.shape[-1] < 1:
        raise ValueError(f"`power` must have a last axis over degrees 0..lmax, got shape {power.shape}.")
    if not np.all(np.isfinite(power)) or np.any(power < 0):
        raise ValueError("`power` must be finite and non-negative (sums of squared coefficients).")
    lmax = power.shape[-1] - 1
    if beta == 0.0:
        return power[..., 1] / (2 * dim) if lmax >= 1 else np.zeros(power.shape[:-1])
    a = kernel_multipliers(beta, dim, lmax, scaled=True)
    with np.errstate(over="ignore"):
        return np.exp(beta) * (power @ a) / (2 * beta)


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
    beta : float >= 0
    measure : (points, weights) or Solution
        A discrete measure Σ w_j δ_{x_j} (points (n, d) on the sphere, weights summing to 1), or a
        `Solution` with a single saved time (``sol[i]``) — or any `Solution`, in which case the
        energies at all saved times are returned.
    scaled : bool
        Return E_β·e^{-β} (finite for every β).

    Notes
    -----
    O(n²) work in chunks of 2048 rows, O(n) extra memory. At β = 0 the library reports
    E_0[μ] = ½‖∫x dμ‖², the limit of E_β − 1/(2β) (SPEC L5). The uniform measure gives a_0/(2β)
    (the minimum) and a Dirac mass e^β/(2β) (the maximum), Proposition 3.4.
    """
    beta = check_beta(beta)
    if hasattr(measure, "representation") and hasattr(measure, "data"):
        e = np.array([measure.representation.energy(beta, measure.data[i]) for i in range(len(measure.t))])
        if scaled:
            e = e * np.exp(-beta)
        return float(e[0]) if e.size == 1 else e
    x, w = check_measure(measure)
    e = _discrete_energy(beta, x, w)
    if scaled:
        return e * np.exp(-beta) if np.isfinite(e) else _discrete_energy_scaled(beta, x, w)
    return e


def _discrete_energy_scaled(beta, x, w, chunk=_CHUNK):
    total = 0.0
    for start in range(0, x.shape[0], chunk):
        g = np.exp(beta * (x[start:start + chunk] @ x.T - 1.0))
        total += float(w[start:start + chunk] @ (g @ w))
    return total / (2 * beta)


def uniform_energy(beta, dim):
    """E_β[σ] = a_0(β)/(2β), the minimum (Proposition 3.4); 0 at β = 0 (SPEC L5)."""
    beta = check_beta(beta)
    dim = check_dim(dim)
    if beta == 0.0:
        return 0.0
    return float(kernel_multipliers(beta, dim, 0)[0] / (2 * beta))


def dirac_energy(beta):
    """E_β[δ_x] = e^β/(2β), the maximum (Proposition 3.4); ½ at β = 0."""
    beta = check_beta(beta)
    if beta == 0.0:
        return 0.5
    return float(np.exp(beta) / (2 * beta))
