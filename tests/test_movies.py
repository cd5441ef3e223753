"""meanfield.results.movies: frame counts, frames equal to the still pictures, bounded memory, writers, bad input."""
import subprocess
import sys
import tracemalloc

import numpy as np
import pytest
from PIL import Image, ImageSequence

import meanfield as mf
import solvers
from meanfield.results import movies


@pytest.fixture(scope="module")
def circle_particles():
    x0 = mf.sampling.uniform_points(48, 2, 0)
    return solvers.Particles(mf.Model(beta=4.0, dim=2)).solve(x0, np.linspace(0, 6, 13), progress=False)


@pytest.fixture(scope="module")
def sphere_particles():
    x0 = mf.sampling.uniform_points(64, 3, 1)
    return solvers.Particles(mf.Model(beta=4.0, dim=3)).solve(x0, np.linspace(0, 4, 9), progress=False)


def gif_frames(path):
    with Image.open(path) as im:
        return [np.asarray(f.convert("RGB")) for f in ImageSequence.Iterator(im)]


def test_frame_indices_spread_evenly_with_both_ends():
    assert list(movies.frame_indices(5)) == [0, 1, 2, 3, 4]
    idx = movies.frame_indices(1001, max_frames=11)
    assert list(idx) == list(range(0, 1001, 100))
    assert list(movies.frame_indices(10, frames=[0, -1, 3])) == [0, 9, 3]


@pytest.mark.parametrize("fixture", ["circle_particles", "sphere_particles"])
def test_one_frame_per_saved_time_and_each_equals_the_still(fixture, request, tmp_path):
    sol = request.getfixturevalue(fixture)
    made = sol.animate(tmp_path / "m.gif", size=2.5, dpi=60, progress=False)
    frames = gif_frames(tmp_path / "m.gif")
    assert made["frames"] == len(frames) == len(sol.t)
    assert np.array_equal(made["times"], sol.t) and made["writer"] == "pillow"
    for k in (0, 4, len(sol.t) - 1):
        still = movies.still(sol, k, size=2.5, dpi=60)
        assert np.array_equal(frames[k], np.asarray(movies.gif_frame(still).convert("RGB")))
    assert not np.array_equal(frames[0], frames[-1])          # the particles moved


def test_a_density_movie_and_the_side_by_side_comparison(tmp_path):
    model = mf.Model(beta=4.0, dim=2)
    rho0 = mf.densities.perturbed_uniform(0.1, degree=3)
    t = np.linspace(0, 4, 9)
    continuum = solvers.FourierCircle(model, 64).solve(rho0, t, progress=False, on_underresolved="lagrangian")
    x0, w0 = mf.sample(rho0, 200, 2, method="quasi")
    part = solvers.Particles(model).solve(x0, t, weights=w0, progress=False)
    made = movies.animate(part, tmp_path / "c.gif", compare=continuum, size=2.5, dpi=60, progress=False)
    frames = gif_frames(tmp_path / "c.gif")
    assert made["frames"] == len(frames) == 9
    assert frames[0].shape == (180, 300, 3)                    # two panels of 2.5 in, 0.5 in of titles, 60 dpi
    still = movies.still(part, 8, compare=continuum, size=2.5, dpi=60)
    assert np.array_equal(frames[8], np.asarray(movies.gif_frame(still).convert("RGB")))


def test_a_sphere_density_movie(tmp_path):
    sol = solvers.SphericalHarmonics(mf.Model(beta=2.0, dim=3), lmax=32).solve(
        mf.densities.von_mises_fisher([0.0, 0.0, 1.0], 2.0), np.linspace(0, 0.6, 4), progress=False)
    made = sol.animate(tmp_path / "s.gif", size=2.5, dpi=60, progress=False)
    frames = gif_frames(tmp_path / "s.gif")
    assert made["frames"] == len(frames) == 4
    assert not np.array_equal(frames[0], frames[-1])           # the cap contracts: the colours change


def test_long_runs_are_capped_and_memory_stays_bounded(tmp_path):
    """2000 saved times: the movie draws ``max_frames`` of them, and the traced memory does not grow
    with the frames (each RGB frame is released once written)."""
    x0 = mf.sampling.uniform_points(8, 2, 2)
    sol = solvers.Particles(mf.Model(beta=1.0, dim=2)).solve(x0, np.linspace(0, 2, 2000), progress=False)
    peaks = []
    for cap in (10, 40):
        tracemalloc.start()
        made = sol.animate(tmp_path / f"long{cap}.gif", max_frames=cap, size=2.0, dpi=50, progress=False)
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
        assert made["frames"] == len(gif_frames(tmp_path / f"long{cap}.gif")) == cap
        assert made["times"][0] == 0 and made["times"][-1] == 2
    assert peaks[1] < peaks[0] + 8e6, peaks


def test_mp4_through_ffmpeg(circle_particles, tmp_path):
    pytest.importorskip("imageio_ffmpeg")
    import imageio_ffmpeg

    made = circle_particles.animate(tmp_path / "m.mp4", size=2.5, dpi=60, progress=False)
    assert made["writer"].startswith("ffmpeg")
    reader = imageio_ffmpeg.read_frames(str(tmp_path / "m.mp4"))
    meta = next(reader)
    assert sum(1 for _ in reader) == made["frames"] == len(circle_particles.t)
    assert meta["size"][0] % 2 == 0


@pytest.mark.parametrize("kwargs, name", [
    (dict(path="m.avi"), "`path`"), (dict(fps=0.0), "`fps`"), (dict(frames=[0, 99]), "`frames`"),
    (dict(max_frames=0), "`max_frames`"),
])
def test_bad_arguments_name_themselves(circle_particles, tmp_path, kwargs, name):
    path = tmp_path / kwargs.pop("path", "m.gif")
    with pytest.raises(ValueError, match=name):
        circle_particles.animate(path, progress=False, **kwargs)


def test_runs_off_the_sphere_are_refused(tmp_path):
    sol = solvers.Gaussian(mf.Model(beta=1.0, dim=3)).solve((np.zeros(3), 0.1 * np.eye(3)), [0, 1], progress=False)
    with pytest.raises(ValueError, match="`sol`"):
        sol.animate(tmp_path / "g.gif", progress=False)


def test_the_command_line(circle_particles, tmp_path):
    circle_particles.save(tmp_path / "p.nc")
    cli = [sys.executable, "-m", "meanfield", "animate"]
    out = subprocess.run(cli + [str(tmp_path / "p.nc"), "--max-frames", "5", "--no-progress"], capture_output=True,
                         text=True)
    assert out.returncode == 0, out.stderr
    assert "5 frames" in out.stdout and len(gif_frames(tmp_path / "p.gif")) == 5
    bad = subprocess.run(cli + [str(tmp_path / "missing.nc")], capture_output=True, text=True)
    assert bad.returncode == 2 and "`file`" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1
