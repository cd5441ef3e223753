"""The lost-in-the-middle experiment (meanfield.experiments.lost_in_the_middle) and the closed form it
rests on (meanfield.transformer.causal): S_τ(s), τ_crit(β), the measurement from the layered equation, the command."""
import json

import numpy as np
import pytest

from meanfield.transformer.causal import critical_time, profile_rates, psi, response_profile, signal_weights
from meanfield.cli import main
from meanfield.experiments import lost_in_the_middle as litm      # the registered function
from meanfield.experiments.lost_in_the_middle import (SLOPE_POSITIONS, LostInTheMiddleOptions, end_slope,
                                                      is_u_shaped, layered_solver, measured_response,
                                                      smoothed_profile, threshold)


def test_profile_is_the_series_of_the_kinetic_paper():
    """S_τ(s) = Σ_n ω_n [λe^{λs}/(e^λ − 1)] ψ_{b_n τ}(Y_λ(s)) with ψ summed as its power series."""
    beta, lam, tau, s = 1.3, 1.0, 0.7, np.array([0.1, 0.4, 0.9])
    w, b = signal_weights(), profile_rates(beta)
    y = np.log(np.expm1(lam) / np.expm1(lam * s))
    series = np.zeros_like(s)
    for wn, bn in zip(w, b):
        c, term, total = bn * tau, bn * tau, bn * tau
        for k in range(200):
            term = term * c * y / ((k + 1) * (k + 2))
            total = total + term
        series += wn * lam * np.exp(lam * s) / np.expm1(lam) * total
    np.testing.assert_allclose(response_profile(tau, s, beta, lam), series, rtol=1e-12)
    assert psi(2.0, 0.0) == 2.0


@pytest.mark.parametrize("beta, lam", [(1.0, 1.0), (2.0, 1.0), (3.0, 0.5)])
def test_tau_crit_is_where_the_end_slope_changes_sign(beta, lam):
    tc = critical_time(beta, lam)
    h = 1e-5
    slope = [float(np.diff(response_profile(f * tc, [1 - 2 * h, 1 - h], beta, lam))[0]) for f in (0.99, 1.01)]
    assert slope[0] > 0 > slope[1]


def test_tau_crit_falls_with_beta():
    """b_n = n² I_n(β) grows with β, so the threshold falls: the kinetic paper's values at λ = 1."""
    values = [critical_time(b) for b in (1.0, 2.0, 3.0)]
    np.testing.assert_allclose(values, [2.457488980328, 0.600716224277, 0.174018393869], rtol=1e-10)


def test_u_shape_below_tau_crit_and_not_above():
    s = np.linspace(0.05, 0.95, 31)
    tc = critical_time(2.0)
    assert all(is_u_shaped(response_profile(f * tc, s, 2.0)) for f in (0.25, 0.5, 0.8))
    assert not any(is_u_shaped(response_profile(f * tc, s, 2.0)) for f in (1.2, 2.0))


def test_measured_response_is_the_green_function_through_the_bump():
    """β = 2: the layered equation's response at σ = 1 to a signal at s = 0.5 and 0.9 (ε = 1e-6) equals
    the closed form seen through the same bump to 1e-3."""
    o = LostInTheMiddleOptions()
    tau = critical_time(2.0) * np.array([0.5, 1.0, 2.0])
    solver = layered_solver(2.0, o, 256)
    for s in (0.5, 0.9):
        np.testing.assert_allclose(measured_response(solver, s, tau, 1e-6, o), smoothed_profile(tau, s, 2.0, o),
                                   rtol=1e-3)


def test_tau_crit_measured_within_one_percent():
    """β = 2: the root of the end slope of the measured profile (7 runs) is τ_crit to 1%."""
    o = LostInTheMiddleOptions()
    tc = critical_time(2.0)
    tau = tc * np.linspace(0.9, 1.1, 5)
    solver = layered_solver(2.0, o, 512)
    measured = np.array([measured_response(solver, s, tau, 1e-6, o) for s in SLOPE_POSITIONS]).T
    assert threshold(tau, end_slope(measured)) == pytest.approx(tc, rel=1e-2)


@pytest.mark.slow
def test_quick_experiment_passes(tmp_path):
    """``meanfield lost-in-the-middle --quick``: every check passes (τ_crit within 1% for β = 1, 2, 3, the U
    shape below τ_crit and not above, finite amplitude, particles), with summary.json, profiles.nc and the picture."""
    assert main(["lost-in-the-middle", "--quick", "--out", str(tmp_path), "--no-progress"]) == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["passed"] and summary["status"] == "finished"
    assert {"profiles.nc", "lost_in_the_middle.png", "summary.json"} <= {p.name for p in tmp_path.iterdir()}
    for beta in ("1", "2", "3"):
        r = summary["results"][f"beta_{beta}"]
        assert r["tau_crit_measured"] == pytest.approx(r["tau_crit"], rel=1e-2)


def test_bad_options_exit_2(tmp_path):
    assert main(["lost-in-the-middle", "--positions", "12", "--out", str(tmp_path)]) == 2
    assert main(["lost-in-the-middle", "--betas", "-1", "--out", str(tmp_path)]) == 2
    with pytest.raises(ValueError, match="`amplitudes`"):
        litm(amplitudes=(0.5,))
