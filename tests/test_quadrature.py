"""meanfield.spaces.quadrature: every rule integrates exactly to its stated degree, and not one degree above.

References: Fourier modes and real spherical harmonics (mean 0 against σ for degree >= 1), the
closed-form moments E_σ[s^{2k}] = Π_{i<k} (2i+1)/(d+2i) of s = ⟨x, e⟩ (docs/mathematics.md §10),
the Gauss error ‖π_n‖² of the monic Gegenbauer polynomial, and ducc0's own Gauss–Legendre grid.
"""
import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import eval_chebyt, eval_gegenbauer, gammaln

import meanfield as mf
from meanfield.measures.densities import real_sh
from meanfield.spaces.quadrature import (Quadrature, fibonacci, gauss_gegenbauer, gauss_legendre, gauss_legendre_grid,
                                  sphere_quadrature, trapezoid)

EXACT = 1e-13


def _check_measure(rule, dim):
    x, w = rule
    assert isinstance(rule, tuple) and len(rule) == 2
    assert x.shape == (w.size, dim) and np.all(w >= 0)
    assert abs(w.sum() - 1.0) < 1e-15
    assert np.abs(np.linalg.norm(x, axis=1) - 1.0).max() < 1e-15


def _harmonic_errors(rule, degree):
    """max over m of |Σ_j w_j Y_lm(x_j)| for l = degree (exact value 0 for degree >= 1)."""
    return max(abs(rule.weights @ real_sh(degree, m, rule.points)) for m in range(-degree, degree + 1))


# -- S^1 ----------------------------------------------------------------------------------------------------
@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 64), offset=st.floats(-1.0, 1.0))
def test_trapezoid_exact_for_modes_below_n(n, offset):
    rule = trapezoid(n, offset)
    _check_measure(rule, 2)
    assert rule.degree == n - 1
    np.testing.assert_allclose(rule.points, np.stack([np.cos(rule.angles), np.sin(rule.angles)], -1))
    k = np.arange(1, n)
    assert np.abs(np.exp(1j * np.outer(k, rule.angles)) @ rule.weights).max(initial=0.0) < EXACT
    # one degree above: Σ_j e^{inθ_j}/n = e^{2πi·offset}, of modulus 1
    assert abs(np.exp(1j * n * rule.angles) @ rule.weights) == pytest.approx(1.0, abs=1e-12)


# -- S^2 ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("ntheta, nphi", [(4, 8), (5, 7), (3, 12), (1, 1)])
def test_gauss_legendre_exact_to_its_degree(ntheta, nphi):
    rule = gauss_legendre(ntheta, nphi)
    _check_measure(rule, 3)
    degree = min(2 * ntheta - 1, nphi - 1)
    assert rule.degree == degree
    for l in range(1, degree + 1):
        assert _harmonic_errors(rule, l) < EXACT, l
    assert _harmonic_errors(rule, degree + 1) > 1e-3


def test_gauss_legendre_grid_is_ducc0_layout():
    """Rings north → south at ducc0's Gauss–Legendre colatitudes, φ_j = 2πj/nphi, weights of ducc0."""
    import ducc0
    from ducc0.sht import get_gridweights

    from meanfield.representations import harmonics

    assert harmonics.gauss_legendre_grid is gauss_legendre_grid
    for ntheta, nphi in [(7, 13), (64, 128), (257, 514)]:
        theta, phi, pts, w = gauss_legendre_grid(ntheta, nphi)
        assert pts.shape == (ntheta, nphi, 3) and w.shape == (ntheta, nphi)
        np.testing.assert_allclose(theta, ducc0.misc.GL_thetas(ntheta), rtol=0, atol=5e-15)
        np.testing.assert_allclose(w, np.repeat(get_gridweights("GL", ntheta)[:, None], nphi, 1) / (4 * np.pi * nphi),
                                   rtol=1e-13)
        np.testing.assert_array_equal(phi, 2 * np.pi * np.arange(nphi) / nphi)
        np.testing.assert_allclose(pts[..., 2], np.cos(theta)[:, None] + 0 * phi, atol=1e-16)
        rule = gauss_legendre(ntheta, nphi)
        np.testing.assert_array_equal(rule.points, pts.reshape(-1, 3))
        np.testing.assert_array_equal(rule.theta, theta)


def test_fibonacci_exact_for_constants_only():
    n = 1000
    rule = fibonacci(n)
    _check_measure(rule, 3)
    assert rule.degree == 0
    z = rule.points[:, 2]
    assert abs(rule.weights @ z) < EXACT                                   # z_j symmetric about 0
    # Σ z_j²/n = 1/3 − 1/(3n²), not 1/3: degree 2 is not exact
    assert rule.weights @ z ** 2 - 1 / 3 == pytest.approx(-1 / (3 * n * n), rel=1e-9)
    assert _harmonic_errors(rule, 1) > 1e-6


def test_sphere_quadrature_is_mf_quadrature():
    for dim, expected in ((2, trapezoid(10)), (3, fibonacci(10))):
        rule = sphere_quadrature(10, dim)
        np.testing.assert_array_equal(rule.points, expected.points)
        assert rule.degree == expected.degree
        x, w = mf.sphere_quadrature(10, dim)
        np.testing.assert_array_equal(x, expected.points)
    np.testing.assert_allclose(sphere_quadrature(4, 2).angles, np.pi * np.array([0.25, 0.75, 1.25, 1.75]))


def test_quadrature_pickles_and_integrates():
    rule = gauss_legendre(6, 12)
    back = pickle.loads(pickle.dumps(rule))
    assert isinstance(back, Quadrature) and back.degree == rule.degree
    np.testing.assert_array_equal(back.points, rule.points)
    np.testing.assert_array_equal(back.phi, rule.phi)
    # ∫ x_3^4 dσ = 1/5 (degree 4 <= 11)
    assert rule.integrate(lambda x: x[:, 2] ** 4) == pytest.approx(0.2, rel=1e-14)


# -- Gauss–Gegenbauer ---------------------------------------------------------------------------------------
def _moments(dim, kmax):
    """E_σ[s^{2k}] = Π_{i<k} (2i+1)/(d+2i), k = 0..kmax."""
    return np.cumprod(np.concatenate([[1.0], (2 * np.arange(kmax) + 1) / (dim + 2 * np.arange(kmax))]))


def _log_monic_norm(n, dim):
    """log ‖π_n‖²_{L²(σ)} of the monic orthogonal polynomial π_n = C_n^λ/k_n in s (λ = (d−2)/2)."""
    if dim == 2:
        return (1 - 2 * n) * np.log(2.0)
    lam = 0.5 * (dim - 2)
    # E[(C_n^λ)²] = λΓ(n+2λ)/(n!(n+λ)Γ(2λ)) and k_n = 2^n Γ(n+λ)/(Γ(λ) n!)
    log_h = np.log(lam) + gammaln(n + 2 * lam) - gammaln(n + 1) - np.log(n + lam) - gammaln(2 * lam)
    log_k = n * np.log(2.0) + gammaln(n + lam) - gammaln(lam) - gammaln(n + 1)
    return log_h - 2 * log_k


@pytest.mark.parametrize("dim", [2, 3, 4, 16, 128, 1024])
@pytest.mark.parametrize("n", [1, 4, 40])
def test_gauss_gegenbauer_moments_and_first_failure(dim, n):
    rule = gauss_gegenbauer(n, dim)
    s, w = rule
    assert rule.degree == 2 * n - 1 and rule.dim == dim
    assert s.shape == w.shape == (n,) and np.all(np.diff(s) > 0) and np.all(np.abs(s) < 1)
    assert abs(w.sum() - 1.0) < 1e-15
    exact = _moments(dim, n)
    got = np.array([w @ s ** (2 * k) for k in range(n + 1)])
    np.testing.assert_allclose(got[:n], exact[:n], rtol=EXACT)                 # degree <= 2n − 2
    assert np.abs([w @ s ** (2 * k + 1) for k in range(n)]).max() < 1e-16      # odd, up to 2n − 1
    # degree 2n: the nodes are the roots of C_n^λ, so the rule gives 0 for (C_n^λ)², whose integral is > 0
    if dim == 2:
        c_n, log_norm = eval_chebyt(n, s), np.log(0.5)
    else:
        lam = 0.5 * (dim - 2)
        c_n = eval_gegenbauer(n, lam, s)
        log_norm = np.log(lam) + gammaln(n + 2 * lam) - gammaln(n + 1) - np.log(n + lam) - gammaln(2 * lam)
    assert w @ c_n ** 2 < 1e-12 * np.exp(log_norm)
    if n <= 4:
        # ... and the error on s^{2n} is exactly ‖π_n‖² (π_n = monic C_n^λ; π_n² = s^{2n} + lower degrees)
        assert np.log(exact[n] - got[n]) == pytest.approx(_log_monic_norm(n, dim), abs=1e-9)
        assert (exact[n] - got[n]) / exact[n] > 1e-2


@pytest.mark.parametrize("dim", [2, 3, 16, 1024])
def test_gauss_gegenbauer_integrates_zonal_harmonics(dim):
    """Σ_j w_j Y_l(s_j) = 0 for 1 <= l <= 2n − 1, with Y_l = sqrt(dim H_l) C_l^λ/C_l^λ(1) the zonal
    harmonic of unit L²(σ) norm (mean 0 for l >= 1, docs/mathematics.md §10); not for l = 2n."""
    n = 12
    s, w = gauss_gegenbauer(n, dim)
    lam = 0.5 * (dim - 2)

    def zonal(l):
        if dim == 2:
            return np.sqrt(2.0) * eval_chebyt(l, s)
        # dim H_l = (2l + d − 2)/(l + d − 2)·binom(l + d − 2, l), in logs
        log_dim = np.log((2 * l + dim - 2) / (l + dim - 2)) + gammaln(l + dim - 1) - gammaln(l + 1) - gammaln(dim - 1)
        return np.exp(0.5 * log_dim) * eval_gegenbauer(l, lam, s) / eval_gegenbauer(l, lam, 1.0)

    errors = [abs(w @ zonal(l)) for l in range(1, 2 * n + 1)]
    assert max(errors[:-1]) < 1e-12
    assert errors[-1] > 1e-4                 # n!/sqrt((2n)!) ≈ 6e-4 in the Hermite limit d → ∞


@pytest.mark.parametrize("dim", [3, 4, 1024])
def test_gauss_gegenbauer_large_n_stays_accurate(dim):
    """n = 1000: moments to ~1e-13 (the highest ones are dominated by tiny end weights); d = 3 agrees
    with ducc0's Gauss–Legendre weights."""
    n = 1000
    s, w = gauss_gegenbauer(n, dim)
    assert np.all(np.isfinite(s)) and np.all(w >= 0) and abs(w.sum() - 1) < 1e-14
    exact = _moments(dim, n - 1)
    k = np.arange(0, n, 37)
    got = np.array([w @ s ** (2 * kk) for kk in k])
    ok = exact[k] > 1e-280
    np.testing.assert_allclose(got[ok], exact[k][ok], rtol=5e-13)
    if dim == 3:
        from ducc0.sht import get_gridweights

        np.testing.assert_allclose(w, get_gridweights("GL", n)[::-1] / (4 * np.pi), rtol=2e-12)


@pytest.mark.parametrize("dim, n", [(2000, 500), (4096, 1000)])
def test_gauss_gegenbauer_where_scipy_gives_nan(dim, n):
    """Where scipy's ``roots_gegenbauer`` returns NaN nodes and weights (scipy 1.18), the rule is finite
    and exact: the moments E_σ[s^{2k}] to 5e-13 relative (those above 1e-280), and the kernel's mean
    ∫ e^{β(⟨x, e⟩ − 1)} dσ to 1e-12 against the Bessel closed form."""
    s, w = gauss_gegenbauer(n, dim)
    assert np.all(np.isfinite(s)) and np.all(np.diff(s) > 0) and np.all(w >= 0) and abs(w.sum() - 1) < 1e-14
    exact = _moments(dim, n - 1)
    got = np.array([w @ s ** (2 * k) for k in range(n)])
    ok = exact > 1e-280
    assert ok.sum() > 150
    np.testing.assert_allclose(got[ok], exact[ok], rtol=5e-13)
    for beta in (1.0, 0.1 * dim):
        assert w @ np.exp(beta * (s - 1)) == pytest.approx(mf.kernel_multipliers(beta, dim, 0, scaled=True)[0],
                                                           rel=1e-12)


@pytest.mark.parametrize("dim", [2, 4, 16, 128])
def test_gauss_gegenbauer_integrates_the_kernel(dim):
    """∫ e^{β⟨x, e⟩} dσ(x) = a_0(β) = Γ(d/2)(2/β)^λ I_λ(β) (Funk–Hecke, docs/mathematics.md §3):
    40 nodes reach the Bessel closed form of `kernel_multipliers` to round-off."""
    s, w = gauss_gegenbauer(40, dim)
    for beta in (0.5, 3.0, 20.0):
        assert w @ np.exp(beta * (s - 1)) == pytest.approx(mf.kernel_multipliers(beta, dim, 0, scaled=True)[0],
                                                           rel=1e-13)


# -- bad input ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("call, name", [
    (lambda: trapezoid(0), "n"),
    (lambda: trapezoid(4, offset=np.nan), "offset"),
    (lambda: gauss_legendre(0, 4), "ntheta"),
    (lambda: gauss_legendre(4, 0), "nphi"),
    (lambda: fibonacci(-1), "n"),
    (lambda: gauss_gegenbauer(0, 3), "n"),
    (lambda: gauss_gegenbauer(4, 1), "dim"),
    (lambda: sphere_quadrature(8, 4), "dim"),
])
def test_bad_input_names_the_argument(call, name):
    with pytest.raises(ValueError, match=rf"`{name}`"):
        call()
