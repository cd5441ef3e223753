"""The TOML configuration of ``meanfield run`` (read with the standard library's `tomllib`).

A configuration has five tables; every key is checked before any work starts, and an unknown key
or a bad value raises ValueError naming the key (``solver.modes``) and the accepted values::

    [solver]                # which method and its resolution
    name = "fourier"        # "fourier" | "harmonics" | "fem" | "particles" | "gegenbauer" (zonal, any dim)
    modes = 256             # fourier: Fourier modes K;  harmonics, gegenbauer: lmax;  fem: refinement;
                            # fourier, harmonics, gegenbauer also take "auto" (refined as the density sharpens);
                            # particles: n (number of particles), sampling, seed, scheme, dt
    rtol = 1e-8             # adaptive solvers: rtol, atol, method ("dopri5" | "bs32")
    # max_modes = 4096      # fourier (max_lmax: harmonics): the cap of modes = "auto" (lmax = "auto")
    # on_underresolved = "lagrangian"   # fourier, harmonics (noise 0): when the density is no longer
                            # resolved, go on along the characteristics (solvers.Lagrangian); the
                            # labels: [solver.handover] nodes, panels, order, estimate, cluster_tol, min_mass
    # name = "lagrangian"   # solvers.Lagrangian (S^1, S^2, noise 0): nodes, or panels (S^1) and order

    [model]                 # meanfield.Model
    beta = 4.0
    dim = 2
    normalized = true       # (SA); false for (USA)
    V = 1.0                 # +1 attractive, -1 repulsive (V·I)
    noise = 0.0

    [initial]               # a density of meanfield.densities, by name, with its parameters
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

`load_config(path)` returns a `RunConfig`; `RunConfig.build()` turns it into a model, a solver, an
initial density and the saved times.
"""
import inspect
import pathlib
import tomllib
from dataclasses import dataclass, field
import copy

import numpy as np

from .. import densities as _densities
from ..validation import check_int, check_memory, check_real, check_times
from ..model import Model
from ..solution import from_file
import solvers
from ..plotting import SCALES
from ..quadrature import sphere_quadrature
from ..sampling import uniform_points

# solver name -> (class in `solvers`, resolution key, its default, accepted dims or None for any)
SOLVERS = {
    "fourier": ("FourierCircle", "modes", 256, (2,)),
    "harmonics": ("SphericalHarmonics", "lmax", 63, (3,)),
    "fem": ("FiniteElements", "refinement", 4, (2, 3)),
    "particles": ("Particles", "n", 1000, None),
    "gegenbauer": ("Gegenbauer", "lmax", 64, None),
    "lagrangian": ("Lagrangian", "nodes", None, (2, 3)),      # nodes: the solver's default (1024 S^1, 2048 S^2)
}
_ALIASES = {cls.lower(): name for name, (cls, *_ ) in SOLVERS.items()}
_ALIASES.update({"fouriercircle": "fourier", "sphericalharmonics": "harmonics", "finiteelements": "fem",
                 "spectral-circle": "fourier", "spectral-sphere": "harmonics"})

_ADAPTIVE_KEYS = {"rtol", "atol", "method"}
# keys of [solver] besides `name`, per solver
_SOLVER_KEYS = {
    "fourier": {"modes", "max_modes", "on_underresolved", "handover", "options"} | _ADAPTIVE_KEYS,
    "harmonics": {"lmax", "max_lmax", "on_underresolved", "handover", "options"} | _ADAPTIVE_KEYS,
    "fem": {"refinement", "vertices", "dt", "cfl", "options"},
    "particles": {"n", "sampling", "seed", "scheme", "dt", "options"} | _ADAPTIVE_KEYS,
    "gegenbauer": {"lmax", "options"} | _ADAPTIVE_KEYS,
    "lagrangian": {"nodes", "panels", "order", "options"} | _ADAPTIVE_KEYS,
}
_CAPS = {"fourier": "max_modes", "harmonics": "max_lmax"}       # the caps of an "auto" resolution
_HANDOVER_KEYS = {"nodes", "panels", "order", "estimate", "cluster_tol", "min_mass"}   # of solvers.Lagrangian
_MODEL_KEYS = {"beta", "dim", "normalized", "V", "noise"}
_TIMES_KEYS = {"values", "t_end", "n_saves"}
_OUTPUT_KEYS = {"name", "plot_times", "checkpoint", "checkpoint_every", "plot", "grid", "scale", "dir", "quick",
                "progress"}
_AUTO_RESOLUTION = {"fourier", "harmonics", "gegenbauer"}     # solvers whose resolution may be "auto"
_SECTIONS = {"solver", "model", "initial", "times", "output"}
# densities by name: the callable and its parameters (rng is spelled `seed` in a config)
_DENSITIES = {
    "uniform": _densities.uniform,
    "von_mises_fisher": _densities.von_mises_fisher,
    "perturbed_uniform": _densities.perturbed_uniform,
    "band_limited": _densities.band_limited,
    "mixture": _densities.mixture,
    "fourier": _densities.fourier_modes,          # coefficients = [[k, amplitude, phase], ...]: 1 + Σ a cos(kθ + φ)
    "harmonics": _densities.spherical_harmonics,  # coefficients = [[l, m, amplitude], ...]: 1 + Σ a Y_lm (real_sh)
    "file": from_file,                 # path = "...": a saved Solution's last state, or a grid file
}


def refuse_unknown(keys, allowed, where):
    extra = sorted(set(keys) - set(allowed))
    if extra:
        raise ValueError(f"unknown key `{where}.{extra[0]}` in the configuration; accepted keys in [{where}]: "
                         f"{', '.join(sorted(allowed))}.")


def _require(table, key, where):
    if key not in table:
        raise ValueError(f"missing key `{where}.{key}` in the configuration.")
    return table[key]


def _bool(value, name):
    if not isinstance(value, bool):
        raise ValueError(f"`{name}` must be true or false, got {value!r}.")
    return value


def _rename(exc, name):
    """Re-raise a ValueError from a checker so that it names the config key."""
    msg = str(exc)
    if msg.startswith("`"):
        msg = msg.split("`", 2)[2] if msg.count("`") >= 2 else msg
        return ValueError(f"`{name}`{msg}")
    return ValueError(f"`{name}`: {msg}")


def _checked(fn, value, name, **kw):
    try:
        return fn(value, name, **kw)
    except ValueError as exc:
        raise _rename(exc, name) from None


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

    @property
    def solver_class_name(self):
        return SOLVERS[self.solver][0]

    def density(self):
        """The initial density callable."""
        return build_density(self.density_spec, self.model.dim, "initial")

    def make_solver(self):
        """Instantiate the solver (imports `solvers` here, so a config validates without it)."""

        try:
            cls = getattr(solvers, self.solver_class_name)
        except AttributeError as exc:
            raise ValueError(f"`solver.name`={self.solver!r}: solvers.{self.solver_class_name} is not available "
                             f"({exc}).") from None
        kwargs = dict(self.solver_options)
        res_key = SOLVERS[self.solver][1]
        if self.solver != "particles":
            kwargs.setdefault(res_key, self.resolution)
        _check_signature(cls.__init__, kwargs, "solver.options")
        try:
            solver = cls(self.model, **kwargs)
            if self.solver == "particles":
                check_memory(solver.memory_estimate(self.resolution), "n", self.resolution)
        except ValueError as exc:         # name the configuration's key: `solver.modes`, `solver.options.chunk`
            arg = str(exc).split("`")[1] if str(exc).startswith("`") else None
            if arg in (res_key, *kwargs):
                raise _rename(exc, f"solver.{arg}" if arg == res_key else f"solver.options.{arg}") from None
            raise
        return solver

    def quick(self):
        """A reduced copy for ``--quick``: at most 11 saved times and 500 particles."""

        cfg = copy.copy(self)
        if cfg.t_eval.size > 11:
            cfg.t_eval = np.linspace(0.0, float(cfg.t_eval[-1]), 11)
        if cfg.solver == "particles":
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
            raise ValueError(f"unknown key `{where}.{k}`; accepted: {', '.join(allowed)}.")


def build_density(spec, dim, where="initial"):
    """A density callable from a config table ``{density = name, <parameters>}`` (mixtures nest)."""
    if not isinstance(spec, dict):
        raise ValueError(f"`{where}` must be a table with a `density` key, got {spec!r}.")
    name = _require(spec, "density", where)
    if not isinstance(name, str) or name not in _DENSITIES:
        raise ValueError(f"`{where}.density`={name!r} is not a known density; accepted: "
                         f"{', '.join(sorted(_DENSITIES))}.")
    params = {k: v for k, v in spec.items() if k != "density"}
    fn = _DENSITIES[name]
    if name == "mixture":
        refuse_unknown(params, {"components", "weights"}, where)
        comps = _require(params, "components", where)
        if not isinstance(comps, list) or not comps:
            raise ValueError(f"`{where}.components` must be a non-empty array of density tables.")
        built = [build_density(c, dim, f"{where}.components[{i}]") for i, c in enumerate(comps)]
        try:
            return fn(built, params.get("weights"))
        except ValueError as exc:
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
                raise ValueError(f"`{where}.{key}` must be a vector of {dim} numbers or \"pole\" (e_{dim}), "
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
            raise ValueError(f"`{where}.{key}`{msg.split('`', 2)[2]}") from None
        raise ValueError(f"`{where}` ({name}): {exc}") from None
    if getattr(rho, "dim", None) not in (None, dim):
        raise ValueError(f"`{where}` ({name}) lives on S^{rho.dim - 1} but `model.dim`={dim}.")
    return rho


def parse_config(raw, source="<dict>", name=None):
    """Validate a configuration given as a dict (as read from TOML) and return a `RunConfig`."""
    if not isinstance(raw, dict):
        raise ValueError("the configuration must be a table of tables ([solver], [model], ...).")
    extra = sorted(set(raw) - _SECTIONS)
    if extra:
        raise ValueError(f"unknown table `[{extra[0]}]` in the configuration; accepted tables: "
                         f"{', '.join('[' + s + ']' for s in sorted(_SECTIONS))}.")
    for section in ("solver", "model", "initial", "times"):
        if section not in raw:
            raise ValueError(f"missing table `[{section}]` in the configuration.")
        if not isinstance(raw[section], dict):
            raise ValueError(f"`{section}` must be a table.")

    # [model]
    m = raw["model"]
    refuse_unknown(m, _MODEL_KEYS, "model")
    beta = _checked(check_real, _require(m, "beta", "model"), "model.beta")         # either sign (docs/negative-beta.md)
    dim = _checked(check_int, _require(m, "dim", "model"), "model.dim", low=2)
    normalized = _bool(m.get("normalized", True), "model.normalized")
    V = _checked(check_real, m.get("V", 1.0), "model.V")
    noise = _checked(check_real, m.get("noise", 0.0), "model.noise", low=0.0)
    model = Model(beta=beta, dim=dim, normalized=normalized, V=V, noise=noise)

    # [solver]
    s = dict(raw["solver"])
    sname = _require(s, "name", "solver")
    key = str(sname).lower()
    key = _ALIASES.get(key, key)
    if key not in SOLVERS:
        raise ValueError(f"`solver.name`={sname!r} is not a solver; accepted: {', '.join(SOLVERS)}.")
    cls_name, res_key, res_default, dims = SOLVERS[key]
    s.pop("name")
    refuse_unknown(s, _SOLVER_KEYS[key], "solver")
    if dims is not None and dim not in dims:
        raise ValueError(f"`solver.name`={key!r} needs `model.dim` in {list(dims)}, got {dim}.")
    lows = {"modes": 8, "lmax": 4, "refinement": 0, "n": 1, "nodes": 8}
    resolution = s.pop(res_key, res_default)
    if resolution is None:                  # the solver's own default (Lagrangian: by dim, or the panels)
        pass
    elif key in _AUTO_RESOLUTION and isinstance(resolution, str):
        if resolution != "auto":
            raise ValueError(f"`solver.{res_key}` must be an integer >= {lows[res_key]} or \"auto\", got {resolution!r}.")
    else:
        resolution = _checked(check_int, resolution, f"solver.{res_key}", low=lows[res_key])
    options = s.pop("options", {})
    if not isinstance(options, dict):
        raise ValueError("`solver.options` must be a table of extra keyword arguments for the solver.")
    solver_options = dict(options)
    solve_options, particle_options = {}, {}
    for k in ("rtol", "atol"):
        if k in s:
            solve_options[k] = _checked(check_real, s.pop(k), f"solver.{k}", low=0.0, low_open=True)
    if "method" in s:
        method = s.pop("method")
        if method not in ("dopri5", "bs32"):
            raise ValueError(f"`solver.method` must be 'dopri5' or 'bs32', got {method!r}.")
        solve_options["method"] = method
    if key in _CAPS:
        solver_options.update(_spectral_keys(s, key, res_key, resolution, lows[res_key], model, solve_options))
    if key == "lagrangian":
        solver_options.update(_lagrangian_keys(s, "solver", model, resolution))
    if key == "fem":
        if "vertices" in s:
            if dim != 2:
                raise ValueError("`solver.vertices` is for the circle mesh (model.dim = 2); use `solver.refinement`.")
            solver_options["vertices"] = _checked(check_int, s.pop("vertices"), "solver.vertices", low=8)
        if "dt" in s:
            solve_options["dt"] = _checked(check_real, s.pop("dt"), "solver.dt", low=0.0, low_open=True)
        if "cfl" in s:
            solve_options["cfl"] = _checked(check_real, s.pop("cfl"), "solver.cfl", low=0.0, low_open=True, high=1.0)
    if key == "particles":
        sampling = s.pop("sampling", "iid")
        if sampling not in ("iid", "quasi", "quantile"):
            raise ValueError(f"`solver.sampling` must be 'iid', 'quasi' or 'quantile', got {sampling!r}.")
        if sampling != "iid" and dim not in (2, 3):
            raise ValueError(f"`solver.sampling`={sampling!r} needs `model.dim` 2 or 3; use 'iid'.")
        if sampling == "quantile" and dim != 2:
            raise ValueError("`solver.sampling`='quantile' is defined on S^1 only (model.dim = 2).")
        particle_options["sampling"] = sampling
        particle_options["seed"] = _checked(check_int, s.pop("seed", 0), "solver.seed", low=0)
        scheme = s.pop("scheme", "adaptive")
        if scheme not in ("adaptive", "euler-normalize"):
            raise ValueError(f"`solver.scheme` must be 'adaptive' or 'euler-normalize', got {scheme!r}.")
        solve_options["scheme"] = scheme
        if "dt" in s:
            solve_options["dt"] = _checked(check_real, s.pop("dt"), "solver.dt", low=0.0, low_open=True)
        elif scheme == "euler-normalize":
            solve_options["dt"] = 0.1
        adaptive = [k for k in ("rtol", "atol", "method") if k in solve_options]
        if noise > 0 and adaptive:
            raise ValueError(f"`solver.{adaptive[0]}` belongs to the adaptive scheme, which particles use without noise "
                             f"only; with `model.noise`={noise:g} they take Euler–Maruyama steps of `solver.dt`.")

    # [initial]
    init = dict(raw["initial"])
    normalize = _bool(init.pop("normalize", False), "initial.normalize")
    rho = build_density(init, dim, "initial")
    # evaluate once on a few points: bad parameters fail here, before any work
    probe = sphere_quadrature(512, dim)[0] if dim in (2, 3) else uniform_points(512, dim, 0)
    vals = np.asarray(rho(probe), dtype=float)
    if not np.all(np.isfinite(vals)):
        raise ValueError("`initial`: the density must be finite; it has NaN or inf values.")
    if np.any(vals < 0):
        raise ValueError(f"`initial`: the density must be non-negative; its minimum on {len(vals)} probe points is "
                         f"{float(vals.min()):.3g}.")
    if key != "particles":
        solve_options["normalize"] = normalize

    # [times]
    t = raw["times"]
    refuse_unknown(t, _TIMES_KEYS, "times")
    if "values" in t:
        if "t_end" in t or "n_saves" in t:
            raise ValueError("`times`: give either `values` or `t_end` (with `n_saves`), not both.")
        t_eval = _checked(check_times, t["values"], "times.values")
    else:
        t_end = _checked(check_real, _require(t, "t_end", "times"), "times.t_end", low=0.0, low_open=True)
        n_saves = _checked(check_int, t.get("n_saves", 21), "times.n_saves", low=2, high=100000)
        t_eval = np.linspace(0.0, t_end, n_saves)

    # [output]
    o = raw.get("output", {})
    if not isinstance(o, dict):
        raise ValueError("`output` must be a table.")
    refuse_unknown(o, _OUTPUT_KEYS, "output")
    out_name = str(o.get("name", name or "run"))
    if not out_name or any(c in out_name for c in "/\\"):
        raise ValueError(f"`output.name` must be a plain file stem, got {out_name!r}.")
    plot = _bool(o.get("plot", True), "output.plot")
    checkpoint = _bool(o.get("checkpoint", True), "output.checkpoint")
    checkpoint_every = _checked(check_real, o.get("checkpoint_every", 30.0), "output.checkpoint_every", low=0.0)
    plot_times = o.get("plot_times")
    if plot_times is not None:
        if not isinstance(plot_times, list) or not plot_times:
            raise ValueError("`output.plot_times` must be a non-empty array of times.")
        plot_times = [_checked(check_real, v, "output.plot_times", low=0.0, high=float(t_eval[-1]))
                      for v in plot_times]

    return RunConfig(solver=key, resolution=resolution, solver_options=solver_options,
                     solve_options=solve_options, particle_options=particle_options, model=model,
                     density_spec=init, t_eval=t_eval, name=out_name, plot=plot, plot_times=plot_times,
                     checkpoint=checkpoint, checkpoint_every=checkpoint_every, source=source, raw=raw, **_output_options(o, key))


def _output_options(o, solver):
    """grid, scale, out_dir, quick_run, progress from the [output] table (checked)."""

    grid = _bool(o.get("grid", False), "output.grid")
    if grid and solver == "particles":
        raise ValueError("`output.grid` = true writes a density on a grid; particles have none (their positions "
                         "are in the file).")
    scale = o.get("scale", "auto")
    if scale not in SCALES:
        raise ValueError(f"`output.scale` must be one of {', '.join(repr(v) for v in SCALES)}, got {scale!r}.")
    out_dir = o.get("dir")
    if out_dir is not None and (not isinstance(out_dir, str) or not out_dir):
        raise ValueError(f"`output.dir` must be a directory path (a string), got {out_dir!r}.")
    progress = o.get("progress")
    return {"grid": grid, "scale": scale, "out_dir": out_dir, "quick_run": _bool(o.get("quick", False), "output.quick"),
            "progress": None if progress is None else _bool(progress, "output.progress")}


def _panels(value, name):
    """A panel count (int >= 1) or the panel edges (an array of numbers) of `solvers.Lagrangian`."""
    if isinstance(value, list):
        if len(value) < 2 or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
            raise ValueError(f"`{name}` must be a panel count or an array of at least two panel edges (radians).")
        return [float(v) for v in value]
    return _checked(check_int, value, name, low=1)


def _lagrangian_keys(table, where, model, nodes=None):
    """The `solvers.Lagrangian` options of a config table: ``panels`` (S^1) and ``order``; noise must be 0."""
    if model.noise > 0:
        raise ValueError(f"`{where}`: solvers.Lagrangian needs `model.noise` = 0 (with diffusion the density is not "
                         f"carried by characteristics), got {model.noise:g}.")
    out = {}
    if "panels" in table:
        if model.dim != 2:
            raise ValueError(f"`{where}.panels` applies on S^1 (`model.dim` = 2); on S^2 give `{where}.nodes`.")
        if nodes is not None:
            raise ValueError(f"`{where}`: give either `nodes` or `panels`, not both.")
        out["panels"] = _panels(table.pop("panels"), f"{where}.panels")
    if "order" in table:
        out["order"] = _checked(check_int, table.pop("order"), f"{where}.order", low=2, high=64)
    return out


def _spectral_keys(s, key, res_key, resolution, low, model, solve_options):
    """The cap of an "auto" resolution (``max_modes``, ``max_lmax``) and the hand-over to the
    characteristics (``on_underresolved = "lagrangian"``, optional ``[solver.handover]`` table of
    `solvers.Lagrangian` options: nodes, panels, order, estimate, cluster_tol, min_mass)."""
    out = {}
    cap = _CAPS[key]
    if cap in s:
        if resolution != "auto":
            raise ValueError(f"`solver.{cap}` caps `solver.{res_key}` = \"auto\"; got {res_key} = {resolution!r}.")
        out[cap] = _checked(check_int, s.pop(cap), f"solver.{cap}", low=low)
    on = s.pop("on_underresolved", "raise")
    if on not in ("raise", "lagrangian"):
        raise ValueError(f"`solver.on_underresolved` must be \"raise\" or \"lagrangian\", got {on!r}.")
    handover = s.pop("handover", None)
    if handover is not None and not isinstance(handover, dict):
        raise ValueError(f"`solver.handover` must be a table of solvers.Lagrangian options, got {handover!r}.")
    if handover is not None and on != "lagrangian":
        raise ValueError("`solver.handover` configures the hand-over: set `solver.on_underresolved` = \"lagrangian\".")
    if on == "lagrangian":
        handover = dict(handover or {})
        refuse_unknown(handover, _HANDOVER_KEYS, "solver.handover")
        nodes = handover.get("nodes")
        if nodes is not None:
            handover["nodes"] = _checked(check_int, nodes, "solver.handover.nodes", low=8)
        options = _lagrangian_keys(handover, "solver.handover", model, nodes)
        for k in ("cluster_tol", "min_mass"):
            if k in handover:
                options[k] = _checked(check_real, handover.pop(k), f"solver.handover.{k}", low=0.0, low_open=True)
        if "estimate" in handover:
            options["estimate"] = _bool(handover.pop("estimate"), "solver.handover.estimate")
        if nodes is not None:
            options["nodes"] = handover.pop("nodes")
        # "lagrangian" (labels from the spectral resolution) or the Lagrangian's options
        solve_options["on_underresolved"] = options or "lagrangian"
    return out


def load_config(path):
    """Read and validate a TOML configuration file (see the module docstring)."""
    path = pathlib.Path(path)
    if not path.is_file():
        raise ValueError(f"`config`: no such file {str(path)!r}.")
    try:
        raw = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"`config` {str(path)!r} is not valid TOML: {exc}.") from None
    return parse_config(raw, source=str(path), name=path.stem)
