"""The named time steppers: what `solvers.Solver.solve(..., method=name)` runs (`STEPPERS`).

Each `Stepper` declares its ``name``, ``kind``, ``options`` and the solver hooks it ``needs``, and
drives the engine of `solvers.integrators` (`integrate`, `integrate_fixed`, `march`) through a run's
hooks: the adaptive Runge–Kutta pairs ("dopri5", "bs32"), SSP-RK3 under a CFL limit, Euler–Maruyama
and the authors' Euler-then-normalise for particles, and the exact flow from event to event. The
noise of the fixed steppers is keyed by the seed and the start time of each step (`keyed_normal`).
"""
import numpy as np

from meanfield.errors import InvalidInput, SolverError

from .integrators import EventDriven, Failure, IntegrationResult, integrate, integrate_fixed, march

class Stepper:
    """A named time stepper: what `solvers.Solver.solve(..., method=name)` runs.

    Contract (like scipy's ``OdeSolver``):

    1. ``name``: the key in `STEPPERS`; ``kind``: what it is, in a few words; ``options``: the keyword
       options it accepts, with defaults (a solver may override a default through its ``stepper_defaults``).
    2. ``needs``: the solver hooks it calls besides ``_rhs`` (checked by `check`); ``carries_tracers``:
       it reaches the solver only through the `solvers.base.Run`'s hooks, which add the tracers.
    3. ``integrate(run, y0, t_eval, callback, progress, desc)`` advances the run's state and returns
       an `IntegrationResult`; the solver's hooks are reached through the `solvers.base.Run` (looked
       up at each call: at a breakpoint of the run, ``run.breaks``, ``run.enter_piece`` may change
       ``run.solver``, and no step crosses it). A run
       that stops before the last saved time sets ``failure`` (a `Failure`: where, which step, why,
       and for a monitor's stop the state), from which `Solver.solve` continues or raises.
    """

    name = None
    kind = ""           # what it is, in a few words (the steppers' table of docs/architecture.md)
    adaptive = False
    options = {}
    needs = ()
    carries_tracers = True

    def check(self, solver):
        missing = [h for h in self.needs if not callable(getattr(solver, h, None))]
        if missing:
            raise InvalidInput(f"`method`={self.name!r} needs {', '.join(missing)}, which {type(solver).__name__} "
                             "does not implement.")

    def integrate(self, run, y0, t_eval, *, callback=None, progress=None, desc=None):
        raise NotImplementedError

    def __repr__(self):
        return f"<stepper {self.name!r}>"


class AdaptiveRK(Stepper):
    """Adaptive embedded Runge–Kutta pair, ``name`` "dopri5" (Dormand–Prince 5(4)) or "bs32"
    (Bogacki–Shampine 3(2)), with error control. When the solver has a diagonal linear part L (noise),
    it is applied exactly through the integrating factor e^{hL} (Lawson's method; see the module
    docstring); without one, this is the plain Runge–Kutta pair."""

    adaptive = True
    options = {"rtol": 1e-8, "atol": 1e-10, "max_step": np.inf, "first_step": None, "dense_output": False}

    def __init__(self, name, kind):
        self.name, self.kind = name, kind

    def integrate(self, run, y0, t_eval, *, callback=None, progress=None, desc=None):
        o = run.options
        if not isinstance(o["dense_output"], (bool, np.bool_)):
            raise InvalidInput(f"`dense_output` must be True or False, got {o['dense_output']!r}.")
        return integrate(run.rhs, y0, t_eval, method=self.name, rtol=o["rtol"], atol=o["atol"], linear=run.linear(),
                         retract=run.retract if run.retracts else None, monitor=run.monitor,
                         callback=callback, first_step=o["first_step"], max_step=o["max_step"], progress=progress,
                         desc=desc, stable_step=run.stable_step, dense_output=o["dense_output"],
                         retract_invariant=run.retract_invariant, magnitude=run.magnitude, norm=run.error_norm,
                         threads=run.threads, breaks=run.breaks(t_eval), on_break=run.enter_piece)


class _Fixed(Stepper):
    """Fixed step ``dt`` (shortened to land on every saved time), driven by `integrate_fixed`."""

    def integrate(self, run, y0, t_eval, *, callback=None, progress=None, desc=None):
        dt = run.options["dt"]
        run.dt = self.default_dt(run, y0) if dt is None else dt     # recorded: a continued run keeps it
        return integrate_fixed(self.step_function(run), y0, t_eval, run.dt, monitor=run.monitor, callback=callback,
                               progress=progress, desc=desc, breaks=run.breaks(t_eval), on_break=run.enter_piece)

    def default_dt(self, run, y0):
        raise InvalidInput(f"`dt` is required with method={self.name!r}.")

    def step_function(self, run):
        raise NotImplementedError


class SSPRK3(_Fixed):
    """Shu–Osher SSP-RK3, a convex combination of forward-Euler stages, under a CFL limit.

    Each outer step ``dt`` is split into sub-steps τ with ``solver._cfl_rate(run, y)``·τ <= ``cfl``; a
    stage whose own CFL number exceeds 1 (``solver._euler`` returns None) halves τ. After the transport
    sub-steps, ``solver._split(run, y, dt)`` applies the split (implicit) part, e.g. diffusion. Every
    property of the Euler stage that is preserved by convex combinations (positivity, bounds) holds
    for the step.
    """

    name = "ssprk3"
    kind = "SSP-RK3 under a CFL limit, then the split (implicit) diffusion"
    options = {"dt": None, "cfl": 0.5}
    carries_tracers = False
    needs = ("_euler", "_cfl_rate")

    def default_dt(self, run, y0):
        """min(0.05, the CFL step at the initial state)."""
        rate = run.solver._cfl_rate(run, y0)
        return 0.05 if rate == 0 else min(0.05, run.options["cfl"] / rate)

    def step_function(self, run):
        cfl = run.options["cfl"]

        def euler(v, tau):
            return run.solver._euler(run, v, tau)

        def stage(u, tau):
            u1 = euler(u, tau)
            if u1 is None:
                return None
            e2 = euler(u1, tau)
            if e2 is None:
                return None
            e3 = euler(0.75 * u + 0.25 * e2, tau)
            return None if e3 is None else u / 3 + 2 * e3 / 3

        def step(t, y, h):
            remaining = h
            while remaining > 1e-15 * max(h, 1.0):
                rate = run.solver._cfl_rate(run, y)
                tau = remaining if rate == 0 else min(remaining, cfl / rate)
                tau = remaining / int(np.ceil(remaining / tau - 1e-12))
                for _ in range(30):
                    y_new = stage(y, tau)
                    if y_new is not None:
                        break
                    tau /= 2
                else:
                    raise SolverError(f"SSP-RK3 could not meet the CFL condition at t={t:.6g}; lower `cfl`.")
                y = y_new
                remaining -= tau
            return run.solver._split(run, y, h)

        return step


class EulerMaruyama(_Fixed):
    """y ← R(y + h·F(t, y) + sqrt(2νh)·P_y ξ), ξ ~ N(0, I): the projected Stratonovich SDE of the
    noisy particle system with the retraction R (docs/mathematics.md §6). The Gaussian ξ of the step
    starting at time t is drawn from a generator keyed by (seed, t), so a run continued from a saved
    time draws exactly the noise of the uninterrupted run."""

    name = "euler-maruyama"
    kind = "fixed step of the projected Stratonovich SDE, retraction onto the sphere"
    options = {"dt": None}
    needs = ("_tangent_noise",)

    def default_dt(self, run, y0):
        return 0.01

    def drift(self, run):
        return run.rhs

    def step_function(self, run):
        amp, drift = np.sqrt(2.0 * run.model.noise), self.drift(run)

        def step(t, y, h):
            with np.errstate(over="ignore", invalid="ignore"):
                if amp == 0.0 and run.retracts:
                    return run.retract_euler(y, h, drift(t, y))
                y_new = y + h * drift(t, y)
            if amp > 0.0:
                y_new += amp * np.sqrt(h) * run.solver._tangent_noise(run, y, run.noise(t, y.shape))
            return run.retract(y_new) if run.retracts else y_new

        return step


class EulerNormalize(EulerMaruyama):
    """The authors' scheme: y ← y + h·F(y), then renormalise onto the sphere (no tangent projection
    before the normalisation; docs/mathematics.md §1), plus the noise of `EulerMaruyama` when ν > 0.
    ``solver._euler_velocity(run, t, y)`` is F. Default step 0.1 (0.01 with noise)."""

    name = "euler-normalize"
    kind = "the authors' Euler step then normalisation"
    needs = ("_euler_velocity", "_tangent_noise")
    carries_tracers = False

    def default_dt(self, run, y0):
        return 0.01 if run.model.noise > 0 else 0.1

    def drift(self, run):
        return lambda t, y: run.solver._euler_velocity(run, t, y)


class Events(Stepper):
    """No time step: the solver's exact flow between the events it finds, ``solver._advance(run, t, y,
    target)`` -> (t', y') (`EventDriven`; `solvers.Hardmax`). ``nsteps`` counts the pieces (events and
    saved times)."""

    name = "events"
    kind = "no time step: the solver's exact flow from event to event (`_advance`)"
    needs = ("_advance",)
    carries_tracers = False

    def integrate(self, run, y0, t_eval, *, callback=None, progress=None, desc=None):
        def advance(t, y, target):
            return run.solver._advance(run, t, y, target)

        return march(EventDriven(advance, t_eval[0], y0), t_eval, monitor=run.monitor, callback=callback,
                     progress=progress, desc=desc)


STEPPERS = {s.name: s for s in (
    AdaptiveRK("dopri5", "adaptive Dormand–Prince 5(4), noise by the exact integrating factor (Lawson)"),
    AdaptiveRK("bs32", "adaptive Bogacki–Shampine 3(2), Lawson"), SSPRK3(), EulerMaruyama(), EulerNormalize(), Events())}


def keyed_normal(seed, t, shape):
    """Standard normal draws for the step starting at time ``t``: a PCG64 stream keyed by (seed, t),
    so the noise of a step depends only on the seed and the step's start time (continuable runs)."""
    key = int(np.float64(t).view(np.int64)) & 0x7FFFFFFFFFFFFFFF
    seq = np.random.SeedSequence(entropy=int(seed), spawn_key=(key,))
    return np.random.Generator(np.random.PCG64(seq)).standard_normal(shape)
