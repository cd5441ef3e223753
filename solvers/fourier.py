"""`FourierCircle`: the mean-field PDE on S^1 by a Fourier pseudo-spectral method (SPEC L3, §9).

    ∂_t ρ + ∂_θ(ρ v) = ν ∂²_θ ρ,   ρ(θ) = Σ_{|k|<=K} c_k e^{ikθ}   (c_k relative to σ = dθ/2π, SPEC L1),

    (USA)  v = s ∂_θ φ,             φ_k = (I_k(β)/β) c_k                (3.10),
    (SA)   v = (s/β) ∂_θ log(K*ρ) = s ∂_θ(K*ρ/β) / (K*ρ),  (K*ρ)_k = I_k(β) c_k   ((3.4), §9),

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
  with ``modes="auto"``, restarts from the current state with twice the modes, up to ``max_modes``.
"""
import numpy as np
import scipy.fft as sfft

from meanfield._checks import check_callable, check_density_values, check_int, check_real
from meanfield.errors import SolverError, UnderResolved, UnsupportedModel
from meanfield.kernels import kernel_multipliers, minimum_degree, velocity_multipliers
from meanfield.representations.fourier import FourierSeries
from meanfield.solution import Solution

from .base import Solver
from .spectral import (DEFAULT_TAIL_TOL, TailMonitor, check_kernel_resolution, energy_diagnostics, noise_dissipation,
                       spectral_tail)

MIN_MODES = 8
AUTO_START = 64          # modes="auto": first resolution (raised to the kernel's minimum if needed)
AUTO_MAX_MODES = 16384   # modes="auto": default cap


def padded_size(modes, dealias=1.5):
    """Product-grid size M >= ceil(dealias·2K) + 1 (3K + 1 for the 3/2 rule), with small prime factors."""
    return int(sfft.next_fast_len(int(np.ceil(dealias * 2 * int(modes))) + 1, real=True))


class _Refine(SolverError):
    """Internal: raised by the monitor in ``modes="auto"`` to restart at twice the modes."""

    def __init__(self, t, state, tail):
        super().__init__(f"refine at t={t:g} (tail {tail:.3g})")
        self.t, self.state, self.tail = t, state, tail


class FourierCircle(Solver):
    """Fourier pseudo-spectral solver on S^1 (``model.dim == 2``, zonal models: Q^T K = I, V = v·I).

    Parameters
    ----------
    model : meanfield.Model with dim = 2 and ``model.is_zonal``.
    modes : int >= 8, or "auto".
        K, the highest Fourier mode kept (the state holds c_k, |k| <= K). K must resolve the kernel:
        I_k(β)/I_0(β) < 1e-14 for k > K (`meanfield.kernels.minimum_degree`); a too small K raises
        ValueError naming the minimum. ``"auto"`` starts at max(64, that minimum rounded up to a
        power of two) and doubles K (restarting from the current state) whenever the spectral tail
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

    Notes
    -----
    Diagnostics recorded at every saved time (``sol.diagnostics``): ``mass``, ``min_density`` (on the
    padded grid), ``spectral_tail``, ``energy`` (E_β, (3.5)), ``energy_rate`` (dE/dt of the discrete
    flow, exact derivative of the spectral energy), ``energy_rate_identity`` (SPEC L5: s∫Z|v|²ρ dσ
    for SA, s∫|v|²ρ dσ for USA, plus the noise term), ``energy_rate_error`` (their relative
    difference), ``w1_uniform``, ``w1_dirac``, and ``modes`` (K in use, changes with "auto").
    """

    name = "fourier"

    def __init__(self, model, modes=512, *, tail_tol=DEFAULT_TAIL_TOL, dealias=1.5, max_modes=AUTO_MAX_MODES,
                 w1=True):
        Solver.__init__(self, model)
        if model.dim != 2:
            raise UnsupportedModel(f"FourierCircle solves on S^1: `model.dim` must be 2, got {model.dim} "
                                   "(use solvers.SphericalHarmonics for dim 3).")
        self._require_zonal()
        self.beta = model.beta
        self.s = float(model.v)
        self.noise = float(model.noise)
        self.normalized = bool(model.normalized)
        self.tail = TailMonitor(tail_tol, "modes")
        self.dealias = check_real(dealias, "dealias", low=1.5)
        self.w1 = bool(w1)
        self.auto = isinstance(modes, str)
        if self.auto:
            if modes != "auto":
                raise ValueError(f"`modes` must be an integer >= {MIN_MODES} or 'auto', got {modes!r}.")
            self.max_modes = check_int(max_modes, "max_modes", low=MIN_MODES)
            start = self._start_modes()
            if start > self.max_modes:
                raise ValueError(f"`max_modes`={self.max_modes} is below the {start} modes needed to resolve the "
                                 f"kernel at beta={self.beta:g}.")
            self._setup(start)
        else:
            K = check_int(modes, "modes", low=MIN_MODES)
            check_kernel_resolution(self.beta, 2, K, "modes")
            self.max_modes = K
            self._setup(K)

    # -- discretisation ----------------------------------------------------------------------------
    def _setup(self, K):
        """Multipliers and padded grid for K modes."""
        self.modes = K
        self.M = M = padded_size(K, self.dealias)
        self.k = np.arange(K + 1, dtype=float)
        self._ik = 1j * self.k
        if self.normalized:
            # Z̃ = e^{-β} K*ρ and ∂_θ(Z̃)/β: scaled multipliers, v = s (∂_θZ̃/β) / Z̃
            self._kern = kernel_multipliers(self.beta, 2, K, scaled=True)
            self._dphi = self._ik * velocity_multipliers(self.beta, 2, K, scaled=True)
            self._spec = np.zeros((3, M // 2 + 1), dtype=complex)
        else:
            self._kern = None
            self._dphi = self.s * self._ik * velocity_multipliers(self.beta, 2, K)
            self._spec = np.zeros((2, M // 2 + 1), dtype=complex)
        self._c = np.zeros(K + 1, dtype=complex)
        self._zmin = 1.0

    def _grid_fields(self, c):
        """ρ, Z̃ (SA; None for USA) and v on the padded grid θ_j = 2πj/M, for coefficients c_0..c_K."""
        K, spec = self.modes, self._spec
        spec[0, :K + 1] = c
        spec[1, :K + 1] = self._dphi * c
        if self.normalized:
            spec[2, :K + 1] = self._kern * c
        g = sfft.irfft(spec, n=self.M, axis=-1, norm="forward")
        rho, dz = g[0], g[1]
        if not self.normalized:
            return rho, None, dz
        z = g[2]
        self._zmin = float(z.min())
        return rho, z, dz * (self.s / z)

    def _full(self, u):
        c = self._c
        c[1:] = u
        return c

    # -- Solver contract ---------------------------------------------------------------------------
    def _representation(self):
        return FourierSeries(self.modes)

    def _initial_state(self, rho0, normalize):
        """c_1..c_K of ρ0 by the midpoint rule on N >= 4K points (exact for modes < N − K); the
        mass c_0 is fixed here. Checks finiteness, ρ0 >= 0 on the grid and mass 1 within 1e-6."""
        check_callable(rho0, "rho0")
        K = self.modes
        N = int(sfft.next_fast_len(max(4 * K + 4, 256)))
        theta = 2 * np.pi * (np.arange(N) + 0.5) / N
        pts = np.stack([np.cos(theta), np.sin(theta)], axis=-1)
        try:
            vals = np.asarray(rho0(pts), dtype=float)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"`rho0` could not be evaluated on points of shape {pts.shape}: {exc}") from None
        if vals.shape != (N,):
            raise ValueError(f"`rho0` must return one value per point (shape ({N},)), got shape {vals.shape}.")
        vals, _ = check_density_values(vals, "rho0", quadrature_weights=np.full(N, 1.0 / N), normalize=normalize)
        c = sfft.rfft(vals, norm="forward")[:K + 1] * np.exp(-0.5j * self.k * (2 * np.pi / N))  # midpoint shift
        self.mass0 = float(c[0].real)
        self._c = np.zeros(K + 1, dtype=complex)
        self._c[0] = self.mass0
        return c[1:].copy()

    def _rhs(self, t, u):
        """∂_t c_k = −ik (ρv)_k, k = 1..K (SPEC L3, §9); (ρv)_k from the padded grid."""
        rho, _, v = self._grid_fields(self._full(u))
        if self.normalized and not self._zmin > 0:
            return np.full_like(u, np.nan)    # K*ρ <= 0 on the grid: reject the step (see _monitor)
        f = sfft.rfft(rho * v, norm="forward")[1:self.modes + 1]
        f *= -self._ik[1:]
        return f

    def _linear(self):
        if self.noise == 0.0:
            return None
        return -self.noise * self.k[1:] ** 2

    def _to_data(self, u):
        return self._full(u).copy()

    def _power(self, u):
        p = np.empty(self.modes + 1)
        p[0] = self.mass0 ** 2
        p[1:] = 2 * (u.real ** 2 + u.imag ** 2)
        return p

    def _monitor(self, t, u):
        # (SA) K*ρ > 0 on the grid: the last stage of the FSAL pair was evaluated at this state,
        # and a stage with K*ρ <= 0 returns NaN (the step is rejected), so the cached minimum decides
        if self.normalized:
            if not self._zmin > 0:
                raise SolverError(f"K*ρ is not positive on the grid at t={t:.6g} (min {self._zmin:.3g}), so "
                                  "log(K*ρ) is undefined: the discrete density has large negative parts; "
                                  "increase `modes`.")
        if self.auto and self.modes < self.max_modes:
            tail = float(spectral_tail(self._power(u)))
            if not tail <= self.tail.tol:
                raise _Refine(t, u.copy(), tail)
            return
        self.tail.check(t, self._power(u), self.modes)

    def _diagnostics(self, t, u):
        """Mass, E_β, min ρ, tail, dE/dt (discrete) vs the identity of SPEC L5, W1 to σ and to δ."""
        c = self._full(u).copy()
        power = self._power(u)
        rho, z, v = self._grid_fields(c)
        du = self._rhs(t, u)
        lin = self._linear()
        if lin is not None:
            du = du + lin * u
        cross = np.zeros(self.modes + 1)
        cross[1:] = 2 * (u.real * du.real + u.imag * du.imag)
        integrand = rho * v * v
        if self.normalized:
            integrand = integrand * z * (np.exp(self.beta) if self.beta > 0 else 1.0)
        ident = self.s * float(np.mean(integrand)) + noise_dissipation(self.beta, 2, self.noise, power)
        out = energy_diagnostics(self.beta, 2, power, cross, ident)
        out.update({"mass": float(c[0].real), "min_density": float(rho.min()),
                    "spectral_tail": float(spectral_tail(power)), "modes": float(self.modes)})
        if self.w1:
            from meanfield.wasserstein import w1_to_uniform

            # midpoint measure on n points; σ's reference on the same midpoints makes the W1 to σ a
            # midpoint rule for ∫|F − θ/2π − median| (error O(n^-2) rather than O(1/n))
            n = max(4 * (2 * self.modes + 1), 2048)
            meas = FourierSeries(self.modes).measure(c, n=n)
            out["w1_uniform"] = float(w1_to_uniform(meas, n_reference=n))
            out["w1_dirac"] = FourierSeries(self.modes).w1_to_dirac(c)[0]   # exact (trig. polynomial)
        return out

    # -- helpers -----------------------------------------------------------------------------------
    def coefficients(self, rho0, normalize=False):
        """c_0..c_K of the projection of ``rho0`` (the initial state of `solve`)."""
        return self._full(self._initial_state(rho0, normalize)).copy()

    def velocity(self, c):
        """(θ_j, v(θ_j)) on the padded grid θ_j = 2πj/M for coefficients c_0..c_K (SPEC §9)."""
        c = np.asarray(c, dtype=complex)
        if c.shape != (self.modes + 1,):
            raise ValueError(f"`c` must have shape ({self.modes + 1},), got {c.shape}.")
        self._c = c.copy()
        return 2 * np.pi * np.arange(self.M) / self.M, self._grid_fields(c)[2].copy()

    def rhs(self, c):
        """∂_t c_k, k = 0..K (transport plus noise; ∂_t c_0 = 0) for coefficients c_0..c_K."""
        c = np.asarray(c, dtype=complex)
        if c.shape != (self.modes + 1,):
            raise ValueError(f"`c` must have shape ({self.modes + 1},), got {c.shape}.")
        self.mass0 = float(c[0].real)
        self._c = c.copy()
        u = c[1:].copy()
        du = self._rhs(0.0, u)
        lin = self._linear()
        if lin is not None:
            du = du + lin * u
        return np.concatenate([[0.0], du])

    # -- solve (fixed modes: the base driver; "auto": restarts at doubled resolution) ---------------
    def solve(self, rho0, t_eval, *, normalize=False, rtol=1e-8, atol=1e-13, method="dopri5", progress=None,
              checkpoint=None, checkpoint_every=30.0, max_step=np.inf, first_step=None):
        """Evolve ``rho0`` and save at ``t_eval`` (see `solvers.base.Solver.solve`).

        The default ``atol`` is 1e-13 (not the base class's 1e-10): the modes near K are advected
        at |λ| ≈ k·max|v|, where the explicit pair is slightly unstable, and the RMS error control lets
        round-off there grow to ~atol·sqrt(K)·10^2 before it reacts. With 1e-10 that junk reaches a
        spectral tail of ~4e-7 at K = 1024 (a false alarm near ``tail_tol``); with 1e-13 it stays
        ~1e-9 at no extra cost in steps.

        With ``modes="auto"`` the run is split into segments: when the spectral tail exceeds
        ``tail_tol`` the current state is zero-padded to twice the modes and the integration
        restarts from it (SPEC §9); the returned Solution stores every saved time with the final K.
        Past ``max_modes`` it raises `UnderResolved` like a fixed-resolution run.
        """
        if not self.auto:
            return Solver.solve(self, rho0, t_eval, normalize=normalize, rtol=rtol, atol=atol, method=method,
                                progress=progress, checkpoint=checkpoint, checkpoint_every=checkpoint_every,
                                max_step=max_step, first_step=first_step)
        from meanfield._checks import check_times

        t_eval = check_times(t_eval)
        if self.modes != self._start_modes():
            self._setup(self._start_modes())
        u = self._initial_state(rho0, normalize)
        opts = dict(rtol=rtol, atol=atol, method=method, progress=progress, max_step=max_step,
                    first_step=first_step)
        parts, times = [], t_eval
        while True:
            try:
                sol = self._run(u, times, **opts)
                parts.append(sol)
                break
            except _Refine as exc:
                part = exc.solution
                parts.append(part)
                K = min(2 * self.modes, self.max_modes)
                u_new = np.zeros(K, dtype=complex)
                u_new[:self.modes] = exc.state
                self._setup(K)
                self._c[0] = self.mass0
                u = u_new
                times = np.concatenate([[exc.t], t_eval[t_eval > exc.t]])
            except UnderResolved as exc:
                parts.append(exc.solution)
                exc.solution = self._merge(parts)
                if checkpoint is not None:
                    exc.solution.save(checkpoint)
                raise
        out = self._merge(parts)
        if checkpoint is not None:
            out.save(checkpoint)
        return out

    def _start_modes(self):
        """modes="auto": max(64, the kernel's minimum rounded up to a power of two)."""
        kernel_min = minimum_degree(self.beta, 2)
        return max(AUTO_START, 1 << int(np.ceil(np.log2(max(kernel_min, 2)))))

    def _merge(self, parts):
        """One Solution from the segments of an "auto" run (restart times dropped, data zero-padded)."""
        K = self.modes
        ts, datas, diags = [], [], {}
        for j, p in enumerate(parts):
            sl = slice(0 if j == 0 else 1, None)      # a restart repeats its starting time
            n = len(p.t[sl])
            ts.append(p.t[sl])
            d = np.zeros((n, K + 1), dtype=complex)
            d[:, :p.data.shape[1]] = p.data[sl]
            datas.append(d)
            keys = set(p.diagnostics) | set(diags) | {"energy"}
            for key in keys:
                vals = p._energy if key == "energy" else p.diagnostics.get(key)
                vals = np.full(len(p.t), np.nan) if vals is None else np.asarray(vals)
                diags.setdefault(key, []).append(vals[sl])
        stats = {}
        for p in parts:
            for key, val in p.stats.items():
                stats[key] = stats.get(key, 0) + val
        stats["modes_final"] = K
        last = parts[-1]
        diag_arrays = {key: np.concatenate(v) for key, v in diags.items()}
        return Solution(np.concatenate(ts), self.model, FourierSeries(K), np.concatenate(datas), diag_arrays, stats,
                        status=last.status, message=last.message, solver=type(self).__name__)


__all__ = ["FourierCircle", "padded_size"]
