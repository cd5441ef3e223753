"""``meanfield run CONFIG.toml``: one simulation from a configuration file.

Writes ``<name>.nc`` (the `Solution`, readable with `meanfield.load` and xarray, with the clusters
followed through time: ``cluster_count``, ``cluster_centre``, ``cluster_mass`` and ``cluster_width``
on the dims (time, cluster); with ``[output] grid = true`` also the cell means of the density on a
CF grid for other tools), ``<name>.png`` (its picture and the energy, a stop marked on the time axes)
and ``summary.json`` with the status ("finished", "stopped: <reason>", "interrupted"), the physics of
the final state (`_report.final_state`), the cluster trajectories with their merge events (time,
the merging masses, the mass after) in ``results["cluster_trajectories"]``, and the checks:

* the run finished (no under-resolution, no interruption);
* mass is conserved (PDE: |∫ρ dσ − 1| <= 1e-6; particles: the weights);
* without noise, E_β is monotone — non-decreasing when attractive (V = I, (3.6) and Lemma 3.7),
  non-increasing when repulsive (V = −I): the most negative step s·(E_β(t_{i+1}) − E_β(t_i)),
  relative to the range of E_β over the run, must be >= −1e-6.
"""
import pathlib

import numpy as np

from ..observables.energy import dirac_energy, uniform_energy
from ..errors import Interrupted, InvalidInput, SolverError
from .report import Report, final_state, show_progress
from .config import RunConfig, coerce, load_config, parse_config
from ..measures.sampling import sample
from ..results.solution import load


def _initial_particles(cfg):
    opts = cfg.particle_options
    rho = cfg.density()
    return sample(rho, cfg.resolution, cfg.model.dim, rng=opts.get("seed", 0), method=opts.get("sampling", "iid"))


def simulate(cfg, *, solver=None, progress=None, checkpoint=None, resume=None):
    """Run the configured solver; returns the `Solution` (raises `SolverError` subclasses with `.solution`).

    ``resume``: a `Solution` of this configuration ended at one of its saved times (a checkpoint); the
    run continues from it to the end time and the result carries the whole history."""
    solver = cfg.make_solver() if solver is None else solver
    opts = dict(cfg.solve_options, checkpoint_every=cfg.checkpoint_every)
    if resume is not None:
        t_rest = cfg.t_eval[cfg.t_eval > resume.t[-1]]
        if not t_rest.size:
            return resume
        if cfg.samples:                         # the weights and the noise seed travel with the Solution
            opts["rng"] = cfg.particle_options.get("seed", 0)
        opts.pop("normalize", None)
        return solver.solve(resume, np.concatenate([[resume.t[-1]], t_rest]), progress=progress,
                            checkpoint=checkpoint, history=True, **opts)
    if cfg.samples:
        x0, w = _initial_particles(cfg)
        return solver.solve(x0, cfg.t_eval, weights=w, progress=progress, checkpoint=checkpoint,
                            rng=cfg.particle_options.get("seed", 0), **opts)
    return solver.solve(cfg.density(), cfg.t_eval, progress=progress, checkpoint=checkpoint, **opts)


def run(config, out=None, *, quick=False, progress=None, resume=None, clusters=True, movie=None):
    """Validate ``config`` (a path to a TOML file, a dict, or a `RunConfig`), run it, write the results.

    ``clusters``: follow the clusters through the run (`Solution.cluster_trajectories`) into the file
    and ``summary.json``; False skips them (a sweep's cells keep only the Solution).

    ``resume``: the output directory of an interrupted run of this configuration; the run continues
    from its checkpoint (`checkpoint_of`) and writes the same outputs (to ``out``, default that directory).
    ``movie``: None, "gif" or "mp4": also write ``<name>.gif`` / ``<name>.mp4`` (`Solution.animate`).
    Returns the `Report` (``report.passed``, ``report.results``, ``report.solution``).
    """
    cfg = coerce(config, RunConfig, parse_config, load_config)
    out = cfg.out_dir if out is None else out
    if movie not in (None, "gif", "mp4"):
        raise InvalidInput(f"`movie` must be None, 'gif' or 'mp4', got {movie!r}.")
    progress = cfg.progress if progress is None else progress
    if quick or cfg.quick_run:
        cfg = cfg.quick()
    solver = cfg.make_solver()            # resolution and model checks, before any work
    if resume is not None:
        out = resume if out is None else out
        resume = checkpoint_of(cfg, resume)
    report = Report("run", out, settings={"config": cfg.to_dict(), "quick": bool(quick or cfg.quick_run)})
    report.write()
    name = cfg.name
    partial = report.path(f"{name}.partial.nc") if cfg.checkpoint else None
    progress = show_progress(progress)
    if resume is not None:
        report.note(f"resumed from t = {float(resume.t[-1]):g} ({resume.t.size} saved times in the checkpoint)")
    with report.guard():
        sol = None
        try:
            try:
                sol = simulate(cfg, solver=solver, progress=progress, checkpoint=partial, resume=resume)
            except InvalidInput as exc:     # refused initial data: in the configuration's words
                raise InvalidInput(str(exc).replace("`rho0`", "`initial`").replace(
                    "Pass normalize=True", "Set `initial.normalize = true`")) from None
            status, message = "finished", ""
        except Interrupted as exc:
            sol, status = exc.solution, "interrupted"
            message = (f"{sol.solver if sol is not None else type(solver).__name__} interrupted (Ctrl-C) at t = "
                       f"{float(sol.t[-1]) if sol is not None and len(sol.t) else float(cfg.t_eval[0]):g}")
        except SolverError as exc:
            sol, status, message = exc.solution, "stopped", f"{type(exc).__name__}: {exc}"
        report.solution = sol
        if sol is not None and len(sol.t):
            traj = _cluster_trajectories(report, sol) if clusters else None
            report.save_dataset(sol, f"{name}.nc", grid=cfg.grid, clusters=traj)
            if partial is not None and partial.exists():
                partial.unlink()
            for stale in () if partial is None else partial.parent.glob(f"{partial.name}.*.tmp"):
                stale.unlink()                    # a checkpoint being written when a run was killed
            _check_solution(report, cfg, sol)
            if cfg.plot and report.out is not None:
                fig = sol.plot(times=cfg.plot_times, scale=cfg.scale, t_end=float(cfg.t_eval[-1]))
                report.save_figure(fig, f"{name}.png")
            if movie is not None and report.out is not None:
                made = sol.animate(report.path(f"{name}.{movie}"), progress=progress)
                report.note(f"movie: {made['path']} ({made['frames']} frames, {made['writer']})")
        t_last = float(sol.t[-1]) if sol is not None and len(sol.t) else float(cfg.t_eval[0])
        report.check("run finished", status == "finished",
                     message or f"t = {cfg.t_eval[-1]:g} reached", compared=f"the last saved time "
                     f"({t_last:.12g}) with the requested end t = {float(cfg.t_eval[-1]):.12g}",
                     tolerance="reached, no solver error")
        if status == "interrupted":
            if sol is not None and len(sol.t) and report.out is not None:
                message += (f"; the saved times so far are in {report.path(f'{name}.nc')}; `meanfield run CONFIG "
                            f"--resume {report.out}` continues the run")
            report.write(status="interrupted", message=message)
            raise KeyboardInterrupt(message)
        report.write(status=status, message=message)
    return report


def _cluster_trajectories(report, sol):
    """The clusters followed through the run (`Solution.cluster_trajectories`), into the file and, with
    their merge events (time, masses), into ``summary.json`` (``results["cluster_trajectories"]``)."""
    traj = sol.cluster_trajectories()
    if traj is None:
        return None
    count = traj["count"]
    ok = np.isfinite(count)
    report.results["cluster_trajectories"] = {
        "count": [None if not np.isfinite(c) else int(c) for c in count],
        "t_separated": float(sol.t[ok][0]) if ok.any() else None,
        "max_count": int(np.nanmax(count)) if ok.any() else None,
        "merges": traj["merges"],
        "variables": "cluster_count, cluster_centre, cluster_mass, cluster_width in the NetCDF file"}
    if ok.any():
        report.note(f"cluster trajectories: separated from t = {sol.t[ok][0]:g}, at most {int(np.nanmax(count))} "
                    f"clusters, {len(traj['merges'])} merge(s)"
                    + "".join(f"; t = {m['t']:g}: masses {' + '.join(f'{x:.3g}' for x in m['masses'])} → {m['mass']:.3g}"
                              for m in traj["merges"][:5]))
    return traj


def checkpoint_of(cfg, directory):
    """The `Solution` an interrupted ``meanfield run`` of ``cfg`` left in ``directory``: its checkpoint
    ``<name>.partial.nc`` or, after Ctrl-C or a solver stop, ``<name>.nc``. ValueError naming `--resume`
    when there is none, or when it is a run of another model or other saved times."""


    d = pathlib.Path(directory)
    paths = [p for p in (d / f"{cfg.name}.partial.nc", d / f"{cfg.name}.nc") if p.is_file()]
    if not paths:
        raise InvalidInput(f"`--resume`: {str(d)!r} holds no checkpoint of this configuration ({cfg.name}.partial.nc "
                         f"or {cfg.name}.nc).")
    try:
        sol = load(paths[0])
    except ValueError as exc:
        raise InvalidInput(f"`--resume`: {exc}") from None
    if sol.model.to_dict() != cfg.model.to_dict():
        raise InvalidInput(f"`--resume`: {str(paths[0])!r} is a run of {sol.model!r}; the configuration asks for "
                         f"{cfg.model!r}.")
    n = sol.t.size
    if n > cfg.t_eval.size or not np.allclose(sol.t, cfg.t_eval[:n], rtol=1e-12, atol=0):
        raise InvalidInput(f"`--resume`: the saved times of {str(paths[0])!r} (up to t = {sol.t[-1]:g}) are not the "
                         "configuration's first saved times.")
    return sol


def _solver_class(name):
    """The solver class of this name, found where it is defined (`solvers`: its forms too), or None."""
    import solvers

    return getattr(solvers, name, None)


def _mass_by_construction(sol):
    """The run's solver holds the mass as a constant of its state, so a mass check could not fail
    (`solvers.Solver.mass_by_construction`). A run in several segments (a hand-over) is checked: the
    labels' weights are a quadrature of the density handed over, not its mass to the bit."""
    return "+" not in sol.solver and getattr(_solver_class(sol.solver), "mass_by_construction", False)


def _check_solution(report, cfg, sol):
    e = np.asarray(sol.energy, dtype=float)
    mass = np.asarray(sol.mass, dtype=float)
    res = report.results
    res.update({"solver": sol.solver, "model": repr(cfg.model), "t_end": float(sol.t[-1]),
                "t_requested": float(cfg.t_eval[-1]), "saved_times": int(sol.t.size),
                "energy_initial": float(np.ravel(e[0])[0]), "energy_final": float(np.ravel(e[-1])[0]),
                "mass_error": float(np.max(np.abs(mass - 1.0))),
                "stats": {k: v for k, v in sol.stats.items() if not isinstance(v, np.ndarray)}})    # not the inputs
    if "min_density" in sol.diagnostics:      # not final_state.density.min: other times, other points
        res["min_density_over_run"] = {
            "value": float(np.min(sol.diagnostics["min_density"])),
            "where": f"minimum over the {sol.t.size} saved times of the solver's diagnostic `min_density`, "
                     f"at {sol.solver}'s own nodes (its quadrature or dealiasing grid, moving nodes or mesh "
                     "vertices); final_state.density.min is the last saved time on the grid of to_grid"}
    report.note(f"{sol.solver}: {repr(cfg.model)}, {sol.t.size} saved times")
    if "handover_t" in sol.stats:
        report.note(f"handed over to the characteristics (solvers.Lagrangian) at t = {sol.stats['handover_t']:.4g}, "
                    f"when the spectral tail exceeded its tolerance")
    report.note(f"E_β(t = {res['t_end']:g}) = {res['energy_final']:.10g}   (E_β(0) = {res['energy_initial']:.10g}; "
                f"uniform a_0/2β = {uniform_energy(cfg.model.beta, cfg.model.dim):.6g}, "
                f"Dirac e^β/2β = {dirac_energy(cfg.model.beta):.6g})")
    res["final_state"] = final_state(sol)
    fs = res["final_state"]
    if fs["density"]["max"] is not None:
        report.note(f"ρ(t = {fs['t']:g}) in [{fs['density']['min']:.4g}, {fs['density']['max']:.4g}] "
                    f"({fs['density']['where']})")
    cl = fs.get("clusters")
    if cl is not None:
        report.note(f"clusters: {cl['count']} with masses {', '.join(f'{m:.3g}' for m in cl['masses'])}"
                    if cl["separated"] else "clusters: none counted (" + cl["reason"] + ")")
    what = "the total weight" if not sol.representation.is_density else "∫ρ dσ"
    if _mass_by_construction(sol):
        report.note(f"mass {what} = 1 within {res['mass_error']:.1e}: a constant of {sol.solver}'s discretisation")
    else:
        report.check("mass conserved", res["mass_error"] <= 1e-6, f"max |mass − 1| = {res['mass_error']:.2e}",
                     compared=f"max over the saved times of |{what} − 1|", tolerance="<= 1e-6")
    # a gradient flow of E_β: softmax attention, no noise, no feed-forward term, one β throughout (no schedule)
    if (cfg.model.noise == 0 and cfg.model.mlp is None and cfg.model.schedule is None and e.ndim == 1 and e.size > 1
            and cfg.model.attention == "softmax"):
        s = np.sign(cfg.model.v)
        scale = max(float(np.ptp(e)), 1e-300) + 1e-12 * float(np.max(np.abs(e)))
        worst = float(np.min(s * np.diff(e)) / scale)
        res["energy_monotonicity"] = worst
        report.check("energy monotone (3.6)" + (" increasing" if s > 0 else " decreasing"), worst >= -1e-6,
                     f"E_β from {e[0]:.6g} to {e[-1]:.6g}; most negative step of "
                     f"{'' if s > 0 else '−'}E_β between saved times, relative to the range of E_β: {worst:.1e}",
                     compared="min over consecutive saved times of " + ("" if s > 0 else "−")
                     + "(E_β(t_{i+1}) − E_β(t_i)), divided by max E_β − min E_β", tolerance=">= −1e-6")
