"""The `meanfield` command: help, exit status, the files each subcommand writes, Ctrl-C."""
import json
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import meanfield as mf
from meanfield.cli import main

ROOT = pathlib.Path(__file__).resolve().parent.parent
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"



def _summary(out):
    return json.loads((pathlib.Path(out) / "summary.json").read_text())


def _assert_png(path):
    data = pathlib.Path(path).read_bytes()
    assert data[:8] == PNG_MAGIC and len(data) > 5000


def test_version_and_help(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert mf.__version__ in capsys.readouterr().out
    for cmd in ("run", "verify-prop34", "mean-field-limit", "phase-diagram"):
        with pytest.raises(SystemExit) as info:
            main([cmd, "--help"])
        assert info.value.code == 0
        text = capsys.readouterr().out
        assert "--out" in text and "--quick" in text
    assert main([]) == 0


def test_console_entry_point_runs():
    out = subprocess.run([sys.executable, "-m", "meanfield.cli", "--version"], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == f"meanfield {mf.__version__}"


def test_bad_config_fails_fast_with_the_key(tmp_path, capsys):
    cfg = tmp_path / "bad.toml"
    cfg.write_text((ROOT / "examples" / "circle.toml").read_text().replace("modes = 256", "modes = 256\nmodez = 3"))
    assert main(["run", str(cfg), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "`solver.modez`" in err and "modes" in err
    assert not (tmp_path / "out").exists()                      # nothing ran, nothing written
    cfg.write_text((ROOT / "examples" / "circle.toml").read_text().replace("beta = 4.0", "beta = inf"))
    assert main(["run", str(cfg), "--out", str(tmp_path / "out")]) == 2
    assert "`model.beta` must be finite" in capsys.readouterr().err
    # a resolution the solver refuses (kernel not resolved) also fails before any output
    cfg.write_text((ROOT / "examples" / "circle.toml").read_text().replace("beta = 4.0", "beta = 400.0")
                   .replace("modes = 256", "modes = 16"))
    assert main(["run", str(cfg), "--out", str(tmp_path / "out")]) == 2
    assert "`solver.modes`" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("line", ["beta = true", "beta = false"])
def test_a_bool_is_not_a_number_in_toml(tmp_path, capsys, line):
    """TOML `true` is refused where a real is expected, never run as β = 1 (Python's bool is an int)."""
    cfg = tmp_path / "bool.toml"
    cfg.write_text((ROOT / "examples" / "circle.toml").read_text().replace("beta = 4.0", line))
    assert main(["run", str(cfg), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"`model.beta` must be a real number, got {line[7:].title()}." in err, err
    assert not (tmp_path / "out").exists()
    with pytest.raises(ValueError, match="`noise` must be a real number"):
        mf.Model(beta=1.0, dim=2, noise=np.bool_(True))


def test_bad_arguments_exit_2(tmp_path, capsys):
    with pytest.raises(SystemExit) as info:
        main(["phase-diagram", "--betas", "a,b"])
    assert info.value.code == 2
    assert main(["phase-diagram", "--delta", "-1", "--out", str(tmp_path)]) == 2
    assert "`delta`" in capsys.readouterr().err


def test_run_circle_example_writes_files(tmp_path, capsys):
    out = tmp_path / "circle"
    assert main(["run", str(ROOT / "examples" / "circle.toml"), "--quick", "--out", str(out), "--no-progress"]) == 0
    text = capsys.readouterr().out
    assert "3/3 checks passed" in text             # finished, E_β monotone, mass (after the hand-over)
    assert "clusters: 3 with masses 0.333, 0.333, 0.333" in text      # what the README shows
    s = _summary(out)
    assert s["status"] == "finished" and s["passed"] and s["results"]["mass_error"] < 1e-12
    assert s["results"]["final_state"]["clusters"]["count"] == 3
    sol = mf.load(out / "circle.nc")
    assert sol.t.size == 11 and sol.t[-1] == 10.0 and sol.solver == "FourierCircle+Lagrangian"
    assert sol.energy[-1] > sol.energy[0]
    import xarray as xr

    with xr.open_dataset(out / "circle.nc") as ds:
        assert ds.attrs["model_beta"] == 4.0 and "energy" in ds
    _assert_png(out / "circle.png")
    assert not (out / "circle.partial.nc").exists()


def test_ctrl_c_leaves_partial_results(tmp_path, monkeypatch, capsys):
    """A solver interrupted mid-run (it raises mf.Interrupted with the partial Solution): exit 130, files kept."""
    import importlib

    import solvers

    run_mod = importlib.import_module("meanfield.experiments.run")
    real = run_mod.simulate

    def interrupted(cfg, **kw):
        sol = real(cfg, **kw)
        raise mf.Interrupted("interrupted at t=2", sol[:4])

    monkeypatch.setattr(run_mod, "simulate", interrupted)
    out = tmp_path / "run"
    assert main(["run", str(ROOT / "examples" / "circle.toml"), "--quick", "--out", str(out)]) == 130
    err = capsys.readouterr().err.strip()
    # one line for a shell user: the solver that ran, the time, the file that holds the saved times, how to go on
    assert len(err.splitlines()) == 1 and "exc.solution" not in err
    assert f"{out / 'circle.nc'}" in err and "--resume" in err and "interrupted (Ctrl-C) at t = " in err
    s = _summary(out)
    assert s["status"] == "interrupted" and not s["passed"]
    part = mf.load(out / "circle.nc")
    assert part.t.size == 4
    del solvers


@pytest.mark.slow
def test_verify_prop34_quick_parts(tmp_path, capsys):
    out = tmp_path / "p34"
    assert main(["verify-prop34", "--quick", "--parts", "1,2,4", "--out", str(out)]) == 0
    s = _summary(out)
    assert s["passed"] and len(s["checks"]) == 6
    assert s["results"]["landscape"]["min_rel_gap_below"] >= -1e-12
    assert s["results"]["discrete"]["icosahedron"]["inner_product_error"] < 1e-6
    for name in ("coefficients.png", "landscape.png", "designs.png"):
        _assert_png(out / name)
    import xarray as xr

    with xr.open_dataset(out / "coefficients.nc") as ds:
        assert np.all(ds["min_turan"].values >= 1.0)
    assert "6/6 checks passed" in capsys.readouterr().out


def test_phase_diagram_small_run(tmp_path):
    out = tmp_path / "pd"
    code = main(["phase-diagram", "--quick", "-B", "16", "--betas", "1,5", "--t-end", "12", "--n-times", "13",
                 "--out", str(out)])
    assert code == 0
    s = _summary(out)
    assert s["passed"] and s["settings"]["realisations"] == 16
    _assert_png(out / "phase_diagram.png")
    import xarray as xr

    with xr.open_dataset(out / "phase_diagram.nc") as ds:
        assert ds["p"].shape == (2, 13) and float(ds["p"][0, -1]) > 0.9


@pytest.mark.slow
@pytest.mark.parametrize("cmd", [["verify-prop34"], ["mean-field-limit"], ["phase-diagram"]])
def test_quick_subcommands_pass(tmp_path, cmd):
    out = tmp_path / cmd[0]
    assert main(cmd + ["--quick", "--out", str(out)]) == 0
    s = _summary(out)
    assert s["passed"] and s["status"] == "finished"
    assert any(f.endswith(".png") for f in s["files"]) and any(f.endswith(".nc") for f in s["files"])
    for f in s["files"]:
        if f.endswith(".png"):
            _assert_png(out / f)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["circle", "sphere", "fem", "particles", "lagrangian", "handover", "gegenbauer",
                                  "fourier_modes"])
def test_examples_run(tmp_path, name):
    import importlib.util

    if name == "fem" and importlib.util.find_spec("dolfinx") is None:
        pytest.skip("dolfinx (the fem extra) missing")
    out = tmp_path / name
    assert main(["run", str(ROOT / "examples" / f"{name}.toml"), "--out", str(out)]) == 0
    sol = mf.load(out / f"{name}.nc")
    assert sol.t.size >= 11
    _assert_png(out / f"{name}.png")


@pytest.mark.slow
def test_gegenbauer_example_is_the_solver_run(tmp_path):
    """`meanfield run` with the Gegenbauer solver in d = 128 (`mean = "pole"`) saves what
    `solvers.Gegenbauer` computes: the same coefficients, the cap contracting (the mean of s grows)."""
    import solvers

    out = tmp_path / "gg"
    assert main(["run", str(ROOT / "examples" / "gegenbauer.toml"), "--out", str(out), "--no-progress"]) == 0
    saved = mf.load(out / "gegenbauer.nc")
    e = np.eye(128)[-1]
    direct = solvers.Gegenbauer(mf.Model(beta=2.0, dim=128), 128).solve(mf.densities.von_mises_fisher(e, 10.0),
                                                                       np.linspace(0.0, 2.0, 21))
    np.testing.assert_allclose(saved.data, direct.data, rtol=0, atol=1e-12 * np.abs(direct.data).max())
    rep = direct.representation
    mean_s = [rep.marginal_cdf(c, np.array([1.0]))[0] - np.trapezoid(rep.marginal_cdf(c, np.linspace(-1, 1, 4001)),
                                                                   np.linspace(-1, 1, 4001)) for c in direct.data]
    assert mean_s[0] == pytest.approx(0.078, abs=2e-3) and mean_s[-1] > 2 * mean_s[0]
    assert np.all(np.diff(saved.energy) > 0)


def test_config_direction_pole_and_bad_direction(tmp_path, capsys):
    cfg = tmp_path / "bad.toml"
    cfg.write_text((ROOT / "examples" / "gegenbauer.toml").read_text().replace('mean = "pole"', 'mean = "north"'))
    assert main(["run", str(cfg), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "`initial.mean`" in err and "pole" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("threads", [1, 2])
def test_sigint_during_phase_diagram(tmp_path, threads):
    """A real Ctrl-C (SIGINT) in the middle of the particle runs: exit 130, summary and NetCDF on disk;
    on two threads both runs stop and both keep their saved times. The signal goes in when the runs say
    they are ready (tests/signal_driver.py: every running β has saved a time, one of them two), never
    after a fixed time."""
    import signal

    out = tmp_path / "pd"
    proc = subprocess.Popen([sys.executable, str(ROOT / "tests" / "signal_driver.py"), "INT", "2", str(threads), "--",
                             "phase-diagram", "--out", str(out), "--no-progress", "--t-end", "1000", "--n-times", "1001",
                             "--betas", "1,2", "--threads", str(threads), "-B", "16", "-n", "8"],
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 130, err
    assert "partial results" in err
    s = _summary(out)
    assert s["status"] == "interrupted" and not s["passed"]
    assert s["results"]["gamma_curve"]["t_star"][0] > 0           # the Γ curve was computed first
    import xarray as xr

    part = mf.load(out / "interrupted.nc")
    assert part.t[-1] < 1000
    with xr.open_dataset(out / "phase_diagram.nc") as ds:
        assert ds["t_star"].shape == (2,)
        assert np.isfinite(ds["p"].values[0, :part.t.size]).all()      # p of the saved times kept
        if threads == 2:             # the other β ran at the same time: at least its start is kept
            assert np.isfinite(ds["p"].values[1, 0])
        else:                        # the second β never started
            assert not np.isfinite(ds["p"].values[1]).any()


# -- initial data from coefficients and files ---------------------------------------------------------
def _config_text(initial, solver='name = "fourier"\nmodes = 64', model="beta = 4.0\ndim = 2", t="t_end = 0.5\nn_saves = 3"):
    return (f"[solver]\n{solver}\n\n[model]\n{model}\n\n[initial]\n{initial}\n\n[times]\n{t}\n\n"
            "[output]\nname = \"r\"\nplot = false\n")


def test_fourier_modes_example_forms_three_clusters(tmp_path, capsys):
    """examples/fourier_modes.toml (fewer labels): ρ0 = 1 + Σ a cos(kθ + φ) at t = 0, and at β = 5 the
    fastest mode k* = 3 gives three clusters, counted in summary.json."""
    text = (ROOT / "examples" / "fourier_modes.toml").read_text().replace("nodes = 1024", "nodes = 128") + "plot = false\n"
    cfg = tmp_path / "fourier_modes.toml"
    cfg.write_text(text)
    out = tmp_path / "fm"
    assert main(["run", str(cfg), "--quick", "--out", str(out), "--no-progress"]) == 0
    assert "clusters: 3 with masses" in capsys.readouterr().out
    clusters = _summary(out)["results"]["final_state"]["clusters"]
    assert clusters["separated"] and clusters["count"] == 3 and sum(clusters["masses"]) == pytest.approx(1.0)
    sol = mf.load(out / "fourier_modes.nc")
    theta = np.linspace(0, 2 * np.pi, 50)
    x = np.stack([np.cos(theta), np.sin(theta)], -1)
    exact = 1 + 0.03 * np.cos(2 * theta + 1.0) + 0.03 * np.cos(3 * theta) + 0.02 * np.cos(5 * theta + 2.5)
    np.testing.assert_allclose(sol.density(x, 0), exact, rtol=0, atol=1e-5)     # between the labels: interpolated


def test_fourier_coefficients_start_the_spectral_solver_exactly(tmp_path):
    from meanfield.experiments.config import parse_config

    cfg = parse_config({"solver": {"name": "fourier", "modes": 32}, "model": {"beta": 2.0, "dim": 2},
                        "initial": {"density": "fourier", "coefficients": [[1, 0.2, 0.3], [4, -0.1, 2.0]]},
                        "times": {"values": [0.0]}})
    sol = cfg.make_solver().solve(cfg.density(), cfg.t_eval, progress=False)
    c = sol.data[0]
    assert c[1] == pytest.approx(0.1 * np.exp(0.3j), abs=1e-15) and c[4] == pytest.approx(-0.05 * np.exp(2j), abs=1e-15)
    assert np.max(np.abs(np.delete(c, [0, 1, 4]))) < 1e-15 and c[0] == 1.0
    np.testing.assert_allclose(c, cfg.density().fourier_coefficients(32), rtol=0, atol=1e-15)


def test_harmonics_coefficients_in_a_config(tmp_path):
    cfg = tmp_path / "h.toml"
    cfg.write_text(_config_text('density = "harmonics"\ncoefficients = [[1, 0, 0.2], [2, -2, 0.1], [3, 1, -0.05]]',
                                solver='name = "harmonics"\nlmax = 16', model="beta = 1.0\ndim = 3",
                                t="values = [0.0, 0.1]"))
    assert main(["run", str(cfg), "--out", str(tmp_path / "o"), "--no-progress"]) == 0
    c = mf.load(tmp_path / "o" / "r.nc").data[0]
    expected = np.zeros_like(c)
    expected[0, 0, 0], expected[0, 1, 0], expected[1, 2, 2], expected[0, 3, 1] = 1.0, 0.2, 0.1, -0.05
    np.testing.assert_allclose(c, expected, rtol=0, atol=1e-14)


@pytest.mark.parametrize("initial,message", [
    ('density = "fourier"\ncoefficients = [[1, 0.1, 0.0], [2, 0.1, 0.0], [0, 0.1, 0.0]]',
     "`initial.coefficients[2]` must be [k, amplitude, phase] with k >= 1 an integer, got [0, 0.1, 0.0]."),
    ('density = "fourier"\ncoefficients = [[1, 0.1, 0.0], [2.5, 0.1, 0.0]]',
     "`initial.coefficients[1]` must be [k, amplitude, phase] with k >= 1 an integer"),
    ('density = "fourier"\ncoefficients = [[1, 0.1]]', "`initial.coefficients[0]` must be [k, amplitude, phase]"),
    ('density = "fourier"\ncoefficients = []', "`initial.coefficients` must be a non-empty list"),
    ('density = "fourier"\ncoefficients = [[3, 0.7, 0.0], [1, 0.6, 0.0]]',
     "`initial.coefficients` gives a density 1 + Σ a cos(kθ + φ) that is negative: its minimum is"),
    ('density = "fourier"\namplitude = 0.1', "unknown key `initial.amplitude`"),
    ('density = "harmonics"\ncoefficients = [[1, 0, 0.1]]', "`initial` (harmonics) lives on S^2 but `model.dim`=2"),
    ('density = "file"\npath = "nowhere.nc"', "`initial.path` 'nowhere.nc': no such file."),
])
def test_bad_initial_data_names_the_key_and_index(tmp_path, capsys, initial, message):
    cfg = tmp_path / "bad.toml"
    cfg.write_text(_config_text(initial))
    assert main(["run", str(cfg), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "out").exists()


def test_bad_harmonics_rows(tmp_path, capsys):
    cfg = tmp_path / "bad.toml"
    for rows, message in [("[[1, 0, 0.1], [2, 3, 0.1]]", "`initial.coefficients[1]` must be [l, m, amplitude] with l >= 1 "
                                                         "and -l <= m <= l integers, got [2, 3, 0.1]."),
                          ("[[1, 0, 0.9]]", "`initial.coefficients` gives a density 1 + Σ a Y_lm that is negative")]:
        cfg.write_text(_config_text(f'density = "harmonics"\ncoefficients = {rows}', solver='name = "harmonics"\nlmax = 8',
                                    model="beta = 1.0\ndim = 3"))
        assert main(["run", str(cfg), "--out", str(tmp_path / "out")]) == 2
        assert message in capsys.readouterr().err


def test_initial_density_from_a_file(tmp_path, monkeypatch):
    """`density = "file"`: a saved Solution's last state (evaluated from its coefficients) or, in a file
    that holds only the CF grid, the grid values; a new run starts from it at t = 0."""
    import xarray as xr

    import solvers

    monkeypatch.chdir(tmp_path)                       # a relative path is read from the working directory
    first = solvers.FourierCircle(mf.Model(beta=3.0, dim=2), modes=32).solve(
        mf.densities.perturbed_uniform(0.2, 2), [0.0, 0.4], progress=False)
    first.save("first.nc", grid="points")
    cfg = tmp_path / "f.toml"
    cfg.write_text(_config_text('density = "file"\npath = "first.nc"', solver='name = "fourier"\nmodes = 32',
                                model="beta = 3.0\ndim = 2", t="values = [0.0, 0.1]"))
    assert main(["run", str(cfg), "--out", "o1", "--no-progress"]) == 0
    again = mf.load("o1/r.nc")
    assert again.t[0] == 0.0
    np.testing.assert_allclose(again.data[0], first.data[-1], rtol=0, atol=1e-14)
    with xr.open_dataset("first.nc", decode_times=False) as ds:    # keep only the grid (as another tool might)
        ds[["density"]].load().drop_attrs().to_netcdf("grid_only.nc")
    cfg.write_text(cfg.read_text().replace("first.nc", "grid_only.nc"))
    assert main(["run", str(cfg), "--out", "o2", "--no-progress"]) == 0
    np.testing.assert_allclose(mf.load("o2/r.nc").data[0], first.data[-1], rtol=0, atol=1e-13)   # 512 midpoints > 2K+1
    particles = solvers.Particles(mf.Model(beta=3.0, dim=2)).solve(mf.sampling.uniform_points(8, 2, 0), [0.0],
                                                                    progress=False)
    particles.save("p.nc")
    cfg.write_text(cfg.read_text().replace("grid_only.nc", "p.nc"))
    assert main(["run", str(cfg), "--out", "o3"]) == 2


def test_the_command_freezes_its_objects_before_the_process_ends(monkeypatch, capsys):
    """As the command (argv None) main ends with gc.freeze, so that the interpreter's last collections
    skip numba's, scipy's and matplotlib's objects; called from Python with argv it leaves gc alone."""
    import gc

    frozen = []
    monkeypatch.setattr(gc, "freeze", lambda: frozen.append(True))
    assert main(["verify-prop34", "--threads", "0"]) == 2
    assert frozen == []
    monkeypatch.setattr(sys, "argv", ["meanfield", "verify-prop34", "--threads", "0"])
    assert main() == 2
    assert frozen == [True]
    assert "`threads` must be >= 1" in capsys.readouterr().err


def test_phase_diagram_refuses_mix_depth_without_mix(tmp_path, capsys):
    """`--mix-depth` belongs to `--normalization mix`, as `Model` says: another scheme with it exits 2 in
    one line naming the option; under mix it is taken (and defaults to τ = 1)."""
    assert main(["phase-diagram", "--normalization", "pre", "--mix-depth", "2", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "`mix_depth`" in err and "'pre'" in err and len(err.strip().splitlines()) == 1
    from meanfield.experiments.phase_diagram import PhaseDiagramOptions, _layer

    assert _layer(PhaseDiagramOptions(normalization="mix")) == {"normalization": "mix", "mix_depth": 1.0}
    assert _layer(PhaseDiagramOptions(normalization="mix", mix_depth=2.0))["mix_depth"] == 2.0


def test_phase_diagram_quick_under_mix_passes_its_checks(tmp_path):
    """Clustering by t_end at the smallest β is Figure 3's Post-LN expectation: under "mix" the quick run
    reports p_d(t_end, β_min) without that verdict, and its other checks pass (exit 0)."""
    assert main(["phase-diagram", "--quick", "--normalization", "mix", "--no-progress", "--out", str(tmp_path / "m")]) == 0
    s = _summary(tmp_path / "m")
    assert s["passed"] and len(s["checks"]) == 3 and not any("clusters by" in c["name"] for c in s["checks"])
    assert 0.0 <= s["results"]["p_final"][0] <= 1.0
