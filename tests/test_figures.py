"""Golden images: the four run pictures, a stopped run's picture and each experiment's pictures
against small baselines in tests/baseline, compared as matplotlib's own tests compare theirs (the
RMS difference of the pixels, `matplotlib.testing.compare.compare_images`, with a tolerance).

The pictures are drawn at a low resolution (`DPI`) in the library's fixed style (fonts, sizes),
so that the baselines stay small; the same picture drawn again on the same machine is identical
(RMS 0), and the tolerance `TOL` is below what a curve moved by a fraction of a percent of its axis
costs (`test_a_moved_curve_fails_the_comparison`). ``MEANFIELD_UPDATE_BASELINE=1 pytest tests/test_figures.py``
rewrites the baselines (look at them before committing).
"""
import importlib.util
import json
import os
import pathlib
import shutil

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.testing.compare import compare_images  # noqa: E402

import meanfield as mf  # noqa: E402
from meanfield import experiments
from meanfield.results import plotting  # noqa: E402
from meanfield.cli import main  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent
BASELINE = ROOT / "tests" / "baseline"
DPI = 40
TOL = 1.0            # RMS over 0..255 grey levels: a curve moved by 1% of its axis gives 6 at 40 dpi
UPDATE = bool(os.environ.get("MEANFIELD_UPDATE_BASELINE"))
HAVE_DOLFINX = importlib.util.find_spec("dolfinx") is not None


@pytest.fixture(autouse=True)
def small_pictures(monkeypatch):
    monkeypatch.setitem(plotting.STYLE, "savefig.dpi", DPI)


def assert_like_baseline(path, name):
    expected = BASELINE / name
    if UPDATE:
        BASELINE.mkdir(exist_ok=True)
        shutil.copyfile(path, expected)
        return
    assert expected.is_file(), f"no baseline {expected}: run with MEANFIELD_UPDATE_BASELINE=1"
    result = compare_images(str(expected), str(path), tol=TOL, in_decorator=True)
    assert result is None, f"{name}: RMS {result['rms']:.2f} > {TOL} (difference image {result['diff']})"


def _summary(out):
    return json.loads((pathlib.Path(out) / "summary.json").read_text())


def _assert_summary(s):
    assert s["status"] in ("finished", "interrupted") or s["status"].startswith("stopped: ")
    assert s["checks"] and all(c["compared"] and c["tolerance"] for c in s["checks"])


@pytest.mark.parametrize("name", ["circle", "sphere", "particles",
                                  pytest.param("fem", marks=[pytest.mark.fem, pytest.mark.skipif(
                                      not HAVE_DOLFINX, reason="dolfinx (the fem extra) missing")])])
def test_run_pictures(name, tmp_path):
    assert main(["run", str(ROOT / "examples" / f"{name}.toml"), "--quick", "--out", str(tmp_path),
                 "--no-progress"]) == 0
    assert_like_baseline(tmp_path / f"{name}.png", f"run_{name}.png")
    s = _summary(tmp_path)
    _assert_summary(s)
    fs = s["results"]["final_state"]
    assert s["status"] == "finished" and fs["t"] == s["results"]["t_requested"]
    assert fs["energy"]["uniform_minimum"] < fs["energy"]["value"] < fs["energy"]["dirac_maximum"]
    assert set(fs) >= {"density", "energy", "w1_to_uniform", "w1_to_dirac", "clusters"}


def test_stopped_run_picture_shows_the_stop(tmp_path):
    cfg = {"solver": {"name": "fourier", "modes": 32}, "model": {"beta": 8.0, "dim": 2},
           "initial": {"density": "perturbed_uniform", "amplitude": 0.05, "degree": 3},
           "times": {"t_end": 10.0, "n_saves": 41}, "output": {"name": "stopped"}}
    report = experiments.run(cfg, tmp_path, progress=False)
    assert report.status == "stopped" and _summary(tmp_path)["status"].startswith("stopped: UnderResolved: under-resolved at t=")
    assert_like_baseline(tmp_path / "stopped.png", "run_stopped.png")
    sol = report.solution
    fig = sol.plot()
    t_stop = float(sol.t[-1])
    for ax in fig.axes[:1] + [fig.axes[-1]]:       # the space-time map (t up) and the energy (t across)
        labels = [a.get_label() for a in ax.lines + ax.patches]
        assert f"stopped at t = {t_stop:.4g}" in labels and "not computed" in labels
    assert fig.axes[0].get_ylim()[1] == pytest.approx(10.0) and fig.axes[-1].get_xlim()[1] == pytest.approx(10.0)
    assert "STOPPED" in fig._suptitle.get_text() and "K = 32 modes" in fig._suptitle.get_text()
    import matplotlib.pyplot as plt

    plt.close("all")


@pytest.mark.parametrize("scale", ["linear", "log", "perturbation"])
def test_colour_scales(scale, tmp_path):
    sol = mf.Solution(*_two_bumps())
    sol.plot(path=tmp_path / "s.png", scale=scale)
    assert_like_baseline(tmp_path / "s.png", f"scale_{scale}.png")


def _two_bumps():
    """A hand-made S^1 Solution: ρ − 1 of size 1e-2 at first, then two clusters (ρ up to ~40)."""
    from meanfield.representations.fourier import FourierSeries

    K = 64
    t = np.linspace(0.0, 4.0, 9)
    k = np.arange(K + 1)
    c = np.zeros((t.size, K + 1), dtype=complex)
    for i, s in enumerate(t):
        width = max(1.5 * np.exp(-0.9 * s), 0.25)          # resolved by K = 64: ρ > 0
        c[i] = np.exp(-0.5 * (width * k) ** 2 * 0.05) * (k % 2 == 0) * min(1.0, 0.01 * np.exp(1.5 * s))
    c[:, 0] = 1.0
    return t, mf.Model(beta=4.0, dim=2), FourierSeries(K), c


def test_particles_in_high_dimension_label_the_pairs(tmp_path):
    x = mf.sampling.uniform_points(40, 128, 0)
    y = x + 0.5 * x[:1]
    y /= np.linalg.norm(y, axis=1, keepdims=True)
    from meanfield.representations.particles import ParticleCloud

    sol = mf.Solution([0.0, 1.0], mf.Model(beta=4.0, dim=128), ParticleCloud(np.full(40, 1 / 40), 128),
                      np.stack([x, y]))
    fig = sol.plot(path=tmp_path / "d128.png")
    ax = fig.axes[0]
    assert ax.get_ylabel().startswith(r"$\langle x_i(t), x_j(t)\rangle$") and ax.get_xlabel() == "t"
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any("780 pairs i < j" in lab for lab in labels) and "mean over the pairs" in labels
    drawn = np.concatenate([line.get_ydata() for line in ax.lines if line.get_label() != "mean over the pairs"])
    assert np.all(drawn < 1 - 1e-9)                                # ⟨x_i, x_i⟩ = 1 is not drawn
    assert_like_baseline(tmp_path / "d128.png", "run_particles_d128.png")


# -- experiments ---------------------------------------------------------------------------------------
def test_verify_prop34_pictures(tmp_path):
    report = experiments.verify_prop34(tmp_path, quick=True, progress=False, parts=(1, 2))
    _assert_summary(_summary(tmp_path))
    assert report.passed
    for name in ("coefficients", "landscape"):
        assert_like_baseline(tmp_path / f"{name}.png", f"prop34_{name}.png")


@pytest.mark.slow
def test_verify_prop34_flows_and_designs_pictures(tmp_path):
    experiments.verify_prop34(tmp_path, quick=True, progress=False, parts=(3, 4))
    for name in ("flows", "designs"):
        assert_like_baseline(tmp_path / f"{name}.png", f"prop34_{name}.png")


def test_phase_diagram_picture(tmp_path):
    experiments.phase_diagram(tmp_path, dim=3, n=8, betas=[1.0, 4.0], realisations=32, n_times=11, t_end=10.0,
                              progress=False)
    _assert_summary(_summary(tmp_path))
    assert_like_baseline(tmp_path / "phase_diagram.png", "phase_diagram.png")


@pytest.mark.slow
def test_mean_field_limit_picture(tmp_path):
    experiments.mean_field_limit(tmp_path, dims=(2,), quick=True, ns={2: [100, 316, 1000]}, progress=False)
    _assert_summary(_summary(tmp_path))
    assert_like_baseline(tmp_path / "mean_field_limit_d2.png", "mean_field_limit_d2.png")


@pytest.mark.slow
def test_noise_transition_picture(tmp_path):
    experiments.noise_transition(tmp_path, dims=(2,), quick=True, particles=False, sa=False, progress=False)
    _assert_summary(_summary(tmp_path))
    assert_like_baseline(tmp_path / "noise_transition_d2.png", "noise_transition_d2.png")


def test_a_moved_curve_fails_the_comparison(tmp_path, monkeypatch):
    """The comparison sees a moved curve: a run's picture, kept as the baseline in a temporary copy, passes
    against itself drawn again, and fails against the same run rotated by 0.01 rad (0.16% of the circle;
    the energy, the axes, the colour scale and the title unchanged): RMS about 2 > `TOL`."""
    import solvers

    sol = solvers.FourierCircle(mf.Model(beta=4.0, dim=2), modes=64, w1=False).solve(
        mf.densities.perturbed_uniform(0.2, 3), np.linspace(0.0, 2.0, 7), progress=False)
    k = np.arange(sol.data.shape[1])
    moved = mf.Solution(sol.t, sol.model, sol.representation, sol.data * np.exp(-1j * k * 0.01),
                        {"energy": sol.energy}, sol.stats, solver=sol.solver)
    monkeypatch.setattr(f"{__name__}.BASELINE", tmp_path / "baseline")
    monkeypatch.setattr(f"{__name__}.UPDATE", True)
    sol.plot(path=tmp_path / "run.png")
    assert_like_baseline(tmp_path / "run.png", "run.png")            # the temporary baseline
    monkeypatch.setattr(f"{__name__}.UPDATE", False)
    sol.plot(path=tmp_path / "again.png")
    assert_like_baseline(tmp_path / "again.png", "run.png")
    moved.plot(path=tmp_path / "moved.png")
    with pytest.raises(AssertionError, match=r"run.png: RMS [1-9]\.\d+ > 1\.0"):
        assert_like_baseline(tmp_path / "moved.png", "run.png")
