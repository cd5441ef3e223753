"""meanfield._compiled: the compiled loops give the bits of their numpy twins (and of numpy's own forms)."""
import numpy as np
import pytest

from meanfield import _compiled


@pytest.mark.parametrize("d", [2, 3, 5, 9])
def test_compiled_loops_equal_numpy_bit_for_bit(d, monkeypatch):
    pytest.importorskip("numba")
    rng = np.random.default_rng(d)
    x = rng.standard_normal((7, 33, d)) * rng.random((7, 33, 1)) * 3
    f = rng.standard_normal((7, 33, d))
    acc = rng.random((7, 33, d + 1)) + 0.1
    w = rng.random(33)
    L = rng.random((5, 6, 41))
    fast = [_compiled.ratio(acc), _compiled.weighted(x, w), _compiled.weighted(x, w, -0.7), _compiled.normalise(x),
            _compiled.project(x, f)]
    monkeypatch.setattr(_compiled, "ENABLED", False)
    slow = [_compiled.ratio(acc), _compiled.weighted(x, w), _compiled.weighted(x, w, -0.7), _compiled.normalise(x),
            _compiled.project(x, f)]
    for a, b in zip(fast, slow):
        np.testing.assert_array_equal(a, b)
    # the numpy forms they replace
    np.testing.assert_array_equal(fast[0], acc[..., :d] / acc[..., d:])
    np.testing.assert_array_equal(fast[3], x / np.linalg.norm(x, axis=-1, keepdims=True))
    ref = np.empty(x.shape[:-1] + (d + 1,))
    np.multiply(x * -0.7, w[:, None], out=ref[..., :d])
    ref[..., d] = w
    np.testing.assert_array_equal(fast[2], ref)
    monkeypatch.setattr(_compiled, "ENABLED", True)
    counts = np.zeros((5, 6), dtype=np.int64)
    assert _compiled.add_row_counts(L, 0.4, counts)
    np.testing.assert_array_equal(counts, (L >= 0.4).sum(axis=-1))
