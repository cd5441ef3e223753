"""Parameters that change with depth (`meanfield.Schedule`): a run with a schedule is the concatenation of
runs, one per piece; the steps land on the breakpoints; files and restarts carry the schedule."""
import subprocess
import sys

import numpy as np
import pytest

import meanfield as mf
import solvers
from meanfield.experiments.phase_diagram import random_mlp
from solvers.particles import Layers

T_END = 2.0


def schedule(dim, seed=0):
    """Three pieces: the model's parameters, then β and V, then β, Q, K and an MLP (breakpoints off any step grid)."""
    rng = np.random.default_rng(seed)
    Q = np.eye(dim) + 0.2 * rng.standard_normal((dim, dim))
    return mf.Schedule([0.0, 0.53, 1.37], [{}, {"beta": 3.0, "V": -0.5},
                                           {"beta": 1.5, "Q": Q, "K": Q, "mlp": random_mlp(4, dim, rng)}])


def pieces_one_after_the_other(make, model, initial, t_eval, **options):
    """The run of each piece's model alone, each from the last state of the one before, at the saved times."""
    times = [b for b in model.schedule.times[1:] if b < t_eval[-1]] + [t_eval[-1]]
    start, state, out = 0.0, initial, []
    for k, end in enumerate(times):
        within = [start] + [t for t in t_eval if start < t < end] + [end]
        sol = make(model.piece(k)).solve(state, within, **options)
        out += [sol.data[i] for i, t in enumerate(sol.t) if t in t_eval and (not out or t > start)]
        start, state = end, sol
    return np.array(out)


def cloud(n, dim, seed):
    x = np.random.default_rng(seed).standard_normal((n, dim))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_particles_with_fixed_steps_equal_the_pieces_run_one_after_the_other():
    model = mf.Model(beta=1.0, dim=3, schedule=schedule(3))
    t = np.linspace(0.0, T_END, 5)
    make = lambda m: solvers.Particles(m, sums="direct")                     # noqa: E731
    options = dict(method="euler-normalize", dt=0.05)
    sol = make(model).solve(cloud(40, 3, 1), t, **options)
    np.testing.assert_array_equal(sol.t, t)                                 # the breakpoints are not saved
    expected = pieces_one_after_the_other(make, model, cloud(40, 3, 1), t, **options)
    np.testing.assert_allclose(sol.positions, expected, rtol=0, atol=1e-12)
    # steps of 0.05 cut at the saved times and at the breakpoints 0.53, 1.37: 10 + 1 + 10 + 8 + 3 + 10
    assert sol.stats["nfev"] == 42
    assert sol.model == model and sol.model.schedule == model.schedule


@pytest.mark.parametrize("kind", ["fourier", "lagrangian", "harmonics"])
def test_adaptive_continuum_runs_equal_the_pieces_to_the_tolerance(kind):
    dim = 3 if kind == "harmonics" else 2
    sched = schedule(dim)
    sched.pieces[2] = {"beta": 1.5, "mlp": sched.pieces[2]["mlp"]}         # zonal: Q = K = I
    model = mf.Model(beta=1.0, dim=dim, schedule=sched)
    make = {"fourier": lambda m: solvers.FourierCircle(m, 128),
            "lagrangian": lambda m: solvers.Lagrangian(m, 512 if dim == 2 else 800, estimate=False),
            "harmonics": lambda m: solvers.SphericalHarmonics(m, 31)}[kind]
    rho0 = lambda x: 1.0 + 0.5 * x[..., 0]                                 # noqa: E731
    t = np.linspace(0.0, T_END if dim == 2 else 1.0, 5)
    options = dict(rtol=1e-10, atol=1e-12)
    sol = make(model).solve(rho0, t, **options)
    expected = pieces_one_after_the_other(make, model, rho0, t, **options)
    np.testing.assert_array_equal(sol.t, t)
    assert np.max(np.abs(sol.data - expected)) < 1e-9
    plain = make(mf.Model(beta=1.0, dim=dim)).solve(rho0, t, **options)
    assert np.max(np.abs(plain.data[-1] - sol.data[-1])) > 1e-3          # the pieces matter
    if kind != "lagrangian":
        np.testing.assert_allclose(sol.diagnostics["mass"], 1.0, rtol=0, atol=1e-14)


def test_a_killed_run_resumes_through_a_change_of_parameters(tmp_path):
    """Interrupted before the first breakpoint, saved, read back (a fresh model from the file) and resumed:
    the same positions as the uninterrupted run, across both changes of parameters."""
    model = mf.Model(beta=1.0, dim=3, schedule=schedule(3, seed=2))
    t = np.linspace(0.0, T_END, 9)
    options = dict(method="euler-normalize", dt=0.05, progress=False)
    whole = solvers.Particles(model, sums="direct").solve(cloud(30, 3, 4), t, **options)

    killed = solvers.Particles(model, sums="direct")
    calls = [0]
    rhs = killed._euler_velocity

    def dies(run, time, y):
        calls[0] += 1
        if calls[0] > 8:                                                     # t = 0.45, before the break at 0.53
            raise KeyboardInterrupt
        return rhs(run, time, y)

    killed._euler_velocity = dies
    with pytest.raises(mf.Interrupted) as info:
        killed.solve(cloud(30, 3, 4), t, checkpoint=tmp_path / "partial.nc", **options)
    assert info.value.solution.t[-1] < 0.53
    partial = mf.load(tmp_path / "partial.nc")
    assert partial.model == model
    resumed = solvers.Particles(partial.model, sums="direct").solve(partial, t[t >= partial.t[-1]], history=True,
                                                                    **options)
    np.testing.assert_array_equal(resumed.t, t)
    np.testing.assert_allclose(resumed.positions, whole.positions, rtol=0, atol=1e-12)


def test_layers_are_a_schedule_whose_steps_stop_at_each_layer():
    """`solvers.particles.Layers` with an adaptive pair: each layer acts for exactly T (the steps land on kT),
    so the run equals the layers run one after the other to the tolerance."""
    rng = np.random.default_rng(5)
    layers = [[(None, None, rng.standard_normal((3, 3)))] for _ in range(2)]
    x0 = cloud(12, 3, 6)
    options = dict(rtol=1e-11, atol=1e-13)
    sol = solvers.Particles(mf.Model(beta=1.0, dim=3)).solve(x0, [0.0, 0.7, 1.4], parameters=Layers(layers, 0.7),
                                                             **options)
    x = x0
    for heads in layers:
        x = solvers.Particles(mf.Model(beta=1.0, dim=3)).solve(x, [0.0, 0.7], parameters=heads,
                                                               **options).positions[-1]
    np.testing.assert_allclose(sol.positions[-1], x, rtol=0, atol=1e-9)
    assert isinstance(Layers(layers, 0.7), mf.Schedule)


def test_the_schedule_travels_through_files_and_toml(tmp_path):
    model = mf.Model(beta=1.0, dim=2, schedule=schedule(2))
    assert mf.Model.from_attrs(model.to_attrs()) == model
    sol = solvers.Particles(model, sums="direct").solve(cloud(8, 2, 0), [0.0, 1.0], method="euler-normalize", dt=0.1)
    sol.save(tmp_path / "run.nc")
    back = mf.load(tmp_path / "run.nc").model
    for k in range(3):
        assert back.piece(k).to_dict() == model.piece(k).to_dict()
    assert back.piece(2).mlp[0].tolist() == model.piece(2).mlp[0].tolist()         # the arrays, exactly


def test_bad_schedules_name_schedule():
    with pytest.raises(ValueError, match="`schedule`.*increase"):
        mf.Schedule([0.0, 1.0, 1.0], [{}, {}, {}])
    with pytest.raises(ValueError, match="`schedule`.*one piece per time"):
        mf.Schedule([0.0, 1.0], [{}])
    with pytest.raises(ValueError, match="`schedule` piece 1 sets \\['alpha'\\]"):
        mf.Schedule([0.0, 1.0], [{}, {"alpha": 1.0}])
    with pytest.raises(ValueError, match="`schedule` piece 1: .*`mlp`"):
        mf.Model(1.0, 2, schedule=mf.Schedule([0.0, 1.0], [{}, {"mlp": (np.eye(2), np.eye(3), np.zeros(3))}]))
    scheduled = mf.Model(1.0, 3, schedule=mf.Schedule([0.0, 1.0], [{}, {"beta": 2.0}]))
    with pytest.raises(mf.UnsupportedModel, match="`schedule`"):
        solvers.Gegenbauer(scheduled, lmax=16)
    with pytest.raises(ValueError, match="`lmax`"):          # piece 1's β = 40 is not resolved at lmax 16
        solvers.SphericalHarmonics(mf.Model(1.0, 3, schedule=mf.Schedule([0.0, 1.0], [{}, {"beta": 40.0}])),
                                   16).solve(lambda x: 1.0 + 0 * x[..., 0], [0.0, 2.0])
    with pytest.raises(ValueError, match="`parameters`"):
        solvers.Particles(mf.Model(1.0, 3)).solve(cloud(4, 3, 0), [0.0, 1.0],
                                                  parameters=mf.Schedule([0.0], [{"beta": 2.0}]))
    assert Layers([[(None, None, None)]], 1.0).times.tolist() == [0.0]


CONFIG = ('[solver]\nname = "fourier"\nmodes = 64\n\n[model]\nbeta = 1.0\ndim = 2\n'
          'schedule = {{ times = {times}, pieces = [{{ beta = 1.0 }}, {{ beta = 2.0, V = -1.0 }}] }}\n\n'
          '[initial]\ndensity = "perturbed_uniform"\namplitude = 0.1\ndegree = 2\n\n[times]\nt_end = 1.0\n'
          'n_saves = 3\n\n[output]\ngrid = false\n')


def test_cli_exits_2_for_schedule_times_that_do_not_increase(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text(CONFIG.format(times="[0.5, 0.5]"))
    proc = subprocess.run([sys.executable, "-m", "meanfield", "run", str(bad), "--out", str(tmp_path / "b")],
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert "`model.schedule`" in proc.stderr and "increase" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_cli_runs_a_toml_schedule(tmp_path):
    good = tmp_path / "good.toml"
    good.write_text(CONFIG.format(times="[0.0, 0.5]"))
    proc = subprocess.run([sys.executable, "-m", "meanfield", "run", str(good), "--out", str(tmp_path / "g"),
                           "--no-progress"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    sol = mf.load(tmp_path / "g" / "good.nc")
    assert sol.model.schedule.times.tolist() == [0.0, 0.5] and sol.model.piece(1).v == -1.0
    direct = solvers.FourierCircle(sol.model, 64).solve(sol.data[0], sol.t)
    assert np.max(np.abs(direct.data[-1] - sol.data[-1])) < 1e-6            # the file's run is the schedule's


def test_tracers_cross_a_change_of_parameters():
    """Passive tracers go with the run through the breakpoint: the spectral run and the characteristics
    carry them to the same places (a repulsive second piece moves them back)."""
    model = mf.Model(beta=1.0, dim=2, schedule=mf.Schedule([0.0, 0.5], [{}, {"beta": 3.0, "V": -1.0}]))
    rho0 = lambda x: 1.0 + 0.5 * x[..., 0]                                 # noqa: E731
    z = np.array([[0.0, 1.0], [-0.6, -0.8]])
    options = dict(rtol=1e-10, atol=1e-12)
    spectral = solvers.FourierCircle(model, 64).solve(rho0, [0.0, 0.5, 1.0], tracers=z, **options)
    labels = solvers.Lagrangian(model, 256).solve(rho0, [0.0, 0.5, 1.0], tracers=z, **options)
    np.testing.assert_allclose(spectral.tracers, labels.tracers, rtol=0, atol=1e-8)
    assert spectral.tracers[2, 0, 0] < spectral.tracers[1, 0, 0]             # attracted to e1, then pushed away
    with pytest.raises(ValueError, match="`tracers`"):
        mlp = mf.Schedule([0.0, 0.5], [{}, {"mlp": random_mlp(2, 2, np.random.default_rng(0))}])
        solvers.FourierCircle(mf.Model(1.0, 2, schedule=mlp), 64).solve(rho0, [0.0, 1.0], tracers=z)
