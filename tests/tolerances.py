"""Tolerances for comparisons that agree up to rounding, scaled by what is summed.

Two ways of computing the same sum of ``terms`` floating-point numbers, each at most ``scale`` in size,
differ by at most about ``terms · eps · scale`` (recursive summation's worst case; pairwise and blocked
sums, BLAS and FFTs do better, in an order another version may change). A test that compares two such
computations allows that much times a small factor and no more: a wrong formula is off by orders of
magnitude more. A fixed ``atol=1e-15`` instead breaks when ``scale`` grows like ``e^β``, ``n`` or a norm,
and when another numpy, BLAS or FFT sums in another order.

Bit-for-bit comparisons are kept for results that the same code computes on both sides in the same
order (a file read back, one thread against two over the same blocks): each such test says why.
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
