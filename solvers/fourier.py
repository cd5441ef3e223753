"""`FourierCircle`: the mean-field PDE on S^1 by a Fourier pseudo-spectral method ((7.1) for a density; docs/mathematics.md §2).

    ∂_t ρ + ∂_θ(ρ v) = ν ∂²_θ ρ,   ρ(θ) = Σ_{|k|<=K} c_k e^{ikθ}   (c_k relative to σ = dθ/2π, docs/mathematics.md §2),

    (USA)  v = s ∂_θ φ,             φ_k = (I_k(β)/β) c_k                (3.10),
    (SA)   v = (s/β) ∂_θ log(K*ρ) = s ∂_θ(K*ρ/β) / (K*ρ),  (K*ρ)_k = I_k(β) c_k   ((3.4), (3.7)),

with s = v for V = v·I (s = +1 attractive, −1 repulsive). At β = 0 both reduce to v = s ∂_θ⟨x, m⟩
(4.1): the multipliers come from `meanfield.velocity_multipliers` (a_k/β, finite at β = 0).

Discretisation:

* the state is c_1..c_K (complex); the mass c_0 is a constant of the solver, so ∂_t c_0 = 0 exactly;
* ρ, v (and for SA the scaled Z̃ = e^{-β} K*ρ and ∂_θZ̃/β, so that e^β never appears) are
  synthesised on a padded grid of M >= 3K + 1 points by one batched real inverse FFT; the flux ρv
  is formed there and one real FFT gives its coefficients (the 3/2 rule: the product of two
  degree-K fields is de-aliased exactly; for SA up to the spectrally small tail of 1/Z̃);
  ∂_t c_k = −ik (ρv)_k;
* noise −ν k² is the diagonal linear part, applied exactly by the integrating factor of
  `solvers.timestepping` (no stiffness limit);
* under-resolution: after every step the spectral tail (`solvers.spectral`) must stay below
  ``tail_tol``; otherwise the run stops with `UnderResolved` (carrying the Solution so far), or,
  with ``modes="auto"``, continues from the current state with twice the modes, up to ``max_modes``;
* stability: the explicit pair is stable on the imaginary axis only for |hλ| below about 0.9
  (DOPRI5) or 1.7 (BS32), and a mode k is advected at |λ| <= k·max|v|; the step is therefore
  capped at 0.8/(K·max|v|) (an advective CFL bound, `_stable_step`), so that rounding in the top
  modes cannot grow while the error control looks elsewhere, and default tolerances stay loose.
"""
from dataclasses import dataclass

import numpy as np
import scipy.fft as sfft

from meanfield.validation import check_callable, check_density_values, check_real
from meanfield.errors import InvalidInput, SolverError
from meanfield.spaces.quadrature import trapezoid
from meanfield.representations.fourier import FourierSeries
from .base import Run, Solver
from meanfield.spaces.fourier import FourierBasis, fourier_grid_size, midpoint_coefficients
from .bases import ResolutionPolicy
from .handover import HandOverToCharacteristics
from .layered import POSITIONS_POLICY, Layered, check_positions_model, signature_of_init
from .spectral import (DEFAULT_TAIL_TOL, AutoResolution, TailMonitor, check_coefficients, energy_diagnostics,
                       GridSinkhorn, check_grid_sinkhorn, check_sphere_dim, head_velocities, noise_dissipation,
                       spectral_tail)
from meanfield.observables.wasserstein import w1_to_uniform

STABLE_CFL = 0.8         # |h·k·v| below the imaginary-axis stability limit of the adaptive pairs
BYTES_PER_MODE = 800     # measured peak working memory of a run per mode (stages, padded grid, W1 measure)


def padded_size(modes, dealias=1.5):
    """Product-grid size M >= ceil(dealias·2K) + 1 (3K + 1 for the 3/2 rule), with small prime factors."""
    return fourier_grid_size(int(np.ceil(dealias * 2 * int(modes))))


@dataclass(eq=False, slots=True)
class FourierRun(Run):
    """The per-run values of a `FourierCircle` run: the state is c_1..c_K, the mass c_0 is constant."""

    mass0: float = 1.0                # c_0, the mass of the density


class FourierCircle(HandOverToCharacteristics, AutoResolution, Solver):
    """Fourier pseudo-spectral solver on S^1 (``model.dim == 2``, zonal models: Q^T K = I, V = v·I).

    Parameters
    ----------
    model : meanfield.Model with dim = 2 and ``model.is_zonal``.
    modes : int >= 8, or "auto".
        K, the highest Fourier mode kept (the state holds c_k, |k| <= K). K must resolve the kernel:
        I_k(β)/I_0(β) < 1e-14 for k > K (`meanfield.transformer.kernels.minimum_degree`); a too small K raises
        ValueError naming the minimum. ``"auto"`` starts at max(64, that minimum rounded up to a
        power of two) and doubles K (continuing from the current state) whenever the spectral tail
        exceeds ``tail_tol``, up to ``max_modes``; beyond the cap it raises `UnderResolved`.
    tail_tol : float > 0
        Tolerance of the spectral tail (relative L²(σ) norm of the top third of the modes,
        `solvers.spectral.spectral_tail`), checked after every step. Default 1e-6.
    dealias : float >= 1.5
        Padding factor: the product grid has M >= dealias·2K + 1 points (1.5 = the 3/2 rule).
    max_modes : int, cap of ``modes="auto"`` (default 16384).
    w1 : bool
        Record the W1 distances to σ and to the nearest Dirac mass at saved times (default True;
        `meanfield.w1_to_uniform` on the midpoint measure with max(4(2K+1), 2048) points against σ
        on the same midpoints, and the exact `FourierSeries.w1_to_dirac`: ~2 ms per saved time).
    positions : int or "auto", optional
        Masked models only (``Model(mask="causal")``, docs/causal.md): M, a multiple of 8, the number
        of quadrature nodes in the token position σ ∈ (0, 1] (one density per node,
        `solvers.layered`), or "auto" (doubled when the σ-resolution is lost, up to ``max_positions``).
        Required for a masked model, refused for an unmasked one.
    max_positions : int
        Cap of ``positions="auto"`` (default 1024).
    {threads}

    Raises
    ------
    UnsupportedModel
        ``model.dim`` != 2, a non-zonal model, or a model part the solver does not take (see Notes).
    ValueError
        ``modes`` below the kernel's minimum or out of range, a bad ``tail_tol``, ``dealias`` or
        ``positions``.

    Notes
    -----
    Steppers: "dopri5" (default) and "bs32", adaptive with the noise −νk² applied exactly.
    Initial states: a density callable, a `FourierSeries` Solution (continued), or coefficients
    c_0..c_K (complex, σ-relative, as ``sol.data[i]``; fewer modes are zero-padded).
    Diagnostics recorded at every saved time (``sol.diagnostics``): ``mass``, ``min_density`` (on the
    padded grid), ``spectral_tail``, ``energy`` (E_β, (3.5)), ``energy_rate`` (dE/dt of the discrete
    flow, exact derivative of the spectral energy), ``energy_rate_identity`` ((3.6): s∫Z|v|²ρ dσ
    for SA, s∫|v|²ρ dσ for USA, plus the noise term; docs/mathematics.md §4), ``energy_rate_error``
    (their relative difference), ``w1_to_uniform``, ``w1_to_dirac``, and ``modes`` (K in use).

    Solve option ``on_underresolved``: "auto" (default: "raise"), "raise" (`UnderResolved`), "lagrangian" or a
    `solvers.Lagrangian` (without noise: when the density is no longer resolved, the run hands over to
    the characteristics from its last state and returns one Solution over all of ``t_eval``, its
    ``segments`` the spectral and the Lagrangian part; docs/lagrangian.md).

    ``Model(normalization="ngpt" | "sqrt-depth")``: the velocity is v/s (`SpectralVelocity.scaled`).
    ``Model(mlp=...)`` ("post", "sqrt-depth"): the feed-forward term's ⟨P_x F, e_θ⟩ adds to v before
    the speed, on the padded grid (`SpectralVelocity.feedforward`); the recorded ``energy_rate_identity``
    is then s∫Z⟨v_attention, v⟩ρ dσ (docs/feedforward.md).

    Examples
    --------
    A small perturbation ε cos θ of the uniform state grows at the exact linear rate ς_1
    (docs/mathematics.md §5), and the mass stays 1:

    >>> import numpy as np
    >>> import meanfield as mf, solvers
    >>> model = mf.Model(beta=1.0, dim=2)
    >>> rho0 = mf.densities.perturbed_uniform(1e-3, 1, dim=2)
    >>> sol = solvers.FourierCircle(model, modes=16).solve(rho0, [0.0, 1.0], progress=False)
    >>> sol.data.shape                                  # c_0..c_K, complex, at 2 saved times
    (2, 17)
    >>> growth = abs(sol.data[-1][1] / sol.data[0][1])
    >>> round(float(growth), 5), round(float(np.exp(mf.linear_growth_rates(model, 1)[1])), 5)
    (1.56266, 1.56266)
    >>> np.round(sol.mass, 12).tolist()
    [1.0, 1.0]

    A continued run starts at the last saved time, and with ``history=True`` returns both; bad input
    raises ValueError naming the argument:

    >>> more = solvers.FourierCircle(model, modes=16).solve(sol, [1.0, 2.0], history=True, progress=False)
    >>> more.t.tolist()
    [0.0, 1.0, 2.0]
    >>> solvers.FourierCircle(model, modes=16).solve(lambda x: 2.0 * rho0(x), [0.0, 1.0], progress=False)
    Traceback (most recent call last):
    ...
    meanfield.errors.InvalidInput: `rho0` must have mass ∫ρ dσ = 1 ... it has 2.0. Pass normalize=True to rescale.
    """

    normalizations = ("post", "ngpt", "sqrt-depth")      # speeds of t and of the field (docs/normalization.md)
    takes_mlp, mlp_normalizations = True, ("post", "sqrt-depth")    # P_x F in the flux (docs/feedforward.md)
    takes_schedule = True       # a piece's multipliers at each breakpoint (AutoResolution._adopt_model)
    # K >= 8 (at most 2^26); "auto" starts at 64 modes and stops at 16384 by default
    policy = ResolutionPolicy("modes", "max_modes", low=8, auto_start=64, auto_cap=16384, high=2 ** 26,
                              memory=lambda K: BYTES_PER_MODE * K)
    auto_resolution = (policy.name, policy.cap_name)
    config_name, config_aliases = "fourier", ("spectral-circle",)
    run_type = FourierRun
    mass_by_construction = True     # c_0 is not evolved: a report notes the mass
    takes_mask = True           # with `positions`: the layered equation (`LayeredFourierCircle`)
    attentions = ("softmax", "sinkhorn")      # Sinkhorn: the plan of the grid measure (docs/attention.md)

    @classmethod
    def examples(cls):
        """Small runs (`solvers.Solver.examples`): a fixed and an automatic resolution."""
        from meanfield.measures import densities
        from meanfield.transformer.model import Model

        vmf = densities.von_mises_fisher([1.0, 0.0], 2.0)
        return {"FourierCircle": (lambda: cls(Model(beta=3.0, dim=2), modes=64),
                                  [vmf, densities.perturbed_uniform(0.2, 2)], {}),
                "FourierCircle-auto": (lambda: cls(Model(beta=3.0, dim=2), modes="auto", w1=False),
                                       [densities.von_mises_fisher([1.0, 0.0], 40.0), vmf], {})}

    def __new__(cls, *args, positions=None, **options):
        if cls is FourierCircle and positions is not None:
            cls = LayeredFourierCircle
        return super().__new__(cls)

    def __init__(self, model, modes=512, *, tail_tol=DEFAULT_TAIL_TOL, dealias=1.5,
                 max_modes=16384, w1=True, positions=None,
                 max_positions=POSITIONS_POLICY.auto_cap, threads=None):
        Solver.__init__(self, model, threads)
        check_positions_model(model, positions)
        check_sphere_dim(model, 2, "FourierCircle", "SphericalHarmonics")
        self._require_zonal()
        check_grid_sinkhorn(model, "the circle")
        self.tail = TailMonitor(tail_tol, "modes")
        self.dealias = check_real(dealias, "dealias", low=1.5)
        self.w1 = bool(w1)
        self._setup(self._choose_resolution(modes, max_modes))

    def _setup(self, K):
        """The basis with its padded grid (M >= dealias·2K + 1 points) and the multipliers for K modes."""
        self.basis = FourierBasis(K, int(np.ceil(self.dealias * 2 * K)), self.threads)
        self.modes, self.M = K, self.basis.M
        self.k = self.basis.wavenumbers
        self._ik = 1j * self.k
        self._setup_model()

    def _setup_model(self):
        """The multipliers of the model for the basis's K modes (a piece of a schedule keeps the basis)."""
        self.head_fields = head_velocities(self.model, self.modes)
        self.field = self.head_fields[0]
        self._dphi = self._ik * self.field.potential
        self._sinkhorn = (GridSinkhorn(self.model, self.basis.points, self.basis.weights, self.basis.frame)
                          if self.model.attention == "sinkhorn" else None)       # the grid's Sinkhorn attention

    def _grid_fields(self, run, c, field=None, t=0.0, feedforward=True):
        """ρ, Z̃ (SA; None for USA), v and the inverse speed s⁻¹ of the normalisation on the padded grid
        θ_j = 2πj/M, for coefficients c_0..c_K (last axis; leading axes are a batch of densities) at time
        t; the velocity is that of the density ``field`` (default c itself; a layered run passes its
        prefix means, `solvers.layered`), plus s⁻¹⟨P_x F, e_θ⟩ of a feed-forward term unless
        ``feedforward`` is False."""
        if self.model.attention == "sinkhorn":
            return self._sinkhorn_fields(run, c, feedforward)
        K, M, radial = self.modes, self.M, self.field.radial
        fields = field if isinstance(field, list) else [c if field is None else field]   # one per head
        per = 2 if self.field.normalized else 1
        rows = 1 + per * len(fields) + (radial is not None)
        shape = c.shape[:-1] + (rows, M // 2 + 1)
        spec = run.workspace.get("spec")
        if spec is None or spec.shape != shape:
            spec = run.workspace["spec"] = np.zeros(shape, dtype=complex)
        spec[..., 0, :K + 1] = c
        for h, (head, f) in enumerate(zip(self.head_fields, fields)):
            spec[..., 1 + per * h, :K + 1] = (self._dphi if h == 0 else self._ik * head.potential) * f
            if self.field.normalized:
                spec[..., 2 + per * h, :K + 1] = head.kernel * f
        if radial is not None:
            spec[..., -1, :K + 1] = radial * fields[0]
        g = self.basis.synthesis(spec)
        z = g[..., 2, :] if self.field.normalized else None
        if z is not None:
            run.workspace["zmin"] = min(float(g[..., 2 + per * h, :].min()) for h in range(len(fields)))
        v = self.field.velocity(g[..., 1, :], z)
        for h in range(1, len(fields)):
            v = v + self.head_fields[h].velocity(g[..., 1 + per * h, :], g[..., 2 + per * h, :] if per == 2 else None)
        v, inverse = self.field.scaled(v, v * v, t, None if radial is None else g[..., -1, :], z)
        mlp = self.field.feedforward(self.basis, self.model.feedforward) if feedforward else None
        return g[..., 0, :], z, (v if mlp is None else v + inverse * mlp[0]), inverse

    def _sinkhorn_fields(self, run, c, feedforward=True):
        """ρ, None, v, 1.0 on the padded grid under Sinkhorn attention: v_j = V⟨Σ_k A_jk x_k, e_θ⟩ for the plan
        of the grid measure Σ_j (ρ_j/M) δ_{θ_j} (`solvers.spectral.GridSinkhorn`); ρ <= 0 somewhere on the
        grid makes the plan undefined: the step is rejected (``zmin``) and the monitor stops the run."""
        rho = self.basis.synthesis(c)
        v = self._sinkhorn.velocity(run, rho)[..., 0, :]
        mlp = self.field.feedforward(self.basis, self.model.feedforward) if feedforward else None
        return rho, None, (v if mlp is None else v + mlp[0]), 1.0

    def _full(self, run, u):
        c = run.workspace.get("c")
        if c is None or c.shape[0] != self.modes + 1:
            c = run.workspace["c"] = np.zeros(self.modes + 1, dtype=complex)
        c[0] = run.mass0
        c[1:] = u
        return c

    # -- Solver contract ---------------------------------------------------------------------------
    def _representation(self, run):
        return FourierSeries(self.modes)

    def _initial_from_callable(self, run, rho0, normalize):
        """c_1..c_K of ρ0 by the midpoint rule on N >= 4K points (exact for modes < N − K); the
        mass c_0 is kept on the run. Checks finiteness, ρ0 >= 0 on the grid and mass 1 within 1e-6."""
        check_callable(rho0, "rho0")
        K = self.modes
        N = int(sfft.next_fast_len(max(4 * K + 4, 256)))
        q = trapezoid(N)
        try:
            vals = np.asarray(rho0(q.points), dtype=float)
        except (TypeError, ValueError) as exc:
            raise InvalidInput(f"`rho0` could not be evaluated on points of shape {q.points.shape}: {exc}") from None
        if vals.shape != (N,):
            raise InvalidInput(f"`rho0` must return one value per point (shape ({N},)), got shape {vals.shape}.")
        vals, _ = check_density_values(vals, "rho0", quadrature_weights=q.weights, normalize=normalize)
        c = midpoint_coefficients(vals, K)
        run.mass0 = float(c[0].real)
        return c[1:].copy()

    def _initial_from_grid(self, run, grid, normalize):
        """Values at the midpoints θ_j = 2π(j + ½)/n (`meanfield.measures.densities.on_grid`): their exact discrete
        Fourier coefficients c_k = (1/n) Σ_j ρ_j e^{−ikθ_j} for k < n/2 (and k <= modes), no interpolation."""
        g = grid.unit_mass(normalize, 2)
        J = min(self.modes, (g.values.size - 1) // 2)
        c = midpoint_coefficients(g.values, J)
        run.mass0 = float(c[0].real)
        u = np.zeros(self.modes, dtype=complex)
        u[:J] = c[1:]
        return u

    def _initial_from_data(self, run, data, normalize):
        """Coefficients c_0..c_J (J <= K, complex, σ-relative): zero-padded to K modes."""
        c = np.asarray(data)
        if c.ndim != 1 or c.size < 2 or c.size > self.modes + 1 or not np.all(np.isfinite(c)):
            raise InvalidInput(f"`initial` as coefficients must be a finite 1-D array c_0..c_J with 1 <= J <= "
                             f"modes={self.modes}, got shape {c.shape}.")
        c = np.asarray(c, dtype=complex)
        n = 4 * (2 * c.size - 1)
        minimum = FourierSeries(c.size - 1).grid_values(c, n).min()
        c = c * check_coefficients(c[0].real, minimum, normalize=normalize, tail_tol=self.tail.tol)
        run.mass0 = float(c[0].real)
        u = np.zeros(self.modes, dtype=complex)
        u[:c.size - 1] = c[1:]
        return u

    def _rhs(self, run, t, u):
        """∂_t c_k = −ik (ρv)_k, k = 1..K ((3.1); docs/mathematics.md §2); (ρv)_k from the padded grid."""
        return self._transport(run, self._full(run, u), t=t)

    def _transport(self, run, c, field=None, t=0.0):
        """−ik (ρv)_k, k = 1..K, for coefficients c (..., K + 1) moved by the velocity of ``field`` (default c)."""
        rho, _, v, _ = self._grid_fields(run, c, field, t)
        run.workspace["v"] = v          # the stability cap reads it once per step (`_stable_step`)
        if (self.field.normalized or self.model.attention == "sinkhorn") and not run.workspace["zmin"] > 0:
            return np.full(c.shape[:-1] + (self.modes,), np.nan, dtype=complex)   # K*ρ <= 0: reject the step
        f = self.basis.analysis(rho * v)[..., 1:]
        f *= -self._ik[1:]
        return f

    @classmethod
    def from_segment(cls, segment):
        return cls(segment.model, segment.representation.modes, w1=False)

    def _tracer_velocity(self, run, t, u, points):
        """v(θ)(−sin θ, cos θ) at the tracers, the velocity of `_grid_fields` at their angles (Sinkhorn: the
        plan extended to the tracers by the grid's potentials, `meanfield.sums.sinkhorn.sinkhorn_output`)."""
        c = self._full(run, u)
        if self.model.attention == "sinkhorn":
            return self._sinkhorn.at(run, self._sinkhorn_fields(run, c, feedforward=False)[0], points)
        rows = [self._dphi * c] + ([self.field.kernel * c] if self.field.normalized else [])
        g = self.basis.values_at(np.stack(rows), points)
        v = self.field.velocity(g[0], g[1] if self.field.normalized else None)
        return v[:, None] * np.stack([-points[:, 1], points[:, 0]], axis=-1)

    def _linear(self, run):
        if self.model.noise == 0.0:
            return None
        return -self.model.noise * self.basis.laplacian[1:]

    def _stable_step(self, run, u):
        v = run.workspace.get("v")
        if v is None:
            return np.inf
        return STABLE_CFL / (self.modes * max(float(v.max()), -float(v.min()), 1e-300))

    def _stats(self, run):
        return {"modes_final": self.modes}

    def _to_data(self, run, u):
        return self._full(run, u).copy()

    def _power(self, run, u):
        p = np.empty(self.modes + 1)
        p[0] = run.mass0 ** 2
        p[1:] = 2 * (u.real ** 2 + u.imag ** 2)
        return p

    def _monitor(self, run, t, u):
        # (SA) K*ρ > 0 on the grid: the last stage of the FSAL pair was evaluated at this state,
        # and a stage with K*ρ <= 0 returns NaN (the step is rejected), so the cached minimum decides
        if self.field.normalized and not run.workspace.get("zmin", 1.0) > 0:
            raise SolverError(f"K*ρ (ρ under Sinkhorn attention) is not positive on the grid at t={t:.6g} (min {run.workspace['zmin']:.3g}), so "
                              "log(K*ρ) is undefined: the discrete density has large negative parts; "
                              "increase `modes`.")
        self.tail.check_or_refine(t, self._power(run, u), self.modes, self.refinable)

    def _diagnostics(self, run, t, u):
        """Mass, E_β, min ρ, tail, dE/dt (discrete) vs the identity (3.6), W1 to σ and to δ; under Sinkhorn
        attention the energy of its flow (`_sinkhorn_diagnostics`) in place of E_β and (3.6)."""
        c = self._full(run, u).copy()
        power = self._power(run, u)
        if self.model.attention == "sinkhorn":
            return self._sinkhorn_diagnostics(run, c, power)
        rho, z, v, inverse = self._grid_fields(run, c, t=t, feedforward=False)
        mlp = self.field.feedforward(self.basis, self.model.feedforward)   # the model's, not head 0's
        du = self._rhs(run, t, u)
        lin = self._linear(run)
        if lin is not None:
            du = du + lin * u
        cross = np.zeros(self.modes + 1)
        cross[1:] = 2 * (u.real * du.real + u.imag * du.imag)
        beta, s = self.model.beta, self.field.s
        integrand = rho * v * (v if mlp is None else v + inverse * mlp[0]) / inverse   # ρ⟨X, u⟩, u the velocity
        if self.field.normalized:
            integrand = integrand * z * self.field.unscale
        ident = s * float(np.mean(integrand)) + noise_dissipation(beta, 2, self.model.noise, power)
        out = energy_diagnostics(beta, 2, power, cross, ident)
        out.update({"mass": float(c[0].real), "min_density": float(rho.min()),
                    "spectral_tail": float(spectral_tail(power)), "modes": float(self.modes)})
        if self.w1:
            # midpoint measure on n points; σ's reference on the same midpoints makes the W1 to σ a
            # midpoint rule for ∫|F − θ/2π − median| (error O(n^-2) rather than O(1/n))
            n = max(4 * (2 * self.modes + 1), 2048)
            rep = FourierSeries(self.modes)
            out["w1_to_uniform"] = float(w1_to_uniform(rep.measure(c, n=n), n_reference=n))
            out["w1_to_dirac"] = rep.w1_to_dirac(c)[0]   # exact (trigonometric polynomial)
        return out

    def _sinkhorn_diagnostics(self, run, c, power):
        """Mass, min ρ, tail, the iterations so far and ``sinkhorn_energy`` (`solvers.spectral.GridSinkhorn`;
        with V = I the flow is the gradient ascent of that energy, docs/attention.md)."""
        rho = self._sinkhorn_fields(run, c, feedforward=False)[0]
        out = {"mass": float(c[0].real), "min_density": float(rho.min()), "spectral_tail": float(spectral_tail(power)),
               "modes": float(self.modes)}
        out.update(self._sinkhorn.diagnostics(run, rho))
        return out

    # -- helpers -----------------------------------------------------------------------------------
    def coefficients(self, rho0, normalize=False):
        """c_0..c_K of the projection of ``rho0`` (the initial state of `solve`)."""
        run = self.start(rho0, normalize=normalize)
        return self._full(run, run.y0).copy()

    def _check_c(self, c):
        c = np.asarray(c, dtype=complex)
        if c.shape != (self.modes + 1,):
            raise InvalidInput(f"`c` must have shape ({self.modes + 1},), got {c.shape}.")
        return c

    def velocity(self, c):
        """(θ_j, v(θ_j)) on the padded grid θ_j = 2πj/M for coefficients c_0..c_K ((3.4)/(3.10))."""
        c = self._check_c(c)
        run = self.start(c, normalize=True)
        return self.basis.angles, self._grid_fields(run, c)[2].copy()

    def rhs(self, c):
        """∂_t c_k, k = 0..K (transport plus noise; ∂_t c_0 = 0) for coefficients c_0..c_K."""
        c = self._check_c(c)
        run = self.start(c / c[0].real, normalize=False)
        run.mass0 = float(c[0].real)
        u = c[1:].copy()
        du = self._rhs(run, 0.0, u)
        lin = self._linear(run)
        if lin is not None:
            du = du + lin * u
        return np.concatenate([[0.0], du])


FourierCircle.__signature__ = signature_of_init(FourierCircle)


class LayeredFourierCircle(Layered, FourierCircle):
    """`FourierCircle` of a masked model (``positions=M``): the layered equation of `solvers.layered`.

    The state is c_0..c_K at each of the M positions (M, K + 1); the masses c_0 have derivative 0 exactly.
    Built by ``FourierCircle(model, modes, positions=M)``; ``max_positions`` caps ``positions="auto"``.
    """

    density_ndim = 1

    def __init__(self, model, modes=512, *, positions=None, max_positions=POSITIONS_POLICY.auto_cap, **options):
        FourierCircle.__init__(self, model, modes, positions=positions, **options)
        self._setup_positions(positions, max_positions)

    def _layer_state(self, run, u):
        return self._full(run, u).copy()

    def _rhs(self, run, t, c):
        """∂_t c_k(s_i) = −ik (ρ(s_i) v[ρ̄(s_i)])_k, k = 1..K, at every node at once; ∂_t c_0 = 0."""
        out = np.zeros_like(c)
        out[:, 1:] = self._transport(run, c, self._prefix(c))
        return out

    def _linear(self, run):
        return None if self.model.noise == 0.0 else -self.model.noise * self.basis.laplacian

    def _layer_power(self, run, c):
        return FourierSeries(self.modes).power(c)

    def _to_data(self, run, c):
        return np.array(c, copy=True)


__all__ = ["FourierCircle", "LayeredFourierCircle", "padded_size"]
