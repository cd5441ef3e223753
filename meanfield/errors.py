"""Exceptions shared by the model layer and every solver."""


class NoCellMeans(AttributeError):
    """A representation without cell means (`Representation.cell_means`)."""


class InvalidInput(ValueError):
    """Bad input: an argument, a configuration value or a file outside what is accepted. The message
    names the argument (in backticks) and the accepted range. A ValueError, so callers that catch
    ValueError keep working; the ``meanfield`` command exits with status 2 for this type only (any
    other exception inside a run is a failure of the run, status 1)."""


class UnsupportedModel(InvalidInput):
    """A solver cannot represent this model (for example a PDE solver given non-zonal Q, K, V)."""


class SolverError(RuntimeError):
    """A run stopped early. ``solution`` holds the `Solution` computed up to that point (or None)."""

    def __init__(self, message, solution=None):
        super().__init__(message)
        self.solution = solution


class UnderResolved(SolverError):
    """The discretisation no longer resolves the density.

    Attributes: ``t`` (time at which it was detected), ``solution`` (the saved times before ``t``);
    for spectral solvers ``tail`` (the measured spectral tail) and ``tol`` (its tolerance); for
    finite elements ``width_cells`` (the density's width in mesh sizes) and ``tol`` (its minimum).
    Attributes that do not apply are None.
    """

    def __init__(self, message, solution=None, t=None, tail=None, tol=None, width_cells=None):
        super().__init__(message, solution)
        self.t, self.tail, self.tol, self.width_cells = t, tail, tol, width_cells


class NonFiniteState(SolverError):
    """NaN or inf appeared in the state during a run; ``t`` and ``step`` say where."""

    def __init__(self, message, solution=None, t=None, step=None):
        super().__init__(message, solution)
        self.t, self.step = t, step


class Interrupted(SolverError):
    """The run was interrupted (Ctrl-C); ``solution`` holds the saved times so far. Out of
    `meanfield.experiments.parallel.map_tasks`, ``tasks`` maps the index of every task it stopped to
    that task's partial Solution (empty otherwise)."""

    def __init__(self, message, solution=None, tasks=None):
        super().__init__(message, solution)
        self.tasks = {} if tasks is None else dict(tasks)
