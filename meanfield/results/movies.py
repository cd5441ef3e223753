"""Movies of a run: animated GIF (Pillow) or MP4 (ffmpeg) of particles and densities on S^1 and S^2.

`animate` draws one frame per saved time (at most ``max_frames``, evenly chosen) with the same code
as `still`, which draws one frame: a frame of the movie is the still picture of its time.

* particles on S^1: the points on the circle, with short trails through the previous frames;
* particles on S^2: an orthographic globe, shaded, the near side bright and the far side faint,
  with trails;
* densities on S^1: ρ(θ) on a logarithmic axis (cell means of the measure, so a cluster narrower
  than a cell keeps its mass); on S^2: an orthographic globe coloured by the density on a lat-lon
  grid (cell means, or point values of a spectral state, which resolves no narrower cluster anyway);
* a layered (causal) density: ρ over the angle and the token position σ (`PositionMap`: θ on S^1, on
  S^2 the great circle of the density's principal plane);
* Lagrangian labels are drawn as a density (their exact one), a hand-over run as each segment;
* ``compare=other``: two panels side by side, e.g. particles against the continuum, at the nearest
  saved time of ``other``.

GIF frames are palette images, written by Pillow; MP4 is written by ffmpeg, the one the
``imageio-ffmpeg`` package ships (the ``movies`` extra) or the system's ``ffmpeg``.
"""
import os
import shutil
import subprocess
import sys

import numpy as np
from PIL import Image
from tqdm.auto import tqdm

from .plotting import model_label, pyplot, style
from ..representations import NoCellMeans
from ..representations.base import Representation
from ..representations.layered import principal_plane
from ..errors import InvalidInput

MAX_FRAMES = 200
VIEW = np.array([np.cos(0.35) * np.cos(0.6), np.cos(0.35) * np.sin(0.6), np.sin(0.35)])   # direction of the eye
FORMATS = (".gif", ".mp4")


def _screen_basis(view=VIEW):
    """(e1, e2, v): the screen's right and up directions and the direction of the eye (orthonormal)."""
    v = view / np.linalg.norm(view)
    e1 = np.cross([0.0, 0.0, 1.0], v)
    e1 /= np.linalg.norm(e1)
    return e1, np.cross(v, e1), v


def frame_indices(n_saved, frames=None, max_frames=MAX_FRAMES):
    """The saved indices drawn: ``frames`` (indices) as given, else every saved time, or ``max_frames``
    of them evenly spread (first and last included) when there are more."""
    if frames is not None:
        idx = np.asarray(frames, dtype=int).ravel()
        if idx.size == 0 or np.any(idx < -n_saved) or np.any(idx >= n_saved):
            raise InvalidInput(f"`frames` must be indices into the {n_saved} saved times, got {frames!r}.")
        return idx % n_saved
    if not isinstance(max_frames, (int, np.integer)) or max_frames < 1:
        raise InvalidInput(f"`max_frames` must be an integer >= 1, got {max_frames!r}.")
    if n_saved <= max_frames:
        return np.arange(n_saved)
    return np.unique(np.round(np.linspace(0, n_saved - 1, max_frames)).astype(int))


def _grid_density(sol, i, n):
    """The density of saved index ``i`` on the cells of S^1 (n cells) or S^2 (n latitude bands × 2n):
    cell means, or for a spectral state (which has a spectrum) point values at the cell centres."""
    part = sol[int(i)]               # one time, in its own representation (a hand-over run's segment)
    state = part.state(0)
    spectral = type(part.representation).power is not Representation.power
    try:
        da = state.to_grid(n, kind="points" if spectral else "means")
    except (NoCellMeans, AttributeError):
        da = state.to_grid(n, kind="points")
    return np.asarray(da.values, dtype=float)


def _particles(sol, i):
    """The positions (n, d) at saved index ``i`` (the first realisation of a batch)."""
    try:
        return np.asarray(sol.measure(int(i))[0])
    except ValueError:
        return np.asarray(sol.measure(int(i), batch=0)[0])


class CirclePoints:
    """Particles on S^1 with trails."""

    def __init__(self, ax, sol, trail):
        self.sol, self.trail = sol, trail
        theta = np.linspace(0, 2 * np.pi, 361)
        ax.plot(np.cos(theta), np.sin(theta), color="0.8", lw=1)
        self.trails = ax.plot([], [], color="C0", alpha=0.25, lw=0.8)[0]
        self.points = ax.plot([], [], "o", color="C0", ms=3)[0]
        ax.set_xlim(-1.15, 1.15)
        ax.set_ylim(-1.15, 1.15)
        ax.set_aspect("equal")
        ax.axis("off")

    def draw(self, i, previous):
        x = _particles(self.sol, i)
        self.points.set_data(x[:, 0], x[:, 1])
        self.trails.set_data(*_trail_lines([_particles(self.sol, j) for j in previous] + [x], [0, 1]))


def _trail_lines(history, axes):
    """Polylines through the positions of each particle over ``history`` (NaN-separated), on the
    screen coordinates ``axes`` (indices, or a (d, 2) projection matrix)."""
    if len(history) < 2:
        return [], []
    h = np.stack(history)                                    # (k, n, d)
    xy = h[..., axes] if isinstance(axes, list) else h @ axes
    xy = np.concatenate([xy, np.full((1,) + xy.shape[1:], np.nan)], axis=0)
    xy = xy.transpose(1, 0, 2).reshape(-1, 2)
    return xy[:, 0], xy[:, 1]


class GlobePoints:
    """Particles on S^2 on an orthographic, shaded globe with trails."""

    def __init__(self, ax, sol, trail):
        self.sol, self.trail = sol, trail
        e1, e2, self.view = _screen_basis()
        self.project = np.stack([e1, e2], axis=1)             # (3, 2)
        _shaded_disk(ax)
        self.trails = ax.plot([], [], color="C0", alpha=0.3, lw=0.8)[0]
        self.back = ax.plot([], [], "o", color="C0", alpha=0.25, ms=2.5)[0]
        self.front = ax.plot([], [], "o", color="C0", ms=3.5)[0]
        _globe_axes(ax)

    def draw(self, i, previous):
        x = _particles(self.sol, i)
        xy, near = x @ self.project, x @ self.view >= 0
        self.front.set_data(xy[near, 0], xy[near, 1])
        self.back.set_data(xy[~near, 0], xy[~near, 1])
        self.trails.set_data(*_trail_lines([_particles(self.sol, j) for j in previous] + [x], self.project))


def _shaded_disk(ax, n=200):
    """The globe's disk, lit from the upper left (Lambert shading), drawn once."""
    u = np.linspace(-1, 1, n)
    U, W = np.meshgrid(u, u)
    z = np.sqrt(np.clip(1 - U ** 2 - W ** 2, 0, None))
    light = np.array([-0.4, 0.5, 0.77])
    shade = 0.55 + 0.4 * np.clip(U * light[0] + W * light[1] + z * light[2], 0, 1)
    rgba = np.ones((n, n, 4))
    rgba[..., :3] *= shade[..., None]
    rgba[..., 3] = (U ** 2 + W ** 2 <= 1)
    ax.imshow(rgba, extent=(-1, 1, -1, 1), origin="lower", interpolation="bilinear")


def _globe_axes(ax):
    t = np.linspace(0, 2 * np.pi, 361)
    ax.plot(np.cos(t), np.sin(t), color="0.5", lw=0.8)
    ax.set_xlim(-1.08, 1.08)
    ax.set_ylim(-1.08, 1.08)
    ax.set_aspect("equal")
    ax.axis("off")


class CircleDensity:
    """ρ(θ) on S^1 (cell means) on a logarithmic axis whose range covers the first and last frames."""

    def __init__(self, ax, sol, trail, cells=512):
        self.sol, self.cells = sol, cells
        theta = 2 * np.pi * (np.arange(cells) + 0.5) / cells
        ends = [_grid_density(sol, j, cells) for j in (0, len(sol.t) - 1)]
        top = max(float(np.max(e)) for e in ends)
        low = max(min(float(np.min(e)) for e in ends), top * 1e-6, 1e-8)
        self.line = ax.plot(theta, ends[0], color="C0", lw=1.2)[0]
        ax.set_yscale("log")
        ax.set_ylim(low / 2, top * 2)
        ax.set_xlim(0, 2 * np.pi)
        ax.set_xlabel("θ")
        ax.set_ylabel("ρ (cell means)")

    def draw(self, i, previous):
        self.line.set_ydata(np.maximum(_grid_density(self.sol, i, self.cells), 1e-300))


class GlobeDensity:
    """The density on S^2 on an orthographic globe (log colour scale over the first and last frames)."""

    def __init__(self, ax, sol, trail, n=90, pixels=200):
        from matplotlib.colors import LogNorm  # deferred: matplotlib is heavy

        self.sol, self.n = sol, n
        e1, e2, v = _screen_basis()
        u = np.linspace(-1, 1, pixels)
        U, W = np.meshgrid(u, u)
        self.inside = U ** 2 + W ** 2 <= 1
        x = (U[..., None] * e1 + W[..., None] * e2 + np.sqrt(np.clip(1 - U ** 2 - W ** 2, 0, None))[..., None] * v)
        lat = np.degrees(np.arcsin(np.clip(x[..., 2], -1, 1)))
        lon = np.degrees(np.arctan2(x[..., 1], x[..., 0])) % 360
        self.rows = np.clip(((lat + 90) / 180 * n).astype(int), 0, n - 1)
        self.cols = np.clip((lon / 360 * 2 * n).astype(int), 0, 2 * n - 1)
        ends = [_grid_density(sol, j, n) for j in (0, len(sol.t) - 1)]
        top = max(float(np.max(e)) for e in ends)
        self.norm = LogNorm(vmin=max(top * 1e-4, min(float(np.min(e)) for e in ends), 1e-6), vmax=top)
        self.image = ax.imshow(self._pixels(ends[0]), extent=(-1, 1, -1, 1), origin="lower", norm=self.norm,
                               cmap="magma", interpolation="nearest")
        _globe_axes(ax)
        ax.figure.colorbar(self.image, ax=ax, shrink=0.7, label="ρ")

    def _pixels(self, grid):
        img = np.clip(grid[self.rows, self.cols], self.norm.vmin, None)
        return np.ma.masked_where(~self.inside, img)

    def draw(self, i, previous):
        self.image.set_data(self._pixels(_grid_density(self.sol, i, self.n)))


class PositionMap:
    """A layered (causal) density: ρ over (angle, token position σ), `LayeredDensity.position_map` (θ on S^1;
    on S^2 the great circle of the principal plane of the last frame's joint measure, one plane for the
    movie), log colour scale over the first and last frames."""

    def __init__(self, ax, sol, trail, n=180, positions=64):
        from matplotlib.colors import LogNorm  # deferred: matplotlib is heavy

        self.sol, self.n, self.positions = sol, n, positions
        last = len(sol.t) - 1
        self.plane = principal_plane(sol.measure(last)) if sol.model.dim == 3 else None
        sigma, angle, first = self._map(0)
        top = max(float(first.max()), float(self._map(last)[2].max()))
        self.norm = LogNorm(vmin=max(top * 1e-4, 1e-6), vmax=top)
        self.mesh = ax.pcolormesh(angle, sigma, self._clipped(first), shading="nearest", norm=self.norm,
                                  cmap="magma", rasterized=True)
        ax.set_xlabel("θ" if self.plane is None else "α on the great circle of the principal plane")
        ax.set_ylabel("token position σ")
        ax.figure.colorbar(self.mesh, ax=ax, shrink=0.8, label="ρ(σ, ·)")

    def _map(self, i):
        return self.sol.representation.position_map(self.sol.data[int(i)], self.n, self.positions, plane=self.plane)

    def _clipped(self, rho):
        return np.clip(rho, self.norm.vmin, None)

    def draw(self, i, previous):
        self.mesh.set_array(self._clipped(self._map(i)[2]))


def painter_for(sol):
    """The class that draws ``sol`` (by what its representation is: a density or particles, S^1 or S^2; a
    layered (causal) density as ρ over angle and token position, `PositionMap`)."""
    first = sol[0].representation
    dim = sol.model.dim
    if first.domain != "sphere" or dim not in (2, 3):
        raise InvalidInput(f"`sol`: movies draw runs on S^1 and S^2, got a run in {first.domain} of dim {dim}.")
    if first.is_density and getattr(first, "layered", False):
        return PositionMap
    if first.is_density:
        return CircleDensity if dim == 2 else GlobeDensity
    return CirclePoints if dim == 2 else GlobePoints


class Movie:
    """The figure of a movie: one panel per Solution (``sols``), a title with the time."""

    def __init__(self, sols, trail=4, size=4.0, dpi=100):
        plt = pyplot()
        self.sols, self.trail = sols, int(trail)
        with style():
            self.fig, axes = plt.subplots(1, len(sols), figsize=(size * len(sols), size + 0.5), dpi=dpi,
                                          squeeze=False)
            self.fig.subplots_adjust(top=0.8, bottom=0.1)
        self.painters = []
        for ax, sol in zip(axes[0], sols):
            self.painters.append(painter_for(sol)(ax, sol, self.trail))
            ax.set_title(f"{sol.solver or sol.representation.name}\n{model_label(sol.model)}", fontsize=8)
        self.title = self.fig.suptitle("", fontsize=10)

    def render(self, i, history=()):
        """The RGB frame (H, W, 3) of saved index ``i`` of the first Solution, the others at their nearest time."""
        t = float(self.sols[0].t[i])
        for painter, sol in zip(self.painters, self.sols):
            j = int(np.argmin(np.abs(sol.t - t)))
            previous = [int(np.argmin(np.abs(sol.t - sol.t[k]))) for k in history][-self.trail:] if self.trail else []
            painter.draw(j, previous)
        self.title.set_text(f"t = {t:.4g}")
        self.fig.canvas.draw()
        return np.asarray(self.fig.canvas.buffer_rgba())[..., :3].copy()

    def close(self):
        pyplot().close(self.fig)


def still(sol, i=-1, path=None, *, compare=None, trail=4, size=4.0, dpi=100):
    """The frame of saved index ``i`` exactly as `animate` draws it (with the trail of the frames
    before it among ``frame_indices``), as an RGB array; written as PNG to ``path`` if given."""
    sols = [sol] if compare is None else [sol, compare]
    idx = frame_indices(len(sol.t))
    i = int(i) % len(sol.t)
    history = [int(k) for k in idx[idx < i]][-int(trail):] if trail else []
    movie = Movie(sols, trail, size, dpi)
    try:
        rgb = movie.render(i, history)
    finally:
        movie.close()
    if path is not None:

        Image.fromarray(rgb).save(path)
    return rgb


def gif_frame(rgb):
    """The palette image a GIF holds for the RGB frame ``rgb`` (Pillow's median-cut, 255 colours)."""

    return Image.fromarray(rgb).quantize(colors=255, method=Image.Quantize.MEDIANCUT)


def ffmpeg_executable():
    """(path, origin) of the ffmpeg MP4 movies use: the one of the ``imageio-ffmpeg`` package, else the
    system's; ValueError naming `path` when there is none."""
    try:
        import imageio_ffmpeg       # optional: the `movies` extra ships an ffmpeg binary

        return imageio_ffmpeg.get_ffmpeg_exe(), "imageio-ffmpeg"
    except (ImportError, RuntimeError):
        system = shutil.which("ffmpeg")
        if system:
            return system, "system"
    raise InvalidInput("`path`: an .mp4 movie needs ffmpeg: pip install 'meanfield[movies]' (imageio-ffmpeg ships one) "
                     "or install the system's ffmpeg; or write a .gif.")


def _write_gif(path, frames, fps):
    first = next(frames)
    first.save(path, save_all=True, append_images=frames, duration=int(round(1000 / fps)), loop=0, optimize=False)


def _write_mp4(path, frames, fps):
    exe, _ = ffmpeg_executable()
    first = next(frames)
    h, w = first.shape[:2]
    h2, w2 = h - h % 2, w - w % 2                       # yuv420p needs even sides
    cmd = [exe, "-y", "-loglevel", "error", "-f", "rawvideo", "-pix_fmt", "rgb24", "-s", f"{w2}x{h2}",
           "-r", str(fps), "-i", "-", "-an", "-vcodec", "libx264", "-pix_fmt", "yuv420p", str(path)]
    with subprocess.Popen(cmd, stdin=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
        proc.stdin.write(np.ascontiguousarray(first[:h2, :w2]).tobytes())
        for rgb in frames:
            proc.stdin.write(np.ascontiguousarray(rgb[:h2, :w2]).tobytes())
        proc.stdin.close()
        err = proc.stderr.read().decode(errors="replace")
        if proc.wait() != 0:
            raise RuntimeError(f"ffmpeg failed writing {path}: {err.strip()[-500:]}")


def animate(sol, path, *, compare=None, frames=None, max_frames=MAX_FRAMES, fps=10, trail=4, size=4.0, dpi=100,
            progress=None):
    """Write a movie of ``sol`` to ``path`` (``.gif`` or ``.mp4``) and return a summary dict.

    Parameters
    ----------
    sol : Solution on S^1 or S^2 (particles, densities, Lagrangian labels, a hand-over run).
    path : str or Path ending in .gif (Pillow) or .mp4 (ffmpeg, `ffmpeg_executable`).
    compare : Solution, optional; a second panel at the nearest saved time (particles against the continuum).
    frames : saved indices to draw (default: all, or ``max_frames`` evenly spread).
    max_frames : int >= 1, the cap on the frames without ``frames`` (the memory of a GIF grows with them).
    fps : frames per second; trail : previous frames in the particles' trails; size : inches per panel; dpi.
    progress : bool or None (a tqdm bar when stderr is a terminal).

    Returns
    -------
    dict with ``path``, ``frames`` (their count), ``times`` (the saved times drawn) and ``writer``
    ("pillow", or "ffmpeg (imageio-ffmpeg)" / "ffmpeg (system)").
    """
    path = os.fspath(path)
    suffix = os.path.splitext(path)[1].lower()
    if suffix not in FORMATS:
        raise InvalidInput(f"`path` must end in one of {FORMATS}, got {path!r}.")
    fps = float(fps)
    if not np.isfinite(fps) or fps <= 0:
        raise InvalidInput(f"`fps` must be a positive number, got {fps!r}.")
    writer = "pillow" if suffix == ".gif" else f"ffmpeg ({ffmpeg_executable()[1]})"
    idx = frame_indices(len(sol.t), frames, max_frames)
    movie = Movie([sol] if compare is None else [sol, compare], trail, size, dpi)
    bar = _bar(len(idx), progress)

    def rendered():
        try:
            for k, i in enumerate(idx):
                rgb = movie.render(int(i), [int(j) for j in idx[:k]][-movie.trail:] if movie.trail else [])
                bar.update(1)
                yield gif_frame(rgb) if suffix == ".gif" else rgb
        finally:
            bar.close()
            movie.close()

    (_write_gif if suffix == ".gif" else _write_mp4)(path, rendered(), fps)
    return {"path": path, "frames": int(idx.size), "times": np.asarray(sol.t)[idx], "writer": writer}


def _bar(total, progress):


    show = sys.stderr.isatty() if progress is None else bool(progress)
    return tqdm(total=total, desc="movie", unit="frame", disable=not show, leave=False)


__all__ = ["animate", "still", "frame_indices", "ffmpeg_executable", "gif_frame", "MAX_FRAMES"]
