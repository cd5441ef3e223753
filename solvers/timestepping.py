"""The one time integrator every solver uses.

``integrate`` advances  du/dt = L·u + N(t, u)  with an embedded Runge–Kutta pair and error control:

* ``method="dopri5"`` (Dormand–Prince 5(4), default) or ``"bs32"`` (Bogacki–Shampine 3(2));
* ``linear=L``: an optional *diagonal* linear part (an array broadcastable to u, e.g. −ν l(l+d−2)
  for noise), treated exactly by an integrating factor (Lawson's method): stage values are
  U_i = e^{c_i h L} u_n + h Σ_j a_ij e^{(c_i − c_j) h L} k_j, so every exponent is ≤ 0 for
  dissipative L and L adds no stiffness limit to the step size;
* steps land exactly on every ``t_eval`` (no interpolation error at saved times), or, with
  ``dense_output=True`` and no linear part, step freely and report the saved times through the
  pair's continuous extension (Shampine's order-4 interpolant for dopri5, Hermite's cubic for bs32,
  as in scipy's RK45/RK23), then retracted: dense saved times no longer limit the step;
* ``retract``: applied after each accepted step (particles: renormalise onto the sphere); the error
  control runs on the (tangent) update before retraction;
* ``monitor(t, u)``: called after each accepted step; it may raise `meanfield.SolverError`
  (e.g. `UnderResolved`) to stop the run, which is reported, not lost;
* a NaN/inf in a stage shrinks the step; if it persists the run stops with status −1;
* Ctrl-C stops the run with status −2 and keeps what was computed;
* ``progress``: a tqdm bar over simulated time (default: on when stderr is a terminal);
* ``callback(result)``: called at each saved time with the partial result (checkpoints).

``integrate_fixed`` is the fixed-step driver (explicit schemes such as the authors'
Euler-then-normalise, Euler–Maruyama for noisy particles) with the same bookkeeping.

Both return an `IntegrationResult`, like scipy's ``OdeResult``: ``t``, ``y`` (list of saved states),
``status`` (0 finished, 1 stopped by the monitor, −1 non-finite state, −2 interrupted, −3 step
size underflow), ``message``, ``error`` (the monitor's exception), ``failure`` (a `Failure`: where
and why a run that did not finish stopped, None when it finished) and the counters ``nfev``,
``nsteps``, ``nrejected``.
"""
import sys
import time
from dataclasses import dataclass, field

import numpy as np
from tqdm.auto import tqdm

from meanfield.errors import SolverError

# Butcher tableaux: (c, A, b, b_hat, order used for step control)
_DOPRI5 = (
    np.array([0, 1 / 5, 3 / 10, 4 / 5, 8 / 9, 1, 1]),
    [[],
     [1 / 5],
     [3 / 40, 9 / 40],
     [44 / 45, -56 / 15, 32 / 9],
     [19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729],
     [9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656],
     [35 / 384, 0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84]],
    np.array([35 / 384, 0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84, 0]),
    np.array([5179 / 57600, 0, 7571 / 16695, 393 / 640, -92097 / 339200, 187 / 2100, 1 / 40]),
    5,
)
_BS32 = (
    np.array([0, 1 / 2, 3 / 4, 1]),
    [[], [1 / 2], [0, 3 / 4], [2 / 9, 1 / 3, 4 / 9]],
    np.array([2 / 9, 1 / 3, 4 / 9, 0]),
    np.array([7 / 24, 1 / 4, 1 / 3, 1 / 8]),
    3,
)
TABLEAUX = {"dopri5": _DOPRI5, "bs32": _BS32}
# continuous extensions: u(t + θh) = u + h Σ_i k_i Σ_j P[i, j] θ^{j+1} (scipy.integrate RK45/RK23)
DENSE = {
    "dopri5": np.array([
        [1, -8048581381 / 2820520608, 8663915743 / 2820520608, -12715105075 / 11282082432],
        [0, 0, 0, 0],
        [0, 131558114200 / 32700410799, -68118460800 / 10900136933, 87487479700 / 32700410799],
        [0, -1754552775 / 470086768, 14199869525 / 1410260304, -10690763975 / 1880347072],
        [0, 127303824393 / 49829197408, -318862633887 / 49829197408, 701980252875 / 199316789632],
        [0, -282668133 / 205662961, 2019193451 / 616988883, -1453857185 / 822651844],
        [0, 40617522 / 29380423, -110615467 / 29380423, 69997945 / 29380423]]),
    "bs32": np.array([[1, -4 / 3, 5 / 9], [0, 1, -2 / 3], [0, 4 / 3, -8 / 9], [0, -1, 1]]),
}

SAFETY, MIN_FACTOR, MAX_FACTOR = 0.9, 0.2, 10.0


@dataclass(frozen=True)
class Failure:
    """Where and why a run stopped before its last saved time.

    ``t``: the time of the failure (the state that failed, or the start of the step that could not
    be taken); ``step``: the number of the step (1 for the first); ``reason``: one of `REASONS`;
    ``state``: with reason "monitor", the state at ``t`` that the monitor stopped (the state a
    continuation goes on from), else None.
    """

    t: float
    step: int
    reason: str
    state: object = None

    REASONS = ("monitor", "non-finite", "interrupted", "step-size underflow")


@dataclass
class IntegrationResult:
    t: list = field(default_factory=list)
    y: list = field(default_factory=list)
    status: int = 0
    message: str = "finished"
    error: Exception = None
    failure: Failure = None
    nfev: int = 0
    nsteps: int = 0
    nrejected: int = 0
    wall_time: float = 0.0

    @property
    def success(self):
        return self.status == 0

    def stats(self):
        return {"nfev": self.nfev, "nsteps": self.nsteps, "nrejected": self.nrejected,
                "wall_time": self.wall_time}


class _Counted:
    """Wraps fun to count evaluations (scipy's nfev)."""

    def __init__(self, fun):
        self.fun, self.n = fun, 0

    def __call__(self, t, y):
        self.n += 1
        return self.fun(t, y)


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


def _start(y0, t_eval, callback):
    """Record the initial state as the first saved time (both drivers)."""
    res = IntegrationResult()
    y = np.array(y0, copy=True)
    t = float(t_eval[0])
    res.t.append(t)
    res.y.append(y.copy())
    if callback is not None:
        callback(res)
    return res, y, t, time.perf_counter()


def integrate(fun, y0, t_eval, *, method="dopri5", rtol=1e-8, atol=1e-10, linear=None, retract=None,
              monitor=None, callback=None, first_step=None, max_step=np.inf, progress=None, desc=None,
              max_rejections=60, stable_step=None, dense_output=False, retract_invariant=False, magnitude=None):
    """Advance du/dt = linear·u + fun(t, u) from u(t_eval[0]) = y0, saving at every t_eval.

    See the module docstring. ``fun`` maps (t, u) to an array of u's shape and dtype; ``linear`` is
    None or a diagonal (an array broadcastable to u). ``stable_step(u)``, if given, bounds the step
    after every accepted step (the explicit pair's stability limit, e.g. an advective CFL bound).
    ``dense_output``: saved times from the continuous extension (ignored with ``linear``).
    ``retract_invariant``: fun(t, retract(u)) = fun(t, u) (fun retracts its argument itself), so the
    last stage is the next step's first one after a retraction too (FSAL).
    ``magnitude(u)``: the size that ``rtol`` is relative to, an array broadcastable to u (default |u|,
    component by component). The error norm is ‖err / (atol + rtol·max(m(u_n), m(u_{n+1})))‖_rms.
    Particles pass the Euclidean norm of each point, which makes the control invariant under
    rotations (docs/particles.md, "Adaptive runs").
    Returns an `IntegrationResult`.
    """
    c, A, b, b_hat, order = TABLEAUX[method]
    A = [np.asarray(row) for row in A]
    nstages = len(c)
    fsal = method == "dopri5" or method == "bs32"
    fun = _Counted(fun)
    t_eval = np.asarray(t_eval, dtype=float)
    res, y, t, start = _start(y0, t_eval, callback)
    if t_eval.size == 1:
        res.wall_time = time.perf_counter() - start
        return res

    L = None if linear is None else np.asarray(linear)
    dense = bool(dense_output) and L is None
    P = DENSE[method] if dense else None
    expcache = {}

    def E(tau):  # e^{tau·L}, cached per distinct tau within one step
        val = expcache.get(tau)
        if val is None:
            val = np.exp(tau * L)
            expcache[tau] = val
        return val

    bar = _progress_bar(progress, t_eval[-1] - t_eval[0], desc)
    span = t_eval[-1] - t_eval[0]
    next_index = 1
    k1 = None
    h = None
    errstate = np.errstate(over="ignore", invalid="ignore")
    errstate.__enter__()
    try:
        k1 = fun(t, y)
        # without a linear part each stage, the new state, the error and an interpolant are one product
        # of coefficients with the rows [y; k_1; ...; k_s] of KY (one pass over the stages, not two per term)
        KY = None if L is not None else np.empty((nstages + 1, np.size(y)), dtype=np.result_type(y, k1))
        last_is_new = fsal and c[-1] == 1 and np.array_equal(A[-1], b[:len(A[-1])])   # last stage at u_{n+1}
        work = None
        if first_step is not None:
            h = float(first_step)
        else:
            h = _select_initial_step(fun, t, y, k1 + (0 if L is None else L * y), order, rtol, atol,
                                     (t_eval[-1] if dense else t_eval[1]) - t, magnitude)
        h = min(h, max_step)
        cap = max_step if stable_step is None else min(max_step, stable_step(y))
        h = min(h, cap)
        rejections = 0
        while next_index < t_eval.size:
            target = t_eval[-1] if dense else t_eval[next_index]
            h_try = min(h, target - t)
            lands = h_try >= target - t - 1e-14 * max(1.0, abs(target))
            if lands:
                h_try = target - t
            expcache.clear()
            ks = [k1]
            finite = np.all(np.isfinite(k1))
            if KY is not None:
                KY[0] = np.reshape(y, -1)
                KY[1] = np.reshape(k1, -1)
            for i in range(1, nstages if finite else 0):
                if KY is not None:
                    Ui = (np.concatenate(([1.0], h_try * A[i])) @ KY[:i + 1]).reshape(np.shape(y))
                else:
                    incr = 0
                    for j, a in enumerate(A[i]):
                        if a != 0:
                            incr = incr + a * (E((c[i] - c[j]) * h_try) * ks[j])
                    Ui = E(c[i] * h_try) * y + h_try * incr
                ki = fun(t + c[i] * h_try, Ui)
                if not np.all(np.isfinite(ki)):
                    finite = False
                    break
                if KY is not None:
                    KY[i + 1] = np.reshape(ki, -1)
                    ki = KY[i + 1].reshape(np.shape(y))
                ks.append(ki)
            if finite:
                if KY is not None:
                    y_new = Ui if last_is_new else (np.concatenate(([1.0], h_try * b)) @ KY).reshape(np.shape(y))
                    err = (h_try * (b - b_hat)) @ KY[1:]
                else:
                    acc, err = 0, 0
                    for j in range(nstages):
                        kj = E((1 - c[j]) * h_try) * ks[j]
                        if b[j] != 0:
                            acc = acc + b[j] * kj
                        if b[j] != b_hat[j]:
                            err = err + (b[j] - b_hat[j]) * kj
                    y_new = E(h_try) * y + h_try * acc
                    err = h_try * err
                # ‖err / (atol + rtol·max(m(y), m(y_new)))‖_rms, in place (two work arrays, no temporaries)
                if work is None or work[0].shape != np.shape(y_new):
                    work = (np.empty(np.shape(y_new)), np.empty(np.shape(y_new)))
                scale, ratio = work
                if magnitude is None:
                    np.abs(y, out=scale)
                    np.maximum(scale, np.abs(y_new, out=ratio), out=scale)
                else:
                    np.maximum(magnitude(y), magnitude(y_new), out=scale)
                scale *= rtol
                scale += atol
                if np.isrealobj(err):
                    r = np.divide(np.reshape(err, np.shape(y_new)), scale, out=ratio)
                else:
                    r = np.reshape(err, np.shape(y_new)) / scale
                err_norm = float(np.sqrt(np.vdot(r, r).real / max(r.size, 1)))
                finite = np.isfinite(err_norm) and np.all(np.isfinite(y_new))
            if not finite:
                rejections += 1
                res.nrejected += 1
                h = h_try * MIN_FACTOR
                if rejections > max_rejections or h < 1e-14 * max(1.0, abs(t)):
                    res.failure = Failure(float(t), res.nsteps + 1, "non-finite")
                    res.status, res.message = -1, (
                        f"non-finite values (NaN or inf) in the state at t={t:.6g}, step {res.nsteps + 1}; "
                        f"the step size was reduced to {h:.3g} without success")
                    break
                continue
            if err_norm > 1.0:
                rejections += 1
                res.nrejected += 1
                h = h_try * max(MIN_FACTOR, SAFETY * err_norm ** (-1.0 / order))
                if h < 1e-14 * max(1.0, abs(t)) or rejections > 10 * max_rejections:
                    res.failure = Failure(float(t), res.nsteps + 1, "step-size underflow")
                    res.status, res.message = -3, (f"step size underflow at t={t:.6g} (h={h:.3g}): the error "
                                                   "control cannot meet rtol/atol")
                    break
                continue
            # accept
            rejections = 0
            res.nsteps += 1
            t_new = target if lands else t + h_try
            reuse = last_is_new
            while dense and next_index < t_eval.size - 1 and t_eval[next_index] <= t_new:
                # interior saved times: interpolate, up to 8 at once from one pass over the stages
                stop = min(next_index + 8, t_eval.size - 1)
                stop = next_index + int(np.searchsorted(t_eval[next_index:stop], t_new, side="right"))
                theta = (t_eval[next_index:stop] - t) / h_try
                coef = np.cumprod(np.repeat(theta[:, None], P.shape[1], axis=1), axis=1) @ P[:len(ks)].T
                C = np.concatenate((np.ones((theta.size, 1)), h_try * coef), axis=1)
                for y_mid in (C @ KY[:len(ks) + 1]):
                    y_mid = y_mid.reshape(np.shape(y))
                    res.t.append(float(t_eval[next_index]))
                    res.y.append(y_mid if retract is None else retract(y_mid))
                    next_index += 1
                    if callback is not None:
                        callback(res)
            if retract is not None:
                y_new = retract(y_new)
                k1 = ks[-1].copy() if reuse and retract_invariant else fun(t_new, y_new)
            else:
                k1 = ks[-1].copy() if reuse else fun(t_new, y_new)       # a copy: the rows of KY are reused
            if bar is not None:
                bar.update(t_new - t)
            t, y = t_new, y_new
            factor = MAX_FACTOR if err_norm == 0 else min(MAX_FACTOR, SAFETY * err_norm ** (-1.0 / order))
            if stable_step is not None:
                cap = min(max_step, stable_step(y))
            h_next = min(h_try * max(MIN_FACTOR, factor), cap)
            # do not let a short landing step shrink the proposal
            h = min(max(h_next, h), cap) if lands and h_try < h else h_next
            if monitor is not None:
                try:
                    monitor(t, y)
                except SolverError as exc:
                    res.status, res.message, res.error = 1, str(exc), exc
                    res.failure = Failure(float(t), res.nsteps, "monitor", y)
                    if lands:
                        res.t.append(t)
                        res.y.append(y.copy())
                    break
            if lands:
                res.t.append(t)
                res.y.append(y.copy())
                next_index += 1
                if callback is not None:
                    callback(res)
            h = min(h, span)
    except KeyboardInterrupt:
        res.status, res.message = -2, f"interrupted at t={t:.6g}"
        res.failure = Failure(float(t), res.nsteps + 1, "interrupted")
    finally:
        errstate.__exit__(None, None, None)
        if bar is not None:
            bar.close()
    res.nfev = fun.n
    res.wall_time = time.perf_counter() - start
    return res


def integrate_fixed(step, y0, t_eval, dt, *, monitor=None, callback=None, progress=None, desc=None):
    """Fixed-step driver: y ← step(t, y, h) with h = dt, shortened to land on every t_eval.

    ``step`` returns the new state; non-finite output stops the run (status −1). Same result type
    and bookkeeping as `integrate` (``nfev`` counts calls to ``step``).
    """
    dt = float(dt)
    if not np.isfinite(dt) or dt <= 0:
        raise ValueError(f"`dt` must be a positive finite step, got {dt}.")
    t_eval = np.asarray(t_eval, dtype=float)
    res, y, t, start = _start(y0, t_eval, callback)
    bar = _progress_bar(progress, t_eval[-1] - t_eval[0], desc) if t_eval.size > 1 else None
    try:
        for target in t_eval[1:]:
            while t < target:
                h = min(dt, target - t)
                if target - (t + h) < 1e-12 * dt:
                    h = target - t
                y_new = step(t, y, h)
                res.nfev += 1
                if not np.all(np.isfinite(y_new)):
                    res.failure = Failure(float(t + h), res.nsteps + 1, "non-finite")
                    res.status, res.message = -1, (f"non-finite values (NaN or inf) in the state at "
                                                   f"t={t + h:.6g}, step {res.nsteps + 1}")
                    raise StopIteration
                t_new = target if h == target - t else t + h
                if bar is not None:
                    bar.update(t_new - t)
                t, y = t_new, y_new
                res.nsteps += 1
                if monitor is not None:
                    try:
                        monitor(t, y)
                    except SolverError as exc:
                        res.status, res.message, res.error = 1, str(exc), exc
                        res.failure = Failure(float(t), res.nsteps, "monitor", y)
                        raise StopIteration
            res.t.append(t)
            res.y.append(y.copy())
            if callback is not None:
                callback(res)
    except StopIteration:
        pass
    except KeyboardInterrupt:
        res.status, res.message = -2, f"interrupted at t={t:.6g}"
        res.failure = Failure(float(t), res.nsteps + 1, "interrupted")
    finally:
        if bar is not None:
            bar.close()
    res.wall_time = time.perf_counter() - start
    return res


# -- named steppers ------------------------------------------------------------------------------
class Stepper:
    """A named time stepper: what `solvers.Solver.solve(..., method=name)` runs.

    Contract (like scipy's ``OdeSolver``):

    1. ``name``: the key in `STEPPERS`; ``options``: the keyword options it accepts, with defaults
       (a solver may override a default through its ``stepper_defaults``).
    2. ``needs``: the solver hooks it calls besides ``_rhs`` (checked by `check`).
    3. ``integrate(run, y0, t_eval, callback, progress, desc)`` advances the run's state and returns
       an `IntegrationResult`; the solver's hooks are reached through the `solvers.base.Run`. A run
       that stops before the last saved time sets ``failure`` (a `Failure`: where, which step, why,
       and for a monitor's stop the state), from which `Solver.solve` continues or raises.
    """

    name = None
    adaptive = False
    options = {}
    needs = ()

    def check(self, solver):
        missing = [h for h in self.needs if not callable(getattr(solver, h, None))]
        if missing:
            raise ValueError(f"`method`={self.name!r} needs {', '.join(missing)}, which {type(solver).__name__} "
                             "does not implement.")

    def integrate(self, run, y0, t_eval, *, callback=None, progress=None, desc=None):
        raise NotImplementedError

    def __repr__(self):
        return f"<stepper {self.name!r}>"


class AdaptiveRK(Stepper):
    """Adaptive embedded Runge–Kutta pair, ``name`` "dopri5" (Dormand–Prince 5(4)) or "bs32"
    (Bogacki–Shampine 3(2)), with error control. When the solver has a diagonal linear part L (noise),
    it is applied exactly through the integrating factor e^{hL} (Lawson's method; see the module
    docstring); without one, this is the plain Runge–Kutta pair."""

    adaptive = True
    options = {"rtol": 1e-8, "atol": 1e-10, "max_step": np.inf, "first_step": None, "dense_output": False}

    def __init__(self, name):
        self.name = name

    def integrate(self, run, y0, t_eval, *, callback=None, progress=None, desc=None):
        o = run.options
        if not isinstance(o["dense_output"], (bool, np.bool_)):
            raise ValueError(f"`dense_output` must be True or False, got {o['dense_output']!r}.")
        return integrate(run.rhs, y0, t_eval, method=self.name, rtol=o["rtol"], atol=o["atol"], linear=run.linear(),
                         retract=run.retract if run.retracts else None, monitor=run.monitor,
                         callback=callback, first_step=o["first_step"], max_step=o["max_step"], progress=progress,
                         desc=desc, stable_step=run.stable_step, dense_output=o["dense_output"],
                         retract_invariant=run.solver.retract_invariant, magnitude=run.magnitude)


class _Fixed(Stepper):
    """Fixed step ``dt`` (shortened to land on every saved time), driven by `integrate_fixed`."""

    def integrate(self, run, y0, t_eval, *, callback=None, progress=None, desc=None):
        dt = run.options["dt"]
        run.dt = self.default_dt(run, y0) if dt is None else dt     # recorded: a continued run keeps it
        return integrate_fixed(self.step_function(run), y0, t_eval, run.dt,
                               monitor=run.monitor, callback=callback, progress=progress, desc=desc)

    def default_dt(self, run, y0):
        raise ValueError(f"`dt` is required with method={self.name!r}.")

    def step_function(self, run):
        raise NotImplementedError


class SSPRK3(_Fixed):
    """Shu–Osher SSP-RK3, a convex combination of forward-Euler stages, under a CFL limit.

    Each outer step ``dt`` is split into sub-steps τ with ``solver._cfl_rate(run, y)``·τ <= ``cfl``; a
    stage whose own CFL number exceeds 1 (``solver._euler`` returns None) halves τ. After the transport
    sub-steps, ``solver._split(run, y, dt)`` applies the split (implicit) part, e.g. diffusion. Every
    property of the Euler stage that is preserved by convex combinations (positivity, bounds) holds
    for the step.
    """

    name = "ssprk3"
    options = {"dt": None, "cfl": 0.5}
    needs = ("_euler", "_cfl_rate")

    def default_dt(self, run, y0):
        """min(0.05, the CFL step at the initial state)."""
        rate = run.solver._cfl_rate(run, y0)
        return 0.05 if rate == 0 else min(0.05, run.options["cfl"] / rate)

    def step_function(self, run):
        solver, cfl = run.solver, run.options["cfl"]

        def euler(v, tau):
            return solver._euler(run, v, tau)

        def stage(u, tau):
            u1 = euler(u, tau)
            if u1 is None:
                return None
            e2 = euler(u1, tau)
            if e2 is None:
                return None
            e3 = euler(0.75 * u + 0.25 * e2, tau)
            return None if e3 is None else u / 3 + 2 * e3 / 3

        def step(t, y, h):
            remaining = h
            while remaining > 1e-15 * max(h, 1.0):
                rate = solver._cfl_rate(run, y)
                tau = remaining if rate == 0 else min(remaining, cfl / rate)
                tau = remaining / int(np.ceil(remaining / tau - 1e-12))
                for _ in range(30):
                    y_new = stage(y, tau)
                    if y_new is not None:
                        break
                    tau /= 2
                else:
                    raise SolverError(f"SSP-RK3 could not meet the CFL condition at t={t:.6g}; lower `cfl`.")
                y = y_new
                remaining -= tau
            return solver._split(run, y, h)

        return step


class EulerMaruyama(_Fixed):
    """y ← R(y + h·F(t, y) + sqrt(2νh)·P_y ξ), ξ ~ N(0, I): the projected Stratonovich SDE of the
    noisy particle system with the retraction R (docs/mathematics.md §6). The Gaussian ξ of the step
    starting at time t is drawn from a generator keyed by (seed, t), so a run continued from a saved
    time draws exactly the noise of the uninterrupted run."""

    name = "euler-maruyama"
    options = {"dt": None}
    needs = ("_tangent_noise",)

    def default_dt(self, run, y0):
        return 0.01

    def drift(self, run):
        return run.rhs

    def step_function(self, run):
        solver, amp, drift = run.solver, np.sqrt(2.0 * run.model.noise), self.drift(run)

        def step(t, y, h):
            with np.errstate(over="ignore", invalid="ignore"):
                if amp == 0.0 and run.retracts:
                    return run.retract_euler(y, h, drift(t, y))
                y_new = y + h * drift(t, y)
            if amp > 0.0:
                y_new += amp * np.sqrt(h) * solver._tangent_noise(run, y, run.noise(t, y.shape))
            return run.retract(y_new) if run.retracts else y_new

        return step


class EulerNormalize(EulerMaruyama):
    """The authors' scheme: y ← y + h·F(y), then renormalise onto the sphere (no tangent projection
    before the normalisation; docs/mathematics.md §1), plus the noise of `EulerMaruyama` when ν > 0.
    ``solver._euler_velocity(run, t, y)`` is F. Default step 0.1 (0.01 with noise)."""

    name = "euler-normalize"
    needs = ("_euler_velocity", "_tangent_noise")

    def default_dt(self, run, y0):
        return 0.01 if run.model.noise > 0 else 0.1

    def drift(self, run):
        return lambda t, y: run.solver._euler_velocity(run, t, y)


STEPPERS = {s.name: s for s in (AdaptiveRK("dopri5"), AdaptiveRK("bs32"), SSPRK3(), EulerMaruyama(), EulerNormalize())}


def keyed_normal(seed, t, shape):
    """Standard normal draws for the step starting at time ``t``: a PCG64 stream keyed by (seed, t),
    so the noise of a step depends only on the seed and the step's start time (continuable runs)."""
    key = int(np.float64(t).view(np.int64)) & 0x7FFFFFFFFFFFFFFF
    seq = np.random.SeedSequence(entropy=int(seed), spawn_key=(key,))
    return np.random.Generator(np.random.PCG64(seq)).standard_normal(shape)
