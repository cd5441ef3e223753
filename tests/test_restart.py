"""Continuing runs and starting from data.

* A run continued from a saved time (a `Solution`, its file, or the ``history=True`` option) equals
  the uninterrupted run: to 1e-13 for fixed steps (SSP-RK3, the authors' Euler-then-normalise, and
  Euler–Maruyama with a seeded noise, whose draws are keyed by the step's start time), and within
  10·rtol (relative to the state's size) for the adaptive pairs, whose step sequence restarts.
* `meanfield.measures.densities.on_grid`: values on the documented grids are read exactly by the spectral
  solvers (the discrete transform), as a weighted measure by the particles, at the labels by the
  Lagrangian solver, and through the sign-preserving interpolant by the others.
* ``meanfield run --resume DIR`` after a real SIGKILL gives the final state of an uninterrupted run.
"""
import importlib.util
import pathlib
import signal
import subprocess
import sys

import numpy as np
import pytest

import meanfield as mf
import solvers
from meanfield.spaces.quadrature import gauss_legendre, gauss_legendre_grid, trapezoid

ROOT = pathlib.Path(__file__).resolve().parents[1]
T = np.linspace(0.0, 0.6, 7)
SPLIT = 3                      # the run is interrupted at T[SPLIT]


def _sphere_points(n, d, seed):
    x = np.random.default_rng(seed).standard_normal((n, d))
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def _relative(a, b):
    return float(np.max(np.abs(np.asarray(a) - np.asarray(b))) / np.max(np.abs(b)))


def _fem(dim):
    if importlib.util.find_spec("dolfinx") is None:
        pytest.skip("dolfinx (the fem extra) missing")
    if dim == 2:
        return solvers.FiniteElements(mf.Model(beta=2.0, dim=2, noise=0.02), vertices=96)
    return solvers.FiniteElements(mf.Model(beta=1.0, dim=3), refinement=2, width_cells=3.0)


VMF2 = mf.densities.von_mises_fisher([1.0, 0.0], 2.0)
VMF3 = mf.densities.von_mises_fisher([0.0, 0.6, 0.8], 2.0)

# name -> (solver factory, initial, solve options, bound: "exact" (1e-13) or rtol (10·rtol relative))
CASES = {
    "FourierCircle": (lambda: solvers.FourierCircle(mf.Model(beta=3.0, dim=2), modes=48, w1=False),
                      mf.densities.perturbed_uniform(0.1, 2), {"rtol": 1e-9}, 1e-9),
    "FourierCircle-noise-bs32": (lambda: solvers.FourierCircle(mf.Model(beta=2.0, dim=2, noise=0.1), modes=32, w1=False),
                                 VMF2, {"rtol": 1e-8, "method": "bs32"}, 1e-8),
    "SphericalHarmonics": (lambda: solvers.SphericalHarmonics(mf.Model(beta=2.0, dim=3), lmax=24),
                           VMF3, {"rtol": 1e-9}, 1e-9),
    "FiniteElements-S1": (lambda: _fem(2), VMF2, {"dt": 0.02}, "exact"),
    "FiniteElements-S2": (lambda: _fem(3), VMF3, {"dt": 0.05}, "exact"),
    "Particles-dopri5": (lambda: solvers.Particles(mf.Model(beta=2.0, dim=3)), _sphere_points(40, 3, 1),
                         {"rtol": 1e-9}, 1e-9),
    "Particles-euler-normalize": (lambda: solvers.Particles(mf.Model(beta=2.0, dim=3)), _sphere_points(40, 3, 2),
                                  {"method": "euler-normalize", "dt": 0.03}, "exact"),
    "Particles-euler-maruyama": (lambda: solvers.Particles(mf.Model(beta=2.0, dim=3, noise=0.1)),
                                 _sphere_points(30, 3, 3), {"rng": np.random.default_rng(11), "dt": 0.02}, "exact"),
    "Particles-noisy-euler-normalize": (lambda: solvers.Particles(mf.Model(beta=1.0, dim=2, noise=0.05)),
                                        _sphere_points(30, 2, 4), {"method": "euler-normalize", "rng": 5, "dt": 0.05},
                                        "exact"),
    "Lagrangian": (lambda: solvers.Lagrangian(mf.Model(beta=2.0, dim=2), nodes=128), VMF2, {}, 1e-10),
    "Gegenbauer": (lambda: solvers.Gegenbauer(mf.Model(beta=2.0, dim=4), lmax=24),
                   mf.densities.von_mises_fisher([0.0, 0.0, 0.0, 1.0], 2.0), {"rtol": 1e-9}, 1e-9),
}


def _continued(solver, initial, opts, checkpoint=None):
    """(uninterrupted, first part, continuation from the first part's Solution)."""
    opts_full = dict(opts)
    rng = opts.get("rng")
    if isinstance(rng, np.random.Generator):        # a Generator is consumed: give both runs the same state
        state = rng.bit_generator.state
        full = solver.solve(initial, T, progress=False, **opts_full)
        rng.bit_generator.state = state
    else:
        full = solver.solve(initial, T, progress=False, **opts_full)
    first = solver.solve(initial, T[:SPLIT + 1], progress=False, checkpoint=checkpoint, **opts)
    rest = {k: v for k, v in opts.items() if k != "rng"}      # the seed travels with the Solution
    second = solver.solve(first if checkpoint is None else checkpoint, T[SPLIT:], progress=False, **rest)
    return full, first, second


@pytest.mark.parametrize("name", sorted(CASES))
def test_continued_run_equals_the_uninterrupted_run(name):
    make, initial, opts, bound = CASES[name]
    solver = make()
    full, first, second = _continued(solver, initial, opts)
    np.testing.assert_array_equal(first.data, full.data[:SPLIT + 1])
    np.testing.assert_array_equal(second.t, T[SPLIT:])
    if bound == "exact":
        err = np.max(np.abs(second.data - full.data[SPLIT:]))
        assert err <= 1e-13, err
    else:
        for i in range(1, len(T) - SPLIT):
            err = _relative(second.data[i], full.data[SPLIT + i])
            assert err <= 10 * bound, (i, err)


def test_fixed_step_continuation_keeps_the_cfl_step(tmp_path):
    """Without ``dt``, SSP-RK3's step is chosen from the initial state; a continued run reuses the
    recorded step (``sol.stats["dt"]``), not one chosen from the state it continues from."""
    solver = _fem(2)
    full, first, second = _continued(solver, VMF2, {}, checkpoint=tmp_path / "fem.nc")
    assert first.stats["dt"] == full.stats["dt"] == second.stats["dt"]
    assert np.max(np.abs(second.data - full.data[SPLIT:])) <= 1e-13


def test_history_carries_the_whole_run(tmp_path):
    solver = solvers.Particles(mf.Model(beta=2.0, dim=2, noise=0.05))
    x0 = _sphere_points(20, 2, 7)
    full = solver.solve(x0, T, rng=3, dt=0.05, progress=False)
    first = solver.solve(x0, T[:SPLIT + 1], rng=3, dt=0.05, progress=False, checkpoint=tmp_path / "a.nc")
    whole = solver.solve(tmp_path / "a.nc", T[SPLIT:], dt=0.05, history=True, progress=False,
                         checkpoint=tmp_path / "b.nc")
    np.testing.assert_array_equal(whole.t, T)
    assert np.max(np.abs(whole.positions - full.positions)) <= 1e-13
    np.testing.assert_array_equal(mf.load(tmp_path / "b.nc").positions, whole.positions)
    np.testing.assert_array_equal(first.concat(solver.solve(first, T[SPLIT:], dt=0.05, progress=False)).t, T)
    assert whole.stats["noise_seed"] == full.stats["noise_seed"] == 3
    with pytest.raises(ValueError, match=r"`history=True`"):
        solver.solve(x0, T, history=True, rng=3, dt=0.05)
    with pytest.raises(ValueError, match=r"`history`"):
        solver.solve(first, T[SPLIT:], history="yes", dt=0.05)
    with pytest.raises(ValueError, match=r"`t_eval` must start at t="):
        solver.solve(first, T, history=True, dt=0.05)


def _causal_inputs(n, d, seed):
    """Token positions (n,) in (0, 1] and an MLP (W, U, b) of width 4, both different from the defaults."""
    rng = np.random.default_rng(seed)
    mlp = (0.5 * rng.standard_normal((d, 4)), 0.5 * rng.standard_normal((4, d)), 0.1 * rng.standard_normal(4))
    return np.sort(rng.uniform(0.05, 1.0, n)), mlp


def test_a_continuation_keeps_the_token_positions_and_the_mlp_given_to_solve(tmp_path):
    """The token positions and the MLP given to solve travel with the Solution and its file (variables
    input_*), and the continued run equals the uninterrupted one within 10·rtol; without them the
    continuation would fall back to j/n and drop the MLP (differences of order 0.1)."""
    n, d, rtol = 40, 3, 1e-11
    solver = solvers.Particles(mf.Model(beta=2.0, dim=d, mask="causal", position_bias=1.0))
    x0 = _sphere_points(n, d, 3)
    positions, mlp = _causal_inputs(n, d, 4)
    opts = dict(token_positions=positions, mlp=mlp, rtol=rtol, atol=1e-13, progress=False)
    full = solver.solve(x0, T, **opts)
    solver.solve(x0, T[:SPLIT + 1], checkpoint=tmp_path / "a.nc", **opts)
    import xarray as xr
    with xr.open_dataset(tmp_path / "a.nc", decode_times=False) as ds:
        np.testing.assert_array_equal(ds["input_token_positions"].values, positions)
        np.testing.assert_array_equal(ds["input_mlp_U"].values, mlp[1])
    whole = solver.solve(tmp_path / "a.nc", T[SPLIT:], history=True, rtol=rtol, atol=1e-13, progress=False)
    assert _relative(whole.positions[-1], full.positions[-1]) <= 10 * rtol
    forgotten = solver.solve(x0, T, rtol=rtol, atol=1e-13, progress=False)      # what a restart used to give
    assert _relative(forgotten.positions[-1], full.positions[-1]) > 1e-3


def test_a_continuation_without_the_heads_given_to_solve_is_refused():
    solver = solvers.Particles(mf.Model(beta=1.0, dim=2), sums="direct")
    heads = [(np.eye(2), np.eye(2), np.eye(2))]
    first = solver.solve(_sphere_points(10, 2, 1), T[:2], parameters=heads, progress=False)
    with pytest.raises(ValueError, match="`parameters`"):
        solver.solve(first, T[1:], progress=False)
    again = solver.solve(first, T[1:], parameters=heads, progress=False)
    assert again.t[-1] == T[-1]


def test_spectral_history_across_an_automatic_refinement():
    """An automatic-resolution run continued with history: one Solution, times in order, the data of
    the first part carried into the finer representation."""
    solver = solvers.FourierCircle(mf.Model(beta=3.0, dim=2), modes="auto", w1=False)
    rho0 = mf.densities.von_mises_fisher([1.0, 0.0], 40.0)
    first = solver.solve(rho0, T[:SPLIT + 1], rtol=1e-9)
    whole = solver.solve(first, T[SPLIT:], rtol=1e-9, history=True)
    full = solver.solve(rho0, T, rtol=1e-9)
    np.testing.assert_array_equal(whole.t, T)
    assert whole.representation.modes == full.representation.modes
    assert _relative(whole.data[-1], full.data[-1]) <= 1e-8


# -- grid values ----------------------------------------------------------------------------------
RHO_S1 = mf.densities.perturbed_uniform(0.4, 3)
RHO_S2 = mf.densities.perturbed_uniform(0.3, 3, order=-2)


def test_fourier_reads_midpoint_values_exactly():
    """ρ = 1 + 0.4 cos 3θ sampled at n = 16 midpoints: the coefficients of the callable, to round-off;
    the grid's own modes |k| < n/2 only (here 7 of the 32)."""
    solver = solvers.FourierCircle(mf.Model(beta=2.0, dim=2), modes=32, w1=False)
    grid = mf.densities.on_grid(RHO_S1(trapezoid(16).points))
    run = solver.start(grid)
    c = solver._to_data(run, run.y0)
    assert np.max(np.abs(c - solver.coefficients(RHO_S1))) < 1e-15
    # a density with modes up to 12 sampled at 16 points: mode 12 aliases onto mode 4 = 16 − 12
    rough = lambda x: 1 + 0.5 * np.cos(12 * np.arctan2(x[..., 1], x[..., 0]))
    run = solver.start(mf.densities.on_grid(rough(trapezoid(16).points)))
    c = solver._to_data(run, run.y0)
    assert abs(c[4] + 0.25) < 1e-15          # e^{-16iθ_j} = −1 at the midpoints
    assert np.all(c[8:] == 0)


def test_harmonics_read_gauss_legendre_values_exactly():
    solver = solvers.SphericalHarmonics(mf.Model(beta=2.0, dim=3), lmax=16)
    values = RHO_S2(gauss_legendre_grid(8, 16)[2])
    alm = solver.start(mf.densities.on_grid(values)).y0
    assert np.max(np.abs(alm - solver.alm_of(RHO_S2))) < 1e-14
    sol = solver.solve(mf.densities.on_grid(values), [0.0, 0.2])
    ref = solver.solve(RHO_S2, [0.0, 0.2])
    assert _relative(sol.data[-1], ref.data[-1]) < 1e-8


def test_particles_take_the_weighted_grid_measure():
    values = RHO_S2(gauss_legendre_grid(6, 12)[2])
    grid = mf.densities.on_grid(values)
    solver = solvers.Particles(mf.Model(beta=1.0, dim=3))
    run = solver.start(grid)
    x, w = grid.measure()
    np.testing.assert_array_equal(run.y0, x)
    np.testing.assert_allclose(run.weights, w, rtol=1e-15)
    # the weighted measure integrates the degree-<= 11 polynomials like ρσ
    m = [np.sum(w * x[:, k] * x[:, 2]) for k in range(3)]
    moments = gauss_legendre(12, 24).integrate(lambda p: RHO_S2(p)[:, None] * p * p[:, 2:3])
    np.testing.assert_allclose(m, moments, atol=1e-15)


def test_lagrangian_reads_values_at_its_labels():
    """The labels carry the grid values themselves (to the last bit); the run then agrees with the
    run from the callable to round-off (the companion's values are the interpolant's at its labels,
    which are grid points: equal up to the rounding of the interpolation weights)."""
    solver = solvers.Lagrangian(mf.Model(beta=2.0, dim=2), nodes=64)
    grid = mf.densities.on_grid(RHO_S1(trapezoid(64).points))
    run = solver.start(grid)
    np.testing.assert_array_equal(run.rep.weights, solver.start(RHO_S1).rep.weights)
    from_grid = solver.solve(grid, [0.0, 0.3])
    from_callable = solver.solve(RHO_S1, [0.0, 0.3])
    assert np.max(np.abs(from_grid.data - from_callable.data)) < 1e-13


def test_interpolated_grid_values_converge_at_second_order():
    """Finite elements read the sign-preserving (piecewise linear) interpolant: the nodal values
    differ from the exact density by O(h²) in the grid spacing h."""
    solver = _fem(2)
    exact = solver.start(RHO_S1).y0
    errs = [np.max(np.abs(solver.start(mf.densities.on_grid(RHO_S1(trapezoid(n).points))).y0 - exact))
            for n in (64, 256)]
    assert errs[1] < errs[0] / 12, errs
    s2 = _fem(3)
    exact = s2.start(RHO_S2).y0
    errs = [np.max(np.abs(s2.start(mf.densities.on_grid(RHO_S2(gauss_legendre_grid(n, 2 * n)[2]))).y0 - exact))
            for n in (24, 48)]
    assert errs[1] < errs[0] / 3, errs


def test_grid_interpolant_keeps_the_sign_and_the_nodes():
    rng = np.random.default_rng(0)
    values = rng.uniform(0.0, 2.0, (7, 12))
    values[3, 5] = 0.0
    grid = mf.densities.on_grid(values)
    pts = gauss_legendre_grid(7, 12)[2]
    np.testing.assert_allclose(grid(pts), values, rtol=0, atol=1e-14)
    x = _sphere_points(4000, 3, 1)
    v = grid(x)
    assert v.min() >= 0 and v.max() <= values.max() + 1e-14
    pole = grid(np.array([[0.0, 0.0, 1.0], [0.0, 0.0, -1.0]]))
    np.testing.assert_allclose(pole, [values[0].mean(), values[-1].mean()], rtol=1e-14)
    circle = mf.densities.on_grid(rng.uniform(0.0, 1.0, 9))
    np.testing.assert_allclose(circle(trapezoid(9).points), circle.values, rtol=0, atol=1e-15)


@pytest.mark.parametrize("values,match", [
    ([1.0, -0.25, 2.0], r"`values` must be a non-negative density; its minimum on the grid is -0.25"),
    ([0.0, 0.0, 0.0], r"`values` has zero mass: its values on the grid lie in \[0, 0\]"),
    ([1.0, np.nan], r"`values`"),
    (np.ones((2, 2, 2)), r"`values` must have shape"),
])
def test_bad_grid_values_are_refused(values, match):
    with pytest.raises(ValueError, match=match):
        mf.densities.on_grid(values)


def test_grid_values_on_the_wrong_sphere_or_with_the_wrong_mass():
    fc = solvers.FourierCircle(mf.Model(beta=1.0, dim=2), modes=16)
    with pytest.raises(ValueError, match=r"`initial` holds values on a grid of S\^2"):
        fc.start(mf.densities.on_grid(np.ones((4, 8))))
    twice = mf.densities.on_grid(np.full(10, 2.0))
    with pytest.raises(ValueError, match=r"`initial`: the grid values must have mass .* they have 2.0"):
        fc.start(twice)
    assert fc.start(twice, normalize=True).mass0 == 1.0
    assert mf.densities.on_grid(np.full(10, 2.0), normalize=True).mass == 1.0


# -- meanfield run --resume after SIGKILL ----------------------------------------------------------------
CONFIG = """
[solver]
name = "{name}"
{solver}

[model]
beta = 2.0
dim = {dim}
V = {V}
noise = {noise}

[initial]
density = "von_mises_fisher"
mean = {mean}
kappa = 2.0

[times]
t_end = {t_end}
n_saves = {n_saves}

[output]
name = "run"
plot = false
checkpoint_every = 0.0
"""


def _cli(*args):
    return [sys.executable, "-m", "meanfield.cli", *map(str, args)]


def _kill_midway(args, partial, saves):
    """Run ``meanfield ARGS`` and SIGKILL it right after its checkpoint holds ``saves`` saved times (the
    run says when: tests/signal_driver.py), never after a fixed time. Returns the checkpoint's last time."""
    proc = subprocess.run([sys.executable, str(ROOT / "tests" / "signal_driver.py"), "KILL", str(saves), "1", "--",
                           *map(str, args)], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == -signal.SIGKILL, proc.stdout + proc.stderr
    return float(mf.load(partial).t[-1])


@pytest.mark.parametrize("kind", ["particles-noise", pytest.param("fourier", marks=pytest.mark.slow)])
def test_resume_after_sigkill_equals_the_uninterrupted_run(tmp_path, kind):
    if kind == "fourier":
        spec = dict(name="fourier", solver="modes = 64\nrtol = 1e-9", dim=2, V=-1.0, noise=0.05, mean=[1.0, 0.0],
                    t_end=2.0, n_saves=61)
    else:
        spec = dict(name="particles", solver='n = 200\nscheme = "euler-normalize"\ndt = 0.004\nseed = 4', dim=3,
                    V=1.0, noise=0.05, mean=[0.0, 0.0, 1.0], t_end=1.0, n_saves=31)
    cfg = tmp_path / "run.toml"
    cfg.write_text(CONFIG.format(**spec))
    killed, whole = tmp_path / "killed", tmp_path / "whole"
    t_kill = _kill_midway(["run", cfg, "--out", killed, "--no-progress"], killed / "run.partial.nc", spec["n_saves"] // 3)
    assert not (killed / "run.nc").exists()
    resumed = subprocess.run(_cli("run", cfg, "--resume", killed, "--no-progress"), cwd=ROOT, capture_output=True,
                             text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    t_resumed = float(resumed.stdout.split("resumed from t = ")[1].split()[0])
    assert t_kill - 1e-6 <= t_resumed < spec["t_end"]     # the checkpoint it left (it ran on until the signal landed)
    from meanfield.experiments import run

    assert run(cfg, whole, progress=False).passed           # the uninterrupted run, in this process
    a, b = mf.load(killed / "run.nc"), mf.load(whole / "run.nc")
    np.testing.assert_array_equal(a.t, b.t)
    assert not (killed / "run.partial.nc").exists() and (killed / "summary.json").exists()
    if kind == "fourier":
        assert _relative(a.data[-1], b.data[-1]) <= 10 * 1e-9
    else:
        assert np.max(np.abs(a.positions[-1] - b.positions[-1])) <= 1e-13


def test_resume_refuses_a_directory_without_a_run(tmp_path):
    cfg = tmp_path / "run.toml"
    cfg.write_text(CONFIG.format(name="fourier", solver="modes = 32", dim=2, V=1.0, noise=0.0, mean=[1.0, 0.0],
                                 t_end=0.1, n_saves=3))
    r = subprocess.run(_cli("run", cfg, "--resume", tmp_path / "nothing"), cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 2 and "`--resume`" in r.stderr and len(r.stderr.strip().splitlines()) == 1
