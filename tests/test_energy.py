"""Interaction energy E_β (3.5): exact values, Proposition 3.4, spectral form (docs/mathematics.md §4)."""
import numpy as np
import pytest
from scipy.special import roots_legendre

import meanfield as mf
from meanfield.observables.energy import discrete_energy


def gauss_sphere(L):
    """Product Gauss–Legendre × equispaced quadrature for σ on S^2, exact for degree <= 2L+1."""
    z, wz = roots_legendre(L + 1)
    phi = 2 * np.pi * np.arange(2 * L + 2) / (2 * L + 2)
    Z, P = np.meshgrid(z, phi, indexing="ij")
    r = np.sqrt(1 - Z ** 2)
    x = np.stack([r * np.cos(P), r * np.sin(P), Z], axis=-1).reshape(-1, 3)
    w = np.repeat(wz / 2, 2 * L + 2) / (2 * L + 2)
    return x, w


@pytest.mark.parametrize("beta", [0.5, 4.0, 20.0])
def test_uniform_and_dirac_values(beta):
    # circle: n equispaced points reproduce σ up to aliases I_{jn}(β), negligible for n = 128
    x, w = mf.sphere_quadrature(128, 2)
    assert abs(mf.interaction_energy(beta, (x, w)) / mf.uniform_energy(beta, 2) - 1) < 1e-14
    assert abs(mf.uniform_energy(beta, 2) - mf.kernel_multipliers(beta, 2, 0)[0] / (2 * beta)) == 0
    # sphere: Gauss quadrature exact through degree 2L+1; a_l(20) for l > 61 is < 1e-40 relative
    x, w = gauss_sphere(60)
    assert abs(mf.interaction_energy(beta, (x, w)) / (np.sinh(beta) / (2 * beta ** 2)) - 1) < 1e-13
    for d in (2, 3, 6):
        e = np.zeros(d)
        e[0] = 1
        assert mf.interaction_energy(beta, (e[None], [1.0])) == pytest.approx(np.exp(beta) / (2 * beta), rel=1e-15)
        assert mf.dirac_energy(beta) == pytest.approx(np.exp(beta) / (2 * beta), rel=1e-15)


def test_beta_zero_convention():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((50, 4))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    w = rng.random(50)
    w /= w.sum()
    m = w @ x
    assert mf.interaction_energy(0.0, (x, w)) == pytest.approx(0.5 * m @ m, rel=1e-14)
    # and it is the limit of E_β − 1/(2β)
    b = 1e-6
    assert mf.interaction_energy(b, (x, w)) - 1 / (2 * b) == pytest.approx(0.5 * m @ m, abs=1e-5)
    assert mf.uniform_energy(0.0, 3) == 0.0 and mf.dirac_energy(0.0) == 0.5


@pytest.mark.parametrize("dim", [2, 3, 5])
def test_random_measures_never_below_uniform(dim):
    rng = np.random.default_rng(dim)
    for beta in (0.1, 1.0, 10.0):
        emin, emax = mf.uniform_energy(beta, dim), mf.dirac_energy(beta)
        for n in (1, 2, 7, 100):
            x = rng.standard_normal((n, dim))
            x /= np.linalg.norm(x, axis=1, keepdims=True)
            w = rng.dirichlet(np.ones(n))
            e = mf.interaction_energy(beta, (x, w))
            assert emin * (1 - 1e-13) <= e <= emax * (1 + 1e-13)


def test_chunked_equals_direct_and_scaled_form():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((3001, 3))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    w = np.full(3001, 1 / 3001)
    beta = 7.0
    direct = float(w @ np.exp(beta * x @ x.T) @ w) / (2 * beta)
    assert discrete_energy(beta, x, w, chunk=500) == pytest.approx(direct, rel=1e-13)
    assert mf.interaction_energy(beta, (x, w), scaled=True) == pytest.approx(direct * np.exp(-beta), rel=1e-13)
    # very large β: finite scaled form, consensus gives 1/(2β)
    y = np.repeat(x[:1], 10, axis=0)
    assert mf.interaction_energy(2000.0, (y, np.full(10, 0.1)), scaled=True) == pytest.approx(1 / 4000, rel=1e-13)


def test_spectral_form_matches_discrete_quadrature():
    """E from degree powers (docs/mathematics.md §4) equals the double sum for a weighted quadrature of ρ."""
    beta = 3.0
    rho = mf.densities.von_mises_fisher([1.0, 0.0], 1.5)
    x, q = mf.sphere_quadrature(256, 2)
    w = rho(x) * q
    theta = np.arctan2(x[:, 1], x[:, 0])
    c = np.array([np.sum(w * np.exp(-1j * k * theta)) for k in range(60)])
    power = 2 * np.abs(c) ** 2
    power[0] = 1.0
    assert mf.energy_from_spectrum(beta, 2, power) == pytest.approx(mf.interaction_energy(beta, (x, w)), rel=1e-13)


def test_solution_slice_is_accepted():
    from meanfield.representations.fourier import FourierSeries

    c = np.zeros((2, 5), complex)
    c[:, 0] = 1
    c[1, 1] = 0.2
    sol = mf.Solution([0.0, 1.0], mf.Model(beta=2.0, dim=2), FourierSeries(4), c)
    e = mf.interaction_energy(2.0, sol[1])
    from scipy.special import iv
    assert e == pytest.approx((iv(0, 2.0) + 2 * iv(1, 2.0) * 0.04) / 4.0, rel=1e-14)
    assert np.allclose(mf.interaction_energy(2.0, sol), sol.energy)


@pytest.mark.parametrize("measure,match", [
    ((np.array([[1.0, 0.0]]), np.array([0.5])), "sum to 1"),
    ((np.array([[2.0, 0.0]]), np.array([1.0])), "unit sphere"),
    ((np.array([[np.nan, 0.0]]), np.array([1.0])), "NaN"),
    ((np.array([[1.0, 0.0], [0.0, 1.0]]), np.array([1.5, -0.5])), "non-negative"),
    ((np.array([[1.0, 0.0], [0.0, 1.0]]), np.array([1.0])), "shape"),
    ((np.array([1.0, 0.0]), np.array([1.0])), r"\(n, d\)|dimension"),
    ("nonsense", "pair"),
])
def test_bad_measures(measure, match):
    with pytest.raises(ValueError, match=match):
        mf.interaction_energy(1.0, measure)


def test_bad_beta():
    with pytest.raises(ValueError, match="beta"):
        mf.interaction_energy(np.nan, (np.array([[1.0, 0.0]]), np.array([1.0])))
