"""Hand-over: a density run that stops resolving its density goes on along the characteristics.

A spectral run of the noiseless equation (docs/mathematics.md §2) stops with `UnderResolved` when
its density concentrates (clusters, Theorem 6.1 of Geshkovski, Letrouit, Polyanskiy, Rigollet, *A
mathematical perspective on Transformers* (2023)) faster than its basis can follow. The
characteristics (`solvers.Lagrangian`, docs/mathematics.md §9) carry the density exactly however
sharp it gets, so the run can continue on them: the density of the state that failed the check,
evaluated at the labels, is the new ρ_0, and `Solver.solve` returns one `Solution` whose
``segments`` are the two parts (docs/lagrangian.md, "Automatic hand-over").

This is a continuation strategy (`Solver._next`): `HandOverToCharacteristics` is mixed into the
solvers that offer it (`FourierCircle`, `SphericalHarmonics`) and answers their tail alarm, and the
start from a run that has already handed over, by the `Lagrangian` that continues it.
"""
import warnings

from meanfield.errors import InvalidInput, UnderResolved
from meanfield.results.solution import Solution

from .lagrangian import Lagrangian, continuation_solver

class HandOver(UserWarning):
    """A spectral run that stopped resolving its density went on along the characteristics."""


LAGRANGIAN_OPTIONS = ("nodes", "panels", "order", "estimate", "cluster_tol", "min_mass", "chunk")


def handover_target(model, value, default="raise"):
    """Check the solve option ``on_underresolved`` of a run of ``model``: "auto" (``default`` for a
    noiseless model, else "raise"), "raise", "lagrangian", a `Lagrangian` of the same model, or a dict
    of `Lagrangian` options (`LAGRANGIAN_OPTIONS`, built into one). Returns "raise", "lagrangian" or
    the `Lagrangian`; ValueError naming the option."""
    if isinstance(value, str) and value == "auto":
        standard = model.normalization == "post" and model.mlp is None      # masked or not: labels in (σ, x)
        value = default if model.noise == 0 and standard else "raise"
    if isinstance(value, dict):
        unknown = sorted(set(value) - set(LAGRANGIAN_OPTIONS))
        if unknown:
            raise InvalidInput(f"`on_underresolved` as a dict holds options of solvers.Lagrangian; "
                             f"{unknown[0]!r} is not one.")
        if model.is_causal and model.noise == 0:        # built at the hand-over, on the run's position rule
            return dict(value)
        value = "lagrangian" if model.noise > 0 else Lagrangian(model, **value)     # noise: refused below
    if isinstance(value, Lagrangian):
        if value.model != model:
            raise InvalidInput(f"`on_underresolved` is a Lagrangian solver of {value.model!r}, this run solves "
                             f"{model!r}; build it with the same model.")
        return value
    if not isinstance(value, str) or value not in ("raise", "lagrangian"):
        raise InvalidInput(f"`on_underresolved` must be 'auto', 'raise', 'lagrangian' or a solvers.Lagrangian, got "
                         f"{value!r}.")
    if value == "lagrangian" and model.noise > 0:
        raise InvalidInput(f"`on_underresolved`='lagrangian' needs noise = 0 (got noise={model.noise:g}): with "
                         "diffusion the density is not carried by characteristics.")
    return value


def handover_solver(target, solution):
    """The `Lagrangian` that continues ``solution`` for the checked option value ``target``:
    ``target`` itself, or for "lagrangian" (or a dict of options, for a masked model: labels in (σ, x) on the
    run's position rule) `solvers.lagrangian.continuation_solver`."""
    if isinstance(target, dict):
        return continuation_solver(solution, **target)
    return continuation_solver(solution) if isinstance(target, str) else target


class HandOverToCharacteristics:
    """The solve option ``on_underresolved`` of a density solver, and its continuation.

    "auto" (default): the solver's ``default_handover`` ("raise" for `FourierCircle`, "lagrangian" for
    `SphericalHarmonics`) when the model has no noise, else "raise". "raise": `UnderResolved` when
    the density is no longer resolved. "lagrangian", a
    `Lagrangian` of the same model, or a dict of `Lagrangian` options (``{"panels": 32}``): the run
    continues along the characteristics from the state that failed the check (its density at the
    labels is the new ρ_0; "lagrangian" takes the labels of `solvers.lagrangian.continuation_solver`)
    over the remaining saved times, with the Lagrangian's own stepper options, and `solve` returns
    one `Solution` whose ``segments`` are the two parts, with ``stats["handover_t"]`` the time of
    the hand-over. A run that has already handed over (e.g. its checkpoint), continued with the
    option set, goes on along the characteristics. Needs noise = 0.
    """

    solve_options = {"on_underresolved": "auto"}
    default_handover = "raise"
    handover_options = LAGRANGIAN_OPTIONS       # the keys of a dict ``on_underresolved`` (a configuration reads them)

    def _configure(self, run):
        asked = run.options["on_underresolved"]
        target = handover_target(self.model, asked, self.default_handover)
        # "auto" that resolved to the hand-over stays "auto": a hand-over the caller did not name is announced
        unasked = isinstance(asked, str) and asked == "auto" and isinstance(target, str) and target == "lagrangian"
        run.options["on_underresolved"] = "auto" if unasked else target
        return super()._configure(run)

    def _next(self, run, t, y, reason):
        """The `Lagrangian` that continues an under-resolved state ``y`` at ``t`` (from a Solution of
        that one time), or a Lagrangian Solution ``y`` a run starts from; else the next strategy's."""
        target = run.options["on_underresolved"]
        if isinstance(target, str) and target == "raise":
            return super()._next(run, t, y, reason)
        if reason is None and isinstance(y, Solution) and y.representation.keeps_identity and y.representation.is_density:
            return handover_solver(target, y), y
        if isinstance(reason, UnderResolved):
            one = Solution([t], run.model, self._representation(run), self._to_data(run, y)[None],
                           solver=type(self).__name__)
            tail = f" (spectral tail {reason.tail:.3g} > {reason.tol:g})" if reason.tail is not None else ""
            if isinstance(target, str) and target == "auto":
                warnings.warn(f"{type(self).__name__}: the density is no longer resolved at t = {t:.6g}{tail}; the run "
                              "goes on along the characteristics (solvers.Lagrangian). Pass on_underresolved='raise' to "
                              "stop there instead.", HandOver, stacklevel=2)
            return handover_solver(target, one), one
        return super()._next(run, t, y, reason)


__all__ = ["HandOver", "HandOverToCharacteristics", "handover_target", "handover_solver", "LAGRANGIAN_OPTIONS"]
