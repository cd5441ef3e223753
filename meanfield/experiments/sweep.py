"""``meanfield sweep SWEEP.toml``: parameter sweeps and ensembles on dask.distributed, resumable.

A sweep is a grid (or an explicit list) of *cells* over the parameters of a ``meanfield run``
configuration or of an experiment. Every cell is an independent task: it runs in a worker process
and its result is one NetCDF file. The sweep file is a run configuration (the tables of
`meanfield.experiments.config`) with a ``[sweep]`` table::

    [sweep]
    base = "circle.toml"        # optional: a run configuration the tables below override
    # experiment = "phase-diagram"   # instead of a run: an experiment; its arguments in [parameters]
    seed = 0                    # optional: cell i gets SeedSequence(seed, spawn_key=(i,))
    seed_key = "solver.seed"    # where that seed goes (default: solver.seed for particles, `seed` for experiments)
    replicas = 1                # cells repeated with independent seeds (an ensemble: dimension `replica`)
    retries = 2                 # re-runs of a task whose worker died or that raised

    [sweep.grid]                # the Cartesian product of these values ...
    "model.beta" = [1.0, 2.0, 4.0]
    "solver.modes" = [32, 64]

    # [[sweep.cells]]           # ... or an explicit list of cells, each a table of the same keys
    # "model.beta" = 1.0

Output layout in ``--out DIR``: ``sweep.json`` (the cells and their parameters), ``cells/cell-00003.nc``
(the result of cell 3: the `Solution` of a run, or an experiment's dataset and numeric results),
``cells/cell-00003.json`` (its status: done or failed with the error, its checks, its seed; written
atomically after the NetCDF file, it marks the cell complete), ``summary.json`` (counts, failures and
the layout of the combined dataset). `open_sweep` opens the cells lazily, with dask, as one
`xarray.Dataset` whose swept parameters are coordinates (one dimension per grid key; a ``cell``
dimension for an explicit list). Running the same sweep again skips the complete cells.

The cells run through `meanfield.experiments.parallel.map_tasks`, the engine the experiments use too.
"""
import copy
import hashlib
import itertools
import json
import os
import pathlib
import tempfile
import time
from dataclasses import dataclass, field

import numpy as np

from ..validation import check_int
from ..spaces.gridded import describe_file
from ..serialization import jsonable
from .report import Report
from .config import SolverKeys, coerce, parse_config, read_toml, refuse_unknown, solver_class
from .options import lookup
from .parallel import TaskError, check_parallel, log_to_stderr, map_tasks
from .run import run
from ..errors import InvalidInput

_SWEEP_KEYS = {"base", "experiment", "seed", "seed_key", "replicas", "retries", "grid", "cells", "name"}
_RUN_TABLES = {"solver", "model", "initial", "times", "output"}

def cell_seed(seed, index):
    """The integer seed of cell ``index``: ``SeedSequence(seed, spawn_key=(index,))``, the ``index``-th
    child of ``SeedSequence(seed).spawn``; it depends on neither the number of workers nor the order."""
    ss = np.random.SeedSequence(check_int(seed, "seed", low=0), spawn_key=(check_int(index, "index", low=0),))
    return int(ss.generate_state(1, np.uint32)[0])


# -- the sweep file ---------------------------------------------------------------------------------------
@dataclass
class Cell:
    """One task of a sweep: its index, swept parameters, seed, full configuration and identity key."""

    index: int
    parameters: dict
    seed: int | None
    config: dict
    key: str = ""

    @property
    def stem(self):
        return f"cell-{self.index:05d}"


@dataclass
class Sweep:
    """A validated sweep (see the module docstring for the file format)."""

    name: str
    kind: str                       # "run" or "experiment"
    experiment: str | None
    keys: list                      # swept keys, in order (plus "replica" when replicas > 1)
    grid: dict | None               # key -> values for a grid; None for an explicit list
    cells: list = field(default_factory=list)
    seed: int | None = None
    seed_key: str | None = None
    retries: int = 2
    source: str = ""

    def manifest(self):
        return jsonable({"name": self.name, "kind": self.kind, "experiment": self.experiment, "keys": self.keys,
                          "grid": self.grid, "seed": self.seed, "seed_key": self.seed_key, "source": self.source,
                          "cells": [{"index": c.index, "parameters": c.parameters, "seed": c.seed, "key": c.key}
                                    for c in self.cells]})


def _set_dotted(table, key, value):
    parts = key.split(".")
    for p in parts[:-1]:
        nxt = table.setdefault(p, {})
        if not isinstance(nxt, dict):
            raise InvalidInput(f"`{key}`: `{p}` is not a table in the configuration.")
        table = nxt
    table[parts[-1]] = value


def _merge(base, over):
    out = copy.deepcopy(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else copy.deepcopy(v)
    return out


def _values(table, where):
    if not isinstance(table, dict) or not table:
        raise InvalidInput(f"`{where}` must be a table of `key = [values]`.")
    for k, v in table.items():
        if not isinstance(v, list) or not v:
            raise InvalidInput(f"`{where}.{k}` must be a non-empty array of values, got {v!r}.")
        texts = [json.dumps(x, sort_keys=True) for x in v]
        if len(set(texts)) != len(texts):
            raise InvalidInput(f"`{where}.{k}` repeats a value: {v!r}.")
    return {k: list(v) for k, v in table.items()}


def parse_sweep(raw, source="<dict>", name=None, base_dir="."):
    """Validate a sweep given as a dict (as read from TOML) and expand its cells; returns a `Sweep`."""
    if not isinstance(raw, dict) or not isinstance(raw.get("sweep"), dict):
        raise InvalidInput("missing table `[sweep]` in the sweep file.")
    s = raw["sweep"]
    refuse_unknown(s, _SWEEP_KEYS, "sweep")
    experiment = s.get("experiment")
    exp, base = _sweep_base(raw, s, experiment, base_dir)
    allowed = None if exp is None else set(exp.keys)
    seed = None if s.get("seed") is None else check_int(s["seed"], "sweep.seed", low=0)
    replicas = check_int(s.get("replicas", 1), "sweep.replicas", low=1)
    retries = check_int(s.get("retries", 2), "sweep.retries", low=0)
    seed_key = _seed_key(s.get("seed_key"), allowed, base)
    keys, combos, grid = _combinations(s, allowed, replicas)
    name = str(s.get("name", name or "sweep"))
    sweep = Sweep(name=name, kind="experiment" if experiment else "run", experiment=experiment, keys=keys,
                  grid=grid, seed=seed, seed_key=seed_key, retries=retries, source=source)
    checked = {}
    for i, combo in enumerate(combos):
        params = dict(zip(keys, combo))
        cseed = None if seed is None else cell_seed(seed, i)
        cfg = copy.deepcopy(base)
        for k, v in params.items():
            if k != "replica":
                _set_dotted(cfg, k, v)
        if cseed is not None and seed_key is not None and seed_key not in params:
            _set_dotted(cfg, seed_key, cseed)
        text = json.dumps(cfg, sort_keys=True, default=str)
        if text not in checked:                   # every distinct configuration (or options), before any work
            try:
                if exp is None:
                    parse_config(cfg, source=f"{source} cell {i}", name=name, build=False)
                else:
                    exp.options(**cfg)
            except InvalidInput as exc:
                shown = ", ".join(f"{k} = {v!r}" for k, v in params.items())
                raise InvalidInput(f"{exc} (sweep cell {i}: {shown or 'the base configuration'})") from None
            checked[text] = True
        ident = json.dumps({"kind": sweep.kind, "experiment": experiment, "config": cfg}, sort_keys=True, default=str)
        key = hashlib.sha256(ident.encode()).hexdigest()[:20]
        sweep.cells.append(Cell(i, params, cseed, cfg, key))
    return sweep


def _sweep_base(raw, s, experiment, base_dir):
    """(the registered experiment or None, the base configuration or [parameters] every cell starts from)."""
    if experiment is not None:
        if "base" in s:
            raise InvalidInput("`sweep.base` is a run configuration; an experiment sweep takes its arguments in "
                             "[parameters].")
        extra = sorted(set(raw) - {"sweep", "parameters"})
        if extra:
            raise InvalidInput(f"unknown table `[{extra[0]}]` in an experiment sweep; accepted tables: [sweep], "
                             f"[parameters].")
        base = dict(raw.get("parameters", {}))
        exp = lookup(experiment, "sweep.experiment")
        refuse_unknown(base, set(exp.keys), "parameters")
        return exp, base
    extra = sorted(set(raw) - _RUN_TABLES - {"sweep"})
    if extra:
        raise InvalidInput(f"unknown table `[{extra[0]}]` in the sweep file; accepted tables: [sweep], "
                         f"{', '.join('[' + t + ']' for t in sorted(_RUN_TABLES))} (or [parameters] with "
                         f"`sweep.experiment`).")
    base = read_toml(pathlib.Path(base_dir) / str(s["base"]), "sweep.base") if "base" in s else {}
    return None, _merge(base, {k: v for k, v in raw.items() if k != "sweep"})


def _seed_key(seed_key, allowed, base):
    """The key a cell's seed goes to: given, or the experiment's ``seed``, or the ``solver.seed`` of a run
    that samples its initial particles."""
    if seed_key is None:
        if allowed is not None:
            return "seed" if "seed" in allowed else None
        try:
            samples = SolverKeys.of(solver_class(base.get("solver", {}).get("name", ""))).samples
        except ValueError:
            samples = False
        return "solver.seed" if samples else None
    if not isinstance(seed_key, str) or not seed_key:
        raise InvalidInput(f"`sweep.seed_key` must be a key such as 'solver.seed', got {seed_key!r}.")
    return seed_key


def _combinations(s, allowed, replicas):
    """(keys, the values of each cell, the grid or None) of ``sweep.grid`` or ``sweep.cells``, times the
    replicas."""
    if "grid" in s and "cells" in s:
        raise InvalidInput("give either `sweep.grid` or `sweep.cells`, not both.")
    if "cells" in s:
        cells = s["cells"]
        if not isinstance(cells, list) or not cells or not all(isinstance(c, dict) for c in cells):
            raise InvalidInput("`sweep.cells` must be a non-empty array of tables ([[sweep.cells]]).")
        keys = list(cells[0])
        for i, c in enumerate(cells):
            if set(c) != set(keys):
                odd = sorted(set(c) ^ set(keys))[0]
                raise InvalidInput(f"`sweep.cells[{i}]` differs from the first cell in key `{odd}`; every cell "
                                 f"sets the same keys.")
        combos, grid = [[c[k] for k in keys] for c in cells], None
    else:
        grid = _values(s["grid"], "sweep.grid") if "grid" in s else {}
        keys = list(grid)
        combos = [list(c) for c in itertools.product(*grid.values())]
    if allowed is not None:
        refuse_unknown(keys, allowed, "sweep.grid" if grid is not None else "sweep.cells")
    if replicas > 1:
        keys = keys + ["replica"]
        combos = [c + [r] for c in combos for r in range(replicas)]
        if grid is not None:
            grid["replica"] = list(range(replicas))
    return keys, combos, grid


def load_sweep(path):
    """Read and validate a sweep file (see the module docstring)."""
    path = pathlib.Path(path)
    return parse_sweep(read_toml(path, "sweep"), source=str(path), name=path.stem, base_dir=path.parent)


# -- one cell, in a worker -------------------------------------------------------------------------------
def _flatten(results, prefix=""):
    """Numeric results of a Report as (name, array) pairs: nested dicts joined with '_'."""
    for k, v in results.items():
        name = f"{prefix}{k}"
        if isinstance(v, dict):
            yield from _flatten(v, f"{name}_")
            continue
        try:
            arr = np.asarray(v)
        except (ValueError, TypeError):
            continue
        if arr.dtype.kind in "biuf" and arr.size:
            yield name, arr.astype(float) if arr.dtype.kind == "b" else arr


def run_cell(spec):
    """Compute one cell (in a worker): returns ``(dataset, info)`` with the dataset loaded in memory.

    A run cell is the `Solution` of ``meanfield run`` on the cell's configuration; an experiment cell is
    the experiment's dataset (if it writes one) with its numeric results as variables (only the scalar
    ones next to a dataset; arrays get dimensions ``<name>_dim0``, ...).
    """
    import xarray as xr  # deferred: xarray is heavy

    start = time.perf_counter()
    quick = spec.get("quick", False)
    if spec["kind"] == "run":
        report = run(parse_config(spec["config"], name="cell"), None, quick=quick, progress=False,
                     clusters=False)
        if report.solution is None or not len(report.solution.t):
            raise RuntimeError(f"the run produced no solution ({report.status}: {report.message})")
        ds = report.solution.to_xarray()
    else:
        exp = lookup(spec["experiment"])
        fn, primary = exp.function, exp.writes
        with tempfile.TemporaryDirectory(prefix="meanfield-cell-") as tmp:
            report = fn(tmp, quick=quick, progress=False, **spec["config"])
            if primary is not None and (pathlib.Path(tmp) / primary).is_file():
                with xr.open_dataset(pathlib.Path(tmp) / primary, engine="netcdf4", decode_times=False) as f:
                    ds = f.load()
            else:
                ds = xr.Dataset()
        for name, arr in _flatten(report.results):       # with a dataset, its scalars; else every array
            if name not in ds.variables and name not in ds.dims and (primary is None or arr.ndim == 0):
                ds[name] = (tuple(f"{name}_dim{j}" for j in range(arr.ndim)), arr)
    ds["passed"] = ((), np.int8(report.passed))
    ds["passed"].attrs["long_name"] = "1 if every check of the cell passed"
    info = {"run_status": report.status, "message": report.message, "passed": report.passed,
            "checks_failed": [c["name"] for c in report.checks if not c["passed"]],
            "wall_time": time.perf_counter() - start}
    return ds, info


# -- files -------------------------------------------------------------------------------------------------
def _write_atomic(path, text_or_writer):
    tmp = path.with_name(path.name + ".tmp")
    if callable(text_or_writer):
        text_or_writer(tmp)
    else:
        tmp.write_text(text_or_writer)
    os.replace(tmp, path)


def _status_path(out, cell):
    return pathlib.Path(out) / "cells" / f"{cell.stem}.json"


def _cell_complete(out, cell):
    """True if the cell's status says done for this very configuration and its NetCDF file opens with
    every variable it recorded."""
    import xarray as xr  # deferred: xarray is heavy

    try:
        status = json.loads(_status_path(out, cell).read_text())
        if status.get("status") != "done" or status.get("key") != cell.key:
            return False
        with xr.open_dataset(pathlib.Path(out) / "cells" / status["file"], engine="netcdf4", decode_times=False) as ds:
            return set(status["variables"]) <= set(ds.variables)
    except Exception:
        return False


def _record(out, cell, result):
    """Write a cell's NetCDF file, then (atomically, the completion marker) its status."""
    cells = pathlib.Path(out) / "cells"
    status = {"index": cell.index, "parameters": cell.parameters, "seed": cell.seed, "key": cell.key}
    if isinstance(result, TaskError):
        status.update({"status": "failed", "error": str(result), "traceback": result.traceback})
    else:
        ds, info = result
        ds.attrs.update({"sweep_cell": cell.index, "sweep_parameters": json.dumps(jsonable(cell.parameters)),
                         "sweep_seed": -1 if cell.seed is None else cell.seed})
        nc = cells / f"{cell.stem}.nc"
        ds = describe_file(ds, title=f"meanfield sweep cell {cell.index}: {cell.parameters}", history="meanfield sweep")
        _write_atomic(nc, lambda tmp: ds.to_netcdf(tmp, engine="netcdf4"))
        status.update({"status": "done", "file": nc.name, "variables": sorted(map(str, ds.variables)), **info})
    _write_atomic(_status_path(out, cell), json.dumps(jsonable(status, strict=True), indent=1) + "\n")
    return status


# -- the combined dataset ---------------------------------------------------------------------------------
def _coordinate_names(keys):
    short = [k.split(".")[-1] for k in keys]
    return {k: (s if short.count(s) == 1 else k.replace(".", "_")) for k, s in zip(keys, short)}


def _coordinate_value(v):
    return v if isinstance(v, (bool, int, float, str)) else json.dumps(v, sort_keys=True)


def _index_dims(ds):
    """Integer coordinates for dimensions without one, so that cells of different sizes align (outer join)."""
    return ds.assign_coords({d: np.arange(n) for d, n in ds.sizes.items() if d not in ds.coords})


def open_sweep(out, chunks=None):
    """The complete cells of the sweep in ``out`` as one lazily loaded (dask) `xarray.Dataset`.

    The swept parameters are coordinates: for a grid, one dimension per swept key (named after the
    key's last part, ``model.beta`` -> ``beta``; ``replica`` for replicas) with NaN where a cell failed
    or is missing; for an explicit list, a ``cell`` dimension with the parameters as coordinates along
    it. Cells of different sizes are aligned by an outer join.
    """
    import xarray as xr  # deferred: xarray is heavy

    out = pathlib.Path(out)
    manifest = json.loads((out / "sweep.json").read_text())
    names = _coordinate_names(manifest["keys"])
    done = []
    for c in manifest["cells"]:
        try:
            status = json.loads((out / "cells" / f"cell-{c['index']:05d}.json").read_text())
        except (OSError, ValueError):
            continue
        if status.get("status") == "done" and status.get("key") == c["key"]:
            done.append((c, out / "cells" / status["file"]))
    if not done:
        return xr.Dataset()
    files = xr.open_mfdataset([p for _, p in done], combine="nested", concat_dim="cell", join="outer",
                              data_vars="all", coords="minimal", compat="override", combine_attrs="drop_conflicts",
                              preprocess=_index_dims, engine="netcdf4", chunks=chunks if chunks is not None else {},
                              decode_times=False)       # t, not dates (gridded.TIME_ATTRS)
    taken = set(files.variables) | set(files.dims)
    names = {k: (f"sweep_{n}" if n in taken else n) for k, n in names.items()}
    ds = files.assign_coords(cell=[c["index"] for c, _ in done])
    ds = ds.assign_coords({names[k]: ("cell", [_coordinate_value(c["parameters"][k]) for c, _ in done])
                           for k in manifest["keys"]})
    ds.attrs["sweep"] = manifest["name"]
    grid = manifest.get("grid")
    if grid is not None and manifest["keys"]:
        ds = _to_grid(ds, grid, [names[k] for k in manifest["keys"]], manifest["keys"])
    ds.set_close(files.close)                 # closing the result closes the cells' files
    return ds


def _to_grid(ds, grid, dims, keys):
    """The ``cell`` dimension unstacked into one dimension per grid key, in the grid's order."""
    if len(dims) == 1:
        ds = ds.swap_dims(cell=dims[0]).drop_vars("cell")
    else:
        ds = ds.drop_vars("cell").set_index(cell=dims).unstack("cell")
    ds = ds.reindex({d: [_coordinate_value(v) for v in grid[k]] for d, k in zip(dims, keys)})
    return ds.transpose(*dims, ...)


def _describe(ds):
    return {"dims": {str(k): int(v) for k, v in ds.sizes.items()},
            "coords": sorted(map(str, ds.coords)), "data_vars": sorted(map(str, ds.data_vars))}


# -- the sweep ----------------------------------------------------------------------------------------------
def sweep(spec, out=None, *, workers=None, scheduler=None, quick=False, progress=None, log=log_to_stderr):
    """Run the cells of a sweep (a path to a sweep file, a dict, or a `Sweep`) that are not complete in ``out``.

    ``workers``: None -> a `LocalCluster` with one process per core; 0 -> in this process; N -> N
    processes. ``scheduler``: the address of an existing dask scheduler instead. Returns the `Report`;
    its results count the cells (``computed``, ``skipped``, ``failed``) and describe the combined dataset.
    """
    sw = coerce(spec, Sweep, parse_sweep, load_sweep)
    if workers is None and scheduler is None:
        workers = "auto"
    workers, scheduler = check_parallel(workers, scheduler)
    out = pathlib.Path(out if out is not None else pathlib.Path("meanfield-output") / sw.name)
    (out / "cells").mkdir(parents=True, exist_ok=True)
    for stale in (out / "cells").glob("*.tmp"):
        stale.unlink()
    _write_atomic(out / "sweep.json", json.dumps(sw.manifest(), indent=1) + "\n")
    settings = {"source": sw.source, "kind": sw.kind, "experiment": sw.experiment, "keys": sw.keys,
                "grid": sw.grid, "seed": sw.seed, "seed_key": sw.seed_key, "cells": len(sw.cells),
                "workers": workers, "scheduler": scheduler if isinstance(scheduler, (str, type(None))) else "client",
                "quick": bool(quick)}
    report = Report("sweep", out, settings)
    report.files += ["sweep.json", "cells/"]
    todo = [c for c in sw.cells if not _cell_complete(out, c)]
    counts = {"cells": len(sw.cells), "skipped": len(sw.cells) - len(todo), "computed": 0, "failed": 0}
    report.results.update(counts)
    report.write()
    failed, unchecked = [], []

    def on_result(i, result):
        cell = todo[i]
        status = _record(out, cell, result)
        report.results["computed"] += 1
        if status["status"] == "failed":
            report.results["failed"] += 1
            failed.append({"index": cell.index, "parameters": cell.parameters, "error": status["error"]})
        elif not status["passed"]:
            unchecked.append({"index": cell.index, "parameters": cell.parameters,
                              "checks_failed": status["checks_failed"]})

    tasks = [{"kind": sw.kind, "experiment": sw.experiment, "config": c.config, "quick": bool(quick)} for c in todo]
    with report.guard():
        map_tasks(run_cell, tasks, workers=workers if todo else 0, scheduler=scheduler if todo else None,
                  progress=progress, desc=f"sweep {sw.name}", retries=sw.retries, errors="return",
                  on_result=on_result, log=log)
        n = len(sw.cells)
        report.results["failed_cells"] = sorted(failed, key=lambda f: f["index"])
        report.results["cells_with_failing_checks"] = sorted(unchecked, key=lambda f: f["index"])
        ds = open_sweep(out)
        report.results["dataset"] = _describe(ds)
        ds.close()
        r = report.results
        report.note(f"{n} cells: {r['skipped']} complete before (skipped), {r['computed']} computed, "
                    f"{r['failed']} failed; cells in {out / 'cells'}; open them with "
                    f"meanfield.experiments.sweep.open_sweep({str(out)!r})")
        first = f" (cell {failed[0]['index']}: {failed[0]['error']})" if failed else ""
        report.check("every cell computed", not failed, f"{len(failed)} of {n} cells failed{first}",
                     compared="the cells of the sweep with a complete result", tolerance="all of them")
        report.check("every cell's checks pass", not unchecked, f"{len(unchecked)} of {n} cells have failing checks"
                     + (f" (cell {unchecked[0]['index']}: {', '.join(unchecked[0]['checks_failed'])})"
                        if unchecked else ""), compared="the checks of every cell's own summary", tolerance="all pass")
        report.finish()
    return report
