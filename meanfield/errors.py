"""Exceptions shared by the model layer and every solver."""


class NoCellMeans(AttributeError):
    """A representation without cell means (`Representation.cell_means`)."""


class InvalidInput(ValueError):
    """Bad input: an argument, a configuration value or a file outside what is accepted. The message
    names the argument (in backticks) and the accepted range. A ValueError, so callers that catch
    ValueError keep working; the ``meanfield`` command exits with status 2 for this type only (any
    other exception inside a run is a failure of the run, status 1)."""


class UnsupportedModel(InvalidInput):
    """A solver cannot represent this model (for example a PDE solver given non-zonal Q, K, V).

    A `ValueError`: the message names the model's argument that the solver does not take and says
    which solvers do.

    Examples
    --------
    >>> import numpy as np
    >>> import meanfield as mf, solvers
    >>> model = mf.Model(beta=1.0, dim=2, Q=np.diag([1.0, 2.0]))
    >>> try:
    ...     solvers.FourierCircle(model, modes=16)
    ... except mf.UnsupportedModel as exc:
    ...     print(isinstance(exc, ValueError), "zonal" in str(exc))
    True True
    """


class SolverError(RuntimeError):
    """A run stopped early. ``solution`` holds the `Solution` computed up to that point (or None).

    The base of `UnderResolved`, `NonFiniteState` and `Interrupted`: catch it to keep what a run
    computed before it stopped.

    Parameters
    ----------
    message : str
        Why the run stopped.
    solution : Solution, optional
        The saved times before the stop.

    Examples
    --------
    >>> import meanfield as mf
    >>> exc = mf.SolverError("stopped", solution=None)
    >>> isinstance(exc, RuntimeError), exc.solution is None, str(exc)
    (True, True, 'stopped')
    """

    def __init__(self, message, solution=None):
        super().__init__(message)
        self.solution = solution


class UnderResolved(SolverError):
    """The discretisation no longer resolves the density.

    The arguments are kept as attributes of the same names; those that do not apply are None.

    Parameters
    ----------
    message : str
        What was detected and the remedies.
    solution : Solution, optional
        The saved times before ``t``.
    t : float, optional
        Time at which it was detected.
    tail : float, optional
        Spectral solvers: the measured spectral tail.
    tol : float, optional
        Its tolerance (spectral solvers), or the minimum width in mesh sizes (finite elements).
    width_cells : float, optional
        Finite elements: the density's width in mesh sizes.

    Examples
    --------
    A clustering run on too few Fourier modes stops, keeping the saved times it reached:

    >>> import meanfield as mf, solvers
    >>> rho0 = mf.densities.perturbed_uniform(0.5, 1, dim=2)
    >>> try:
    ...     solvers.FourierCircle(mf.Model(beta=4.0, dim=2), modes=32).solve(
    ...         rho0, [0.0, 50.0], on_underresolved="raise", progress=False)
    ... except mf.UnderResolved as exc:
    ...     print(round(exc.t, 1), exc.tail > exc.tol, exc.solution.t.tolist())
    5.6 True [0.0]
    """

    def __init__(self, message, solution=None, t=None, tail=None, tol=None, width_cells=None):
        super().__init__(message, solution)
        self.t, self.tail, self.tol, self.width_cells = t, tail, tol, width_cells


class NonFiniteState(SolverError):
    """NaN or inf appeared in the state during a run; ``t`` and ``step`` say where.

    Parameters
    ----------
    message : str
        What was found.
    solution : Solution, optional
        The saved times before ``t``.
    t : float, optional
        The time of the step.
    step : int, optional
        The step's number.

    Examples
    --------
    >>> import meanfield as mf
    >>> exc = mf.NonFiniteState("NaN in the state", t=1.5, step=12)
    >>> isinstance(exc, mf.SolverError), exc.t, exc.step
    (True, 1.5, 12)
    """

    def __init__(self, message, solution=None, t=None, step=None):
        super().__init__(message, solution)
        self.t, self.step = t, step


class Interrupted(SolverError):
    """The run was interrupted (Ctrl-C); ``solution`` holds the saved times so far. Out of
    `meanfield.experiments.parallel.map_tasks`, ``tasks`` maps the index of every task it stopped to
    that task's partial Solution (empty otherwise).

    Parameters
    ----------
    message : str
        What was interrupted.
    solution : Solution, optional
        The saved times so far.
    tasks : dict, optional
        Index of a stopped task -> its partial Solution.

    Examples
    --------
    >>> import meanfield as mf
    >>> exc = mf.Interrupted("interrupted")
    >>> isinstance(exc, mf.SolverError), exc.tasks
    (True, {})
    """

    def __init__(self, message, solution=None, tasks=None):
        super().__init__(message, solution)
        self.tasks = {} if tasks is None else dict(tasks)
