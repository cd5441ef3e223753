"""solvers.timestepping.integrate with dense_output: saved times from the pairs' continuous extensions."""
import numpy as np
import pytest

from solvers.timestepping import integrate


@pytest.mark.parametrize("method,order", [("dopri5", 4), ("bs32", 3)])
def test_interpolant_order_and_steps_independent_of_the_saved_times(method, order):
    """y' = (−y_1 + y_0 ω, ...) rotation-decay on R^2: the saved values at 1001 times match the exact
    solution to the error control's level, the steps do not depend on how many times are saved, and
    halving the step (first_step/max_step fixed) divides the interpolation error by ~2^(order+1)."""
    w, lam = 3.0, 0.2
    A = np.array([[-lam, -w], [w, -lam]])

    def exact(t):
        return np.stack([np.exp(-lam * t) * np.cos(w * t), np.exp(-lam * t) * np.sin(w * t)], axis=-1)

    fun = lambda t, y: A @ y  # noqa: E731
    few = integrate(fun, [1.0, 0.0], [0.0, 10.0], method=method, rtol=1e-8, atol=1e-10, dense_output=True)
    many = integrate(fun, [1.0, 0.0], np.linspace(0.0, 10.0, 1001), method=method, rtol=1e-8, atol=1e-10,
                     dense_output=True)
    assert many.nsteps == few.nsteps and len(many.t) == 1001
    np.testing.assert_allclose(many.t, np.linspace(0.0, 10.0, 1001), rtol=0, atol=1e-15)
    err = np.abs(np.array(many.y) - exact(np.array(many.t))).max()
    assert err < 1e-6
    errs = []
    for h in (0.1, 0.05):
        res = integrate(fun, [1.0, 0.0], np.linspace(0.0, 2.0, 401), method=method, rtol=1.0, atol=1.0,
                        first_step=h, max_step=h, dense_output=True)
        errs.append(np.abs(np.array(res.y) - exact(np.array(res.t))).max())
    assert errs[0] / errs[1] > 2 ** order * 0.8


def test_retraction_and_reused_stage():
    """With a retraction onto the circle and a field that retracts its argument, the last stage is
    reused (6 evaluations per dopri5 step); interpolated saved states are retracted."""
    calls = [0]

    def fun(t, y):
        calls[0] += 1
        u = y / np.linalg.norm(y)
        return np.array([-u[1], u[0]])                      # rotation at unit speed

    def retract(y):
        return y / np.linalg.norm(y)

    t = np.linspace(0.0, 6.0, 61)
    res = integrate(fun, [1.0, 0.0], t, rtol=1e-9, atol=1e-12, retract=retract, dense_output=True,
                    retract_invariant=True)
    y = np.array(res.y)
    np.testing.assert_allclose(np.linalg.norm(y, axis=1), 1.0, rtol=0, atol=1e-15)
    np.testing.assert_allclose(y, np.stack([np.cos(t), np.sin(t)], axis=1), rtol=0, atol=1e-7)
    assert res.nfev == calls[0] <= 6 * (res.nsteps + res.nrejected) + 2
