"""The one time integrator every solver uses (the named steppers that drive it: `solvers.steppers`).

Like scipy's ``OdeSolver``, a stepping object holds the current time ``t``, state ``y`` and the
counters ``nfev``, ``nsteps``, ``nrejected``, and advances by one accepted step with ``step(target)``,
written once in `Integrator`; a method fills in ``_step_impl``:

* `RungeKutta`: an explicit Runge–Kutta method given by its `Tableau`, for du/dt = L·u + N(t, u).
  Adaptive (default): the embedded pair's error estimate controls the step, ``"dopri5"``
  (Dormand–Prince 5(4)) or ``"bs32"`` (Bogacki–Shampine 3(2)). Fixed (``dt``): the same stages with
  a constant step, no error control.

  - ``linear=L``: an optional *diagonal* linear part (an array broadcastable to u, e.g. −ν l(l+d−2)
    for noise), treated exactly by an integrating factor (Lawson's method): stage values are
    U_i = e^{c_i h L} u_n + h Σ_j a_ij e^{(c_i − c_j) h L} k_j, so every exponent is ≤ 0 for
    dissipative L and L adds no stiffness limit to the step size;
  - dense output (``dense_output=True``, no linear part): the pair's continuous extension
    (Shampine's order-4 interpolant for dopri5, Hermite's cubic for bs32, as in scipy's RK45/RK23)
    gives the saved times inside a step, so that they no longer limit the step;
  - ``retract``: applied after each accepted step (particles: renormalise onto the sphere); the error
    control runs on the (tangent) update before retraction.
* `FixedStep`: any one-step map y ← step(t, y, h) with a fixed h (the SSP-RK3 of finite elements, the
  authors' Euler-then-normalise, Euler–Maruyama for noisy particles).

`march` drives either object through the saved times: steps land exactly on every saved time (or
the dense output reports them), ``monitor(t, u)`` runs after each accepted step, ``callback(result)``
at each saved time (checkpoints), ``progress`` shows a tqdm bar over simulated time (default: on
when stderr is a terminal). Every early stop is a `Failure` (where, which step, why, with the
exception and, for a monitor's stop, the state): a monitor's `meanfield.SolverError` (e.g.
`UnderResolved`), a `SolverError` raised inside a step (SSP-RK3's CFL limit), a NaN/inf that
persists when the step shrinks, a step-size underflow, Ctrl-C. `integrate` and `integrate_fixed`
build the object and march; they return an `IntegrationResult` (like scipy's ``OdeResult``): ``t``,
``y`` (the saved states), ``failure`` (None when the run finished), ``success``, ``message`` and the
counters.
"""
import sys
import time
from contextlib import nullcontext
from dataclasses import dataclass, field

import numpy as np
from tqdm.auto import tqdm

from meanfield.errors import InvalidInput, SolverError
from meanfield.threads import share_out, stop_event

SAFETY, MIN_FACTOR, MAX_FACTOR = 0.9, 0.2, 10.0


@dataclass(frozen=True, eq=False)
class Tableau:
    """An explicit Runge–Kutta pair: nodes ``c``, the stage rows ``A`` (row i: the weights of k_1..k_i in
    stage i + 1), the weights ``b`` of the step and ``b_hat`` of the embedded estimate, the ``order`` of
    the step control, and the continuous extension ``dense``:
    u(t + θh) = u + h Σ_i k_i Σ_j dense[i, j] θ^{j+1} (scipy.integrate RK45/RK23)."""

    name: str
    c: np.ndarray
    A: tuple
    b: np.ndarray
    b_hat: np.ndarray
    order: int
    dense: np.ndarray

    @property
    def stages(self):
        return len(self.c)

    @property
    def fsal(self):
        """The last stage is evaluated at u_{n+1} (first same as last: it is the next step's first)."""
        return bool(self.c[-1] == 1 and np.array_equal(self.A[-1], self.b[:len(self.A[-1])]))


DOPRI5 = Tableau(
    "dopri5",
    np.array([0, 1 / 5, 3 / 10, 4 / 5, 8 / 9, 1, 1]),
    tuple(np.asarray(row) for row in (
        [],
        [1 / 5],
        [3 / 40, 9 / 40],
        [44 / 45, -56 / 15, 32 / 9],
        [19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729],
        [9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656],
        [35 / 384, 0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84])),
    np.array([35 / 384, 0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84, 0]),
    np.array([5179 / 57600, 0, 7571 / 16695, 393 / 640, -92097 / 339200, 187 / 2100, 1 / 40]),
    5,
    np.array([
        [1, -8048581381 / 2820520608, 8663915743 / 2820520608, -12715105075 / 11282082432],
        [0, 0, 0, 0],
        [0, 131558114200 / 32700410799, -68118460800 / 10900136933, 87487479700 / 32700410799],
        [0, -1754552775 / 470086768, 14199869525 / 1410260304, -10690763975 / 1880347072],
        [0, 127303824393 / 49829197408, -318862633887 / 49829197408, 701980252875 / 199316789632],
        [0, -282668133 / 205662961, 2019193451 / 616988883, -1453857185 / 822651844],
        [0, 40617522 / 29380423, -110615467 / 29380423, 69997945 / 29380423]]),
)
BS32 = Tableau(
    "bs32",
    np.array([0, 1 / 2, 3 / 4, 1]),
    tuple(np.asarray(row) for row in ([], [1 / 2], [0, 3 / 4], [2 / 9, 1 / 3, 4 / 9])),
    np.array([2 / 9, 1 / 3, 4 / 9, 0]),
    np.array([7 / 24, 1 / 4, 1 / 3, 1 / 8]),
    3,
    np.array([[1, -4 / 3, 5 / 9], [0, 1, -2 / 3], [0, 4 / 3, -8 / 9], [0, -1, 1]]),
)
TABLEAUX = {t.name: t for t in (DOPRI5, BS32)}
ROW_BLOCK = 1 << 18       # columns of one block of the stage products (`RungeKutta._rows`)


@dataclass(frozen=True)
class Failure:
    """Where and why a run stopped before its last saved time.

    ``t``: the time of the failure (the state that failed, or the start of the step that could not
    be taken); ``step``: the number of the step (1 for the first); ``reason``: one of `REASONS`
    ("step": a `SolverError` raised inside a step); ``message``: what happened; ``error``: the
    exception of a "monitor" or "step" stop, else None; ``state``: with reason "monitor", the state
    at ``t`` that the monitor stopped (the state a continuation goes on from), else None.
    """

    t: float
    step: int
    reason: str
    state: object = None
    message: str = ""
    error: Exception = None

    REASONS = ("monitor", "step", "non-finite", "interrupted", "step-size underflow")


@dataclass
class IntegrationResult:
    """The saved times ``t`` and states ``y``, the one outcome ``failure`` (None: the run finished) and
    the counters."""

    t: list = field(default_factory=list)
    y: list = field(default_factory=list)
    failure: Failure = None
    nfev: int = 0
    nsteps: int = 0
    nrejected: int = 0
    wall_time: float = 0.0

    @property
    def success(self):
        return self.failure is None

    @property
    def message(self):
        return "finished" if self.failure is None else self.failure.message

    def save(self, t, y, callback=None, copy=True):
        """Record a saved time (the state, copied unless ``copy`` is False: a state made for it), then call
        ``callback(self)``. Every saved time of every stepper is recorded here."""
        self.t.append(float(t))
        self.y.append(y.copy() if copy else y)
        if callback is not None:
            callback(self)

    def stats(self):
        return {"nfev": self.nfev, "nsteps": self.nsteps, "nrejected": self.nrejected,
                "wall_time": self.wall_time}


def _progress_bar(progress, total, desc):
    if progress is None:
        progress = sys.stderr.isatty()
    if not progress:
        return None
    return tqdm(total=float(total), desc=desc or "integrating", unit="t", leave=False,
                bar_format="{l_bar}{bar}| t={n:.4g}/{total:.4g} [{elapsed}<{remaining}]")


def _rms(x):
    x = np.abs(x)
    return float(np.sqrt(np.mean(x * x))) if x.size else 0.0


def rms_norm(r):
    """The RMS norm sqrt(Σ|r_i|²/n) of the scaled error r (the error control's default norm)."""
    return float(np.sqrt(np.vdot(r, r).real / max(r.size, 1)))


def _select_initial_step(fun, t0, y0, f0, order, rtol, atol, span, magnitude=None):
    """Hairer–Nørsett–Wanner's starting step (as in scipy.integrate)."""
    scale = atol + (np.abs(y0) if magnitude is None else magnitude(y0)) * rtol
    d0, d1 = _rms(y0 / scale), _rms(f0 / scale)
    if not (np.isfinite(d0) and np.isfinite(d1)):
        return 1e-6 * span            # an overflowing field: the first step reports the non-finite state
    h0 = 1e-6 if d0 < 1e-5 or d1 < 1e-5 else 0.01 * d0 / d1
    h0 = min(h0, span)
    y1 = y0 + h0 * f0
    f1 = fun(t0 + h0, y1)
    d2 = _rms((f1 - f0) / scale) / h0
    if not np.isfinite(d2):
        return h0 * 1e-3
    h1 = max(1e-6, h0 * 1e-3) if d1 <= 1e-15 and d2 <= 1e-15 else (0.01 / max(d1, d2)) ** (1 / (order + 1))
    return min(100 * h0, h1, span)


class Integrator:
    """A stepping object (scipy's ``OdeSolver``). Contract for a method:

    1. ``__init__`` calls ``Integrator.__init__(self, t0, y0)``: ``t``, ``y`` (a copy), ``t_old`` (the
       start of the last accepted step) and the counters ``nfev``, ``nsteps``, ``nrejected``.
    2. ``_step_impl(target)`` takes one accepted step, not past ``target`` and landing exactly on it when
       it reaches it, updating ``t``, ``y``, ``t_old`` and the counters; it returns None, or a `Failure`
       when no step can be taken. `step` (written once) turns a `SolverError` raised inside into one.
    3. With ``dense`` True, ``dense_output(times)`` gives the states at times inside the last step.
    4. ``context()``: held while marching (e.g. the floating-point error state).
    """

    dense = False

    def __init__(self, t0, y0):
        self.t, self.y, self.t_old = float(t0), np.array(y0, copy=True), None
        self.nfev = self.nsteps = self.nrejected = 0

    def step(self, target):
        """One accepted step towards ``target``: None, or the `Failure` that stopped it."""
        try:
            return self._step_impl(target)
        except SolverError as exc:
            return Failure(float(self.t), self.nsteps + 1, "step", message=str(exc), error=exc)

    def _step_impl(self, target):
        raise NotImplementedError

    def dense_output(self, times):
        raise NotImplementedError(f"{type(self).__name__} has no dense output")

    def restart(self):
        """Forget what the last steps carry over (a first stage, a step size): the right-hand side
        changes here (a breakpoint of piecewise-constant parameters), so the next step starts afresh."""
        return None

    def context(self):
        return nullcontext()

    def _non_finite(self, t, detail=""):
        return Failure(float(t), self.nsteps + 1, "non-finite", message=(
            f"non-finite values (NaN or inf) in the state at t={t:.6g}, step {self.nsteps + 1}{detail}"))


class RungeKutta(Integrator):
    """An explicit Runge–Kutta method for du/dt = linear·u + fun(t, u) (see the module docstring).

    ``tableau``: a `Tableau` (or its name in `TABLEAUX`). ``dt=None``: adaptive, with the error norm
    ‖err / (atol + rtol·max(m(u_n), m(u_{n+1})))‖_rms where m is ``magnitude(u)`` (default |u|, component
    by component; particles pass the Euclidean norm of each point, which makes the control invariant
    under rotations, docs/particles.md "Adaptive runs"), the first step ``first_step`` or
    Hairer–Nørsett–Wanner's, at most ``max_step`` and ``stable_step(u)`` (the explicit pair's
    stability limit, e.g. an advective CFL bound). ``dt``: a fixed step, shortened to land on targets.
    ``retract_invariant``: fun(t, retract(u)) = fun(t, u), so the last stage is the next step's first
    one after a retraction too. ``t_bound``: the last time (it bounds the step). ``norm``: the norm of
    the scaled error (default RMS; a run with tracers takes the larger of two groups' RMS norms,
    `solvers.tracers.TracerLayout.norm`). ``threads``: the threads that share the stage products of
    large states (`meanfield.threads`).
    """

    def __init__(self, fun, t0, y0, t_bound, tableau="dopri5", *, dt=None, rtol=1e-8, atol=1e-10, linear=None,
                 retract=None, retract_invariant=False, first_step=None, max_step=np.inf, stable_step=None,
                 max_rejections=60, dense_output=False, magnitude=None, norm=None, threads=1):
        super().__init__(t0, y0)
        self.threads = threads
        self.fun, self.tableau = fun, TABLEAUX[tableau] if isinstance(tableau, str) else tableau
        self.L = None if linear is None else np.asarray(linear)
        self.dense = bool(dense_output) and self.L is None
        self.span, self.dt = t_bound - t0, None if dt is None else float(dt)
        self.rtol, self.atol, self.magnitude, self.max_rejections = rtol, atol, magnitude, max_rejections
        self.norm = rms_norm if norm is None else norm
        self.retract, self.retract_invariant = retract, retract_invariant
        self.max_step, self.stable_step = max_step, stable_step
        self.h = self.first_h = self.dt if first_step is None else float(first_step)
        self.k1 = self.KY = self.work = self.h_last = None
        self.rejections, self._exp = 0, {}

    def context(self):
        return np.errstate(over="ignore", invalid="ignore")

    def _rows(self, coeffs, rows):
        """coeffs @ rows for the rows (m, N) of KY: in blocks of ROW_BLOCK columns, set by N alone (the
        same sums on any number of threads), shared among the run's ``threads``."""
        n = rows.shape[1]
        if n < 2 * ROW_BLOCK:
            return coeffs @ rows
        out = np.empty(np.shape(coeffs)[:-1] + (n,), dtype=np.result_type(coeffs, rows))
        blocks = [slice(a, min(a + ROW_BLOCK, n)) for a in range(0, n, ROW_BLOCK)]
        share_out(lambda b: np.matmul(coeffs, rows[:, b], out=out[..., b]), blocks, self.threads)
        return out

    def _f(self, t, y):
        self.nfev += 1
        return self.fun(t, y)

    def restart(self):
        """The next step evaluates its first stage anew and, adaptive, chooses its size as a first step."""
        self.k1, self.h = None, self.first_h

    def _exp_L(self, tau):
        """e^{tau·L}, cached per distinct tau within one step."""
        val = self._exp.get(tau)
        if val is None:
            val = self._exp[tau] = np.exp(tau * self.L)
        return val

    def _begin(self, target):
        """The first stage at the start, the stage table and the first step size."""
        tab, y = self.tableau, self.y
        self.k1 = k1 = self._f(self.t, y)
        # without a linear part each stage, the new state, the error and an interpolant are one product
        # of coefficients with the rows [y; k_1; ...; k_s] of KY (one pass over the stages, not two per term)
        self.KY = None if self.L is not None else np.empty((tab.stages + 1, np.size(y)), dtype=np.result_type(y, k1))
        if self.h is None:
            self.h = _select_initial_step(self._f, self.t, y, k1 + (0 if self.L is None else self.L * y), tab.order,
                                          self.rtol, self.atol, target - self.t, self.magnitude)
        self.h = min(self.h, self.max_step)
        self.cap = self.max_step if self.stable_step is None else min(self.max_step, self.stable_step(y))
        self.h = min(self.h, self.cap)

    def _step_impl(self, target):
        if self.k1 is None:
            self._begin(target)
        if self.dt is not None:
            return self._fixed_step(target)
        while True:
            h = min(self.h, target - self.t)
            lands = h >= target - self.t - 1e-14 * max(1.0, abs(target))
            if lands:
                h = target - self.t
            y_new, k_last, err_norm = self._attempt(h)
            if err_norm <= 1.0:
                self._accept(target if lands else self.t + h, y_new, k_last, h)
                self._adapt(h, err_norm, lands)
                return None
            failure = self._reject(h, err_norm)
            if failure is not None:
                return failure

    def _fixed_step(self, target):
        h = min(self.dt, target - self.t)
        if target - (self.t + h) < 1e-12 * self.dt:
            h = target - self.t
        y_new, k_last, err_norm = self._attempt(h, control=False)
        if not np.isfinite(err_norm):
            return self._non_finite(self.t + h)
        self._accept(target if h == target - self.t else self.t + h, y_new, k_last, h)
        return None

    def _attempt(self, h, control=True):
        """A trial step of size h: (u_{n+1}, the last stage, the error norm (0 without ``control``));
        the norm is NaN when a stage or u_{n+1} is not finite."""
        self._exp.clear()
        ks, u_last = self._stages(h)
        if ks is None:
            return None, None, np.nan
        y_new, err = self._combine(ks, u_last, h)
        err_norm = self._error_norm(y_new, err) if control else 0.0
        if not (np.isfinite(err_norm) and np.all(np.isfinite(y_new))):
            return None, None, np.nan
        return y_new, ks[-1], err_norm

    def _stages(self, h):
        """The stage derivatives k_1..k_s of a step h from (t, u) and the last stage's state, or
        (None, None) when one is not finite."""
        tab, y, KY = self.tableau, self.y, self.KY
        ks, u = [self.k1], None
        if KY is not None:
            KY[0] = np.reshape(y, -1)
            KY[1] = np.reshape(self.k1, -1)
        if not np.all(np.isfinite(self.k1)):
            return None, None
        for i in range(1, tab.stages):
            if KY is not None:
                u = self._rows(np.concatenate(([1.0], h * tab.A[i])), KY[:i + 1]).reshape(np.shape(y))
            else:
                incr = 0
                for j, a in enumerate(tab.A[i]):
                    if a != 0:
                        incr = incr + a * (self._exp_L((tab.c[i] - tab.c[j]) * h) * ks[j])
                u = self._exp_L(tab.c[i] * h) * y + h * incr
            k = self._f(self.t + tab.c[i] * h, u)
            if not np.all(np.isfinite(k)):
                return None, None
            if KY is not None:
                KY[i + 1] = np.reshape(k, -1)
                k = KY[i + 1].reshape(np.shape(y))
            ks.append(k)
        return ks, u

    def _combine(self, ks, u_last, h):
        """u_{n+1} = e^{hL} u_n + h Σ b_j e^{(1 − c_j)hL} k_j and the embedded error estimate."""
        tab, y = self.tableau, self.y
        if self.KY is not None:
            y_new = u_last if tab.fsal else self._rows(np.concatenate(([1.0], h * tab.b)), self.KY).reshape(np.shape(y))
            return y_new, self._rows(h * (tab.b - tab.b_hat), self.KY[1:])
        acc, err = 0, 0
        for j in range(tab.stages):
            kj = self._exp_L((1 - tab.c[j]) * h) * ks[j]
            if tab.b[j] != 0:
                acc = acc + tab.b[j] * kj
            if tab.b[j] != tab.b_hat[j]:
                err = err + (tab.b[j] - tab.b_hat[j]) * kj
        return self._exp_L(h) * y + h * acc, h * err

    def _error_norm(self, y_new, err):
        """‖err / (atol + rtol·max(m(u_n), m(u_{n+1})))‖_rms, in place (two work arrays, no temporaries)."""
        shape = np.shape(y_new)
        if self.work is None or self.work[0].shape != shape:
            self.work = (np.empty(shape), np.empty(shape))
        scale, ratio = self.work
        if self.magnitude is None:
            np.abs(self.y, out=scale)
            np.maximum(scale, np.abs(y_new, out=ratio), out=scale)
        else:
            np.maximum(self.magnitude(self.y), self.magnitude(y_new), out=scale)
        scale *= self.rtol
        scale += self.atol
        if np.isrealobj(err):
            r = np.divide(np.reshape(err, shape), scale, out=ratio)
        else:
            r = np.reshape(err, shape) / scale
        return self.norm(r)

    def _reject(self, h, err_norm):
        """Shrink the step after a rejection; a `Failure` when it cannot shrink further."""
        self.rejections += 1
        self.nrejected += 1
        t = self.t
        if not np.isfinite(err_norm):
            self.h = h * MIN_FACTOR
            if self.rejections > self.max_rejections or self.h < 1e-14 * max(1.0, abs(t)):
                return self._non_finite(t, f"; the step size was reduced to {self.h:.3g} without success")
            return None
        self.h = h * max(MIN_FACTOR, SAFETY * err_norm ** (-1.0 / self.tableau.order))
        if self.h < 1e-14 * max(1.0, abs(t)) or self.rejections > 10 * self.max_rejections:
            return Failure(float(t), self.nsteps + 1, "step-size underflow", message=(
                f"step size underflow at t={t:.6g} (h={self.h:.3g}): the error control cannot meet rtol/atol"))
        return None

    def _accept(self, t_new, y_new, k_last, h):
        """Move to (t_new, u_{n+1}), retracted, with the next step's first stage (reused when FSAL)."""
        self.rejections = 0
        self.nsteps += 1
        reuse = self.tableau.fsal and (self.retract is None or self.retract_invariant)
        if self.retract is not None:
            y_new = self.retract(y_new)
        self.k1 = k_last.copy() if reuse else self._f(t_new, y_new)     # a copy: the rows of KY are reused
        self.t_old, self.h_last, self.t, self.y = self.t, h, t_new, y_new

    def _adapt(self, h, err_norm, lands):
        """The next step size from the error norm, within the stability cap; a short landing step does
        not shrink the proposal."""
        factor = MAX_FACTOR if err_norm == 0 else min(MAX_FACTOR, SAFETY * err_norm ** (-1.0 / self.tableau.order))
        if self.stable_step is not None:
            self.cap = min(self.max_step, self.stable_step(self.y))
        h_next = min(h * max(MIN_FACTOR, factor), self.cap)
        self.h = min(max(h_next, self.h), self.cap) if lands and h < self.h else h_next
        self.h = min(self.h, self.span)

    def dense_output(self, times):
        """The states at ``times`` inside the last step from the continuous extension, retracted."""
        tab = self.tableau
        theta = (np.asarray(times) - self.t_old) / self.h_last
        coef = np.cumprod(np.repeat(theta[:, None], tab.dense.shape[1], axis=1), axis=1) @ tab.dense[:tab.stages].T
        C = np.concatenate((np.ones((theta.size, 1)), self.h_last * coef), axis=1)
        out = [y.reshape(np.shape(self.y)) for y in self._rows(C, self.KY[:tab.stages + 1])]
        return out if self.retract is None else [self.retract(y) for y in out]


class FixedStep(Integrator):
    """y ← step(t, y, h) with h = ``dt``, shortened to land on every target; ``nfev`` counts the calls to
    ``step``; a non-finite state stops the run."""

    def __init__(self, step, t0, y0, dt):
        dt = float(dt)
        if not np.isfinite(dt) or dt <= 0:
            raise InvalidInput(f"`dt` must be a positive finite step, got {dt}.")
        super().__init__(t0, y0)
        self.fun, self.dt = step, dt

    def _step_impl(self, target):
        t = self.t
        h = min(self.dt, target - t)
        if target - (t + h) < 1e-12 * self.dt:
            h = target - t
        y_new = self.fun(t, self.y, h)
        self.nfev += 1
        if not np.all(np.isfinite(y_new)):
            return self._non_finite(t + h)
        self.nsteps += 1
        self.t_old, self.t, self.y = t, target if h == target - t else t + h, y_new
        return None


def march(integrator, t_eval, *, monitor=None, callback=None, progress=None, desc=None, breaks=(), on_break=None):
    """Advance ``integrator`` (started at ``t_eval[0]``) through the saved times ``t_eval``.

    Saves the start, every saved time (landed on, or from the dense output) and calls ``callback``
    there; ``monitor(t, u)`` after every accepted step may raise `meanfield.SolverError` to stop the
    run. ``breaks``: increasing times inside (t_eval[0], t_eval[-1]) where the right-hand side changes
    (piecewise-constant parameters): no step crosses one, the steps land on it, ``on_break(t)`` is
    called there (after the monitor and the saved time, if it is one) and the integrator restarts
    (`Integrator.restart`). Returns an `IntegrationResult` whose ``failure`` says where and why a run
    stopped early.
    """
    t_eval = np.asarray(t_eval, dtype=float)
    start = time.perf_counter()
    res = IntegrationResult()
    res.save(integrator.t, integrator.y, callback)
    bar = _progress_bar(progress, t_eval[-1] - t_eval[0], desc) if t_eval.size > 1 else None
    try:
        with integrator.context():
            res.failure = _march(integrator, t_eval, res, monitor, callback, bar, list(breaks), on_break)
    except KeyboardInterrupt:
        t = integrator.t
        res.failure = Failure(float(t), integrator.nsteps + 1, "interrupted", message=f"interrupted at t={t:.6g}")
    finally:
        if bar is not None:
            bar.close()
    res.nfev, res.nsteps, res.nrejected = integrator.nfev, integrator.nsteps, integrator.nrejected
    res.wall_time = time.perf_counter() - start
    return res


def _march(integrator, t_eval, res, monitor, callback, bar, breaks=(), on_break=None):
    """The loop of `march`: the `Failure` that stopped it, or None. A set `stop_event` stops it as
    Ctrl-C does (a run on a thread that Python's KeyboardInterrupt does not reach)."""
    next_index = 1
    halt = stop_event()
    while next_index < t_eval.size:
        if halt is not None and halt.is_set():
            raise KeyboardInterrupt
        target = t_eval[-1] if integrator.dense else t_eval[next_index]
        failure = integrator.step(min(target, breaks[0]) if breaks else target)
        if failure is not None:
            return failure
        t, y = integrator.t, integrator.y
        while integrator.dense and next_index < t_eval.size - 1 and t_eval[next_index] <= t:
            # interior saved times: interpolate, up to 8 at once from one pass over the stages
            stop = next_index + int(np.searchsorted(t_eval[next_index:min(next_index + 8, t_eval.size - 1)], t,
                                                    side="right"))
            for y_mid in integrator.dense_output(t_eval[next_index:stop]):
                res.save(t_eval[next_index], y_mid, callback, copy=False)
                next_index += 1
                if halt is not None and halt.is_set():          # Ctrl-C at the next saved time too
                    raise KeyboardInterrupt
        if bar is not None:
            bar.update(t - integrator.t_old)
        landed = t == t_eval[next_index]
        if monitor is not None:
            try:
                monitor(t, y)
            except SolverError as exc:
                if landed:
                    res.save(t, y)
                return Failure(float(t), integrator.nsteps, "monitor", y, message=str(exc), error=exc)
        if landed:
            res.save(t, y, callback)
            next_index += 1
        if breaks and t == breaks[0]:
            breaks.pop(0)
            if on_break is not None:
                on_break(t)
            integrator.restart()
    return None


def integrate(fun, y0, t_eval, *, method="dopri5", rtol=1e-8, atol=1e-10, linear=None, retract=None,
              monitor=None, callback=None, first_step=None, max_step=np.inf, progress=None, desc=None,
              max_rejections=60, stable_step=None, dense_output=False, retract_invariant=False, magnitude=None,
              dt=None, norm=None, threads=1, breaks=(), on_break=None):
    """Advance du/dt = linear·u + fun(t, u) from u(t_eval[0]) = y0 with the `RungeKutta` method ``method``
    (a name in `TABLEAUX`), adaptive or with the fixed step ``dt``, saving at every t_eval (see
    `RungeKutta` for the options and `march` for ``monitor``, ``callback``, ``progress``, ``breaks``).
    Returns an `IntegrationResult`.
    """
    t_eval = np.asarray(t_eval, dtype=float)
    rk = RungeKutta(fun, t_eval[0], y0, t_eval[-1], method, dt=dt, rtol=rtol, atol=atol, linear=linear,
                    retract=retract, retract_invariant=retract_invariant, first_step=first_step, max_step=max_step,
                    stable_step=stable_step, max_rejections=max_rejections, dense_output=dense_output,
                    magnitude=magnitude, norm=norm, threads=threads)
    return march(rk, t_eval, monitor=monitor, callback=callback, progress=progress, desc=desc, breaks=breaks,
                 on_break=on_break)


def integrate_fixed(step, y0, t_eval, dt, *, monitor=None, callback=None, progress=None, desc=None, breaks=(),
                    on_break=None):
    """Fixed-step driver: y ← step(t, y, h) with h = dt, shortened to land on every t_eval (`FixedStep`).

    ``step`` returns the new state; non-finite output stops the run, and so does a `SolverError` it
    raises (a `Failure` with reason "step"). Same result type and bookkeeping as `integrate` (``nfev``
    counts calls to ``step``).
    """
    t_eval = np.asarray(t_eval, dtype=float)
    return march(FixedStep(step, t_eval[0], y0, dt), t_eval, monitor=monitor, callback=callback,
                 progress=progress, desc=desc, breaks=breaks, on_break=on_break)


class EventDriven(Integrator):
    """The exact flow of a piecewise-defined field: ``advance(t, y, target)`` returns (t', y'), the state at
    the first event after t or at ``target`` (whichever comes first); each call is one step."""

    def __init__(self, advance, t0, y0):
        super().__init__(t0, y0)
        self.advance = advance

    def _step_impl(self, target):
        t_new, y_new = self.advance(self.t, self.y, target)
        self.nfev += 1
        if not np.all(np.isfinite(y_new)):
            return self._non_finite(t_new)
        self.nsteps += 1
        self.t_old, self.t, self.y = self.t, float(target) if t_new >= target else float(t_new), y_new
        return None
