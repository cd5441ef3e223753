"""One stationary state: the self-consistency equation ρ = e^{vΦ[ρ]/ν}/Z solved by Newton–Krylov.

Zonal states (any d) solve `solvers.stationary.zonal.ZonalSelfConsistency`; full states on S^1 and
S^2 solve `FullSelfConsistency`, the same map in the Fourier or spherical-harmonic basis of
`meanfield.spaces` (docs/mathematics.md §6.4; docs/noise.md).
"""
import numpy as np
from scipy import linalg, optimize

from meanfield.errors import InvalidInput, SolverError, UnsupportedModel
from meanfield.transformer.model import Model
from meanfield.representations.gegenbauer import axis_vector
from meanfield.validation import check_int, check_points
from meanfield.spaces.fourier import FourierBasis
from meanfield.spaces.harmonics import SphericalHarmonicBasis
from .anchors import critical_noise, multiplier_ratios
from .state import StationaryState, full_state, zonal_state
from .zonal import DEFAULT_RESOLUTION, ZonalSelfConsistency, gibbs_potential
from meanfield.representations.harmonics import alm_to_real, real_to_alm


def _newton_krylov(residual, y0, tol, maxiter, what):
    r0 = residual(y0)
    if np.all(np.isfinite(r0)) and np.max(np.abs(r0)) <= tol:
        return y0                                      # the guess already solves it
    try:
        with np.errstate(invalid="ignore"):            # scipy's step test divides by x_rtol = inf
            y = optimize.newton_krylov(residual, y0, f_tol=tol, maxiter=maxiter, method="lgmres")
    except optimize.NoConvergence as exc:
        y = np.asarray(exc.args[0]) if exc.args else y0
        r = residual(y)
        res = float(np.max(np.abs(r))) if np.all(np.isfinite(r)) else float("inf")
        raise SolverError(f"Newton–Krylov did not converge for {what}: residual max|R| = {res:.3g} > tol={tol:g} "
                          f"after {maxiter} iterations; try another `guess` (e.g. a state of `branch`) or a "
                          "larger `resolution`.") from None
    except (ValueError, FloatingPointError) as exc:
        raise SolverError(f"Newton–Krylov failed for {what} ({exc}); try another `guess`.") from None
    return y




class FullSelfConsistency:
    """(SC) on S^1 or S^2 at ratio = ν/ν_c for the coefficients of `FourierSeries` (c_0..c_K) or of
    `SphericalHarmonicSeries` (real '4pi' clm, degree <= L), mass 1.

    With q_l = a_l/a_1 and w = Σ q_l ρ_lm Y_lm, Φ/ν_c = F(w) (`solvers.stationary.zonal.gibbs_potential`)
    and the residual is R(y) = P[e^{(v/ratio) F(w)}/Z] − y, P the projection on the basis. The fields
    live on the grid of a `meanfield.spaces` basis exact for degree 4·resolution + 3 (e^{h} is not a
    polynomial: the finer grid keeps its aliasing small). The unknowns y are the real parameters of
    the coefficients of degree >= 1: (Re c_k, Im c_k) on S^1, the clm with l >= 1 on S^2.
    """

    def __init__(self, beta, dim, resolution, normalized, v, ratio):
        self.dim, self.resolution, self.ratio, self.v = dim, resolution, ratio, v
        q, g = multiplier_ratios(beta, dim, resolution)
        self.g = g if normalized else 0.0
        degree = 4 * resolution + 3
        self.basis = FourierBasis(resolution, degree) if dim == 2 else SphericalHarmonicBasis(resolution, degree)
        self.q = np.concatenate([[0.0], q])[self.basis.degrees]
        if dim == 3:
            l = np.arange(resolution + 1)
            mask = np.zeros((2, resolution + 1, resolution + 1), dtype=bool)
            mask[0] = (l[:, None] >= l[None, :]) & (l[:, None] >= 1)
            mask[1] = (l[:, None] >= l[None, :]) & (l[None, :] >= 1)
            self.mask = mask

    # -- the real unknowns, the representation's data and the basis coefficients ------------------------
    def unpack(self, y):
        if self.dim == 2:
            K = self.resolution
            return np.concatenate([[1.0 + 0j], y[:K] + 1j * y[K:]])
        clm = np.zeros(self.mask.shape)
        clm[self.mask] = y
        clm[0, 0, 0] = 1.0
        return clm

    def pack(self, data):
        if self.dim == 2:
            return np.concatenate([data[1:].real, data[1:].imag])
        return data[self.mask]

    def _to_basis(self, data):
        if self.dim == 2:
            return data

        return real_to_alm(data)

    def _from_basis(self, coefficients):
        if self.dim == 2:
            return coefficients

        return alm_to_real(coefficients, self.resolution)

    # -- the map ------------------------------------------------------------------------------------------
    def gibbs(self, data):
        """(ρ, h) on the grid, ρ = e^h/Z, h = (v/ratio)F(w) − max; None where K*ρ <= 0."""
        pot = gibbs_potential(self.basis.synthesis(self.q * self._to_basis(data)), self.g)
        if pot is None:
            return None
        h = (self.v / self.ratio) * pot[0]
        h -= h.max()
        e = np.exp(h)
        return e / np.sum(self.basis.weights * e), h

    def residual(self, y):
        out = self.gibbs(self.unpack(y))
        if out is None:
            return np.full(y.shape, np.inf)
        return self.pack(self._from_basis(self.basis.analysis(out[0]))) - y

    def project(self, f):
        """The data of the projection of a density callable ``f`` on the basis, mass 1."""
        data = self._from_basis(self.basis.analysis(np.asarray(f(self.basis.points), dtype=float)))
        return data / (data[0].real if self.dim == 2 else data[0, 0, 0])

    def entropy(self, data):
        """∫ ρ log ρ dσ of the Gibbs density e^{(v/ratio)F(w)}/Z of ``data``."""
        rho, h = self.gibbs(data)
        w = self.basis.weights
        return float(np.sum(w * rho * h) - np.log(np.sum(w * np.exp(h))))


def _check_model(model):
    if not isinstance(model, Model):
        raise InvalidInput(f"`model` must be a meanfield.Model, got {type(model).__name__}.")
    if not model.is_zonal:
        raise UnsupportedModel("stationary states need a zonal model (one head, Q^T K = I, V = v·I).")
    if not model.noise > 0:
        raise InvalidInput(f"`model.noise` must be > 0 for a stationary state of the noisy dynamics, got {model.noise}.")
    if model.v == 0:
        raise InvalidInput("`model.V` must be nonzero (V = v·I with v != 0).")


def self_consistent(model, resolution=None, guess=None, *, zonal=None, axis=None, tol=1e-11, maxiter=200,
                    tail_tol=1e-9):
    """One stationary state at ν = ``model.noise``: a solution of ρ = e^{vΦ[ρ]/ν}/Z (docstring of
    `solvers.stationary`).

    Parameters
    ----------
    model : Model
        A zonal `meanfield.Model` with noise ν > 0; (USA) (the Gibbs form of the free energy) or
        (SA) (its zonal stationary states).
    resolution : int >= 4, optional
        The cut-off: Fourier modes K on S^1, lmax on S^2, the degree L of the zonal series otherwise
        (default 64).
    guess : None, callable, StationaryState or array
        None (the image e^{vΦ[δ_e]/ν}/Z of the Dirac mass at ``axis`` under the map (SC): a cluster),
        a density callable f(x) (need not be normalised), a `StationaryState`, or coefficients of the
        representation (FourierSeries c_0..c_K; SH (2, L+1, L+1); zonal u_0..u_L).
    zonal : bool, optional
        Solve among densities f(⟨x, e⟩) about ``axis``, in the Gegenbauer basis. Default: True for
        d >= 4, False on S^1 and S^2 (full Fourier / spherical-harmonic solve).
    axis : (d,) array, optional
        The axis e of a zonal state and of the default guess (default e_d).
    tol : float > 0
        Max-norm tolerance of the residual.
    maxiter : int
        Newton iterations.
    tail_tol : float > 0
        The solution must be resolved: the relative L²(σ) norm of its top third of degrees
        (`solvers.spectral.spectral_tail`) must stay below it, else `UnderResolved`.

    Returns
    -------
    StationaryState
        The state (a `meanfield.representations.State` with ``nu``, ``order``, ``free_energy``,
        ``stable``, ``leading_eigenvalue``, ``residual``).

    Raises
    ------
    meanfield.SolverError
        Newton–Krylov does not converge (the message gives the residual); `UnderResolved` when the
        state is not resolved.
    UnsupportedModel
        A non-zonal model.
    ValueError
        No noise or v = 0, ``zonal=False`` in d >= 4, a bad ``resolution`` or ``axis``.

    Examples
    --------
    Below the critical noise the clustered state is a stable solution of (SC):

    >>> import meanfield as mf
    >>> from solvers import stationary
    >>> nu = 0.8 * stationary.critical_noise(1.0, 2)
    >>> state = stationary.self_consistent(mf.Model(beta=1.0, dim=2, normalized=False, noise=nu), 32)
    >>> round(state.order, 4), state.stable, state.residual < 1e-10, round(float(state.mass), 12)
    (0.6822, True, True, 1.0)
    """
    _check_model(model)
    d, nu = model.dim, model.noise
    L = DEFAULT_RESOLUTION if resolution is None else check_int(resolution, "resolution", low=4)
    zonal = (d >= 4) if zonal is None else bool(zonal)
    if d >= 4 and not zonal:
        raise InvalidInput(f"`zonal` must be True for dim={d}: non-zonal states are solved on S^1 and S^2 only.")
    e = axis_vector(None, d) if axis is None else check_points(np.asarray(axis, dtype=float), "axis", dim=d,
                                                                normalize=True)
    ratio = nu / critical_noise(model.beta, d, model.normalized)
    if guess is None:
        guess = _dirac_image(model, e)
    what = f"the self-consistency equation at nu={nu:.8g} (beta={model.beta:g}, dim={d}, {model.kind})"
    if zonal:
        problem = ZonalSelfConsistency(model.beta, d, L, model.normalized, model.v)
        u0 = _zonal_guess(problem, guess, e)
        u = _newton_krylov(lambda y: problem.residual(y, ratio), u0, tol, maxiter, what)
        return zonal_state(problem, u, ratio, model, e, tail_tol)
    problem = FullSelfConsistency(model.beta, d, L, model.normalized, model.v, ratio)
    y = _newton_krylov(problem.residual, problem.pack(_full_guess(problem, guess, d, L)), tol, maxiter, what)
    return full_state(problem, y, model, tail_tol)


def _dirac_image(model, e):
    """The density e^{vΦ[δ_e]/ν}/Z: one step of (SC) from the Dirac mass at e (Φ[δ_e] = e^{β⟨x,e⟩}/β for
    (USA), ⟨x, e⟩ for (SA)); the default guess, a cluster of the width the noise allows."""
    beta, nu, v = model.beta, model.noise, model.v

    def rho(x):
        s = np.asarray(x, dtype=float) @ e
        if model.normalized or beta == 0.0:
            h = v * s / nu
        else:
            h = v * np.sign(beta) * np.exp(beta * s - np.log(abs(beta) * nu))     # v e^{βs}/(βν), either sign
        return np.exp(h - np.max(h))
    return rho


def _zonal_guess(problem, guess, e):
    L = problem.lmax
    if isinstance(guess, StationaryState):
        if guess.zonal is not None or guess.model.dim >= 4:
            u = np.asarray(guess.zonal[1] if guess.zonal is not None else guess.data, dtype=float)
            out = np.zeros(L)
            out[:min(L, u.size - 1)] = u[1:L + 1]
            return out
        guess = guess.density
    if not callable(guess):
        u = np.asarray(guess, dtype=float)
        if u.ndim != 1 or u.size < 2:
            raise InvalidInput(f"`guess` as zonal coefficients must be (u_0, ..., u_L), got shape {u.shape}.")
        out = np.zeros(L)
        out[:min(L, u.size - 1)] = u[1:L + 1] / u[0]
        return out
    perp = linalg.null_space(e[None, :])[:, 0]
    s = problem.s
    vals = np.asarray(guess(s[:, None] * e + np.sqrt(1 - s * s)[:, None] * perp), dtype=float)
    if vals.shape != s.shape or not np.all(np.isfinite(vals)):
        raise InvalidInput("`guess` must return one finite value per point.")
    return problem.basis.analysis(vals / (problem.w @ vals))


def _full_guess(problem, guess, d, L):
    if isinstance(guess, StationaryState):
        if guess.model.dim != d:
            raise InvalidInput(f"`guess` is a state on S^{guess.model.dim - 1}, not on S^{d - 1}.")
        guess = guess.density
    if callable(guess):
        return problem.project(guess)
    c = np.asarray(guess)
    if d == 2:
        if c.ndim != 1 or c.size < 2:
            raise InvalidInput(f"`guess` as Fourier coefficients must be c_0..c_K, got shape {c.shape}.")
        out = np.zeros(L + 1, dtype=complex)
        out[:min(c.size, L + 1)] = c[:L + 1]
        return out / out[0].real
    if c.ndim != 3 or c.shape[0] != 2 or c.shape[1] != c.shape[2]:
        raise InvalidInput(f"`guess` as spherical-harmonic coefficients must have shape (2, L+1, L+1), got {c.shape}.")
    out = np.zeros((2, L + 1, L + 1))
    k = min(c.shape[1], L + 1)
    out[:, :k, :k] = c[:, :k, :k]
    return out / out[0, 0, 0]


__all__ = ["self_consistent", "FullSelfConsistency"]
