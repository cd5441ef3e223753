"""Samples: the iid sampler's law and the W1 rate of the quasi point sets (stated in the docstring)."""
import numpy as np
import pytest

import meanfield as mf
from meanfield.measures import densities as D


def fitted_rate(ns, errs):
    return np.polyfit(np.log(ns), np.log(errs), 1)[0]


def test_quasi_rate_on_circle_is_one_over_n():
    rho = D.mixture([D.von_mises_fisher([1, 0], 4.0), D.von_mises_fisher([-0.6, 0.8], 2.0)])
    ref = mf.sample(rho, 1 << 18, 2, method="quasi")
    ns = np.array([64, 128, 256, 512, 1024])
    errs = [mf.wasserstein(mf.sample(rho, n, 2, method="quasi"), ref) for n in ns]
    assert -1.15 <= fitted_rate(ns, errs) <= -0.85
    qerrs = [mf.wasserstein(mf.sample(rho, n, 2, method="quantile"), ref) for n in ns]
    assert -1.15 <= fitted_rate(ns, qerrs) <= -0.85
    # uniform density: the midpoints are exactly π/(2n) from σ
    x, w = mf.sample(D.uniform(), 100, 2, method="quasi")
    assert mf.wasserstein((x, w), mf.sphere_quadrature(1 << 16, 2)) == pytest.approx(np.pi / 200, rel=1e-3)


def test_quasi_rate_on_sphere_is_one_over_sqrt_n():
    rho = D.von_mises_fisher([0, 0.6, 0.8], 2.0)
    from scipy.special import roots_legendre
    L = 60
    z, wz = roots_legendre(L + 1)
    phi = 2 * np.pi * np.arange(2 * L + 2) / (2 * L + 2)
    Z, P = np.meshgrid(z, phi, indexing="ij")
    r = np.sqrt(1 - Z ** 2)
    g = np.stack([r * np.cos(P), r * np.sin(P), Z], -1).reshape(-1, 3)
    gw = (np.repeat(wz, 2 * L + 2) * rho(g))
    ref = (g, gw / gw.sum())           # 7442-point Gauss product quadrature of ρσ
    ns = np.array([50, 100, 200, 400])
    errs = [mf.wasserstein(mf.sample(rho, n, 3, method="quasi"), ref) for n in ns]
    assert -0.7 <= fitted_rate(ns, errs) <= -0.4, errs


def test_iid_law():
    rng = np.random.default_rng(0)
    for dim in (2, 3, 5):
        mu = np.ones(dim) / np.sqrt(dim)
        kappa = 3.0
        x, w = mf.sample(D.von_mises_fisher(mu, kappa), 200000, dim, rng=rng)
        a = mf.kernel_multipliers(kappa, dim, 1)
        assert np.mean(x @ mu) == pytest.approx(a[1] / a[0], abs=4e-3)    # E⟨μ, x⟩ = a_1/a_0
        assert np.allclose(w, 1 / 200000) and np.allclose(np.linalg.norm(x, axis=1), 1)
    # rejection sampler (generic callables): a mixture's mean vector
    mix = D.mixture([D.von_mises_fisher([1, 0, 0], 5.0), D.perturbed_uniform(0.5, 1, 0)], [0.4, 0.6])
    x, _ = mf.sample(mix, 100000, 3, rng=1)
    a = mf.kernel_multipliers(5.0, 3, 1)
    # E[x] = 0.4 (a1/a0) e_x + 0.6 · E_{1+0.5 Y_10}[x] with Y_10 = sqrt(3) z: E[z] = 0.5 sqrt(3)/3
    expected = np.array([0.4 * a[1] / a[0], 0.0, 0.6 * 0.5 * np.sqrt(3) / 3])
    assert np.allclose(x.mean(0), expected, atol=8e-3)


def test_reproducible_and_bad_inputs():
    rho = D.von_mises_fisher([0, 1], 1.0)
    a, _ = mf.sample(rho, 10, 2, rng=3)
    b, _ = mf.sample(rho, 10, 2, rng=3)
    assert np.array_equal(a, b)
    with pytest.raises(ValueError, match="method"):
        mf.sample(rho, 10, 2, method="sobol")
    with pytest.raises(ValueError, match=r"`n` must be >= 1"):
        mf.sample(rho, 0, 2)
    with pytest.raises(ValueError, match="dim"):
        mf.sample(rho, 10, 1)
    with pytest.raises(ValueError, match="density"):
        mf.sample(lambda x: -np.ones(x.shape[:-1]), 10, 2, method="quasi")
    with pytest.raises(ValueError, match="density"):
        mf.sample(lambda x: np.full(x.shape[:-1], np.nan), 10, 2, method="quasi")
    with pytest.raises(ValueError, match="density"):
        mf.sample(rho, 10, 3)
    with pytest.raises(ValueError, match="density"):
        mf.sample("rho", 10, 2)
