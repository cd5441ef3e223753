"""The TOML configuration of ``meanfield run`` (read with the standard library's `tomllib`).

A configuration has five tables; every key is checked before any work starts, and an unknown key
or a bad value raises ValueError naming the key (``solver.modes``) and the accepted values::

    [solver]                # which method and its resolution
    name = "fourier"        # "fourier" | "harmonics" | "fem" | "particles" | "gegenbauer" | "lagrangian"
    modes = 256             # the resolution: fourier modes;  harmonics, gegenbauer: lmax;  fem: refinement;
                            # lagrangian: nodes; fourier, harmonics, gegenbauer also take "auto" (refined as
                            # the density sharpens, up to max_modes / max_lmax);
                            # particles: n (number of particles), sampling, seed
    rtol = 1e-8             # the options of the solver's steppers: rtol, atol, method, max_step, dt, cfl, ...
    tail_tol = 1e-6         # any keyword argument of the solver class (solvers.FourierCircle: tail_tol, ...)
    threads = 2             # the threads of the solver (docs/threads.md; default MEANFIELD_THREADS, else
                            # OMP_NUM_THREADS, else the CPUs; `meanfield run --threads N` for the whole command)
    # on_underresolved = "lagrangian"   # fourier, harmonics (noise 0): when the density is no longer
                            # resolved, go on along the characteristics (solvers.Lagrangian); the
                            # labels: [solver.handover] nodes, panels, order, estimate, cluster_tol, min_mass, chunk

    [model]                 # meanfield.Model: every keyword of its signature
    beta = 4.0
    dim = 2
    normalized = true       # (SA); false for (USA)
    V = 1.0                 # +1 attractive, -1 repulsive (V·I), or a matrix (with Q, K: arrays of rows)
    noise = 0.0
    # mask = "causal", position_bias = 0.5, normalization = "pre", mix_depth, ngpt_alpha, activation,
    # mlp = [W, U, b] (arrays): the transformer-layer options of docs/normalization.md, docs/feedforward.md
    # and docs/causal.md

    [initial]               # a density of meanfield.measures.densities, by name, with its parameters
    density = "perturbed_uniform"
    amplitude = 0.1
    degree = 3
    # density = "mixture" takes  components = [{density = "von_mises_fisher", ...}, ...]  and  weights
    # a direction (`mean`, `axis`) may be given as "pole": e_d = (0, ..., 0, 1)
    # density = "fourier" (S^1):   coefficients = [[k, amplitude, phase], ...]  ρ = 1 + Σ a cos(kθ + φ)
    # density = "harmonics" (S^2): coefficients = [[l, m, amplitude], ...]  ρ = 1 + Σ a Y_lm, the real
    #                              harmonics of densities.real_sh (orthonormal in L²(σ), m < 0: sin)
    # density = "file":  path = "out/run/run.nc"  a saved Solution's last state (or a grid-only file),
    #                    relative to the working directory, like output.dir

    [times]                 # either  values = [0, 0.5, 1]  or  t_end (and n_saves, default 21)
    t_end = 5.0
    n_saves = 51

    [output]                # all optional
    name = "circle"         # file stem (default: the config file's stem)
    plot_times = [0, 5]     # times drawn on S^2 Mollweide maps
    checkpoint = true       # keep <name>.partial.nc up to date while running (`meanfield run --resume DIR`
    checkpoint_every = 30.0 # continues from it): written at saved times, at most every this many seconds
    grid = true             # also write the density on a CF grid (theta / lat-lon / UGRID) in <name>.nc
    scale = "auto"          # colour scale of the picture: "auto", "linear", "log", "perturbation" (rho - 1)
    dir = "out/circle"      # output directory (the command line's --out wins)
    quick = false           # the command line's --quick
    progress = true         # false: no progress bar (the command line's --no-progress)

The keys of ``[solver]`` are not listed here: they are read from the solver class that ``name``
selects (its ``config_name``, its resolution ``policy``, the keywords of its constructor, the
options of its steppers and its ``solve_options``, `solvers.base`), so that a new solver option is
a configuration key at once. `load_config(path)` returns a `RunConfig`, with the solver built (its
checks ran); `RunConfig.make_solver()` returns it.
"""
import copy
import inspect
import pathlib
import tomllib
from dataclasses import dataclass, field

import numpy as np

import solvers
from solvers.timestepping import STEPPERS

from ..measures import densities
from ..transformer.model import Model
from ..results.figures import SCALES
from ..spaces.quadrature import sphere_quadrature
from ..measures.sampling import uniform_points
from ..validation import check_int, check_memory, check_real, check_times
from ..errors import InvalidInput

_SECTIONS = {"solver", "model", "initial", "times", "output"}
_TIMES_KEYS = {"values", "t_end", "n_saves"}
_OUTPUT_KEYS = {"name", "plot_times", "checkpoint", "checkpoint_every", "plot", "grid", "scale", "dir", "quick",
                "progress"}
# a solver whose resolution is the size of its initial sample (particles): how the sample is drawn
SAMPLE_SIZE = 1000
SAMPLE_KEYS = {"sampling": "iid", "seed": 0}
SAMPLINGS = ("iid", "quasi", "quantile")
# densities by name: the callable and its parameters (rng is spelled `seed` in a config)
_DENSITIES = {
    "uniform": densities.uniform,
    "von_mises_fisher": densities.von_mises_fisher,
    "perturbed_uniform": densities.perturbed_uniform,
    "band_limited": densities.band_limited,
    "mixture": densities.mixture,
    "fourier": densities.fourier_modes,          # coefficients = [[k, amplitude, phase], ...]: 1 + Σ a cos(kθ + φ)
    "harmonics": densities.spherical_harmonics,  # coefficients = [[l, m, amplitude], ...]: 1 + Σ a Y_lm (real_sh)
    "file": densities.from_file,                 # path = "...": a saved Solution's last state, or a grid file
}


def refuse_unknown(keys, allowed, where):
    extra = sorted(set(keys) - set(allowed))
    if extra:
        raise InvalidInput(f"unknown key `{where}.{extra[0]}` in the configuration; accepted keys in [{where}]: "
                         f"{', '.join(sorted(allowed))}.")


def _require(table, key, where):
    if key not in table:
        raise InvalidInput(f"missing key `{where}.{key}` in the configuration.")
    return table[key]


def _bool(value, name):
    if not isinstance(value, bool):
        raise InvalidInput(f"`{name}` must be true or false, got {value!r}.")
    return value


def _rename(exc, name):
    """Re-raise a ValueError from a checker so that it names the config key."""
    msg = str(exc)
    if msg.startswith("`"):
        msg = msg.split("`", 2)[2] if msg.count("`") >= 2 else msg
        return InvalidInput(f"`{name}`{msg}")
    return InvalidInput(f"`{name}`: {msg}")


def _named(exc):
    """The argument a ValueError's message starts with (in backticks), or None."""
    msg = str(exc)
    return msg.split("`")[1] if msg.startswith("`") and msg.count("`") >= 2 else None


def _checked(fn, value, name, **kw):
    try:
        return fn(value, name, **kw)
    except InvalidInput as exc:
        raise _rename(exc, name) from None


# -- what a solver class declares --------------------------------------------------------------------------
def solver_classes():
    """{config name: class} of the solver classes that a configuration may select (``config_name``)."""
    out = {}
    for name in solvers.__all__:
        cls = getattr(solvers, name, None)
        if isinstance(cls, type) and issubclass(cls, solvers.Solver) and vars(cls).get("config_name"):
            out[cls.config_name] = cls          # declared on the class itself: a subclass is not its parent
    return out


def solver_class(name):
    """The solver class that ``solver.name`` selects: its ``config_name``, an alias or the class name."""
    classes = solver_classes()
    key = str(name).lower()
    for cls in classes.values():
        if key in (cls.config_name, cls.__name__.lower(), *cls.config_aliases):
            return cls
    raise InvalidInput(f"`solver.name`={name!r} is not a solver; accepted: {', '.join(classes)}.")


@dataclass(frozen=True)
class SolverKeys:
    """The keys of a ``[solver]`` table, read from the class: ``resolution`` (its policy's argument),
    ``init`` (the keywords of its constructor), ``solve`` (its steppers' options, ``method``, its
    ``method_options`` and ``solve_options``), ``handover`` (the options of its hand-over, if any) and
    ``samples`` (the resolution is the size of an initial sample, drawn as `SAMPLE_KEYS` say)."""

    resolution: str
    init: tuple
    solve: tuple
    handover: tuple
    samples: bool

    @classmethod
    def of(cls, solver_cls):
        params = inspect.signature(solver_cls.__init__).parameters
        init = tuple(k for k, p in params.items() if k not in ("self", "model")
                     and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))
        samples = solver_cls.policy.name not in init
        solve = {"method", *solver_cls.method_options, *solver_cls.solve_options}
        solve |= set().union(*(STEPPERS[m].options for m in solver_cls.steppers))
        solve -= set(init) | ({"weights", "rng"} if samples else set())     # a sample's weights and seed: SAMPLE_KEYS
        return cls(solver_cls.policy.name, init, tuple(sorted(solve)), tuple(getattr(solver_cls, "handover_options", ())),
                   samples)

    @property
    def accepted(self):
        extra = {"options"} | ({"handover"} if self.handover else set()) | (set(SAMPLE_KEYS) if self.samples else set())
        return {self.resolution, *self.init, *self.solve} | extra

    def config_key(self, arg, extra=()):
        """The configuration key of a solver argument named in an error message (None: not one)."""
        if arg in (self.resolution, *self.init, *self.solve):
            return f"solver.{arg}"
        if arg in extra:
            return f"solver.options.{arg}"
        if arg in self.handover:
            return f"solver.handover.{arg}"
        return None


@dataclass
class RunConfig:
    """A validated configuration (see the module docstring for the schema)."""

    solver: str
    resolution: int
    solver_options: dict
    solve_options: dict
    particle_options: dict
    model: Model
    density_spec: dict
    t_eval: np.ndarray
    name: str = "run"
    plot: bool = True
    plot_times: list = None
    checkpoint: bool = True
    checkpoint_every: float = 30.0
    grid: bool = False
    scale: str = "auto"
    out_dir: str = None
    quick_run: bool = False
    progress: bool = None
    source: str = ""
    raw: dict = field(default_factory=dict)
    built: object = field(default=None, repr=False, compare=False)     # the solver, built by parse_config

    @property
    def samples(self):
        """The initial state is a sample of ``resolution`` points (``particle_options``: how it is drawn)."""
        return bool(self.particle_options)

    @property
    def solver_class_name(self):
        return solver_class(self.solver).__name__

    def density(self):
        """The initial density callable."""
        return build_density(self.density_spec, self.model.dim, "initial")

    def make_solver(self):
        """The configured solver (built and checked by `parse_config`)."""
        if self.built is None:
            run_options = {k: v for k, v in self.solve_options.items() if k != "normalize"}
            self.built = build_solver(solver_class(self.solver), self.model, self.resolution, self.solver_options,
                                      run_options, self.particle_options)
        return self.built

    def quick(self):
        """A reduced copy for ``--quick``: at most 11 saved times and 500 particles."""
        cfg = copy.copy(self)
        if cfg.t_eval.size > 11:
            cfg.t_eval = np.linspace(0.0, float(cfg.t_eval[-1]), 11)
        if cfg.samples:
            cfg.resolution = min(cfg.resolution, 500)
        return cfg

    def to_dict(self):
        return {"solver": self.solver, "resolution": self.resolution, "solver_options": self.solver_options,
                "solve_options": self.solve_options, "particle_options": self.particle_options,
                "model": self.model.to_dict(), "initial": self.density_spec, "t_eval": self.t_eval.tolist(),
                "name": self.name, "source": self.source}


def _check_signature(fn, kwargs, where):
    params = inspect.signature(fn).parameters
    if any(p.kind == p.VAR_KEYWORD for p in params.values()):
        return
    allowed = [k for k in params if k not in ("self", "model")]
    for k in kwargs:
        if k not in params:
            raise InvalidInput(f"unknown key `{where}.{k}`; accepted: {', '.join(allowed)}.")


def build_solver(cls, model, resolution, init, solve, sample):
    """Build the solver ``cls`` and check its run options (`solvers.Solver.check_options`): a ValueError
    names the configuration's key (``solver.modes``, ``solver.handover.order``, ``solver.options.chunk``)."""
    keys = SolverKeys.of(cls)
    kwargs = dict(init)
    if not keys.samples and resolution is not None:
        kwargs[keys.resolution] = resolution
    try:
        solver = cls(model, **kwargs)
        if keys.samples and hasattr(solver, "memory_estimate"):
            check_memory(solver.memory_estimate(resolution), keys.resolution, resolution)
        solver.check_options(**solve)
    except ValueError as exc:       # a solver's own argument checks (a plain ValueError from a registered one too)
        key = keys.config_key(_named(exc), extra=set(init) - set(keys.init))
        if key is None:
            raise InvalidInput(f"`solver.name`={cls.config_name!r}: {exc}") from None
        raise _rename(exc, key) from None
    return solver


def build_density(spec, dim, where="initial"):
    """A density callable from a config table ``{density = name, <parameters>}`` (mixtures nest)."""
    if not isinstance(spec, dict):
        raise InvalidInput(f"`{where}` must be a table with a `density` key, got {spec!r}.")
    name = _require(spec, "density", where)
    if not isinstance(name, str) or name not in _DENSITIES:
        raise InvalidInput(f"`{where}.density`={name!r} is not a known density; accepted: "
                         f"{', '.join(sorted(_DENSITIES))}.")
    params = {k: v for k, v in spec.items() if k != "density"}
    fn = _DENSITIES[name]
    if name == "mixture":
        refuse_unknown(params, {"components", "weights"}, where)
        comps = _require(params, "components", where)
        if not isinstance(comps, list) or not comps:
            raise InvalidInput(f"`{where}.components` must be a non-empty array of density tables.")
        built = [build_density(c, dim, f"{where}.components[{i}]") for i, c in enumerate(comps)]
        try:
            return fn(built, params.get("weights"))
        except InvalidInput as exc:
            raise _rename(exc, f"{where}.weights") from None
    sig = inspect.signature(fn).parameters
    allowed = {k for k in sig if k != "rng"} | ({"seed"} if "rng" in sig else set())
    allowed.discard("dim")
    refuse_unknown(params, allowed, where)
    if "seed" in params:
        params["rng"] = params.pop("seed")
    for key in ("mean", "axis"):                     # "pole": e_d, the default axis of the zonal solvers
        if isinstance(params.get(key), str):
            if params[key] != "pole":
                raise InvalidInput(f"`{where}.{key}` must be a vector of {dim} numbers or \"pole\" (e_{dim}), "
                                 f"got {params[key]!r}.")
            params[key] = np.eye(dim)[-1]
    if "dim" in sig:
        params["dim"] = dim
    try:
        rho = fn(**params)
    except (ValueError, TypeError) as exc:
        msg = str(exc)
        key = msg.split("`")[1] if msg.startswith("`") and msg.count("`") >= 2 else ""
        if key.split("[")[0] in params:              # the message names a key of the table: `initial.coefficients[2]`
            raise InvalidInput(f"`{where}.{key}`{msg.split('`', 2)[2]}") from None
        raise InvalidInput(f"`{where}` ({name}): {exc}") from None
    if getattr(rho, "dim", None) not in (None, dim):
        raise InvalidInput(f"`{where}` ({name}) lives on S^{rho.dim - 1} but `model.dim`={dim}.")
    return rho


# -- one parser per table ------------------------------------------------------------------------------------
def _model_table(m):
    """[model]: the keywords of `meanfield.Model` (arrays as TOML arrays); ValueError naming `model.<key>`."""
    params = inspect.signature(Model.__init__).parameters
    refuse_unknown(m, [k for k in params if k != "self"], "model")
    for k, p in params.items():
        if p.default is p.empty and k != "self":
            _require(m, k, "model")
    try:
        return Model(**m)
    except InvalidInput as exc:
        arg = _named(exc)
        raise (_rename(exc, f"model.{arg}") if arg in m else InvalidInput(f"`model`: {exc}")) from None


def _solver_table(table, model):
    """[solver]: (the class, its resolution, constructor keywords, solve options, sample options)."""
    s = dict(table)
    cls = solver_class(_require(s, "name", "solver"))
    s.pop("name")
    keys = SolverKeys.of(cls)
    refuse_unknown(s, keys.accepted, "solver")
    default = SAMPLE_SIZE if keys.samples else inspect.signature(cls.__init__).parameters[keys.resolution].default
    resolution = s.pop(keys.resolution, default)
    if resolution is not None:
        resolution = _resolution(cls.policy, resolution)
    cap = cls.policy.cap_name
    if cap in s and resolution != "auto":
        raise InvalidInput(f"`solver.{cap}` caps `solver.{keys.resolution}` = \"auto\"; got {keys.resolution} = "
                         f"{resolution!r}.")
    extra = s.pop("options", {})
    if not isinstance(extra, dict):
        raise InvalidInput("`solver.options` must be a table of extra keyword arguments for the solver.")
    _check_signature(cls.__init__, extra, "solver.options")
    init = {k: s.pop(k) for k in keys.init if k in s}
    sample = _sample_table(s, model.dim) if keys.samples else {}
    solve = _handover(s, s.pop("handover", None), keys)
    return cls, resolution, {**init, **extra}, solve, sample


def _resolution(policy, value):
    try:
        return policy.check(value)
    except InvalidInput as exc:
        raise _rename(exc, f"solver.{policy.name}") from None


def _handover(s, handover, keys):
    """The solve options, with ``on_underresolved`` = "lagrangian" and a ``[solver.handover]`` table of the
    hand-over's options (`solvers.handover.HandOverToCharacteristics.handover_options`) made one value."""
    if handover is None:
        return s
    if not isinstance(handover, dict):
        raise InvalidInput(f"`solver.handover` must be a table of the hand-over's options, got {handover!r}.")
    if s.get("on_underresolved") != "lagrangian":
        raise InvalidInput("`solver.handover` configures the hand-over: set `solver.on_underresolved` = \"lagrangian\".")
    refuse_unknown(handover, keys.handover, "solver.handover")
    return dict(s, on_underresolved=dict(handover) or "lagrangian")


def _sample_table(s, dim):
    """How an initial sample is drawn (`meanfield.measures.sampling.sample`): ``sampling`` and ``seed``."""
    sampling = s.pop("sampling", SAMPLE_KEYS["sampling"])
    if sampling not in SAMPLINGS:
        raise InvalidInput(f"`solver.sampling` must be one of {', '.join(map(repr, SAMPLINGS))}, got {sampling!r}.")
    if sampling != "iid" and dim not in (2, 3):
        raise InvalidInput(f"`solver.sampling`={sampling!r} needs `model.dim` 2 or 3; use 'iid'.")
    if sampling == "quantile" and dim != 2:
        raise InvalidInput("`solver.sampling`='quantile' is defined on S^1 only (model.dim = 2).")
    return {"sampling": sampling, "seed": _checked(check_int, s.pop("seed", SAMPLE_KEYS["seed"]), "solver.seed", low=0)}


def _initial_table(table, dim):
    """[initial]: the density table and ``normalize``; the density is evaluated once on probe points, so
    that bad parameters fail here, before any work."""
    init = dict(table)
    normalize = _bool(init.pop("normalize", False), "initial.normalize")
    rho = build_density(init, dim, "initial")
    probe = sphere_quadrature(512, dim)[0] if dim in (2, 3) else uniform_points(512, dim, 0)
    vals = np.asarray(rho(probe), dtype=float)
    if not np.all(np.isfinite(vals)):
        raise InvalidInput("`initial`: the density must be finite; it has NaN or inf values.")
    if np.any(vals < 0):
        raise InvalidInput(f"`initial`: the density must be non-negative; its minimum on {len(vals)} probe points is "
                         f"{float(vals.min()):.3g}.")
    return init, normalize


def _times_table(t):
    """[times]: ``values``, or ``t_end`` and ``n_saves``."""
    refuse_unknown(t, _TIMES_KEYS, "times")
    if "values" in t:
        if "t_end" in t or "n_saves" in t:
            raise InvalidInput("`times`: give either `values` or `t_end` (with `n_saves`), not both.")
        return _checked(check_times, t["values"], "times.values")
    t_end = _checked(check_real, _require(t, "t_end", "times"), "times.t_end", low=0.0, low_open=True)
    n_saves = _checked(check_int, t.get("n_saves", 21), "times.n_saves", low=2, high=100000)
    return np.linspace(0.0, t_end, n_saves)


def _output_table(o, t_end, name, samples):
    """[output]: the RunConfig fields it sets (checked)."""
    if not isinstance(o, dict):
        raise InvalidInput("`output` must be a table.")
    refuse_unknown(o, _OUTPUT_KEYS, "output")
    out_name = str(o.get("name", name or "run"))
    if not out_name or any(c in out_name for c in "/\\"):
        raise InvalidInput(f"`output.name` must be a plain file stem, got {out_name!r}.")
    plot_times = o.get("plot_times")
    if plot_times is not None:
        if not isinstance(plot_times, list) or not plot_times:
            raise InvalidInput("`output.plot_times` must be a non-empty array of times.")
        plot_times = [_checked(check_real, v, "output.plot_times", low=0.0, high=t_end) for v in plot_times]
    grid = _bool(o.get("grid", False), "output.grid")
    if grid and samples:
        raise InvalidInput("`output.grid` = true writes a density on a grid; particles have none (their positions "
                         "are in the file).")
    scale = o.get("scale", "auto")
    if scale not in SCALES:
        raise InvalidInput(f"`output.scale` must be one of {', '.join(repr(v) for v in SCALES)}, got {scale!r}.")
    out_dir = o.get("dir")
    if out_dir is not None and (not isinstance(out_dir, str) or not out_dir):
        raise InvalidInput(f"`output.dir` must be a directory path (a string), got {out_dir!r}.")
    progress = o.get("progress")
    return {"name": out_name, "plot": _bool(o.get("plot", True), "output.plot"), "plot_times": plot_times,
            "checkpoint": _bool(o.get("checkpoint", True), "output.checkpoint"),
            "checkpoint_every": _checked(check_real, o.get("checkpoint_every", 30.0), "output.checkpoint_every",
                                         low=0.0),
            "grid": grid, "scale": scale, "out_dir": out_dir, "quick_run": _bool(o.get("quick", False), "output.quick"),
            "progress": None if progress is None else _bool(progress, "output.progress")}


def parse_config(raw, source="<dict>", name=None, build=True):
    """Validate a configuration given as a dict (as read from TOML) and return a `RunConfig`, with its
    solver built and its options checked (``build=False``: the keys and the resolution's range only, for
    a sweep, whose cells may fail on their own)."""
    if not isinstance(raw, dict):
        raise InvalidInput("the configuration must be a table of tables ([solver], [model], ...).")
    extra = sorted(set(raw) - _SECTIONS)
    if extra:
        raise InvalidInput(f"unknown table `[{extra[0]}]` in the configuration; accepted tables: "
                         f"{', '.join('[' + s + ']' for s in sorted(_SECTIONS))}.")
    for section in ("solver", "model", "initial", "times"):
        if section not in raw:
            raise InvalidInput(f"missing table `[{section}]` in the configuration.")
        if not isinstance(raw[section], dict):
            raise InvalidInput(f"`{section}` must be a table.")
    model = _model_table(raw["model"])
    cls, resolution, init, solve, sample = _solver_table(raw["solver"], model)
    density, normalize = _initial_table(raw["initial"], model.dim)
    if not sample:
        solve["normalize"] = normalize
    t_eval = _times_table(raw["times"])
    output = _output_table(raw.get("output", {}), float(t_eval[-1]), name, bool(sample))
    cfg = RunConfig(solver=cls.config_name, resolution=resolution, solver_options=init, solve_options=solve,
                    particle_options=sample, model=model, density_spec=density, t_eval=t_eval, source=source,
                    raw=raw, **output)
    if build:
        cfg.make_solver()
    return cfg


def read_toml(path, name):
    """The table of the TOML file ``path``; ValueError naming the argument ``name`` when the file is
    missing or not valid TOML."""
    path = pathlib.Path(path)
    if not path.is_file():
        raise InvalidInput(f"`{name}`: no such file {str(path)!r}.")
    try:
        return tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise InvalidInput(f"`{name}` {str(path)!r} is not valid TOML: {exc}.") from None


def load_config(path):
    """Read and validate a TOML configuration file (see the module docstring)."""
    path = pathlib.Path(path)
    return parse_config(read_toml(path, "config"), source=str(path), name=path.stem)


def coerce(value, cls, parse, load):
    """``value`` as a ``cls`` (a `RunConfig`, a sweep's `Sweep`): itself, ``parse(value)`` for a dict, or
    ``load(value)`` for a path to its TOML file."""
    if isinstance(value, cls):
        return value
    if isinstance(value, dict):
        return parse(value)
    return load(value)
