"""The one time integrator every solver uses.

``integrate`` advances  du/dt = L·u + N(t, u)  with an embedded Runge–Kutta pair and error control:

* ``method="dopri5"`` (Dormand–Prince 5(4), default) or ``"bs32"`` (Bogacki–Shampine 3(2));
* ``linear=L``: an optional *diagonal* linear part (an array broadcastable to u, e.g. −ν l(l+d−2)
  for noise), treated exactly by an integrating factor (Lawson's method): stage values are
  U_i = e^{c_i h L} u_n + h Σ_j a_ij e^{(c_i − c_j) h L} k_j, so every exponent is ≤ 0 for
  dissipative L and L adds no stiffness limit to the step size;
* steps land exactly on every ``t_eval`` (no interpolation error at saved times);
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
size underflow), ``message``, ``error`` (the monitor's exception) and the counters ``nfev``,
``nsteps``, ``nrejected``.
"""
import sys
import time
from dataclasses import dataclass, field

import numpy as np

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

SAFETY, MIN_FACTOR, MAX_FACTOR = 0.9, 0.2, 10.0


@dataclass
class IntegrationResult:
    t: list = field(default_factory=list)
    y: list = field(default_factory=list)
    status: int = 0
    message: str = "finished"
    error: Exception = None
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
    from tqdm.auto import tqdm

    return tqdm(total=float(total), desc=desc or "integrating", unit="t", leave=False,
                bar_format="{l_bar}{bar}| t={n:.4g}/{total:.4g} [{elapsed}<{remaining}]")


def _rms(x):
    x = np.abs(x)
    return float(np.sqrt(np.mean(x * x))) if x.size else 0.0


def _select_initial_step(fun, t0, y0, f0, order, rtol, atol, span):
    """Hairer–Nørsett–Wanner's starting step (as in scipy.integrate)."""
    scale = atol + np.abs(y0) * rtol
    d0, d1 = _rms(y0 / scale), _rms(f0 / scale)
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
              max_rejections=60):
    """Advance du/dt = linear·u + fun(t, u) from u(t_eval[0]) = y0, saving at every t_eval.

    See the module docstring. ``fun`` maps (t, u) to an array of u's shape and dtype; ``linear`` is
    None or a diagonal (an array broadcastable to u). Returns an `IntegrationResult`.
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
        if first_step is not None:
            h = float(first_step)
        else:
            h = _select_initial_step(fun, t, y, k1 + (0 if L is None else L * y), order, rtol, atol,
                                     t_eval[1] - t)
        h = min(h, max_step)
        rejections = 0
        while next_index < t_eval.size:
            target = t_eval[next_index]
            h_try = min(h, target - t)
            lands = h_try >= target - t - 1e-14 * max(1.0, abs(target))
            if lands:
                h_try = target - t
            expcache.clear()
            ks = [k1]
            finite = np.all(np.isfinite(k1))
            for i in range(1, nstages if finite else 0):
                incr = 0
                for j, a in enumerate(A[i]):
                    if a != 0:
                        kj = ks[j] if L is None else E((c[i] - c[j]) * h_try) * ks[j]
                        incr = incr + a * kj
                base = y if L is None else E(c[i] * h_try) * y
                Ui = base + h_try * incr
                ki = fun(t + c[i] * h_try, Ui)
                if not np.all(np.isfinite(ki)):
                    finite = False
                    break
                ks.append(ki)
            if finite:
                acc, err = 0, 0
                for j in range(nstages):
                    kj = ks[j] if L is None else E((1 - c[j]) * h_try) * ks[j]
                    if b[j] != 0:
                        acc = acc + b[j] * kj
                    if b[j] != b_hat[j]:
                        err = err + (b[j] - b_hat[j]) * kj
                y_new = (y if L is None else E(h_try) * y) + h_try * acc
                scale = atol + rtol * np.maximum(np.abs(y), np.abs(y_new))
                err_norm = _rms(h_try * err / scale)
                finite = np.isfinite(err_norm) and np.all(np.isfinite(y_new))
            if not finite:
                rejections += 1
                res.nrejected += 1
                h = h_try * MIN_FACTOR
                if rejections > max_rejections or h < 1e-14 * max(1.0, abs(t)):
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
                    res.status, res.message = -3, f"step size underflow at t={t:.6g} (h={h:.3g})"
                    break
                continue
            # accept
            rejections = 0
            res.nsteps += 1
            t_new = target if lands else t + h_try
            if retract is not None:
                y_new = retract(y_new)
                k1 = fun(t_new, y_new)
            else:
                k1 = ks[-1] if fsal and c[-1] == 1 and np.array_equal(A[-1], b[:len(A[-1])]) else fun(t_new, y_new)
            if bar is not None:
                bar.update(t_new - t)
            t, y = t_new, y_new
            factor = MAX_FACTOR if err_norm == 0 else min(MAX_FACTOR, SAFETY * err_norm ** (-1.0 / order))
            h_next = min(h_try * max(MIN_FACTOR, factor), max_step)
            # do not let a short landing step shrink the proposal
            h = max(h_next, h) if lands and h_try < h else h_next
            if monitor is not None:
                try:
                    monitor(t, y)
                except SolverError as exc:
                    res.status, res.message, res.error = 1, str(exc), exc
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
                        raise StopIteration
            res.t.append(t)
            res.y.append(y.copy())
            if callback is not None:
                callback(res)
    except StopIteration:
        pass
    except KeyboardInterrupt:
        res.status, res.message = -2, f"interrupted at t={t:.6g}"
    finally:
        if bar is not None:
            bar.close()
    res.wall_time = time.perf_counter() - start
    return res
