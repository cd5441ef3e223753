"""Stationary states of the noisy mean-field equation, their branches and the phase transition.

With noise ν > 0 the mean-field equation (docs/mathematics.md §6.1; Geshkovski, Letrouit,
Polyanskiy, Rigollet, *A mathematical perspective on Transformers* (2023), (3.4) with the
Laplacian of their Problem 7) reads

    ∂_t ρ + div_S(ρ v∇Φ[ρ]) = ν Δ_S ρ,    Φ = (K*ρ)/β  (USA, (3.10)),   Φ = log(K*ρ)/β  (SA, (3.7)),

with (K*ρ)(x) = ∫ e^{β⟨x,y⟩} ρ(y) dσ(y) and V = v·I. A density with zero flux, ρ v∇Φ = ν∇ρ, is
stationary; it solves the **self-consistency equation**

    ρ = e^{vΦ[ρ]/ν} / Z,    Z = ∫ e^{vΦ[ρ]/ν} dσ.                                         (SC)

For (USA), (SC) is the Euler–Lagrange equation (Gibbs form) of the free energy

    F[ρ] = ν ∫ ρ log ρ dσ − v·(1/2β) ∬ e^{β⟨x,y⟩} ρ(x)ρ(y) dσ dσ   (ν × entropy − v·E_β, (3.5)),

and every stationary state solves it. For (SA) (no free energy) every *zonal* stationary state
solves (SC) with Φ = log(K*ρ)/β: the flux of a zonal state is a meridional field with zero
divergence, hence zero (docs/mathematics.md §6.4). The module solves (SC) by Newton's method and
follows its solutions in ν; docs/noise.md shows the results.

Exact anchors (degree-l multipliers a_l(β) of `meanfield.kernel_multipliers`):

* **Critical noise.** Linearising (SC) at ρ = 1, the degree-l part is multiplied by
  v·a_l/(βν) (USA) or v·a_l/(βνa_0) (SA); degree 1 becomes unstable first, at
  ν_c = a_1/β (USA), a_1/(β a_0) (SA) — the zero of the exact linear rate of degree 1
  (docs/mathematics.md §5).
* **Landau expansion.** Write ρ = 1 + ε s + ρ_2 + …, s = ⟨x, e⟩, so that the order parameter is
  r = |∫ x ρ dσ| = ε/d. Expanding (SC) to third order in ε, with q = a_2/a_1, g = a_1/a_0,
  α = 2(d−1)/(d(d+2)) (= d∫s·s(s²−1/d)dσ) and γ = 3/(d+2) (= d∫s⁴dσ), gives ν_c/ν = 1 − C ε² + O(ε⁴):

      (USA)  C = α q / (2(1−q)) + γ/6 − 1/(2d) = [(d−1) q/(1−q) − 1] / (d(d+2)),
      (SA)   C = α q (1−g)² / (2(1−q)) − α g/2 + γ (1 + 2g²)/6 − 1/(2d),

  so that along the branch ν = ν_c (1 + c r² + O(r⁴)) with the Landau coefficient c = d² C.
  c < 0: supercritical (continuous transition, clustered states for ν < ν_c, r² ∝ ν_c − ν);
  c > 0: subcritical (discontinuous: clustered states coexist with the stable uniform state up
  to the fold ν_fold > ν_c). For (USA) c changes sign where q = a_2/a_1 = I_{d/2+1}(β)/I_{d/2}(β)
  equals 1/d: β_* = 2.4469… (d = 2), 1.8162… (d = 3) (`beta_star`).
* **Stability.** The eigenvalues of the McKean–Vlasov equation linearised at a zonal state ρ̄,

      L δρ = −v div(δρ ∇Φ̄ + ρ̄ ∇δΦ) + ν Δδρ,    div(f∇g) = ½[Δ(fg) + fΔg − gΔf],

  computed in the same spectral basis, sector by sector: a zonal state commutes with the
  rotations about its axis, so the perturbations g(s)·Y_m(ξ) (x = s e + (1−s²)^{1/2} ξ, Y_m a
  degree-m harmonic on S^{d−2}) form invariant sectors m = 0, 1, 2, … (on S^1: cos and sin). The
  neutral rotation mode √(1−s²)ρ̄'(s) of sector 1 is factored out; the largest real part of
  what is left is ``leading_eigenvalue`` (< 0: linearly stable).

Numerics. Zonal states use the orthonormal basis of sector m,
G_l^m(s) ∝ (1−s²)^{m/2} P_{l−m}^{(α_m, α_m)}(s), α_m = (d−3)/2 + m (Gegenbauer/Jacobi; √2 cos lθ
on S^1, √(2l+1) P_l on S^2), with Gauss–Gegenbauer quadrature in s (`meanfield.quadrature`).
Non-zonal states use the FFT on S^1 and ducc0 spherical-harmonic transforms on S^2. Single
states: `scipy.optimize.newton_krylov`. Branches: pseudo-arclength continuation with dense
Newton correctors and the exact Jacobian of (SC), started along the Landau direction at ν_c,
refined at folds by maximising ν over the order parameter.
"""
from collections import namedtuple

import numpy as np
from scipy import linalg, optimize
from scipy.special import eval_jacobi

from meanfield.validation import check_beta, check_dim, check_int, check_points, check_real
from meanfield.errors import SolverError, UnderResolved, UnsupportedModel
from meanfield.kernels import kernel_multipliers, velocity_multipliers
from meanfield.model import Model
from meanfield.quadrature import gauss_gegenbauer
from meanfield.representations import State
from meanfield.representations.gegenbauer import GegenbauerSeries, axis_vector

from .spectral import spectral_tail

DEFAULT_RESOLUTION = 64
DEFAULT_SECTORS = 12          # sectors m = 0..12 (d >= 3) in the stability analysis
Fold = namedtuple("Fold", ["nu", "order"])


# -- exact anchors ------------------------------------------------------------------------------------
def _ratios(beta, dim, lmax):
    """(q_l = a_l/a_1 for l = 1..lmax, g = a_1/a_0), from scaled multipliers (finite for every β >= 0)."""
    c = velocity_multipliers(beta, dim, max(lmax, 2), scaled=True)          # a_l e^{-β}/β, finite at β = 0
    a0 = kernel_multipliers(beta, dim, 0, scaled=True)[0]
    return c[1:lmax + 1] / c[1], beta * c[1] / a0


def critical_noise(beta, dim, normalized=False):
    """ν_c, the noise below which the uniform density loses stability (degree 1).

    ν_c = a_1(β)/β for (USA) and a_1(β)/(β a_0(β)) for (SA): the zero of the exact linear rate of
    degree 1 (docs/mathematics.md §5). At β = 0 both equal 1/d.
    """
    beta = check_beta(beta)
    dim = check_dim(dim)
    if normalized:
        return float(velocity_multipliers(beta, dim, 1, scaled=True)[1] / kernel_multipliers(beta, dim, 0, scaled=True)[0])
    return float(velocity_multipliers(beta, dim, 1)[1])


def landau_coefficient(beta, dim, normalized=False):
    """The Landau coefficient c of the bifurcation at ν_c: ν = ν_c (1 + c r² + O(r⁴)) along the branch.

    From the third-order expansion of the self-consistency equation (module docstring), with
    q = a_2/a_1, g = a_1/a_0, α = 2(d−1)/(d(d+2)), γ = 3/(d+2): c = d²·C,

        (USA)  C = α q / (2(1−q)) + γ/6 − 1/(2d),
        (SA)   C = α q (1−g)²/(2(1−q)) − α g/2 + γ(1 + 2g²)/6 − 1/(2d).

    c < 0: supercritical (continuous transition); c > 0: subcritical (discontinuous).
    """
    beta = check_beta(beta)
    d = check_dim(dim)
    (_, q), g = _ratios(beta, d, 2)
    alpha, gamma = 2.0 * (d - 1) / (d * (d + 2)), 3.0 / (d + 2)
    if normalized:
        C = alpha * q * (1 - g) ** 2 / (2 * (1 - q)) - alpha * g / 2 + gamma * (1 + 2 * g * g) / 6 - 1 / (2 * d)
    else:
        C = alpha * q / (2 * (1 - q)) + gamma / 6 - 1 / (2 * d)
    return float(d * d * C)


def beta_star(dim, normalized=False):
    """β_*(d): the root of `landau_coefficient` in β, where the transition turns discontinuous.

    For (USA) this is the root of I_{d/2+1}(β)/I_{d/2}(β) = 1/d (2.44692 for d = 2, 1.81615 for
    d = 3). Returns inf if the coefficient stays negative up to β = 1000.
    """
    dim = check_dim(dim)
    f = lambda b: landau_coefficient(b, dim, normalized)  # noqa: E731
    lo, hi = 1e-6, 1.0
    while f(hi) < 0:
        lo, hi = hi, 2 * hi
        if hi > 1000:
            return float("inf")
    return float(optimize.brentq(f, lo, hi, xtol=1e-15, rtol=4 * np.finfo(float).eps, maxiter=200))


# -- zonal sector bases -----------------------------------------------------------------------------
class _Sector:
    """Orthonormal functions G_l(s)·Y_m(ξ), l = max(m, lowest)..lmax, of sector m on S^{d−1}.

    G_l(s) = (1−s²)^{m/2} P_{l−m}^{(α,α)}(s) / N_l, α = (d−3)/2 + m, with N_l fixed by
    ∫ G_l² dσ = Σ_j w_j G_l(s_j)² (exact: a polynomial of degree 2l). ``G`` holds the values at the
    nodes (n, k), ``A = Gᵀ diag(w)`` the projection, ``lap`` = l(l+d−2).
    """

    def __init__(self, dim, m, lmax, s, w, lowest=1):
        self.dim, self.m = dim, m
        self.alpha = 0.5 * (dim - 3) + m
        self.degrees = np.arange(max(m, lowest), lmax + 1)
        raw = self._raw(s)
        self.norm = np.sqrt(w @ raw ** 2)
        self.G = raw / self.norm
        self.A = (self.G * w[:, None]).T
        self.lap = self.degrees * (self.degrees + dim - 2.0)

    def _raw(self, s):
        s = np.asarray(s, dtype=float)[..., None]
        return (1 - s * s) ** (0.5 * self.m) * eval_jacobi(self.degrees - self.m, self.alpha, self.alpha, s)

    def values(self, s):
        return self._raw(s) / self.norm

    def derivative(self, s):
        """d/ds G_l(s) (sector 0 only): (l + 2α + 1)/2 · P_{l−1}^{(α+1, α+1)}(s) / N_l."""
        s = np.asarray(s, dtype=float)[..., None]
        n = self.degrees
        return (n + 2 * self.alpha + 1) / 2 * eval_jacobi(np.maximum(n - 1, 0), self.alpha + 1, self.alpha + 1, s) \
            * (n > 0) / self.norm


def _potential(wv, g):
    """F(w) and F'(w): w (USA, g = 0) or log(1 + g w)/g (SA), the potential Φ/ν_c as a function of
    w = Σ_l (a_l/a_1) ρ_l G_l; None where 1 + g w <= 0 (K*ρ must stay positive)."""
    if g == 0.0:
        return wv, np.ones_like(wv)
    z = 1.0 + g * wv
    if np.any(z <= 0):
        return None
    return np.log1p(g * wv) / g, 1.0 / z


class _Zonal:
    """(SC) for zonal densities ρ = 1 + Σ_{l=1}^{L} u_l G_l(⟨x, e⟩) on S^{d−1}, any d, with t = ν/ν_c.

    In units of ν_c the potential is Φ/ν_c = F(w), w = Σ_l q_l u_l G_l (q_l = a_l/a_1), so (SC) reads
    ρ = e^{(v/t) F(w)}/Z and its residual is R(u, t) = A[ρ] − u.
    """

    def __init__(self, beta, dim, lmax, normalized=False, v=1.0, nodes=None):
        self.beta, self.dim, self.lmax = beta, dim, lmax
        self.normalized, self.v = bool(normalized), float(v)
        rule = gauss_gegenbauer(nodes or 2 * lmax + 8, dim)
        self.s, self.w = np.asarray(rule.points), np.asarray(rule.weights)
        self.basis = _Sector(dim, 0, lmax, self.s, self.w)
        self.q, g = _ratios(beta, dim, lmax)
        self.g = g if normalized else 0.0
        self.nu_c = critical_noise(beta, dim, normalized)
        self._sectors = {0: self.basis}
        self._dbasis = None

    def sector(self, m):
        if m not in self._sectors:
            self._sectors[m] = _Sector(self.dim, m, self.lmax, self.s, self.w)
        return self._sectors[m]

    # -- the map and its Jacobian ---------------------------------------------------------------------
    def gibbs(self, u, t):
        """(ρ, h, F, F') on the nodes for ρ = e^h/Z, h = (v/t)F(w) − max; None if K*ρ <= 0 somewhere."""
        wv = self.basis.G @ (self.q * u)
        pot = _potential(wv, self.g)
        if pot is None:
            return None
        F, Fp = pot
        h = (self.v / t) * F
        h = h - h.max()
        e = np.exp(h)
        return e / (self.w @ e), h, F, Fp

    def residual(self, u, t):
        out = self.gibbs(u, t)
        if out is None:
            return np.full(u.shape, np.inf)
        return self.basis.A @ out[0] - u

    def jacobian(self, u, t):
        """(R, ∂R/∂u, ∂R/∂t): δρ = ρ(δh − ∫ρ δh dσ), δh = (v/t)F'(w)δw, ∂h/∂t = −(v/t²)F(w)."""
        out = self.gibbs(u, t)
        if out is None:
            return None
        rho, _, F, Fp = out
        G, A, w = self.basis.G, self.basis.A, self.w
        D = (self.v / t) * Fp[:, None] * G * self.q[None, :]
        RD = rho[:, None] * D
        Ju = A @ (RD - rho[:, None] * (w @ RD)[None, :]) - np.eye(u.size)
        dh = -(self.v / t ** 2) * F
        Jt = A @ (rho * (dh - w @ (rho * dh)))
        return A @ rho - u, Ju, Jt

    # -- derived quantities ---------------------------------------------------------------------------
    def order(self, u):
        """r = |∫ x ρ dσ| = |u_1|/√d (G_1 = √d s)."""
        return abs(float(u[0])) / np.sqrt(self.dim)

    def tail(self, u):
        return float(spectral_tail(np.concatenate([[1.0], np.asarray(u) ** 2])))

    def free_energy(self, u, t):
        """F[ρ] − F[1] = ν∫ρ log ρ dσ − v·(1/2β)Σ_{l>=1} a_l u_l² for (USA); NaN for (SA)."""
        if self.normalized:
            return float("nan")
        rho, h, _, _ = self.gibbs(u, t)
        e = np.exp(h)
        entropy = float(self.w @ (rho * h) - np.log(self.w @ e))
        return float(self.nu_c * (t * entropy - 0.5 * self.v * np.sum(self.q * u * u)))

    def density(self, u, s):
        return 1.0 + self.basis.values(s) @ u

    # -- linearised dynamics ---------------------------------------------------------------------------
    def _zonal_fields(self, u):
        """ρ̄, Φ̄/ν_c = F(w̄), F'(w̄), ΔΦ̄/ν_c and Δρ̄ on the nodes (ΔΦ̄ by Galerkin projection)."""
        B0 = self.basis
        rho = 1.0 + B0.G @ u
        F, Fp = _potential(B0.G @ (self.q * u), self.g)
        lap_phi = -B0.G @ (B0.lap * (B0.A @ F))
        lap_rho = -B0.G @ (B0.lap * u)
        return rho, F, Fp, lap_phi, lap_rho

    def linearised(self, u, t, m, fields=None):
        """L/ν_c in sector m (Galerkin, in the basis of `sector`), where L δρ = −v div(δρ∇Φ̄ + ρ̄∇δΦ) + νΔδρ:

            L/ν_c = −(v/2)[M_F Λ − Λ M_F + M_{ΔΦ̄} − Λ M_{ρ̄F'} Q − M_ρ̄ Λ M_{F'} Q − M_{Δρ̄F'} Q] − tΛ,

        with M_f = A diag(f) G the Galerkin matrix of multiplication by a zonal f, Λ = diag l(l+d−2),
        Q = diag(a_l/a_1), from div(f∇g) = ½[Δ(fg) + fΔg − gΔf] (δΦ = ν_c F'(w̄) Σ_l q_l δρ_l G_l).
        """
        rho, F, Fp, lap_phi, lap_rho = self._zonal_fields(u) if fields is None else fields
        B = self.sector(m)
        lam = B.lap
        Mf = (B.A[None] * np.stack([F, lap_phi, rho * Fp, rho, Fp, lap_rho * Fp])[:, None, :]) @ B.G
        qm = self.q[B.degrees - 1]
        t1 = Mf[0] * lam[None, :] - lam[:, None] * Mf[0] + Mf[1]
        t2 = (-lam[:, None] * Mf[2] - Mf[3] @ (lam[:, None] * Mf[4]) - Mf[5]) * qm[None, :]
        return -0.5 * self.v * (t1 + t2) - t * np.diag(lam)

    def sectors(self, count=None):
        if self.dim == 2:
            return (0, 1)
        return tuple(range(0, min(self.lmax, DEFAULT_SECTORS if count is None else count) + 1))

    def spectrum(self, u, t, sectors=None):
        """{m: eigenvalues of L in sector m} (physical units), the rotation mode of sector 1 removed."""
        out = {}
        fields = self._zonal_fields(u)
        for m in self.sectors() if sectors is None else sectors:
            L = self.linearised(u, t, m, fields)
            if m == 1:
                if self._dbasis is None:
                    self._dbasis = np.sqrt(1 - self.s ** 2)[:, None] * self.basis.derivative(self.s)
                g = self._dbasis @ u
                gam = self.sector(1).A @ g
                if np.linalg.norm(gam) > 1e-13:
                    Q = linalg.null_space(gam[None, :] / np.linalg.norm(gam))
                    L = Q.T @ L @ Q
            out[m] = self.nu_c * np.linalg.eigvals(L)
        return out

    def leading_eigenvalue(self, u, t, sectors=None):
        return float(max(np.max(ev.real) for ev in self.spectrum(u, t, sectors).values()))

    # -- Newton ------------------------------------------------------------------------------------------
    def newton(self, u, t, tol=1e-12, maxiter=30):
        """Dense Newton on R(u, t) = 0 at fixed t; returns (u, residual) or raises SolverError."""
        res = np.inf
        for _ in range(maxiter):
            out = self.jacobian(u, t)
            if out is None:
                break
            R, Ju, _ = out
            res = float(np.max(np.abs(R)))
            if res <= tol:
                return u, res
            u = u - np.linalg.solve(Ju, R)
        raise SolverError(f"the zonal self-consistency equation did not converge at nu={t * self.nu_c:.10g}: "
                          f"residual max|R| = {res:.3g} > tol={tol:g} after {maxiter} Newton steps.")

    def at_order(self, u1, u, t, tol=1e-12, maxiter=30):
        """Solve R = 0 with u_1 = u1 fixed for (u_2..u_L, t) (the fold refinement); returns (u, t)."""
        u = np.array(u, dtype=float)
        u[0] = u1
        for _ in range(maxiter):
            out = self.jacobian(u, t)
            if out is None:
                break
            R, Ju, Jt = out
            if np.max(np.abs(R)) <= tol:
                return u, t
            step = np.linalg.solve(np.column_stack([Ju[:, 1:], Jt]), -R)
            u[1:] += step[:-1]
            t += step[-1]
        raise SolverError(f"the zonal self-consistency equation at fixed order r={u1 / np.sqrt(self.dim):.6g} "
                          "did not converge.")


# -- representations of the states --------------------------------------------------------------------
def _fourier_from_zonal(u, axis):
    """c_k of FourierSeries for ρ = 1 + Σ u_k √2 cos(k(θ − θ_0)): c_k = u_k e^{−ikθ_0}/√2."""
    theta0 = np.arctan2(axis[1], axis[0])
    k = np.arange(1, u.size + 1)
    return np.concatenate([[1.0 + 0j], u / np.sqrt(2) * np.exp(-1j * k * theta0)])


def _harmonics_from_zonal(u, axis, basis):
    """Real '4pi' coefficients of ρ = 1 + Σ u_l G_l(⟨x, e⟩) (degree L: exact Gauss–Legendre analysis)."""
    from ducc0.sht import analysis_2d

    from meanfield.quadrature import gauss_legendre_grid
    from meanfield.representations.harmonics import alm_to_real

    L = u.size
    nt, nphi = L + 2, 2 * L + 4
    _, _, pts, _ = gauss_legendre_grid(nt, nphi)
    vals = 1.0 + basis.values(np.clip(pts @ axis, -1, 1)) @ u
    return alm_to_real(analysis_2d(map=vals[None], spin=0, lmax=L, geometry="GL")[0], L)


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
        """{sector m: eigenvalues} of the linearised McKean–Vlasov operator (a zonal state; module docstring)."""
        problem, u = self._zonal_problem()
        return problem.spectrum(u, self.nu / problem.nu_c, sectors)

    def _zonal_problem(self):
        if self.zonal is None:
            self.zonal = _zonal_part(self)
        axis, u = self.zonal
        if self._problem is None or self._problem.lmax != u.size - 1:
            m = self.model
            self._problem = _Zonal(m.beta, m.dim, u.size - 1, m.normalized, m.v)
        return self._problem, u[1:]

    def __repr__(self):
        return (f"StationaryState({self.model!r}, nu={self.nu:.6g}, order={self.order:.6g}, "
                f"residual={self.residual:.1e})")


def _zonal_part(state, tol=1e-7):
    """(axis, u_0..u_L) of a state that is zonal about its mean direction (else ValueError)."""
    rep = state.representation
    L = getattr(rep, "modes", getattr(rep, "lmax", None))
    d = state.model.dim
    mean = state.mean
    r = float(np.linalg.norm(mean))
    if r < 1e-12:
        raise ValueError("the state has no mean direction (order parameter 0), so no axis to linearise about; "
                         "its stability is that of the uniform state.")
    e = mean / r
    rule = gauss_gegenbauer(2 * L + 8, d)
    s, w = np.asarray(rule.points), np.asarray(rule.weights)
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
        raise ValueError(f"the state is not zonal about its mean direction (deviation {spread:.2e}); "
                         "the stability analysis needs a zonal state.")
    basis = _Sector(d, 0, L, s, w, lowest=0)
    return e, basis.A @ ring


# -- single states: self-consistency by Newton–Krylov ---------------------------------------------------
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


class _Fourier:
    """(SC) on S^1 for ρ = Σ_{|k|<=K} c_k e^{ikθ} (FourierSeries), by FFT on M >= 4K + 4 points."""

    def __init__(self, beta, modes, normalized, v, t):
        import scipy.fft as sfft

        self.K, self.t, self.v = modes, t, v
        self.M = int(sfft.next_fast_len(4 * modes + 4, real=True))
        self.q, g = _ratios(beta, 2, modes)
        self.g = g if normalized else 0.0

    def unpack(self, y):
        return np.concatenate([[1.0 + 0j], y[:self.K] + 1j * y[self.K:]])

    def pack(self, c):
        return np.concatenate([c[1:].real, c[1:].imag])

    def gibbs(self, c):
        spec = np.zeros(self.M // 2 + 1, dtype=complex)
        spec[1:self.K + 1] = self.q * c[1:]
        pot = _potential(np.fft.irfft(spec, self.M) * self.M, self.g)
        if pot is None:
            return None
        h = (self.v / self.t) * pot[0]
        h -= h.max()
        e = np.exp(h)
        return e / e.mean(), h

    def residual(self, y):
        c = self.unpack(y)
        out = self.gibbs(c)
        if out is None:
            return np.full(y.shape, np.inf)
        return self.pack(np.fft.rfft(out[0])[:self.K + 1] / self.M) - y

    def project(self, f):
        theta = 2 * np.pi * np.arange(self.M) / self.M
        vals = np.asarray(f(np.stack([np.cos(theta), np.sin(theta)], -1)), dtype=float)
        c = np.fft.rfft(vals)[:self.K + 1] / self.M
        return c / c[0].real

    def entropy(self, c):
        rho, h = self.gibbs(c)
        return float(np.mean(rho * h) - np.log(np.mean(np.exp(h))))


class _Harmonics:
    """(SC) on S^2 for real '4pi' coefficients up to lmax (ducc0 transforms on a Gauss–Legendre grid)."""

    def __init__(self, beta, lmax, normalized, v, t):
        from ducc0.fft import good_size

        from meanfield.quadrature import gauss_legendre_grid
        from meanfield.representations.harmonics import alm_degrees

        self.L, self.t, self.v = lmax, t, v
        self.ntheta, self.nphi = 2 * lmax + 2, int(good_size(4 * lmax + 4, True))
        self.weights = gauss_legendre_grid(self.ntheta, self.nphi)[3]
        q, g = _ratios(beta, 3, lmax)
        self.g = g if normalized else 0.0
        ls, _ = alm_degrees(lmax)
        self.q_alm = np.concatenate([[0.0], q])[ls]
        l = np.arange(lmax + 1)
        mask = np.zeros((2, lmax + 1, lmax + 1), dtype=bool)
        mask[0] = (l[:, None] >= l[None, :]) & (l[:, None] >= 1)
        mask[1] = (l[:, None] >= l[None, :]) & (l[None, :] >= 1)
        self.mask = mask

    def unpack(self, y):
        clm = np.zeros(self.mask.shape)
        clm[self.mask] = y
        clm[0, 0, 0] = 1.0
        return clm

    def pack(self, clm):
        return clm[self.mask]

    def _synthesis(self, alm):
        from ducc0.sht import synthesis_2d

        return synthesis_2d(alm=alm[None], spin=0, lmax=self.L, geometry="GL", ntheta=self.ntheta,
                            nphi=self.nphi)[0]

    def _analysis(self, values):
        from ducc0.sht import analysis_2d

        from meanfield.representations.harmonics import alm_to_real

        return alm_to_real(analysis_2d(map=values[None], spin=0, lmax=self.L, geometry="GL")[0], self.L)

    def gibbs(self, clm):
        from meanfield.representations.harmonics import real_to_alm

        pot = _potential(self._synthesis(self.q_alm * real_to_alm(clm)), self.g)
        if pot is None:
            return None
        h = (self.v / self.t) * pot[0]
        h -= h.max()
        e = np.exp(h)
        return e / np.sum(self.weights * e), h

    def residual(self, y):
        out = self.gibbs(self.unpack(y))
        if out is None:
            return np.full(y.shape, np.inf)
        return self.pack(self._analysis(out[0])) - y

    def project(self, f):
        from meanfield.quadrature import gauss_legendre_grid

        pts = gauss_legendre_grid(self.ntheta, self.nphi)[2]
        clm = self._analysis(np.asarray(f(pts), dtype=float))
        return clm / clm[0, 0, 0]

    def entropy(self, clm):
        rho, h = self.gibbs(clm)
        return float(np.sum(self.weights * rho * h) - np.log(np.sum(self.weights * np.exp(h))))


def _check_model(model):
    if not isinstance(model, Model):
        raise ValueError(f"`model` must be a meanfield.Model, got {type(model).__name__}.")
    if not model.is_zonal:
        raise UnsupportedModel("stationary states need a zonal model (one head, Q^T K = I, V = v·I).")
    if not model.noise > 0:
        raise ValueError(f"`model.noise` must be > 0 for a stationary state of the noisy dynamics, got {model.noise}.")
    if model.v == 0:
        raise ValueError("`model.V` must be nonzero (V = v·I with v != 0).")


def self_consistent(model, resolution=None, guess=None, *, zonal=None, axis=None, tol=1e-11, maxiter=200,
                    tail_tol=1e-9):
    """One stationary state at ν = ``model.noise``: a solution of ρ = e^{vΦ[ρ]/ν}/Z (module docstring).

    Parameters
    ----------
    model : zonal `meanfield.Model` with noise ν > 0; (USA) (the Gibbs form of the free energy) or
        (SA) (its zonal stationary states).
    resolution : int >= 4, the cut-off: Fourier modes K on S^1, lmax on S^2, the degree L of the
        zonal series otherwise (default 64).
    guess : None (the image e^{vΦ[δ_e]/ν}/Z of the Dirac mass at ``axis`` under the map (SC): a
        cluster), a density callable f(x) (need not be normalised), a `StationaryState`, or coefficients of the
        representation (FourierSeries c_0..c_K; SH (2, L+1, L+1); zonal u_0..u_L).
    zonal : solve among densities f(⟨x, e⟩) about ``axis`` (default e_d), in the Gegenbauer basis.
        Default: True for d >= 4, False on S^1 and S^2 (full Fourier / spherical-harmonic solve).
    tol : max-norm tolerance of the residual; maxiter : Newton iterations.
    tail_tol : the solution must be resolved: the relative L²(σ) norm of its top third of degrees
        (`solvers.spectral.spectral_tail`) must stay below it, else `UnderResolved`.

    Returns
    -------
    `StationaryState`. Raises `meanfield.SolverError` when Newton–Krylov does not converge (the
    message gives the residual).
    """
    _check_model(model)
    d, nu = model.dim, model.noise
    L = DEFAULT_RESOLUTION if resolution is None else check_int(resolution, "resolution", low=4)
    zonal = (d >= 4) if zonal is None else bool(zonal)
    if d >= 4 and not zonal:
        raise ValueError(f"`zonal` must be True for dim={d}: non-zonal states are solved on S^1 and S^2 only.")
    e = axis_vector(None, d) if axis is None else check_points(np.asarray(axis, dtype=float), "axis", dim=d,
                                                                normalize=True)
    nu_c = critical_noise(model.beta, d, model.normalized)
    t = nu / nu_c
    if guess is None:
        guess = _dirac_image(model, e)
    what = f"the self-consistency equation at nu={nu:.8g} (beta={model.beta:g}, dim={d}, {model.kind})"
    if zonal:
        problem = _Zonal(model.beta, d, L, model.normalized, model.v)
        u0 = _zonal_guess(problem, guess, e)
        u = _newton_krylov(lambda y: problem.residual(y, t), u0, tol, maxiter, what)
        return _zonal_state(problem, u, t, model, e, tail_tol)
    if d == 2:
        problem = _Fourier(model.beta, L, model.normalized, model.v, t)
    else:
        problem = _Harmonics(model.beta, L, model.normalized, model.v, t)
    y = _newton_krylov(problem.residual, problem.pack(_full_guess(problem, guess, d, L)), tol, maxiter, what)
    return _full_state(problem, y, model, tail_tol)


def _dirac_image(model, e):
    """The density e^{vΦ[δ_e]/ν}/Z: one step of (SC) from the Dirac mass at e (Φ[δ_e] = e^{β⟨x,e⟩}/β for
    (USA), ⟨x, e⟩ for (SA)); the default guess, a cluster of the width the noise allows."""
    beta, nu, v = model.beta, model.noise, model.v

    def rho(x):
        s = np.asarray(x, dtype=float) @ e
        if model.normalized or beta == 0.0:
            h = v * s / nu
        else:
            h = v * np.exp(beta * (s - 1.0) + beta - np.log(beta * nu))
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
            raise ValueError(f"`guess` as zonal coefficients must be (u_0, ..., u_L), got shape {u.shape}.")
        out = np.zeros(L)
        out[:min(L, u.size - 1)] = u[1:L + 1] / u[0]
        return out
    perp = linalg.null_space(e[None, :])[:, 0]
    s = problem.s
    vals = np.asarray(guess(s[:, None] * e + np.sqrt(1 - s * s)[:, None] * perp), dtype=float)
    if vals.shape != s.shape or not np.all(np.isfinite(vals)):
        raise ValueError("`guess` must return one finite value per point.")
    return problem.basis.A @ (vals / (problem.w @ vals))


def _full_guess(problem, guess, d, L):
    if isinstance(guess, StationaryState):
        if guess.model.dim != d:
            raise ValueError(f"`guess` is a state on S^{guess.model.dim - 1}, not on S^{d - 1}.")
        guess = guess.density
    if callable(guess):
        return problem.project(guess)
    c = np.asarray(guess)
    if d == 2:
        if c.ndim != 1 or c.size < 2:
            raise ValueError(f"`guess` as Fourier coefficients must be c_0..c_K, got shape {c.shape}.")
        out = np.zeros(L + 1, dtype=complex)
        out[:min(c.size, L + 1)] = c[:L + 1]
        return out / out[0].real
    if c.ndim != 3 or c.shape[0] != 2 or c.shape[1] != c.shape[2]:
        raise ValueError(f"`guess` as spherical-harmonic coefficients must have shape (2, L+1, L+1), got {c.shape}.")
    out = np.zeros((2, L + 1, L + 1))
    k = min(c.shape[1], L + 1)
    out[:, :k, :k] = c[:, :k, :k]
    return out / out[0, 0, 0]


def _check_tail(power, tail_tol, L):
    tail = float(spectral_tail(power))
    if not tail <= tail_tol:
        raise UnderResolved(f"the stationary state is under-resolved: spectral tail {tail:.3g} > tail_tol={tail_tol:g} "
                            f"with resolution {L}; increase `resolution`.", tail=tail, tol=tail_tol)


def _zonal_state(problem, u, t, model, e, tail_tol):
    _check_tail(np.concatenate([[1.0], u ** 2]), tail_tol, problem.lmax)
    res = float(np.max(np.abs(problem.residual(u, t))))
    coeffs = np.concatenate([[1.0], u])
    d = problem.dim
    if d == 2:
        from meanfield.representations.fourier import FourierSeries

        rep, data = FourierSeries(problem.lmax), _fourier_from_zonal(u, e)
    elif d == 3:
        from meanfield.representations.harmonics import SphericalHarmonicSeries

        rep, data = SphericalHarmonicSeries(problem.lmax), _harmonics_from_zonal(u, e, problem.basis)
    else:
        rep, data = GegenbauerSeries(problem.lmax, d, e), coeffs
    return StationaryState(rep, data, model, order=problem.order(u), free_energy=problem.free_energy(u, t),
                           residual=res, zonal=(e, coeffs), problem=problem)


def _full_state(problem, y, model, tail_tol):
    c = problem.unpack(y)
    beta, d = model.beta, model.dim
    if d == 2:
        from meanfield.representations.fourier import FourierSeries

        rep = FourierSeries(problem.K)
        order = float(abs(c[1]))
    else:
        from meanfield.representations.harmonics import SphericalHarmonicSeries

        rep = SphericalHarmonicSeries(problem.L)
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


# -- branches -------------------------------------------------------------------------------------------
def _tangent(Ju, Jt, tau):
    M = np.vstack([np.column_stack([Ju, Jt]), tau[None, :]])
    rhs = np.zeros(M.shape[0])
    rhs[-1] = 1.0
    v = np.linalg.solve(M, rhs)
    return v / np.linalg.norm(v)


def _correct(problem, X, Xprev, tau, ds, tol, maxiter=12):
    """Newton on R(X) = 0, τ·(X − X_prev) = ds; returns (X, iterations) or (None, maxiter)."""
    for it in range(maxiter):
        out = problem.jacobian(X[:-1], X[-1])
        if out is None or X[-1] <= 0:
            return None, maxiter
        R, Ju, Jt = out
        g = tau @ (X - Xprev) - ds
        if max(float(np.max(np.abs(R))), abs(g)) <= tol:
            return X, it
        M = np.vstack([np.column_stack([Ju, Jt]), tau[None, :]])
        try:
            X = X - np.linalg.solve(M, np.concatenate([R, [g]]))
        except np.linalg.LinAlgError:
            return None, maxiter
        if not np.all(np.isfinite(X)):
            return None, maxiter
    return None, maxiter


def _continue(problem, X, tau, *, ds, ds_max, t_min, t_max, r_max, max_points, tol, tail_tol, first=None):
    """Pseudo-arclength continuation from X along τ; returns (points, tangents, stop reason)."""
    points, tangents = [X], [tau]
    ds_min = 1e-9
    reason = "max_points"
    while len(points) < max_points:
        Xp = X + ds * tau if first is None else first(ds)
        Xn, iters = _correct(problem, Xp, X, tau, ds, tol)
        if Xn is None:
            ds /= 2
            if ds < ds_min:
                reason = "step size (the corrector failed)"
                break
            continue
        first = None
        _, Ju, Jt = problem.jacobian(Xn[:-1], Xn[-1])
        tau = _tangent(Ju, Jt, tau)
        X = Xn
        points.append(X)
        tangents.append(tau)
        if not t_min <= X[-1] <= t_max:
            reason = "nu range"
            break
        if problem.order(X[:-1]) > r_max:
            reason = "order parameter limit"
            break
        if problem.tail(X[:-1]) > tail_tol:
            reason = "resolution (spectral tail)"
            break
        ds = min(ds * (1.6 if iters <= 3 else 1.0 if iters <= 5 else 0.5), ds_max)
    return points, tangents, reason


def _refine_fold(problem, points, i, tol):
    """ν_fold between points i−1 and i+1 (the tangent's ν-component changes sign at i): maximise
    t(r) with r = order, each t(r) from `_Zonal.at_order`."""
    lo, hi = points[i - 1], points[i + 1]
    guess = [points[i][:-1], points[i][-1]]

    def neg_t(u1):
        u, t = problem.at_order(u1, guess[0], guess[1], tol)
        guess[0], guess[1] = u, t
        return -t

    res = optimize.minimize_scalar(neg_t, bounds=tuple(sorted((lo[0], hi[0]))), method="bounded",
                                   options={"xatol": 1e-10 * max(1.0, abs(points[i][0]))})
    return -float(res.fun), abs(float(res.x)) / np.sqrt(problem.dim)


def branch(beta, dim, normalized=False, resolution=None, nu_min=None, nu_max=None, *, start=None, direction=-1,
           ds=1e-3, ds_max=0.05, max_points=400, sectors=None, tol=1e-12, tail_tol=1e-8, r_max=0.995,
           n_profile=201):
    """The branch of clustered stationary states bifurcating from the uniform state at ν_c.

    Pseudo-arclength continuation of the zonal self-consistency equation (module docstring) in
    (u, t = ν/ν_c), started at the bifurcation along the Landau direction (u_1 = ds, ν from
    `landau_coefficient`), or from ``start`` (a zonal `StationaryState`) in the ``direction``
    (−1: decreasing ν first), following folds. Each point gets its stability from the spectrum of
    the linearised McKean–Vlasov operator (sectors m = 0..12, rotation mode removed).

    Parameters
    ----------
    beta, dim, normalized : the model (attractive, V = I); (SA) uses its zonal stationary states.
    resolution : degree L of the zonal series (default 64).
    nu_min, nu_max : stop when ν leaves [nu_min, nu_max] (default [0.25 ν_c, 4 ν_c]).
    ds, ds_max : first and largest arclength step; max_points : cap on the points.
    sectors : sectors m of the stability analysis (default 0..min(L, 12); (0, 1) on S^1).
    tol : Newton tolerance (max-norm of the residual); tail_tol : stop when the density is no
        longer resolved at degree L; r_max : stop beyond this order parameter.
    n_profile : number of s = ⟨x, e⟩ values at which the densities are stored.

    Returns
    -------
    xarray.Dataset over ``point`` with ``nu``, ``order``, ``free_energy`` (F[ρ] − F[1], USA),
    ``stable``, ``leading_eigenvalue``, ``arclength``, ``coefficients`` (point, l) and ``density``
    (point, s); attributes ``nu_c``, ``nu_bifurcation`` (ν extrapolated to r = 0 along the branch),
    ``landau_coefficient`` (and ``landau_fit``, measured on the branch), ``transition``
    ("supercritical"/"subcritical"), ``beta_star``, ``nu_fold``/``order_fold`` (NaN if none),
    ``nu_maxwell`` (where F equals that of the uniform state on the stable branch, USA), ``stop_reason``.
    """
    import xarray as xr

    beta = check_beta(beta)
    dim = check_dim(dim)
    L = DEFAULT_RESOLUTION if resolution is None else check_int(resolution, "resolution", low=4)
    ds = check_real(ds, "ds", low=0.0, low_open=True)
    ds_max = check_real(ds_max, "ds_max", low=ds)
    max_points = check_int(max_points, "max_points", low=3)
    if direction not in (-1, 1):
        raise ValueError(f"`direction` must be -1 (decreasing nu) or +1, got {direction!r}.")
    problem = _Zonal(beta, dim, L, normalized)
    nu_c = problem.nu_c
    nu_min = 0.25 * nu_c if nu_min is None else check_real(nu_min, "nu_min", low=0.0, low_open=True)
    nu_max = 4.0 * nu_c if nu_max is None else check_real(nu_max, "nu_max", low=nu_min, low_open=True)
    c = landau_coefficient(beta, dim, normalized)
    opts = dict(ds_max=ds_max, t_min=nu_min / nu_c, t_max=nu_max / nu_c, r_max=r_max, max_points=max_points,
                tol=tol, tail_tol=tail_tol)
    if start is None:
        X0 = np.zeros(L + 1)
        X0[-1] = 1.0
        tau = np.zeros(L + 1)
        tau[0] = 1.0

        def first(h):
            X = X0 + h * tau
            X[-1] = 1.0 + c * h * h / dim
            return X

        points, tangents, reason = _continue(problem, X0, tau, ds=ds, first=first, **opts)
        points, tangents = points[1:], tangents[1:]        # the bifurcation point itself is the uniform state
    else:
        if not isinstance(start, StationaryState):
            raise ValueError("`start` must be a StationaryState (e.g. from `self_consistent`).")
        if start.model.beta != beta or start.model.dim != dim or start.model.normalized != bool(normalized):
            raise ValueError("`start` must be a state of the same beta, dim and kind as the branch.")
        axis, u = start.zonal if start.zonal is not None else _zonal_part(start)
        u = np.concatenate([u[1:L + 1], np.zeros(max(0, L + 1 - u.size))])
        u, _ = problem.newton(u, start.nu / nu_c, tol)
        X0 = np.concatenate([u, [start.nu / nu_c]])
        _, Ju, Jt = problem.jacobian(u, X0[-1])
        tau = linalg.null_space(np.column_stack([Ju, Jt]))[:, 0]
        tau *= direction * np.sign(tau[-1]) if tau[-1] != 0 else 1.0
        points, tangents, reason = _continue(problem, X0, tau, ds=ds, **opts)
    points = [X for X in points if opts["t_min"] <= X[-1] <= opts["t_max"]] or points[:1]
    P = np.array(points)
    U, T = P[:, :-1], P[:, -1]
    arclength = np.concatenate([[0.0], np.cumsum(np.linalg.norm(np.diff(P, axis=0), axis=1))])
    order = np.abs(U[:, 0]) / np.sqrt(dim)
    secs = problem.sectors() if sectors is None else tuple(sectors)
    lead = np.array([problem.leading_eigenvalue(u, t, secs) for u, t in zip(U, T)])
    free = np.array([problem.free_energy(u, t) for u, t in zip(U, T)])
    # folds: the ν-component of the tangent changes sign
    nu_fold = r_fold = float("nan")
    tt = np.array([tg[-1] for tg in tangents[:len(points)]])
    turn = np.nonzero((tt[:-1] > 0) & (tt[1:] <= 0))[0]        # ν increasing, then decreasing: a fold
    if turn.size:
        j = int(turn[0]) + (1 if T[turn[0] + 1] > T[turn[0]] else 0)
        j = min(max(j, 1), len(points) - 2)
        t_fold, r_fold = _refine_fold(problem, points, j, tol)
        nu_fold = t_fold * nu_c
    s_prof = np.linspace(-1.0, 1.0, n_profile)
    dens = 1.0 + problem.basis.values(s_prof) @ U.T
    # bifurcation point and Landau coefficient measured on the branch: t = t0(1 + c r² + c4 r⁴ + c6 r⁶)
    small = order < 0.05
    nu_bif, c_fit = float("nan"), float("nan")
    if start is None and small.sum() >= 5:
        coef = np.polyfit(order[small] ** 2, T[small], 3)
        nu_bif, c_fit = float(coef[3] * nu_c), float(coef[2] / coef[3])
    nu_maxwell = float("nan")
    if not normalized and np.isfinite(nu_fold):
        stab = (lead < 0) & (order > r_fold)
        idx = np.nonzero(stab[:-1] & stab[1:] & (np.sign(free[:-1]) != np.sign(free[1:])))[0]
        if idx.size:
            k = idx[0]
            nu_maxwell = float(np.interp(0.0, [free[k], free[k + 1]], [T[k], T[k + 1]]) * nu_c) \
                if free[k] < free[k + 1] else float(np.interp(0.0, [free[k + 1], free[k]], [T[k + 1], T[k]]) * nu_c)
    ds_out = xr.Dataset(
        {"nu": ("point", T * nu_c), "order": ("point", order), "free_energy": ("point", free),
         "stable": ("point", lead < 0), "leading_eigenvalue": ("point", lead), "arclength": ("point", arclength),
         "coefficients": (("point", "l"), np.column_stack([np.ones(len(T)), U])),
         "density": (("point", "s"), dens.T)},
        coords={"point": np.arange(len(T)), "l": np.arange(L + 1), "s": s_prof})
    ds_out["nu"].attrs["long_name"] = "noise nu"
    ds_out["order"].attrs["long_name"] = "order parameter r = |int x rho dsigma|"
    ds_out["free_energy"].attrs["long_name"] = "F[rho] - F[1], F = nu int rho log rho - E_beta (USA)"
    ds_out["leading_eigenvalue"].attrs["long_name"] = "largest real part of the linearised spectrum (rotations removed)"
    ds_out["coefficients"].attrs["long_name"] = "zonal coefficients u_l of rho = sum_l u_l G_l(<x, e>), orthonormal in L2(sigma)"
    ds_out["density"].attrs["long_name"] = "rho as a function of s = <x, e>"
    ds_out.attrs.update({
        "beta": beta, "dim": dim, "kind": "SA" if normalized else "USA", "resolution": L, "nu_c": nu_c,
        "nu_bifurcation": nu_bif, "landau_coefficient": c, "landau_fit": c_fit,
        "transition": "supercritical" if c < 0 else "subcritical", "beta_star": beta_star(dim, normalized),
        "nu_fold": nu_fold, "order_fold": r_fold, "nu_maxwell": nu_maxwell, "stop_reason": reason,
        "sectors": list(secs)})
    return ds_out


def fold_point(beta, dim, normalized=False, resolution=None):
    """ν_fold(β) and the order parameter there: the largest ν of the clustered branch when the
    bifurcation is subcritical (`landau_coefficient` > 0); Fold(nan, nan) when supercritical."""
    if landau_coefficient(beta, dim, normalized) <= 0:
        return Fold(float("nan"), float("nan"))
    ds = branch(beta, dim, normalized, resolution, nu_min=critical_noise(beta, dim, normalized) * 0.999,
                sectors=(0,))
    return Fold(float(ds.attrs["nu_fold"]), float(ds.attrs["order_fold"]))


def branch_state(ds, nu, *, stable=True, tol=1e-12):
    """The stationary state at ``nu`` on a branch from `branch`, solved exactly (Newton) from the
    branch points around it: on the stable part (``stable=True``), the unstable part (False), or
    the largest order parameter (None). Returns a `StationaryState` (zonal about e_d)."""
    nu = check_real(nu, "nu", low=0.0, low_open=True)
    nus, st, order = ds["nu"].values, ds["stable"].values, ds["order"].values
    cands = [i for i in range(nus.size - 1) if (nus[i] - nu) * (nus[i + 1] - nu) <= 0
             and (stable is None or (st[i] == stable and st[i + 1] == stable))]
    if not cands:
        raise ValueError(f"`nu`={nu:g} is not on the {'' if stable is None else ('stable ' if stable else 'unstable ')}"
                         f"part of the branch (nu from {nus.min():.6g} to {nus.max():.6g}).")
    i = max(cands, key=lambda k: order[k])
    a = 0.0 if nus[i + 1] == nus[i] else (nu - nus[i]) / (nus[i + 1] - nus[i])
    coeffs = ds["coefficients"].values
    u = (1 - a) * coeffs[i, 1:] + a * coeffs[i + 1, 1:]
    normalized = ds.attrs["kind"] == "SA"
    problem = _Zonal(ds.attrs["beta"], int(ds.attrs["dim"]), int(ds.attrs["resolution"]), normalized)
    t = nu / problem.nu_c
    u, _ = problem.newton(u, t, tol)
    model = Model(beta=ds.attrs["beta"], dim=int(ds.attrs["dim"]), normalized=normalized, noise=nu)
    return _zonal_state(problem, u, t, model, axis_vector(None, problem.dim), np.inf)


__all__ = ["critical_noise", "beta_star", "landau_coefficient", "fold_point", "branch", "branch_state",
           "self_consistent", "StationaryState", "Fold"]
