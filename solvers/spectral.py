"""What the two spectral solvers (Fourier on S^1, spherical harmonics on S^2) share.

* the resolution rule for the kernel: the cut-off must exceed the degree where a_l(β)/a_0(β)
  drops below 1e-14 (`check_kernel_resolution`);
* the under-resolution rule: the spectral tail, i.e. the L²(σ) norm of the degrees in the top
  third, relative to the whole L²(σ) norm, must stay below ``tail_tol`` (`spectral_tail`,
  `TailMonitor`), otherwise the run stops with `UnderResolved`, or with an automatic resolution
  continues on a finer basis (`Refine`, answered by `AutoResolution._next` through the
  `solvers.bases.ResolutionPolicy` of the solver);
* the velocity of a spectral density (`SpectralVelocity`) and the energy bookkeeping.
"""
import copy
import warnings

import numpy as np

from meanfield.transformer.feedforward import tangent_components
from meanfield.transformer.normalization import field_inverse_speed
from meanfield.validation import check_real
from meanfield.errors import InvalidInput, SolverError, UnderResolved, UnsupportedModel
from meanfield.transformer.kernels import (kernel_multipliers, laplacian_eigenvalues, minimum_degree, radial_multipliers,
                               velocity_multipliers)
from meanfield.results.solution import Solution
from meanfield.observables.energy import energy_from_spectrum, energy_rate_from_spectrum
from meanfield.sums.sinkhorn import sinkhorn, sinkhorn_energy, sinkhorn_output

DEFAULT_TAIL_TOL = 1e-6
BAND_TOL = 1e-18         # `kernel_band`: the fields of the degrees dropped stay this far below rounding


class Refine(SolverError):
    """Raised by the monitor of an automatic-resolution run below its cap: the run continues from
    the state at time ``t`` on a finer basis (`AutoResolution._next`)."""

    def __init__(self, t, reason=""):
        super().__init__(f"refine at t={t:g}" + (f" ({reason})" if reason else ""))
        self.t = t


def check_kernel_resolution(beta, dim, lmax, name, tol=1e-14):
    """Raise ValueError if degree ``lmax`` does not resolve the kernel e^{β⟨x,y⟩} (a_l/a_0 >= tol)."""
    need = minimum_degree(beta, dim, tol)
    if lmax < need:
        raise InvalidInput(f"`{name}`={lmax} is too coarse for beta={beta:g}: the kernel multipliers a_l(β)/a_0(β) "
                         f"only drop below {tol:g} at degree {need}; use {name} >= {need}.")
    return need


def kernel_band(*multipliers, tol=BAND_TOL):
    """The degree B beyond which the fields of these multipliers m_l (one array per field, by degree;
    None skipped) vanish below rounding for every density: Σ_{l>B} (2l + 1)²|m_l| <= tol·max|m| for each.

    A positive measure of mass 1 has ‖ρ_l‖ <= (2l + 1)^{1/2} (a Dirac mass attains it), and
    |Σ_m c_lm Y_lm| <= (2l + 1)^{1/2}‖c_l‖, |∇Σ_m c_lm Y_lm| <= (l(l+1)(2l + 1))^{1/2}‖c_l‖ (addition theorem;
    docs/mathematics.md §3), so the degrees beyond B change the field m*ρ and its gradient by at most
    tol·max|m|, far below the rounding of its synthesis (about 1e-16·max|m|). At least 1."""
    out = 1
    for m in multipliers:
        if m is None:
            continue
        m = np.abs(np.asarray(m, dtype=float))
        l = np.arange(m.size)
        tail = np.cumsum((m * (2 * l + 1.0) ** 2)[::-1])[::-1]      # tail[k] = Σ_{l>=k}
        small = np.flatnonzero(tail <= tol * m.max())
        out = max(out, int(small[0]) - 1 if small.size else m.size - 1)
    return out


def spectral_tail(power):
    """sqrt(Σ_{l > 2L/3} power_l / Σ_l power_l) for degree powers power[0..L] (last axis)."""
    power = np.asarray(power, dtype=float)
    L = power.shape[-1] - 1
    cut = (2 * L) // 3 + 1
    total = power.sum(axis=-1)
    return np.sqrt(power[..., cut:].sum(axis=-1) / total)


class TailMonitor:
    """Raises `UnderResolved` when the spectral tail exceeds ``tol`` (checked after each step)."""

    def __init__(self, tol=DEFAULT_TAIL_TOL, resolution_name="lmax"):
        self.tol = check_real(tol, "tail_tol", low=0.0, low_open=True)
        self.resolution_name = resolution_name

    def check(self, t, power, resolution):
        tail = float(spectral_tail(power))
        if not tail <= self.tol:
            raise UnderResolved(
                f"under-resolved at t={t:.6g}: the spectral tail (L² norm of the top third of the degrees, relative) "
                f"is {tail:.3g} > tail_tol={self.tol:g} with {self.resolution_name}={resolution}. The density is "
                f"concentrating (clustering). Remedies: on_underresolved='lagrangian' (the run goes on along the "
                f"characteristics, noise 0), {self.resolution_name}='auto' or a larger {self.resolution_name}, "
                f"a larger tail_tol, or an earlier end time.",
                t=t, tail=tail, tol=self.tol)
        return tail

    def check_or_refine(self, t, power, resolution, refine):
        """`check`, or with ``refine`` (automatic resolution below its cap) `Refine`, so that the run
        goes on from t on the refined basis."""
        if not refine:
            return self.check(t, power, resolution)
        tail = float(spectral_tail(power))
        if not tail <= self.tol:
            raise Refine(t, f"spectral tail {tail:.3g} > {self.tol:g} at {self.resolution_name}={resolution}")
        return tail


def noise_dissipation(beta, dim, noise, power):
    """−ν Σ_{l>=1} l(l+d−2)·(a_l/β)·‖ρ_l‖²: the noise term of dE_β/dt (docs/mathematics.md §4), from degree powers."""

    power = np.asarray(power, dtype=float)
    lmax = power.shape[-1] - 1
    if noise == 0.0:
        return 0.0
    c = velocity_multipliers(beta, dim, lmax)
    return -noise * float(np.sum(laplacian_eigenvalues(dim, lmax) * c * power))


def energy_diagnostics(beta, dim, power, cross, rate_identity):
    """The energy bookkeeping both spectral solvers record at saved times ((3.6), Lemma 3.7; docs/mathematics.md §4, §11).

    ``power[l] = ‖ρ_l‖²`` and ``cross[l] = Σ_j ρ_{l,j} ∂_tρ_{l,j}`` (σ-orthonormal basis, ∂_tρ the full
    discrete right-hand side including noise); ``rate_identity`` is the integral identity
    s∫Z|X|²dμ (SA) or s∫|X|²dμ (USA) plus `noise_dissipation`. Returns a dict with ``energy``,
    ``energy_rate`` (exact derivative of the discrete energy), ``energy_rate_identity`` and
    ``energy_rate_error`` = |rate − identity| / max(|rate|, |identity|) (0 when both vanish).
    """

    energy = float(energy_from_spectrum(beta, dim, power))
    rate = float(energy_rate_from_spectrum(beta, dim, cross))
    ident = float(rate_identity)
    scale = max(abs(rate), abs(ident))
    err = abs(rate - ident) / scale if scale > 0 else 0.0
    return {"energy": energy, "energy_rate": rate, "energy_rate_identity": ident, "energy_rate_error": err}


class SpectralVelocity:
    """The velocity X = s∇_S Φ of a spectral density (docs/mathematics.md §2–§3), shared by the
    Fourier, spherical-harmonic, Gegenbauer and FEM-spectral paths.

    With Z̃ = e^{−|β|}K*ρ (degree-l multipliers ``kernel`` = a_l(β)e^{−|β|}) and the scaled potential
    Ψ̃ = e^{−|β|}K*ρ/β (multipliers ``potential`` = a_l(β)e^{−|β|}/β, finite at β = 0),

        (SA)   Φ = (1/β) log K*ρ:   X = s ∇Ψ̃ / Z̃            ((3.4), (3.7)),
        (USA)  Φ = K*ρ/β:           X = s e^{|β|} ∇Ψ̃        ((3.10)),

    so e^{|β|} (``unscale``; |β| bounds β⟨x,y⟩ for β of either sign) never appears for (SA). A basis
    synthesises ∇Ψ̃ (and Z̃ for (SA)) and calls `velocity`.

    Where the normalisation sits (docs/normalization.md): the field moves at X/s, s = √(t + 1)
    ("sqrt-depth") or s = ‖A‖/α(t) ("ngpt"), with ‖A‖² = |X|² + ⟨x, A⟩² and the radial part
    ⟨x, A⟩ = s ∂_β Z̃/Z̃ (SA), s e^{|β|} ∂_β Z̃ (USA), from the multipliers ``radial`` =
    e^{−|β|}∂_β a_l (`meanfield.transformer.kernels.radial_multipliers`; a basis synthesises ∂_β Z̃ for "ngpt"
    only). `scaled` applies it; the continuity equation keeps its divergence form.

    A feed-forward term (``Model(mlp=...)``, `meanfield.transformer.feedforward`) adds the local field P_x F to the
    attention's X before the speed: `feedforward` gives its components on a basis's grid along the
    basis's ``frame``, computed once per grid (F does not depend on ρ), and the flux ρ(X + P_x F)/s
    is differentiated spectrally like the attention's.
    """

    def __init__(self, model, lmax):
        self.s = float(model.v)
        self.beta = model.beta
        self.normalized = bool(model.normalized)
        self.potential = velocity_multipliers(self.beta, model.dim, lmax, scaled=True)
        self.kernel = kernel_multipliers(self.beta, model.dim, lmax, scaled=True) if self.normalized else None
        self.unscale = float(np.exp(abs(self.beta)))           # Z = e^{|β|} Z̃
        self.usa_factor = self.s * self.unscale
        self.model = model
        self.radial = (radial_multipliers(self.beta, model.dim, lmax, scaled=True)
                       if model.normalization == "ngpt" else None)
        self.band = kernel_band(self.potential, self.kernel, self.radial)   # Z̃, Ψ̃ (∂_β Z̃) vanish beyond it
        # ∇ of these gives s∇Ψ̃ (SA) or X = s e^{|β|}∇Ψ̃ (USA): the factor of `flux`, once on the coefficients
        self.flux_potential = self.potential * (self.s if self.normalized else self.usa_factor)
        self._grids = {}

    def feedforward(self, basis, feedforward):
        """⟨P_x F, e_a⟩ (a, grid...) on ``basis.points`` along ``basis.frame`` for the feed-forward term
        ``feedforward`` (the solver's model's, also for a head's velocity; None: no term, returns None),
        computed once per grid (F does not depend on ρ)."""
        if feedforward is None:
            return None
        hit = self._grids.get(id(basis))
        if hit is None or hit[0] is not basis or hit[1] is not feedforward:
            hit = self._grids[id(basis)] = (basis, feedforward,
                                            tangent_components(feedforward.value(basis.points), basis.frame))
        return hit[2]

    def scaled(self, x, tangent_sq, t, dz=None, z=None):
        """(X/s, s⁻¹) at time t for the velocity X (any layout), |X|² (``tangent_sq``) and, for "ngpt",
        ∂_β Z̃ (``dz``) and Z̃ (``z``, (SA)); s⁻¹ is 1.0 for "post"."""
        if self.model.normalization == "post":
            return x, 1.0
        radial = None
        if dz is not None:
            radial = self.s * (dz / z if self.normalized else dz * self.unscale)
        inverse = field_inverse_speed(self.model, t, tangent_sq, radial)
        return x * inverse, inverse

    def flux(self, grad, rho, z=None):
        """ρX of "post" from the gradient ``grad`` (written over) of the field of ``flux_potential`` and ρ, Z̃
        broadcastable to it: (s∇Ψ̃)·ρ/Z̃ (SA) or (s e^{|β|}∇Ψ̃)·ρ (USA), one product over the vector field
        (what `velocity` times ρ gives, to rounding)."""
        return np.multiply(grad, rho / z if self.normalized else rho, out=grad)

    def velocity(self, grad, z=None, log_shift=0.0):
        """X from ∇Ψ̃ (``grad``, any layout) and, for (SA), Z̃ (``z``, broadcastable to ``grad``);
        ``log_shift``: the sums were taken with e^{−(|β| + log_shift)} instead of e^{−|β|} ((USA) only)."""
        if self.normalized:
            return grad * (self.s / z)
        if np.ndim(log_shift) == 0 and log_shift == 0.0:
            return grad * self.usa_factor
        return grad * (self.s * np.exp(abs(self.beta) + log_shift))


def head_velocities(model, lmax):
    """The `SpectralVelocity` of each head: [that of ``model``] for one head, else one per zonal head of
    its own β, V and slope (`meanfield.Model.head_models`; the layered solvers sum their fields)."""
    if len(model.heads) == 1:
        return [SpectralVelocity(model, lmax)]
    return [SpectralVelocity(head, lmax) for head in model.head_models]


def check_coefficients(mass, minimum, *, normalize, tail_tol, name="initial"):
    """Validate the density of given spectral coefficients: positive mass, 1 within 1e-6 unless
    ``normalize``; a synthesis minimum below zero by at most ``tail_tol`` (relative to the mass: a
    Gibbs undershoot of a resolved state) is accepted with a warning, a larger one is refused naming it.
    Returns the factor the coefficients are to be multiplied by (1/mass with ``normalize``)."""

    mass = float(mass)
    if not mass > 0:
        raise InvalidInput(f"`{name}`: the mass (coefficient of degree 0) must be positive, got {mass!r}.")
    if not normalize and abs(mass - 1.0) > 1e-6:
        raise InvalidInput(f"`{name}`: the mass (coefficient of degree 0) must be 1 within 1e-6, got {mass!r}; "
                         "pass normalize=True.")
    low = float(minimum) / mass
    if low < -tail_tol:
        raise InvalidInput(f"`{name}`: the density of these coefficients has minimum {float(minimum):.3g} < 0, "
                         f"below the accepted undershoot -tail_tol = {-tail_tol:g}.")
    if low < 0:
        warnings.warn(f"`{name}`: the density of these coefficients dips to {float(minimum):.3g} (a Gibbs "
                      f"undershoot within tail_tol = {tail_tol:g}); accepted.", RuntimeWarning, stacklevel=4)
    return 1.0 / mass if normalize else 1.0


def kernel_beta(model):
    """The β whose kernel the resolution must resolve: the model's, or the largest |β_h| of its zonal
    heads (`meanfield.Model.head_models`)."""
    heads = model.head_models if len(model.heads) > 1 else None
    return model.beta if not heads else max((h.beta for h in heads), key=abs)


class AutoResolution:
    """The automatic resolution of a spectral solver (``modes="auto"``/``lmax="auto"``), by its
    `solvers.bases.ResolutionPolicy` ``policy``.

    The solver calls `_choose_resolution` in ``__init__`` and implements ``_setup(resolution)``,
    which builds ``self.basis`` (a basis of `solvers.bases`) and sets the resolution attribute
    ``policy.name``, and, if it takes schedules, ``_setup_model()``, the part of ``_setup`` that depends
    on the model (a piece of a schedule keeps the bases); its ``auto_resolution`` is (policy.name,
    policy.cap_name). Its continuation
    (`_next`): on a tail alarm below the cap (`refinable`, the monitor raises `Refine`) the run
    continues from the current state on the refined basis (`_refine`: the state zero-padded by
    ``basis.pad``); a run that starts from a finer Solution of an automatic run starts at that
    Solution's resolution (up to the cap).
    """

    policy = None

    def _choose_resolution(self, value, cap):
        """Validate the resolution argument ``value`` (an integer or "auto") and ``cap``; sets
        ``auto`` and the cap attribute, returns the resolution to `_setup`."""
        resolution, cap, self.auto = self.policy.choose(value, cap, kernel_beta(self.model), self.model.dim)
        setattr(self, self.policy.cap_name, cap)
        return resolution

    @property
    def refinable(self):
        """An automatic resolution below its cap."""
        return self.auto and getattr(self, self.policy.name) < getattr(self, self.policy.cap_name)

    def _adopt_model(self):
        """A piece of the schedule (``Model(schedule=...)``): zonal, its kernel resolved at this
        resolution (ValueError naming it otherwise), the multipliers of its β and V."""
        self._require_zonal()
        resolution = getattr(self, self.policy.name)
        check_kernel_resolution(self.model.beta, self.model.dim, resolution, self.policy.name)
        self._setup_model()

    def _setup_model(self):
        """What of ``_setup`` depends on the model (the multipliers), called by ``_setup`` and at each
        breakpoint of a schedule: the bases depend on the resolution only and are kept."""
        raise NotImplementedError(f"{type(self).__name__} sets the multipliers of its model in `_setup_model`.")

    def _next(self, run, t, y, reason):
        """The refined solver and the padded state on a `Refine`; at the start from a Solution ``y``
        (``reason`` None), a copy of this solver at the Solution's resolution if it is finer, up to
        the cap; else the next strategy's."""
        if isinstance(reason, Refine):
            return self._refine(run, t, y)
        if reason is None and self.auto and isinstance(y, Solution):
            name, cap = self.auto_resolution
            resolution = getattr(y.representation, name, None)
            if resolution is not None and getattr(self, name) < resolution <= getattr(self, cap):
                finer = copy.copy(self)
                finer._setup(resolution)
                return finer, y
        return super()._next(run, t, y, reason)

    def _refine(self, run, t, y):
        """The same solver at the refined resolution (`ResolutionPolicy.refine`), ``y`` zero-padded."""
        finer = copy.copy(self)
        policy = self.policy
        finer._setup(policy.refine(getattr(self, policy.name), getattr(self, policy.cap_name)))
        return finer, self.basis.pad(y, finer.basis)


def check_sphere_dim(model, dim, name, other):
    """The sphere of a spectral solver ``name``: ``model.dim`` must be ``dim`` (2: S^1, 3: S^2), else
    UnsupportedModel naming `model.dim` and the solver ``other`` for the other sphere."""
    if model.dim != dim:
        raise UnsupportedModel(f"{name} solves on S^{dim - 1}: `model.dim` must be {dim}, got {model.dim} "
                               f"(use solvers.{other} for dim {5 - dim}).")

def check_grid_sinkhorn(model, where):
    """Sinkhorn attention (``Model(attention="sinkhorn")``) on a spectral solver's grid takes (SA) with
    normalization="post" only (docs/attention.md); UnsupportedModel naming ``attention`` otherwise.
    ``where``: "the circle" or "the sphere", for the message."""
    if model.attention == "sinkhorn" and (not model.normalized or model.normalization != "post"):
        raise UnsupportedModel(f"`attention`='sinkhorn' on {where} takes (SA) with normalization='post' "
                               f"(docs/attention.md), got normalized={model.normalized}, "
                               f"normalization={model.normalization!r}.")

class GridSinkhorn:
    """Sinkhorn attention of a density on the grid of a spectral basis (docs/attention.md, "the continuum
    on the sphere"): the plan of the grid measure Σ_j q_j ρ_j δ_{x_j} (q the quadrature weights of σ)
    with itself for the kernel e^{(β/ε)⟨x, y⟩}, by `meanfield.sums.sinkhorn.sinkhorn` (direct sums over
    the grid's N points, O(N²) per iteration), warm-started from the run's last potentials. It discretises
    the continuum's fixed point u·(k ∗ (uρ)) = 1 by the grid's quadrature; the field is the tangent part
    V·(Σ_k A_jk x_k) along the basis's ``frame``. The potentials and the iteration count live in
    ``run.workspace["sinkhorn"]``."""

    def __init__(self, model, points, weights, frame):
        self.model = model
        self.points = np.asarray(points, dtype=float).reshape(-1, points.shape[-1])
        self.weights = np.asarray(weights, dtype=float).ravel()
        self.frame = np.asarray(frame, dtype=float).reshape(frame.shape[0], -1, points.shape[-1])
        self.v = float(model.v)

    def velocity(self, run, rho):
        """The tangent components (..., k, N) of the field for densities ρ (..., N) on the grid (NaN where
        ρ <= 0 somewhere, and ``run.workspace["zmin"]`` set to min ρ for the solvers' rejection)."""
        run.workspace["zmin"] = float(rho.min())
        out = np.full(rho.shape[:-1] + (self.frame.shape[0], rho.shape[-1]), np.nan)
        if not run.workspace["zmin"] > 0:
            return out
        keep = run.workspace.setdefault("sinkhorn", {})
        for index in np.ndindex(rho.shape[:-1]):
            start = keep.get(index)
            if start is not None and start[0].shape != rho.shape[-1:]:      # a refined grid: start afresh
                start = None
            res = sinkhorn(self.points, self.weights * rho[index], self.model.beta, eps=self.model.sinkhorn_eps,
                           tol=self.model.sinkhorn_tol, f=None if start is None else start[0],
                           g=None if start is None else start[1], threads=run.threads)
            keep[index] = (res.f, res.g)
            keep["iterations"] = keep.get("iterations", 0) + res.iterations
            out[index] = self.v * np.einsum("knd,nd->kn", self.frame, res.out)
        return out

    def at(self, run, rho, points):
        """The field (m, d) at points that are not grid nodes (tracers), from the potentials of the last
        `velocity` of the single density ρ (N,): the plan extended by its column potential."""
        g = run.workspace["sinkhorn"][()][1]
        out = sinkhorn_output(points, self.points, self.weights * rho, self.model.beta, g, eps=self.model.sinkhorn_eps)
        return self.v * (out - np.einsum("md,md->m", out, points)[:, None] * points)

    def diagnostics(self, run, rho):
        """The iterations so far and ``sinkhorn_energy`` F of the last `velocity` of ρ (N,) (NaN for β = 0
        or ρ <= 0 somewhere; `meanfield.sums.sinkhorn.sinkhorn_energy`)."""
        keep = run.workspace.get("sinkhorn", {})
        out = {"sinkhorn_iterations": float(keep.get("iterations", 0)), "sinkhorn_energy": np.nan}
        if self.model.beta != 0 and rho.min() > 0 and () in keep:
            f, g = keep[()]
            out["sinkhorn_energy"] = float(sinkhorn_energy(self.points, self.weights * rho, self.model.beta,
                                                           self.model.sinkhorn_eps, f, g))
        return out

