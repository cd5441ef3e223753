"""Random parameters in the phase diagram (Figure 5 of the paper): the definitions, per-realisation and
piecewise-constant parameters of the particle solver against separate runs, the authors' diagnostics
(span dimension, cluster sizes) on exact configurations, the authors' step grid, and bad input."""
import importlib

import numpy as np
import pytest

import meanfield as mf
import solvers
from meanfield.cli import main
from meanfield.observables.diagnostics import cluster_sizes, count_clusters, span_dimension
from solvers.particles import Layers
from tolerances import assert_rounding_close

pd = importlib.import_module("meanfield.experiments.phase_diagram")


def _cloud(B, n, d, seed=0):
    return mf.sampling.uniform_points(B * n, d, seed).reshape(B, n, d)


# -- the definitions ------------------------------------------------------------------------------------
@pytest.mark.parametrize("d", [2, 3, 5])
def test_random_parameters_are_the_authors_matrices(d):
    """Each draw is the stated function of the Gaussian matrices read from the same stream."""
    for qk, v in [("gaussian", "identity"), ("goe", "wishart"), ("gaussian", "plus-qk"), ("goe", "minus-qk"),
                  ("identity", "minus-qk"), ("identity", "wishart")]:
        B, V = pd.random_parameters(qk, v, d, np.random.default_rng(7), size=4)
        g = np.random.default_rng(7)
        G = [g.standard_normal((4, d, d)) for _ in range(3)]
        T = np.swapaxes
        if qk == "gaussian":
            ref_B, c, used = G[0] @ G[1] / np.sqrt(d), np.sqrt(d), 2
        elif qk == "goe":
            ref_B, c, used = (G[0] + T(G[0], 1, 2)) / np.sqrt(2), np.sqrt(d + 1), 1
        else:
            ref_B, c, used = None, 1.0, 0
        if ref_B is None:
            assert B is None
        else:
            assert_rounding_close(B, ref_B, terms=d)                  # the same law, perhaps summed in another order
        if v == "wishart":
            assert_rounding_close(V, G[used] @ T(G[used], 1, 2) / np.sqrt(d), terms=d)
            assert np.all(np.linalg.eigvalsh(V) >= -1e-12)                       # positive semi-definite
        elif v in ("plus-qk", "minus-qk"):
            sign = 1.0 if v == "plus-qk" else -1.0
            assert_rounding_close(V, sign * (np.eye(d) if ref_B is None else T(ref_B, 1, 2)) / c, terms=d)
    B, _ = pd.random_parameters("goe", "identity", d, np.random.default_rng(1))
    assert B.shape == (d, d) and np.array_equal(B, B.T)


def test_random_parameters_scale():
    """Entries of B (gaussian) have variance 1 and the GOE diagonal variance 2: 20 000 draws, 5 σ."""
    B, _ = pd.random_parameters("gaussian", "identity", 3, np.random.default_rng(0), size=20000)
    assert abs(B.var() - 1.0) < 5 * np.sqrt(8 / (9 * 20000)) + 0.02
    B, _ = pd.random_parameters("goe", "identity", 3, np.random.default_rng(0), size=20000)
    diag = np.einsum("bii->bi", B)
    assert abs(diag.var() - 2.0) < 0.1 and abs(B[:, 0, 1].var() - 1.0) < 0.06


def test_draw_modes_and_layers():
    kw = dict(dim=3, qk="gaussian", v="wishart", seed=5, layers=3)
    once = [pd.layer_parameters(k, 8, draw="once", **kw) for k in (0, 1)]
    per_beta = [pd.layer_parameters(k, 8, draw="beta", **kw) for k in (0, 1)]
    per_real = pd.layer_parameters(0, 8, draw="realisation", **kw)
    assert len(once[0]) == 3 and once[0][0][0][1].shape == (3, 3)
    for a, b in zip(once[0], once[1]):                                   # the same for every β
        np.testing.assert_array_equal(a[0][1], b[0][1])
    assert not np.array_equal(per_beta[0][0][0][1], per_beta[1][0][0][1])
    assert not np.array_equal(once[0][0][0][1], once[0][1][0][1])        # layers differ
    assert per_real[0][0][1].shape == (8, 3, 3) and per_real[0][0][2].shape == (8, 3, 3)
    assert pd.layer_parameters(0, 8, draw="once", **{**kw, "qk": "identity", "v": "identity"}) is None


# -- the particle solver ---------------------------------------------------------------------------------
def test_per_realisation_parameters_are_separate_runs():
    """A batch whose realisations each carry their own Q, K, V equals B separate runs of those models."""
    rng = np.random.default_rng(0)
    B, n, d = 4, 8, 3
    x0 = _cloud(B, n, d)
    Q, K, V = (rng.standard_normal((B, d, d)) for _ in range(3))
    t = np.linspace(0, 2, 5)
    for kw in (dict(method="euler-normalize", dt=0.1), dict(rtol=1e-10, atol=1e-12)):
        sol = solvers.Particles(mf.Model(beta=2.0, dim=d)).solve(x0, t, parameters=[(Q, K, V)], **kw)
        ref = np.stack([solvers.Particles(mf.Model(beta=2.0, dim=d, Q=Q[b], K=K[b], V=V[b])).solve(
            x0[b], t, **kw).positions for b in range(B)], axis=1)
        tol = 1e-14 if "dt" in kw else 1e-8                  # adaptive: the batch takes its own steps
        np.testing.assert_allclose(np.asarray(sol.positions), ref, rtol=0, atol=tol)


@pytest.mark.parametrize("beta, shift", [(2.0, "none"), (400.0, "running")])
def test_kernel_sums_with_a_stack_of_matrices(beta, shift):
    """kernel_sums with M of shape (B, d, d): each problem's sums with its own M, in both shifts."""
    from meanfield.sums.kernelsums import kernel_sums

    rng = np.random.default_rng(3)
    x = _cloud(5, 7, 3, 4)
    M = rng.standard_normal((5, 3, 3))
    values = rng.standard_normal((5, 7, 4))
    S, c = kernel_sums(x, x, values, beta, M=M, shift=shift)
    for b in range(5):
        Sb, cb = kernel_sums(x[b], x[b], values[b], beta, M=M[b], shift=shift)
        np.testing.assert_allclose(S[b], Sb, rtol=1e-12, atol=1e-300)        # the same shift c_i: the same sums
        np.testing.assert_allclose(c[b] if np.ndim(c) else c, cb, rtol=1e-14)
    with pytest.raises(ValueError, match="`M`"):
        kernel_sums(x, x, values, beta, M=M[:3])
    with pytest.raises(ValueError, match="`M`"):
        kernel_sums(x[0], x[0], values[0], beta, M=M)


def test_layers_are_runs_one_after_the_other():
    """Layers(layers, T): each layer for time T, the same as three runs handing over their end state."""
    rng = np.random.default_rng(1)
    B, n, d = 3, 6, 3
    x0 = _cloud(B, n, d, 2)
    layers = [[(None, rng.standard_normal((B, d, d)), rng.standard_normal((B, d, d)))] for _ in range(3)]
    sol = solvers.Particles(mf.Model(beta=1.5, dim=d)).solve(x0, np.linspace(0, 3, 7), method="euler-normalize",
                                                             dt=0.1, parameters=Layers(layers, 1.0))
    x = x0
    for heads in layers:
        x = solvers.Particles(mf.Model(beta=1.5, dim=d)).solve(x, [0.0, 1.0], method="euler-normalize", dt=0.1,
                                                               parameters=heads).positions[-1]
    np.testing.assert_allclose(np.asarray(sol.positions)[-1], x, rtol=0, atol=1e-13)
    assert sol.stats["nfev"] == 30
    L = Layers(layers, 0.1)
    assert [L.index(t) for t in (0.0, 0.0999999, 0.1 + 0.1 - 0.2 + 0.1, 0.30000000000000004, 9.0)] == [0, 0, 1, 2, 2]


def test_repulsive_value_matrix_as_parameters_is_the_model():
    """identity/minus-qk gives V = −I: the same run as the model with V = −1."""
    x0 = _cloud(5, 8, 3, 3)
    t = np.linspace(0, 3, 4)
    a = solvers.Particles(mf.Model(beta=2.0, dim=3)).solve(
        x0, t, method="euler-normalize", parameters=[(None, None, -np.eye(3))]).positions
    b = solvers.Particles(mf.Model(beta=2.0, dim=3, V=-1.0)).solve(x0, t, method="euler-normalize").positions
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_bad_parameters():
    x0 = _cloud(4, 5, 3)
    p = solvers.Particles(mf.Model(beta=1.0, dim=3))
    with pytest.raises(ValueError, match="`parameters"):
        p.solve(x0, [0, 1], method="euler-normalize", parameters=[(None, np.ones((3, 3, 3)), None)])   # B = 3 ≠ 4
    with pytest.raises(ValueError, match="`parameters"):
        p.solve(x0[0], [0, 1], method="euler-normalize", parameters=[(None, np.ones((4, 3, 3)), None)])
    with pytest.raises(ValueError, match="`parameters"):
        p.solve(x0, [0, 1], method="euler-normalize", parameters=[(None, np.full((3, 3), np.nan), None)])
    with pytest.raises(ValueError, match="`parameters"):
        p.solve(x0, [0, 1], method="euler-normalize", parameters=[])
    with pytest.raises(ValueError, match=r"`parameters\[0\]`: Q and K"):
        p.solve(x0, [0, 1], method="euler-normalize", parameters=[(np.ones((2, 3)), np.ones((4, 3)), None)])
    with pytest.raises(ValueError, match="`period`"):
        Layers([[(None, None, None)]], 0.0)


# -- the authors' diagnostics ----------------------------------------------------------------------------
def test_span_dimension_and_cluster_sizes_exact():
    e = np.eye(4)
    x = np.array([e[0]] * 5 + [e[1]] * 2 + [e[2]])                   # clusters of 5, 2, 1 in a 3-d span
    assert span_dimension(x) == 3
    np.testing.assert_array_equal(cluster_sizes(x, 1e-3), [1, 1, 0, 0, 1, 0, 0, 0])
    y = np.array([[1.0, 0, 0], [np.cos(0.01), np.sin(0.01), 0], [0, 1.0, 0], [0, np.cos(0.3), np.sin(0.3)]])
    assert span_dimension(y, tol=1e-6) == 3 and span_dimension(y[:2], tol=1e-3) == 1   # eigenvalues 2, 5e-5
    rng = np.random.default_rng(4)
    x = rng.standard_normal((20, 24, 3))
    x /= np.linalg.norm(x, axis=-1, keepdims=True)
    sizes = cluster_sizes(x, 0.2)
    np.testing.assert_array_equal(sizes.sum(-1), count_clusters(x, 0.2))
    np.testing.assert_array_equal((sizes * np.arange(1, 25)).sum(-1), 24)
    np.testing.assert_array_equal(span_dimension(x), 3)


# -- the phase diagram ------------------------------------------------------------------------------------
def test_step_times_give_the_authors_300_steps():
    requested = np.linspace(0.0, 30.0, 201)
    t = pd.step_times(requested, 0.1)
    assert np.all(t >= requested - 1e-12) and np.all(t - requested < 0.1)
    np.testing.assert_array_equal(np.round(t / 0.1), np.ceil(np.round(requested / 0.1, 9)))
    assert t[0] == 0.0 and not np.signbit(t[0]) and t[-1] == 30.0
    x0 = _cloud(2, 4, 3)
    sol = pd._solve_beta(0, x0=x0, t=np.unique(t), betas=[1.0], dim=3, normalized=True, scheme="euler-normalize",
                         dt=0.1)
    assert sol.stats["nfev"] == 300


def test_saved_times_cost_no_extra_kernel_sum(monkeypatch):
    """On the step grid the energy and the clustered pairs of a saved time come from the sums of the
    step that starts there: 300 steps and 201 saved times make 301 kernel sums (the last state's own)."""
    from meanfield.sums import compiled

    calls = []
    original = compiled.exp_sums4
    monkeypatch.setattr(compiled, "exp_sums4", lambda *a, **k: (calls.append(1), original(*a, **k))[1])
    t = np.unique(pd.step_times(np.linspace(0.0, 30.0, 201), 0.1))
    sol = solvers.Particles(mf.Model(beta=3.0, dim=3), diagnostics=("energy", "clustered_fraction")).solve(
        _cloud(4, 6, 3), t, method="euler-normalize", dt=0.1, save="diagnostics")
    assert sol.stats["nfev"] == 300 and len(sol.energy) == 201
    assert len(calls) == 301
    x = _cloud(4, 6, 3)                                                  # the energy (3.5) at t = 0, exactly
    ref = np.exp(3.0 * np.einsum("bid,bjd->bij", x, x)).mean(axis=(1, 2)) / 6.0
    np.testing.assert_allclose(np.asarray(sol.energy)[0], ref, rtol=1e-13)


def test_phase_diagram_random_small(tmp_path):
    import xarray as xr

    report = pd.phase_diagram(tmp_path, betas=[1.0, 4.0], realisations=24, n=8, t_end=3.0, n_times=7,
                              scheme="euler-normalize", qk="gaussian", v="wishart", layer_period=1.0,
                              span_dimension=True, cluster_sizes=True, progress=False)
    assert report.passed, report.checks
    with xr.open_dataset(tmp_path / "phase_diagram.nc", decode_times=False) as ds:
        assert ds.attrs["qk"] == "gaussian" and ds.attrs["layer_period"] == 1.0
        assert "first step at or after" in ds.attrs["saved_times"]
        np.testing.assert_allclose(ds["time"], 0.1 * np.ceil(np.linspace(0, 30, 7) - 1e-9), atol=1e-12)
        np.testing.assert_allclose((ds["cluster_sizes"] * ds["size"]).sum("size"), 8.0, rtol=1e-12)
        assert np.all((ds["span_dimension"] >= 1) & (ds["span_dimension"] <= 3))
        assert ds["span_dimension"][:, 0].item(0) == 3.0                 # uniform points span R^3
        assert np.all(np.isfinite(ds["p_stderr"])) and np.all(ds["p"] >= 0) and np.all(ds["p"] <= 1)


@pytest.mark.parametrize("draw, same", [("once", True), ("beta", False), ("realisation", False)])
def test_draw_once_gives_every_beta_the_same_matrices(draw, same):
    """Two equal β: the same rows exactly when the matrices are drawn once for the run."""
    report = pd.phase_diagram(None, betas=[2.0, 2.0], realisations=8, n=6, t_end=2.0, n_times=3,
                              scheme="euler-normalize", qk="goe", v="plus-qk", draw=draw, progress=False)
    p = np.asarray(report.results["p"])
    assert np.array_equal(p[0], p[1]) == same and p[0, -1] > 0


def test_identity_minus_qk_is_the_repulsive_model(tmp_path):
    """The phase diagram's parameter path gives the rows of the plain model with V = −1."""
    x0 = _cloud(6, 8, 3, 9)
    t = pd.step_times(np.linspace(0, 2, 5), 0.1)
    task = dict(x0=x0, t=t, betas=[2.0], dim=3, normalized=True, scheme="euler-normalize", dt=0.1)
    draws = dict(qk="identity", v="minus-qk", draw="realisation", seed=0, layers=1, period=None)
    rows = pd.beta_rows(0, draws=draws, **task)["p"]
    ref = solvers.Particles(mf.Model(beta=2.0, dim=3, V=-1.0), diagnostics=("clustered_fraction",)).solve(
        x0, t, method="euler-normalize", dt=0.1).diagnostics["clustered_fraction"].mean(axis=1)
    np.testing.assert_array_equal(rows, ref)


@pytest.mark.parametrize("flag, value, names", [("--qk", "foo", "'identity', 'gaussian', 'goe'"),
                                                ("--v", "bar", "'identity', 'wishart', 'plus-qk', 'minus-qk'"),
                                                ("--draw", "layer", "'realisation', 'beta', 'once'"),
                                                ("--layer-period", "0", "> 0"),
                                                ("--layer-period", "-2", "> 0")])
def test_cli_bad_random_options(flag, value, names, capsys, tmp_path):
    try:                                     # argparse exits; the options' own check returns 2
        code = main(["phase-diagram", flag, value, "--out", str(tmp_path)])
    except SystemExit as exc:
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err
    assert flag in err or flag[2:].replace("-", "_") in err
    assert names in err and len(err.strip().splitlines()) == 1
