"""`Gegenbauer`: the mean-field PDE for zonal densities on S^{d−1}, any d >= 2.

A zonal model (Q^T K = I, V = v·I) maps a zonal density ρ(x) = f(⟨x, e⟩) to a zonal density. With
s = ⟨x, e⟩, a zonal function g(s) has ∇g = g'(s)(e − s x), |∇g|² = (1 − s²)g'², and the
divergence of a zonal field h(s)(e − s x) is (1 − s²)^{−(d−3)/2} ∂_s[(1 − s²)^{(d−1)/2} h], so the
PDE ∂_tρ + div(ρX) = νΔρ with X = v∇Φ (Geshkovski, Letrouit, Polyanskiy, Rigollet, *A mathematical
perspective on Transformers* (2023), (3.4), (3.10); docs/mathematics.md §2 and §10) becomes

    ∂_t f = −v (1 − s²)^{−(d−3)/2} ∂_s[(1 − s²)^{(d−1)/2} f ∂_sΦ] + ν Δf,
    (USA)  Φ = (K*ρ)/β,       (SA)  Φ = log(K*ρ)/β,

where K*ρ acts on the Gegenbauer coefficients through the Funk–Hecke multipliers a_l(β)
(`meanfield.kernel_multipliers`) and Δ is diagonal with eigenvalues −l(l + d − 2).

Discretisation (Galerkin in the orthonormal basis p_l of `meanfield.representations.gegenbauer`):

* the state is c_0..c_L, f = Σ c_l p_l; testing the equation with p_l and integrating by parts
  against the law c_d (1 − s²)^{(d−3)/2} ds of s under σ (the boundary term (1 − s²)^{(d−1)/2} vanishes)
  gives

      ∂_t c_l = v ∫ (1 − s²) f ∂_sΦ p_l' dσ − ν l(l + d − 2) c_l,

  so ∂_t c_0 = 0 exactly (p_0' = 0): the mass is constant to the last bit;
* f, ∂_sΦ (and for (SA) the scaled Z̃ = e^{−β}K*ρ with ∂_sΦ = (∂_sZ̃/β)/Z̃, so that e^β never appears)
  are synthesised at n Gauss–Gegenbauer nodes (`meanfield.spaces.quadrature.gauss_gegenbauer`) by the
  matrices p_l(s_j) and p_l'(s_j) (precomputed); the integral is the Gauss sum. With
  n >= (3L + 1)/2 + 1 the integrand (degree <= 3L for (USA)) is integrated exactly: the (USA)
  right-hand side is the exact Galerkin projection (de-aliased); for (SA) only the spectrally small
  tail of 1/Z̃ aliases;
* noise is the diagonal linear part, applied exactly by the integrating factor;
* under-resolution: after every step the spectral tail (`solvers.spectral`) must stay below
  ``tail_tol``; otherwise `UnderResolved`, or with ``lmax="auto"`` a restart at twice the degree.
"""
import numpy as np

from meanfield.validation import check_callable, check_density_values, check_real
from meanfield.errors import InvalidInput, SolverError, UnderResolved
from meanfield.representations.gegenbauer import GegenbauerSeries, axis_vector, lift, orthogonal_basis
from .base import Solver
from meanfield.spaces.gegenbauer import GegenbauerBasis, node_count
from meanfield.spaces.quadrature import readonly
from .bases import ResolutionPolicy
from .spectral import (DEFAULT_TAIL_TOL, AutoResolution, SpectralVelocity, TailMonitor, energy_diagnostics,
                       noise_dissipation, spectral_tail)
from meanfield.measures.densities import zonal_profile

ZONAL_RTOL = 1e-8        # tolerance of the zonality check of a callable initial density
MAX_NORM = 1e12          # ‖ρ‖_{L²(σ)} beyond which the coefficients lose more than 12 digits


class Gegenbauer(AutoResolution, Solver):
    """Galerkin solver in normalised Gegenbauer polynomials for zonal densities on S^{d−1}.

    Parameters
    ----------
    model : meanfield.Model with ``model.is_zonal`` (one head, Q^T K = I, V = ±I), any dim >= 2,
        (SA) or (USA), noise ν >= 0.
    lmax : int >= 4, or "auto"
        L, the highest degree kept. L must resolve the kernel (a_l(β)/a_0(β) < 1e-14 for l > L,
        `meanfield.transformer.kernels.minimum_degree`); a too small L raises ValueError naming the minimum.
        ``"auto"`` starts at max(32, that minimum rounded up to a power of two) and doubles L
        whenever the spectral tail exceeds ``tail_tol``, up to ``max_lmax``.
    axis : unit vector of length dim, default e_d
        The axis e of the zonal densities (ρ(x) = f(⟨x, e⟩)).
    tail_tol : float > 0
        Tolerance of the spectral tail (relative L²(σ) norm of the top third of the degrees), checked
        after every step. Default 1e-6.
    max_lmax : int, cap of ``lmax="auto"`` (default 1024).
    max_norm : float > 1
        The run stops with `UnderResolved` once ‖ρ‖_{L²(σ)} = |c| exceeds it (default 1e12): the
        coefficients, and the density values, are then accurate only to about 1e-16·|c| in absolute
        terms. In high dimension this is what limits a concentrating flow (docs/gegenbauer.md: a
        density concentrated at ⟨x, e⟩ ≈ s̄ has ‖ρ‖ ≈ e^{d s̄²/2}).
    {threads}

    Raises
    ------
    UnsupportedModel
        A non-zonal model, or a model part the solver does not take.
    ValueError
        ``lmax`` below the kernel's minimum, ``axis`` not a unit vector of length dim, a bad
        ``tail_tol`` or ``max_norm``.

    Notes
    -----
    ``solve(initial, t_eval)`` accepts a density callable on points of S^{d−1} that is zonal about
    ``axis`` (checked on points with equal ⟨x, e⟩: ValueError naming `rho0` otherwise), a profile
    ``meanfield.measures.densities.zonal(f, dim, axis)`` (f is then evaluated at the nodes directly), the
    coefficients c_0..c_L (an array of `GegenbauerSeries`), or a `Solution` of this solver.

    Diagnostics at saved times (``sol.diagnostics``): ``mass``, ``min_density`` (at the nodes),
    ``spectral_tail``, ``energy_rate`` (exact derivative of the discrete energy),
    ``energy_rate_identity`` (docs/mathematics.md: v∫Z|X|²ρ dσ for (SA), (3.6); v∫|X|²ρ dσ for
    (USA); plus the noise term), ``energy_rate_error``, ``l2_norm`` (‖ρ‖_{L²(σ)}) and ``lmax``.

    Examples
    --------
    On S^4 a small zonal perturbation of degree 1 grows at the exact linear rate ς_1
    (docs/mathematics.md §5):

    >>> import numpy as np
    >>> import meanfield as mf, solvers
    >>> model = mf.Model(beta=1.0, dim=5)
    >>> rho0 = mf.densities.perturbed_uniform(1e-3, 1, dim=5)       # zonal about e_5
    >>> sol = solvers.Gegenbauer(model, lmax=16).solve(rho0, [0.0, 1.0], progress=False)
    >>> growth = sol.data[-1][1] / sol.data[0][1]
    >>> round(float(growth), 5), round(float(np.exp(mf.linear_growth_rates(model, 1)[1])), 5)
    (2.17736, 2.17736)
    """

    steppers = ("dopri5", "bs32")
    stepper_defaults = {}
    policy = ResolutionPolicy("lmax", "max_lmax", low=4, auto_start=32, auto_cap=1024)   # "auto": 32 up to 1024
    mass_by_construction = True     # c_0 is not evolved: a report notes the mass
    auto_resolution = (policy.name, policy.cap_name)
    config_name = "gegenbauer"

    @classmethod
    def examples(cls):
        """Small runs (`solvers.Solver.examples`): a fixed and an automatic resolution."""
        from meanfield.measures import densities
        from meanfield.transformer.model import Model

        return {"Gegenbauer": (lambda: cls(Model(beta=2.0, dim=8), lmax=32),
                               [densities.von_mises_fisher(np.eye(8)[-1], 2.0),
                                densities.perturbed_uniform(0.05, 2, dim=8)], {}),
                "Gegenbauer-auto": (lambda: cls(Model(beta=4.0, dim=4), lmax="auto", tail_tol=1e-10),
                                    [densities.von_mises_fisher(np.eye(4)[-1], 4.0), densities.uniform()], {})}

    def __init__(self, model, lmax=64, axis=None, *, tail_tol=DEFAULT_TAIL_TOL,
                 max_lmax=1024, max_norm=MAX_NORM, threads=None):
        Solver.__init__(self, model, threads)
        self._require_zonal()
        self.max_norm = check_real(max_norm, "max_norm", low=1.0, low_open=True)
        self.axis = axis_vector(axis, model.dim)
        self.axis.setflags(write=False)
        self.tail = TailMonitor(tail_tol, "lmax")
        self._setup(self._choose_resolution(lmax, max_lmax))

    def _setup(self, L):
        """The basis (`node_count`(L) Gauss–Gegenbauer nodes), its tables and the multipliers for degree L."""
        d = self.model.dim
        self.lmax = L
        self.basis = basis = GegenbauerBasis(L, d)
        self.nodes, self.weights = basis.nodes, basis.weights
        s, w = self.nodes, self.weights
        P, dP = basis.table, basis.derivative_table
        self.synthesis = P                                                # f_j = Σ_l c_l p_l(s_j)
        self.derivative = dP                                              # g_j = Σ_l c_l p_l'(s_j)
        self.flux_test = readonly((dP * (w * (1 - s * s))[:, None]).T)   # Σ_j w_j (1 − s_j²) p_l'(s_j) F_j
        self.laplacian = basis.laplacian
        self.representation = GegenbauerSeries(L, d, self.axis)
        self._setup_model()

    def _setup_model(self):
        """The multipliers of the model at the basis's degrees, in the table of `_fields`."""
        P, dP = self.synthesis, self.derivative
        self.field = field = SpectralVelocity(self.model, self.lmax)
        # one matrix–vector product gives f, (Z̃ for (SA)) and ∂_sΨ̃ at the nodes
        rows = [P] + ([P * field.kernel] if field.normalized else []) + [dP * field.potential]
        self.fields_table = readonly(np.concatenate(rows))

    # -- the discretisation ------------------------------------------------------------------------
    def _fields(self, c):
        """f, Z̃ = e^{−β}K*ρ ((SA); None for (USA)) and the speed u = v ∂_sΦ at the nodes (X = u·P_x e)."""
        n = self.nodes.size
        g = self.fields_table @ c
        if not self.field.normalized:
            return g[:n], None, self.field.velocity(g[n:])
        z = g[n:2 * n]
        return g[:n], z, self.field.velocity(g[2 * n:], z)

    def _rhs(self, run, t, y):
        """∂_t c_l = v Σ_j w_j (1 − s_j²) f_j ∂_sΦ_j p_l'(s_j)  (transport; noise is `_linear`)."""
        f, z, dphi = self._fields(y)
        if z is not None and not z.min() > 0:
            return np.full_like(y, np.nan)        # K*ρ <= 0 at a node: reject the step (see _monitor)
        return self.flux_test @ (f * dphi)

    @classmethod
    def from_segment(cls, segment):
        return cls(segment.model, segment.representation.lmax, axis=segment.representation.axis)

    def _tracer_velocity(self, run, t, y, points):
        """X = u(s)·P_x e at the tracers, s = ⟨x, e⟩ (the speed u of `_fields` at their s)."""
        s = points @ self.axis
        grad = self.basis.derivatives(s) @ (self.field.potential * y)
        z = self.basis.values(s) @ (self.field.kernel * y) if self.field.normalized else None
        return self.field.velocity(grad, z)[:, None] * (self.axis - s[:, None] * points)

    def _linear(self, run):
        if self.model.noise == 0.0:
            return None
        return -self.model.noise * self.laplacian

    def _representation(self, run):
        return self.representation

    def _monitor(self, run, t, y):
        if self.field.kernel is not None:
            z = self.synthesis @ (self.field.kernel * y)
            if not z.min() > 0:
                raise SolverError(f"K*ρ is not positive at the nodes at t={t:.6g} (min {z.min():.3g}·e^β), so "
                                  "log(K*ρ) is undefined: the discrete density has large negative parts; "
                                  "increase `lmax`.")
        power = y * y
        norm = float(np.sqrt(power.sum()))
        if not norm <= self.max_norm:
            raise UnderResolved(
                f"ill-conditioned at t={t:.6g}: ‖ρ‖_L²(σ) = {norm:.3g} > max_norm={self.max_norm:g}, so the "
                "coefficients carry only ~16 − log10‖ρ‖ digits. The density is concentrating where σ has little "
                "mass (in high dimension ‖ρ‖ grows like e^{d s̄²/2} with s̄ = <x, e>); stop earlier.",
                t=t, tail=float(spectral_tail(power)), tol=self.tail.tol)
        self.tail.check_or_refine(t, power, self.lmax, self.refinable)

    def _diagnostics(self, run, t, y):
        """Mass, E_β, min f at the nodes, tail, dE/dt of the discrete flow vs the identity."""
        m = self.model
        f, z, dphi = self._fields(y)
        dy = self.rhs(y)
        power = y * y
        speed2 = (1 - self.nodes ** 2) * dphi ** 2                # |X|² = (1 − s²)(∂_sΦ)²
        integrand = f * speed2 if z is None else f * speed2 * z * self.field.unscale
        ident = m.v * float(self.weights @ integrand) + noise_dissipation(m.beta, m.dim, m.noise, power)
        out = energy_diagnostics(m.beta, m.dim, power, y * dy, ident)
        out.update({"mass": float(y[0]), "min_density": float(f.min()), "spectral_tail": float(spectral_tail(power)),
                    "l2_norm": float(np.sqrt(power.sum())), "lmax": float(self.lmax)})
        return out

    # -- initial data ------------------------------------------------------------------------------
    def _initial_from_callable(self, run, rho0, normalize):
        """c_l = Σ_j w_j f(s_j) p_l(s_j) on 2n + 32 Gauss–Gegenbauer nodes (exact for f of degree
        <= 4n + 63 − L); checks zonality, finiteness, f >= 0 at the nodes and mass 1 within 1e-6."""

        check_callable(rho0, "rho0")
        d = self.model.dim
        projection = GegenbauerBasis(self.lmax, d, 2 * self.nodes.size + 32)
        s, w = projection.nodes, projection.weights
        known = zonal_profile(rho0, d)
        if known is not None and np.allclose(known[1], self.axis, rtol=0, atol=1e-14):
            vals = np.asarray(known[0](s), dtype=float)
        else:
            self._check_zonal(rho0)
            vals = _evaluate(rho0, lift(s, self.axis, orthogonal_basis(self.axis)[0]))
        if vals.shape != s.shape:
            raise InvalidInput(f"`rho0` must return one value per point, got shape {vals.shape} for {s.size} points.")
        vals, _ = check_density_values(vals, "rho0", quadrature_weights=w, normalize=normalize)
        return projection.analysis(vals)

    def _check_zonal(self, rho0, npoints=64):
        """ValueError unless rho0(x) = rho0(x') for pairs of points with ⟨x, e⟩ = ⟨x', e⟩."""
        rng = np.random.default_rng(20231210)
        B = orthogonal_basis(self.axis)
        s = np.concatenate([np.linspace(-0.99, 0.99, npoints), rng.uniform(-1, 1, npoints) / np.sqrt(self.model.dim)])
        g = rng.standard_normal((2, s.size, B.shape[0])) @ B
        if B.shape[0] == 1:
            g[1] = -g[0]                                            # d = 2: the mirror image
        u = g / np.linalg.norm(g, axis=-1, keepdims=True)
        a, b = _evaluate(rho0, lift(s, self.axis, u[0])), _evaluate(rho0, lift(s, self.axis, u[1]))
        if a.shape != s.shape or b.shape != s.shape:
            raise InvalidInput(f"`rho0` must return one value per point, got shape {a.shape} for {s.size} points.")
        gap = np.abs(a - b)
        scale = np.maximum(np.maximum(np.abs(a), np.abs(b)), 1.0)
        k = int(np.argmax(gap / scale))
        if not gap[k] <= ZONAL_RTOL * scale[k]:
            raise InvalidInput(f"`rho0` is not zonal about the axis {np.round(self.axis, 6).tolist()}: it takes the "
                             f"values {a[k]:.6g} and {b[k]:.6g} at two points with <x, e> = {s[k]:.6g}. The "
                             "Gegenbauer solver needs rho0(x) = f(<x, e>); pass `axis` or use solvers.Particles.")

    def _initial_from_data(self, run, data, normalize):
        """Coefficients c_0..c_K (K <= lmax, zero-padded) of `GegenbauerSeries`; mass c_0 = 1 within 1e-6."""
        c = np.asarray(data, dtype=float)
        if c.ndim != 1 or not 1 <= c.size <= self.lmax + 1:
            raise InvalidInput(f"`initial` as an array must hold the Gegenbauer coefficients c_0..c_K with K <= "
                             f"lmax={self.lmax}, got shape {c.shape}.")
        if not np.all(np.isfinite(c)):
            raise InvalidInput("`initial` contains NaN or inf.")
        if not c[0] > 0:
            raise InvalidInput(f"`initial` must have a positive mass c_0, got {c[0]!r}.")
        if normalize:
            c = c / c[0]
        elif abs(c[0] - 1.0) > 1e-6:
            raise InvalidInput(f"`initial` must have mass c_0 = 1 within 1e-6, got {c[0]!r}. Pass normalize=True.")
        out = np.zeros(self.lmax + 1)
        out[:c.size] = c
        return out

    def _initial_from_solution(self, run, sol):
        rep = sol.representation
        if not rep.zonal or rep.dim != self.model.dim or not np.allclose(rep.axis, self.axis):
            raise InvalidInput(f"`initial` is a {rep.name!r} Solution; Gegenbauer continues Gegenbauer Solutions "
                             "with the same dim and axis (or pass a density callable).")
        c = np.asarray(sol.data[-1], dtype=float)
        if c.size > self.lmax + 1:
            if np.any(c[self.lmax + 1:] != 0):
                raise InvalidInput(f"`initial` has degree {c.size - 1} > lmax={self.lmax}.")
            c = c[:self.lmax + 1]
        return self._initial_from_data(run, c, False)

    def _stats(self, run):
        return {"lmax_final": self.lmax}

    # -- helpers -----------------------------------------------------------------------------------
    def coefficients(self, rho0, normalize=False):
        """c_0..c_L of the projection of ``rho0`` (the initial state of `solve`)."""
        return self.start(rho0, normalize=normalize).y0.copy()

    def rhs(self, c):
        """∂_t c_l, l = 0..L (transport plus noise; ∂_t c_0 = 0) for coefficients c_0..c_L."""
        c = np.asarray(c, dtype=float)
        if c.shape != (self.lmax + 1,):
            raise InvalidInput(f"`c` must have shape ({self.lmax + 1},), got {c.shape}.")
        dc = self._rhs(None, 0.0, c)
        lin = self._linear(None)
        return dc if lin is None else dc + lin * c


def _evaluate(rho0, x):
    try:
        return np.asarray(rho0(x), dtype=float)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"`rho0` could not be evaluated on points of shape {x.shape}: {exc}") from None


__all__ = ["Gegenbauer", "node_count"]
