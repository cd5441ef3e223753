"""Stationary states as objects carrying their representation, and the conversions between their forms.

A `StationaryState` is a `meanfield.representations.State` at ν = ``model.noise``: `FourierSeries`
on S^1, `SphericalHarmonicSeries` on S^2, `GegenbauerSeries` (zonal) for d >= 4, with its order
parameter, free energy, residual and, for a zonal state, its stability (docs/noise.md).
"""
import numpy as np
from scipy import linalg

from meanfield.errors import InvalidInput, UnderResolved
from meanfield.transformer.kernels import velocity_multipliers
from meanfield.representations import State
from meanfield.representations.gegenbauer import GegenbauerSeries
from meanfield.spaces.gegenbauer import GegenbauerBasis
from meanfield.spaces.harmonics import SphericalHarmonicBasis
from ..spectral import spectral_tail
from .zonal import ZonalSelfConsistency
from meanfield.representations.fourier import FourierSeries
from meanfield.representations.harmonics import SphericalHarmonicSeries, alm_to_real


def _fourier_from_zonal(u, axis):
    """c_k of FourierSeries for ρ = 1 + Σ u_k √2 cos(k(θ − θ_0)): c_k = u_k e^{−ikθ_0}/√2."""
    theta0 = np.arctan2(axis[1], axis[0])
    k = np.arange(1, u.size + 1)
    return np.concatenate([[1.0 + 0j], u / np.sqrt(2) * np.exp(-1j * k * theta0)])


def _harmonics_from_zonal(u, axis, basis):
    """Real '4pi' coefficients of ρ = 1 + Σ u_l G_l(⟨x, e⟩) (degree L: exact Gauss–Legendre analysis
    on the grid of degree 2L + 3)."""

    L = u.size
    sh = SphericalHarmonicBasis(L, 2 * L + 3)
    vals = 1.0 + basis.values(np.clip(sh.points @ axis, -1, 1)) @ u
    return alm_to_real(sh.analysis(vals), L)


class StationaryState(State):
    """A stationary state of the noisy dynamics at ν = ``model.noise``, carrying its representation.

    Attributes
    ----------
    representation, data (= ``coefficients``): `FourierSeries` on S^1, `SphericalHarmonicSeries`
        on S^2, `GegenbauerSeries` (zonal, about e) for d >= 4.
    model : the `meanfield.Model` (ν is ``model.noise``).
    nu, order (r = |∫ x ρ dσ|), free_energy (F[ρ] − F[1], (USA)), residual (max-norm of (SC)).
    zonal : (axis e, u_0..u_L) when the state is zonal about e, else None.
    leading_eigenvalue, stable : from the linearised dynamics (zonal states; computed on demand).
    """

    def __init__(self, representation, data, model, *, order, free_energy, residual, zonal=None, problem=None):
        State.__init__(self, representation, data, t=None, model=model)
        self.nu = float(model.noise)
        self.order = float(order)
        self.free_energy = float(free_energy)
        self.residual = float(residual)
        self.zonal = zonal
        self._problem = problem
        self._leading = None

    @property
    def coefficients(self):
        return self.data

    @property
    def mean(self):
        """m = ∫ x ρ dσ (so ``order`` = |m|): (Re c_1, −Im c_1) on S^1, (C_11, S_11, C_10)/√3 on S^2."""
        if self.zonal is not None:
            axis, u = self.zonal
            return axis * u[1] / np.sqrt(self.model.dim)
        c = np.asarray(self.data)
        if self.model.dim == 2:
            return np.array([c[1].real, -c[1].imag])
        return np.array([c[0, 1, 1], c[1, 1, 1], c[0, 1, 0]]) / np.sqrt(3)

    @property
    def axis(self):
        """The unit vector m/|m| (the cluster's direction); the symmetry axis of a zonal state."""
        if self.zonal is not None:
            return self.zonal[0]
        m = self.mean
        return m / np.linalg.norm(m)

    @property
    def leading_eigenvalue(self):
        """Largest real part of the spectrum of the linearised McKean–Vlasov operator (rotations removed)."""
        if self._leading is None:
            problem, u = self._zonal_problem()
            self._leading = problem.leading_eigenvalue(u, self.nu / problem.nu_c)
        return self._leading

    @property
    def stable(self):
        return self.leading_eigenvalue < 0

    def linearised_spectrum(self, sectors=None):
        """{sector m: eigenvalues} of the linearised McKean–Vlasov operator (a zonal state; docstring of
        `solvers.stationary`)."""
        problem, u = self._zonal_problem()
        return problem.spectrum(u, self.nu / problem.nu_c, sectors)

    def _zonal_problem(self):
        if self.zonal is None:
            self.zonal = zonal_part(self)
        axis, u = self.zonal
        if self._problem is None or self._problem.lmax != u.size - 1:
            m = self.model
            self._problem = ZonalSelfConsistency(m.beta, m.dim, u.size - 1, m.normalized, m.v)
        return self._problem, u[1:]

    def __repr__(self):
        return (f"StationaryState({self.model!r}, nu={self.nu:.6g}, order={self.order:.6g}, "
                f"residual={self.residual:.1e})")


def zonal_part(state, tol=1e-7):
    """(axis, u_0..u_L) of a state that is zonal about its mean direction (else ValueError)."""
    rep = state.representation
    L = getattr(rep, "modes", getattr(rep, "lmax", None))
    d = state.model.dim
    mean = state.mean
    r = float(np.linalg.norm(mean))
    if r < 1e-12:
        raise InvalidInput("the state has no mean direction (order parameter 0), so no axis to linearise about; "
                         "its stability is that of the uniform state.")
    e = mean / r
    basis = GegenbauerBasis(L, d, 2 * L + 8)
    s = basis.nodes
    perp = linalg.null_space(e[None, :])
    nring = 2 if d == 2 else 2 * L + 2
    if d == 2:
        xi = np.stack([perp[:, 0], -perp[:, 0]])
    else:
        ang = 2 * np.pi * np.arange(nring) / nring
        xi = np.cos(ang)[:, None] * perp[:, 0] + np.sin(ang)[:, None] * perp[:, 1]
    x = s[:, None, None] * e + np.sqrt(1 - s * s)[:, None, None] * xi[None]
    vals = state.density(x)
    ring = vals.mean(axis=1)
    spread = float(np.max(np.abs(vals - ring[:, None])))
    if spread > tol * float(np.max(np.abs(vals))):
        raise InvalidInput(f"the state is not zonal about its mean direction (deviation {spread:.2e}); "
                         "the stability analysis needs a zonal state.")
    return e, basis.analysis(ring)



def _check_tail(power, tail_tol, L):
    tail = float(spectral_tail(power))
    if not tail <= tail_tol:
        raise UnderResolved(f"the stationary state is under-resolved: spectral tail {tail:.3g} > tail_tol={tail_tol:g} "
                            f"with resolution {L}; increase `resolution`.", tail=tail, tol=tail_tol)


def zonal_state(problem, u, ratio, model, e, tail_tol):
    """The `StationaryState` of a solution u of the zonal problem at ``ratio`` = ν/ν_c, about ``e``
    (`UnderResolved` if its spectral tail exceeds ``tail_tol``)."""
    _check_tail(np.concatenate([[1.0], u ** 2]), tail_tol, problem.lmax)
    res = float(np.max(np.abs(problem.residual(u, ratio))))
    coeffs = np.concatenate([[1.0], u])
    d = problem.dim
    if d == 2:
        rep, data = FourierSeries(problem.lmax), _fourier_from_zonal(u, e)
    elif d == 3:
        rep, data = SphericalHarmonicSeries(problem.lmax), _harmonics_from_zonal(u, e, problem.basis)
    else:
        rep, data = GegenbauerSeries(problem.lmax, d, e), coeffs
    return StationaryState(rep, data, model, order=problem.order(u), free_energy=problem.free_energy(u, ratio),
                           residual=res, zonal=(e, coeffs), problem=problem)


def full_state(problem, y, model, tail_tol):
    """The `StationaryState` of a solution y of `solvers.stationary.self_consistency.FullSelfConsistency`."""
    c = problem.unpack(y)
    beta, d = model.beta, model.dim
    if d == 2:
        rep = FourierSeries(problem.resolution)
        order = float(abs(c[1]))
    else:
        rep = SphericalHarmonicSeries(problem.resolution)
        order = float(np.sqrt(c[0, 1, 0] ** 2 + c[0, 1, 1] ** 2 + c[1, 1, 1] ** 2) / np.sqrt(3))
    power = rep.power(c)
    L = power.size - 1
    _check_tail(power, tail_tol, L)
    if model.normalized:
        free = float("nan")
    else:
        cl = velocity_multipliers(beta, d, L)
        free = model.noise * problem.entropy(c) - 0.5 * model.v * float(np.sum(cl[1:] * power[1:]))
    res = float(np.max(np.abs(problem.residual(y))))
    return StationaryState(rep, c, model, order=order, free_energy=free, residual=res)


__all__ = ["StationaryState", "zonal_part", "zonal_state", "full_state"]
