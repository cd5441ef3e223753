"""Pictures of solutions in one style: the state of the run beside the energy E_β(t).

Every picture carries the model and the resolution in its title (`figures.run_title`), marks a run
that stopped early on its time axes with the reason (`figures.mark_stop`), and offers three colour
scales for densities (`figures.colour_scale`): ``"linear"`` in ρ, ``"log"`` in ρ, and ``"perturbation"``, ρ − 1 on a
symmetric logarithmic scale, which shows the linear stage (ρ − 1 of size 1e-2, docs/mathematics.md
§5) and the clusters in one picture. Densities are relative to the uniform probability measure σ
(docs/mathematics.md §2), so the uniform state is ρ = 1.

The panels:

* S^1 (and zonal densities in any d): a space–time map, θ (or s = ⟨x, e⟩) against t;
* S^2: large Mollweide maps at a few saved times with one shared colour bar;
* the densities drawn on S^1 and S^2 are cell means μ(cell)/σ(cell) (`cell_rows`), so that a cluster
  narrower than a pixel keeps its mass and is drawn;
* particles: angles against t (S^1), trajectories (S^2), or the pairwise inner products
  ⟨x_i(t), x_j(t)⟩, i < j, against t (d >= 4);
* the energy E_β(t) (3.5) with its reference values (`energy_references`: for β > 0 the uniform
  minimum a_0/2β and the Dirac maximum e^β/2β, Proposition 3.4; for β < 0 the uniform state is a
  saddle and the minimum is cosh β/2β) as lines when they are on the scale of the curve, as labelled
  arrows otherwise.
"""
import math

import numpy as np

from ..observables.diagnostics import follow_clusters
from ..observables.energy import dirac_energy, energy_bounds, uniform_energy
from ..errors import InvalidInput, NoCellMeans
from ..spaces.gridded import cell_grid_of
from ..representations.layered import principal_plane
from .figures import (WIDTH, check_scale, colour_scale, legend, mark_stop, pyplot, requested_end, run_title, save,
                      select_times, style, suptitle, time_limits)

MAX_MARKED = 12       # clusters marked with their mass on a picture; more would not be legible


# -- panels -----------------------------------------------------------------------------------------
def cell_rows(rep, data_all, n):
    """(grid, ρ̄ (T, grid shape)): the mean density μ(cell)/σ(cell) over each cell of ``cell_grid_of(dim, n)`` at every
    saved time (``cell_means``: a cluster narrower than a cell keeps its mass and is drawn), point
    values at the cells' centres for a representation without cell means."""
    grid = cell_grid_of(rep.dim, n)
    try:
        return grid, np.array([rep.cell_means(d, grid) for d in data_all], dtype=float)
    except NoCellMeans:
        if grid.dims == ("theta",):
            th = grid.centres["theta"]
            x = np.stack([np.cos(th), np.sin(th)], -1)
        else:
            la, lo = np.meshgrid(np.radians(grid.centres["lat"]), np.radians(grid.centres["lon"]), indexing="ij")
            x = np.stack([np.cos(la) * np.cos(lo), np.cos(la) * np.sin(lo), np.sin(la)], -1)
        return grid, np.array([rep.evaluate(d, x) for d in data_all], dtype=float)


def _circle_rows(sol, n=1024):
    """(θ cell centres (n,), ρ̄ (T, n)): the cell means (`cell_rows`) through every segment of the run."""
    rows = [cell_rows(seg.representation, seg.data, n) for seg in getattr(sol, "segments", [sol])]
    return rows[0][0].centres["theta"], np.concatenate([r[1] for r in rows])


def _segment_boundaries(sol):
    segs = getattr(sol, "segments", [sol])
    out = [(float(s.t[0]), s.solver or s.representation.name) for s in segs[1:] if s.t.size]
    handover = sol.stats.get("handover_t")
    if len(out) == 1 and handover is not None:      # the time the solver handed over, between saved times
        out = [(float(handover), out[0][1])]
    return out


def space_time_panel(ax, sol, scale="auto", t_end=None, fig=None):
    """ρ(θ, t) on S^1, or the law of s = ⟨x, e⟩ of a zonal density (Gegenbauer, any d), against t."""
    rep = sol.representation
    if rep.zonal:
        return _zonal_law_panel(ax, sol, scale, t_end, fig)
    x, rho = _circle_rows(sol, max(1024, 2 * getattr(rep, "modes", 0) + 2))
    ax.set_xlabel(r"$\theta$ (radians)")
    ax.set_xticks(np.pi * np.arange(5) / 2, ["0", "π/2", "π", "3π/2", "2π"])
    ax.set_xlim(0.0, 2 * np.pi)
    drawn, norm, cmap, label, ticks = colour_scale(rho, scale)
    ax.set_ylabel("t")
    ax.set_title("mean density over each cell of $S^1$, relative to σ")
    _time_mesh(ax, sol, x, drawn, norm, cmap, label, t_end, fig, ticks)
    last = sol.t.size - 1
    if mark_clusters(ax, sol, last, lambda c: np.stack([circle_angle(c), np.full(len(c), sol.t[last])], -1)).size:
        legend(ax, loc="lower right", fontsize="small")
    return ax


def _time_mesh(ax, sol, x, drawn, norm, cmap, label, t_end=None, fig=None, ticks=None):
    """The rows ``drawn`` (T, m) over ``x`` against the saved times of ``sol`` (one saved time: a band
    of height 1), with the colour bar, the hand-overs between segments, the time limits and the stop mark."""
    t = np.asarray(sol.t, dtype=float)
    if t.size == 1:
        t = np.array([t[0] - 0.5, t[0] + 0.5])
        drawn = np.repeat(drawn, 2, axis=0)
    mesh = ax.pcolormesh(x, t, drawn, shading="nearest", norm=norm, cmap=cmap, rasterized=True)
    (fig or ax.figure).colorbar(mesh, ax=ax, label=label, pad=0.02, ticks=ticks)
    for tb, name in _segment_boundaries(sol):
        ax.axhline(tb, color="w", ls=":", lw=1.2)
        ax.annotate(f"hand-over to {name}", xy=(0.98, tb), xycoords=("axes fraction", "data"), xytext=(0, 2),
                    textcoords="offset points", ha="right", va="bottom", color="w", fontsize="small")
    ax.set_ylim(*time_limits(sol))
    mark_stop(ax, sol, t_end, axis="y")
    return ax


def _zonal_law_panel(ax, sol, scale="auto", t_end=None, fig=None):
    """The law of s = ⟨x, e⟩ against t for a zonal density (any d): what a reader can compare with a
    histogram of ⟨x_i, e⟩ over particles (docs/gegenbauer.md)."""
    from matplotlib.colors import LogNorm, Normalize  # deferred: matplotlib is heavy

    rep = sol.representation
    s, law = rep.space_time(sol.data)
    top = float(np.nanmax(law)) if np.isfinite(law).any() else 1.0
    if check_scale(scale) == "log":
        drawn, norm, label = np.clip(law, top * 1e-6, None), LogNorm(vmin=top * 1e-6, vmax=top), \
            r"law of $s$ (density in $s$, log scale)"
    else:
        drawn, norm, label = np.clip(law, 0.0, None), Normalize(vmin=0.0, vmax=top), r"law of $s$ (density in $s$)"
    ax.set_xlabel(r"$s = \langle x, e\rangle$ ($e$ the axis of the zonal density)")
    ax.set_ylabel("$t$")
    ax.set_title(f"law of $s$ for a zonal density on $S^{{{rep.dim - 1}}}$")
    return _time_mesh(ax, sol, s, drawn, norm, "magma", label, t_end, fig)


def cluster_marks(sol, i):
    """(masses (k,), centres (k, d)) of the clusters at saved index ``i``, heaviest first: the cluster
    tracking of `meanfield.observables.diagnostics.follow_clusters` at that time (masses as fractions of the
    total). Empty when the state is not separated into clusters or has more than MAX_MARKED."""
    traj = follow_clusters(sol[i])
    none = np.empty(0), np.empty((0, sol.model.dim))
    if traj is None:
        return none
    mass, centre = traj["mass"][0], traj["centre"][0]
    keep = np.isfinite(mass)
    if not 0 < keep.sum() <= MAX_MARKED:
        return none
    order = np.argsort(-mass[keep], kind="stable")
    return mass[keep][order], centre[keep][order]


def mark_clusters(ax, sol, i, place, colour="w"):
    """Mark the clusters of saved index ``i`` (`cluster_marks`) on ``ax``: a triangle at each and its
    mass ("0.333") beside it. ``place(centres)`` gives their coordinates on ``ax`` ((k, 2), or (k, 3)
    on a 3-D axes). Returns the masses marked (in the order of the labels drawn)."""
    from matplotlib import patheffects  # deferred: matplotlib is heavy

    masses, centres = cluster_marks(sol, i)
    if not masses.size:
        return masses
    xy = np.asarray(place(centres), dtype=float)
    outline = "k" if colour == "w" else "w"
    halo = [patheffects.withStroke(linewidth=2.0, foreground=outline)]
    label = f"clusters at t = {float(sol.t[i]):.4g}, with their mass"
    # the labels of clusters closer than 0.2 rad to a heavier one go one line further down
    near = np.triu(centres @ centres.T > np.cos(0.2), 1).sum(axis=0)
    if xy.shape[1] == 3:
        ax.scatter(*xy.T, marker="v", s=40, c=colour, edgecolors=outline, depthshade=False, label=label)
        for m, p, k in zip(masses, xy, near):      # a white box over the trajectories, drawn last
            ax.text(*(1.15 * p - [0.0, 0.0, 0.3 * k]), f"{m:.3g}", color="k", fontsize="small", ha="center",
                    zorder=10, bbox=dict(facecolor="white", edgecolor=colour, alpha=0.9, pad=1.5))
        return masses
    ax.plot(*xy.T, ls="none", marker="v", ms=7, color=colour, mec=outline, label=label, clip_on=False)
    low, high = ax.get_xlim()
    for m, p, k in zip(masses, xy, near):
        side = (p[0] - low) / (high - low)             # a label at an edge of the panel reads inwards
        ha = "left" if side < 0.04 else "right" if side > 0.96 else "center"
        ax.annotate(f"{m:.3g}", p, xytext=(0, -9 - 10 * k), textcoords="offset points", ha=ha, va="top",
                    color=colour, fontsize="small", path_effects=halo)
    return masses


def circle_angle(x):
    """θ ∈ [0, 2π) of points x (..., 2) of S^1."""
    return np.mod(np.arctan2(x[..., 1], x[..., 0]), 2 * np.pi)


def sphere_maps(fig, specs, cbar_spec, sol, idx, scale="auto", nlat=90):
    """Mollweide maps of the cell means ρ̄ (`cell_rows`, ``nlat`` latitude bands × 2·nlat longitudes)
    at the saved indices ``idx`` (one per SubplotSpec in ``specs``), one colour scale for all, the
    colour bar in ``cbar_spec``. Longitude −180° to 180° left to right, north up."""
    grid, values = cell_rows(sol.representation, [sol.data[i] for i in idx], nlat)
    half = grid.shape[1] // 2                        # cells from 180° east on: drawn at −180° to 0°
    values = np.roll(values, half, axis=-1)
    lat = np.radians(np.append(grid.bounds["lat"][:, 0], grid.bounds["lat"][-1, 1]))
    lon = np.linspace(-np.pi, np.pi, grid.shape[1] + 1)
    drawn, norm, cmap, label, ticks = colour_scale(values, scale)
    axes = []
    for spec, i, r in zip(specs, idx, drawn):
        ax = fig.add_subplot(spec, projection="mollweide")
        mesh = ax.pcolormesh(lon, lat, r, shading="flat", norm=norm, cmap=cmap, rasterized=True)
        ax.set_xticklabels([])
        ax.set_yticklabels([])
        ax.grid(True, lw=0.3, alpha=0.5)
        ax.set_title(f"t = {float(sol.t[i]):.3g}")
        mark_clusters(ax, sol, i, lambda c: np.stack([np.arctan2(c[:, 1], c[:, 0]),
                                                      np.arcsin(np.clip(c[:, 2], -1.0, 1.0))], -1))
        axes.append(ax)
    cax = fig.add_subplot(cbar_spec)
    fig.colorbar(mesh, cax=cax, orientation="horizontal", label=label + r" on $S^2$, relative to σ", ticks=ticks)
    return axes


def position_maps(fig, specs, cbar_spec, sol, idx, scale="auto"):
    """ρ over (angle, token position σ) of a layered (causal) run at the saved indices ``idx``
    (`meanfield.representations.layered.LayeredDensity.position_map`: θ on S^1; on S^2 the angle α along
    the great circle of the principal plane (e_1, e_2) of the joint measure at the last index shown, one
    plane for all panels), one colour scale for all, the colour bar in ``cbar_spec``."""
    rep = sol.representation
    plane = None
    if rep.dim == 3:
        plane = principal_plane(sol.measure(int(idx[-1])))
    maps = [rep.position_map(sol.data[i], plane=plane) for i in idx]
    drawn, norm, cmap, label, ticks = colour_scale(np.array([m[2] for m in maps]), scale)
    angle = r"$\theta$"
    if rep.dim == 3:
        angle = r"$\alpha$ on the great circle of $(e_1, e_2)$"
        label += (r"; $x = \cos\alpha\, e_1 + \sin\alpha\, e_2$ in the principal plane of the density, "
                  f"e₁ = {_vector(plane[0])}, e₂ = {_vector(plane[1])}")
    axes = []
    for spec, i, (sigma, theta, _), r in zip(specs, idx, maps, drawn):
        ax = fig.add_subplot(spec)
        mesh = ax.pcolormesh(theta, sigma, r, shading="nearest", norm=norm, cmap=cmap, rasterized=True)
        ax.set_xlabel(angle)
        ax.set_ylabel(r"token position $\sigma$")
        ax.set_title(f"t = {float(sol.t[i]):.3g}")
        axes.append(ax)
    fig.colorbar(mesh, cax=fig.add_subplot(cbar_spec), orientation="horizontal", label=label, ticks=ticks)
    return axes


def _vector(e):
    """A unit vector as "(0.71, -0.71, 0)" (two decimals, 0 for |e_k| < 0.005)."""
    return "(" + ", ".join(f"{v:.2f}" if abs(v) >= 0.005 else "0" for v in e) + ")"


def particle_panel(fig, spec, sol, t_end=None, max_lines=200):
    """Particles: angles θ_i(t) on S^1; trajectories on S^2; ⟨x_i(t), x_j(t)⟩ (i < j) in d >= 4."""
    t = np.asarray(sol.t, dtype=float)
    which = ""
    kept = [k for k, xk in enumerate(sol.data) if xk is not None]      # a run may keep some saved times only
    if not kept:
        ax = fig.add_subplot(spec)
        ax.text(0.5, 0.5, "no positions kept (solve with save='positions')", ha="center", transform=ax.transAxes)
        ax.set_axis_off()
        return ax
    if len(kept) < t.size:
        which = f", positions kept at {len(kept)} of {t.size} saved times"
    x, t = np.stack([np.asarray(sol.data[k]) for k in kept]), t[kept]
    if x.ndim == 4:
        which = f" (realisation 1 of {x.shape[1]}{which})"
        x = x[:, 0]
    elif which:
        which = f" ({which[2:]})"
    d = x.shape[-1]
    if d == 3:
        return _trajectories_on_s2(fig, spec, sol, x, t, kept, which, max_lines)
    if d == 2:
        return _angles_on_s1(fig, spec, sol, x, t, kept, which, t_end)
    return _gram_entries(fig.add_subplot(spec), sol, x, t, which, t_end)


def _trajectories_on_s2(fig, spec, sol, x, t, kept, which, max_lines):
    """The trajectories x_i(t) of at most ``max_lines`` particles (T, n, 3) on a wireframe S^2, the final
    positions and the clusters of the last kept time ``kept[-1]``; the legend below the panels."""
    n = x.shape[1]
    ax = fig.add_subplot(spec, projection="3d")
    u, v = np.mgrid[0:2 * np.pi:40j, 0:np.pi:20j]
    ax.plot_wireframe(np.cos(u) * np.sin(v), np.sin(u) * np.sin(v), np.cos(v), color="0.85", lw=0.3)
    shown = np.linspace(0, n - 1, min(n, max_lines)).round().astype(int)
    for k, j in enumerate(shown):
        ax.plot(x[:, j, 0], x[:, j, 1], x[:, j, 2], lw=0.6, alpha=0.6, color=f"C{k % 10}",
                label=f"trajectories x_i(t) of {shown.size} of the {n} particles" if k == 0 else None)
    ax.scatter(x[-1, :, 0], x[-1, :, 1], x[-1, :, 2], s=6, c="k", depthshade=False,
               label=f"positions at t = {t[-1]:.4g} (all {n})")
    mark_clusters(ax, sol, kept[-1], lambda c: c, colour="C3")
    ax.set_box_aspect((1, 1, 1))
    for set_ticks in (ax.set_xticks, ax.set_yticks, ax.set_zticks):
        set_ticks([-1, 0, 1])
    ax.set_xlabel("$x_1$")
    ax.set_ylabel("$x_2$")
    ax.set_zlabel("$x_3$")
    ax.set_title(f"particles on $S^2${which}")
    fig.legend(*ax.get_legend_handles_labels(), loc="outside lower left", fontsize="small", frameon=False,
               ncol=2)       # below the panels, off the sphere (room kept by the constrained layout)
    return ax


def _angles_on_s1(fig, spec, sol, x, t, kept, which, t_end):
    """The angles θ_i(t) of the particles (T, n, 2) against t, the clusters of the last kept time."""
    n = x.shape[1]
    ax = fig.add_subplot(spec)
    theta = circle_angle(x)
    ax.plot(theta.ravel(), np.repeat(t, n), ".", ms=1.5, color="k", label=f"angles θ_i(t) of the {n} particles")
    mark_clusters(ax, sol, kept[-1], lambda c: np.stack([circle_angle(c), np.full(len(c), t[-1])], -1),
                  colour="C3")
    ax.set_xlabel(r"$\theta$ (radians)")
    ax.set_xticks(np.pi * np.arange(5) / 2, ["0", "π/2", "π", "3π/2", "2π"])
    ax.set_xlim(0.0, 2 * np.pi)
    ax.set_ylabel("t")
    ax.set_ylim(*time_limits(sol))
    ax.set_title(f"particles on $S^1${which}")
    mark_stop(ax, sol, t_end, axis="y")
    # below the panel, off the θ axis, each marker at its own size but the particles' dots (ms 1.5)
    from matplotlib.transforms import offset_copy  # deferred: matplotlib is heavy

    below = offset_copy(ax.transAxes, fig=ax.figure, y=-30, units="points")       # under the θ label
    leg = ax.legend(loc="upper center", bbox_to_anchor=(0.5, 0.0), bbox_transform=below, fontsize="small",
                    frameon=False)
    for handle in leg.legend_handles:
        if getattr(handle, "get_marker", lambda: None)() == ".":
            handle.set_markersize(6)
    return ax


def _gram_entries(ax, sol, x, t, which, t_end):
    """The Gram entries ⟨x_i(t), x_j(t)⟩, i < j, of the particles (T, n, d), d >= 4 (the diagonal
    ⟨x_i, x_i⟩ = 1 is not drawn): 40 pairs, their 10%–90% band, median and mean."""
    n, d = x.shape[1:]
    sub = x[:, :min(n, 400)]
    iu = np.triu_indices(sub.shape[1], 1)
    g = np.einsum("tid,tjd->tij", sub, sub)[:, iu[0], iu[1]]
    pairs = n * (n - 1) // 2
    pick = np.linspace(0, g.shape[1] - 1, min(g.shape[1], 40)).round().astype(int)
    for k, p in enumerate(pick):
        ax.plot(t, g[:, p], color="0.6", lw=0.5, alpha=0.7,
                label=f"⟨x_i, x_j⟩ for {pick.size} of the {pairs} pairs i < j" if k == 0 else None)
    q10, q50, q90 = np.quantile(g, [0.1, 0.5, 0.9], axis=1)
    ax.fill_between(t, q10, q90, color="C0", alpha=0.2, label="10%–90% of the pairs")
    ax.plot(t, q50, color="C0", lw=2, label="median over the pairs")
    ax.plot(t, g.mean(axis=1), color="C1", lw=1.5, ls="--", label="mean over the pairs")
    ax.set_ylim(-1.05, 1.05)
    ax.set_xlabel("t")
    ax.set_ylabel(r"$\langle x_i(t), x_j(t)\rangle$, $i < j$")
    ax.set_xlim(*time_limits(sol))
    ax.set_title(f"pairwise inner products of {n} particles in $S^{{{d - 1}}}${which}")
    mark_stop(ax, sol, t_end, axis="x")
    ax.legend(loc="lower right", fontsize="small")
    return ax


def plot_energy(sol, ax, t_end=None):
    """E_β(t) (3.5) with the reference energies of `energy_references` (β > 0: the uniform minimum
    a_0/2β and the Dirac maximum e^β/2β, Proposition 3.4; β < 0: also the antipodal minimum cosh β/2β):
    lines when within three times the curve's range of it, labelled arrows at the edge otherwise."""

    e = np.asarray(sol.energy, dtype=float)
    t = np.asarray(sol.t, dtype=float)
    ax.set_xlabel("t")
    ax.set_ylabel(r"$E_\beta$")
    ax.set_title(r"interaction energy $E_\beta$ (3.5)")
    if not np.isfinite(e).any():
        ax.text(0.5, 0.5, "E_β is defined on the sphere only", transform=ax.transAxes, ha="center")
        return ax
    if e.ndim == 2:
        for b in range(e.shape[1]):
            ax.plot(t, e[:, b], "-", lw=0.6, color="C0", alpha=0.4,
                    label=f"$E_\\beta(t)$ of each of {e.shape[1]} realisations" if b == 0 else None)
        ax.plot(t, np.nanmean(e, axis=1), "-", lw=1.8, color="C0", label="mean over the realisations")
    else:
        ax.plot(t, e, "-", lw=1.8, color="C0", marker="." if t.size <= 30 else None, label=r"$E_\beta(t)$")
    low, high = float(np.nanmin(e)), float(np.nanmax(e))
    mean = np.nanmean(e, axis=1) if e.ndim == 2 else e
    rising = bool(mean[-1] >= mean[0])      # legend and off-scale arrows go where the curve is not
    span = max(high - low, 1e-9 * max(abs(high), 1.0))
    bounds = energy_references(sol.model.beta, sol.model.dim)
    for value, colour, ls, name in bounds:
        if low - 3 * span <= value <= high + 3 * span:
            ax.axhline(value, color=colour, ls=ls, lw=1.3, label=f"{name} = {value:.6g}")
        else:       # off scale: an arrow on the edge it lies beyond, named in the legend
            above = value > high
            ax.plot([0.015 if rising else 0.985], [0.97 if above else 0.03], marker="$\\uparrow$" if above else "$\\downarrow$",
                    ms=12, color=colour, ls="none", transform=ax.transAxes, clip_on=False,
                    label=f"{name} = {value:.6g} ({'above' if above else 'below'}, off scale)")
    ax.set_xlim(*time_limits(sol))
    mark_stop(ax, sol, t_end, axis="x")
    from matplotlib.transforms import offset_copy  # deferred: matplotlib is heavy

    below = offset_copy(ax.transAxes, fig=ax.figure, y=-30, units="points")   # under the t label
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, 0.0), bbox_transform=below, ncol=2, fontsize="small",
              frameon=False)
    return ax


def energy_references(beta, dim):
    """[(value, colour, line style, name)] of the reference energies drawn beside E_β(t)
    (docs/mathematics.md §4, docs/negative-beta.md): β > 0, the uniform minimum a_0/2β and the Dirac
    maximum e^β/2β (Proposition 3.4); β < 0, the uniform state a_0/2β (a saddle there), the minimum
    cosh β/2β of a balanced antipodal pair and the Dirac maximum e^β/2β (`meanfield.observables.energy.energy_bounds`)."""
    if beta == 0:           # E_0 = ½‖∫x dμ‖²
        return [(0.0, "C2", "--", "uniform minimum"), (0.5, "C3", ":", "Dirac maximum")]
    dirac = (dirac_energy(beta), "C3", ":", "Dirac maximum $e^\\beta/2\\beta$")
    if beta > 0:
        return [(uniform_energy(beta, dim), "C2", "--", "uniform minimum $a_0/2\\beta$"), dirac]
    return [(uniform_energy(beta, dim), "C2", "--", "uniform state (a saddle) $a_0/2\\beta$"),
            (energy_bounds(beta, dim)[0], "C4", "-.", "antipodal minimum $\\cosh\\beta/2\\beta$"), dirac]


# -- the run picture --------------------------------------------------------------------------------
def picture_kind(sol):
    """"particles", "maps" (densities on S^2), "space-time" (S^1, zonal densities) or "positions"
    (densities layered in the token position)."""
    rep = sol.representation
    if not rep.is_density:
        return "particles"
    if rep.layered:                                     # a state per token position (causal runs)
        return "positions"
    if rep.zonal or rep.dim == 2:
        return "space-time"
    if rep.dim == 3:
        return "maps"
    raise InvalidInput(f"no picture for a density on S^{rep.dim - 1} in representation {rep.name!r}.")


def plot_solution(sol, times=None, path=None, show_energy=True, scale="auto", t_end=None):
    """Draw ``sol`` in the library's style: the state (space–time map on S^1 and for zonal densities,
    Mollweide maps on S^2, particles) beside E_β(t), under a title with the model and the resolution;
    a run that stopped early is marked on every time axis with its reason, and the times it did not
    reach (up to ``t_end``, default the requested end recorded by the solver) are hatched.

    ``times``: the saved times of the S^2 maps (None: first, middle, last; ints: indices; floats:
    the nearest saved times). ``scale``: "auto", "linear", "log" or "perturbation" (ρ − 1), see
    `colour_scale`. Returns the matplotlib Figure; writes it to ``path`` (PNG/PDF/SVG) when given.
    """
    scale = check_scale(scale)
    kind = picture_kind(sol)
    t_end = requested_end(sol, t_end)
    plt = pyplot()
    with style():
        if kind in ("maps", "positions"):
            idx = select_times(sol.t, times)
            ncol = min(len(idx), 3)
            nrow = math.ceil(len(idx) / ncol)
            map_h = WIDTH / ncol / (2 if kind == "maps" else 1.2) + 0.35
            heights = [map_h] * nrow + [0.18] + ([3.0] if show_energy else [])
            fig = plt.figure(figsize=(WIDTH, sum(heights) + 1.2), layout="constrained")
            gs = fig.add_gridspec(len(heights), ncol, height_ratios=heights)
            specs = [gs[k // ncol, k % ncol] for k in range(len(idx))]
            (sphere_maps if kind == "maps" else position_maps)(fig, specs, gs[nrow, :], sol, idx, scale)
            if show_energy:
                plot_energy(sol, fig.add_subplot(gs[nrow + 1, :]), t_end)
        else:
            fig = plt.figure(figsize=(WIDTH, 5.0), layout="constrained")
            gs = fig.add_gridspec(1, 2 if show_energy else 1, width_ratios=[1.2, 1] if show_energy else [1])
            if kind == "particles":
                particle_panel(fig, gs[0, 0], sol, t_end)
            else:
                space_time_panel(fig.add_subplot(gs[0, 0]), sol, scale, t_end, fig)
            if show_energy:
                plot_energy(sol, fig.add_subplot(gs[0, 1]), t_end)
        suptitle(fig, run_title(sol, t_end), stopped=sol.status != 0)
        if path is not None:
            save(fig, path)
    return fig
