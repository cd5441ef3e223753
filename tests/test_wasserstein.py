"""Wasserstein distances with the geodesic cost: closed forms, the LP, metric axioms (docs/mathematics.md §8)."""
import numpy as np
import ot
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import meanfield as mf
from meanfield.observables.wasserstein import circle_w1, wasserstein


def circle_points(theta):
    return np.stack([np.cos(theta), np.sin(theta)], -1)


def random_measure(rng, n, dim):
    x = rng.standard_normal((n, dim))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x, rng.dirichlet(np.ones(n))


def rotation(rng, dim):
    q, r = np.linalg.qr(rng.standard_normal((dim, dim)))
    return q * np.sign(np.diag(r))


@pytest.mark.parametrize("dim", [2, 3, 4])
def test_two_diracs_give_their_angle(dim):
    rng = np.random.default_rng(dim)
    for _ in range(5):
        (x, _), (y, _) = random_measure(rng, 1, dim), random_measure(rng, 1, dim)
        ang = np.arccos(np.clip(x[0] @ y[0], -1, 1))
        assert mf.wasserstein((x, [1.0]), (y, [1.0])) == pytest.approx(ang, abs=1e-12)
        assert mf.wasserstein((x, [1.0]), (y, [1.0]), p=2) == pytest.approx(ang, abs=1e-7)


def test_uniform_to_dirac_is_pi_over_2():
    for n in (1000, 100000):
        x, w = mf.sphere_quadrature(n, 2)
        assert mf.wasserstein((x, w), (circle_points(np.array([0.7])), [1.0])) == pytest.approx(np.pi / 2, abs=1e-12)
    x, w = mf.sphere_quadrature(4000, 3)
    d = mf.wasserstein((x, w), (np.array([[0.0, 0.0, 1.0]]), [1.0]))
    assert d == pytest.approx(np.pi / 2, abs=2e-4)   # Fibonacci quadrature error O(1/n)
    assert mf.w1_to_uniform((np.array([[0.0, 1.0]]), [1.0])) == pytest.approx(np.pi / 2, abs=1e-6)


def test_circle_formula_equals_linear_program():
    """The O(m log m) CDF formula against POT's network simplex on the arc-length cost."""
    rng = np.random.default_rng(0)
    for n, m in [(1, 1), (5, 3), (40, 60), (200, 150)]:
        a, b = random_measure(rng, n, 2), random_measure(rng, m, 2)
        ta, tb = np.arctan2(a[0][:, 1], a[0][:, 0]), np.arctan2(b[0][:, 1], b[0][:, 0])
        diff = np.abs(ta[:, None] - tb[None, :])
        cost = np.minimum(diff, 2 * np.pi - diff)
        lp = ot.emd2(a[1], b[1], cost)
        assert mf.wasserstein(a, b) == pytest.approx(lp, abs=1e-10)
        assert circle_w1(ta, a[1], tb, b[1]) == pytest.approx(lp, abs=1e-10)
        lp2 = np.sqrt(ot.emd2(a[1], b[1], cost ** 2))
        assert mf.wasserstein(a, b, p=2) == pytest.approx(lp2, abs=1e-5)


@pytest.mark.parametrize("dim", [2, 3])
def test_metric_axioms_and_rotation_invariance(dim):
    rng = np.random.default_rng(10 + dim)
    for _ in range(4):
        a, b, c = (random_measure(rng, k, dim) for k in (30, 40, 25))
        ab, ba = mf.wasserstein(a, b), mf.wasserstein(b, a)
        assert ab == pytest.approx(ba, abs=1e-12)
        assert mf.wasserstein(a, c) <= ab + mf.wasserstein(b, c) + 1e-12
        assert mf.wasserstein(a, a) == pytest.approx(0.0, abs=1e-12)
        R = rotation(rng, dim)
        assert mf.wasserstein((a[0] @ R.T, a[1]), (b[0] @ R.T, b[1])) == pytest.approx(ab, abs=1e-10)


def test_sphere_approximate_methods():
    """Sinkhorn's rounded plan is a coupling, so its cost is an upper bound of W1; with reg = 1e-2 it is
    1.7e-3 above W1 here (1.6e-3 to 1.8e-3 for five random pairs of 300 points), well inside the
    O(reg·log(1/reg)) ≈ 0.05 of the theory: bound 2.5e-3. The spherical sliced distance (POT, on circles
    of length 1) is a smaller metric: 0 < sliced <= W1 (about W1/10 here)."""
    rng = np.random.default_rng(5)
    a, b = random_measure(rng, 300, 3), random_measure(rng, 300, 3)
    exact = mf.wasserstein(a, b, method="exact")
    ent = mf.wasserstein(a, b, method="sinkhorn", reg=1e-2)
    assert exact - 1e-9 <= ent <= exact + 2.5e-3
    sliced = mf.wasserstein(a, b, method="sliced", n_projections=200)
    assert 0 < sliced <= exact



def test_binned_method_is_within_its_bound():
    """|W1 − binned| <= binning cost (triangle inequality), and the estimate sees real transport."""
    rng = np.random.default_rng(6)
    a, b = random_measure(rng, 400, 3), random_measure(rng, 500, 3)
    exact = mf.wasserstein(a, b, method="exact")
    for n_bins in (200, 1000):
        est, bound = mf.wasserstein(a, b, method="binned", n_bins=n_bins, return_bound=True)
        assert abs(est - exact) <= bound + 1e-12
    assert bound < 0.1
    # two samplings of one smooth density: the binned estimate is far below its bound
    rho = mf.densities.von_mises_fisher([0, 0, 1], 2.0)
    p = mf.sample(rho, 20000, 3, method="quasi")
    q = mf.sample(rho, 20000, 3, rng=1, method="iid")
    est, bound = mf.wasserstein(p, q, method="binned", n_bins=1000, return_bound=True)
    assert est < 0.2 * bound
    # a rotation by 0.3 rad of a concentrated measure moves it by about 0.3
    r = np.array([[np.cos(0.3), 0, np.sin(0.3)], [0, 1, 0], [-np.sin(0.3), 0, np.cos(0.3)]])
    sharp = mf.sample(mf.densities.von_mises_fisher([0, 0, 1], 50.0), 5000, 3, method="quasi")
    moved = (sharp[0] @ r.T, sharp[1])
    assert mf.wasserstein(sharp, moved, method="binned", n_bins=3000) == pytest.approx(0.3, abs=0.03)
    y, v = mf.sphere_quadrature(10, 3)
    with pytest.raises(ValueError, match="n_bins"):
        mf.wasserstein((y, v), (y, v), method="binned", n_bins=10**6)
    with pytest.raises(ValueError, match="p = 1"):
        mf.wasserstein((y, v), (y, v), method="binned", p=2)
    x, w = mf.sphere_quadrature(10, 2)
    # on S^1 the exact CDF formula is used whatever the method
    assert mf.wasserstein((x, w), (x, w), method="binned") == pytest.approx(0.0, abs=1e-12)
    assert mf.wasserstein((x, w), (x, w), method="binned", return_bound=True) == (pytest.approx(0.0, abs=1e-12), 0.0)

def test_w1_to_dirac():
    x, w = mf.sphere_quadrature(4096, 2)
    assert mf.w1_to_dirac((x, w)) == pytest.approx(np.pi / 2, abs=1e-6)
    theta = np.array([0.0, 0.2, 0.5])
    # on the circle the nearest Dirac sits at the weighted median
    assert mf.w1_to_dirac((circle_points(theta), np.array([0.2, 0.5, 0.3]))) == pytest.approx(0.2 * 0.2 + 0.3 * 0.3, abs=1e-9)
    e = np.array([[0.0, 0.0, 1.0]])
    assert mf.w1_to_dirac((e, [1.0])) == pytest.approx(0.0, abs=1e-12)


def test_bad_inputs():
    x, w = mf.sphere_quadrature(10, 2)
    with pytest.raises(ValueError, match=r"`b\[0\] \(points\)` must have last axis of length dim=2"):
        mf.wasserstein((x, w), mf.sphere_quadrature(10, 3))
    with pytest.raises(ValueError, match="sum to 1"):
        mf.wasserstein((x, w * 2), (x, w))
    with pytest.raises(ValueError, match="unit sphere"):
        mf.wasserstein((x * 1.01, w), (x, w))
    with pytest.raises(ValueError, match="NaN"):
        mf.wasserstein((x, np.full(10, np.nan)), (x, w))
    with pytest.raises(ValueError, match=r"`p` must be >= 1"):
        mf.wasserstein((x, w), (x, w), p=0.5)
    y, v = mf.sphere_quadrature(10, 3)
    with pytest.raises(ValueError, match="method"):
        mf.wasserstein((y, v), (y, v), method="magic")
    with pytest.raises(ValueError, match="shape"):
        mf.wasserstein((x, w[:5]), (x, w))


def test_circle_w1_to_density_exact_values():
    """n equispaced midpoints against σ: W1 = π/(2n) exactly; any measure against σ equals the exact W1
    to a fine midpoint discretisation of σ."""
    from meanfield.observables.wasserstein import circle_w1_to_density

    for n in (1, 7, 1000):
        theta = 2 * np.pi * (np.arange(n) + 0.5) / n
        x = np.stack([np.cos(theta), np.sin(theta)], -1)
        assert circle_w1_to_density((x, np.full(n, 1 / n)), [1.0]) == pytest.approx(np.pi / (2 * n), rel=1e-12)
    x, w = mf.sample(mf.densities.von_mises_fisher([1.0, 0.0], 3.0), 300, 2, rng=4)
    m = 1 << 20
    fine = mf.sphere_quadrature(m, 2)
    assert circle_w1_to_density((x, w), [1.0]) == pytest.approx(mf.wasserstein((x, w), fine), abs=2 * np.pi / m)


@pytest.mark.parametrize("n", [5, 200, 20_000])
def test_circle_w1_to_density_against_a_fine_discretisation(n):
    """A von Mises density (Fourier coefficients c_k = I_k(κ)/I_0(κ)) against iid samples of another:
    the exact distance agrees with W1 to the density's values at 2^21 points within their O(1/m)."""
    from scipy.special import ive

    from meanfield.observables.wasserstein import circle_w1_to_density

    kappa, K = 2.0, 60
    c = ive(np.arange(K + 1), kappa) / ive(0, kappa)               # ρ = e^{κ cos θ}/I_0(κ), σ-relative
    m = 1 << 21
    theta = 2 * np.pi * (np.arange(m) + 0.5) / m
    rho = np.exp(kappa * (np.cos(theta) - 1)) / ive(0, kappa)
    ref = (np.stack([np.cos(theta), np.sin(theta)], -1), rho / rho.sum())
    x, w = mf.sample(mf.densities.von_mises_fisher([0.0, 1.0], 1.0), n, 2, rng=n)
    assert circle_w1_to_density((x, w), c) == pytest.approx(mf.wasserstein((x, w), ref), abs=4 * np.pi / m)


def _clusters(n, seed, width):
    rng = np.random.default_rng(seed)
    centres = np.array([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    x = centres[rng.integers(0, 3, n)] + width * rng.standard_normal((n, 3))
    return x / np.linalg.norm(x, axis=1, keepdims=True), np.full(n, 1.0 / n)


def test_merged_equals_exact_within_the_merging_cost():
    """Clustered measures (width 1e-6): the merged LP is the exact one to its bound (about 3e-8); spread ones
    are not merged at all (bound 0)."""
    a, b = _clusters(3000, 1, 1e-6), _clusters(2000, 2, 1e-6)
    exact = wasserstein(a, b)
    val, bound = wasserstein(a, b, method="merged", return_bound=True)
    assert 0 < bound <= 1e-7 and abs(val - exact) <= bound
    x, y = mf.sample(mf.densities.uniform(), 1500, 3, rng=1), mf.sample(mf.densities.uniform(), 1200, 3, rng=2)
    val, bound = wasserstein(x, y, method="merged", return_bound=True)
    assert bound < 1e-15 and abs(val - wasserstein(x, y)) <= 1e-12


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10 ** 6), spacing=st.floats(1e-3, 0.5))
def test_merge_on_grid_cost_bounds_the_change_of_w1(seed, spacing):
    """|W1(a, b) − W1(merged a, b)| <= the merging cost, and the merged measure keeps the mass."""
    from meanfield.observables.wasserstein import merge_on_grid

    a, b = _clusters(300, seed, 0.05), _clusters(200, seed + 1, 0.05)
    x, w, cost = merge_on_grid(a[0], a[1], spacing)
    assert abs(w.sum() - 1.0) <= 1e-14 and np.allclose(np.linalg.norm(x, axis=1), 1.0, atol=1e-14)
    assert abs(wasserstein((x, w), b) - wasserstein(a, b)) <= cost + 1e-12
