"""What every experiment shares: an output directory, a list of checks and ``summary.json``.

A `Report` is written to disk as the experiment goes (figures and NetCDF files at once, the summary
after each part), so that an interrupted run (Ctrl-C) leaves its partial results behind.
"""
import contextlib
import json
import os
import pathlib
import sys
import time

import numpy as np

from ..solution import _jsonable


def pyplot():
    """matplotlib.pyplot with a non-interactive backend unless a display is configured."""
    import matplotlib

    if not (os.environ.get("DISPLAY") or os.environ.get("MPLBACKEND")):
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def show_progress(progress):
    """None means: a bar when stderr is a terminal (the solvers' convention)."""
    return sys.stderr.isatty() if progress is None else bool(progress)


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
    def check(self, name, passed, detail=""):
        """Record a named pass/fail check (the exit status is 0 only if all pass)."""
        self.checks.append({"name": name, "passed": bool(passed), "detail": str(detail)})
        return bool(passed)

    def note(self, text):
        """A line of the printed human summary (e.g. the final energy)."""
        self.notes.append(str(text))

    @property
    def passed(self):
        return self.status == "finished" and bool(self.checks) and all(c["passed"] for c in self.checks)

    def path(self, name):
        return None if self.out is None else self.out / name

    def save_figure(self, fig, name):
        plt = pyplot()
        if self.out is not None:
            fig.savefig(self.out / name, dpi=110)
            self.files.append(name)
        plt.close(fig)

    def save_dataset(self, ds, name):
        """Write an xarray Dataset (or a `Solution`) as NetCDF."""
        if self.out is None:
            return
        if hasattr(ds, "save") and hasattr(ds, "representation"):
            ds.save(self.out / name)
        else:
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
            tmp.write_text(json.dumps(summary, indent=2) + "\n")
            os.replace(tmp, self.out / "summary.json")
        return summary

    @contextlib.contextmanager
    def guard(self):
        """Ctrl-C (KeyboardInterrupt, or a solver's `Interrupted`) writes what exists, then re-raises.

        A solver's partial `Solution` is saved as ``interrupted.nc``; the summary gets status
        "interrupted". The exception leaves as KeyboardInterrupt (the CLI exits with status 130).
        """
        from ..errors import Interrupted

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

    def finish(self):
        return self.write(status="finished")

    def to_dict(self):
        return _jsonable(strict=True, obj={
            "experiment": self.experiment,
            "status": self.status,
            "message": self.message,
            "passed": self.passed,
            "checks": self.checks,
            "results": self.results,
            "settings": self.settings,
            "files": sorted(set(self.files)),
            "wall_time": time.perf_counter() - self._start,
        })

    # -- human summary --------------------------------------------------------------------------------
    def lines(self):
        out = [f"{self.experiment}: {self.status}" + (f" ({self.message})" if self.message else "")]
        out += [f"  {n}" for n in self.notes]
        for c in self.checks:
            detail = f": {c['detail']}" if c["detail"] else ""
            out.append(f"  [{'PASS' if c['passed'] else 'FAIL'}] {c['name']}{detail}")
        if self.out is not None:
            out.append(f"  files in {self.out}: {', '.join(sorted(set(self.files + ['summary.json'])))}")
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
