"""What every experiment shares: an output directory, a list of checks and ``summary.json``.

A `Report` is written to disk as the experiment goes (figures and NetCDF files at once, the summary
after each part), so that an interrupted run (Ctrl-C) leaves its partial results behind.

``summary.json`` holds:

* ``status``: "running", "finished", "stopped: <reason>" (a solver stopped early, e.g. an
  under-resolved density), "interrupted", "refused" (bad input) or "failed" (an error inside the
  experiment: ``message`` holds its type and text, the files written before it stay);
  ``message`` the full reason;
* ``checks``: every check with what it ``compared``, the ``tolerance`` it had to meet, whether it
  ``passed`` and a ``detail`` with the measured numbers;
* ``results``: the numbers of the experiment; for a run, ``final_state`` (`final_state`): max and min
  ρ, E_β with its uniform and Dirac bounds, W1 to uniform and to the nearest Dirac mass, and the
  clusters with their masses and positions when they are separated;
* ``settings``, ``files`` and ``wall_time``.

Numbers are written with 12 significant digits, so that times read as `t_eval` gives them
(0.3, not 0.30000000000000004).
"""
import contextlib
import json
import math
import os
import pathlib
import sys
import time

import numpy as np
from scipy.spatial import cKDTree

from ..serialization import jsonable
from ..observables import diagnostics
from ..observables.energy import dirac_energy, uniform_energy
from ..errors import Interrupted, InvalidInput
from ..spaces.gridded import describe_file
from ..results.plotting import save, style
from ..spaces.quadrature import sphere_quadrature
from ..observables.wasserstein import w1_to_dirac, w1_to_uniform

DIGITS = 12            # significant digits of the numbers in summary.json


def pyplot():
    """matplotlib.pyplot with a non-interactive backend unless a display is configured
    (`meanfield.results.plotting.pyplot`, imported when first needed)."""
    from ..results.plotting import pyplot as plt  # deferred: matplotlib is heavy

    return plt()


def show_progress(progress):
    """None means: a bar when stderr is a terminal (the solvers' convention)."""
    return sys.stderr.isatty() if progress is None else bool(progress)


def tidy(obj, digits=DIGITS):
    """``obj`` with every float rounded to ``digits`` significant digits (recursively)."""
    if isinstance(obj, dict):
        return {k: tidy(v, digits) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [tidy(v, digits) for v in obj]
    if isinstance(obj, float) and math.isfinite(obj):
        return float(f"{obj:.{digits}g}")
    return obj


class Report:
    """Checks, numbers and files of one experiment run, mirrored in ``out/summary.json``.

    ``out=None`` keeps everything in memory (no files), which the tests and the docs use.
    """

    def __init__(self, experiment, out=None, settings=None):
        self.experiment = experiment
        self.out = None if out is None else pathlib.Path(out)
        if self.out is not None:
            self.out.mkdir(parents=True, exist_ok=True)
        self.settings = dict(settings or {})
        self.results = {}
        self.checks = []
        self.notes = []
        self.files = []
        self.status = "running"
        self.message = ""
        self._start = time.perf_counter()

    # -- recording --------------------------------------------------------------------------------
    def check(self, name, passed, detail="", *, compared=None, tolerance=None):
        """Record a named pass/fail check (the exit status is 0 only if all pass).

        ``compared``: what was compared with what (e.g. "max over saved times of |∫ρ dσ − 1|");
        ``tolerance``: the bound it had to meet (e.g. "<= 1e-6"), or how the property is judged.
        """
        self.checks.append({"name": str(name), "passed": bool(passed),
                            "compared": str(compared if compared is not None else name),
                            "tolerance": str(tolerance if tolerance is not None else "exact (a yes/no property)"),
                            "detail": str(detail)})
        return bool(passed)

    def note(self, text):
        """A line of the printed human summary (e.g. the final energy)."""
        self.notes.append(str(text))

    @property
    def passed(self):
        return self.status == "finished" and bool(self.checks) and all(c["passed"] for c in self.checks)

    def path(self, name):
        return None if self.out is None else self.out / name

    def figure(self, **kwargs):
        """A matplotlib Figure made in the library's style (`meanfield.results.plotting.STYLE`)."""

        plt = pyplot()
        with style():
            return plt.figure(**kwargs)

    def subplots(self, *args, **kwargs):
        """``plt.subplots`` in the library's style (`meanfield.results.plotting.STYLE`)."""

        plt = pyplot()
        with style():
            return plt.subplots(*args, **kwargs)

    def save_figure(self, fig, name):
        """Write ``fig`` as ``out/name`` in the library's style (fixed fonts and resolution), then close it."""

        plt = pyplot()
        if self.out is not None:
            save(fig, self.out / name)
            self.files.append(name)
        plt.close(fig)

    def save_dataset(self, ds, name, grid=False, clusters=False):
        """Write an xarray Dataset or a `Solution` as NetCDF following CF-1.11.

        A `Solution` is written by `Solution.save` (the cell means of the density on a CF grid when
        ``grid``, the cluster trajectories when ``clusters``). Any other Dataset gets the description
        of `meanfield.spaces.gridded.describe_file` (long names, no fill value on coordinates, global
        attributes and, for a ``time`` coordinate (layer depth t), the CF time attributes)."""
        if self.out is None:
            return
        if hasattr(ds, "save") and hasattr(ds, "representation"):
            ds.save(self.out / name, grid=grid, clusters=clusters)
        else:
            ds = describe_file(ds, title=f"meanfield {self.experiment}: {name}", history=f"meanfield {self.experiment}")
            ds.to_netcdf(self.out / name, engine="netcdf4")
        self.files.append(name)

    def write(self, status=None, message=None):
        if status is not None:
            self.status = status
        if message is not None:
            self.message = message
        summary = self.to_dict()
        if self.out is not None:
            tmp = self.out / "summary.json.tmp"
            tmp.write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n")
            os.replace(tmp, self.out / "summary.json")
        return summary

    @contextlib.contextmanager
    def guard(self):
        """Ctrl-C (KeyboardInterrupt, or a solver's `Interrupted`) writes what exists, then re-raises.

        A solver's partial `Solution` is saved as ``interrupted.nc``; the summary gets status
        "interrupted". The exception leaves as KeyboardInterrupt (the CLI exits with status 130).
        Bad input (`meanfield.errors.InvalidInput`) leaves status "refused"; any other exception
        status "failed" with its type and message (the files written so far stay), and is re-raised.
        """

        try:
            yield self
        except (KeyboardInterrupt, Interrupted) as exc:
            sol = getattr(exc, "solution", None)
            if sol is not None and self.out is not None and len(sol.t):
                try:
                    self.save_dataset(sol, "interrupted.nc")
                except Exception:  # pragma: no cover - best effort while interrupted
                    pass
            self.write(status="interrupted", message=str(exc) or "interrupted (Ctrl-C)")
            raise KeyboardInterrupt(str(exc)) from None
        except InvalidInput as exc:
            self.write(status="refused", message=" ".join(str(exc).split()))
            raise
        except Exception as exc:
            self.write(status="failed", message=f"{type(exc).__name__}: {' '.join(str(exc).split())}")
            raise

    def finish(self):
        return self.write(status="finished")

    @property
    def status_text(self):
        """"finished", "running", "interrupted", or "stopped: <first line of the reason>"."""
        if self.status == "stopped":
            reason = (self.message or "stopped early").strip().splitlines()[0]
            return f"stopped: {reason}"
        return self.status

    def to_dict(self):
        return tidy(jsonable(strict=True, obj={
            "experiment": self.experiment,
            "status": self.status_text,
            "message": self.message,
            "passed": self.passed,
            "checks": self.checks,
            "results": self.results,
            "settings": self.settings,
            "files": sorted(set(self.files)),
            "wall_time": time.perf_counter() - self._start,
        }))

    # -- human summary --------------------------------------------------------------------------------
    def lines(self):
        out = [f"{self.experiment}: {self.status_text}"
               + (f" ({self.message})" if self.message and self.status != "stopped" else "")]
        out += [f"  {n}" for n in self.notes]
        for c in self.checks:
            detail = f": {c['detail']}" if c["detail"] else ""
            tol = f" [tolerance {c['tolerance']}]" if not c["tolerance"].startswith("exact") else ""
            out.append(f"  [{'passed' if c['passed'] else 'FAILED'}] {c['name']}{detail}{tol}")
        if self.out is not None:
            out.append(f"  files in {self.out}: {', '.join(sorted(set(self.files + ['summary.json'])))}")
        return out


# -- the physics of a final state -------------------------------------------------------------------
CLUSTER_TOLERANCES = (1e-3, 1e-2, 1e-1)      # radians: linking distances tried, smallest first
CLUSTER_BUDGET = 1e6     # points × dimension above which a run report in d > 3 does not look for clusters
_S2_REFERENCE_POINTS = 1000     # W1 to σ on S^2: exact transport to a Fibonacci rule of 1000 points


def _last(sol):
    """(representation, data, t) of the last saved state (of the last segment of a handed-over run;
    for particles kept at some saved times only, the last kept one)."""
    seg = getattr(sol, "segments", [sol])[-1]
    k = max((j for j, d in enumerate(seg.data) if d is not None), default=len(seg.data) - 1)
    data = seg.data[k]
    return seg.representation, (np.asarray(data) if data is not None else None), float(seg.t[k])


def density_extremes(rep, data):
    """(min ρ, max ρ, where): on the representation's grid (`to_grid`), and at the nodes where the
    density is known exactly there (P1 vertices, Lagrangian nodes)."""
    if hasattr(rep, "marginal_density"):
        return _zonal_extremes(rep, data)
    values = [np.asarray(rep.to_grid(data).values, dtype=float).ravel()]
    where = "on the grid of to_grid"
    if hasattr(rep, "node_density"):
        values.append(np.asarray(rep.node_density(data), dtype=float).ravel())     # (M, n) when layered
        where += " and at the moving nodes"
    if rep.on_mesh:
        where = "at the mesh vertices (exact for a P1 field)"
    v = np.concatenate(values)
    return float(np.min(v)), float(np.max(v)), where


LAW_FLOOR = 1e-8       # zonal densities: ρ is reported where the law of s exceeds this fraction of its maximum


def _zonal_extremes(rep, data):
    """(min ρ, max ρ, where) of a zonal density where its values carry mass: where the law of
    s = ⟨x, e⟩ exceeds `LAW_FLOOR` times its maximum, inside the reliable interval |s| <= s*. Elsewhere
    ρ multiplies a law below that floor, and in high dimension its values there are rounding noise of
    the series (they can be negative or huge): the text says so, with the range seen there."""
    grid = rep.to_grid(data, 4001)
    s, rho = np.asarray(grid["s"].values, dtype=float), np.asarray(grid.values, dtype=float)
    law = np.asarray(rep.marginal_density(data, s), dtype=float)
    top = float(np.nanmax(np.abs(law)))
    carries = np.abs(law) >= LAW_FLOOR * top
    inside = rho[carries]
    where = (f"where the law of s = <x, e> carries mass, s in [{s[carries].min():.3g}, {s[carries].max():.3g}] "
             f"(law >= {LAW_FLOOR:g} of its maximum)")
    outside = rho[~carries]
    if outside.size:
        where += (f"; outside it, on the reliable interval |s| <= {s.max():.3g}, ρ is in [{outside.min():.4g}, "
                  f"{outside.max():.4g}] against a law below {LAW_FLOOR:g} of its maximum: rounding noise of the "
                  "series, no mass")
    return float(inside.min()), float(inside.max()), where


def _measure(sol, rep, data, n=None):
    if rep.is_density:
        return rep.measure(data, n=n) if n is not None else rep.measure(data)
    x = np.asarray(data)
    return (x[0] if x.ndim == 3 else x), rep.weights


def _w1(sol, rep, data, measure):
    """W1 to the uniform measure and to the nearest Dirac mass, with how each was computed."""

    d = rep.dim
    diag = {k: np.asarray(v) for k, v in sol.diagnostics.items()}
    out = {}
    last = {k: float(np.ravel(v[-1])[0]) for k, v in diag.items() if k in ("w1_to_uniform", "w1_to_dirac")
            and v.shape[:1] == sol.t.shape and np.isfinite(np.ravel(v[-1])[0])}
    if "w1_to_uniform" in last:
        out["w1_to_uniform"] = {"value": last["w1_to_uniform"], "method": f"the solver's diagnostic ({sol.solver})"}
    elif d == 2:
        out["w1_to_uniform"] = {"value": float(w1_to_uniform(measure)),
                                "method": "exact on S^1 (cumulative distributions)"}
    elif d == 3:
        m, radius = _binned(measure, _S2_REFERENCE_POINTS)
        how = f"the {len(measure[1])} points binned to the nearest of {_S2_REFERENCE_POINTS} Fibonacci points (moves " \
              f"the mass by at most {radius:.2g} rad), " if radius else ""
        out["w1_to_uniform"] = {"value": float(w1_to_uniform(m, n_reference=_S2_REFERENCE_POINTS)),
                                "method": how + f"exact transport to a {_S2_REFERENCE_POINTS}-point Fibonacci rule of σ"}
    else:
        out["w1_to_uniform"] = {"value": None, "method": f"not computed: no quadrature of σ on S^{d - 1} for d > 3"}
    if "w1_to_dirac" in last:
        out["w1_to_dirac"] = {"value": last["w1_to_dirac"], "method": f"the solver's diagnostic ({sol.solver})"}
    elif hasattr(rep, "w1_to_dirac"):
        out["w1_to_dirac"] = {"value": float(rep.w1_to_dirac(data)[0]), "method": f"exact, from the {rep.name} state"}
    else:
        out["w1_to_dirac"] = {"value": float(w1_to_dirac(measure)),
                              "method": f"spherical median of {len(measure[1])} weighted points"}
    return out


def _binned(measure, m):
    """``measure`` on S^2 with more than ``m`` points: its weights summed at the nearest of the ``m``
    Fibonacci points; returns (measure, largest distance moved in radians, 0 when not binned)."""


    x, w = measure
    if len(w) <= m:
        return measure, 0.0
    centres = sphere_quadrature(m, 3)[0]
    dist, j = cKDTree(centres).query(x)
    keep = w > 0
    radius = float(2 * np.arcsin(min(1.0, np.max(dist[keep]) / 2))) if keep.any() else 0.0
    return (centres, np.bincount(j, weights=w, minlength=m)), radius


def _position(p):
    p = np.asarray(p, dtype=float)
    out = {"x": p.tolist()}
    if p.size == 2:
        out["theta"] = float(np.mod(np.arctan2(p[1], p[0]), 2 * np.pi))
    elif p.size == 3:
        out["lat"] = float(np.degrees(np.arcsin(np.clip(p[2], -1.0, 1.0))))
        out["lon"] = float(np.degrees(np.arctan2(p[1], p[0])))
    return out


def clusters_summary(measure, tolerances=CLUSTER_TOLERANCES):
    """The clusters of ``measure`` at the smallest linking distance of ``tolerances`` at which the
    mass is separated into clusters (`meanfield.observables.diagnostics.find_clusters`: 95% of the mass within
    the distance of its cluster's centre); else ``{"separated": False, "count": None}``: a
    near-uniform cloud is not counted as one cluster."""

    finder = getattr(diagnostics, "find_clusters", None)
    if finder is None:     # pragma: no cover - the detector lives in meanfield.observables.diagnostics
        return {"separated": False, "count": None, "reason": "no cluster detector in meanfield.observables.diagnostics"}
    n, d = np.shape(measure[0])
    if d > 3 and n * d > CLUSTER_BUDGET:
        return {"separated": False, "count": None,
                "reason": f"{n} points in dimension {d}, above the run report's budget of {CLUSTER_BUDGET:.0e} "
                          "coordinates; call meanfield.observables.diagnostics.find_clusters(sol.measure(i)) yourself"}
    best = None
    min_mass = min(1.0, max(0.01, 1.5 / len(measure[1])))      # a lone particle is not a cluster (unless n = 1)
    for tol in tolerances:
        c = finder(measure, tol, min_mass=min_mass)
        if c.separated:
            return {"separated": True, "count": int(c.count), "linking_distance": tol,
                    "criterion": f"at least 95% of the mass within {tol:g} rad of the centre of its cluster "
                                 f"(components of mass >= {min_mass:.3g}, meanfield.observables.diagnostics.find_clusters)",
                    "masses": [float(m) for m in c.masses], "positions": [_position(p) for p in c.positions],
                    "radius": [float(s) for s in c.spread]}
        best = c if best is None or c.clustered_mass > best.clustered_mass else best
    return {"separated": False, "count": None, "linking_distances": list(tolerances),
            "reason": f"not separated: at most {100 * best.clustered_mass:.1f}% of the mass lies within the "
                      "linking distance of its cluster's centre (95% needed)"}


def final_state(sol):
    """The physics of the last saved state of ``sol``, as plain numbers for ``summary.json``:
    time, min and max ρ (densities), E_β (3.5) with the uniform minimum a_0/2β and the Dirac
    maximum e^β/2β (Proposition 3.4) and its relative position between them, W1 to the uniform
    measure and to the nearest Dirac mass (docs/mathematics.md §8), and the clusters."""

    rep, data, t = _last(sol)
    model = sol.model
    out = {"t": t}
    if rep.is_density:
        low, high, where = density_extremes(rep, data)
        out["density"] = {"min": low, "max": high, "where": f"at the last saved time t = {t:g}, {where}"}
    else:
        out["density"] = {"min": None, "max": None, "where": "particles: no density"}
    e = np.asarray(sol.energy, dtype=float)
    e_last = float(np.nanmean(e[-1])) if e.ndim == 2 else float(e[-1])
    lo, hi = uniform_energy(model.beta, model.dim), dirac_energy(model.beta)
    out["energy"] = {"value": e_last, "uniform_minimum": lo, "dirac_maximum": hi,
                     "position": (e_last - lo) / (hi - lo) if hi > lo and np.isfinite(e_last) else None}
    if e.ndim == 2:
        out["energy"]["over"] = f"mean over {e.shape[1]} realisations"
    if getattr(rep, "domain", "sphere") != "sphere" or data is None:
        return out
    measure = _measure(sol, rep, data)
    if not rep.is_density and np.ndim(data) == 3:
        out["realisation"] = f"W1 and clusters of realisation 0 of {np.shape(data)[0]}"
    out.update(_w1(sol, rep, data, measure))
    out["clusters"] = clusters_summary(measure)
    return out


def fit_power_law(n, err):
    """Least-squares slope p of log err = c − p log n: returns (p, e^c) for err ≈ C n^{-p}."""
    n, err = np.asarray(n, dtype=float), np.asarray(err, dtype=float)
    ok = (err > 0) & np.isfinite(err)
    if ok.sum() < 2:
        return float("nan"), float("nan")
    slope, icpt = np.polyfit(np.log(n[ok]), np.log(err[ok]), 1)
    return float(-slope), float(np.exp(icpt))


def fit_exponential(t, y):
    """Least-squares rate r of log y = c − r t: returns (r, e^c) for y ≈ C e^{-rt}."""
    t, y = np.asarray(t, dtype=float), np.asarray(y, dtype=float)
    ok = (y > 0) & np.isfinite(y)
    if ok.sum() < 2:
        return float("nan"), float("nan")
    slope, icpt = np.polyfit(t[ok], np.log(y[ok]), 1)
    return float(-slope), float(np.exp(icpt))
