"""Input validation shared by every public function (one place, one style of message).

Messages name the argument in backticks and state the accepted range, like
``scipy.integrate``'s ``check_arguments``.
"""
import numbers
import os

import numpy as np
from .errors import InvalidInput

SPHERE_TOL = 1e-10
MASS_RTOL = 1e-6
NORMALIZE_POINTS = "Pass normalize=True to project the points."
NORMALIZE_WEIGHTS = "Pass normalize=True to rescale."


def check_real(value, name, *, low=None, high=None, low_open=False, allow_inf=False):
    """Return ``value`` as a float, raising ValueError if it is not a finite real in range."""
    if isinstance(value, (bool, np.bool_)) or np.asarray(value).dtype == bool:  # true is not 1.0
        raise InvalidInput(f"`{name}` must be a real number, got {value!r}.")
    if isinstance(value, (str, bytes)) or np.asarray(value).dtype.kind in "SU":   # "2" is not 2.0
        raise InvalidInput(f"`{name}` must be a real number, got {value!r} ({type(value).__name__}).")
    if not isinstance(value, (numbers.Real, np.floating, np.integer)):
        try:
            value = float(np.asarray(value).item())
        except (TypeError, ValueError):
            raise InvalidInput(f"`{name}` must be a real number, got {value!r}.") from None
    value = float(value)
    if np.isnan(value) or (np.isinf(value) and not allow_inf):
        raise InvalidInput(f"`{name}` must be finite, got {value}.")
    return _check_range(value, name, low, high, low_open)


def _check_range(value, name, low, high, low_open=False):
    """``value`` itself, or ValueError naming `name` and the bound it breaks."""
    if low is not None and (value < low or (low_open and value == low)):
        op = ">" if low_open else ">="
        raise InvalidInput(f"`{name}` must be {op} {low}, got {value}.")
    if high is not None and value > high:
        raise InvalidInput(f"`{name}` must be <= {high}, got {value}.")
    return value


def check_beta(beta, name="beta"):
    """β as a finite float of either sign (docs/negative-beta.md)."""
    return check_real(beta, name)


def check_int(value, name, *, low=None, high=None):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Integral, np.integer)):
        if isinstance(value, (float, np.floating)) and float(value).is_integer():
            value = int(value)
        else:
            raise InvalidInput(f"`{name}` must be an integer, got {value!r}.")
    return _check_range(int(value), name, low, high)


def check_dim(dim, name="dim"):
    """Ambient dimension d >= 2 (the sphere S^{d-1})."""
    return check_int(dim, name, low=2)


def check_points(x, name="x", *, dim=None, normalize=False, tol=SPHERE_TOL, min_ndim=1, hint=""):
    """Points on S^{d-1} as a float array of shape (..., d).

    Raises ValueError for non-finite entries, a wrong last axis, or points off the unit sphere
    by more than ``tol`` (unless ``normalize=True``, which projects them onto the sphere). ``hint``
    ends the off-sphere message: only callers that accept ``normalize`` pass `NORMALIZE_POINTS`.
    """
    try:
        x = np.asarray(x, dtype=float)
    except (TypeError, ValueError):
        raise InvalidInput(f"`{name}` must be an array of points of shape (..., d).") from None
    if x.ndim < min_ndim:
        raise InvalidInput(f"`{name}` must have at least {min_ndim} dimension(s) with the last one d, got shape {x.shape}.")
    if x.shape[-1] < 2:
        raise InvalidInput(f"`{name}` must have a last axis of length d >= 2, got shape {x.shape}.")
    if dim is not None and x.shape[-1] != dim:
        raise InvalidInput(f"`{name}` must have last axis of length dim={dim}, got shape {x.shape}.")
    if not np.all(np.isfinite(x)):
        raise InvalidInput(f"`{name}` contains NaN or inf.")
    r = np.linalg.norm(x, axis=-1, keepdims=True)
    if normalize:
        if np.any(r == 0):
            raise InvalidInput(f"`{name}` contains a zero vector, which cannot be normalised onto the sphere.")
        return x / r
    err = float(np.max(np.abs(r - 1.0))) if r.size else 0.0
    if err > tol:
        raise InvalidInput(f"`{name}` must lie on the unit sphere (| |x| - 1 | <= {tol:g}); the largest deviation is "
                         f"{err:.3g}." + (f" {hint}" if hint else ""))
    return x


def check_vector(values, n, name, what, shape_note=""):
    """``values`` as a finite float array of shape (n,); ValueError naming `name`, ``what`` it must be."""
    try:
        values = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        raise InvalidInput(f"`{name}` must be {what}.") from None
    if values.shape != (n,):
        raise InvalidInput(f"`{name}` must have shape ({n},){' ' + shape_note if shape_note else ''}, got {values.shape}.")
    if not np.all(np.isfinite(values)):
        raise InvalidInput(f"`{name}` contains NaN or inf.")
    return values


def check_weights(w, n, name="weights", *, normalize=False, rtol=1e-10, hint=""):
    """Non-negative finite weights of length n summing to 1 (within ``rtol``); ``hint`` ends the
    message of a wrong sum (callers that accept ``normalize`` pass `NORMALIZE_WEIGHTS`)."""
    if w is None:
        return np.full(n, 1.0 / n)
    w = check_vector(w, n, name, f"a 1-D array of {n} non-negative numbers", "to match the points")
    if np.any(w < 0):
        raise InvalidInput(f"`{name}` must be non-negative; the smallest is {w.min():.3g}.")
    s = float(w.sum())
    if s <= 0:
        raise InvalidInput(f"`{name}` must have a positive sum.")
    if normalize:
        return w / s
    if abs(s - 1.0) > rtol:
        raise InvalidInput(f"`{name}` must sum to 1 (within {rtol:g}), got {s!r}." + (f" {hint}" if hint else ""))
    return w


def check_measure(measure, name="measure", *, dim=None, normalize=False):
    """A discrete measure ``(points, weights)``; returns (points (n, d), weights (n,))."""
    if not (isinstance(measure, (tuple, list)) and len(measure) == 2):
        raise InvalidInput(f"`{name}` must be a pair (points, weights), got {type(measure).__name__}.")
    x = check_points(measure[0], f"{name}[0] (points)", dim=dim, normalize=normalize, min_ndim=2)
    if x.ndim != 2:
        raise InvalidInput(f"`{name}[0]` (points) must have shape (n, d), got {x.shape}.")
    if x.shape[0] == 0:
        raise InvalidInput(f"`{name}` must have at least one point.")
    w = check_weights(measure[1], x.shape[0], f"{name}[1] (weights)", normalize=normalize)
    return x, w


def check_times(t_eval, name="t_eval", *, start=0.0):
    """Strictly increasing, finite, 1-D times starting at ``start`` (0, or the last time of a
    continued run; None accepts any start >= 0)."""
    try:
        t = np.asarray(t_eval, dtype=float)
    except (TypeError, ValueError):
        raise InvalidInput(f"`{name}` must be a 1-D array of times.") from None
    if t.ndim != 1 or t.size < 1:
        raise InvalidInput(f"`{name}` must be a non-empty 1-D array, got shape {t.shape}.")
    if not np.all(np.isfinite(t)):
        raise InvalidInput(f"`{name}` contains NaN or inf.")
    if start is None:
        if t[0] < 0:
            raise InvalidInput(f"`{name}` must start at a time >= 0, got t_eval[0]={t[0]}.")
    elif start == 0.0 and t[0] != 0.0:
        raise InvalidInput(f"`{name}` must start at 0 (the initial time), got t_eval[0]={t[0]}.")
    elif abs(t[0] - start) > 1e-12 * max(1.0, abs(start)):
        raise InvalidInput(f"`{name}` must start at t={start!r}, the last saved time of the run it continues; "
                         f"got t_eval[0]={t[0]!r}.")
    else:
        t = t.copy()
        t[0] = start
    if t.size > 1 and np.any(np.diff(t) <= 0):
        k = int(np.argmax(np.diff(t) <= 0))
        raise InvalidInput(f"`{name}` must be strictly increasing; t_eval[{k}]={t[k]} >= t_eval[{k+1}]={t[k+1]}.")
    return t


def check_density_values(values, name="rho0", *, quadrature_weights=None, normalize=False, rtol=MASS_RTOL):
    """Validate density values sampled at quadrature nodes (σ-relative density, docs/mathematics.md §2).

    Checks finiteness and non-negativity; with ``quadrature_weights`` (summing to 1, i.e. a
    quadrature for σ) checks that the mass ∫ρ dσ is 1 within ``rtol``, or rescales when
    ``normalize=True``. Returns (values, mass_before_normalisation).
    """
    v = np.asarray(values, dtype=float)
    if not np.all(np.isfinite(v)):
        raise InvalidInput(f"`{name}` returned NaN or inf values.")
    vmin = float(v.min()) if v.size else 0.0
    if vmin < 0:
        raise InvalidInput(f"`{name}` must be a non-negative density; its minimum on the grid is {vmin:.3g}.")
    mass = None
    if quadrature_weights is not None:
        mass = float(np.sum(np.asarray(quadrature_weights) * v))
        if mass <= 0:
            raise InvalidInput(f"`{name}` has zero mass: its values on the grid lie in [{vmin:.3g}, {float(v.max()):.3g}].")
        if normalize:
            v = v / mass
        elif abs(mass - 1.0) > rtol:
            raise InvalidInput(f"`{name}` must have mass ∫ρ dσ = 1 (σ the uniform probability measure) within {rtol:g} "
                             f"relative; it has {mass!r}. Pass normalize=True to rescale.")
    return v, mass


def check_callable(f, name):
    if not callable(f):
        raise InvalidInput(f"`{name}` must be a callable f(x) -> array of density values, got {type(f).__name__}.")
    return f


def available_memory():
    """The physical memory of this machine in bytes (os.sysconf), or None where it is unknown."""
    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, ValueError, OSError):
        return None


def format_bytes(nbytes):
    """``nbytes`` in the largest binary unit below it: '1.5 GiB'."""
    value = float(min(nbytes, 2 ** 1000))
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if value < 1024 or unit == "PiB":
            return f"{value:.3g} {unit}"
        value /= 1024


def check_memory(nbytes, name, value):
    """Refuse, before any allocation, a resolution whose estimated working memory ``nbytes`` exceeds
    the physical memory (`available_memory`): ValueError naming the argument (``value``: its value,
    or a tuple: the shape of an array) and both sizes."""
    total = available_memory()
    if total is not None and nbytes > total:
        what = f"`{name}` of shape {value}" if isinstance(value, tuple) else f"`{name}`={value!r}"
        raise InvalidInput(f"{what} needs about {format_bytes(nbytes)} of memory (estimated), more than "
                         f"the {format_bytes(total)} of this machine; use a smaller `{name}`.")
    return nbytes
