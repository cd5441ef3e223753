"""Densities are σ-relative and have mass 1, checked by independent quadrature (docs/mathematics.md §2)."""
import numpy as np
import pytest
from scipy.special import gamma, roots_jacobi, roots_legendre

from meanfield.measures import densities as D


def circle_mass(f, n=4096):
    theta = 2 * np.pi * np.arange(n) / n
    return float(np.mean(f(np.stack([np.cos(theta), np.sin(theta)], -1))))


def sphere_mass(f, L=200):
    z, wz = roots_legendre(L + 1)
    phi = 2 * np.pi * np.arange(2 * L + 2) / (2 * L + 2)
    Z, P = np.meshgrid(z, phi, indexing="ij")
    r = np.sqrt(1 - Z ** 2)
    x = np.stack([r * np.cos(P), r * np.sin(P), Z], -1)
    return float(np.sum(f(x) * (wz / 2)[:, None]) / (2 * L + 2))


def zonal_mass(f, dim, axis):
    """∫ f dσ for f zonal about `axis` on S^{d-1}: c_λ ∫ f(t)(1-t²)^{(d-3)/2} dt."""
    lam = (dim - 2) / 2
    c = gamma(lam + 1) / (np.sqrt(np.pi) * gamma(lam + 0.5))
    perp = np.zeros(dim)
    perp[np.argmin(np.abs(axis))] = 1.0
    perp -= (perp @ axis) * axis
    perp /= np.linalg.norm(perp)

    # Gauss–Jacobi quadrature with weight (1-t²)^{(d-3)/2}: exact for polynomials of degree < 400
    t, wt = roots_jacobi(200, (dim - 3) / 2, (dim - 3) / 2)
    x = t[:, None] * axis + np.sqrt(1 - t * t)[:, None] * perp
    return c * float(np.sum(wt * f(x)))


@pytest.mark.parametrize("kappa", [0.0, 0.3, 4.0, 50.0])
def test_von_mises_fisher_mass(kappa):
    rho = D.von_mises_fisher([np.cos(0.3), np.sin(0.3)], kappa)
    assert abs(circle_mass(rho) - 1) < 1e-12
    mu = np.array([1.0, 2.0, 2.0]) / 3
    assert abs(sphere_mass(D.von_mises_fisher(mu, kappa)) - 1) < 1e-12
    mu5 = np.ones(5) / np.sqrt(5)
    assert abs(zonal_mass(D.von_mises_fisher(mu5, kappa), 5, mu5) - 1) < 1e-12


def test_mixture_perturbed_uniform_band_limited_mass():
    mix = D.mixture([D.von_mises_fisher([1, 0], 3.0), D.von_mises_fisher([-1, 0], 6.0)], [0.3, 0.7])
    assert abs(circle_mass(mix) - 1) < 1e-12
    assert abs(circle_mass(D.perturbed_uniform(0.5, 3)) - 1) < 1e-14
    for l, m in [(1, 0), (2, 1), (3, -2), (6, 6)]:
        assert abs(sphere_mass(D.perturbed_uniform(0.3, l, m)) - 1) < 1e-13
    assert abs(zonal_mass(D.perturbed_uniform(0.4, 3, dim=5), 5, np.eye(5)[-1]) - 1) < 1e-13
    assert abs(sphere_mass(D.band_limited(3, 5, rng=1)) - 1) < 1e-13
    assert abs(circle_mass(D.band_limited(2, 7, rng=2)) - 1) < 1e-13
    assert abs(circle_mass(D.uniform()) - 1) == 0


def test_real_harmonics_are_orthonormal_and_match_pyshtools():
    import pyshtools as pysh

    L = 12
    z, wz = roots_legendre(L + 1)
    phi = 2 * np.pi * np.arange(2 * L + 2) / (2 * L + 2)
    Z, P = np.meshgrid(z, phi, indexing="ij")
    r = np.sqrt(1 - Z ** 2)
    x = np.stack([r * np.cos(P), r * np.sin(P), Z], -1)
    w = (wz / 2)[:, None] / (2 * L + 2)
    idx = [(l, m) for l in range(6) for m in range(-l, l + 1)]
    Y = np.array([D.real_sh(l, m, x) for l, m in idx])
    G = np.einsum("aij,bij,ij->ab", Y, Y, np.broadcast_to(w, Z.shape))
    assert np.allclose(G, np.eye(len(idx)), atol=1e-13)
    # independent check against pyshtools (4pi normalisation, no Condon–Shortley phase)
    pts = np.random.default_rng(0).standard_normal((20, 3))
    pts /= np.linalg.norm(pts, axis=1, keepdims=True)
    lat = np.degrees(np.arcsin(pts[:, 2]))
    lon = np.degrees(np.arctan2(pts[:, 1], pts[:, 0]))
    for l, m in [(1, 1), (3, -2), (5, 4), (4, 0)]:
        c = np.zeros((2, 6, 6))
        c[0 if m >= 0 else 1, l, abs(m)] = 1.0
        ref = pysh.SHCoeffs.from_array(c, normalization="4pi", csphase=1).expand(lat=lat, lon=lon)
        assert np.allclose(D.real_sh(l, m, pts), ref, atol=1e-12)


def test_user_callable_and_shapes():
    rho = D.von_mises_fisher([0, 0, 1], 2.0)
    x = np.random.default_rng(0).standard_normal((4, 5, 3))
    x /= np.linalg.norm(x, axis=-1, keepdims=True)
    assert rho(x).shape == (4, 5)
    assert D.uniform()(x).shape == (4, 5)


def test_bad_inputs():
    with pytest.raises(ValueError, match="kappa"):
        D.von_mises_fisher([1, 0], -1.0)
    with pytest.raises(ValueError, match="mean"):
        D.von_mises_fisher([2, 0], 1.0)
    with pytest.raises(ValueError, match="mean"):
        D.von_mises_fisher([np.nan, 0], 1.0)
    with pytest.raises(ValueError, match="weights"):
        D.mixture([D.uniform(), D.uniform()], [0.5, 0.6])
    with pytest.raises(ValueError, match="weights"):
        D.mixture([D.uniform(), D.uniform()], [1.5, -0.5])
    with pytest.raises(ValueError, match="components"):
        D.mixture([])
    with pytest.raises(ValueError, match="degree"):
        D.perturbed_uniform(0.1, 0)
    with pytest.raises(ValueError, match="amplitude"):
        D.perturbed_uniform(np.nan, 2)
    with pytest.raises(ValueError, match=r"`x` must lie on the unit sphere"):
        D.von_mises_fisher([0, 0, 1], 1.0)(np.array([[1.0, 1.0, 0.0]]))
    with pytest.raises(ValueError, match="dim"):
        D.von_mises_fisher([0, 0, 1], 1.0)(np.array([[1.0, 0.0]]))
