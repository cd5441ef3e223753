"""The shared integrator against exact solutions (solvers/timestepping.py)."""
import numpy as np
import pytest

from meanfield.errors import SolverError
from solvers import timestepping as ts


@pytest.mark.parametrize("method,rtol,tol", [("dopri5", 1e-10, 1e-9), ("bs32", 1e-8, 1e-6)])
def test_riccati_exact_solution_and_landing(method, rtol, tol):
    t_eval = np.array([0.0, 0.3, 1.0, 3.0])
    res = ts.integrate(lambda t, y: -y ** 2, np.array([1.0, 2.0]), t_eval, method=method, rtol=rtol, atol=1e-14)
    assert res.success and res.failure is None and np.array_equal(np.array(res.t), t_eval)
    y = np.array(res.y)
    exact = np.stack([1 / (1 + t_eval), 2 / (1 + 2 * t_eval)], -1)
    assert np.max(np.abs(y - exact)) < tol
    assert res.nfev >= res.nsteps > 0


@pytest.mark.parametrize("method,order", [("dopri5", 5), ("bs32", 3)])
def test_the_method_order_is_the_slope_of_the_error_against_the_step(method, order):
    """u' = cos(t) u, u = e^{sin t}: with fixed steps h the error at t = 1 is C h^p (1 + O(h)); the
    least-squares slope of log error against log h over h = 1/4 ... 1/64 is the order p of the method."""
    steps = np.array([4, 8, 16, 32, 64])
    errs = [abs(ts.integrate(lambda t, y: np.cos(t) * y, np.array([1.0]), [0.0, 1.0], method=method, dt=1.0 / n)
                .y[-1][0] - np.exp(np.sin(1.0))) for n in steps]
    slope = np.polyfit(np.log(1.0 / steps), np.log(errs), 1)[0]
    assert abs(slope - order) < 0.2, slope


@pytest.mark.parametrize("method", ["dopri5", "bs32"])
def test_adaptive_error_follows_the_tolerance(method):
    """Adaptive runs: the error at t = 5 falls with rtol, at least as tol^(p/(p+1)) (Hairer–Nørsett–Wanner
    II.4: local error per unit step ∝ tol), and stays within a factor 100 of the tolerance."""
    order = ts.TABLEAUX[method].order
    tols = np.array([1e-5, 1e-7, 1e-9])
    errs = [abs(ts.integrate(lambda t, y: np.cos(t) * y, np.array([1.0]), [0.0, 5.0], method=method, rtol=tol,
                             atol=1e-14).y[-1][0] - np.exp(np.sin(5.0))) for tol in tols]
    slope = np.polyfit(np.log(tols), np.log(errs), 1)[0]
    assert slope > 0.8 * order / (order + 1) and max(np.array(errs) / tols) < 100, (slope, errs)


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
    assert not res.success and "t=" in res.message and "non-finite" in res.message
    assert len(res.t) == 3 and res.y[-1][0] == pytest.approx(10.0, rel=1e-6)
    # the failure is structured: y = 1/(1 − t) blows up at t = 1, after the saved time 0.9
    f = res.failure
    assert f.reason == "non-finite" and 0.9 < f.t < 1.001 and f.step == res.nsteps + 1 and f.state is None
    assert f"t={f.t:.6g}" in res.message and f"step {f.step}" in res.message


def test_fixed_step_failure_names_the_time_and_the_step():
    res = ts.integrate_fixed(lambda t, y, h: y / (1.0 - t - h) if t + h < 0.45 else y * np.inf, np.array([1.0]),
                             [0.0, 0.2, 1.0], 0.1)
    f = res.failure
    assert f.reason == "non-finite" and f.t == pytest.approx(0.5) and f.step == 5 and f.message == res.message
    assert res.t == [0.0, 0.2] and ts.integrate_fixed(lambda t, y, h: y, np.array([1.0]), [0.0, 1.0], 0.5).failure is None


def test_monitor_stops_the_run():
    def monitor(t, y):
        if y[0] > 2.0:
            raise SolverError(f"too big at t={t}")

    res = ts.integrate(lambda t, y: y, np.array([1.0]), np.linspace(0, 2, 11), monitor=monitor)
    assert isinstance(res.failure.error, SolverError) and res.message == str(res.failure.error)
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
    with pytest.raises(ValueError, match="`dt`"):
        ts.integrate_fixed(lambda t, y, h: y, np.array([1.0]), [0.0, 1.0], -0.1)


def test_a_solver_error_inside_a_step_is_a_failure_with_the_saved_times():
    """A `SolverError` raised by the step itself (SSP-RK3 when no sub-step meets the CFL limit) stops the
    run as a `Failure` with reason "step", the exception and the saved times before it."""
    def step(t, y, h):
        if t >= 0.5 - 1e-12:
            raise SolverError(f"no step at t={t:.6g}")
        return y * (1 + h)

    res = ts.integrate_fixed(step, np.array([1.0]), [0.0, 0.25, 0.5, 1.0], 0.125)
    f = res.failure
    assert f.reason == "step" and f.t == 0.5 and f.step == 5 and isinstance(f.error, SolverError)
    assert res.t == [0.0, 0.25, 0.5] and res.y[-1][0] == pytest.approx(1.125 ** 4, rel=1e-15)
    assert res.message == "no step at t=0.5" and res.nsteps == 4


def test_fixed_and_adaptive_stepping_are_one_object():
    """`RungeKutta` with ``dt`` takes exactly the steps of the pair without error control: one dopri5
    step of h = 0.1 on u' = u is the degree-5 Taylor polynomial plus the tableau's h^6 term (b·A^4c =
    1/600 against 1/720), and adaptive stepping through the same object stops at the same point."""
    rk = ts.RungeKutta(lambda t, y: y, 0.0, np.array([1.0]), 1.0, "dopri5", dt=0.1)
    assert rk.step(1.0) is None and rk.t == pytest.approx(0.1) and rk.nfev == 7
    taylor = sum(0.1 ** k / np.prod(np.arange(1, k + 1)) for k in range(6))
    assert rk.y[0] == pytest.approx(taylor + 0.1 ** 6 / 600, rel=1e-15)
    adaptive = ts.RungeKutta(lambda t, y: y, 0.0, np.array([1.0]), 1.0, "dopri5", rtol=1e-12, atol=1e-14)
    while adaptive.t < 1.0:
        assert adaptive.step(1.0) is None
    assert adaptive.t == 1.0 and adaptive.y[0] == pytest.approx(np.e, rel=1e-11) and adaptive.nsteps > 1
