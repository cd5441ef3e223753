"""Tolerances for comparisons that agree up to rounding, scaled by what is summed.

Two ways of computing the same sum of ``terms`` floating-point numbers, each at most ``scale`` in size,
differ by at most about ``terms · eps · scale`` (recursive summation's worst case; pairwise and blocked
sums, BLAS and FFTs do better, in an order another version may change). A test that compares two such
computations allows that much times a small factor and no more: a wrong formula is off by orders of
magnitude more. A fixed ``atol=1e-15`` instead breaks when ``scale`` grows like ``e^β``, ``n`` or a norm,
and when another numpy, BLAS or FFT sums in another order.

Bit-for-bit comparisons (``array_equal``) are kept only where both sides are the same numbers by
construction, so another numpy, BLAS or FFT changes both alike:

- a file read back (`Solution.save`/`mf.load`, NetCDF round trips, sweep cells) against what was written;
- the same code over the same blocks in the same order (one thread against two, a batch against its
  members, diagnostics "none" against "full", a restart's segment against the uninterrupted run's);
- integers and exact arithmetic: counts, indices, shapes, padding with zeros, degrees, l(l+1);
- counts of inner products against a threshold chosen far from every inner product (the tests assert
  the margin), so rounding cannot move a point across it.

Two different computations of the same quantity (a formula in the test against the library's, a BLAS
product against a loop) are compared with :func:`assert_rounding_close` instead.
"""
import numpy as np

EPS = np.finfo(float).eps


def rounding(scale, terms=1, factor=8.0):
    """``factor · terms · eps · max|scale|``: the rounding of a sum of ``terms`` terms of size ``scale``."""
    return float(factor * max(int(terms), 1) * EPS * np.max(np.abs(scale)))


def assert_rounding_close(actual, desired, scale=None, terms=1, factor=8.0):
    """``actual`` equals ``desired`` up to :func:`rounding` (``scale`` defaults to ``max|desired|``, at least 1)."""
    desired = np.asarray(desired, dtype=float)
    if scale is None:
        scale = max(1.0, float(np.max(np.abs(desired), initial=0.0)))
    np.testing.assert_allclose(actual, desired, rtol=0, atol=rounding(scale, terms, factor))
