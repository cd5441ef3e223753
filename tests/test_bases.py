"""The bases of meanfield.spaces and solvers.bases.ResolutionPolicy: round trips, gradients against closed forms, quadrature exactness, the resolution policy."""
import numpy as np
import pytest

from meanfield.spaces.fourier import FourierBasis, fourier_grid_size, midpoint_coefficients
from meanfield.spaces.gegenbauer import GegenbauerBasis, node_count
from meanfield.spaces.harmonics import SphericalHarmonicBasis, alm_index, alm_size, harmonic_grid_shape
from solvers.bases import ResolutionPolicy
from solvers.fourier import FourierCircle
from solvers.gegenbauer import Gegenbauer
from solvers.harmonics import SphericalHarmonics

EPS = np.finfo(float).eps
RNG = np.random.default_rng(20261126)


def ulps(a, b):
    """max|a − b| in units of eps·max|b|."""
    return float(np.max(np.abs(np.asarray(a) - np.asarray(b))) / (EPS * np.max(np.abs(b))))


# -- Fourier ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("K", [8, 64, 1000])
def test_fourier_round_trip_to_a_few_ulps(K):
    B = FourierBasis(K)
    assert B.M == fourier_grid_size(3 * K) >= 3 * K + 1
    c = RNG.standard_normal(K + 1) + 1j * RNG.standard_normal(K + 1)
    c[0] = c[0].real
    assert ulps(B.analysis(B.synthesis(c)), c) <= 4


def test_fourier_gradient_of_a_mode_is_its_closed_form():
    B = FourierBasis(16)
    k = 5
    c = np.zeros(17, dtype=complex)
    c[k] = 0.5                                        # ρ = cos(5θ)
    theta = B.angles
    np.testing.assert_allclose(B.synthesis(c), np.cos(k * theta), rtol=0, atol=32 * EPS)
    np.testing.assert_allclose(B.gradient(c), -k * np.sin(k * theta), rtol=0, atol=32 * EPS * k)
    assert np.array_equal(B.laplacian, np.arange(17.0) ** 2)


def test_fourier_quadrature_exact_to_its_degree_and_not_beyond():
    B = FourierBasis(10, degree=40)
    M = B.M
    assert M == 45 and B.weights.sum() == pytest.approx(1.0, abs=4 * EPS)     # next fast length >= 41
    theta = B.angles
    for k in range(1, M):
        assert abs(B.weights @ np.exp(1j * k * theta)) <= 32 * EPS
    assert abs(B.weights @ np.exp(1j * M * theta) - 1.0) <= 32 * EPS           # aliased onto the mean


def test_fourier_midpoint_coefficients_are_exact():
    n, J = 64, 7
    theta = 2 * np.pi * (np.arange(n) + 0.5) / n
    vals = 1.0 + 0.6 * np.cos(3 * theta) - 0.2 * np.sin(7 * theta)
    c = midpoint_coefficients(vals, J)
    expect = np.zeros(J + 1, dtype=complex)
    expect[0], expect[3], expect[7] = 1.0, 0.3, 0.1j
    assert np.max(np.abs(c - expect)) <= 8 * EPS


def test_fourier_pad_keeps_the_coefficients_and_adds_zeros():
    coarse, fine = FourierBasis(4), FourierBasis(8)
    u = np.arange(1, 5) + 1j
    padded = coarse.pad(u, fine)
    np.testing.assert_array_equal(padded, np.concatenate([u, np.zeros(4)]))
    np.testing.assert_array_equal(coarse.pad(np.arange(5.0), fine), np.concatenate([np.arange(5.0), np.zeros(4)]))


# -- spherical harmonics --------------------------------------------------------------------------------
def random_alm(basis):
    a = RNG.standard_normal(alm_size(basis.lmax)) + 1j * RNG.standard_normal(alm_size(basis.lmax))
    a[basis.zonal] = a[basis.zonal].real
    return a


@pytest.mark.parametrize("L", [4, 32, 95])
def test_harmonic_round_trip_to_a_few_ulps_per_degree(L):
    """The Legendre recurrences of the transforms lose about 2 ulps per degree (≈ 170 ulps at L = 95)."""
    B = SphericalHarmonicBasis(L)
    assert (B.ntheta, B.nphi) == harmonic_grid_shape(3 * L) and 2 * B.ntheta - 1 >= 3 * L and B.nphi >= 3 * L + 1
    a = random_alm(B)
    assert ulps(B.analysis(B.synthesis(a[None]))[0], a) <= 3 * L


def test_harmonic_gradient_of_y10_and_y11_are_their_closed_forms():
    B = SphericalHarmonicBasis(8)
    th = B.theta[:, None] + 0 * B.points[..., 0]
    ph = 2 * np.pi * np.arange(B.nphi)[None, :] / B.nphi + 0 * th
    a = np.zeros(alm_size(8), dtype=complex)
    a[alm_index(1, 0, 8)] = 1.0                       # Y_10 = sqrt(3/4π) cos θ
    g = B.gradient(a)
    c = np.sqrt(3 / (4 * np.pi))
    assert np.max(np.abs(g[0] + c * np.sin(th))) <= 16 * EPS and np.max(np.abs(g[1])) <= 16 * EPS
    a[:] = 0
    a[alm_index(1, 1, 8)] = 1.0                       # Y_11 + conj = −sqrt(3/2π) sin θ cos φ
    g = B.gradient(a)
    c = np.sqrt(3 / (2 * np.pi))
    assert np.max(np.abs(g[0] + c * np.cos(th) * np.cos(ph))) <= 16 * EPS
    assert np.max(np.abs(g[1] - c * np.sin(ph))) <= 16 * EPS


def test_harmonic_divergence_of_a_gradient_is_minus_the_laplacian():
    B = SphericalHarmonicBasis(24)
    a = random_alm(B)
    assert ulps(B.divergence(B.gradient(a)), B.laplacian * a) <= 64
    assert np.array_equal(B.laplacian, B.degrees * (B.degrees + 1.0))


def test_harmonic_quadrature_exact_to_its_degree_and_not_beyond():
    from scipy.special import eval_legendre

    D = 20
    B = SphericalHarmonicBasis(D, degree=D)
    assert (B.ntheta, B.nphi) == (11, 24) and abs(B.weights.sum() - 1) <= 8 * EPS
    for l in range(1, D + 1):
        for m in (0, l // 2, l):
            a = np.zeros(alm_size(D), dtype=complex)
            a[alm_index(l, m, D)] = 1.0
            assert abs(np.sum(B.weights * B.synthesis(a[None])[0])) <= 32 * EPS, (l, m)
    # the rings are a Gauss rule: exact for P_l(cos θ) up to l = 2·ntheta − 1, not at 2·ntheta
    z = np.cos(B.theta)
    ring = B.weights.sum(axis=1)
    assert abs(ring @ eval_legendre(2 * B.ntheta - 1, z)) <= 32 * EPS
    assert abs(ring @ eval_legendre(2 * B.ntheta - 2, z)) <= 32 * EPS
    assert abs(ring @ eval_legendre(2 * B.ntheta, z)) > 1e-3


def test_harmonic_pad_embeds_the_degrees():
    coarse, fine = SphericalHarmonicBasis(5), SphericalHarmonicBasis(11)
    a = random_alm(coarse)
    b = coarse.pad(a, fine)
    assert b.size == alm_size(11)
    for l, m in [(0, 0), (3, 2), (5, 5)]:
        assert b[alm_index(l, m, 11)] == a[alm_index(l, m, 5)]          # moved, not recomputed
    assert np.all(b[fine.degrees > 5] == 0)


# -- Gegenbauer ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("d", [2, 3, 7, 128])
def test_gegenbauer_round_trip_to_a_few_ulps(d):
    B = GegenbauerBasis(40, d)
    assert B.nodes.size == node_count(40) == 62
    c = RNG.standard_normal(41)
    assert ulps(B.analysis(B.synthesis(c)), c) <= 64


@pytest.mark.parametrize("d", [2, 3, 5])
def test_gegenbauer_first_degrees_are_their_closed_forms(d):
    """p_1 = √d s, p_1' = √d, and p_2 ∝ s² − 1/d with ∫p_2² dσ = 1 (E s⁴ = 3/(d(d+2)))."""
    B = GegenbauerBasis(6, d)
    s = B.nodes
    np.testing.assert_allclose(B.table[:, 1], np.sqrt(d) * s, rtol=0, atol=8 * EPS)
    np.testing.assert_allclose(B.gradient(np.eye(7)[1]), np.full(s.size, np.sqrt(d)), rtol=0, atol=8 * EPS)
    norm = np.sqrt(3 / (d * (d + 2)) - 1 / d ** 2)
    np.testing.assert_allclose(B.table[:, 2], (s * s - 1 / d) / norm, rtol=0, atol=32 * EPS)
    np.testing.assert_array_equal(B.values(s), B.table)
    np.testing.assert_array_equal(B.derivatives(s), B.derivative_table)


@pytest.mark.parametrize("d", [3, 6])
def test_gegenbauer_quadrature_exact_to_its_degree_and_not_beyond(d):
    n = 9
    B = GegenbauerBasis(2 * n, d, nodes=n)
    means = B.weights @ B.table                       # ∫ p_l dσ = δ_{l0}
    assert abs(means[0] - 1) <= 8 * EPS
    assert np.max(np.abs(means[1:2 * n])) <= 64 * EPS
    assert abs(means[2 * n]) > 1e-3                   # degree 2n: one past the Gauss rule


@pytest.mark.parametrize("m", [1, 2, 3])
def test_gegenbauer_sectors_are_orthonormal(m):
    L, d = 12, 4
    B = GegenbauerBasis(L, d, nodes=2 * L + 8, sector=m)
    assert B.degrees[0] == m and B.derivative_table is None
    np.testing.assert_allclose(B.projection @ B.table, np.eye(L + 1 - m), rtol=0, atol=64 * EPS)
    np.testing.assert_array_equal(B.laplacian, B.degrees * (B.degrees + d - 2.0))
    zonal = GegenbauerBasis(L, d, nodes=2 * L + 8, lowest=1)
    np.testing.assert_array_equal(zonal.in_sector(m).table, B.table)      # the same nodes, not recomputed


# -- the resolution policy ------------------------------------------------------------------------------
def test_resolution_policies_of_the_solvers():
    fourier, harmonics, gegenbauer = FourierCircle.policy, SphericalHarmonics.policy, Gegenbauer.policy
    # automatic starts: the kernel's minimum degree (36 at β = 16, 82/83 at β = 100), at least the
    # policy's start, with a power-of-two bandwidth except on S^2
    assert [fourier.start(b, 2) for b in (1.0, 16.0, 100.0)] == [64, 64, 128]
    assert [gegenbauer.start(b, 4) for b in (1.0, 16.0, 50.0, 100.0)] == [32, 64, 64, 128]
    assert [harmonics.start(b, 3) for b in (1.0, 50.0, 100.0)] == [31, 59, 82]
    # refinement doubles the bandwidth: K -> 2K, L -> 2L, on S^2 L + 1 -> 2(L + 1), up to the cap
    assert [fourier.refine(64, 16384), fourier.refine(128, 200)] == [128, 200]
    assert [harmonics.refine(31, 1023), harmonics.refine(63, 1023), harmonics.refine(600, 1023)] == [63, 127, 1023]
    assert gegenbauer.refine(32, 1024) == 64
    assert fourier.choose("auto", 16384, 4.0, 2) == (64, 16384, True)
    assert harmonics.choose(40, None, 4.0, 3) == (40, 40, False)


def test_resolution_policy_refuses_bad_input_naming_the_argument():
    p = ResolutionPolicy("modes", "max_modes", low=8, auto_start=64, auto_cap=1024, high=4096)
    with pytest.raises(ValueError, match="`modes` must be an integer >= 8 or 'auto', got 'many'"):
        p.choose("many", 1024, 1.0, 2)
    with pytest.raises(ValueError, match="`modes`"):
        p.choose(4, None, 1.0, 2)
    with pytest.raises(ValueError, match="`modes`"):
        p.choose(5000, None, 1.0, 2)
    with pytest.raises(ValueError, match="`modes`=20.*modes >= 36"):
        p.choose(20, None, 16.0, 2)
    with pytest.raises(ValueError, match="`max_modes`=40 is below the resolution modes=64"):
        p.choose("auto", 40, 1.0, 2)
    with pytest.raises(ValueError, match="`max_modes`"):
        p.choose("auto", 10 ** 6, 1.0, 2)


def test_gegenbauer_pad_adds_zero_degrees():
    coarse, fine = GegenbauerBasis(4, 5), GegenbauerBasis(9, 5)
    c = np.arange(1.0, 6.0)
    np.testing.assert_array_equal(coarse.pad(c, fine), np.concatenate([c, np.zeros(5)]))


def test_refinement_continues_on_the_refined_basis():
    """`AutoResolution._refine`: a copy of the solver on the refined basis, the state zero-padded."""
    import meanfield as mf
    from solvers.fourier import padded_size

    fc = FourierCircle(mf.Model(beta=1.0, dim=2), modes="auto", w1=False)
    assert (fc.modes, fc.max_modes, fc.refinable) == (64, 16384, True)
    u = RNG.standard_normal(64) + 1j * RNG.standard_normal(64)
    finer, v = fc._refine(None, 0.0, u)
    assert (finer.modes, finer.M, finer.basis.modes) == (128, padded_size(128), 128) and fc.modes == 64
    np.testing.assert_array_equal(v, np.concatenate([u, np.zeros(64)]))
    sh = SphericalHarmonics(mf.Model(beta=1.0, dim=3), lmax="auto", max_lmax=40)
    a = random_alm(sh.basis)
    finer, b = sh._refine(None, 0.0, a)
    assert (sh.lmax, finer.lmax, finer.ntheta, finer.refinable) == (31, 40, 61, False)
    assert b[alm_index(7, 3, 40)] == pytest.approx(a[alm_index(7, 3, 31)], abs=4 * EPS)
    fixed = Gegenbauer(mf.Model(beta=1.0, dim=4), lmax=16)
    assert (fixed.auto, fixed.max_lmax, fixed.refinable) == (False, 16, False)


# -- one basis per space ---------------------------------------------------------------------------------
def test_the_representation_and_the_solver_hold_the_same_basis():
    """One basis class per space, held by the state's representation and by the solver alike; the
    representation's evaluation and the solver's tracers call the same transform (bit for bit), and a
    basis that only evaluates at points builds no grid."""
    import meanfield as mf
    from meanfield.representations.fourier import FourierSeries
    from meanfield.representations.gegenbauer import GegenbauerSeries
    from meanfield.representations.harmonics import alm_to_real, real_to_alm

    S = SphericalHarmonics(mf.Model(beta=1.0, dim=3), lmax=16)
    rep = S._representation(None)
    assert type(rep.basis) is type(S.basis) is SphericalHarmonicBasis
    a = random_alm(S.basis)
    x = RNG.standard_normal((20, 3))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    c = alm_to_real(a, 16)
    np.testing.assert_array_equal(rep.evaluate(c, x), S.basis.values_at(real_to_alm(c), x))
    assert "_grid" not in rep.basis.__dict__
    assert type(FourierSeries(16).basis) is type(FourierCircle(mf.Model(beta=1.0, dim=2), modes=16).basis)
    G = Gegenbauer(mf.Model(beta=1.0, dim=5), lmax=16)
    assert type(G._representation(None).basis) is type(G.basis) is GegenbauerBasis
    assert "_tables" not in GegenbauerSeries(16, 5).basis.__dict__
