"""The layered continuity equation of causal attention, for the spectral solvers (docs/causal.md).

Under a causal mask with ALiBi slope λ (``Model(mask="causal" | "causal-strict", position_bias=λ)``)
the tokens become, in the mean-field limit, a density ρ(t, σ, ·) on S^{d−1} for each position
σ ∈ (0, 1] (Duerinckx, Geshkovski, Rossi, *Kinetic theory for Transformers and the lost-in-the-middle
phenomenon*, arXiv 2605.09213; both masks have this one continuum):

    ∂_t ρ(σ) + div_S(ρ(σ) X_σ) = ν Δ_S ρ(σ),
    (USA)  X_σ = s ∇ (K * ρ̄(σ))/β,        (SA)  X_σ = (s/β) ∇ log (K * ρ̄(σ)),
    ρ̄(σ) = ∫_0^σ k_λ(σ, r) ρ(r) dr,        k_λ(σ, r) = λe^{−λ(σ−r)}/(1 − e^{−λσ})

((SA): the softmax over ∫_0^σ dr ∫ dy with the weight e^{−λ(σ−r)} normalises it to k_λ as well). So a
position moves like the unmasked equation (docs/mathematics.md §2) in the field of the prefix mean ρ̄
instead of its own density: the spectral solvers evaluate it batched over positions
(`FourierCircle._transport`, `SphericalHarmonics._transport`) with ρ̄ from the O(M) recursion of
`meanfield.transformer.positions.PositionRule`.

Several zonal heads of their own β and slope λ_h (``Model(heads=[(c_h I, I, v_h I), ...],
position_bias=[λ_1, ...])``, `meanfield.Model.head_models`) move each position in the sum of their fields,
head h in that of its own prefix mean ρ̄_h (`Layered._prefix`, one `PositionRule` per slope).

`Layered` is the mixin that turns a spectral solver into its layered form: the state is the
coefficients of the M densities at the nodes s_i of the position rule (axis 0), the masses per
position are exact invariants, the initial data is a callable ρ0(x, s) (or a density of x alone),
and ``positions="auto"`` doubles M when the σ-resolution (`PositionRule.panel_tail`) is lost.
"""
import copy
import inspect

import numpy as np

from meanfield.errors import InvalidInput, SolverError, UnderResolved
from meanfield.transformer.positions import PositionRule, takes_position
from meanfield.representations.layered import LayeredDensity

from .bases import ResolutionPolicy
from .spectral import spectral_tail

POSITIONS_POLICY = ResolutionPolicy("positions", "max_positions", low=8, auto_start=32, auto_cap=1024)


class RefinePositions(SolverError):
    """Raised by the monitor of a ``positions="auto"`` run below its cap: the run continues from the
    state at time ``t`` with twice the positions (`Layered._next`)."""

    def __init__(self, t, reason=""):
        super().__init__(f"refine the positions at t={t:g}" + (f" ({reason})" if reason else ""))
        self.t = t


def signature_of_init(cls):
    """The signature of ``cls(...)`` as its ``__init__`` states it (a solver whose ``__new__`` picks its
    layered subclass would otherwise show ``__new__``'s)."""
    sig = inspect.signature(cls.__init__)
    return sig.replace(parameters=list(sig.parameters.values())[1:])


def check_positions_model(model, positions):
    """The rule between a model and the ``positions`` argument: a masked model needs it, an unmasked one
    refuses it (ValueError naming `positions`)."""
    if model.is_causal and positions is None:
        raise InvalidInput(f"`positions` is required for a masked model (mask={model.mask!r}): the density depends on "
                         "the token position σ ∈ (0, 1]; pass positions=M (a multiple of 8) or positions='auto'.")
    if not model.is_causal and positions is not None:
        raise InvalidInput(f"`positions` applies to a masked model (mask='causal' or 'causal-strict'), got mask='none' "
                         f"and positions={positions!r}.")


class Layered:
    """The layered form of a spectral solver (module docstring). The solver provides ``_transport(run, c,
    field)`` (batched), ``_layer_power(run, y)`` (M, L + 1) and its one-density hooks; the mixin adds the
    positions; ``density_ndim`` is the number of axes of one density's data. Options: ``positions`` (M, a multiple of 8, or "auto") and ``max_positions`` (the cap of
    "auto", default 1024)."""

    normalizations = ("post",)      # the layered equation with Post-LN only (docs/causal.md)

    def _setup_positions(self, positions, max_positions):
        m, cap, self.positions_auto = POSITIONS_POLICY.choose(positions, max_positions, 0.0, self.model.dim)
        self.max_positions = cap
        self._set_positions(m)

    def _set_positions(self, m):
        self._set_rule(PositionRule(m, self.model.position_biases[0]))

    def _set_rule(self, rule):
        """The position rule, and one rule of the same nodes per head slope (`head_rules`)."""
        self.layers = rule
        self.positions = rule.size
        made = {rule.lam: rule}
        for lam in self.model.position_biases:
            if lam not in made:
                made[lam] = PositionRule(rule.size, lam, breaks=rule.breaks)
        self.head_rules = [made[lam] for lam in self.model.position_biases]

    def _require_zonal(self):
        """A zonal model, or several zonal heads of their own β and slope (`meanfield.Model.head_models`)."""
        if len(self.model.heads) == 1 or self.model.head_models is None:
            super()._require_zonal()

    # -- the discretisation ------------------------------------------------------------------------------
    def _prefix(self, c):
        """ρ̄ at the nodes: the prefix means of the coefficients c (M, ...); for several heads a list, head
        h's with its own slope (one recursion per distinct slope)."""
        if len(self.head_rules) == 1:
            return self.layers.prefix_mean(c)
        out, done = [], {}
        for rule in self.head_rules:
            if id(rule) not in done:
                done[id(rule)] = rule.prefix_mean(c)
            out.append(done[id(rule)])
        return out

    def _representation(self, run):
        return LayeredDensity(super()._representation(run), self.layers)

    def _to_data(self, run, y):
        return np.stack([super(Layered, self)._to_data(run, row) for row in y])

    def _monitor(self, run, t, y):
        if self.field.normalized and not run.workspace.get("zmin", 1.0) > 0:
            raise SolverError(f"K*ρ̄ is not positive on the grid at t={t:.6g} (min {run.workspace['zmin']:.3g}): the "
                              "discrete prefix means have large negative parts; increase the resolution.")
        power = self._layer_power(run, y)
        worst = int(np.argmax(spectral_tail(power)))          # the position least resolved decides
        self.tail.check_or_refine(t, power[worst], getattr(self, self.policy.name), self.refinable)
        tail = self.layers.panel_tail(y)
        if self.positions_auto and not tail <= self.tail.tol:
            if 2 * self.positions <= self.max_positions:
                raise RefinePositions(t, f"position tail {tail:.3g} > {self.tail.tol:g} at positions={self.positions}")
            # at the cap: the positions no longer resolve the state
            raise UnderResolved(f"under-resolved in the position at t={t:.6g}: the top Legendre degrees of the panels "
                                f"hold {tail:.3g} > tail_tol={self.tail.tol:g} with positions={self.positions} (the "
                                "cap `max_positions`).", t=t, tail=tail, tol=self.tail.tol)

    def _next(self, run, t, y, reason):
        if isinstance(reason, RefinePositions):
            finer = copy.copy(self)
            finer._set_rule(self.layers.refined())
            return finer, self.layers.resample(y, finer.layers)
        return super()._next(run, t, y, reason)

    def _refine(self, run, t, y):
        finer, _ = super()._refine(run, t, y[0])
        return finer, np.stack([self.basis.pad(row, finer.basis) for row in y])

    def _diagnostics(self, run, t, y):
        """Mass (the joint one), min ρ over positions and angles, the spectral tail of the worst position,
        the tail in the position (`PositionRule.panel_tail`) and the resolutions."""
        masses = self._representation(run).mass(self._to_data(run, y), per_position=True)
        return {"mass": float(self.layers.weights @ masses), "min_density": float(self.basis.synthesis(y).min()),
                "spectral_tail": float(spectral_tail(self._layer_power(run, y)).max()),
                "position_tail": self.layers.panel_tail(y), "positions": float(self.positions),
                self.policy.name: float(getattr(self, self.policy.name))}

    def _stats(self, run):
        return {**super()._stats(run), "positions_final": self.positions}

    # -- initial data ----------------------------------------------------------------------------------
    def _per_position(self, run, make):
        """Stack the one-density initial states make(s_i) over the nodes (`_layer_state` of each); a
        ValueError names the position."""
        rows = []
        for i, s in enumerate(self.layers.nodes):
            try:
                rows.append(self._layer_state(run, make(s)))
            except ValueError as exc:
                raise InvalidInput(f"{exc} (at the position s={s:.6g}, node {i} of {self.positions})") from None
        return np.stack(rows)

    def _layer_state(self, run, y):
        """The layered state's row of one density's initial state ``y`` (default ``y`` itself)."""
        return y

    def _initial_from_callable(self, run, rho0, normalize):
        """ρ0(x, s) at each node s_i (or ρ0(x) for every position), each validated by the solver's
        one-density hook (finite, non-negative, mass 1 per position)."""
        one = super(Layered, self)._initial_from_callable
        if takes_position(rho0):
            return self._per_position(run, lambda s: one(run, lambda x: rho0(x, s), normalize))
        return self._per_position(run, lambda s: one(run, rho0, normalize))

    def _initial_from_grid(self, run, grid, normalize):
        return self._per_position(run, lambda s: super(Layered, self)._initial_from_grid(run, grid, normalize))

    def _initial_from_data(self, run, data, normalize):
        """Layered data (M, ...) as ``sol.data[i]`` of a run with the same positions, or one density's
        data (``density_ndim`` axes) for every position."""
        one = super(Layered, self)._initial_from_data
        data = np.asarray(data)
        if data.ndim != self.density_ndim + 1:
            return self._per_position(run, lambda s: one(run, data, normalize))
        if data.shape[0] != self.positions:
            raise InvalidInput(f"`initial` holds {data.shape[0]} positions, this solver has positions={self.positions}.")
        rows = iter(data)
        return self._per_position(run, lambda s: one(run, next(rows), normalize))


__all__ = ["Layered", "POSITIONS_POLICY", "RefinePositions", "check_positions_model", "signature_of_init",
           "takes_position"]
