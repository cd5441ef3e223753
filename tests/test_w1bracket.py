"""The certified W1 bracket on S^2 (meanfield.observables.w1bracket): it contains the exact value."""
import numpy as np
import ot
import pytest
from hypothesis import given, settings, strategies as st

import meanfield as mf
from meanfield.observables.w1bracket import cube_cells, tree_bound
from meanfield.observables.wasserstein import geodesic_distance


def cloud(rng, n):
    x = rng.standard_normal((n, 3))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    w = rng.random(n) + 0.05
    return x, w / w.sum()


def exact(a, b):
    return float(ot.emd2(a[1], b[1], geodesic_distance(a[0][:, None], b[0][None]), numItermax=10 ** 7))


@settings(max_examples=25, deadline=None)
@given(n=st.integers(2, 60), m=st.integers(2, 60), seed=st.integers(0, 10 ** 6), clustered=st.booleans())
def test_the_bracket_between_clouds_contains_the_exact_lp(n, m, seed, clustered):
    rng = np.random.default_rng(seed)
    a, b = cloud(rng, n), cloud(rng, m)
    if clustered:                      # b is a's atoms moved slightly: a small W1 the bracket must still hold
        moved = a[0] + 1e-3 * rng.standard_normal(a[0].shape)
        b = (moved / np.linalg.norm(moved, axis=1, keepdims=True), a[1])
    bracket = mf.wasserstein(a, b, method="bracket")
    value = exact(a, b)
    assert bracket.lower - 1e-12 <= value <= bracket.upper + 1e-12


def test_tree_bound_is_an_upper_bound_and_exact_for_one_cell():
    rng = np.random.default_rng(1)
    a, b = cloud(rng, 40), cloud(rng, 40)
    x = np.concatenate([a[0], b[0]])
    assert tree_bound(x, np.concatenate([a[1], -b[1]])) >= exact(a, b)
    # equal measures: no imbalance, no cost
    assert tree_bound(x, np.zeros(80)) == 0.0
    # cube cells: 6·4^level of them, every point in one
    ids = cube_cells(x, 3)
    assert ids.min() >= 0 and ids.max() < 6 * 4 ** 3


def test_octahedron_against_the_uniform_density():
    """The six vertices ±e_k, weight 1/6 each, against σ: each Voronoi cell holds mass 1/6, so there is
    no imbalance and W1 = E_σ[d(y, nearest vertex)] = E[arccos max_k |y_k|], computed here on a fine
    latitude-longitude Gauss rule (its error, from the kinks of the integrand, is about 2e-7): the
    bracket is narrow and within that error of it."""
    x = np.concatenate([np.eye(3), -np.eye(3)])
    bracket = mf.wasserstein((x, np.full(6, 1 / 6)), mf.densities.uniform(), method="bracket")
    s, ws = np.polynomial.legendre.leggauss(1200)
    phi = 2 * np.pi * (np.arange(2400) + 0.5) / 2400
    S, P = np.meshgrid(s, phi, indexing="ij")
    y = np.stack([np.sqrt(1 - S ** 2) * np.cos(P), np.sqrt(1 - S ** 2) * np.sin(P), S], -1)
    value = float(np.sum(ws[:, None] * np.arccos(np.abs(y).max(-1))) / (2 * 2400))
    assert bracket.lower - 1e-6 <= value <= bracket.upper + 1e-6
    assert bracket.parts["imbalance_transport"] < 1e-12 and bracket.width < 1e-10


@pytest.mark.parametrize("n", [300, 1000])
def test_quasi_points_against_their_density(n):
    """W1(μ, ν) for n quasi points of a two-cap density: the exact LP against a fine quasi
    discretisation ν_m (m = 12000) differs from W1(μ, ν) by at most W1(ν_m, ν) <= its own bracket's
    upper end, so [lower − U_m, upper + U_m] must contain it (triangle inequality)."""
    rho = mf.densities.mixture([mf.densities.von_mises_fisher([0, 0, 1.0], 3.0),
                                mf.densities.von_mises_fisher([1.0, 0, 0], 2.0)], [0.6, 0.4])
    mu = mf.sample(rho, n, 3, method="quasi")
    fine = mf.sample(rho, 12000, 3, method="quasi")
    bracket = mf.wasserstein(mu, rho, method="bracket")
    u_fine = mf.w1_bracket(fine, rho).upper
    value = exact(mu, fine)
    assert bracket.lower - u_fine <= value <= bracket.upper + u_fine
    assert bracket.width < (0.15 if n == 300 else 0.08)


def test_bad_input():
    x = np.concatenate([np.eye(3), -np.eye(3)])
    with pytest.raises(ValueError, match="`p`"):
        mf.wasserstein((x, np.full(6, 1 / 6)), mf.densities.uniform(), method="bracket", p=2)
    with pytest.raises(ValueError, match="`density`"):
        mf.w1_bracket((x, np.full(6, 1 / 6)), lambda y: 2 * np.ones(len(y)))
    with pytest.raises(ValueError, match=r"`measure\[0\] \(points\)`"):
        mf.w1_bracket((x[:, :2], np.full(6, 1 / 6)), mf.densities.uniform())
