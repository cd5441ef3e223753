"""The zonal self-consistency equation on S^{d−1}, any d: Newton, the Jacobian and the linearised dynamics.

Zonal densities ρ = 1 + Σ_{l=1}^{L} u_l G_l(⟨x, e⟩) in the orthonormal basis of `meanfield.spaces.gegenbauer.GegenbauerBasis`,
with ``ratio`` = ν/ν_c. In units of ν_c the potential is Φ/ν_c = F(w), w = Σ_l q_l u_l G_l
(q_l = a_l/a_1), and (SC) reads ρ = e^{(v/ratio) F(w)}/Z (docs/mathematics.md §6; the derivations are
in the docstring of `solvers.stationary`).
"""
import numpy as np
from scipy import linalg

from meanfield.errors import SolverError

from meanfield.spaces.gegenbauer import GegenbauerBasis
from ..spectral import spectral_tail
from .anchors import critical_noise, multiplier_ratios

DEFAULT_RESOLUTION = 64
DEFAULT_SECTORS = 12          # sectors m = 0..12 (d >= 3) in the stability analysis


def gibbs_potential(wv, g):
    """F(w) and F'(w): w (USA, g = 0) or log(1 + g w)/g (SA), the potential Φ/ν_c as a function of
    w = Σ_l (a_l/a_1) ρ_l G_l; None where 1 + g w <= 0 (K*ρ must stay positive)."""
    if g == 0.0:
        return wv, np.ones_like(wv)
    z = 1.0 + g * wv
    if np.any(z <= 0):
        return None
    return np.log1p(g * wv) / g, 1.0 / z


class ZonalSelfConsistency:
    """(SC) for zonal densities ρ = 1 + Σ_{l=1}^{L} u_l G_l(⟨x, e⟩) on S^{d−1}, any d, at ratio = ν/ν_c.

    In units of ν_c the potential is Φ/ν_c = F(w), w = Σ_l q_l u_l G_l (q_l = a_l/a_1), so (SC) reads
    ρ = e^{(v/ratio) F(w)}/Z and its residual is R(u, ratio) = A[ρ] − u, A the projection of ``basis``
    (degrees 1..L of `meanfield.spaces.gegenbauer.GegenbauerBasis` on ``nodes`` Gauss–Gegenbauer nodes, default 2L + 8).
    """

    def __init__(self, beta, dim, lmax, normalized=False, v=1.0, nodes=None):
        self.beta, self.dim, self.lmax = beta, dim, lmax
        self.normalized, self.v = bool(normalized), float(v)
        self.basis = GegenbauerBasis(lmax, dim, nodes or 2 * lmax + 8, lowest=1)
        self.s, self.w = self.basis.nodes, self.basis.weights
        self.q, g = multiplier_ratios(beta, dim, lmax)
        self.g = g if normalized else 0.0
        self.nu_c = critical_noise(beta, dim, normalized)
        self._sectors = {0: self.basis}
        self._dbasis = None

    def sector(self, m):
        if m not in self._sectors:
            self._sectors[m] = self.basis.in_sector(m)
        return self._sectors[m]

    # -- the map and its Jacobian ---------------------------------------------------------------------
    def gibbs(self, u, ratio):
        """(ρ, h, F, F') on the nodes for ρ = e^h/Z, h = (v/ratio)F(w) − max; None if K*ρ <= 0 somewhere."""
        wv = self.basis.table @ (self.q * u)
        pot = gibbs_potential(wv, self.g)
        if pot is None:
            return None
        F, Fp = pot
        h = (self.v / ratio) * F
        h = h - h.max()
        e = np.exp(h)
        return e / (self.w @ e), h, F, Fp

    def residual(self, u, ratio):
        out = self.gibbs(u, ratio)
        if out is None:
            return np.full(u.shape, np.inf)
        return self.basis.projection @ out[0] - u

    def jacobian(self, u, ratio):
        """(R, ∂R/∂u, ∂R/∂ratio): δρ = ρ(δh − ∫ρ δh dσ), δh = (v/ratio)F'(w)δw,
        ∂h/∂ratio = −(v/ratio²)F(w)."""
        out = self.gibbs(u, ratio)
        if out is None:
            return None
        rho, _, F, Fp = out
        G, A, w = self.basis.table, self.basis.projection, self.w
        D = (self.v / ratio) * Fp[:, None] * G * self.q[None, :]
        RD = rho[:, None] * D
        Ju = A @ (RD - rho[:, None] * (w @ RD)[None, :]) - np.eye(u.size)
        dh = -(self.v / ratio ** 2) * F
        Jt = A @ (rho * (dh - w @ (rho * dh)))
        return A @ rho - u, Ju, Jt

    # -- derived quantities ---------------------------------------------------------------------------
    def order(self, u):
        """r = |∫ x ρ dσ| = |u_1|/√d (G_1 = √d s)."""
        return abs(float(u[0])) / np.sqrt(self.dim)

    def tail(self, u):
        return float(spectral_tail(np.concatenate([[1.0], np.asarray(u) ** 2])))

    def free_energy(self, u, ratio):
        """F[ρ] − F[1] = ν∫ρ log ρ dσ − v·(1/2β)Σ_{l>=1} a_l u_l² for (USA); NaN for (SA)."""
        if self.normalized:
            return float("nan")
        rho, h, _, _ = self.gibbs(u, ratio)
        e = np.exp(h)
        entropy = float(self.w @ (rho * h) - np.log(self.w @ e))
        return float(self.nu_c * (ratio * entropy - 0.5 * self.v * np.sum(self.q * u * u)))

    def density(self, u, s):
        return 1.0 + self.basis.values(s) @ u

    # -- linearised dynamics ---------------------------------------------------------------------------
    def _zonal_fields(self, u):
        """ρ̄, Φ̄/ν_c = F(w̄), F'(w̄), ΔΦ̄/ν_c and Δρ̄ on the nodes (ΔΦ̄ by Galerkin projection)."""
        B0 = self.basis
        rho = 1.0 + B0.table @ u
        F, Fp = gibbs_potential(B0.table @ (self.q * u), self.g)
        lap_phi = -B0.table @ (B0.laplacian * (B0.projection @ F))
        lap_rho = -B0.table @ (B0.laplacian * u)
        return rho, F, Fp, lap_phi, lap_rho

    def linearised(self, u, ratio, m, fields=None):
        """L/ν_c in sector m (Galerkin, in the basis of `sector`), where L δρ = −v div(δρ∇Φ̄ + ρ̄∇δΦ) + νΔδρ:

            L/ν_c = −(v/2)[M_F Λ − Λ M_F + M_{ΔΦ̄} − Λ M_{ρ̄F'} Q − M_ρ̄ Λ M_{F'} Q − M_{Δρ̄F'} Q] − ratio·Λ,

        with M_f = A diag(f) G the Galerkin matrix of multiplication by a zonal f, Λ = diag l(l+d−2),
        Q = diag(a_l/a_1), from div(f∇g) = ½[Δ(fg) + fΔg − gΔf] (δΦ = ν_c F'(w̄) Σ_l q_l δρ_l G_l).
        """
        rho, F, Fp, lap_phi, lap_rho = self._zonal_fields(u) if fields is None else fields
        B = self.sector(m)
        lam = B.laplacian
        Mf = (B.projection[None] * np.stack([F, lap_phi, rho * Fp, rho, Fp, lap_rho * Fp])[:, None, :]) @ B.table
        qm = self.q[B.degrees - 1]
        t1 = Mf[0] * lam[None, :] - lam[:, None] * Mf[0] + Mf[1]
        t2 = (-lam[:, None] * Mf[2] - Mf[3] @ (lam[:, None] * Mf[4]) - Mf[5]) * qm[None, :]
        return -0.5 * self.v * (t1 + t2) - ratio * np.diag(lam)

    def sectors(self, count=None):
        if self.dim == 2:
            return (0, 1)
        return tuple(range(0, min(self.lmax, DEFAULT_SECTORS if count is None else count) + 1))

    def spectrum(self, u, ratio, sectors=None):
        """{m: eigenvalues of L in sector m} (physical units), the rotation mode of sector 1 removed."""
        out = {}
        fields = self._zonal_fields(u)
        for m in self.sectors() if sectors is None else sectors:
            L = self.linearised(u, ratio, m, fields)
            if m == 1:
                if self._dbasis is None:
                    self._dbasis = np.sqrt(1 - self.s ** 2)[:, None] * self.basis.derivative_table
                g = self._dbasis @ u
                gam = self.sector(1).projection @ g
                if np.linalg.norm(gam) > 1e-13:
                    Q = linalg.null_space(gam[None, :] / np.linalg.norm(gam))
                    L = Q.T @ L @ Q
            out[m] = self.nu_c * np.linalg.eigvals(L)
        return out

    def leading_eigenvalue(self, u, ratio, sectors=None):
        return float(max(np.max(ev.real) for ev in self.spectrum(u, ratio, sectors).values()))

    # -- Newton ------------------------------------------------------------------------------------------
    def newton(self, u, ratio, tol=1e-12, maxiter=30):
        """Dense Newton on R(u, ratio) = 0 at fixed ratio; returns (u, residual) or raises SolverError."""
        res = np.inf
        for _ in range(maxiter):
            out = self.jacobian(u, ratio)
            if out is None:
                break
            R, Ju, _ = out
            res = float(np.max(np.abs(R)))
            if res <= tol:
                return u, res
            u = u - np.linalg.solve(Ju, R)
        raise SolverError(f"the zonal self-consistency equation did not converge at nu={ratio * self.nu_c:.10g}: "
                          f"residual max|R| = {res:.3g} > tol={tol:g} after {maxiter} Newton steps.")

    def at_order(self, u1, u, ratio, tol=1e-12, maxiter=30):
        """Solve R = 0 with u_1 = u1 fixed for (u_2..u_L, ratio) (the fold refinement); returns (u, ratio)."""
        u = np.array(u, dtype=float)
        u[0] = u1
        for _ in range(maxiter):
            out = self.jacobian(u, ratio)
            if out is None:
                break
            R, Ju, Jt = out
            if np.max(np.abs(R)) <= tol:
                return u, ratio
            step = np.linalg.solve(np.column_stack([Ju[:, 1:], Jt]), -R)
            u[1:] += step[:-1]
            ratio += step[-1]
        raise SolverError(f"the zonal self-consistency equation at fixed order r={u1 / np.sqrt(self.dim):.6g} "
                          "did not converge.")




__all__ = ["ZonalSelfConsistency", "gibbs_potential", "DEFAULT_RESOLUTION", "DEFAULT_SECTORS"]
