"""`Run`: the state of one run of a solver (contract item 3 of `solvers.base`).

A solver is immutable; what belongs to one run (the saved times, the checked options, the noise
seed, work buffers, the initial state, and a solver's own per-run values in its `Run` subclass)
lives on the run that `solvers.Solver.start` creates and hands to every hook.
"""
from dataclasses import dataclass, field, replace

import numpy as np

from meanfield.transformer.model import Model
from meanfield.results.solution import Solution
from .timestepping import STEPPERS, keyed_normal
from .tracers import TracerLayout


@dataclass(eq=False, slots=True)
class Run:
    """The state of one run of a solver: the discretisation in use, the saved times, the resolved
    options, the noise seed and per-run work buffers (``workspace``).

    A solver whose runs carry values of their own declares them in a subclass (a dataclass with
    slots: every field has a default and a comment, and assigning an undeclared name raises
    AttributeError) and names it in its ``run_type``; solvers keep per-run values there, never on
    themselves. The fields after ``seed`` follow from the solver and the method, or are set by
    `Solver.start`, the solver's hooks (``magnitude``) and the fixed-step steppers (``dt``).
    """

    solver: object
    t_eval: np.ndarray
    method: str                   # the name of the stepper in `solvers.timestepping.STEPPERS`
    options: dict                 # the stepper's and the solver's options, checked
    seed: int = None              # the noise seed (`keyed_normal`)
    model: Model = field(init=False)
    stepper: object = field(init=False)
    retracts: bool = field(init=False)               # retract after each step (``_retract``)
    workspace: dict = field(init=False, default_factory=dict)   # work buffers of the hooks
    magnitude: object = field(init=False, default=None)   # the error control's size of y (None: |y|)
    y0: object = field(init=False, default=None)     # the initial state
    dt: float = field(init=False, default=None)      # the step of a fixed-step stepper
    threads: int = field(init=False, default=1)      # the threads of the run (`meanfield.threads`)
    tracers: TracerLayout = field(init=False, default=None)   # the state carries tracers (`carry`), else None

    def __post_init__(self):
        self.model = self.solver.model.source       # a piece's run records the model with its schedule
        self.threads = self.solver.threads
        self.stepper = STEPPERS[self.method]
        self.retracts = self.solver.retracts

    def breaks(self, t_eval):
        """The times inside the span of ``t_eval`` where the parameters change (`Solver._breakpoints`),
        a saved time within 1e-12 of one standing for it."""
        t_eval = np.asarray(t_eval, dtype=float)
        out = []
        for b in self.solver._breakpoints(self, float(t_eval[0]), float(t_eval[-1])):
            near = t_eval[np.abs(t_eval - b) <= 1e-12 * max(1.0, abs(b))]
            out.append(float(near[0]) if near.size else float(b))
        return out

    def enter_piece(self, t):
        """At a breakpoint t: the solver of the piece that starts there (`Solver._enter_piece`)."""
        return self.solver._enter_piece(self, t)

    # the hooks of the stepper; with tracers the state is Y = [y, z] (`solvers.tracers.TracerLayout`)
    def rhs(self, t, y):
        if self.tracers is None:
            return self.solver._rhs(self, t, y)
        state, points = self.tracers.split(y)
        f = self.solver._rhs(self, t, state)
        z = points / np.linalg.norm(points, axis=-1, keepdims=True)
        return self.tracers.pack(f, self.solver._tracer_velocity(self, t, state, z))

    def linear(self):
        L = self.solver._linear(self)
        if L is None or self.tracers is None:
            return L
        return self.tracers.pack(np.broadcast_to(L, self.tracers.shape), np.zeros(self.tracers.points_shape)).real

    def retract(self, y):
        if self.tracers is None:
            return self.solver._retract(self, y)
        state, _ = self.tracers.split(y)
        return self.tracers.pack(self.solver._retract(self, state) if self.tracers.retracts else state,
                                 self.tracers.points(y))

    def retract_euler(self, y, h, f):
        if self.tracers is None:
            return self.solver._retract_euler(self, y, h, f)
        return self.retract(y + h * f)

    def monitor(self, t, y):
        return self.solver._monitor(self, t, self.state(y))

    def diagnostics(self, t, y):
        return self.solver._diagnostics(self, t, self.state(y))

    def stable_step(self, y):
        return self.solver._stable_step(self, self.state(y))

    @property
    def retract_invariant(self):
        """The right-hand side does not change under the retraction (the tracers' field is taken at
        z/|z|, so only the solver's own retraction counts)."""
        return self.solver.retract_invariant or (self.tracers is not None and not self.tracers.retracts)

    @property
    def error_norm(self):
        """The stepper's error norm: None (RMS), or with tracers the larger of the state's and theirs."""
        return None if self.tracers is None else self.tracers.norm

    def state(self, y):
        """The solver's state in the stepper's state ``y`` (itself without tracers)."""
        return y if self.tracers is None else self.tracers.split(y)[0]

    def tracer_points(self, y):
        """The tracers in the stepper's state ``y`` (m, d), or None."""
        return None if self.tracers is None else self.tracers.points(y)

    def carry(self, points):
        """Carry the tracers ``points`` (m, d), checked, with the initial state ``y0`` from now on."""
        self.solver._check_tracers(self)
        state = self.y0
        self.tracers = TracerLayout(state, points, self.retracts, self.magnitude)
        self.retracts = True
        self.magnitude = self.tracers.sizes
        self.y0 = self.tracers.pack(state, points)

    def noise(self, t, shape):
        """Standard normal draws for the step starting at ``t`` (reproducible across restarts)."""
        return keyed_normal(self.seed, t, shape)

    def representation(self):
        return self.solver._representation(self)

    def derived(self, solver, y0, t_eval):
        """A run of ``solver`` (a refinement of this run's) from ``y0`` with the same options, seed and
        solver's per-run values (the fields of its ``run_type``); fresh work buffers."""
        if solver.run_type is not type(self):
            raise TypeError(f"a state of {type(solver).__name__} cannot continue a {type(self).__name__}: `_next` "
                            "returns a Solution for a discretisation with other per-run values.")
        run = replace(self, solver=solver, t_eval=t_eval)
        solver._configure(run)
        run.y0 = y0
        return run

    def following(self, solver, y, t):
        """The run that continues this one from time ``t`` on ``solver`` over the saved times after
        ``t`` (`Solver._next`): ``y`` a state of ``solver``, which keeps this run's options, seed and
        per-run values (`derived`), or a `Solution` that ``solver`` starts from with its own options
        (and this run's method if it has it)."""
        t_eval = np.concatenate([[t], self.t_eval[self.t_eval > t]])
        if isinstance(y, Solution):
            return solver.start(y, t_eval, method=self.method if self.method in solver.steppers else None)
        return self.derived(solver, y, t_eval)
