"""Properties over random models, rotations, permutations, densities and configurations (hypothesis).

Random models: β ∈ [0, 20], (SA) or (USA), V = ±I (docs/mathematics.md §2). The properties:

* the right-hand sides commute with rotations (the kernel e^{β⟨x, y⟩} is rotation invariant):
  FourierCircle (a shift of θ multiplies c_k by e^{−ikα}), SphericalHarmonics (Wigner rotation of
  the a_lm) and Particles (x ↦ Rx);
* the particle field commutes with permutations of the particles (and of their weights), and an
  adaptive particle run with rotations: the same steps, the rotated positions;
* the PDE solvers conserve the mass ∫ρ dσ, and without noise E_β is monotone with the sign of V,
  at the rate of identity (3.6);
* the number of clusters is the number of connected components of the δ-graph;
* W1 is a metric: symmetric, zero on equal measures (also listed in another order), triangle inequality;
* `Model.to_dict`/`from_dict` and `Solution.save`/`meanfield.load` are exact round trips;
* ``meanfield run`` on random mutations of the example configurations either runs (a run longer than
  20 s is stopped as by Ctrl-C, exit status 130) or exits with status 2 and a one-line message that
  names the key, never with a traceback.

The default hypothesis profile (tests/conftest.py) is deterministic with few examples; ``pytest -m
slow`` runs the same properties with the "slow" profile's many random examples.
"""
import contextlib
import copy
import io
import json
import pathlib
import signal
import tomllib

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from scipy.spatial.transform import Rotation

import meanfield as mf
import solvers
from meanfield.transformer.kernels import minimum_degree
from meanfield.representations.fourier import FourierSeries
from meanfield.representations.particles import ParticleCloud
from conftest import HAVE_FEM, uses_fem

ROOT = pathlib.Path(__file__).resolve().parents[1]

models = st.builds(lambda beta, normalized, v, dim: mf.Model(beta=beta, dim=dim, normalized=normalized, V=v),
                   st.floats(0.0, 20.0), st.booleans(), st.sampled_from([1.0, -1.0]), st.just(2))
seeds = st.integers(0, 2 ** 32 - 1)


def _model(model, dim):
    return mf.Model(beta=model.beta, dim=dim, normalized=model.normalized, V=model.v)


def _close(a, b, rtol, scale=1e-300):
    """max|a − b| <= rtol·max(max|b|, scale): ``scale`` is the size of the terms that were summed (a
    field that nearly cancels carries the round-off of its terms, not of its value)."""
    a, b = np.asarray(a), np.asarray(b)
    return float(np.max(np.abs(a - b))) <= rtol * max(float(np.max(np.abs(b))), scale)


def _trig_density(seed, degree=4):
    """c_0..c_degree of ρ = 1 + Σ a_k cos(k(θ − φ_k)) with Σ a_k <= 0.9 (so ρ >= 0.1)."""
    rng = np.random.default_rng(seed)
    a = rng.dirichlet(np.ones(degree)) * rng.uniform(0.0, 0.9)
    phi = rng.uniform(0, 2 * np.pi, degree)
    return np.concatenate([[1.0], 0.5 * a * np.exp(-1j * np.arange(1, degree + 1) * phi)])


def _sphere_points(rng, n, d):
    x = rng.standard_normal((n, d))
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


# -- equivariance of the right-hand sides --------------------------------------------------------
@given(models, seeds, st.floats(0.0, 2 * np.pi))
def test_fourier_rhs_commutes_with_rotations(model, seed, alpha):
    K = max(32, minimum_degree(model.beta, 2) + 1)
    solver = solvers.FourierCircle(model, modes=K, w1=False)
    run = solver.start(_trig_density(seed))
    shift = np.exp(-1j * np.arange(1, K + 1) * alpha)
    rotated = run.rhs(0.0, run.y0 * shift)
    assert _close(rotated, run.rhs(0.0, run.y0) * shift, 1e-10)


@given(models, seeds)
def test_harmonics_rhs_commutes_with_rotations(model, seed):
    from ducc0.sht import rotate_alm

    model = _model(model, 3)
    L = max(16, minimum_degree(model.beta, 3))
    solver = solvers.SphericalHarmonics(model, lmax=L)
    run = solver.start(mf.densities.band_limited(3, 3, rng=seed, floor=0.2))
    psi, theta, phi = np.random.default_rng(seed).uniform(0, np.pi, 3) * [2, 1, 2]
    rot = lambda a: rotate_alm(np.ascontiguousarray(a), L, psi, theta, phi)
    assert _close(run.rhs(0.0, rot(run.y0)), rot(run.rhs(0.0, run.y0)), 1e-9)


@given(models, seeds, st.integers(2, 4), st.integers(2, 24))
def test_particle_field_commutes_with_rotations_and_permutations(model, seed, dim, n):
    model = _model(model, dim)
    rng = np.random.default_rng(seed)
    x = _sphere_points(rng, n, dim)
    w = rng.dirichlet(np.ones(n))
    R = Rotation.random(random_state=seed).as_matrix() if dim == 3 else np.linalg.qr(rng.standard_normal((dim, dim)))[0]
    solver = solvers.Particles(model)
    field = solver.start((x, w)).rhs(0.0, x)
    terms = 1.0 if model.normalized else np.exp(model.beta)     # |w_j e^{β⟨x_i,x_j⟩} V x_j| summed (Σ w_j = 1)
    assert _close(solver.start((x @ R.T, w)).rhs(0.0, x @ R.T), field @ R.T, 1e-11, terms)
    perm = rng.permutation(n)
    assert _close(solver.start((x[perm], w[perm])).rhs(0.0, x[perm]), field[perm], 1e-12, terms)


@given(st.floats(0.0, 10.0), st.sampled_from([1.0, -1.0]), seeds, st.integers(2, 4))
def test_adaptive_particle_run_commutes_with_rotations(beta, v, seed, dim):
    """The adaptive steps measure the error of each point against its norm (one scale per point), so a
    rotated start takes the same steps and ends at the rotated positions ((SA): velocities of size 1)."""
    model = mf.Model(beta=beta, dim=dim, V=v)
    rng = np.random.default_rng(seed)
    x = _sphere_points(rng, 12, dim)
    R = Rotation.random(random_state=seed).as_matrix() if dim == 3 else np.linalg.qr(rng.standard_normal((dim, dim)))[0]
    solver = solvers.Particles(model, diagnostics="none")
    t = [0.0, 0.5, 1.0]
    sol = solver.solve(x, t, rtol=1e-6, atol=1e-9, progress=False)
    turned = solver.solve(x @ R.T, t, rtol=1e-6, atol=1e-9, progress=False)
    assert turned.stats["nfev"] == sol.stats["nfev"] and turned.stats["nsteps"] == sol.stats["nsteps"]
    assert np.abs(turned.positions - sol.positions @ R.T).max() < 1e-12


@given(seeds, st.integers(2, 4), st.integers(1, 60), st.integers(1, 6), st.floats(1e-4, 0.5))
def test_cluster_counts_are_the_connected_components(seed, dim, n, centres, delta):
    """The number of clusters (compiled union–find, and the numpy closure) is the number of connected
    components of i ~ j ⟺ ⟨x_i, x_j⟩ >= 1 − δ, for points spread around a few centres."""
    from scipy.sparse.csgraph import connected_components

    from meanfield.sums import compiled
    from meanfield.observables.diagnostics import count_clusters

    rng = np.random.default_rng(seed)
    c = _sphere_points(rng, centres, dim)
    x = c[rng.integers(0, centres, (5, n))] + rng.uniform(0, 0.2) * rng.standard_normal((5, n, dim))
    x /= np.linalg.norm(x, axis=-1, keepdims=True)
    exact = [connected_components(xi @ xi.T >= 1 - delta)[0] for xi in x]
    assert np.array_equal(count_clusters(x, delta), exact)
    compiled.ENABLED = False
    try:
        assert np.array_equal(count_clusters(x, delta), exact)
    finally:
        compiled.ENABLED = True


# -- conservation and the energy identity ----------------------------------------------------------
@given(models, seeds, st.floats(0.0, 0.2))
def test_mass_is_conserved_and_the_energy_follows_identity_3_6(model, seed, noise):
    """Mass to round-off; dE/dt = s∫Z|v|²ρ (SA), s∫|v|²ρ (USA) plus the noise term; without noise
    E_β(t) is monotone with the sign s of V."""
    model = mf.Model(beta=model.beta, dim=2, normalized=model.normalized, V=model.v, noise=noise)
    K = max(32, minimum_degree(model.beta, 2) + 1)
    speed = 1.0 if model.normalized else max(1.0, np.exp(model.beta) / max(model.beta, 1.0))   # (USA): X ~ e^β/β
    t = np.linspace(0.0, 0.05 / speed, 6)
    try:
        sol = solvers.FourierCircle(model, modes=K, w1=False).solve(_trig_density(seed), t, rtol=1e-10, atol=1e-12)
    except mf.UnderResolved:
        assume(False)          # the density sharpened beyond K modes within t (large β): not this property
    assert np.max(np.abs(sol.mass - 1.0)) <= 1e-13
    d = sol.diagnostics
    assert np.all(d["energy_rate_error"] <= 1e-6)
    if noise == 0.0:
        s = model.v
        assert np.all(s * d["energy_rate"] >= -1e-12 * np.max(np.abs(sol.energy)))
        assert np.all(s * np.diff(sol.energy) >= -1e-12 * np.max(np.abs(sol.energy)))


@given(models, seeds)
def test_harmonics_conserve_mass(model, seed):
    model = _model(model, 3)
    L = max(16, minimum_degree(model.beta, 3))
    try:
        sol = solvers.SphericalHarmonics(model, lmax=L).solve(mf.densities.band_limited(3, 3, rng=seed, floor=0.2),
                                                              [0.0, 0.02, 0.04], on_underresolved="raise")
    except mf.UnderResolved:
        assume(False)
    assert np.max(np.abs(sol.mass - 1.0)) <= 1e-13


# -- W1 is a metric --------------------------------------------------------------------------------
def _measure(rng, n, d):
    return _sphere_points(rng, n, d), rng.dirichlet(np.ones(n))


@given(seeds, st.integers(2, 3), st.integers(1, 12), st.integers(1, 12), st.integers(1, 12))
def test_w1_is_a_metric(seed, d, na, nb, nc):
    rng = np.random.default_rng(seed)
    a, b, c = _measure(rng, na, d), _measure(rng, nb, d), _measure(rng, nc, d)
    ab, ba = mf.wasserstein(a, b), mf.wasserstein(b, a)
    assert abs(ab - ba) <= 1e-12
    assert mf.wasserstein(a, c) <= ab + mf.wasserstein(b, c) + 1e-12
    perm = rng.permutation(na)
    assert abs(mf.wasserstein(a, (a[0][perm], a[1][perm]))) <= 1e-12
    assert ab > 0 or (na == nb == 1 and np.allclose(a[0], b[0]))


# -- round trips -----------------------------------------------------------------------------------
matrices = st.integers(0, 2 ** 32 - 1).map(lambda s: np.random.default_rng(s).standard_normal((3, 3)))


@given(st.floats(0.0, 20.0), st.booleans(), st.floats(0.0, 1.0), st.one_of(st.sampled_from([1.0, -1.0]), matrices),
       st.one_of(st.none(), matrices), st.integers(2, 6))
def test_model_dict_round_trip(beta, normalized, noise, V, Q, dim):
    if not np.isscalar(V) or Q is not None:
        dim = 3
    model = mf.Model(beta=beta, dim=dim, normalized=normalized, V=V, Q=Q, noise=noise)
    again = mf.Model.from_dict(json.loads(json.dumps(model.to_dict())))
    assert again == model and again.to_dict() == model.to_dict()
    np.testing.assert_array_equal(again.V, model.V)
    np.testing.assert_array_equal(again.Q, model.Q)


@given(models, seeds, st.sampled_from(["fourier", "particles"]), st.integers(1, 4))
def test_solution_save_load_round_trip(tmp_path_factory, model, seed, kind, T):
    rng = np.random.default_rng(seed)
    t = np.cumsum(rng.uniform(0.1, 1.0, T)) - 0.1
    if kind == "fourier":
        rep = FourierSeries(6)
        data = np.stack([np.concatenate([[1.0], 0.1 * (rng.standard_normal(6) + 1j * rng.standard_normal(6))])
                         for _ in range(T)])
    else:
        model = _model(model, 3)
        rep = ParticleCloud(rng.dirichlet(np.ones(5)), 3)
        data = np.stack([_sphere_points(rng, 5, 3) for _ in range(T)])
    diags = {"energy_rate": rng.standard_normal(T), "min_density": rng.uniform(0, 1, T)}
    sol = mf.Solution(t, model, rep, data, diags, {"nfev": int(rng.integers(100)), "noise_seed": seed}, status=1,
                      message="stopped: a reason", solver="Test")
    path = tmp_path_factory.mktemp("save") / "s.nc"
    back = mf.load(sol.save(path))
    np.testing.assert_array_equal(back.t, sol.t)
    np.testing.assert_array_equal(back.data, sol.data)
    np.testing.assert_array_equal(back.energy, sol.energy)
    for k, v in diags.items():
        np.testing.assert_array_equal(back.diagnostics[k], v)
    assert back.model == sol.model and back.stats == sol.stats and back.representation.name == rep.name
    assert (back.status, back.message, back.solver) == (1, "stopped: a reason", "Test")


# -- the configuration parser: random mutations of the examples -----------------------------------------
EXAMPLES = {p.stem: tomllib.loads(p.read_text()) for p in sorted((ROOT / "examples").glob("*.toml"))
            if p.stem != "sweep" and (HAVE_FEM or not uses_fem(p))}      # the fem examples need dolfinx
VALUES = [-1, 0, 1, 2, 3, 10 ** 12, -1e-3, 0.5, 1e300, float("nan"), float("inf"), "", "x", "auto", True, False,
          [], [1.0, 2.0], [0.0, 0.0, 1.0], {"a": 1}]
EXTRA_KEYS = {"solver": ["modes", "lmax", "n", "rtol", "atol", "method", "dt", "cfl", "scheme", "seed", "refinement",
                         "vertices", "sampling", "options", "bogus"],
              "model": ["beta", "dim", "normalized", "V", "noise", "Q"],
              "initial": ["density", "kappa", "mean", "amplitude", "degree", "normalize", "seed", "weights"],
              "times": ["t_end", "n_saves", "values"],
              "output": ["name", "plot", "checkpoint", "checkpoint_every", "plot_times", "grid", "unknown"]}


def _tiny(cfg):
    """The example, made cheap: a short run, few saved times, no picture, few particles."""
    cfg["times"] = {"t_end": 0.01, "n_saves": 2}
    out = cfg.setdefault("output", {})
    out["plot"] = False
    out.pop("dir", None)
    out.pop("plot_times", None)
    s = cfg["solver"]
    if "n" in s:
        s["n"] = min(s["n"], 40)
    if s.get("name") == "lagrangian":
        s.pop("nodes", None)
        s["panels"] = 8
    return cfg


mutations = st.tuples(st.sampled_from(sorted(EXAMPLES)), st.sampled_from(["set", "delete", "drop-table"]),
                      st.sampled_from(sorted(EXTRA_KEYS)), st.integers(0, 100), st.sampled_from(range(len(VALUES))))


def _mutate(name, kind, table, key_index, value_index):
    cfg = _tiny(copy.deepcopy(EXAMPLES[name]))
    if kind == "drop-table":
        cfg.pop(table, None)
        return cfg, table
    section = cfg.setdefault(table, {})
    keys = sorted(set(section) | set(EXTRA_KEYS[table]))
    key = keys[key_index % len(keys)]
    if kind == "delete":
        section.pop(key, None)
    else:
        section[key] = VALUES[value_index]
    return cfg, key


def _toml(cfg):
    """Write a configuration back as TOML (tables of scalars, arrays and inline tables)."""
    def value(v):
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, float):
            return "nan" if v != v else ("inf" if v == np.inf else ("-inf" if v == -np.inf else repr(v)))
        if isinstance(v, str):
            return json.dumps(v)
        if isinstance(v, list):
            return "[" + ", ".join(value(x) for x in v) + "]"
        if isinstance(v, dict):
            return "{" + ", ".join(f"{k} = {value(x)}" for k, x in v.items()) + "}"
        return str(v)

    return "\n".join(f"[{t}]\n" + "\n".join(f"{k} = {value(v)}" for k, v in table.items()) + "\n"
                     for t, table in cfg.items())


@given(mutations)
def test_mutated_configs_run_or_fail_with_a_one_line_message(tmp_path_factory, mutation):
    from meanfield.cli import main

    cfg, key = _mutate(*mutation)
    d = tmp_path_factory.mktemp("cfg")
    path = d / "run.toml"
    path.write_text(_toml(cfg))
    out, err = io.StringIO(), io.StringIO()

    def stop(*_):              # a valid but endless run (|V| = 1e12: steps of 1e-12) is stopped like Ctrl-C
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, 20.0)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            status = main(["run", str(path), "--out", str(d / "out"), "--no-progress"])   # a traceback fails the test
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0.0)
        signal.signal(signal.SIGALRM, previous)
    if status == 130:
        return
    if status == 2:
        lines = err.getvalue().strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("meanfield run: error: "), err.getvalue()
        named = {part for w in lines[0].split("`")[1::2] for part in w.replace("[", ".").replace("]", ".").split(".")}
        assert key in named or mutation[2] in named, (key, lines[0])      # the key, or its table
    else:
        assert status in (0, 1), (status, err.getvalue())
        assert (d / "out" / "summary.json").exists()
