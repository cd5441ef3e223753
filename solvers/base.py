"""The solver protocol: one `Solver.solve` for every discretisation, per-run state in a `Run`.

A solver is a discretisation of the mean-field equation (docs/mathematics.md §2; (3.1) of
Geshkovski, Letrouit, Polyanskiy, Rigollet, *A mathematical perspective on Transformers*): it turns
a `meanfield.Model` and a resolution into a right-hand side, a representation and monitors. It is
immutable after ``__init__``, so one solver object can be shared by threads and pickled to worker
processes. Everything that belongs to one run lives on the `Run` that `Solver.start` creates and
hands to every hook. Time stepping is done by the named steppers of `solvers.timestepping` (like
Dedalus, a new basis needs no new time stepper).

Contract for whoever adds a solver (like scipy's ``OdeSolver``; `Solver.__init_subclass__` checks
the items marked (checked) when the class is defined and raises TypeError naming the item):

1. ``__init__(model, <resolution>, *, threads=None, **options)`` calls ``Solver.__init__(self, model,
   threads)`` (``self.threads``: the threads it may use, `meanfield.threads`), validates the
   resolution (ValueError naming the argument and the accepted range) and raises
   `meanfield.UnsupportedModel` for models it cannot represent (``_require_zonal()`` for a solver
   of zonal models). It stores nothing that changes during a run.
2. Class attributes (checked):
   ``steppers``: names in `solvers.timestepping.STEPPERS`, the first is the default;
   ``solve_options``: the solver's own keyword options of ``solve`` with their defaults (none may
   be one of ``solve``'s own keywords);
   ``positional_options``: names among ``solve_options`` that ``solve`` also takes positionally,
   in order, after ``initial`` and ``t_eval``;
   ``stepper_defaults``: overrides of the steppers' default options (only options of its steppers);
   ``retracts``: the state lives on a manifold and ``_retract`` is applied after each step;
   ``retract_invariant``: ``_rhs(run, t, y)`` = ``_rhs(run, t, _retract(run, y))`` (it retracts its
   argument itself), so an adaptive pair reuses its last stage after a retraction (needs ``retracts``);
   ``auto_resolution``: None, or (resolution attribute, cap attribute) of an automatic resolution
   (e.g. ("modes", "max_modes"), `solvers.spectral.AutoResolution`);
   ``run_type``: the `Run` of its runs (below);
   ``mass_by_construction``: its state holds the mass as a constant (c_0, ρ_00, the weights), so a
   report notes the mass rather than checking it (`meanfield.experiments.run`);
   ``policy``: its resolution, a `solvers.bases.ResolutionPolicy` (the argument's name, its range, and
   the cap of "auto" where it has one); ``method_options``: keywords of ``solve`` that
   ``_choose_method`` reads (another spelling of ``method``); ``config_name`` (and
   ``config_aliases``): the name that selects the class in a TOML configuration (None: not offered
   there). A configuration reads these, the constructor's signature, the steppers' options and
   ``solve_options`` (`meanfield.experiments.config`), so a new option needs no edit there;
   the capabilities of the model it takes beyond the paper's layer (`Solver.__init__` refuses the
   others with `UnsupportedModel` naming the argument): ``takes_mask`` (causal masks and the position
   bias, docs/causal.md), ``normalizations`` (the ``Model.normalization`` schemes it takes,
   docs/normalization.md), ``takes_mlp`` (a feed-forward term), ``mlp_normalizations`` (the schemes
   it takes together with a feed-forward term; None: all of ``normalizations``) and ``takes_schedule``
   (parameters that change with depth, ``Model(schedule=...)``: it implements ``_adopt_model``).
3. Per-run state (checked): values that belong to one run are fields of ``run_type``, a subclass of
   `Run` declared as a dataclass with slots, each field with a default and a comment; the hooks
   set them (``_configure``, the initial-state hooks). An undeclared name raises AttributeError.
   A refinement's run (`Run.derived`) keeps them and starts with a fresh ``workspace``.
4. Initial states, one hook per kind of ``initial`` (checked: at least one of them):
   ``_initial_from_callable(run, rho0, normalize)``, ``_initial_from_data(run, data, normalize)``
   (an array in the solver's own representation: exactly what ``_to_data`` returns),
   ``_initial_from_solution(run, sol)`` (default: the last saved slice through
   ``_initial_from_data``, for a Solution of the same representation),
   ``_initial_from_measure(run, points, weights, normalize)``, ``_initial_from_grid(run, grid,
   normalize)`` (`meanfield.measures.densities.GridValues`; default: its interpolant through
   ``_initial_from_callable``, rescaled to the grid's mass). Each returns the initial state y0.
5. The discretisation (checked: ``_rhs`` and ``_representation``): ``_rhs(run, t, y)``;
   ``_linear(run)`` (a diagonal applied exactly by the integrating factor, or None);
   ``_retract(run, y)`` and ``_retract_euler(run, y, h, f)`` (the retraction of y + h·f in one pass);
   ``_representation(run)``: a `meanfield.representations.Representation` whose ``name`` is in the
   representation registry (`meanfield.representations.register`), so that `meanfield.load` reads
   the Solution back; ``_to_data(run, y)``: one saved slice of it. Optional: ``_tracer_velocity(run,
   t, y, points)``, the run's velocity field X[ρ_t] at unit points (m, d), with which a run carries
   passive tracers (`solvers.tracers`; without it ``tracers=`` is refused), and ``_check_tracers(run)``
   (the run options under which they are not defined: ValueError naming `tracers`).
6. Monitoring and recording (optional): ``_configure(run)`` (check the solver's options and set
   per-run values, before the initial state); ``_choose_method(method, options)`` (the stepper
   when ``method`` is None, default ``steppers[0]``); ``_monitor(run, t, y)`` after each accepted
   step (raise `meanfield.UnderResolved` or another `SolverError` to stop the run at t);
   ``_diagnostics(run, t, y)`` -> dict of numbers at each saved time; ``_keep(run, i, y)`` (what is
   kept of saved time i after its diagnostics); ``_stats(run)`` (facts for ``Solution.stats``);
   ``_stable_step(run, y)`` (the stability limit of an explicit pair); ``_run_context(run)`` (a
   context held while the stepper runs; default: BLAS on one thread, `meanfield.threads`).
7. Continuation (optional): ``_next(run, t, y, reason)`` -> (solver, state) or None, the one
   mechanism by which a run goes on on another discretisation. ``reason`` is the `SolverError`
   the monitor raised at time t (y: the state it stopped) or None when a run starts from a
   Solution y. The answer is a state of ``solver`` for a run that keeps this run's options and
   per-run values (a refinement: `Run.derived`), or a `Solution` that ``solver`` starts from with
   its own options (another kind of discretisation: the result gets a new segment); None stops
   the run with ``reason``. Strategies are mixins that answer some reasons and pass the others on
   with ``super()._next(...)``: `solvers.spectral.AutoResolution` (refinement), and
   `solvers.handover.HandOverToCharacteristics` (continues an under-resolved run elsewhere).
   Parameters that change with depth (``takes_schedule``) are not continuations: `start` runs the
   solver of the piece of the initial time (`_piece_solver`: a copy with the piece's model and
   ``_adopt_model``); the steppers land on every breakpoint (``_breakpoints``), where
   ``_enter_piece`` moves the run to the next piece's solver and the step restarts; the Solution
   records the model with its schedule.
8. The hooks a stepper ``needs`` (checked): ``_euler``/``_cfl_rate``/``_split`` for SSP-RK3,
   ``_tangent_noise`` for Euler–Maruyama, ``_euler_velocity`` and ``_tangent_noise`` for
   Euler-then-normalise (`solvers.timestepping.Stepper.needs`).
9. Written once, not overridden (checked): ``solve`` validates the options, builds the run
   (``start``), drives the stepper, counts evaluations, draws the progress bar, writes
   checkpoints, asks ``_next`` where a stopped run goes on and turns failures (the stepper's
   `solvers.timestepping.Failure`) into exceptions that carry the `Solution` computed so far.
10. Where it is found: a solver is a module of the ``solvers`` package and nothing else. The package
   finds the class where it is defined (``solvers.<Name>``, `solvers.solver_classes`), a TOML
   configuration selects it by ``config_name``, `Solution.flow` re-runs it by its name, and the docs
   tables of steppers, normalisations and feed-forward terms are generated from its class attributes
   (`solvers.capabilities`). ``examples()`` (a classmethod) gives small runs of it, which the
   protocol test (tests/test_protocol.py) runs in two threads sharing one solver and after a pickle.
"""
import copy
import os
import time
from dataclasses import is_dataclass

import numpy as np

from meanfield._docs import fill_doc
from meanfield.validation import check_real, check_times
from meanfield.measures.densities import GridValues
from meanfield.errors import Interrupted, InvalidInput, NonFiniteState, SolverError, UnsupportedModel
from meanfield.transformer.model import Model
from meanfield.results.solution import Solution, concat, load
from meanfield.threads import blas_single_threaded, check_threads
from .timestepping import STEPPERS
from .tracers import check_tracers
from .runs import Run


_SOLVE_KEYWORDS = ("initial", "t_eval", "method", "normalize", "progress", "checkpoint", "checkpoint_every",
                   "history", "tracers")
_INITIAL_HOOKS = ("_initial_from_callable", "_initial_from_data", "_initial_from_solution", "_initial_from_measure",
                  "_initial_from_grid")


def _check_contract(cls):
    """The checked items of the contract (module docstring) for the solver class ``cls``."""
    def refuse(item, message):
        raise TypeError(f"{cls.__name__} breaks item {item} of the solver contract (solvers/base.py): {message}")

    if "solve" in vars(cls) or "start" in vars(cls):
        refuse(9, "`solve` and `start` are written once, in Solver; implement the hooks instead.")
    steppers = cls.steppers
    if not isinstance(steppers, tuple) or not steppers or any(m not in STEPPERS for m in steppers):
        refuse(2, f"`steppers` must be a non-empty tuple of names in {sorted(STEPPERS)}, got {steppers!r}.")
    if not isinstance(cls.solve_options, dict) or set(cls.solve_options) & set(_SOLVE_KEYWORDS):
        refuse(2, f"`solve_options` must be a dict whose keys are not among {_SOLVE_KEYWORDS}, got {cls.solve_options!r}.")
    if not isinstance(cls.positional_options, tuple) or not set(cls.positional_options) <= set(cls.solve_options):
        refuse(2, f"`positional_options` must be a tuple of names in `solve_options`, got {cls.positional_options!r}.")
    known = set().union(*(STEPPERS[m].options for m in steppers))
    if not isinstance(cls.stepper_defaults, dict) or not set(cls.stepper_defaults) <= known:
        refuse(2, f"`stepper_defaults` must be a dict of options of its steppers ({sorted(known)}), got "
                  f"{cls.stepper_defaults!r}.")
    if not isinstance(cls.retracts, bool) or not isinstance(cls.retract_invariant, bool) or (
            cls.retract_invariant and not cls.retracts):
        refuse(2, "`retracts` and `retract_invariant` must be True or False, and `retract_invariant` needs `retracts`.")
    auto = cls.auto_resolution
    if auto is not None and not (isinstance(auto, tuple) and len(auto) == 2 and all(isinstance(a, str) for a in auto)):
        refuse(2, f"`auto_resolution` must be None or (resolution attribute, cap attribute), got {auto!r}.")
    run_type = cls.run_type
    if not (isinstance(run_type, type) and issubclass(run_type, Run) and is_dataclass(run_type)
            and "__slots__" in vars(run_type)):
        refuse(3, f"`run_type` must be a subclass of Run declared with @dataclass(slots=True), got {run_type!r}.")
    if not any(getattr(cls, h) is not getattr(Solver, h) for h in _INITIAL_HOOKS):
        refuse(4, f"implement at least one of {', '.join(_INITIAL_HOOKS)}.")
    for hook in ("_rhs", "_representation"):
        if getattr(cls, hook) is getattr(Solver, hook):
            refuse(5, f"implement `{hook}`.")
    for method in steppers:
        missing = [h for h in STEPPERS[method].needs if not callable(getattr(cls, h, None))]
        if missing:
            refuse(8, f"the stepper {method!r} needs {', '.join(missing)}.")


def _seed_of(rng):
    if rng is None:
        return int(np.random.SeedSequence().entropy % (2 ** 63))
    if isinstance(rng, np.random.Generator):
        return int(rng.integers(2 ** 63))
    if isinstance(rng, (int, np.integer)) and not isinstance(rng, bool) and rng >= 0:
        return int(rng)
    raise InvalidInput(f"`rng` must be None, a non-negative integer seed or a numpy Generator, got {rng!r}.")


_OPTION_CHECKS = {
    "rtol": dict(low=0.0, low_open=True), "atol": dict(low=0.0, low_open=True),
    "max_step": dict(low=0.0, low_open=True, allow_inf=True), "first_step": dict(low=0.0, low_open=True),
    "dt": dict(low=0.0, low_open=True), "cfl": dict(low=0.0, low_open=True, high=1.0),
    "checkpoint_every": dict(low=0.0),
}


class Solver:
    """Base class of every discretisation (see the module docstring for the contract).

    Parameters
    ----------
    model : Model
        The model to discretise.
    threads : int >= 1, optional
        The threads the solver may use (default `meanfield.threads.default_threads`).

    Raises
    ------
    ValueError
        ``model`` not a `meanfield.Model`, a bad ``threads``.
    UnsupportedModel
        A part of the model that the class does not declare (``attentions``, ``takes_mask``, ``normalizations``,
        ``takes_mlp``, ``takes_schedule``), naming the argument.

    Examples
    --------
    The base class checks the model and the options as every solver does:

    >>> import meanfield as mf, solvers
    >>> solver = solvers.Solver(mf.Model(beta=1.0, dim=2), threads=1)
    >>> solver.threads, solver.check_options(rtol=1e-8)[0]
    (1, 'dopri5')
    >>> solvers.Solver(mf.Model(beta=1.0, dim=2, mask="causal"))
    Traceback (most recent call last):
    ...
    meanfield.errors.UnsupportedModel: Solver cannot take a masked model: `mask`='causal' needs a solver ...
    """

    steppers = ("dopri5", "bs32")
    solve_options = {}
    positional_options = ()
    stepper_defaults = {}
    policy = None
    method_options = ()
    config_name, config_aliases = None, ()
    retracts = False
    retract_invariant = False
    run_type = Run
    mass_by_construction = False
    takes_mask = False
    normalizations = ("post",)
    takes_mlp = False
    mlp_normalizations = None
    takes_schedule = False
    attentions = ("softmax",)

    @classmethod
    def examples(cls):
        """Small runs of this solver (contract item 10): {label: (make, initials, options)}, where
        ``make()`` builds the solver, ``initials`` are two initial states and ``options`` keywords of
        ``solve``. The protocol test runs each; a label starts with the class's name. Default: none."""
        return {}

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        _check_contract(cls)
        cls.__doc__ = fill_doc(cls.__doc__)      # the shared parameter descriptions (``{threads}``)

    def __init__(self, model, threads=None):
        if not isinstance(model, Model):
            raise InvalidInput(f"`model` must be a meanfield.Model, got {type(model).__name__}.")
        self.model = model
        self.threads = check_threads(threads)
        self._require_capabilities()

    def _require_capabilities(self):
        """Refuse a model part this class does not declare (``takes_mask``, ``normalizations``, ``takes_mlp``)."""
        model, name = self.model, type(self).__name__
        if model.attention not in self.attentions:
            raise UnsupportedModel(f"{name} takes `attention` in {list(self.attentions)}, got {model.attention!r} "
                                   "(docs/attention.md says which solver takes which).")
        if model.is_causal and not self.takes_mask:
            raise UnsupportedModel(f"{name} cannot take a masked model: `mask`={model.mask!r} needs a solver that "
                                   "takes causal attention (docs/causal.md says which).")
        if model.normalization not in self.normalizations:
            raise UnsupportedModel(f"{name} takes `normalization` in {list(self.normalizations)}, got "
                                   f"{model.normalization!r} (docs/normalization.md says which solver takes which).")
        if model.mlp is not None and not self.takes_mlp:
            raise UnsupportedModel(f"{name} cannot take a feed-forward term (`mlp`; docs/feedforward.md says which "
                                   "solvers do).")
        if model.source.schedule is not None and not self.takes_schedule:
            raise UnsupportedModel(f"{name} cannot take parameters that change with depth (`schedule`; "
                                   "docs/schedule.md says which solvers do).")
        with_mlp = self.mlp_normalizations or self.normalizations
        if model.mlp is not None and model.normalization not in with_mlp:
            raise UnsupportedModel(f"{name} takes a feed-forward term (`mlp`) with `normalization` in "
                                   f"{list(with_mlp)}, got {model.normalization!r} (docs/feedforward.md "
                                   "says which solver takes which).")

    def _run_context(self, run):
        """A context held while the stepper runs (default: BLAS on one thread, so that its waiting
        threads do not spin against the solver's own, `meanfield.threads`)."""
        return blas_single_threaded()

    def _adopt_model(self):
        """Re-derive what ``__init__`` derived from ``self.model`` (a copy of this solver now holds the
        model of another piece of the schedule): check the piece (`UnsupportedModel`, ValueError) and
        rebuild the model's multipliers, heads... Solvers with ``takes_schedule`` implement it."""
        return None

    def _piece_solver(self, k):
        """This solver (its resolution and options) with the model of piece k of the schedule."""
        source = self.model.source
        if self.model is source.piece(k):
            return self
        solver = copy.copy(self)
        solver.model = source.piece(k)
        solver._require_capabilities()
        solver._adopt_model()
        return solver

    def _breakpoints(self, run, start, end):
        """The times in (start, end) where the run's parameters change: the schedule's (solvers whose
        runs carry parameters of their own add theirs)."""
        schedule = run.model.schedule
        return () if schedule is None else schedule.breakpoints(start, end)

    def _enter_piece(self, run, t):
        """At the breakpoint t, the run goes on with the solver of the piece that starts there (work
        buffers emptied: they belong to the previous parameters); solvers whose per-run values depend
        on the parameters (a choice of sums) extend it."""
        schedule = run.model.schedule
        if schedule is not None:
            run.solver = self._piece_solver(schedule.index(t))
        run.workspace.clear()

    def _require_zonal(self):
        if not self.model.is_zonal:
            raise UnsupportedModel(f"{type(self).__name__} needs a zonal model (one head, Q^T K = I, V = v·I); "
                                   "general Q, K, V need a solver that takes any model.")

    # -- hooks (defaults) ----------------------------------------------------------------------------
    def _configure(self, run):
        return None

    def _initial_from_callable(self, run, rho0, normalize):
        raise InvalidInput(f"`initial`: {type(self).__name__} cannot start from a callable.")

    def _initial_from_data(self, run, data, normalize):
        raise InvalidInput(f"`initial`: {type(self).__name__} cannot start from an array.")

    def _initial_from_measure(self, run, points, weights, normalize):
        raise InvalidInput(f"`initial`: {type(self).__name__} cannot start from a (points, weights) pair; "
                         "pass a density callable or an array of its own representation.")

    def _initial_from_grid(self, run, grid, normalize):
        return self._initial_from_callable(run, grid.unit_mass(normalize, self.model.dim), True)

    def _initial_from_solution(self, run, sol):
        mine = self._representation(run)
        if type(sol.representation) is not type(mine):
            raise InvalidInput(f"`initial` is a {sol.representation.name!r} Solution; {type(self).__name__} continues "
                             f"{mine.name!r} Solutions (or evaluate its density and pass a callable).")
        return self._initial_from_data(run, sol.data[-1], False)

    def _rhs(self, run, t, y):
        raise NotImplementedError

    @classmethod
    def from_segment(cls, segment):
        """A solver of this class that continues ``segment`` (a one-representation Solution it made)
        exactly from any of its saved states: what `Solution.flow` re-runs (`solvers.tracers.flow_map`).
        A solver that carries tracers implements it."""
        raise InvalidInput(f"`flow` re-runs a Solution of a solver that carries tracers (docs/tracers.md); this one "
                         f"is from {cls.__name__}.")

    def _tracer_velocity(self, run, t, y, points):
        """The run's velocity field X[ρ_t] at the unit ``points`` (m, d) for the state y (tracers)."""
        raise NotImplementedError

    def _check_tracers(self, run):
        """Refuse a run whose tracers are not defined or not carried (ValueError naming `tracers`)."""
        name, model = type(self).__name__, self.model
        if type(self)._tracer_velocity is Solver._tracer_velocity:
            raise InvalidInput(f"`tracers`: {name} does not carry tracers (it has no velocity at arbitrary points; "
                             "docs/tracers.md lists the solvers that do).")
        if model.noise > 0:
            raise InvalidInput(f"`tracers` need noise = 0 (got noise={model.noise:g}): a tracer of a noisy run is not "
                             "defined pathwise.")
        schedule = model.source.schedule          # every piece of a schedule
        pieces = [model] if schedule is None else [model.source.piece(k) for k in range(len(schedule))]
        if model.is_causal or model.normalization != "post" or any(m.mlp is not None for m in pieces):
            raise InvalidInput("`tracers` follow the paper's layer (no mask, normalization='post', no feed-forward "
                             "term): a masked token needs a position, and the other schemes move tokens at their "
                             "own speeds.")
        if not run.stepper.carries_tracers:
            raise InvalidInput(f"`tracers` are carried by the steppers that take the solver's right-hand side as "
                             f"it is, not by method={run.method!r}; use 'dopri5' or 'bs32'.")

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
    def _resolve_options(self, method, options):
        """The stepper's name and every option of a run (defaults filled in), checked: ValueError naming
        an option that does not apply or a bad value."""
        options = dict(options)
        method = self._choose_method(method, options)
        if method not in self.steppers:
            raise InvalidInput(f"`method` must be one of {list(self.steppers)} for {type(self).__name__}, "
                             f"got {method!r}.")
        stepper = STEPPERS[method]
        stepper.check(self)
        accepted = dict(stepper.options)
        accepted.update({k: v for k, v in self.stepper_defaults.items() if k in accepted})
        accepted.update(self.solve_options)
        for key, value in options.items():
            if key not in accepted:
                raise InvalidInput(f"`{key}` does not apply to {type(self).__name__} with method={method!r}; "
                                 f"its options are {sorted(accepted)}.")
            if key in _OPTION_CHECKS and value is not None:
                options[key] = check_real(value, key, **_OPTION_CHECKS[key])
        return method, {**accepted, **options}

    def check_options(self, method=None, **options):
        """Check the options of ``solve`` as a run does, before any work (ValueError naming a bad one);
        returns the stepper's name and the options with their defaults."""
        method, opts = self._resolve_options(method, options)
        run = self.run_type(self, np.zeros(1), method, opts, _seed_of(opts.get("rng")))
        self._configure(run)
        return method, run.options

    def start(self, initial, t_eval=(0.0,), *, method=None, normalize=False, tracers=None, **options):
        """Validate ``initial``, ``t_eval`` and the options and return the `Run` that `solve` advances
        (``run.y0`` is the initial state, ``run.rhs(t, y)`` the right-hand side; with ``tracers``, or
        from a Solution that carries some, both carry the tracers: `Run.carry`)."""
        given, asked = dict(options), method       # as given: a discretisation of this class continuing takes them
        method, opts = self._resolve_options(method, options)
        if not isinstance(normalize, (bool, np.bool_)):
            raise InvalidInput(f"`normalize` must be True or False, got {normalize!r}.")
        if isinstance(initial, (str, os.PathLike)):
            if not os.path.isfile(initial):
                raise InvalidInput(f"`initial` (the initial density rho0) must be a density callable, a Solution or the "
                                 f"path of a saved one; there is no file {str(initial)!r}.")
            initial = load(initial)
        if tracers is not None:
            tracers = check_tracers(tracers, self.model.dim)
        if isinstance(initial, Solution):
            if tracers is not None and initial.tracers is not None:
                raise InvalidInput("`tracers`: the Solution carries tracers, which its continuation continues; pass "
                                 "tracers=None (or start new tracers from a Solution without them).")
            initial = initial.segments[-1]          # a run in several representations continues its last one
            if initial.model.dim != self.model.dim:
                raise InvalidInput(f"`initial` lives on S^{initial.model.dim - 1}, this solver on S^{self.model.dim - 1}.")
            t_eval = check_times(t_eval, start=float(initial.t[-1]))
            seed = opts.get("rng", None)
            seed = initial.stats.get("noise_seed") if seed is None else seed
            if "dt" in opts and opts["dt"] is None and initial.stats.get("method") == method:
                opts["dt"] = initial.stats.get("dt")      # the fixed step of the run it continues
        else:
            t_eval = check_times(t_eval)
            seed = opts.get("rng", None)
        schedule = self.model.source.schedule
        if schedule is not None:            # every piece checked before any work; the first one's solver runs
            pieces = [self._piece_solver(k) for k in range(len(schedule))]
            first = pieces[schedule.index(t_eval[0])]
            if first is not self:
                return first.start(initial, t_eval, method=asked, normalize=normalize, tracers=tracers, **given)
        run = self.run_type(self, t_eval, method, opts, _seed_of(seed))
        self._configure(run)
        if isinstance(initial, Solution):
            solver, initial = self._next(run, float(initial.t[-1]), initial, None)
            if solver is not self:
                # another discretisation continues this Solution: one of this class with this run's options
                if type(solver) is type(self):
                    return solver.start(initial, t_eval, method=asked, normalize=normalize, tracers=tracers, **given)
                return solver.start(initial, t_eval, method=method if method in solver.steppers else None,
                                    tracers=tracers)
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
                raise InvalidInput(f"`initial` must be a density callable, a Solution (or the path of a saved one) or "
                                 f"an array of {type(self).__name__}'s representation, got {type(initial).__name__}.")
            y0 = self._initial_from_data(run, data, normalize)
        run.y0 = y0
        if tracers is None and isinstance(initial, Solution) and initial.tracers is not None:
            tracers = initial.tracers[-1]
        if tracers is not None:
            run.carry(tracers)
        return run

    def solve(self, initial, t_eval, *args, method=None, normalize=False, progress=None, checkpoint=None,
              checkpoint_every=30.0, history=False, tracers=None, **options):
        """Evolve ``initial`` and save the state at the times ``t_eval``.

        The one ``solve`` of every solver (the classes listed in the `solvers` package); each
        solver's own options, initial data and examples are on its class's page. Internal steps are
        chosen by the stepper (adaptive and error-controlled for "dopri5" and "bs32"); the state is
        reported at the times ``t_eval`` (layer depth, dimensionless).

        Parameters
        ----------
        initial : callable, Solution, path, array, grid values or (points, weights)
            A σ-relative density callable f(x) on points (..., d) (finite, non-negative, mass 1 within
            1e-6 unless ``normalize=True``); a `Solution` or the path of a saved one, continued from
            its last saved time (with its noise seed and, for fixed steps, its ``dt`` unless given);
            an array of the solver's own representation (as ``sol.data[i]``); density values on a
            documented grid, `meanfield.measures.densities.on_grid`; for a solver of discrete measures, points
            (n, d) or (B, n, d) or a ``(points, weights)`` pair.
        t_eval : (T,) array
            Strictly increasing, starting at 0 (or at the last time of the continued Solution).
        *args
            The solver's ``positional_options`` (e.g. ``weights`` and ``rng`` of a solver of
            discrete measures), in order after ``t_eval``.
        method : str, optional
            The name of a stepper in ``self.steppers`` (default: the first).
        normalize : bool
            Rescale the initial mass to 1 instead of refusing it.
        progress : bool or None
            A tqdm bar (None: when stderr is a terminal).
        checkpoint : path, optional
            The partial Solution is written there (NetCDF) at most every ``checkpoint_every`` seconds
            and when the run stops. `solve` continues from it.
        checkpoint_every : float >= 0
            Seconds of wall time between checkpoints (default 30).
        history : bool
            With ``initial`` a Solution (or its path), return (and checkpoint) the whole run:
            ``initial.concat(continuation)``, the saved times of both in order.
        tracers : (m, d) array, optional
            Points on the sphere: passive points moved by the run's own field, ż = X[ρ_t](z), with the
            state under the same stepper and error control (`solvers.tracers`), saved in
            ``sol.tracers`` (T, m, d) and continued with a Solution that carries them. Noiseless runs
            of the paper's layer on a solver with ``_tracer_velocity`` (docs/tracers.md).
        **options
            The stepper's options (``rtol``, ``atol``, ``max_step``, ``first_step`` for the adaptive
            pairs; ``dt`` for fixed steps; ``cfl`` for SSP-RK3) and the solver's own
            (``solve_options``, on the solver's class page).

        Returns
        -------
        Solution
            The saved times ``t_eval``. A run that a continuation (`_next`) moves to another kind of
            discretisation returns one Solution with a segment for each, and ``stats["handover_t"]``
            the time of the change.

        Raises
        ------
        ValueError
            A bad ``initial`` (negative, not finite, mass not 1 without ``normalize``, another
            sphere), ``t_eval`` not strictly increasing or not starting where it must, an option that
            does not apply (naming it) or a bad value.
        SolverError
            `UnderResolved`, `NonFiniteState`, `Interrupted` (all `SolverError`) with ``.solution``
            holding the saved times before the failure.
        """
        _take_positional(self, args, options)
        checkpoint_every = check_real(checkpoint_every, "checkpoint_every", low=0.0)
        initial = _continued(initial, history, tracers)
        run = self.start(initial, t_eval, method=method, normalize=normalize, tracers=tracers, **options)
        prefix = [initial] if history else []      # the run it continues, kept in the result
        parts, changed_at, res = self._integrate_runs(run, prefix, checkpoint, checkpoint_every, progress)
        sol = concat(*prefix, *parts)
        if changed_at is not None:
            sol.stats["handover_t"] = changed_at
        if checkpoint is not None:
            sol.save(checkpoint)
        if res.failure is not None:
            _raise_failure(sol.solver or type(self).__name__, res.failure, sol, checkpoint)   # "A+B" after a change
        return sol

    def _integrate_runs(self, run, prefix, checkpoint, checkpoint_every, progress):
        """The stepper over ``run`` and over each run that a monitor's stop continues into (`_next`):
        (the Solution of each part, the time of a change of discretisation or None, the last result)."""
        parts, changed_at = [], None
        last_write = [time.perf_counter()]
        desc = f"{type(self).__name__} {self.model.kind} beta={self.model.beta:g}"
        while True:
            saved, on_save = _saver(run, prefix, parts, checkpoint, checkpoint_every, last_write)
            with run.solver._run_context(run):
                res = run.stepper.integrate(run, run.y0, run.t_eval, callback=on_save, progress=progress, desc=desc)
            parts.append(_build(run, res, saved))
            stop = res.failure
            successor = None if stop is None or stop.reason != "monitor" else run.solver._next(
                run, stop.t, run.state(stop.state), stop.error)
            if successor is None:
                return parts, changed_at, res
            if isinstance(successor[1], Solution):
                changed_at = float(stop.t)        # another kind of discretisation: a new segment
            points = run.tracer_points(stop.state)
            run = run.following(*successor, stop.t)
            if points is not None:
                run.carry(points)


def _saver(run, prefix, parts, checkpoint, checkpoint_every, last_write):
    """(what is recorded at the saved times, the stepper's callback at a saved time): records the
    diagnostics and the tracers, keeps what the solver keeps (``_keep``) of the state and writes the
    checkpoint at most every ``checkpoint_every`` seconds (``last_write``: the time of the last write,
    shared by the segments)."""
    saved = {"diagnostics": [], "tracers": []}

    def on_save(res):
        _record(run, res, saved, len(res.t) - 1)
        if checkpoint is not None and time.perf_counter() - last_write[0] > checkpoint_every:
            concat(*prefix, *parts, _build(run, res, saved)).save(checkpoint)
            last_write[0] = time.perf_counter()

    return saved, on_save


def _record(run, res, saved, i):
    """Record saved time ``i`` of ``res``: its diagnostics and tracers; the state becomes what the solver keeps."""
    saved["diagnostics"].append(run.diagnostics(res.t[i], res.y[i]))
    if run.tracers is not None:
        saved["tracers"].append(run.tracer_points(res.y[i]))
    res.y[i] = run.solver._keep(run, i, run.state(res.y[i]))


def _continued(initial, history, tracers):
    """``initial`` of `Solver.solve`, read from its file when it is a path, checked against ``history``
    (ValueError naming `history` or `tracers`)."""
    if not isinstance(history, (bool, np.bool_)):
        raise InvalidInput(f"`history` must be True or False, got {history!r}.")
    if isinstance(initial, (str, os.PathLike)) and os.path.isfile(initial):
        initial = load(initial)
    if history and not isinstance(initial, Solution):
        raise InvalidInput("`history=True` continues a run: `initial` must be a Solution or the path of a saved one, "
                         f"got {type(initial).__name__}.")
    if history and tracers is not None:
        raise InvalidInput("`tracers` start at the last time of `initial`, so `history=True` cannot join them to the "
                         "run it continues; continue without history, or re-run from the start with tracers.")
    return initial


def _take_positional(solver, args, options):
    """Put the options ``solve`` takes positionally (``positional_options``) into ``options``."""
    if len(args) > len(solver.positional_options):
        raise TypeError(f"{type(solver).__name__}.solve takes at most {2 + len(solver.positional_options)} "
                        f"positional arguments ({len(args) + 2} given).")
    for name, value in zip(solver.positional_options, args):
        if name in options:
            raise TypeError(f"{type(solver).__name__}.solve got multiple values for `{name}`.")
        options[name] = value


def _raise_failure(name, stop, sol, checkpoint):
    """The exception of the `Failure` ``stop``, carrying ``sol``, the Solution up to it."""
    if stop.error is not None:              # the monitor's or the step's SolverError
        stop.error.solution = sol
        raise stop.error
    if stop.reason == "interrupted":
        raise Interrupted(f"{name}: {stop.message}; the Solution up to t={sol.t[-1]:.6g} is in `exc.solution`"
                          + (f" and in {checkpoint}" if checkpoint else ""), sol)
    if stop.reason == "step-size underflow":
        raise SolverError(f"{name}: {stop.message}. The saved times up to t={sol.t[-1]:.6g} are in "
                          "`exc.solution`.", sol)
    raise NonFiniteState(f"{name}: {stop.message}. The saved times up to t={sol.t[-1]:.6g} are in "
                         "`exc.solution`.", sol, t=stop.t, step=stop.step)


def _build(run, res, saved):
    """The `Solution` of the saved times of ``res`` (diagnostics and tracers of every saved time, counters)."""
    n = len(res.t)
    diags = saved["diagnostics"]
    # a monitor that stops the run on a saved time appends that time without the callback:
    # record it here so that no saved time lacks its diagnostics
    while len(diags) < n:
        _record(run, res, saved, len(diags))
    data = np.stack([run.solver._to_data(run, y) for y in res.y[:n]])
    keys = set().union(*[d.keys() for d in diags[:n]]) if diags else set()
    diag_arrays = {k: np.array([d.get(k, np.nan) for d in diags[:n]]) for k in keys}
    stats = res.stats()
    stats["method"] = run.method
    if run.dt is not None:
        stats["dt"] = float(run.dt)
    stats["t_requested"] = float(run.t_eval[-1])      # a stopped run's picture shows what was not reached
    stats.update(run.solver._stats(run))
    if run.model.noise > 0 and run.seed is not None:
        stats["noise_seed"] = run.seed
    tracers = np.stack(saved["tracers"][:n]) if run.tracers is not None else None
    return Solution(np.array(res.t[:n]), run.model, run.representation(), data, diag_arrays, stats,
                    status=0 if res.success else 1, message=res.message, solver=type(run.solver).__name__,
                    tracers=tracers)
