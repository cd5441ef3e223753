"""meanfield.sums.compiled: the compiled loops give the bits of their numpy twins (and of numpy's own forms)."""
import numpy as np
import pytest

from meanfield.sums import compiled


@pytest.mark.parametrize("d", [2, 3, 5, 9])
def test_compiled_loops_equal_numpy_bit_for_bit(d, monkeypatch):
    pytest.importorskip("numba")
    rng = np.random.default_rng(d)
    x = rng.standard_normal((7, 33, d)) * rng.random((7, 33, 1)) * 3
    f = rng.standard_normal((7, 33, d))
    acc = rng.random((7, 33, d + 1)) + 0.1
    w = rng.random(33)
    L = rng.random((5, 6, 41))
    fast = [compiled.ratio(acc), compiled.weighted(x, w), compiled.weighted(x, w, -0.7), compiled.normalise(x),
            compiled.project(x, f), compiled.euler_normalise(x, 0.1, f)]
    monkeypatch.setattr(compiled, "ENABLED", False)
    slow = [compiled.ratio(acc), compiled.weighted(x, w), compiled.weighted(x, w, -0.7), compiled.normalise(x),
            compiled.project(x, f), compiled.euler_normalise(x, 0.1, f)]
    # Bits must agree here: each loop and its fallback (in compiled.py) do the same IEEE operations in the
    # same order (numba contracts no multiply-add without fastmath), so a run does not depend on which is used.
    for a, b in zip(fast, slow):
        np.testing.assert_array_equal(a, b)
    # numpy's own forms: one correctly rounded operation per entry (a quotient, a product) gives the same bits
    # in any library; |y| is a sum whose order numpy may change, hence ulps
    np.testing.assert_array_equal(fast[0], acc[..., :d] / acc[..., d:])
    ref = np.empty(x.shape[:-1] + (d + 1,))
    np.multiply(x * -0.7, w[:, None], out=ref[..., :d])
    ref[..., d] = w
    np.testing.assert_array_equal(fast[2], ref)
    np.testing.assert_array_max_ulp(fast[3], x / np.linalg.norm(x, axis=-1, keepdims=True), maxulp=4)
    np.testing.assert_array_equal(fast[5], compiled.normalise(x + 0.1 * f))      # the same loop on both sides
    monkeypatch.setattr(compiled, "ENABLED", True)
    counts = np.zeros((5, 6), dtype=np.int64)
    assert compiled.add_row_counts(L, 0.4, counts)
    np.testing.assert_array_equal(counts, (L >= 0.4).sum(axis=-1))


def test_the_fused_exponential_is_within_one_ulp_of_the_correctly_rounded_one():
    """The polynomial e^z of the fused kernel sums, against e^z to 40 digits (mpmath) on [−700, 300]
    and on [−1, 0] (where the sums' exponents mostly are): at most 1 ulp, as np.exp; below EXP_LOW it
    is e^EXP_LOW, the clamp of the kernel sums."""
    pytest.importorskip("numba")
    mpmath = pytest.importorskip("mpmath")
    from meanfield.sums import _fused, kernelsums

    rng = np.random.default_rng(0)
    z = np.concatenate([rng.uniform(-700, 300, 3000), rng.uniform(-1, 0, 3000), [0.0, -700.0, 300.0, 1e-300]])
    got = np.empty_like(z)
    _fused.exp_values(z, got)
    with mpmath.workdps(40):
        exact = np.array([float(mpmath.exp(mpmath.mpf(float(v)))) for v in z])
    ulps = np.abs(got - exact) / np.spacing(exact)
    assert ulps.max() <= 1.0 and np.mean(ulps == 0) > 0.85
    assert got[z == 0.0][0] == 1.0
    low = np.array([-700.0, -750.0, -1e5])
    out = np.empty(3)
    _fused.exp_values(low, out)
    assert _fused.EXP_LOW == kernelsums.EXP_FLOOR and np.all(out == out[0]) and out[0] == got[z == -700.0][0]


def test_compile_all_compiles_the_combinations_the_library_makes():
    """`.ci/setup` calls compile_all once so that pytest's workers read numba's cache instead of each
    compiling the fused sums again: afterwards the fused pass has one compiled signature per combination
    of read-only points, weights and causal mask that the library passes."""
    from meanfield.sums import _fused

    assert compiled.compile_all() == 42
    assert len(_fused.exp_sums4.signatures) >= 10 and len(_fused.exp_sums4_parallel.signatures) >= 8
