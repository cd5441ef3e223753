"""Tokens in order for a causal run (meanfield.sample_tokens, docs/causal.md): the order carries no
direction unless the density does, and the law at each position is ρ0(·, σ)."""
import numpy as np
import pytest

import meanfield as mf


def _tilted(x):
    """1 + 0.6 x_1: a density of the direction alone, with mean direction 0.6/d e_1."""
    return 1 + 0.6 * x[..., 0]


def _turning(x, s):
    """1 + 0.6⟨x, e(s)⟩ with e(s) = (cos 2s, sin 2s, 0): its mean is 0.6/d e(s)."""
    return 1 + 0.6 * (x[..., 0] * np.cos(2 * s) + x[..., 1] * np.sin(2 * s))


def _quarter_z(x):
    """(quarter mean − overall mean)/standard error, per quarter and coordinate: the order's correlation with
    the direction in units of the iid sampling noise."""
    n, d = x.shape
    quarters = x.reshape(4, n // 4, d).mean(1)
    return (quarters - x.mean(0)) / (x.std(0) / np.sqrt(n // 4))


@pytest.mark.parametrize("dim", [2, 3])
def test_order_carries_no_direction(dim):
    """10^4 tokens of a density of x alone: every quarter's mean direction is within 3 standard errors of the
    overall mean for iid tokens (chance), and within 0.2 for quasi tokens (a low-discrepancy set in every
    quarter); the quadrature points of `sample(method="quasi")` taken in order are off by far more."""
    n = 10_000
    iid, w = mf.sample_tokens(_tilted, n, dim, method="iid", rng=1)
    assert np.all(w == 1.0 / n) and np.abs(_quarter_z(iid)).max() <= 3.0
    quasi, _ = mf.sample_tokens(_tilted, n, dim, method="quasi", rng=1)
    assert np.abs(_quarter_z(quasi)).max() <= 0.2
    assert np.abs(quasi.mean(0) - 0.6 / dim * np.eye(dim)[0]).max() <= 1e-3
    sorted_points, _ = mf.sample(_tilted, n, dim, method="quasi")
    assert np.abs(_quarter_z(sorted_points)).max() >= 20


@pytest.mark.parametrize("dim, n", [(2, 10_000), (3, 2_000)])
def test_law_at_each_position(dim, n):
    """ρ0(x, s) = 1 + 0.6⟨x, e(s)⟩: the tokens' mean in each quarter of the positions against ∫ 0.6/d e(σ) dσ
    over the quarter (Gauss–Legendre): within 3 standard errors (iid) and 2e-3 (quasi)."""
    g, gw = np.polynomial.legendre.leggauss(12)
    expected = []
    for k in range(4):
        s = (k + 0.5 + 0.5 * g) / 4
        expected.append(0.6 / dim * np.array([gw @ np.cos(2 * s), gw @ np.sin(2 * s)]) / 2)
    for method, bound in (("iid", None), ("quasi", 2e-3)):
        x, _ = mf.sample_tokens(_turning, n, dim, method=method, rng=2)
        gap = x[:, :2].reshape(4, n // 4, 2).mean(1) - np.array(expected)
        if bound is None:
            assert np.abs(gap / (x[:, :2].std(0) / np.sqrt(n // 4))).max() <= 3.0
        else:
            assert np.abs(gap).max() <= bound
    assert np.all(np.abs(np.linalg.norm(x, axis=1) - 1) <= 1e-14)


def test_given_positions():
    """Tokens at given positions: the law follows the positions, not the index (all at s = 0.25: one law)."""
    x, _ = mf.sample_tokens(_turning, 4000, 2, positions=np.full(4000, np.pi / 4), method="quasi", rng=0)
    assert x.mean(0) == pytest.approx([0.0, 0.3], abs=2e-3)


@pytest.mark.parametrize("kwargs, name", [
    (dict(method="sorted"), "`method`"),
    (dict(positions=np.linspace(1, 0.1, 10)), "`positions`"),
    (dict(dim=4), "`dim`"),
    (dict(rho0=lambda x, s: -np.ones(len(x))), "`rho0`"),
    (dict(n=0), "`n`"),
])
def test_refuses(kwargs, name):
    args = dict(rho0=_turning, n=10, dim=2)
    args.update(kwargs)
    rho0, n, dim = args.pop("rho0"), args.pop("n"), args.pop("dim")
    with pytest.raises(ValueError, match=name):
        mf.sample_tokens(rho0, n, dim, **args)
