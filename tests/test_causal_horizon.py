"""The causal mean-field horizon (meanfield.experiments.causal_horizon): the quarter gaps of a small run,
the crossing time and the growth fits (the measurement itself is docs/make_causal_horizon_figures.py)."""
import numpy as np
import pytest

from meanfield.experiments.causal_horizon import crossing, growth_fit, horizon


def test_gaps_start_at_the_sampling_error_and_grow():
    """512 quasi tokens on S^1 ((SA), β = 4, λ = 1) against the layered continuum up to t = 2: at t = 0 the
    gaps are the quasi tokens' discrepancy (below 5e-3), the first quarter's grows first, the horizon
    (0.05) is not reached by t = 2 (measured 5.0 at n = 1024)."""
    h, continuum = horizon(2, 512, t_end=2.0, dt=1.0)
    assert h.gaps.shape == (3, 4) and np.all(h.gaps[0] <= 1e-2)
    assert h.gaps[-1, 0] > h.gaps[0, 0] and np.isnan(h.t_horizon)
    assert continuum.t[-1] == 2.0


def test_crossing_and_fits():
    t = np.array([0.0, 1.0, 2.0, 3.0])
    assert crossing(t, np.array([0.01, 0.03, 0.07, 0.2]), 0.05) == pytest.approx(1.5)
    assert np.isnan(crossing(t, np.full(4, 0.01), 0.05))
    ns = np.array([1e3, 4e3, 1.6e4])
    fit = growth_fit(ns, 2.0 + 0.5 * np.log(ns))
    assert fit["log"][:2] == pytest.approx((2.0, 0.5)) and fit["log"][2] <= 1e-12
    fit = growth_fit(ns, 3.0 * ns ** 0.2)
    assert fit["power"][:2] == pytest.approx((3.0, 0.2)) and fit["power"][2] <= 1e-12
