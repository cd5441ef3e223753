"""`SphericalHarmonics`: the mean-field PDE on S^2 in spherical harmonics ((3.7), (3.10); docs/mathematics.md §2–§3).

    ∂_t ρ = −div_S(ρ X[ρ]) + ν Δ_S ρ,   X = s∇_S Φ,
    Φ = (K*ρ)/β (USA, (3.10)),   Φ = (1/β) log(K*ρ) (SA, (3.4), (3.7)),

with s = v for V = v·I (s = ±1: attractive / repulsive) and K*ρ = Σ_l i_l(β) ρ_l (Funk–Hecke, docs/mathematics.md §3).

Discretisation (pseudo-spectral, ducc0.sht on a Gauss–Legendre grid):

* the state is the complex ducc0 a_lm of ρ up to ``lmax`` (healpy layout, dA-orthonormal; see
  `meanfield.representations.harmonics` for the exact map to the stored real '4pi' coefficients);
* the grid has ntheta = ⌊3·lmax/2⌋ + 1 Gauss–Legendre rings and nphi >= 3·lmax + 1 longitudes, so
  every product of two degree-lmax fields, tested against a degree-lmax harmonic, is integrated
  exactly (2·ntheta − 1 >= 3·lmax): (USA) is dealiased exactly, (SA) up to the (spectrally small)
  non-polynomial factor 1/(K*ρ);
* the flux divergence uses spin-1 transforms: ∇Φ is one spin-1 ("DERIV1") synthesis of Φ_lm,
  the flux F = ρ X is formed on the grid, and div F has coefficients −sqrt(l(l+1))·E_lm[F], with
  E_lm the gradient (E-mode) part of the spin-1 analysis of F (ducc0's "DERIV1" adjoint: the curl
  part is not computed). Transforms per right-hand side:
    - (USA): 1 scalar synthesis (ρ) + 1 spin-1 synthesis (∇Φ) + 1 spin-1 analysis;
    - (SA):  2 scalar syntheses (ρ, e^{-β}K*ρ) + 1 spin-1 synthesis (∇ e^{-β}K*ρ/β) + 1 spin-1
      analysis, with ∇Φ = ∇(K*ρ/β)/(K*ρ) (scaled Bessel functions);
  the kernel's fields (e^{-β}K*ρ, ∇Φ) are synthesised at the degree beyond which they vanish to
  rounding (`solvers.spectral.kernel_band`), which for a smooth kernel is far below lmax;
  (the scalar-only route ½[Δ(ρΦ) + ρΔΦ − ΦΔρ] needs 4 syntheses + 2 analyses, and for (SA) an
  extra analysis of log K*ρ: slower);
* ρ_00 (the mass) has derivative exactly 0; noise −ν l(l+1) is the diagonal linear part, applied
  exactly by the integrating factor of `solvers.timestepping`;
* β = 0: Φ_1 = ρ_1/3, i.e. X = s P_x m (4.1), from `velocity_multipliers` (finite at β = 0);
* ``lmax="auto"`` starts at a coarse degree and, when the spectral tail exceeds ``tail_tol``,
  continues from the current state at twice the degree (up to ``max_lmax``), keeping checkpoints
  and partial results across the refinements.
"""
from types import SimpleNamespace

import numpy as np
from ducc0.sht import analysis_2d

from meanfield.validation import check_callable, check_density_values, check_int
from meanfield.errors import InvalidInput, SolverError
from meanfield.threads import blas_single_threaded, renamed_threads, share_out
from meanfield.representations.harmonics import (SphericalHarmonicSeries, alm_cross, alm_power, alm_to_real,
                                                 real_to_alm)
from .base import Solver
from meanfield.spaces.harmonics import SphericalHarmonicBasis
from meanfield.sums.spectralsums import EPSILON, sphere_angles, tangent_vectors
from .bases import ResolutionPolicy
from .handover import HandOverToCharacteristics
from .layered import POSITIONS_POLICY, Layered, check_positions_model, signature_of_init
from .spectral import (DEFAULT_TAIL_TOL, AutoResolution, GridSinkhorn, TailMonitor, check_coefficients,
                       check_grid_sinkhorn, check_sphere_dim, energy_diagnostics, head_velocities,
                       noise_dissipation, spectral_tail)
from meanfield.observables.wasserstein import w1_to_dirac, w1_to_uniform

BYTES_PER_DEGREE2 = 800  # measured peak working memory of a run per lmax² (grids, stages, fine diagnostics grid)


AUTO_CAP = 127          # the default cap of lmax="auto" (see `SphericalHarmonics`)


class SphericalHarmonics(HandOverToCharacteristics, AutoResolution, Solver):
    """Spectral solver on S^2 (model.dim == 3, zonal models: Q^T K = I, V = v·I).

    Parameters
    ----------
    model : meanfield.Model with dim = 3 and ``model.is_zonal``.
    lmax : int >= 4, at least `meanfield.transformer.kernels.minimum_degree(beta, 3)` (the kernel must be
        resolved: i_l(β)/i_0(β) < 1e-14 beyond lmax), or "auto" (start at max(31, that minimum),
        double on a tail alarm, up to ``max_lmax``; beyond it `UnderResolved`).
    threads : int >= 1, threads of ducc0's transforms (default: `meanfield.threads.default_threads`;
        ``nthreads`` is its older name).
    tail_tol : spectral-tail tolerance of `solvers.spectral.TailMonitor` (`UnderResolved` beyond it).
    max_lmax : cap of ``lmax="auto"`` (default `AUTO_CAP` = 127). Beyond the cap a clustering run hands
        over to the characteristics (``on_underresolved``), which carry the density exactly: refining
        further costs steps (the step falls like 1/lmax) and sharpens the state the labels must then
        resolve (at lmax 255 the energy at t = 5 of docs/sphere.md's two caps is off by 1.6e-3, at 127 by 5e-8).
    w1 : bool, record W1 to the uniform measure and to the nearest Dirac mass at saved times
        (default False: on S^2 the exact transport LP costs ~0.1–1 s per saved time).
    w1_points : int, size of the quadrature measure used for the W1 diagnostics (default 512;
        W1 to σ uses `mf.w1_to_uniform` with a 1024-point Fibonacci reference, exact LP).
    positions : int or "auto", optional
        Masked models only (``Model(mask="causal")``, docs/causal.md): M, a multiple of 8, the number
        of quadrature nodes in the token position σ ∈ (0, 1], or "auto" (doubled up to ``max_positions``).
    max_positions : int
        Cap of ``positions="auto"`` (default 1024).
    nthreads : int >= 1, optional
        The older name of ``threads``.

    Raises
    ------
    UnsupportedModel
        ``model.dim`` != 3, a non-zonal model, or a model part the solver does not take (see Notes).
    ValueError
        ``lmax`` below the kernel's minimum or out of range, both ``threads`` and ``nthreads``, a bad
        ``tail_tol`` or ``positions``.

    Notes
    -----
    Steppers "dopri5" (default) and "bs32". Initial states: a density callable, a harmonics
    Solution (continued), or real coefficients clm (2, L+1, L+1) with L <= lmax (as ``sol.data[i]``).

    Solve option ``on_underresolved``: "auto" (default: "lagrangian" without noise, else "raise"),
    "raise" (`UnderResolved`), "lagrangian" or a `solvers.Lagrangian`: when the density is no longer
    resolved (clustering), the run hands over to the characteristics from its last state, warns
    (`solvers.handover.HandOver`) and returns one Solution over all of ``t_eval``, its ``segments``
    the spectral and the Lagrangian part (docs/lagrangian.md). With ``lmax="auto"`` it first refines up
    to ``max_lmax``.

    ``Model(normalization="ngpt" | "sqrt-depth")``: the velocity is X/s (`SpectralVelocity.scaled`).
    ``Model(mlp=...)`` ("post", "sqrt-depth"): the feed-forward term P_x F adds to X before the speed,
    on the dealiasing grid (`SpectralVelocity.feedforward`), inside the one spin-1 analysis of the flux;
    the recorded ``energy_rate_identity`` is then s∫Z⟨X, u⟩ρ, u the velocity (docs/feedforward.md).

    Examples
    --------
    A small degree-1 perturbation of the uniform state grows at the exact linear rate ς_1
    (docs/mathematics.md §5):

    >>> import numpy as np
    >>> import meanfield as mf, solvers
    >>> model = mf.Model(beta=1.0, dim=3)
    >>> rho0 = mf.densities.perturbed_uniform(1e-3, 1, order=0)        # 1 + ε Y_10
    >>> sol = solvers.SphericalHarmonics(model, lmax=16).solve(rho0, [0.0, 1.0], progress=False)
    >>> sol.data.shape                                  # clm (2, L+1, L+1) at 2 saved times
    (2, 2, 17, 17)
    >>> growth = sol.data[-1][0, 1, 0] / sol.data[0][0, 1, 0]
    >>> round(float(growth), 5), round(float(np.exp(mf.linear_growth_rates(model, 1)[1])), 5)
    (1.87025, 1.87025)
    """

    default_handover = "lagrangian"
    mass_by_construction = True     # ρ_00 is not evolved: a report notes the mass

    normalizations = ("post", "ngpt", "sqrt-depth")      # speeds of t and of the field (docs/normalization.md)
    attentions = ("softmax", "sinkhorn")      # Sinkhorn: the plan of the grid measure (docs/attention.md)
    takes_mlp, mlp_normalizations = True, ("post", "sqrt-depth")    # P_x F in the flux (docs/feedforward.md)
    takes_schedule = True       # a piece's multipliers at each breakpoint (AutoResolution._adopt_model)
    # 4 <= L <= 8191; the bandwidth is L + 1; "auto" starts at the kernel's minimum degree itself (O(L³)
    # transforms), at least 31, and stops at 1023 at most
    policy = ResolutionPolicy("lmax", "max_lmax", low=4, auto_start=31, auto_cap=1023, high=8191, offset=1,
                              round_start=False, memory=lambda L: BYTES_PER_DEGREE2 * (L + 1) ** 2)
    auto_resolution = (policy.name, policy.cap_name)
    config_name, config_aliases = "harmonics", ("spectral-sphere",)
    takes_mask = True           # with `positions`: the layered equation (`LayeredSphericalHarmonics`)

    def __new__(cls, *args, positions=None, **options):
        if cls is SphericalHarmonics and positions is not None:
            cls = LayeredSphericalHarmonics
        return super().__new__(cls)

    @classmethod
    def examples(cls):
        """Small runs (`solvers.Solver.examples`)."""
        from meanfield.measures import densities
        from meanfield.transformer.model import Model

        return {"SphericalHarmonics": (lambda: cls(Model(beta=2.0, dim=3), lmax=24),
                                       [densities.von_mises_fisher([0.0, 0.6, 0.8], 2.0),
                                        densities.perturbed_uniform(0.2, 2, order=1)], {})}

    def __init__(self, model, lmax=63, *, threads=None, tail_tol=DEFAULT_TAIL_TOL,
                 max_lmax=AUTO_CAP, w1=False, w1_points=512, positions=None,
                 max_positions=POSITIONS_POLICY.auto_cap, nthreads=None):
        Solver.__init__(self, model, renamed_threads(threads, nthreads))
        check_positions_model(model, positions)
        check_sphere_dim(model, 3, "SphericalHarmonics", "FourierCircle")
        self._require_zonal()
        check_grid_sinkhorn(model, "the sphere")
        L = self._choose_resolution(lmax, max_lmax)
        self.tail = TailMonitor(tail_tol, "lmax")
        self.w1 = bool(w1)
        self.w1_points = check_int(w1_points, "w1_points", low=16)
        self._setup(L)

    def _setup(self, L):
        """The dealiasing basis (Gauss–Legendre grid exact for degree 3L: 2·ntheta − 1 >= 3L, nphi >= 3L + 1),
        the finer one of the projections and diagnostics (degree 4L + 3), and the multipliers."""
        self.lmax = L
        self.basis = basis = SphericalHarmonicBasis(L, 3 * L, self.threads)
        self._fine = {}           # the finer basis, built on first use and shared by the pieces of a schedule
        self.ntheta, self.nphi = basis.ntheta, basis.nphi
        self.theta, self.points, self.weights = basis.theta, basis.points, basis.weights
        self._ls, self._m0 = basis.degrees, basis.zonal
        self._setup_model()

    def _setup_model(self):
        """The multipliers of the model at the basis's degrees (a piece of a schedule keeps the bases)."""
        ls = self._ls
        self.head_fields = head_velocities(self.model, self.lmax)
        self.field = self.head_fields[0]
        self._kern = None if self.field.kernel is None else self.field.kernel[ls]
        self._vel = self.field.potential[ls]
        self._sinkhorn = (GridSinkhorn(self.model, self.basis.points, self.basis.weights, self.basis.frame)
                          if self.model.attention == "sinkhorn" else None)       # the grid's Sinkhorn attention
        # the flux is ρ s∇Φ alone (softmax attention, "post", no feed-forward term): `_flux`
        self._plain = self._sinkhorn is None and self.model.normalization == "post" and self.model.feedforward is None
        self._flux_potential = self.field.flux_potential[ls]

    def _flux(self, alm, field):
        """ρX (..., 2, ntheta, nphi) on the dealiasing grid of "post" attention (`_plain`): ρ by one scalar
        synthesis; Z̃ of (SA) and the gradient of the potential of ``field`` synthesised at the degree where
        the kernel's fields vanish to rounding (`solvers.spectral.kernel_band`), one scalar and one spin-1
        synthesis; then one product (`SpectralVelocity.flux`)."""
        basis, band = self.basis, self.field.band
        z = None if self._kern is None else basis.synthesis(self._kern * field, band)[..., None, :, :]
        grad = basis.gradient(self._flux_potential * field, band)
        return self.field.flux(grad, basis.synthesis(alm)[..., None, :, :], z)

    @property
    def fine(self):
        """The basis of the projections and diagnostics (grid exact for degree 4L + 3), built on first use."""
        if "basis" not in self._fine:
            self._fine["basis"] = SphericalHarmonicBasis(self.lmax, 4 * self.lmax + 3, self.threads)
        return self._fine["basis"]

    def _fields(self, alm, basis=None, field=None, t=0.0, feedforward=True):
        """ρ, Z̃ (= e^{-β}K*ρ for SA, None for USA), the velocity X = s∇Φ divided by the speed s of the
        normalisation at time t, and s⁻¹, on the grid of ``basis`` (default the dealiasing one) for
        coefficients alm (..., nalm; leading axes a batch); the velocity is that of the density ``field``
        (default alm; a layered run passes its prefix means), plus s⁻¹P_x F of a feed-forward term
        unless ``feedforward`` is False."""
        basis = self.basis if basis is None else basis
        if isinstance(field, list):
            return self._head_fields(alm, basis, field, t, feedforward)
        field, radial, band = alm if field is None else field, self.field.radial, self.field.band
        rows = ([self._kern * field] if self._kern is not None else []) + ([radial[self._ls] * field]
                                                                           if radial is not None else [])
        k = basis.synthesis(np.stack(rows, axis=-2), band) if rows else None     # the kernel's fields, at their band
        z, dz = (k[..., 0, :, :] if self._kern is not None else None), (k[..., -1, :, :] if radial is not None else None)
        x = self.field.velocity(basis.gradient(self._vel * field, band), None if z is None else z[..., None, :, :])
        speed2 = None if self.model.normalization == "post" else x[..., 0, :, :] ** 2 + x[..., 1, :, :] ** 2
        x, inverse = self.field.scaled(x, speed2, t, dz, z)
        rho = basis.synthesis(alm)
        mlp = self.field.feedforward(basis, self.model.feedforward) if feedforward else None
        return rho, z, (x if mlp is None else x + inverse * mlp), inverse

    def _head_fields(self, alm, basis, fields, t, feedforward):
        """`_fields` of several zonal heads (Post-LN): X = Σ_h X_h[ρ̄_h], head h's velocity from the density
        ``fields[h]`` with its own multipliers, one batched scalar and one spin-1 synthesis for all heads at
        the largest of their bands; Z̃ is that of the first head."""
        ls, heads = self._ls, self.head_fields
        band = max(h.band for h in heads)
        zs = (basis.synthesis(np.stack([h.kernel[ls] * f for h, f in zip(heads, fields)], axis=-2), band)
              if self.field.normalized else None)
        grad = basis.gradient(np.stack([h.potential[ls] * f for h, f in zip(heads, fields)]), band)
        x = 0.0
        for k, head in enumerate(heads):
            x = x + head.velocity(grad[k], None if zs is None else zs[..., k, :, :][..., None, :, :])
        mlp = self.field.feedforward(basis, self.model.feedforward) if feedforward else None
        return basis.synthesis(alm), None if zs is None else zs[..., 0, :, :], (x if mlp is None else x + mlp), 1.0

    # -- Solver contract ---------------------------------------------------------------------------
    def _representation(self, run):
        return SphericalHarmonicSeries(self.lmax, self.threads)

    def _stats(self, run):
        return {"lmax_final": self.lmax}

    def _initial_from_callable(self, run, rho0, normalize):
        """Project ρ0 on degrees <= lmax by Gauss–Legendre quadrature with 2·lmax + 2 rings (aliasing
        only from degrees > 3·lmax); checks finiteness, ρ0 >= 0 on the grid and mass 1 (1e-6)."""
        check_callable(rho0, "rho0")
        pts, w = self.fine.points, self.fine.weights
        try:
            vals = np.asarray(rho0(pts), dtype=float)
        except (TypeError, ValueError) as exc:
            raise InvalidInput(f"`rho0` could not be evaluated on points of shape {pts.shape}: {exc}") from None
        if vals.shape != pts.shape[:-1]:
            raise InvalidInput(f"`rho0` must return one value per point (shape {pts.shape[:-1]}), got shape {vals.shape}.")
        vals, _ = check_density_values(vals, "rho0", quadrature_weights=w, normalize=normalize)
        return self.fine.analysis(vals[None])[0]

    def _initial_from_grid(self, run, grid, normalize):
        """Values on the Gauss–Legendre grid (ntheta, nphi) (`meanfield.measures.densities.on_grid`): their exact
        discrete analysis (Gauss–Legendre quadrature in z, FFT in φ) up to degree
        min(lmax, ntheta − 1, (nphi − 1)/2), no interpolation."""

        g = grid.unit_mass(normalize, 3)
        nt, nphi = g.shape
        J = min(self.lmax, nt - 1, (nphi - 1) // 2)
        alm = analysis_2d(map=g.values[None], spin=0, lmax=J, geometry="GL", nthreads=self.threads)[0]
        given = SphericalHarmonicSeries(J)
        return real_to_alm(SphericalHarmonicSeries(self.lmax, self.threads).embed(alm_to_real(alm, J)[None], given)[0])

    def _initial_from_data(self, run, data, normalize):
        """Real σ-orthonormal coefficients clm (2, J+1, J+1), J <= lmax (as ``sol.data[i]``)."""
        c = np.asarray(data)
        if (c.ndim != 3 or c.shape[0] != 2 or c.shape[1] != c.shape[2] or c.shape[1] > self.lmax + 1
                or not np.isrealobj(c) or not np.all(np.isfinite(c))):
            raise InvalidInput(f"`initial` as coefficients must be a finite real array clm of shape (2, J+1, J+1) with "
                             f"J <= lmax={self.lmax}, got shape {c.shape}.")
        given = SphericalHarmonicSeries(c.shape[1] - 1)
        n = 2 * c.shape[1] + 2
        minimum = given.grid_values(c, n, 2 * n).min()
        c = c * check_coefficients(c[0, 0, 0], minimum, normalize=normalize, tail_tol=self.tail.tol)
        rep = SphericalHarmonicSeries(self.lmax, self.threads)
        return real_to_alm(rep.embed(c[None], SphericalHarmonicSeries(c.shape[1] - 1))[0])

    def _rhs(self, run, t, alm):
        """−div_S(ρX) projected on degrees <= lmax ((3.1)); 3 (USA) or 3 + one extra scalar (SA) transforms."""
        return self._transport(run, alm, t=t)

    def _transport(self, run, alm, field=None, t=0.0):
        """−div_S(ρX) on degrees <= lmax for coefficients alm (..., nalm) moved by the velocity of ``field``."""
        if self._plain and not isinstance(field, list):
            x = self._flux(alm, alm if field is None else field)
        else:
            rho, x = self._sinkhorn_fields(run, alm) if self._sinkhorn is not None else self._fields(alm, field=field,
                                                                                                   t=t)[::2]
            x *= rho[..., None, :, :]
        d = self.basis.divergence(x)
        d[..., 0] = 0.0
        d[..., self._m0] = d[..., self._m0].real
        return d

    def _sinkhorn_fields(self, run, alm, feedforward=True):
        """ρ and X (..., 2, ntheta, nphi) on the dealiasing grid under Sinkhorn attention: the plan of the grid
        measure Σ_j q_j ρ_j δ_{x_j} (`solvers.spectral.GridSinkhorn`; NaN where ρ <= 0 somewhere, which the
        monitor reports), plus P_x F of a feed-forward term."""
        rho = self.basis.synthesis(alm)
        x = self._sinkhorn.velocity(run, rho.reshape(rho.shape[:-2] + (-1,))).reshape(rho.shape[:-2] + (2,) +
                                                                                       rho.shape[-2:])
        mlp = self.field.feedforward(self.basis, self.model.feedforward) if feedforward else None
        return rho, (x if mlp is None else x + mlp)

    @classmethod
    def from_segment(cls, segment):
        return cls(segment.model, segment.representation.lmax)

    def _tracer_velocity(self, run, t, alm, points):
        """X = s∇Φ at the tracers (`_fields` at arbitrary points, `SphericalHarmonicBasis.gradient_at`); under
        Sinkhorn attention the plan extended to them (`solvers.spectral.GridSinkhorn.at`)."""
        if self._sinkhorn is not None:
            return self._sinkhorn.at(run, self._sinkhorn_fields(run, alm, feedforward=False)[0].ravel(), points)
        grad = tangent_vectors(self.basis.gradient_at(self._vel * alm, points, EPSILON), sphere_angles(points)[1])
        z = None if self._kern is None else self.basis.values_at(self._kern * alm, points, EPSILON)[:, None]
        return self.field.velocity(grad, z)

    def _linear(self, run):
        if self.model.noise == 0.0:
            return None
        return -self.model.noise * self.basis.laplacian

    def _to_data(self, run, alm):
        return alm_to_real(alm, self.lmax)

    def _monitor(self, run, t, alm):
        if self._sinkhorn is not None and not run.workspace.get("zmin", 1.0) > 0:
            raise SolverError(f"ρ is not positive on the grid at t={t:.6g} (min {run.workspace['zmin']:.3g}), so the "
                              "Sinkhorn plan of the grid measure is undefined; increase `lmax`.")
        self.tail.check_or_refine(t, alm_power(alm, self.lmax), self.lmax, self.refinable)

    def velocity(self, alm):
        """The velocity X = s∇Φ ((3.7)/(3.10)) on the dealiasing grid (``self.points``) for ducc0
        coefficients ``alm``: array (2, ntheta, nphi) of the components along e_θ and e_φ."""
        if self._sinkhorn is not None:
            return self._sinkhorn_fields(SimpleNamespace(workspace={}, threads=self.threads),
                                         np.asarray(alm, dtype=complex))[1]
        return self._fields(np.asarray(alm, dtype=complex))[2]

    def _diagnostics(self, run, t, alm):
        """Mass, E_β, min ρ (grid), spectral tail, dE/dt of the discrete flow vs the identity (3.6)
        (evaluated by quadrature on a finer, independent grid), and optionally W1."""
        L = self.lmax
        beta = self.model.beta
        power = alm_power(alm, L)
        if self._sinkhorn is not None:
            rho = self._sinkhorn_fields(run, alm, feedforward=False)[0]
            out = {"mass": float(alm[0].real / np.sqrt(4 * np.pi)), "min_density": float(rho.min()),
                   "spectral_tail": float(spectral_tail(power)), "lmax": float(L)}
            out.update(self._sinkhorn.diagnostics(run, rho.ravel()))
            return out
        dalm = self._rhs(run, t, alm)
        lin = self._linear(run)
        if lin is not None:
            dalm = dalm + lin * alm
        rho_grid = self.basis.synthesis(alm[None])[0]
        rho, z, x, inverse = self._fields(alm, self.fine, t=t, feedforward=False)
        w = self.fine.weights
        mlp = self.field.feedforward(self.fine, self.model.feedforward)    # the model's, not head 0's
        u = x if mlp is None else x + inverse * mlp          # the velocity
        speed2 = (x[0] * u[0] + x[1] * u[1]) / inverse      # ⟨X, u⟩
        if z is not None:
            integrand = rho * z * speed2 * self.field.unscale
        else:
            integrand = rho * speed2
        ident = self.field.s * float(np.sum(w * integrand)) + noise_dissipation(beta, 3, self.model.noise, power)
        out = energy_diagnostics(beta, 3, power, alm_cross(alm, dalm, L), ident)
        out.update({"mass": float(alm[0].real / np.sqrt(4 * np.pi)), "min_density": float(rho_grid.min()),
                    "spectral_tail": float(spectral_tail(power)), "lmax": float(L)})
        if self.w1:
            meas = SphericalHarmonicSeries(L).measure(alm_to_real(alm, L), n=self.w1_points)
            out["w1_to_uniform"] = float(w1_to_uniform(meas, n_reference=1024))
            out["w1_to_dirac"] = float(w1_to_dirac(meas))
        return out

    def alm_of(self, rho0, normalize=False):
        """The ducc0 a_lm of the projection of ``rho0`` (as the initial state of `solve`)."""
        return self.start(rho0, normalize=normalize).y0


SphericalHarmonics.__signature__ = signature_of_init(SphericalHarmonics)


class LayeredSphericalHarmonics(Layered, SphericalHarmonics):
    """`SphericalHarmonics` of a masked model (``positions=M``): the layered equation of `solvers.layered`.

    The state is the a_lm at each of the M positions (M, nalm), transformed in batches (one scalar, one
    spin-1 synthesis and one spin-1 analysis for all positions). Built by
    ``SphericalHarmonics(model, lmax, positions=M)``.
    """

    density_ndim = 3

    def __init__(self, model, lmax=63, *, positions=None, max_positions=POSITIONS_POLICY.auto_cap, **options):
        SphericalHarmonics.__init__(self, model, lmax, positions=positions, **options)
        self._setup_positions(positions, max_positions)

    def _rhs(self, run, t, alm):
        """−div_S(ρ(s_i) X[ρ̄(s_i)]) on degrees <= lmax at every node at once. With ``threads`` > 1 below
        `meanfield.threads.SHARE_LMAX` (where one transform does not share its work) the nodes go in parts
        shared among the threads, each part's transforms and products on one thread: every map is
        transformed alone and every product is pointwise, so the bits do not depend on the parts."""
        field = self._prefix(alm)
        basis = self.basis
        if basis.threads == 1 or basis.nthreads > 1 or len(alm) < 2:
            return self._transport(run, alm, field)
        out = np.empty_like(alm)
        bounds = np.linspace(0, len(alm), min(len(alm), 2 * basis.threads) + 1).astype(int)

        def work(k):
            part = slice(bounds[k], bounds[k + 1])
            out[part] = self._transport(run, alm[part], [f[part] for f in field] if isinstance(field, list) else
                                        field[part])

        with blas_single_threaded():
            share_out(work, range(len(bounds) - 1), basis.threads)
        return out

    def _layer_power(self, run, alm):
        return np.stack([alm_power(a, self.lmax) for a in alm])


__all__ = ["LayeredSphericalHarmonics", "SphericalHarmonics"]
