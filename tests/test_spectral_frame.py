"""The compiled passes of the spectral sums on S^2 and S^1 (angles, the field in the points' frame) and of the median
of `w1_to_dirac` against the numpy formulas they replace, to round-off."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import meanfield as mf
import solvers
from meanfield.observables.wasserstein import w1_to_dirac
from meanfield.sums import compiled
from meanfield.sums.spectralsums import EPSILON, ZonalSums, error_bound, sphere_angles, tangent_vectors
from solvers.lagrangian import COMPANION_EPSILON, spectral_field, velocity_divergence

pytest.importorskip("numba")


def points(n, seed, scale=True):
    """Points of R^3 off the unit sphere, with the poles, the date line (φ = π, y = ±0) and the axes among them."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 3)) * (rng.random((n, 1)) * 3 + 0.1 if scale else 1.0)
    x[:8] = [[0, 0, 1], [0, 0, -2], [-1, 0, 0.5], [-1, -0.0, -0.5], [1, 0, 0], [0, 1, 0], [0, -1, 0], [-1e-3, 0, 1]]
    return x


@pytest.mark.parametrize("threads", [1, 2])
def test_compiled_angles_are_numpys_to_a_few_ulp(threads, monkeypatch):
    """The compiled angles and frame (a vectorised atan2 within 3 ulp of numpy's) equal numpy's to 1e-15,
    for points of any length, in parts on any number of threads, also from a view of wider rows."""
    x = points(5000, 1)
    wide = np.concatenate([x, np.ones((len(x), 1))], axis=1)[:, :3]
    fast = [sphere_angles(x, threads), sphere_angles(wide, threads)]
    monkeypatch.setattr(compiled, "ENABLED", False)
    loc, frame = sphere_angles(x, threads)
    for floc, fframe in fast:
        np.testing.assert_allclose(floc, loc, rtol=0, atol=2e-15)
        np.testing.assert_allclose(np.array(fframe), np.array(frame), rtol=0, atol=2e-15)
    assert loc[:, 1].min() >= 0 and fast[0][0][:, 1].max() < 2 * np.pi
    np.testing.assert_array_equal(fast[0][0][:3], [[0, 0], [np.pi, 0], [np.arctan2(1, 0.5), np.pi]])


@pytest.mark.parametrize("normalized", [True, False])
@pytest.mark.parametrize("beta", [0.5, 4.0, -2.0])
def test_field_in_the_frame_is_the_field_of_the_sums(normalized, beta, monkeypatch):
    """`ZonalSums.frame_sums` gives the syntheses of `ZonalSums.sums` before the frame is applied (the same bits),
    and `compiled.frame_field` the field of `spectral_field` from them to 1e-15 relative, compiled or not."""
    x = points(3000, 2, scale=False)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    w = np.random.default_rng(3).random(len(x))
    sums = ZonalSums(beta, 3)
    Zs, g, H, frame = sums.frame_sums(x, w=w)
    Zs0, G0, H0 = sums.sums(x, x, w, laplacian=True)
    np.testing.assert_array_equal(Zs, Zs0)
    np.testing.assert_array_equal(H, H0)
    np.testing.assert_array_equal(tangent_vectors(g, frame), G0)
    X0, div0 = spectral_field(Zs0, G0, H0, beta, normalized, -0.7)
    for enabled in (True, False):
        monkeypatch.setattr(compiled, "ENABLED", enabled)
        out = compiled.frame_field(Zs, g, H, frame, beta, normalized, -0.7, np.empty((len(x), 4)))
        np.testing.assert_allclose(out[:, :3], X0, rtol=0, atol=1e-15 * np.abs(X0).max())
        np.testing.assert_allclose(out[:, 3], div0, rtol=0, atol=1e-15 * np.abs(div0).max())


@pytest.mark.parametrize("normalized", [True, False])
def test_field_on_the_circle_is_the_field_of_the_sums(normalized, monkeypatch):
    """On S^1, `ZonalSums.frame_sums` gives the syntheses of `ZonalSums.sums` in the frame (cos θ, sin θ) (the
    same bits), and `compiled.frame_field` the field of `spectral_field` from them to 1e-15 relative, compiled or
    not."""
    theta = np.random.default_rng(4).uniform(-np.pi, np.pi, 2000)
    x = np.stack([np.cos(theta), np.sin(theta)], axis=1)
    sums, w = ZonalSums(4.0, 2), np.full(len(x), 1 / len(x))
    Zs, G, H = sums.sums(x, x, w, laplacian=True)
    Zs1, g, H1, frame = sums.frame_sums(x, w=w)
    np.testing.assert_array_equal(Zs1, Zs)
    np.testing.assert_array_equal(H1, H)
    for a, b in zip(sums.frame_sums(x * 1.5, w=w), (Zs1, g, H1, frame)):     # off the circle: the directions count
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-14 * np.abs(b).max())
    np.testing.assert_allclose(g[0][:, None] * np.stack([-frame[1], frame[0]], axis=1), G, rtol=0, atol=1e-16)
    X0, div0 = spectral_field(Zs, G, H, 4.0, normalized, 1.3)
    for enabled in (True, False):
        monkeypatch.setattr(compiled, "ENABLED", enabled)
        out = compiled.frame_field(Zs, g, H, frame, 4.0, normalized, 1.3, np.empty((len(x), 3)))
        np.testing.assert_allclose(out[:, :2], X0, rtol=0, atol=1e-15 * np.abs(X0).max())
        np.testing.assert_allclose(out[:, 2], div0, rtol=0, atol=1e-15 * np.abs(div0).max())


@pytest.mark.parametrize("normalized", [True, False])
def test_lagrangian_right_hand_side_in_place(normalized):
    """The labels' spectral right-hand side written in place from their directions (fine labels and companion)
    is the field of `velocity_divergence` at the normalised labels to round-off, and the direct one's to the
    stated accuracy: 1e-11 relative for the fine labels (ε = 3e-13), ε = 1e-10 for the companion
    (`COMPANION_EPSILON`), within the bound of `error_bound` (1.7e-7 here)."""
    model = mf.Model(beta=4.0, dim=3, normalized=normalized)
    run = solvers.Lagrangian(model, 800, sums="spectral", threads=1).start(lambda x: 1 + 0.3 * x[..., 0])
    y = run.y0 * np.linspace(0.9, 1.1, len(run.y0))[:, None]       # off the sphere: the directions count
    rates = run.rhs(0.0, y)
    x = y[:, :3] / np.linalg.norm(y[:, :3], axis=1, keepdims=True)
    for (sl, w), kind, eps in zip(run.systems, run.system_sums, (EPSILON, COMPANION_EPSILON)):
        assert kind == "spectral"
        X, div = velocity_divergence(x[sl], x[sl], w, 4.0, normalized=normalized, sums="spectral", epsilon=eps)
        np.testing.assert_allclose(rates[sl, :3], X, rtol=0, atol=1e-14 * np.abs(X).max())
        np.testing.assert_allclose(rates[sl, 3], div, rtol=0, atol=1e-14 * np.abs(div).max())
        Xd, divd = velocity_divergence(x[sl], x[sl], w, 4.0, normalized=normalized)
        tol = 1e-11 if eps == EPSILON else eps          # measured 3e-13 and 6e-13 for the companion
        assert tol <= error_bound(w, 4.0, eps)          # the stated bound: 1.7e-7 for the companion
        np.testing.assert_allclose(rates[sl, :3], Xd, rtol=0, atol=tol * np.abs(Xd).max())
        np.testing.assert_allclose(rates[sl, 3], divd, rtol=0, atol=tol * np.abs(divd).max())


@settings(deadline=None, max_examples=25)
@given(seed=st.integers(0, 2 ** 31), n=st.integers(1, 400), clusters=st.integers(1, 5),
       spread=st.sampled_from([0.0, 1e-6, 1e-2, 1.0]))
def test_compiled_median_is_numpys(seed, n, clusters, spread):
    """`w1_to_dirac` on S^2 with the compiled passes equals the numpy iteration to 1e-13 relative, for clouds of
    coincident, tight and spread clusters."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((clusters, 3))
    x = centres[rng.integers(0, clusters, n)] + spread * rng.standard_normal((n, 3))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    w = rng.random(n) + 0.01
    w /= w.sum()
    fast = w1_to_dirac((x, w))
    compiled.ENABLED = False
    try:
        slow = w1_to_dirac((x, w))
    finally:
        compiled.ENABLED = True
    assert abs(fast - slow) <= 1e-13 * max(slow, 1e-3)
