"""The spectral prefix sums of labels in (σ, x) (`meanfield.sums.spectralsums.layered_zonal_sums`, docs/causal.md
"Spectral prefix sums"): the field of a layered Lagrangian run against its direct sums, the choice of
``sums="auto"``, threads, bad input, and a run through clustering against the direct one (slow)."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import meanfield as mf
import solvers
from meanfield.sums.spectralsums import layered_error_bound, layered_zonal_sums, zonal_sums
from meanfield.transformer.kernels import minimum_degree
from meanfield.transformer.positions import PositionRule
from solvers.layered_lagrangian import layered_velocity_divergence


def causal(beta, dim, lam=1.0, mask="causal", **kw):
    return mf.Model(beta, dim, mask=mask, position_bias=lam, **kw)


def smooth(x, s):
    """A smooth ρ0(x, s) with mass 1 at every position (S^1 and S^2)."""
    if x.shape[-1] == 2:
        theta = np.arctan2(x[..., 1], x[..., 0])
        return 1 + 0.3 * np.cos(theta) * np.sin(np.pi * s) + 0.2 * np.sin(2 * theta) * s
    return 1 + 0.4 * x[..., 2] * np.cos(2 * s) + 0.3 * x[..., 0] * x[..., 1] * s


def moved(y, dim, rng, spread):
    """The labels of a run's state y (M, n, d + 1) moved at random by about ``spread`` (each position its own)."""
    out = y.copy()
    x = out[..., :dim] + spread * rng.normal(size=out[..., :dim].shape)
    out[..., :dim] = x / np.linalg.norm(x, axis=-1, keepdims=True)
    return out


def rates(model, n, M, sums, y=None, **kw):
    run = solvers.Lagrangian(model, n, positions=M, estimate=False, sums=sums, **kw).start(smooth)
    return run, run.rhs(0.0, run.y0 if y is None else y)


# -- the field ------------------------------------------------------------------------------------------
@settings(max_examples=8, deadline=None)
@given(dim=st.sampled_from([2, 3]), beta=st.floats(-4.0, 8.0), lam=st.floats(0.0, 4.0), M=st.sampled_from([8, 16]),
       extra=st.integers(0, 24), normalized=st.booleans(), mask=st.sampled_from(["causal", "causal-strict"]),
       seed=st.integers(0, 2 ** 16))
def test_the_spectral_layered_field_equals_the_direct_one(dim, beta, lam, M, extra, normalized, mask, seed):
    """The right-hand side (velocity and log-Jacobian rate at every label of every position) through the
    spectral prefix sums equals that of the direct sums to 1e-10 relative to its largest entry, at labels
    moved at random, for β ∈ [−4, 8], λ ∈ [0, 4], M, n, (SA)/(USA), both masks; and within the stated bound."""
    rng = np.random.default_rng(seed)
    model = causal(beta, dim, lam, mask, normalized=normalized)
    need = minimum_degree(abs(beta), dim, 1e-8) + 2                 # the fewest labels the solver takes
    n = need + 1 + extra if dim == 2 else 2 * ((need + 2) // 2) ** 2 + extra
    direct, spectral = (solvers.Lagrangian(model, n, positions=M, estimate=False, sums=sums).start(smooth)
                        for sums in ("direct", "spectral"))
    y = moved(direct.y0, dim, rng, 0.3)
    f, g = direct.rhs(0.0, y), spectral.rhs(0.0, y)
    assert np.abs(g - f).max() < 1e-10 * np.abs(f).max()
    assert spectral.sums == "spectral" and direct.sums == "direct"
    assert 0 < spectral.sums_error_bound < 1e-8


def test_the_sums_are_those_of_the_prefix_measure():
    """Zs, G, H at the labels of node i are the unmasked spectral sums of Σ_m W_im Σ_j w_mj δ_{x_mj}
    (W the dense prefix weights, ρ̄ = Wρ) within the transforms' accuracy (2ε of the largest: other transforms
    on S^1, Fourier sums by recurrence): the prefix is taken of the coefficients exactly, own panel included."""
    rng = np.random.default_rng(3)
    rule, n = PositionRule(16, 2.5), 30
    for dim in (2, 3):
        x = rng.normal(size=(16, n, dim))
        x /= np.linalg.norm(x, axis=-1, keepdims=True)
        w = rng.random((16, n))
        sums = zonal_sums(3.0, dim)
        Zs, G, H = layered_zonal_sums(sums, x, w, rule)
        W = rule.prefix_mean(np.eye(16))
        for i in (0, 7, 8, 15):
            ref = sums.sums(x[i], x.reshape(-1, dim), (W[i][:, None] * w).ravel(), laplacian=True)
            for a, b in zip((Zs[i], G[i], H[i]), ref):
                assert np.abs(a - b).max() < 6e-13 * np.abs(b).max() + 1e-16
        assert layered_error_bound(Zs, w, rule) == pytest.approx(np.max(3e-13 * (np.abs(W) @ w.sum(1))[:, None] / Zs))
        assert layered_error_bound(-Zs, w, rule) == np.inf


@pytest.mark.parametrize("dim, n", [(2, 96), (3, 288)])
def test_threads_give_the_same_bits(dim, n):
    model = causal(4.0, dim)
    _, one = rates(model, n, 16, "spectral", threads=1)
    _, two = rates(model, n, 16, "spectral", threads=2)
    assert np.array_equal(one, two)


@pytest.mark.parametrize("dim, n", [(2, 96), (3, 288)])
def test_labels_off_the_sphere_count_by_their_directions(dim, n):
    """The spectral right-hand side takes the labels as they are in the state (no unit copy): at labels scaled
    off the sphere (companion included) it is the right-hand side at their directions, to round-off."""
    run = solvers.Lagrangian(causal(4.0, dim), n, positions=8, sums="spectral").start(smooth)
    y = moved(run.y0, dim, np.random.default_rng(5), 0.1)
    scaled = y.copy()
    scaled[..., :dim] *= np.random.default_rng(6).uniform(0.8, 1.25, y.shape[:2])[..., None]
    want, got = run.rhs(0.0, y), run.rhs(0.0, scaled)
    assert run.system_sums == ["spectral", "spectral"]
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-13 * np.abs(want).max())


def test_a_feed_forward_term_and_sqrt_depth_keep_working():
    """A feed-forward term (local) rides on the spectral sums as on the direct ones (1e-10); under
    "sqrt-depth" the spectral sums do not apply and "auto" takes the direct ones."""
    rng = np.random.default_rng(0)
    mlp = (0.3 * rng.normal(size=(2, 4)), 0.5 * rng.normal(size=(4, 2)), 0.3 * rng.normal(size=4))
    model = causal(2.0, 2, mlp=mlp)
    _, f = rates(model, 128, 8, "direct")
    run, g = rates(model, 128, 8, "spectral")
    assert np.abs(g - f).max() < 1e-10 * np.abs(f).max()
    run, _ = rates(causal(2.0, 2, normalization="sqrt-depth"), 128, 8, "auto")
    assert run.sums == "direct"


# -- the choice of "auto" -------------------------------------------------------------------------------
def test_auto_takes_the_spectral_sums_where_they_are_faster_and_within_tolerance():
    """"auto": direct for few labels (M·n below the crossover), for general attention and for a tolerance
    below the bound; spectral otherwise, with its bound recorded in the Solution's stats."""
    model = causal(4.0, 2)
    assert rates(model, 24, 8, "auto")[0].sums == "direct"                          # M·n = 192 < 256
    run = rates(model, 128, 8, "auto")[0]
    assert run.sums == "spectral" and 0 < run.sums_error_bound < 1e-10
    assert rates(model, 128, 8, "auto", sums_tol=1e-13)[0].sums == "direct"
    general = causal(1.0, 2, Q=np.diag([1.0, 1.5]))
    assert rates(general, 128, 8, "auto")[0].sums == "direct"
    sol = solvers.Lagrangian(model, 128, positions=8).solve(smooth, [0.0, 0.1])
    assert sol.stats["sums"] == "spectral" and 0 < sol.stats["sums_error_bound"] < 1e-10


def test_bad_input_names_sums():
    with pytest.raises(ValueError, match="`sums`.*zonal"):
        solvers.Lagrangian(causal(1.0, 2, Q=np.diag([1.0, 2.0])), 64, positions=8, sums="spectral")
    with pytest.raises(ValueError, match="`sums`"):
        solvers.Lagrangian(causal(1.0, 2), 64, positions=8, sums="fast")
    z = np.ones((8, 4, 2)) / np.sqrt(2)
    with pytest.raises(ValueError, match="`heads`"):
        layered_velocity_divergence(z, np.ones((8, 4)), PositionRule(8), 1.0, heads=[(np.eye(2), np.eye(2))],
                                    sums="spectral")


# -- through clustering (slow) --------------------------------------------------------------------------
@pytest.mark.slow
def test_spectral_and_direct_labels_agree_through_clustering():
    """S^2, (SA), β = 4, λ = 1, M = 8 positions of n = 512 labels, to t = 8 (clusters form): the labels of
    the spectral run and of the direct one agree to 1e-8."""
    model = causal(4.0, 3)
    rho0 = lambda x, s: 1 + 0.6 * x[..., 2] * np.cos(s) + 0.4 * x[..., 0] * x[..., 1]   # noqa: E731
    t = [0.0, 2.0, 8.0]
    runs = [solvers.Lagrangian(model, 512, positions=8, estimate=False, sums=sums).solve(rho0, t)
            for sums in ("spectral", "direct")]
    assert runs[0].stats["sums"] == "spectral" and runs[1].stats["sums"] == "direct"
    assert runs[0].diagnostics["max_density"][-1] > 100
    assert np.abs(np.asarray(runs[0].data[-1]) - np.asarray(runs[1].data[-1]))[..., :3].max() < 1e-8
