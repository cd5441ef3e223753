"""The shared integrator against exact solutions (solvers/timestepping.py)."""
import numpy as np
import pytest

from meanfield.errors import SolverError
from solvers import timestepping as ts


@pytest.mark.parametrize("method,rtol,tol", [("dopri5", 1e-10, 1e-9), ("bs32", 1e-8, 1e-6)])
def test_riccati_exact_solution_and_landing(method, rtol, tol):
    t_eval = np.array([0.0, 0.3, 1.0, 3.0])
    res = ts.integrate(lambda t, y: -y ** 2, np.array([1.0, 2.0]), t_eval, method=method, rtol=rtol, atol=1e-14)
    assert res.status == 0 and np.array_equal(np.array(res.t), t_eval)
    y = np.array(res.y)
    exact = np.stack([1 / (1 + t_eval), 2 / (1 + 2 * t_eval)], -1)
    assert np.max(np.abs(y - exact)) < tol
    assert res.nfev >= res.nsteps > 0


def test_error_decreases_with_tolerance_at_the_method_order():
    errs = []
    for rtol in (1e-5, 1e-7, 1e-9):
        res = ts.integrate(lambda t, y: np.cos(t) * y, np.array([1.0]), [0.0, 5.0], rtol=rtol, atol=1e-14)
        errs.append(abs(res.y[-1][0] - np.exp(np.sin(5.0))))
    assert errs[2] < errs[1] < errs[0] and errs[2] < 1e-8


def test_integrating_factor_is_exact_for_the_linear_part():
    """du/dt = L u with L = −ν k² (complex/real) is integrated exactly, with no stiffness limit."""
    L = -0.3 * np.arange(0, 400.0) ** 2
    u0 = np.ones(400, complex)
    res = ts.integrate(lambda t, y: np.zeros_like(y), u0, [0.0, 0.5, 2.0], linear=L, rtol=1e-10, atol=1e-14)
    assert np.allclose(res.y[-1], np.exp(2.0 * L), rtol=1e-13, atol=1e-300)
    assert res.nsteps <= 10          # an explicit method would need ~3e4 steps (h < 2.8/max|L|)
    # with a nonlinear part: u' = −λu + u² has u = λ/(1 + (λ/u0 − 1) e^{λt})
    lam = 5.0
    res = ts.integrate(lambda t, y: y ** 2, np.array([0.5]), [0.0, 1.0], linear=np.array([-lam]), rtol=1e-11, atol=1e-15)
    exact = lam / (1 + (lam / 0.5 - 1) * np.exp(lam * 1.0))
    assert res.y[-1][0] == pytest.approx(exact, rel=1e-9)


def test_retraction_keeps_the_sphere():
    omega = np.array([[0, -1.0], [1.0, 0]])
    res = ts.integrate(lambda t, y: y @ omega.T, np.array([1.0, 0.0]), [0.0, 10.0], rtol=1e-6, atol=1e-9,
                       retract=lambda y: y / np.linalg.norm(y))
    assert abs(np.linalg.norm(res.y[-1]) - 1) < 1e-15
    assert np.allclose(res.y[-1], [np.cos(10.0), np.sin(10.0)], atol=1e-5)


def test_error_relative_to_a_magnitude_makes_the_steps_rotation_invariant():
    """u' = Ωu (a rotation of the plane): with rtol relative to |u| (``magnitude``) every rotated
    start takes the same steps; relative to |u_k| component by component it does not, and the
    component that passes near zero forces more steps."""
    omega = np.array([[0, -1.0], [1.0, 0]])
    fun = lambda t, y: y @ omega.T
    counts, plain = set(), set()
    for a in np.linspace(0.0, 1.5, 7):
        u0 = np.array([np.cos(a), np.sin(a)])
        res = ts.integrate(fun, u0, [0.0, 10.0], rtol=1e-6, atol=1e-12, magnitude=lambda y: np.linalg.norm(y))
        assert np.allclose(res.y[-1], [np.cos(a + 10.0), np.sin(a + 10.0)], atol=1e-4)
        counts.add(res.nfev)
        plain.add(ts.integrate(fun, u0, [0.0, 10.0], rtol=1e-6, atol=1e-12).nfev)
    assert len(counts) == 1 and len(plain) > 1 and min(plain) > counts.pop()


def test_blow_up_is_reported_and_keeps_the_saved_times():
    res = ts.integrate(lambda t, y: y ** 2, np.array([1.0]), [0.0, 0.5, 0.9, 2.0], rtol=1e-8, atol=1e-12)
    assert res.status == -1 and "t=" in res.message and "non-finite" in res.message
    assert len(res.t) == 3 and res.y[-1][0] == pytest.approx(10.0, rel=1e-6)
    # the failure is structured: y = 1/(1 − t) blows up at t = 1, after the saved time 0.9
    f = res.failure
    assert f.reason == "non-finite" and 0.9 < f.t < 1.001 and f.step == res.nsteps + 1 and f.state is None
    assert f"t={f.t:.6g}" in res.message and f"step {f.step}" in res.message


def test_fixed_step_failure_names_the_time_and_the_step():
    res = ts.integrate_fixed(lambda t, y, h: y / (1.0 - t - h) if t + h < 0.45 else y * np.inf, np.array([1.0]),
                             [0.0, 0.2, 1.0], 0.1)
    f = res.failure
    assert res.status == -1 and f.reason == "non-finite" and f.t == pytest.approx(0.5) and f.step == 5
    assert res.t == [0.0, 0.2] and ts.integrate_fixed(lambda t, y, h: y, np.array([1.0]), [0.0, 1.0], 0.5).failure is None


def test_monitor_stops_the_run():
    def monitor(t, y):
        if y[0] > 2.0:
            raise SolverError(f"too big at t={t}")

    res = ts.integrate(lambda t, y: y, np.array([1.0]), np.linspace(0, 2, 11), monitor=monitor)
    assert res.status == 1 and isinstance(res.error, SolverError)
    assert res.t[-1] <= np.log(2.0) + 0.3 and len(res.t) >= 4
    # the state the monitor stopped, at the time it was given: what a continuation goes on from
    f = res.failure
    assert f.reason == "monitor" and f.step == res.nsteps and str(f.t) in res.message
    assert f.state[0] > 2.0 and f.state[0] == pytest.approx(np.exp(f.t), rel=1e-6)


def test_fixed_step_driver_is_exact_euler():
    res = ts.integrate_fixed(lambda t, y, h: y - h * y, np.array([1.0]), [0.0, 0.25, 1.0], 0.1)
    # 0.25 = 0.1 + 0.1 + 0.05, then 0.75 = 7 × 0.1 + 0.05
    assert res.y[1][0] == pytest.approx(0.9 * 0.9 * 0.95, rel=1e-15)
    assert res.y[2][0] == pytest.approx(0.9 * 0.9 * 0.95 * 0.9 ** 7 * 0.95, rel=1e-14)
    assert res.t == [0.0, 0.25, 1.0]
    with pytest.raises(ValueError, match="dt"):
        ts.integrate_fixed(lambda t, y, h: y, np.array([1.0]), [0.0, 1.0], -0.1)
