"""Passive tracers (``solve(..., tracers=points)``) and the flow map ``Solution.flow`` (docs/tracers.md).

Checked against: the particles themselves (a tracer started at a particle is moved by the same field
under the same stepper); independent solvers of the same smooth problem (Lagrangian labels,
Fourier modes, spherical harmonics); the labels of a Lagrangian run (Φ_t of a label is its node);
exact restarts of fixed-step runs; files; the hand-over to the characteristics.
"""
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import meanfield as mf
import solvers


def unit(rng, n, d):
    x = rng.standard_normal((n, d))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def circle(angles):
    return np.stack([np.cos(angles), np.sin(angles)], axis=-1)


def sphere_rho0(x):
    return 1 + 0.3 * x[..., 2] + 0.2 * x[..., 0] * x[..., 1]


def circle_rho0(x):
    return 1 + 0.4 * x[..., 0] + 0.2 * x[..., 1] ** 3


@settings(max_examples=12, deadline=None)
@given(n=st.integers(2, 24), beta=st.floats(-3.0, 6.0), seed=st.integers(0, 2 ** 16),
       normalized=st.booleans(), dim=st.sampled_from([2, 3, 5]))
def test_tracers_at_the_particles_follow_them(n, beta, seed, normalized, dim):
    """The same field and the same stepper: tracers started at particles stay on them to 1e-12."""
    x = unit(np.random.default_rng(seed), n, dim)
    sol = solvers.Particles(mf.Model(beta, dim, normalized=normalized)).solve(x, [0.0, 0.5, 1.0], tracers=x[::2],
                                                                              rtol=1e-10, atol=1e-12)
    assert sol.tracers.shape == (3, len(x[::2]), dim)
    assert np.max(np.abs(sol.tracers - sol.positions[:, ::2])) <= 1e-12


def test_tracers_at_the_particles_with_general_heads_and_spectral_sums():
    rng = np.random.default_rng(3)
    x = unit(rng, 600, 3)
    Q, K = np.eye(3) + 0.1 * rng.standard_normal((3, 3)), np.eye(3) + 0.1 * rng.standard_normal((3, 3))
    general = solvers.Particles(mf.Model(2.0, 3, Q=Q, K=K)).solve(x[:64], [0.0, 1.0], tracers=x[:64:3])
    assert np.max(np.abs(general.tracers - general.positions[:, ::3])) <= 1e-12
    spectral = solvers.Particles(mf.Model(2.0, 3), sums="spectral").solve(x, [0.0, 1.0], tracers=x[:40])
    # the spectral sums at tracers and at particles err by at most sums_error_bound (relative)
    assert np.max(np.abs(spectral.tracers - spectral.positions[:, :40])) <= 10 * spectral.stats["sums_error_bound"]


def test_sphere_tracers_of_harmonics_and_characteristics_agree():
    """S^2, β = 2, smooth ρ0: the flow map of SphericalHarmonics (lmax 32) and of Lagrangian (2048 labels)
    at t = 1 agree to 1e-9 (1.5e-12 measured), and carrying tracers leaves the mass exact."""
    model = mf.Model(2.0, 3)
    z = unit(np.random.default_rng(0), 8, 3)
    t = [0.0, 0.5, 1.0]
    sh = solvers.SphericalHarmonics(model, 32).solve(sphere_rho0, t, tracers=z, rtol=1e-10, atol=1e-12)
    lag = solvers.Lagrangian(model, estimate=False).solve(sphere_rho0, t, tracers=z)
    assert np.max(np.abs(sh.tracers - lag.tracers)) <= 1e-9
    assert np.max(np.abs(sh.tracers[0] - z)) <= 1e-15
    assert np.max(np.abs(sh.mass - 1.0)) <= 1e-13 and np.max(np.abs(lag.mass - 1.0)) <= 1e-13
    assert np.max(np.abs(np.linalg.norm(lag.tracers, axis=-1) - 1.0)) <= 1e-15


@pytest.mark.parametrize("normalized, beta", [(True, 3.0), (False, 1.0)])
def test_circle_tracers_of_fourier_and_characteristics_agree(normalized, beta):
    """S^1, (SA) at β = 3 and (USA) at β = 1: FourierCircle (128 modes) and Lagrangian tracers agree to
    1e-9 at t = 1."""
    model = mf.Model(beta, 2, normalized=normalized)
    z = circle(np.arange(6.0))
    t = [0.0, 0.5, 1.0]
    fc = solvers.FourierCircle(model, 128).solve(circle_rho0, t, tracers=z, rtol=1e-10, atol=1e-12)
    lag = solvers.Lagrangian(model).solve(circle_rho0, t, tracers=z)
    assert np.max(np.abs(fc.tracers - lag.tracers)) <= 1e-9
    assert np.max(np.abs(fc.tracers - z)) > 1e-2                 # they moved
    assert np.max(np.abs(fc.mass - 1.0)) <= 1e-14


def test_flow_of_the_labels_is_the_label_map():
    """Φ_t of a Lagrangian run's labels, by `Solution.flow`, is where its nodes are (to the run's tolerance)."""
    model = mf.Model(2.0, 3)
    sol = solvers.Lagrangian(model, nodes=512, estimate=False).solve(sphere_rho0, [0.0, 0.5, 1.0])
    labels = sol.representation.labels[::37]
    nodes = np.stack([sol.representation.nodes(d)[0][::37] for d in sol.data])
    assert np.max(np.abs(sol.flow(labels) - nodes)) <= 1e-9
    assert np.max(np.abs(sol.flow(labels, i=1) - nodes[1])) <= 1e-9


def test_flow_of_particles_and_of_a_run_with_tracers():
    model = mf.Model(1.0, 3)
    x = unit(np.random.default_rng(1), 32, 3)
    plain = solvers.Particles(model).solve(x, [0.0, 1.0, 2.0], rtol=1e-10, atol=1e-12)
    assert np.max(np.abs(plain.flow(x[:5]) - plain.positions[:, :5])) <= 1e-8
    fixed = solvers.Particles(model).solve(x, [0.0, 1.0, 2.0], tracers=x[:3], method="euler-maruyama", dt=0.01)
    assert np.array_equal(fixed.flow(x[:3]), fixed.tracers)       # the same run again: bit for bit
    assert fixed.flow(x[:2], i=0).shape == (2, 3)


def test_restart_continues_the_tracers_exactly(tmp_path):
    """A fixed-step run cut at t = 1, saved and continued from the file, equals the whole run to 1e-12;
    ``history=True`` joins the tracers of both parts."""
    P = solvers.Particles(mf.Model(2.0, 3))
    x = unit(np.random.default_rng(2), 48, 3)
    opts = dict(method="euler-maruyama", dt=0.01)
    whole = P.solve(x, np.linspace(0.0, 2.0, 5), tracers=x[:7], **opts)
    first = P.solve(x, np.linspace(0.0, 1.0, 3), tracers=x[:7], **opts)
    path = tmp_path / "first.nc"
    first.save(path)
    again = mf.load(path)
    assert np.array_equal(again.tracers, first.tracers)
    rest = P.solve(path, np.linspace(1.0, 2.0, 3), **opts)
    assert np.max(np.abs(rest.tracers - whole.tracers[2:])) <= 1e-12
    joined = P.solve(first, np.linspace(1.0, 2.0, 3), history=True, **opts)
    assert joined.tracers.shape == whole.tracers.shape
    assert np.max(np.abs(joined.tracers - whole.tracers)) <= 1e-12
    assert np.array_equal(joined[1:3].tracers, joined.tracers[1:3])


def test_adaptive_restart_of_the_characteristics(tmp_path):
    """An adaptive Lagrangian run continued from its file goes on with its tracers, within its tolerance."""
    model = mf.Model(3.0, 2)
    lag = solvers.Lagrangian(model, 512)
    z = circle(np.linspace(0.0, 6.0, 4))
    whole = lag.solve(circle_rho0, [0.0, 1.0, 2.0], tracers=z)
    lag.solve(circle_rho0, [0.0, 1.0], tracers=z).save(tmp_path / "a.nc")
    rest = lag.solve(tmp_path / "a.nc", [1.0, 2.0])
    assert np.max(np.abs(rest.tracers[-1] - whole.tracers[-1])) <= 1e-9


def test_the_hand_over_carries_the_tracers():
    """A circle run at β = 6 handed over to the characteristics at t ≈ 3.2: its tracers follow those of a
    Lagrangian run of 4096 labels to 1e-5 (3.2e-6 measured), in both segments."""
    model = mf.Model(6.0, 2)
    z = circle(np.arange(5.0))
    t = np.linspace(0.0, 12.0, 7)

    def rho0(x):
        return 1 + 0.9 * x[..., 0]

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sol = solvers.FourierCircle(model, 64).solve(rho0, t, tracers=z, on_underresolved="lagrangian")
    assert "handover_t" in sol.stats and len(sol.segments) == 2
    assert [s.tracers.shape[0] for s in sol.segments] == [s.t.size for s in sol.segments]
    ref = solvers.Lagrangian(model, 4096).solve(rho0, t, tracers=z)
    assert np.max(np.abs(sol.tracers - ref.tracers)) <= 1e-5


def test_bad_tracers_are_refused():
    x = unit(np.random.default_rng(4), 8, 3)
    P = solvers.Particles(mf.Model(1.0, 3))
    for bad in (2 * x, np.full((2, 3), np.nan), x[:, :2], np.zeros((0, 3))):
        with pytest.raises(ValueError, match="`tracers`"):
            P.solve(x, [0.0, 1.0], tracers=bad)
    refused = [
        (solvers.Particles(mf.Model(1.0, 3, noise=0.1)), dict()),
        (solvers.Particles(mf.Model(1.0, 3)), dict(method="euler-normalize")),
        (solvers.Particles(mf.Model(1.0, 3, mask="causal")), dict()),
        (solvers.Particles(mf.Model(1.0, 3, normalization="pre")), dict()),
        (solvers.Particles(mf.Model(1.0, 3)), dict(x0=np.stack([x, x]))),
    ]
    for solver, opts in refused:
        with pytest.raises(ValueError, match="`tracers`"):
            solver.solve(opts.pop("x0", x), [0.0, 1.0], tracers=x[:2], **opts)
    with pytest.raises(ValueError, match="`tracers`"):
        solvers.Gegenbauer(mf.Model(1.0, 3), 16).solve(lambda p: 1 + 0.3 * p[..., 2], [0.0, 1.0], tracers=x[:2])
    with_tracers = P.solve(x, [0.0, 0.5], tracers=x[:2])
    with pytest.raises(ValueError, match="`tracers`"):
        P.solve(with_tracers, [0.5, 1.0], tracers=x[:2])
    with pytest.raises(ValueError, match="`tracers`"):
        P.solve(P.solve(x, [0.0, 0.5]), [0.5, 1.0], tracers=x[:2], history=True)
