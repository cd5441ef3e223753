"""Kernel multipliers a_l(β) against 30-digit mpmath references (proof of Proposition 3.4; docs/mathematics.md §3)."""
import mpmath as mp
import numpy as np
import pytest

import meanfield as mf
from meanfield.transformer.kernels import harmonic_dimension, minimum_degree, velocity_multipliers

BETAS = [0.0, 1e-3, 1.0, 10.0, 100.0, 500.0]
DEGREES = [0, 1, 2, 10, 100, 1000, 2048]


def _closed_form_scaled(beta, dim, l):
    """Γ(d/2)(2/β)^λ I_{l+λ}(β) e^{-β} at 30 digits (mpmath's own Bessel series)."""
    with mp.workdps(30):
        b = mp.mpf(beta)
        lam = mp.mpf(dim - 2) / 2
        return mp.gamma(mp.mpf(dim) / 2) * (2 / b) ** lam * mp.besseli(l + lam, b) * mp.exp(-b)


def _funk_hecke_quadrature(beta, dim, l):
    """The defining integral c_λ/C_l^λ(1) ∫ e^{βs} C_l^λ(s)(1-s²)^{λ-1/2} ds, by mpmath quadrature."""
    with mp.workdps(80):  # the integrand is O(1) while a_10(1e-3) ~ 1e-40: cancellation needs digits
        b = mp.mpf(beta)
        if dim == 2:
            return mp.quad(lambda th: mp.exp(b * mp.cos(th)) * mp.cos(l * th), [0, mp.pi / 2, mp.pi]) / mp.pi
        if dim == 3:
            return mp.quad(lambda s: mp.exp(b * s) * mp.legendre(l, s), [-1, 0, 1]) / 2
        lam = mp.mpf(dim - 2) / 2
        c = mp.gamma(lam + 1) / (mp.sqrt(mp.pi) * mp.gamma(lam + mp.mpf(1) / 2))
        c1 = mp.rf(2 * lam, l) / mp.factorial(l)
        f = lambda s: mp.exp(b * s) * mp.gegenbauer(l, lam, s) * (1 - s * s) ** (lam - mp.mpf(1) / 2)
        return c / c1 * mp.quad(f, [-1, 0, 1])


@pytest.mark.parametrize("dim", [2, 3, 5])
def test_multipliers_match_mpmath_to_1e12(dim):
    worst = 0.0
    checked = 0
    for beta in BETAS:
        a = mf.kernel_multipliers(beta, dim, 2048, scaled=True)
        for l in DEGREES:
            if beta == 0.0:
                assert a[l] == (1.0 if l == 0 else 0.0)
                continue
            ref = _closed_form_scaled(beta, dim, l)
            if ref > mp.mpf("1e-290"):
                err = float(abs(mp.mpf(a[l]) - ref) / ref)
                worst = max(worst, err)
                checked += 1
            else:
                assert a[l] < 1e-280
    assert checked >= 20
    assert worst <= 1e-12, worst


@pytest.mark.parametrize("dim", [2, 3, 5])
@pytest.mark.parametrize("beta", [1e-3, 1.0, 10.0])
def test_closed_form_is_the_funk_hecke_integral(dim, beta):
    """The closed form used above equals the defining quadrature (so the reference is independent)."""
    a = mf.kernel_multipliers(beta, dim, 10)
    for l in (0, 1, 2, 10):
        ref = _funk_hecke_quadrature(beta, dim, l)
        assert abs(a[l] - float(ref)) <= 1e-12 * float(abs(ref))


def test_unscaled_and_special_values():
    beta = 3.0
    assert np.allclose(mf.kernel_multipliers(beta, 3, 1), [np.sinh(beta) / beta,
                                                            np.cosh(beta) / beta - np.sinh(beta) / beta ** 2], rtol=1e-14)
    from scipy.special import iv
    assert np.allclose(mf.kernel_multipliers(beta, 2, 5), iv(np.arange(6), beta), rtol=1e-14)
    # Σ_l a_l dim H_l = e^β (the series at t = 1, docs/mathematics.md §3)
    for dim in (2, 3, 4, 5):
        a = mf.kernel_multipliers(beta, dim, 80)
        assert abs(np.sum(a * harmonic_dimension(dim, np.arange(81))) - np.exp(beta)) < 1e-12 * np.exp(beta)


def test_positivity_prop34_and_large_beta_scaled():
    for beta in (1e-3, 0.5, 50.0, 500.0, 5000.0):
        a = mf.kernel_multipliers(beta, 3, 400, scaled=True)
        assert np.all(a[:50] > 0) and np.all(np.isfinite(a))
    with pytest.raises(ValueError, match="scaled=True"):
        mf.kernel_multipliers(800.0, 3, 4)


def test_velocity_multipliers_limit_beta_to_zero():
    for dim in (2, 3, 5):
        c0 = velocity_multipliers(0.0, dim, 4)
        assert np.allclose(c0, [0, 1 / dim, 0, 0, 0])
        for beta in (1e-9, 1e-5, 9.9e-4, 1.1e-3):
            c = velocity_multipliers(beta, dim, 4)
            a = mf.kernel_multipliers(beta, dim, 4)
            ref = a[1:] / beta
            assert np.allclose(c[1:], ref, rtol=1e-12, atol=0)
            assert abs(c[1] - 1 / dim) < 2 * beta


@pytest.mark.parametrize("beta", [5e-324, 2.225073858507203e-309, 1e-300])
@pytest.mark.parametrize("dim", [2, 3, 5, 40])
def test_subnormal_and_tiny_beta(beta, dim):
    """a_0 = 1, a_1 = β/d to rounding (the series' first terms), c_1 = 1/d and the minimum degree 2,
    also where 2/β overflows and β/2 underflows (found by the slow hypothesis profile)."""
    a = mf.kernel_multipliers(beta, dim, 3)
    assert a[0] == pytest.approx(1.0, rel=1e-12) and a[2] == a[3] == 0.0
    assert a[1] == pytest.approx(beta / dim, rel=1e-12, abs=5e-324)
    assert velocity_multipliers(beta, dim, 3)[1] == pytest.approx(1 / dim, rel=1e-15)
    assert minimum_degree(beta, dim) == 2


def test_linear_growth_rates_formula():
    m = mf.Model(beta=2.0, dim=2)
    from scipy.special import iv
    k = np.arange(7)
    assert np.allclose(mf.linear_growth_rates(m, 6), k ** 2 * iv(k, 2.0) / (2.0 * iv(0, 2.0)), rtol=1e-13)
    m = mf.Model(beta=2.0, dim=3, normalized=False, V=-1.0, noise=0.1)
    from scipy.special import spherical_in
    l = np.arange(7)
    ref = -l * (l + 1) * spherical_in(l, 2.0) / 2.0 - 0.1 * l * (l + 1)
    assert np.allclose(mf.linear_growth_rates(m, 6), ref, rtol=1e-13)


def test_minimum_degree():
    for beta in (1.0, 10.0, 100.0):
        L = minimum_degree(beta, 3)
        a = mf.kernel_multipliers(beta, 3, L + 5, scaled=True)
        assert a[L] / a[0] < 1e-14 <= a[L - 1] / a[0]


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf, "x"])     # β < 0 is accepted (tests/test_negative_beta.py)
def test_bad_beta(bad):
    with pytest.raises(ValueError, match="beta"):
        mf.kernel_multipliers(bad, 3, 4)


def test_bad_dim_and_lmax():
    with pytest.raises(ValueError, match="dim"):
        mf.kernel_multipliers(1.0, 1, 4)
    with pytest.raises(ValueError, match="lmax"):
        mf.kernel_multipliers(1.0, 3, -1)
    with pytest.raises(ValueError, match="lmax"):
        mf.kernel_multipliers(1.0, 3, 2.5)


@pytest.mark.parametrize("dim", [600, 1024])
@pytest.mark.parametrize("beta", [0.5, 4.0, 60.0])
def test_multipliers_in_high_dimension_against_mpmath(dim, beta):
    """Γ(d/2)(2/β)^λ overflows and I_{l+λ}(β) underflows for d >= ~600: the power series in log space
    must still give a_l(β)e^{-β} to ~1e-13 (Gegenbauer solver at d = 1024)."""
    import mpmath

    mpmath.mp.dps = 40
    a = mf.kernel_multipliers(beta, dim, 40, scaled=True)
    lam = mpmath.mpf(dim - 2) / 2
    for l in (0, 1, 7, 40):
        exact = (mpmath.gamma(mpmath.mpf(dim) / 2) * (2 / mpmath.mpf(beta)) ** lam
                 * mpmath.besseli(l + lam, beta) * mpmath.exp(-beta))
        assert a[l] == pytest.approx(float(exact), rel=2e-13)
    assert np.all(np.diff(a) < 0)
