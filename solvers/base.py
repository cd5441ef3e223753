"""The solver base class: one ``solve`` for every discretisation.

Contract for whoever adds a solver (like scipy's ``OdeSolver``):

1. ``__init__(model, <resolution>, **options)`` calls ``Solver.__init__(self, model)``, validates the
   resolution and raises `meanfield.UnsupportedModel` for models it cannot represent, ValueError
   (naming the argument and the accepted range) for bad options.
2. Implement ``_initial_state(rho0, normalize)`` -> state array (validate ρ0 with
   ``meanfield._checks.check_density_values``).
3. Implement ``_rhs(t, state)`` -> ∂_t state from transport; ``_linear()`` -> the diagonal linear
   part (noise, applied exactly by the integrating factor) or None.
4. Implement ``_representation()`` and ``_to_data(state)`` (the slice a `Solution` stores).
5. Optionally implement ``_monitor(t, state)`` (raise `UnderResolved` etc.), ``_retract(state)``
   and ``_diagnostics(t, state)`` -> dict of scalars recorded at each saved time.
6. Do not override ``solve``/``_run``: they drive `solvers.timestepping`, count evaluations,
   draw the progress bar, write checkpoints and turn failures into exceptions that carry the
   `Solution` computed so far.
"""
import time

import numpy as np

from meanfield._checks import check_real, check_times
from meanfield.errors import Interrupted, NonFiniteState, SolverError, UnsupportedModel
from meanfield.model import Model
from meanfield.solution import Solution

from . import timestepping


class Solver:
    name = "solver"

    def __init__(self, model):
        if not isinstance(model, Model):
            raise ValueError(f"`model` must be a meanfield.Model, got {type(model).__name__}.")
        self.model = model

    # -- to implement -------------------------------------------------------------------------------
    def _initial_state(self, rho0, normalize):
        raise NotImplementedError

    def _rhs(self, t, state):
        raise NotImplementedError

    def _linear(self):
        return None

    def _representation(self):
        raise NotImplementedError

    def _to_data(self, state):
        return state

    def _monitor(self, t, state):
        return None

    def _retract(self, state):
        return state

    _has_retract = False

    def _diagnostics(self, t, state):
        return {}

    # -- written once ---------------------------------------------------------------------------------
    def _require_zonal(self):
        if not self.model.is_zonal:
            raise UnsupportedModel(f"{type(self).__name__} needs a zonal model (one head, Q^T K = I, V = v·I); "
                                   "use solvers.Particles for general Q, K, V.")

    def solve(self, rho0, t_eval, *, normalize=False, rtol=1e-8, atol=1e-10, method="dopri5", progress=None,
              checkpoint=None, checkpoint_every=30.0, max_step=np.inf, first_step=None):
        """Evolve the density ``rho0`` (a callable f(x) on points (..., d)) and save at ``t_eval``.

        Parameters
        ----------
        rho0 : callable
            Initial density relative to σ; must be finite, non-negative, of mass 1 within 1e-6
            (or pass ``normalize=True``).
        t_eval : 1-D array, strictly increasing, starting at 0.
        rtol, atol : error tolerances of the adaptive integrator.
        method : "dopri5" (default) or "bs32".
        progress : bool or None (None: a tqdm bar when stderr is a terminal).
        checkpoint : path, optional; the partial Solution is written there (NetCDF) at most every
            ``checkpoint_every`` seconds and when the run stops.

        Returns
        -------
        Solution. Raises `UnderResolved`, `NonFiniteState` or `Interrupted` (all `SolverError`) with
        ``.solution`` holding the saved times before the failure.
        """
        t_eval = check_times(t_eval)
        y0 = self._initial_state(rho0, normalize)
        return self._run(y0, t_eval, rtol=rtol, atol=atol, method=method, progress=progress,
                         checkpoint=checkpoint, checkpoint_every=checkpoint_every, max_step=max_step,
                         first_step=first_step)

    def _run(self, y0, t_eval, *, rtol=1e-8, atol=1e-10, method="dopri5", progress=None, checkpoint=None,
             checkpoint_every=30.0, max_step=np.inf, first_step=None, fixed_step=None, dt=None):
        rtol = check_real(rtol, "rtol", low=0.0, low_open=True)
        atol = check_real(atol, "atol", low=0.0, low_open=True)
        if method not in timestepping.TABLEAUX:
            raise ValueError(f"`method` must be one of {sorted(timestepping.TABLEAUX)}, got {method!r}.")
        diags = []
        last_write = [time.perf_counter()]

        def on_save(res):
            diags.append(self._diagnostics(res.t[-1], res.y[-1]))
            if checkpoint is not None and time.perf_counter() - last_write[0] > checkpoint_every:
                self._build(res, diags).save(checkpoint)
                last_write[0] = time.perf_counter()

        desc = f"{type(self).__name__} {self.model.kind} beta={self.model.beta:g}"
        if fixed_step is not None:
            res = timestepping.integrate_fixed(fixed_step, y0, t_eval, dt, monitor=self._monitor, callback=on_save,
                                               progress=progress, desc=desc)
        else:
            res = timestepping.integrate(self._rhs, y0, t_eval, method=method, rtol=rtol, atol=atol,
                                         linear=self._linear(), retract=self._retract if self._has_retract else None,
                                         monitor=self._monitor, callback=on_save, first_step=first_step,
                                         max_step=max_step, progress=progress, desc=desc)
        sol = self._build(res, diags)
        if checkpoint is not None:
            sol.save(checkpoint)
        if res.status == 0:
            return sol
        if res.status == 1 and isinstance(res.error, SolverError):
            res.error.solution = sol
            raise res.error
        if res.status == -2:
            raise Interrupted(f"{type(self).__name__}: {res.message}; the Solution up to t={sol.t[-1]:.6g} "
                              "is in `exc.solution`" + (f" and in {checkpoint}" if checkpoint else ""), sol)
        t_fail = float(res.message.split("t=")[1].split(",")[0].split(" ")[0]) if "t=" in res.message else None
        raise NonFiniteState(f"{type(self).__name__}: {res.message}. The saved times up to t={sol.t[-1]:.6g} are in "
                             "`exc.solution`.", sol, t=t_fail, step=res.nsteps + 1)

    def _build(self, res, diags):
        n = len(res.t)
        # a monitor that stops the run on a saved time appends that time without the callback:
        # record its diagnostics here so that no saved time lacks them
        while len(diags) < n:
            diags.append(self._diagnostics(res.t[len(diags)], res.y[len(diags)]))
        data = np.stack([self._to_data(y) for y in res.y[:n]])
        keys = set().union(*[d.keys() for d in diags[:n]]) if diags else set()
        diag_arrays = {k: np.array([d.get(k, np.nan) for d in diags[:n]]) for k in keys} if len(diags) >= n else {}
        stats = res.stats()
        return Solution(np.array(res.t[:n]), self.model, self._representation(), data, diag_arrays, stats,
                        status=0 if res.status == 0 else 1, message=res.message, solver=type(self).__name__)
