"""``meanfield run CONFIG.toml``: one simulation from a configuration file.

Writes ``<name>.nc`` (the `Solution`, readable with `meanfield.load` and xarray), ``<name>.png``
(its natural picture and the energy) and ``summary.json`` with the checks:

* the run finished (no under-resolution, no interruption);
* mass is conserved (PDE: |∫ρ dσ − 1| <= 1e-6; particles: the weights);
* without noise, E_β is monotone — non-decreasing when attractive (V = I, (3.6) and Lemma 3.7),
  non-increasing when repulsive (V = −I), up to a relative 1e-6 of the energy range.
"""
import numpy as np

from ..energy import dirac_energy, uniform_energy
from ..errors import Interrupted, SolverError
from ._report import Report, show_progress
from .config import RunConfig, load_config, parse_config


def _initial_particles(cfg):
    from ..sampling import sample

    opts = cfg.particle_options
    rho = cfg.density()
    return sample(rho, cfg.resolution, cfg.model.dim, rng=opts.get("seed", 0), method=opts.get("sampling", "iid"))


def simulate(cfg, *, solver=None, progress=None, checkpoint=None):
    """Run the configured solver; returns the `Solution` (raises `SolverError` subclasses with `.solution`)."""
    solver = cfg.make_solver() if solver is None else solver
    opts = dict(cfg.solve_options)
    if cfg.solver == "particles":
        x0, w = _initial_particles(cfg)
        scheme = opts.pop("scheme", "adaptive")
        kw = dict(weights=w, scheme=scheme, progress=progress, checkpoint=checkpoint,
                  rng=cfg.particle_options.get("seed", 0), **opts)
        return solver.solve(x0, cfg.t_eval, **kw)
    return solver.solve(cfg.density(), cfg.t_eval, progress=progress, checkpoint=checkpoint, **opts)


def run(config, out=None, *, quick=False, progress=None):
    """Validate ``config`` (a path to a TOML file, a dict, or a `RunConfig`), run it, write the results.

    Returns the `Report` (``report.passed``, ``report.results``, ``report.solution``).
    """
    if isinstance(config, RunConfig):
        cfg = config
    elif isinstance(config, dict):
        cfg = parse_config(config)
    else:
        cfg = load_config(config)
    if quick:
        cfg = cfg.quick()
    solver = cfg.make_solver()            # resolution and model checks, before any work
    report = Report("run", out, settings={"config": cfg.to_dict(), "quick": bool(quick)})
    report.write()
    name = cfg.name
    partial = report.path(f"{name}.partial.nc") if cfg.checkpoint else None
    progress = show_progress(progress)
    with report.guard():
        sol = None
        try:
            sol = simulate(cfg, solver=solver, progress=progress, checkpoint=partial)
            status, message = "finished", ""
        except Interrupted as exc:
            sol, status, message = exc.solution, "interrupted", str(exc)
        except SolverError as exc:
            sol, status, message = exc.solution, "stopped", f"{type(exc).__name__}: {exc}"
        report.solution = sol
        if sol is not None and len(sol.t):
            report.save_dataset(sol, f"{name}.nc")
            if partial is not None and partial.exists():
                partial.unlink()
            _check_solution(report, cfg, sol)
            if cfg.plot and report.out is not None:
                fig = sol.plot(times=cfg.plot_times)
                report.save_figure(fig, f"{name}.png")
        report.check("run finished", status == "finished", message or f"t = {cfg.t_eval[-1]:g} reached")
        if status == "interrupted":
            report.write(status="interrupted", message=message)
            raise KeyboardInterrupt(message)
        report.write(status=status, message=message)
    return report


def _check_solution(report, cfg, sol):
    e = np.asarray(sol.energy, dtype=float)
    mass = np.asarray(sol.mass, dtype=float)
    res = report.results
    res.update({"solver": sol.solver, "model": repr(cfg.model), "t_end": float(sol.t[-1]),
                "saved_times": int(sol.t.size), "energy_initial": float(np.ravel(e[0])[0]),
                "energy_final": float(np.ravel(e[-1])[0]), "mass_error": float(np.max(np.abs(mass - 1.0))),
                "stats": sol.stats})
    if "min_density" in sol.diagnostics:
        res["min_density"] = float(np.min(sol.diagnostics["min_density"]))
    report.note(f"{sol.solver}: {repr(cfg.model)}, {sol.t.size} saved times")
    report.note(f"E_β(t = {res['t_end']:g}) = {res['energy_final']:.10g}   (E_β(0) = {res['energy_initial']:.10g}; "
                f"uniform a_0/2β = {uniform_energy(cfg.model.beta, cfg.model.dim):.6g}, "
                f"Dirac e^β/2β = {dirac_energy(cfg.model.beta):.6g})")
    report.check("mass conserved", res["mass_error"] <= 1e-6, f"max |mass − 1| = {res['mass_error']:.2e}")
    if cfg.model.noise == 0 and e.ndim == 1 and e.size > 1:
        s = np.sign(cfg.model.v)
        scale = max(float(np.ptp(e)), 1e-300) + 1e-12 * float(np.max(np.abs(e)))
        worst = float(np.min(s * np.diff(e)) / scale)
        res["energy_monotonicity"] = worst
        report.check("energy monotone (3.6)" + (" increasing" if s > 0 else " decreasing"), worst >= -1e-6,
                     f"E_β from {e[0]:.6g} to {e[-1]:.6g}; worst relative step {worst:.1e}")
