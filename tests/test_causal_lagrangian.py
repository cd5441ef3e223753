"""Labels in (σ, x): `solvers.Lagrangian` of a masked model (docs/causal.md, "Through clustering"): the
causal prefix sums against the dense prefix weights, against the layered spectral solvers, exact masses,
the hand-over of a layered run through clustering against masked particles, files, restarts, bad input."""
import warnings

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import meanfield as mf
import solvers
from meanfield.transformer.positions import PositionRule
from solvers.handover import HandOver
from solvers.lagrangian import velocity_divergence
from solvers.layered_lagrangian import layered_velocity_divergence
from test_causal_continuum import quasi_tokens, signal


def causal(beta=1.0, dim=2, normalized=True, lam=1.0, mask="causal", **kw):
    return mf.Model(beta, dim, normalized=normalized, mask=mask, position_bias=lam, **kw)


def smooth(x, s):
    """A smooth ρ0(x, s) with mass 1 at every position (S^1 and S^2)."""
    if x.shape[-1] == 2:
        theta = np.arctan2(x[..., 1], x[..., 0])
        return 1 + 0.3 * np.cos(theta) * np.sin(np.pi * s) + 0.2 * np.sin(2 * theta) * s
    return 1 + 0.4 * x[..., 2] * np.cos(2 * s) + 0.3 * x[..., 0] * x[..., 1] * s


def on_circle(n):
    theta = 2 * np.pi * np.arange(n) / n + 0.1
    return np.stack([np.cos(theta), np.sin(theta)], -1)


def first_moment(mu):
    return mu[1] @ mu[0]


# -- the field ----------------------------------------------------------------------------------------
@settings(max_examples=12, deadline=None)
@given(dim=st.sampled_from([2, 3]), lam=st.floats(0.0, 4.0), beta=st.floats(-3.0, 3.0),
       normalized=st.booleans(), general=st.booleans(), seed=st.integers(0, 2 ** 16))
def test_the_layered_field_is_that_of_the_prefix_mean(dim, lam, beta, normalized, general, seed):
    """X_{s_i} and div_S X_{s_i} from the causal sums equal the unmasked field of the measure
    Σ_m W_im Σ_j w_mj δ_{x_mj}, W the dense prefix weights of the rule (ρ̄ = W ρ), to 1e-12."""
    rng = np.random.default_rng(seed)
    rule, n = PositionRule(16, lam), 12
    z = rng.normal(size=(16, n, dim))
    z /= np.linalg.norm(z, axis=-1, keepdims=True)
    w = rng.random((16, n))
    w /= w.sum(1, keepdims=True)
    heads = None
    if general:
        Q, V = np.eye(dim) + 0.3 * rng.normal(size=(2, dim, dim))
        heads = [(Q.T @ Q, V)]
    X, div = layered_velocity_divergence(z, w, rule, beta, normalized=normalized, v=1.3, heads=heads)
    W = rule.prefix_mean(np.eye(16))
    for i in range(16):
        ref = velocity_divergence(z[i], z.reshape(-1, dim), (W[i][:, None] * w).ravel(), beta,
                                  normalized=normalized, v=1.3, heads=heads)
        scale = 1 + np.abs(ref[1]).max()
        assert np.abs(X[i] - ref[0]).max() < 1e-12 * scale
        assert np.abs(div[i] - ref[1]).max() < 1e-12 * scale


# -- against the layered spectral solvers ------------------------------------------------------------
def test_against_the_layered_fourier_circle():
    """S^1, (SA), λ = 1, smooth ρ0(x, s) to t = 1: the densities agree with FourierCircle's to 2e-6 at
    positions between nodes too, and the mass of every position is exact."""
    model = causal(1.0, 2)
    t = [0.0, 0.5, 1.0]
    lag = solvers.Lagrangian(model, 128, positions=16).solve(smooth, t)
    ref = solvers.FourierCircle(model, 64, positions=16).solve(smooth, t)
    x = on_circle(50)
    for s in (0.1, 0.37, 0.5, 1.0):
        assert np.abs(lag.density(x, -1, position=s) - ref.density(x, -1, position=s)).max() < 2e-6
    assert np.abs(lag.density(x, -1) - ref.density(x, -1)).max() < 2e-6
    masses = np.array([lag.representation.mass(d, per_position=True) for d in lag.data])
    assert np.abs(masses - 1).max() < 1e-14
    assert lag.representation.name == "layered-lagrangian"


def test_against_the_layered_spherical_harmonics():
    """S^2, (USA), causal-strict, λ = 2, smooth ρ0(x, s) to t = 1: the first moments at each position agree
    with SphericalHarmonics' to 1e-6 and the kernel distance D_4 is below 1e-5."""
    model = causal(1.0, 3, normalized=False, lam=2.0, mask="causal-strict")
    t = [0.0, 1.0]
    lag = solvers.Lagrangian(model, 200, positions=8).solve(smooth, t)
    ref = solvers.SphericalHarmonics(model, 24, positions=8).solve(smooth, t)
    for s in (0.1, 0.5, 1.0):
        a, b = lag.measure(-1, position=s), ref.measure(-1, position=s)
        assert np.abs(first_moment(a) - first_moment(b)).max() < 1e-6
        assert mf.kernel_distance(a, b) < 1e-5
    assert np.abs(lag.representation.mass(lag.data[-1], per_position=True) - 1).max() < 1e-14


def test_a_feed_forward_term_against_the_layered_fourier_circle():
    """A random MLP of width 4 (a local term, as for one density): densities agree with FourierCircle's to
    2e-6 at t = 0.3 at the position nodes (256 labels per position)."""
    rng = np.random.default_rng(0)
    mlp = (0.3 * rng.normal(size=(2, 4)), 0.5 * rng.normal(size=(4, 2)), 0.3 * rng.normal(size=4))
    model = causal(1.0, 2, mlp=mlp)
    lag = solvers.Lagrangian(model, 256, positions=8).solve(smooth, [0.0, 0.3])
    ref = solvers.FourierCircle(model, 128, positions=8).solve(smooth, [0.0, 0.3], rtol=1e-10, atol=1e-12)
    x = on_circle(30)
    for s in lag.representation.positions[[0, 4, 7]]:         # at the nodes (between them each interpolates)
        assert np.abs(lag.density(x, -1, position=s) - ref.density(x, -1, position=s)).max() < 2e-6


def test_a_density_of_x_alone_moves_like_the_unmasked_equation():
    """ρ0 independent of σ stays so: ρ̄(σ) = ρ (the prefix weights sum to 1), and every position moves like
    the unmasked Lagrangian on the same labels (to 1e-9)."""
    masked = solvers.Lagrangian(causal(2.0, 2, lam=3.0), 96, positions=8, estimate=False)
    plain = solvers.Lagrangian(mf.Model(2.0, 2), 96, estimate=False)
    rho0 = lambda x: signal(np.arctan2(x[..., 1], x[..., 0])) / 1.0   # noqa: E731
    a = masked.solve(rho0, [0.0, 2.0])
    b = plain.solve(rho0, [0.0, 2.0])
    assert np.abs(a.data[-1] - b.data[-1][None]).max() < 1e-9


def test_the_two_masks_have_one_continuum():
    t = [0.0, 0.5]
    a = solvers.Lagrangian(causal(1.0, mask="causal"), 64, positions=8).solve(smooth, t)
    b = solvers.Lagrangian(causal(1.0, mask="causal-strict"), 64, positions=8).solve(smooth, t)
    assert np.array_equal(a.data[-1], b.data[-1])


# -- files, restart, pictures -------------------------------------------------------------------------
def test_file_round_trip_and_exact_restart(tmp_path):
    """The file holds the labels of every position (a `position` coordinate) and reads back exactly; a
    run continued from its Solution equals the run in one go (same steps: to 1e-10)."""
    solver = solvers.Lagrangian(causal(1.0, 2), 64, positions=8)
    sol = solver.solve(smooth, [0.0, 0.5])
    path = tmp_path / "layered.nc"
    sol.save(path)
    back = mf.load(path)
    assert np.array_equal(np.asarray(back.data[-1]), np.asarray(sol.data[-1]))
    x = on_circle(16)
    assert np.array_equal(back.density(x, -1, position=0.3), sol.density(x, -1, position=0.3))
    xr = pytest.importorskip("xarray")
    with xr.open_dataset(path) as ds:
        assert ds["position"].attrs["units"] == "1" and ds.sizes["position"] == 8
    on = solver.solve(back, [0.5, 1.0])
    whole = solver.solve(smooth, [0.0, 0.5, 1.0])
    assert np.abs(np.asarray(on.data[-1]) - np.asarray(whole.data[-1])).max() < 1e-10


def test_position_map_of_a_labelled_run():
    """ρ over (position, angle), as a layered spectral run draws it: at the nodes the labels' density."""
    sol = solvers.Lagrangian(causal(1.0, 2), 64, positions=8).solve(smooth, [0.0, 0.2])
    sigma, angle, rho = sol.representation.position_map(sol.data[-1], n=32, position_count=16)
    assert rho.shape == (16, 32) and np.all(rho > 0)
    x = np.stack([np.cos(angle), np.sin(angle)], -1)
    assert np.allclose(rho[7], sol.density(x, -1, position=sigma[7]))


# -- the hand-over ------------------------------------------------------------------------------------
def test_a_layered_run_hands_over():
    """A layered FourierCircle run at β = 4 that stops resolving its densities goes on along labels in
    (σ, x) on its own position rule; the masses per position stay exact and ρ keeps growing."""
    model = causal(4.0, 2)
    rho0 = lambda x: signal(np.arctan2(x[..., 1], x[..., 0]))   # noqa: E731
    sol = solvers.FourierCircle(model, 24, positions=8).solve(rho0, [0.0, 1.0, 3.0], on_underresolved={"nodes": 64})
    first, second = sol.segments
    assert first.representation.name == "layered" and second.representation.name == "layered-lagrangian"
    assert 0 < sol.stats["handover_t"] < 3.0
    assert np.array_equal(second.representation.positions, first.representation.positions)
    assert np.abs(second.representation.mass(second.data[-1], per_position=True) - 1).max() < 1e-12
    assert sol.diagnostics["max_density"][-1] > 5
    assert sol.representation.resolution_label() == "K = 24 modes → 64 moving nodes per position, M = 8 positions"


def test_auto_hands_over_a_layered_harmonics_run_with_a_warning():
    """SphericalHarmonics' default hand-over ("auto") takes a masked model too (here a strict tail_tol
    makes it hand over early, at t ≈ 0.31), with the labels' default: 2(lmax + 2)² capped at 512 per position."""
    model = causal(4.0, 3)
    rho0 = lambda x: 1 + 0.5 * x[..., 2]   # noqa: E731
    with pytest.warns(HandOver):
        sol = solvers.SphericalHarmonics(model, 21, positions=8, tail_tol=1e-12).solve(rho0, [0.0, 0.45])
    assert sol.segments[-1].representation.name == "layered-lagrangian"
    assert sol.stats["nodes"] == 512 and 0 < sol.stats["handover_t"] < 0.45


@pytest.mark.slow
def test_through_clustering_against_masked_particles():
    """(SA), S^1, β = 4, λ = 1, the quasi-random tokens of `signal`: the layered run hands over near t = 2.3
    and clusters (max ρ > 100 at t = 8). The mean direction of the tokens in each quarter of positions
    agrees with the continuum's to 1.5e-2 at t = 4 for n = 4096 (1e-2 in the last three quarters), and the
    error falls with n (1024, 4096, 16384) at every time and quarter: what is left is the particles'."""
    model = causal(4.0, 2)
    t = [0.0, 4.0, 6.0, 8.0]
    rho0 = lambda x: signal(np.arctan2(x[..., 1], x[..., 0]))   # noqa: E731
    sol = solvers.FourierCircle(model, 48, positions=16).solve(rho0, t, on_underresolved="lagrangian")
    assert 2.0 < sol.stats["handover_t"] < 2.6
    assert sol.diagnostics["max_density"][-1] > 100
    g, gw = np.polynomial.legendre.leggauss(12)
    continuum = np.array([[sum(w / 2 * first_moment(sol.measure(i, position=(q + 0.5 + 0.5 * gi) / 4))
                               for gi, w in zip(g, gw)) for q in range(4)] for i in range(1, len(t))])
    errors = {}
    for n in (1024, 4096, 16384):
        x = solvers.Particles(model, diagnostics="none").solve(quasi_tokens(n), t).positions[1:]
        means = x.reshape(len(t) - 1, 4, n // 4, 2).mean(2)
        errors[n] = np.abs(means - continuum).max(-1)
    assert np.all(errors[4096][0] < 1.5e-2) and np.all(errors[4096][0, 1:] < 1e-2)
    assert np.all(errors[1024] > errors[4096]) and np.all(errors[4096] > errors[16384])


# -- bad input ----------------------------------------------------------------------------------------
def test_positions_are_checked():
    with pytest.raises(ValueError, match="`positions`"):
        solvers.Lagrangian(causal(1.0), 64)
    with pytest.raises(ValueError, match="`positions`"):
        solvers.Lagrangian(mf.Model(1.0, 2), 64, positions=8)
    with pytest.raises(ValueError, match="`positions`"):
        solvers.Lagrangian(causal(1.0), 64, positions=12)
    with pytest.raises(ValueError, match="`positions`"):
        solvers.Lagrangian(causal(1.0), 64, positions="auto")
    with pytest.raises(ValueError, match="`sums`.*zonal"):          # the spectral prefix sums: zonal models only
        solvers.Lagrangian(causal(1.0, Q=np.diag([1.0, 2.0])), 64, positions=8, sums="spectral")
    with pytest.raises(ValueError, match="`sums`.*normalization"):
        solvers.Lagrangian(causal(1.0, normalization="sqrt-depth"), 64, positions=8, sums="spectral")
    with pytest.raises(mf.UnsupportedModel, match="`normalization`"):
        solvers.Lagrangian(causal(1.0, normalization="ngpt"), 64, positions=8)
    with pytest.raises(ValueError, match="`rho0`.*position s="):
        solvers.Lagrangian(causal(1.0), 64, positions=8).solve(lambda x, s: (1 + s) * np.ones(len(x)), [0, 1])
    with pytest.raises(ValueError, match="`solve_adaptive`"):
        solvers.Lagrangian(causal(1.0), 64, positions=8).solve_adaptive(smooth, [0, 1])
