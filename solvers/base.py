"""The solver protocol: one `Solver.solve` for every discretisation, per-run state in a `Run`.

A solver is a discretisation of the mean-field equation (docs/mathematics.md §2): it turns a
`meanfield.Model` and a resolution into a right-hand side, a representation and monitors. It is
immutable after ``__init__``, so one solver object can be shared by threads and pickled to worker
processes. Everything that belongs to one run (the initial mass, the weights of points, the noise seed,
work buffers, the current resolution of an automatic run) lives on the `Run` that `Solver.solve`
creates and hands to every hook. Time stepping is done by the named steppers of
`solvers.timestepping` (like Dedalus, a new basis needs no new time stepper).

Contract for whoever adds a solver (like scipy's ``OdeSolver``):

1. ``__init__(model, <resolution>, **options)`` calls ``Solver.__init__(self, model)``, validates the
   resolution (ValueError naming the argument and the accepted range) and raises
   `meanfield.UnsupportedModel` for models it cannot represent. It stores nothing that changes.
2. Class attributes: ``steppers`` (names in `solvers.timestepping.STEPPERS`, the first is the
   default), ``solve_options`` (extra keyword options of ``solve`` with their defaults),
   ``stepper_defaults`` (overrides of the steppers' default options), ``retracts``.
3. Initial states, one hook per kind of ``initial`` (implement those that apply):
   ``_initial_from_callable(run, rho0, normalize)``, ``_initial_from_data(run, data, normalize)``
   (an array in the solver's own representation: exactly what ``_to_data`` returns),
   ``_initial_from_solution(run, sol)`` (default: the last saved slice through
   ``_initial_from_data``), ``_initial_from_measure(run, points, weights, normalize)``,
   ``_initial_from_grid(run, grid, normalize)`` (`meanfield.densities.GridValues`; default: its
   interpolant through ``_initial_from_callable``, rescaled to the grid's mass).
4. The discretisation: ``_rhs(run, t, y)``; ``_linear(run)`` (a diagonal applied exactly by the
   integrating factor, or None); ``_retract(run, y)``; ``_representation(run)``; ``_to_data(run, y)``.
5. Optional: ``_configure(run)`` (check solver options, before the initial state), ``_monitor(run, t, y)``
   (raise `meanfield.UnderResolved` or another `SolverError` to stop), ``_next(run, t, y, reason)``
   (the continuation: the discretisation and state on which a stopped run, or a run starting from a
   Solution, goes on), ``_diagnostics(run, t, y)``,
   ``_stable_step(run, y)`` (stability limit of an explicit stepper), ``_keep(run, i, y)`` (what is
   kept of saved time i after its diagnostics, e.g. nothing for a run that saves diagnostics only),
   ``_run_context(run)`` (a context held while the stepper runs, e.g. thread limits),
   and the hooks a stepper
   ``needs`` (``_euler``/``_cfl_rate``/``_split`` for SSP-RK3, ``_tangent_noise`` for Euler–Maruyama,
   ``_euler_velocity`` for Euler-then-normalise).
6. Do not override ``solve``: it validates the options, builds the run, drives the stepper, counts
   evaluations, draws the progress bar, writes checkpoints, refines automatic resolutions and turns
   failures into exceptions that carry the `Solution` computed so far.
"""
import contextlib
import os
import time

import numpy as np

from meanfield.validation import check_real, check_times
from meanfield.densities import GridValues
from meanfield.errors import Interrupted, NonFiniteState, SolverError, UnsupportedModel
from meanfield.model import Model
from meanfield.solution import Solution, concat

from .timestepping import STEPPERS, keyed_normal


class Run:
    """The state of one run of a solver: the discretisation in use, the saved times, the resolved
    options, the noise seed and per-run work buffers (``workspace``). Solvers keep per-run values
    here (as attributes), never on themselves."""

    def __init__(self, solver, t_eval, method, options, seed=None):
        self.solver = solver
        self.model = solver.model
        self.t_eval = t_eval
        self.method = method
        self.stepper = STEPPERS[method]
        self.options = options
        self.seed = seed
        self.workspace = {}
        self.retracts = solver.retracts
        self.magnitude = None      # the adaptive error control's size of the state (None: |y| componentwise)
        self.y0 = None

    def rhs(self, t, y):
        return self.solver._rhs(self, t, y)

    def linear(self):
        return self.solver._linear(self)

    def retract(self, y):
        return self.solver._retract(self, y)

    def retract_euler(self, y, h, f):
        return self.solver._retract_euler(self, y, h, f)

    def monitor(self, t, y):
        return self.solver._monitor(self, t, y)

    def diagnostics(self, t, y):
        return self.solver._diagnostics(self, t, y)

    def stable_step(self, y):
        return self.solver._stable_step(self, y)

    def noise(self, t, shape):
        """Standard normal draws for the step starting at ``t`` (reproducible across restarts)."""
        return keyed_normal(self.seed, t, shape)

    def representation(self):
        return self.solver._representation(self)

    def derived(self, solver, y0, t_eval):
        """A run of ``solver`` (a refinement of this run's) from ``y0`` with the same options and seed."""
        run = Run(solver, t_eval, self.method, self.options, self.seed)
        run.__dict__.update({k: v for k, v in self.__dict__.items() if k not in run.__dict__})
        run.workspace = {}
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


def _seed_of(rng):
    if rng is None:
        return int(np.random.SeedSequence().entropy % (2 ** 63))
    if isinstance(rng, np.random.Generator):
        return int(rng.integers(2 ** 63))
    if isinstance(rng, (int, np.integer)) and not isinstance(rng, bool) and rng >= 0:
        return int(rng)
    raise ValueError(f"`rng` must be None, a non-negative integer seed or a numpy Generator, got {rng!r}.")


_OPTION_CHECKS = {
    "rtol": dict(low=0.0, low_open=True), "atol": dict(low=0.0, low_open=True),
    "max_step": dict(low=0.0, low_open=True, allow_inf=True), "first_step": dict(low=0.0, low_open=True),
    "dt": dict(low=0.0, low_open=True), "cfl": dict(low=0.0, low_open=True, high=1.0),
    "checkpoint_every": dict(low=0.0),
}


class Solver:
    """Base class of every discretisation (see the module docstring for the contract)."""

    steppers = ("dopri5", "bs32")
    solve_options = {}
    positional_options = ()
    stepper_defaults = {}
    retracts = False

    def __init__(self, model):
        if not isinstance(model, Model):
            raise ValueError(f"`model` must be a meanfield.Model, got {type(model).__name__}.")
        self.model = model

    def _run_context(self, run):
        """A context held while the stepper runs (default: none; e.g. BLAS on one thread while the
        solver's own sums run on several)."""
        return contextlib.nullcontext()

    def _require_zonal(self):
        if not self.model.is_zonal:
            raise UnsupportedModel(f"{type(self).__name__} needs a zonal model (one head, Q^T K = I, V = v·I); "
                                   "general Q, K, V need a solver that takes any model.")

    # -- hooks (defaults) ----------------------------------------------------------------------------
    def _configure(self, run):
        return None

    def _initial_from_callable(self, run, rho0, normalize):
        raise ValueError(f"`initial`: {type(self).__name__} cannot start from a callable.")

    def _initial_from_data(self, run, data, normalize):
        raise ValueError(f"`initial`: {type(self).__name__} cannot start from an array.")

    def _initial_from_measure(self, run, points, weights, normalize):
        raise ValueError(f"`initial`: {type(self).__name__} cannot start from a (points, weights) pair; "
                         "pass a density callable or an array of its own representation.")

    def _initial_from_grid(self, run, grid, normalize):
        return self._initial_from_callable(run, grid.unit_mass(normalize, self.model.dim), True)

    def _initial_from_solution(self, run, sol):
        mine = self._representation(run)
        if sol.representation.name != mine.name:
            raise ValueError(f"`initial` is a {sol.representation.name!r} Solution; {type(self).__name__} continues "
                             f"{mine.name!r} Solutions (or evaluate its density and pass a callable).")
        return self._initial_from_data(run, sol.data[-1], False)

    def _rhs(self, run, t, y):
        raise NotImplementedError

    def _linear(self, run):
        return None

    def _retract(self, run, y):
        return y

    def _retract_euler(self, run, y, h, f):
        """The retraction of the Euler update y + h·f (one pass where a solver fuses them)."""
        return self._retract(run, y + h * f)

    def _monitor(self, run, t, y):
        return None

    def _diagnostics(self, run, t, y):
        return {}

    def _stable_step(self, run, y):
        return np.inf

    def _keep(self, run, i, y):
        """What the run keeps of saved time ``i`` (an index into ``run.t_eval``) once its diagnostics
        are recorded: the state ``y`` itself by default; `_to_data` receives it."""
        return y

    def _split(self, run, y, h):
        return y

    def _representation(self, run):
        raise NotImplementedError

    def _to_data(self, run, y):
        return np.array(y, copy=True)

    def _stats(self, run):
        """Run facts recorded in ``Solution.stats`` besides the stepper's counters."""
        return {}

    auto_resolution = None   # automatic resolutions: (resolution attribute, its cap), e.g. ("modes", "max_modes")

    def _next(self, run, t, y, reason):
        """The discretisation on which the run goes on at time ``t``, and the state there.

        ``reason`` is the `SolverError` the monitor raised at ``t`` (``y`` the state it stopped), or
        None when a run starts from a Solution ``y`` (at its last time). Returns (solver, state):
        a state of ``solver`` that keeps the run's options and per-run values (a refinement of
        this discretisation), or a `Solution` that ``solver`` starts from; or None: the run stops
        with ``reason``. Default: a start goes on here, a stop stops.
        """
        return (self, y) if reason is None else None

    def _choose_method(self, method, options):
        return self.steppers[0] if method is None else method

    # -- written once --------------------------------------------------------------------------------
    def start(self, initial, t_eval=(0.0,), *, method=None, normalize=False, **options):
        """Validate ``initial``, ``t_eval`` and the options and return the `Run` that `solve` advances
        (``run.y0`` is the initial state, ``run.rhs(t, y)`` the right-hand side)."""
        given, asked = dict(options), method       # as given: a discretisation of this class continuing takes them
        method = self._choose_method(method, options)
        if method not in self.steppers:
            raise ValueError(f"`method` must be one of {list(self.steppers)} for {type(self).__name__}, "
                             f"got {method!r}.")
        stepper = STEPPERS[method]
        stepper.check(self)
        accepted = dict(stepper.options)
        accepted.update({k: v for k, v in self.stepper_defaults.items() if k in accepted})
        accepted.update(self.solve_options)
        for key, value in options.items():
            if key not in accepted:
                raise ValueError(f"`{key}` does not apply to {type(self).__name__} with method={method!r}; "
                                 f"its options are {sorted(accepted)}.")
            if key in _OPTION_CHECKS and value is not None:
                options[key] = check_real(value, key, **_OPTION_CHECKS[key])
        opts = {**accepted, **options}
        if not isinstance(normalize, (bool, np.bool_)):
            raise ValueError(f"`normalize` must be True or False, got {normalize!r}.")
        if isinstance(initial, (str, os.PathLike)):
            from meanfield.solution import load

            if not os.path.isfile(initial):
                raise ValueError(f"`initial` (the initial density rho0) must be a density callable, a Solution or the "
                                 f"path of a saved one; there is no file {str(initial)!r}.")
            initial = load(initial)
        if isinstance(initial, Solution):
            initial = initial.segments[-1]          # a run in several representations continues its last one
            if initial.model.dim != self.model.dim:
                raise ValueError(f"`initial` lives on S^{initial.model.dim - 1}, this solver on S^{self.model.dim - 1}.")
            t_eval = check_times(t_eval, start=float(initial.t[-1]))
            seed = opts.get("rng", None)
            seed = initial.stats.get("noise_seed") if seed is None else seed
            if "dt" in opts and opts["dt"] is None and initial.stats.get("method") == method:
                opts["dt"] = initial.stats.get("dt")      # the fixed step of the run it continues
        else:
            t_eval = check_times(t_eval)
            seed = opts.get("rng", None)
        run = Run(self, t_eval, method, opts, _seed_of(seed))
        self._configure(run)
        if isinstance(initial, Solution):
            solver, initial = self._next(run, float(initial.t[-1]), initial, None)
            if solver is not self:
                # another discretisation continues this Solution: one of this class with this run's options
                if type(solver) is type(self):
                    return solver.start(initial, t_eval, method=asked, normalize=normalize, **given)
                return solver.start(initial, t_eval, method=method if method in solver.steppers else None)
            y0 = self._initial_from_solution(run, initial)
        elif isinstance(initial, GridValues):
            y0 = self._initial_from_grid(run, initial, normalize)
        elif callable(initial):
            y0 = self._initial_from_callable(run, initial, normalize)
        elif isinstance(initial, tuple) and len(initial) == 2:
            y0 = self._initial_from_measure(run, initial[0], initial[1], normalize)
        else:
            try:
                data = np.asarray(initial)
            except (TypeError, ValueError):
                data = None
            if data is None or data.dtype == object or data.ndim == 0:
                raise ValueError(f"`initial` must be a density callable, a Solution (or the path of a saved one) or "
                                 f"an array of {type(self).__name__}'s representation, got {type(initial).__name__}.")
            y0 = self._initial_from_data(run, data, normalize)
        run.y0 = y0
        return run

    def solve(self, initial, t_eval, *args, method=None, normalize=False, progress=None, checkpoint=None,
              checkpoint_every=30.0, history=False, **options):
        """Evolve ``initial`` and save the state at the times ``t_eval``.

        Parameters
        ----------
        initial : callable, Solution, path, array, grid values or (points, weights)
            A σ-relative density callable f(x) on points (..., d) (finite, non-negative, mass 1 within
            1e-6 unless ``normalize=True``); a `Solution` or the path of a saved one, continued from
            its last saved time (with its noise seed and, for fixed steps, its ``dt`` unless given);
            an array of the solver's own representation (as ``sol.data[i]``); density values on a
            documented grid, `meanfield.densities.on_grid`; for a solver of discrete measures, points
            or a ``(points, weights)`` pair.
        t_eval : 1-D array, strictly increasing, starting at 0 (or at the last time of the continued
            Solution).
        method : the name of a stepper in ``self.steppers`` (default: the first).
        normalize : rescale the initial mass to 1 instead of refusing it.
        progress : bool or None (None: a tqdm bar when stderr is a terminal).
        checkpoint : path, optional; the partial Solution is written there (NetCDF) at most every
            ``checkpoint_every`` seconds and when the run stops. `solve` continues from it.
        history : bool; with ``initial`` a Solution (or its path), return (and checkpoint) the whole
            run: ``initial.concat(continuation)``, the saved times of both in order.
        **options : the stepper's options (``rtol``, ``atol``, ``max_step``, ``first_step`` for the
            adaptive pairs; ``dt`` for fixed steps; ``cfl`` for SSP-RK3) and the solver's own
            (``solve_options``). An option that does not apply raises ValueError naming it.

        Returns
        -------
        Solution. Raises `UnderResolved`, `NonFiniteState`, `Interrupted` (all `SolverError`) with
        ``.solution`` holding the saved times before the failure. A run that a continuation
        (`_next`) moves to another kind of discretisation returns one Solution with a segment for
        each, and ``stats["handover_t"]`` the time of the change.
        """
        if len(args) > len(self.positional_options):
            raise TypeError(f"{type(self).__name__}.solve takes at most {2 + len(self.positional_options)} "
                            f"positional arguments ({len(args) + 2} given).")
        for name, value in zip(self.positional_options, args):
            if name in options:
                raise TypeError(f"{type(self).__name__}.solve got multiple values for `{name}`.")
            options[name] = value
        checkpoint_every = check_real(checkpoint_every, "checkpoint_every", low=0.0)
        if not isinstance(history, (bool, np.bool_)):
            raise ValueError(f"`history` must be True or False, got {history!r}.")
        if isinstance(initial, (str, os.PathLike)) and os.path.isfile(initial):
            from meanfield.solution import load

            initial = load(initial)
        if history and not isinstance(initial, Solution):
            raise ValueError("`history=True` continues a run: `initial` must be a Solution or the path of a saved one, "
                             f"got {type(initial).__name__}.")
        run = self.start(initial, t_eval, method=method, normalize=normalize, **options)
        prefix = [initial] if history else []      # the run it continues, kept in the result
        parts, changed_at = [], None
        last_write = [time.perf_counter()]

        def saver(run):
            diags = []

            def on_save(res):
                diags.append(run.diagnostics(res.t[-1], res.y[-1]))
                res.y[-1] = run.solver._keep(run, len(res.t) - 1, res.y[-1])
                if checkpoint is not None and time.perf_counter() - last_write[0] > checkpoint_every:
                    concat(*prefix, *parts, _build(run, res, diags)).save(checkpoint)
                    last_write[0] = time.perf_counter()

            return diags, on_save

        desc = f"{type(self).__name__} {self.model.kind} beta={self.model.beta:g}"
        while True:
            diags, on_save = saver(run)
            with run.solver._run_context(run):
                res = run.stepper.integrate(run, run.y0, run.t_eval, callback=on_save, progress=progress, desc=desc)
            parts.append(_build(run, res, diags))
            stop = res.failure
            successor = None if stop is None or stop.reason != "monitor" else run.solver._next(run, stop.t, stop.state,
                                                                                               res.error)
            if successor is None:
                break
            if isinstance(successor[1], Solution):
                changed_at = float(stop.t)        # another kind of discretisation: a new segment
            run = run.following(*successor, stop.t)
        sol = concat(*prefix, *parts)
        if changed_at is not None:
            sol.stats["handover_t"] = changed_at
        if checkpoint is not None:
            sol.save(checkpoint)
        if res.status == 0:
            return sol
        name = type(self).__name__
        if res.status == 1 and isinstance(res.error, SolverError):
            res.error.solution = sol
            raise res.error
        if res.status == -2:
            raise Interrupted(f"{name}: {res.message}; the Solution up to t={sol.t[-1]:.6g} is in `exc.solution`"
                              + (f" and in {checkpoint}" if checkpoint else ""), sol)
        if res.status == -3:
            raise SolverError(f"{name}: {res.message}. The saved times up to t={sol.t[-1]:.6g} are in "
                              "`exc.solution`.", sol)
        raise NonFiniteState(f"{name}: {res.message}. The saved times up to t={sol.t[-1]:.6g} are in "
                             "`exc.solution`.", sol, t=float(res.failure.t), step=res.failure.step)


def _build(run, res, diags):
    """The `Solution` of the saved times of ``res`` (diagnostics of every saved time, counters)."""
    n = len(res.t)
    # a monitor that stops the run on a saved time appends that time without the callback:
    # record its diagnostics here so that no saved time lacks them
    while len(diags) < n:
        diags.append(run.diagnostics(res.t[len(diags)], res.y[len(diags)]))
    data = np.stack([run.solver._to_data(run, y) for y in res.y[:n]])
    keys = set().union(*[d.keys() for d in diags[:n]]) if diags else set()
    diag_arrays = {k: np.array([d.get(k, np.nan) for d in diags[:n]]) for k in keys}
    stats = res.stats()
    stats["method"] = run.method
    if getattr(run, "dt", None) is not None:
        stats["dt"] = float(run.dt)
    stats["t_requested"] = float(run.t_eval[-1])      # a stopped run's picture shows what was not reached
    stats.update(run.solver._stats(run))
    if run.model.noise > 0 and run.seed is not None:
        stats["noise_seed"] = run.seed
    return Solution(np.array(res.t[:n]), run.model, run.representation(), data, diag_arrays, stats,
                    status=0 if res.status == 0 else 1, message=res.message, solver=type(run.solver).__name__)
