"""Every example configuration runs through ``meanfield run`` (the CLI's `main`, in this process):
exit status 0, ``summary.json`` with status "finished", the Solution and its picture; the causal ones
through the hand-over to the labels, and a run that starts from a layered causal file. A failure
inside a run is not bad input: exit 1, ``summary.json`` says "failed", the files written stay."""
import json
import pathlib
import sys

import numpy as np
import pytest

import meanfield as mf
import solvers
from meanfield.cli import main
from conftest import uses_fem

ROOT = pathlib.Path(__file__).resolve().parents[1]
# examples whose quick run takes more than about 5 s on one core
SLOW = {"causal_sphere"}
RUNS = sorted(p.stem for p in (ROOT / "examples").glob("*.toml") if p.stem != "sweep")


def _summary(out):
    return json.loads((out / "summary.json").read_text())


def _finished(out, name):
    s = _summary(out)
    assert s["status"] == "finished", s["message"]
    assert (out / f"{name}.nc").is_file() and (out / f"{name}.png").is_file()
    return s


@pytest.mark.parametrize("name", [pytest.param(n, marks=[pytest.mark.slow] * (n in SLOW)
                                                + [pytest.mark.fem] * uses_fem(ROOT / "examples" / f"{n}.toml"))
                                  for n in RUNS])
def test_every_example_runs(name, tmp_path, capsys):
    out = tmp_path / name
    assert main(["run", str(ROOT / "examples" / f"{name}.toml"), "--quick", "--out", str(out), "--no-progress"]) == 0
    s = _finished(out, name)
    capsys.readouterr()
    if name.startswith("causal"):              # handed over to the labels, a position coordinate in the file
        sol = mf.load(out / f"{name}.nc")
        assert [seg.representation.name for seg in sol.segments] == ["layered", "layered-lagrangian"]
        assert s["results"]["final_state"]["density"]["max"] < 1e3


@pytest.mark.slow
def test_the_sweep_example_runs(tmp_path, capsys):
    assert main(["sweep", str(ROOT / "examples" / "sweep.toml"), "--quick", "--workers", "0", "--out",
                 str(tmp_path), "--no-progress"]) == 0
    capsys.readouterr()


def test_a_run_from_a_layered_causal_file(tmp_path, capsys):
    """[initial] density = "file" with a layered (causal) Solution: each position starts from its own."""
    model = mf.Model(beta=4.0, dim=2, mask="causal", position_bias=1.0)
    first = solvers.FourierCircle(model, 24, positions=8).solve(
        lambda x, s: 1 + 0.5 * s * x[..., 0], [0.0, 0.2], progress=False)
    first.save(tmp_path / "first.nc")
    cfg = tmp_path / "again.toml"
    cfg.write_text(f"""
[solver]
name = "fourier"
modes = 24
positions = 8
on_underresolved = "lagrangian"
handover = {{ nodes = 48 }}
[model]
beta = 4.0
dim = 2
mask = "causal"
position_bias = 1.0
[initial]
density = "file"
path = "{tmp_path / 'first.nc'}"
[times]
t_end = 0.6
n_saves = 3
""")
    out = tmp_path / "again"
    assert main(["run", str(cfg), "--out", str(out), "--no-progress"]) == 0
    _finished(out, "again")
    sol = mf.load(out / "again.nc")
    x = mf.sphere_quadrature(32, 2).points
    # the first position of the file is the first position of the new run (the same rule)
    np.testing.assert_allclose(sol.density(x, 0, position=0.5), first.density(x, -1, position=0.5), atol=1e-10)
    capsys.readouterr()


def test_an_error_inside_a_run_is_exit_1_with_the_files_kept(tmp_path, capsys, monkeypatch):
    """A programming error after the solve (here: in the final-state report) is exit 1, not the exit 2 of
    bad input; summary.json says "failed" with the error, and the Solution written before it stays."""
    run_module = sys.modules["meanfield.experiments.run"]       # the package exports the function `run`

    def broken(sol):
        raise ValueError("all the input arrays must have same number of dimensions")

    monkeypatch.setattr(run_module, "final_state", broken)
    out = tmp_path / "circle"
    assert main(["run", str(ROOT / "examples" / "circle.toml"), "--quick", "--out", str(out), "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert "meanfield run: failed: ValueError: all the input arrays" in err and str(out) in err
    s = _summary(out)
    assert s["status"] == "failed" and "ValueError" in s["message"]
    assert (out / "circle.nc").is_file()


def test_bad_input_is_still_exit_2(tmp_path, capsys):
    cfg = tmp_path / "bad.toml"
    cfg.write_text((ROOT / "examples" / "circle.toml").read_text().replace("beta = 4.0", "beta = -inf"))
    assert main(["run", str(cfg), "--out", str(tmp_path / "o"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "`model.beta`" in err and len(err.strip().splitlines()) == 1
