"""Passive tracers: points carried by a run's own velocity field, and the flow map of a Solution.

A tracer z is a point of S^{d−1} moved by the field that moves the state, ż = X[ρ_t](z) (the
characteristics of the continuity equation (3.1) of Geshkovski, Letrouit, Polyanskiy, Rigollet, *A
mathematical perspective on Transformers*; docs/mathematics.md §9): for particles the field of
the particles, for `solvers.Lagrangian` that of the labels, for the spectral solvers that of the
density, evaluated at the tracers. Its position at time t is the flow map Φ_t applied to its start.

The tracers ride with the state: the stepper advances Y = [y, z] (`TracerLayout`), so that they
take the run's steps, its retraction onto the sphere (z ← z/|z|) and its error control, in which
they form a group of their own: the error norm of a step is the larger of the state's and the
tracers' RMS norms, so each is as accurate as ``rtol``/``atol`` ask (docs/tracers.md).
"""
import numpy as np

from meanfield.validation import check_points
from .timestepping import rms_norm
from meanfield.errors import InvalidInput


def check_tracers(points, dim):
    """Tracer starts as a float array (m, d) of finite points on S^{d−1}; ValueError naming `tracers`."""
    z = check_points(points, "tracers", dim=dim, min_ndim=2)
    if z.ndim != 2 or z.shape[0] == 0:
        raise InvalidInput(f"`tracers` must be points of shape (m, {dim}) with m >= 1, got shape {z.shape}.")
    return z


class TracerLayout:
    """The augmented state Y = [y.ravel(), z.ravel()] of a run carrying m tracers z (m, d) with its
    state y (any shape and dtype; a complex state carries z in its real part)."""

    def __init__(self, state, points, retracts, magnitude):
        self.shape, self.size = np.shape(state), int(np.size(state))
        self.dtype = np.result_type(np.asarray(state).dtype, float)
        self.points_shape = np.shape(points)
        self.retracts = retracts            # the solver's own retraction of the state
        self.magnitude = magnitude          # the solver's own size of the state (None: |y|)

    def pack(self, y, z):
        out = np.empty(self.size + int(np.size(z)), dtype=self.dtype)
        out[:self.size] = np.ravel(y)
        out[self.size:] = np.ravel(z)
        return out

    def split(self, Y):
        """(state, points) views of Y."""
        z = Y[self.size:].reshape(self.points_shape)
        return Y[:self.size].reshape(self.shape), (z.real if np.iscomplexobj(z) else z)

    def points(self, Y):
        z = self.split(Y)[1]
        return z / np.linalg.norm(z, axis=-1, keepdims=True)

    def sizes(self, Y):
        """The error control's size of each component: the state's own, and |z| per tracer."""
        y, z = self.split(Y)
        own = np.abs(y) if self.magnitude is None else np.broadcast_to(self.magnitude(y), self.shape)
        return np.concatenate([np.ravel(own), np.repeat(np.linalg.norm(z, axis=-1), z.shape[-1])])

    def norm(self, r):
        """The error norm: the larger of the RMS norms of the state's and of the tracers' parts."""
        return max(rms_norm(r[:self.size]), rms_norm(r[self.size:]))


def rebuild(segment, classes):
    """A solver that continues ``segment`` (a one-representation Solution) exactly from any of its
    saved states (its class's `Solver.from_segment`); ``classes`` gives a solver class by its name (the
    `solvers` package's lazy registry)."""
    try:
        cls = classes(segment.solver or "")
    except AttributeError:
        raise InvalidInput(f"`flow` re-runs a Solution of a solver that carries tracers (docs/tracers.md); this one is "
                         f"from {segment.solver or segment.representation.name!r}.") from None
    return cls.from_segment(segment)


def flow_map(solution, points, last, classes, **options):
    """Φ_t(points) at the saved times ``solution.t[:last + 1]``, shape (last + 1, m, d): the run re-done
    from its first saved state with ``points`` as tracers (`Solution.flow`); a run handed over to the
    characteristics is re-done with the hand-over (``on_underresolved="lagrangian"``). ``options``: the
    stepper's (default: the solver's defaults and the recorded method); ``classes``: as in `rebuild`."""
    z = check_tracers(points, solution.model.dim)
    first = solution.segments[0]
    solver = rebuild(first, classes)
    method = first.stats.get("method")
    if len(solution.segments) > 1:
        options.setdefault("on_underresolved", "lagrangian")
    if last == 0:
        return z[None]
    start = first[0]
    start.tracers = None                     # the run's own tracers, if any, are not these
    sol = solver.solve(start, solution.t[:last + 1], tracers=z, method=method if method in solver.steppers else None,
                       progress=False, **options)
    return sol.tracers

