"""meanfield.sums.kernelsums against a direct evaluation (one full matrix, the exact row maximum as shift).

The reference forms L_ij = β⟨x_i, M y_j⟩ in one piece, m_i = max_j L_ij, and R_i = Σ_j e^{L_ij − m_i} F_j;
the engine's (S, c) must satisfy e^{c_i − m_i} S_i = R_i, i.e. the same unshifted sums e^{c_i} S_i.
"""
import contextlib
import multiprocessing
import os

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from meanfield.sums import compiled, kernelsums
from meanfield.sums.kernelsums import (_row_counts, attention_sums, gram_counts,
                                  kernel_energy, kernel_sums, shift_kind)


def _sphere(shape, d, seed):
    x = np.random.default_rng(seed).standard_normal(tuple(np.atleast_1d(shape)) + (d,))
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def _direct(x, y, values, beta, M=None):
    L = beta * np.einsum("...id,de,...je->...ij", x, np.eye(x.shape[-1]) if M is None else M, y)
    m = L.max(axis=-1)
    return np.exp(L - m[..., None]) @ values, m


def _assert_matches(S, c, R, m, rtol=1e-12):
    """e^{c − m} S = R row by row, relative to the size of each row."""
    scaled = S * np.exp(np.asarray(c) - m)[..., None]
    scale = np.abs(R).max(axis=-1, keepdims=True)
    assert np.abs(scaled - R).max() <= rtol * scale.max() and np.all(np.abs(scaled - R) <= rtol * scale)


@pytest.mark.parametrize("shift", ["none", "fixed", "running", "auto"])
@pytest.mark.parametrize("chunk", [1, 7, 64, 512])
def test_every_shift_and_chunk_matches_direct_sums(shift, chunk):
    x, y = _sphere(37, 3, 0), _sphere(53, 3, 1)
    F = np.random.default_rng(2).standard_normal((53, 4))
    R, m = _direct(x, y, F, 3.0)
    S, c = kernel_sums(x, y, F, 3.0, shift=shift, chunk=chunk)
    assert S.shape == (37, 4)
    if shift == "running":
        assert c.shape == (37,)
        np.testing.assert_allclose(c, m, rtol=1e-15)          # the running maximum is the row maximum
    else:
        assert np.ndim(c) == 0 and c == {"fixed": 3.0}.get(shift, 0.0)
    _assert_matches(S, c, R, m)


def test_auto_shift_choices():
    x = _sphere(20, 3, 0)
    M = np.diag([1.0, 2.0, 0.5])
    assert shift_kind(300.0, x, x)[0] == "none"
    assert shift_kind(400.0, x, x)[0] == "fixed"
    assert shift_kind(149.0, x, x, M)[0] == "none"                # β‖M‖₂ = 298
    assert shift_kind(200.0, x, x, M)[0] == "running"
    assert shift_kind(400.0, 1.5 * x, x)[0] == "running"          # not unit vectors: no fixed shift
    assert shift_kind(99.0, 1.5 * x, 2 * x)[0] == "none"          # β·max|x|·max|y| = 297
    assert shift_kind(400.0, x, x, shift="running")[0] == "running"
    # the clamp at e^{−700} is needed only when exponents can go below it
    assert not shift_kind(300.0, x, x, shift="fixed")[1] and shift_kind(400.0, x, x)[1]


def test_fixed_shift_at_beta_400_and_unshifted_usa_sums():
    """β = 400 (auto → fixed): logs of the sums agree with the direct ones to 1e-12; at β = 3 the
    unshifted sums e^{c} S are the plain Σ_j e^{β⟨x_i, y_j⟩} F_j for every strategy, to 1e-13 of
    each row's size (a coordinate of the numerator that cancels to 4e-4 in a row of size 3 is
    known to 1e-13 of the row, not of itself: the BLAS kernels OpenBLAS picks differ there)."""
    x = _sphere(300, 3, 3)
    w = np.full(300, 1 / 300)
    F = np.concatenate([x * w[:, None], w[:, None]], axis=1)      # the (SA) numerator and denominator
    S, c = kernel_sums(x, x, F, 400.0, chunk=64)
    assert np.ndim(c) == 0 and c == 400.0
    R, m = _direct(x, x, F, 400.0)
    np.testing.assert_allclose(np.log(S[:, -1]) + c, np.log(R[:, -1]) + m, rtol=0, atol=1e-12)
    np.testing.assert_allclose(S[:, :3] / S[:, 3:], R[:, :3] / R[:, 3:], rtol=0, atol=1e-12)   # (SA) velocity
    plain = np.exp(3.0 * x @ x.T) @ F
    for shift in ("none", "fixed", "running"):
        S, c = kernel_sums(x, x, F, 3.0, shift=shift, chunk=100)
        error = np.abs(np.exp(np.asarray(c))[..., None] * S - plain)
        assert np.all(error <= 1e-13 * np.abs(plain).max(axis=1, keepdims=True)), (shift, error.max())


def test_running_shift_with_general_M_at_beta_200():
    """β = 200, M = diag(1, 2, 0.5): β⟨x, My⟩ reaches 400, e^{400} is representable but the row
    sums of e^{β⟨x, My⟩ − c_i} must be compared in logs."""
    x, y = _sphere(150, 3, 4), _sphere(170, 3, 5)
    M = np.diag([1.0, 2.0, 0.5])
    F = np.random.default_rng(6).random((170, 2)) + 0.1
    S, c = kernel_sums(x, y, F, 200.0, M=M, chunk=32)
    R, m = _direct(x, y, F, 200.0, M)
    assert c.shape == (150,)
    np.testing.assert_allclose(np.log(S) + c[:, None], np.log(R) + m[:, None], rtol=0, atol=1e-12)


def test_clamped_exponents_do_not_change_the_sums():
    """β = 2000 with the fixed shift: most e^{β(⟨x_i,x_j⟩−1)} are below e^{−700} and are clamped there;
    the sums still agree with the direct ones (whose tiny terms underflow to 0) to round-off."""
    x = _sphere(200, 3, 7)
    F = np.random.default_rng(8).random((200, 3))
    S, c = kernel_sums(x, x, F, 2000.0, shift="fixed", chunk=50)
    R, m = _direct(x, x, F, 2000.0)
    _assert_matches(S, c, R, m, rtol=1e-12)           # β·eps: ⟨x_i, x_i⟩ = 1 ± 1e-16


def test_batches_broadcast():
    """x (2, 3, n, d), y (m, d), values (3, m, p): leading axes broadcast, each slice as computed alone."""
    x, y = _sphere((2, 3, 17), 4, 9), _sphere(23, 4, 10)
    F = np.random.default_rng(11).standard_normal((3, 23, 5))
    M = np.random.default_rng(12).standard_normal((4, 4))
    for shift, beta, kw in [("none", 2.0, {}), ("fixed", 350.0, {}), ("running", 50.0, {"M": M})]:
        for chunk in (4, 5, 64):
            S, c = kernel_sums(x, y, F, beta, shift=shift, chunk=chunk, **kw)
            assert S.shape == (2, 3, 17, 5)
            if shift == "running":
                assert c.shape == (2, 3, 17)
            for a in range(2):
                for b in range(3):
                    R, m = _direct(x[a, b], y, F[b], beta, kw.get("M"))
                    ca = c[a, b] if shift == "running" else c
                    _assert_matches(S[a, b], ca, R, m)


def test_many_small_realisations_and_batch_slicing():
    """B = 40 clouds of n = 30 (one block each; with chunk 8 the batch is sliced to keep memory O(chunk²))."""
    x = _sphere((40, 30), 3, 13)
    w = np.full(30, 1 / 30)
    F = np.concatenate([x * w[:, None], np.broadcast_to(w[:, None], (40, 30, 1))], axis=-1)
    for shift in ("none", "fixed", "running"):
        ref = [_direct(x[b], x[b], F[b], 5.0) for b in range(40)]
        for chunk in (8, 30, 512):
            S, c = kernel_sums(x, x, F, 5.0, shift=shift, chunk=chunk)
            for b in range(40):
                _assert_matches(S[b], c[b] if shift == "running" else c, *ref[b])


def test_second_moment_values():
    """values [w_j, w_j y_j, w_j y_j ⊗ y_j] (p = 1 + d + d²): the local weighted mean and covariance."""
    x, y = _sphere(11, 3, 14), _sphere(40, 3, 15)
    w = np.random.default_rng(16).random(40)
    F = np.concatenate([w[:, None], w[:, None] * y, w[:, None] * np.einsum("jd,je->jde", y, y).reshape(40, 9)], 1)
    S, c = kernel_sums(x, y, F, 4.0, chunk=16)
    assert S.shape == (11, 13)
    K = np.exp(4.0 * x @ y.T) * w
    np.testing.assert_allclose(np.exp(c) * S[:, 4:], np.einsum("ij,jd,je->ide", K, y, y).reshape(11, 9), rtol=1e-13)


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 70), m=st.integers(1, 70), chunk=st.integers(1, 80),
       shift=st.sampled_from(["none", "fixed", "running"]), seed=st.integers(0, 2 ** 16))
def test_independent_of_chunk(n, m, chunk, shift, seed):
    x, y = _sphere(n, 3, seed), _sphere(m, 3, seed + 1)
    F = np.random.default_rng(seed + 2).random((m, 2))
    S1, c1 = kernel_sums(x, y, F, 30.0, shift=shift, chunk=chunk)
    S2, c2 = kernel_sums(x, y, F, 30.0, shift=shift, chunk=1000)
    np.testing.assert_allclose(S1 * np.exp(np.asarray(c1) - np.asarray(c2))[..., None], S2, rtol=1e-12)


def test_kernel_energy():
    x = _sphere((3, 101), 3, 17)
    w = np.random.default_rng(18).random(101)
    w /= w.sum()
    for beta in (0.0, 2.0, 500.0):
        e = kernel_energy(beta, x, w, chunk=16)
        assert e.shape == (3,)
        for b in range(3):
            direct = w @ np.exp(beta * (x[b] @ x[b].T - 1.0)) @ w
            assert e[b] == pytest.approx(direct, rel=1e-13)
    assert kernel_energy(3.0, x[0], w) == pytest.approx(w @ np.exp(3.0 * (x[0] @ x[0].T - 1.0)) @ w, rel=1e-13)


@pytest.mark.parametrize("kwargs, name", [
    ({"shift": "lse"}, "shift"),
    ({"chunk": 0}, "chunk"),
    ({"M": np.eye(2)}, "M"),
    ({"beta": np.inf}, "beta"),
    ({"values": np.ones((4, 2))}, "values"),
    ({"y": np.ones((5, 2))}, "x"),
])
def test_bad_input_names_the_argument(kwargs, name):
    args = {"x": _sphere(6, 3, 0), "y": _sphere(5, 3, 1), "values": np.ones((5, 2)), "beta": 1.0}
    args.update(kwargs)
    with pytest.raises(ValueError, match=rf"`{name}`"):
        kernel_sums(args.pop("x"), args.pop("y"), args.pop("values"), args.pop("beta"), **args)


# -- threads, counts, unit points -------------------------------------------------------------------
def _cases():
    """(x, y, values, beta, kwargs): many small clouds, one large cloud, a broadcast batch, and the
    three shifts."""
    x = _sphere((24, 30), 3, 20)
    F = np.concatenate([x / 30, np.full((24, 30, 1), 1 / 30)], axis=-1)
    X = _sphere(700, 3, 21)
    G = np.random.default_rng(22).random((700, 2))
    M = np.diag([1.0, 2.0, 0.5])
    return [(x, x, F, 4.0, {}), (x, x, F, 400.0, {}), (x, x, F, 200.0, {"M": M}), (X, X, G, 3.0, {"chunk": 64}),
            (X, X, G, 350.0, {"chunk": 100}), (X, X, G, 150.0, {"M": M, "chunk": 64}),
            (_sphere((2, 3, 40), 3, 23), _sphere(50, 3, 24), np.random.default_rng(25).random((3, 50, 2)), 2.0, {})]


@pytest.mark.parametrize("case", range(7))
def test_threads_give_the_same_bits(case, monkeypatch):
    """Every row is formed by the same operations whatever the number of threads (small problems are
    shared out too here)."""
    monkeypatch.setattr(kernelsums, "_PARALLEL_MIN", 0)
    x, y, F, beta, kw = _cases()[case]
    S1, c1, n1 = kernel_sums(x, y, F, beta, threads=1, count_at=0.9, **kw)
    for threads in (2, 3):
        S, c, n = kernel_sums(x, y, F, beta, threads=threads, count_at=0.9, **kw)
        np.testing.assert_array_equal(S, S1)
        np.testing.assert_array_equal(np.asarray(c), np.asarray(c1))
        np.testing.assert_array_equal(n, n1)


@pytest.mark.parametrize("case", range(7))
def test_counts_come_with_the_sums(case):
    """count_at=τ: the number of j with ⟨x_i, M y_j⟩ >= τ for every row, as counted directly (τ chosen
    away from every inner product by more than rounding), and the same sums as without counting."""
    x, y, F, beta, kw = _cases()[case]
    M = kw.get("M", np.eye(3))
    g = np.einsum("...id,de,...je->...ij", x, M, np.broadcast_to(y, x.shape[:-2] + y.shape[-2:]))
    for tau in (-0.3, 0.5, 0.95, 1.5):
        assert np.abs(g - tau).min() > 1e-9
        S, c, counts = kernel_sums(x, y, F, beta, count_at=tau, **kw)
        np.testing.assert_array_equal(counts, np.broadcast_to((g >= tau).sum(axis=-1), S.shape[:-1]))
        S0, c0 = kernel_sums(x, y, F, beta, **kw)
        np.testing.assert_array_equal(S, S0)
        np.testing.assert_array_equal(np.asarray(c), np.asarray(c0))


def test_gram_counts_and_beta_zero():
    x, y = _sphere((5, 40), 3, 26), _sphere((5, 60), 3, 27)
    g = np.einsum("bid,bjd->bij", x, y)
    gm = np.einsum("bid,de,bje->bij", x, np.diag([1.0, -1.0, 2.0]), y)
    assert min(np.abs(g - 0.25).min(), np.abs(gm - 0.25).min()) > 1e-9   # counts exact: τ far from rounding
    np.testing.assert_array_equal(gram_counts(x, y, 0.25, chunk=7), (g >= 0.25).sum(-1))
    M = np.diag([1.0, -1.0, 2.0])
    np.testing.assert_array_equal(gram_counts(x, y, 0.25, M=M, threads=2), (gm >= 0.25).sum(-1))
    F = np.ones((5, 60, 1))
    S, c, counts = kernel_sums(x, y, F, 0.0, count_at=0.25)        # β = 0: e^0 = 1, counts from the inner products
    np.testing.assert_array_equal(S[..., 0], np.full((5, 40), 60.0))
    np.testing.assert_array_equal(counts, (g >= 0.25).sum(-1))


@settings(max_examples=40, deadline=None)
@given(shape=st.tuples(st.integers(1, 4), st.integers(1, 9), st.integers(1, 2100)), tau=st.floats(0.0, 1.0),
       seed=st.integers(0, 2 ** 16))
def test_row_counts_are_count_nonzero(shape, tau, seed):
    L = np.random.default_rng(seed).random(shape)
    np.testing.assert_array_equal(_row_counts(L, tau), np.count_nonzero(L >= tau, axis=-1))


def test_unit_points_skip_the_measurement_only():
    x = _sphere((6, 50), 3, 28)
    F = np.random.default_rng(29).random((6, 50, 3))
    for beta in (5.0, 400.0):
        for shift in ("none", "fixed", "running") if beta < 300 else ("auto", "fixed"):
            S, c = kernel_sums(x, x, F, beta, shift=shift, unit=True)
            S0, c0 = kernel_sums(x, x, F, beta, shift=shift)
            np.testing.assert_array_equal(S, S0)


def test_bad_threads_and_count_at_are_refused():
    with pytest.raises(ValueError, match=r"`threads`"):
        kernel_sums(_sphere(4, 3, 0), _sphere(4, 3, 0), np.ones((4, 1)), 1.0, threads=1.5)
    with pytest.raises(ValueError, match=r"`count_at`"):
        kernel_sums(_sphere(4, 3, 0), _sphere(4, 3, 0), np.ones((4, 1)), 1.0, count_at="x")


def test_blas_is_single_threaded_under_the_sums_threads_and_restored(monkeypatch):
    """While the blocks are shared among threads, BLAS runs on one thread (a threaded BLAS under each
    would oversubscribe the cores); its own setting comes back afterwards, also after nested uses."""
    from threadpoolctl import threadpool_info, threadpool_limits

    def blas_threads():
        return [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]

    seen = []
    tile = kernelsums._tile

    def spy(*args):
        seen.append(max(blas_threads(), default=1))
        return tile(*args)

    monkeypatch.setattr(kernelsums, "_tile", spy)
    monkeypatch.setattr(kernelsums, "_PARALLEL_MIN", 0)
    x = _sphere(300, 8, 30)
    with threadpool_limits(limits=2, user_api="blas"):
        before = blas_threads()
        with kernelsums.blas_single_threaded():
            S2, _ = kernel_sums(x, x, np.ones((300, 1)), 2.0, chunk=64, threads=2)
            assert max(blas_threads(), default=1) == 1
        assert blas_threads() == before
        assert seen and max(seen) == 1
        seen.clear()
        S1, _ = kernel_sums(x, x, np.ones((300, 1)), 2.0, chunk=64, threads=1)
        assert blas_threads() == before and seen and max(seen) == max(before, default=1)
    np.testing.assert_array_equal(S1, S2)


# -- the fused pass (d <= 3 with the shifts none/fixed, numba) against the blocked numpy pass ------------
class _numpy_path:
    """Within it, the kernel sums take the blocked numpy/BLAS pass (the fused one is compiled)."""

    def __enter__(self):
        self.saved, compiled.ENABLED = compiled.ENABLED, False

    def __exit__(self, *exc):
        compiled.ENABLED = self.saved


@settings(max_examples=60, deadline=None)
@given(B=st.integers(1, 5), n=st.integers(1, 40), m=st.integers(1, 45), d=st.integers(1, 3), p=st.integers(1, 4),
       shift=st.sampled_from(["none", "fixed"]), beta=st.floats(0.0, 900.0), tau=st.floats(-1.0, 1.0),
       seed=st.integers(0, 2 ** 16))
def test_fused_sums_agree_with_the_blocked_numpy_sums(B, n, m, d, p, shift, beta, tau, seed):
    """Same sums to (10 + max|L|)·1e-15 of each row's size (the exponentials differ by an ulp, the
    exponents L by their rounding), the same counts (τ away from every inner product), for any batch,
    sizes, dimension <= 3, values <= 4, β up to 900 (the clamp at e^-700 included)."""
    pytest.importorskip("numba")
    x, y = _sphere((B, n), d, seed), _sphere((B, m), d, seed + 1)
    F = np.random.default_rng(seed + 2).standard_normal((B, m, p))
    g = np.einsum("bid,bjd->bij", x, y)
    assume(np.abs(g - tau).min() > 1e-9)
    shift = "fixed" if beta > 300 else shift       # "none" would overflow (both passes give inf there)
    S, c, counts = kernel_sums(x, y, F, beta, shift=shift, count_at=tau)
    with _numpy_path():
        S0, c0, counts0 = kernel_sums(x, y, F, beta, shift=shift, count_at=tau)
    assert float(c) == float(c0)
    L = np.maximum(beta * g - float(c), -700.0)
    scale = np.exp(L) @ np.abs(F)                      # Σ_j |e^{L_ij} F_j|, row by row
    # the exponents themselves carry a rounding of their size: e^L to (10 + max|L|)·1e-15
    assert np.all(np.abs(S - S0) <= 1e-15 * (10 + np.abs(L).max()) * scale)
    np.testing.assert_array_equal(counts, counts0)
    np.testing.assert_array_equal(counts, (g >= tau).sum(-1))


@pytest.mark.parametrize("v", [None, -0.7])
@pytest.mark.parametrize("d", [1, 2, 3, 5])
def test_attention_sums_are_the_kernel_sums_of_the_weighted_values(d, v):
    """attention_sums(x, y, w) = kernel_sums(x, y, [v w_j y_j, w_j]) bit for bit, whichever pass runs
    (the values are formed inside the fused pass, by `weighted` otherwise)."""
    x, y = _sphere((6, 25), d, 30), _sphere((6, 33), d, 31)
    w = np.random.default_rng(32).random(33)
    F = compiled.weighted(y, w, v)
    for path in (contextlib.nullcontext, _numpy_path):
        with path():
            for beta, kw in ((3.0, {}), (500.0, {}), (3.0, {"count_at": 0.2})):
                got, want = attention_sums(x, y, w, beta, v=v, **kw), kernel_sums(x, y, F, beta, **kw)
                for a, b in zip(got, want):
                    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    with pytest.raises(ValueError, match="`w` must have shape"):
        attention_sums(x, y, w[:-1], 1.0)


def test_the_fused_pass_splits_rows_of_one_problem_among_threads_bit_for_bit(monkeypatch):
    """One problem of up to FUSED_ROWS rows is split by rows among the threads: the same bits."""
    pytest.importorskip("numba")
    monkeypatch.setattr(kernelsums, "_PARALLEL_MIN", 0)
    x = _sphere(kernelsums.FUSED_ROWS, 3, 33)
    w = np.random.default_rng(34).random(x.shape[0])
    one = attention_sums(x, x, w, 5.0, threads=1, count_at=0.9)
    for threads in (2, 3):
        for a, b in zip(attention_sums(x, x, w, 5.0, threads=threads, count_at=0.9), one):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.parametrize("strict", [False, True])
def test_masked_sums_split_their_rows_among_threads_bit_for_bit(strict):
    """A causal problem (any number of rows: masked sums take the fused pass) is shared among threads by
    rows, each part with the columns its rows see: the same bits on 1, 2 and 3 threads, and the sums of
    the definition Σ_{j<ends_i} w_j e^{β⟨x_i, x_j⟩ + b_j − a_i} [x_j, 1] to rounding."""
    pytest.importorskip("numba")
    n, beta = 1500, 3.0
    x = _sphere(n, 3, 35)
    w = np.random.default_rng(36).random(n)
    ends = np.arange(n) + (0 if strict else 1)
    s = 0.8 * np.arange(n) / n
    sums = [attention_sums(x, x, w, beta, shift="fixed", unit=True, ends=ends, bias=(s, s), threads=k)[0]
            for k in (1, 2, 3)]
    np.testing.assert_array_equal(sums[0], sums[1])
    np.testing.assert_array_equal(sums[0], sums[2])
    keep = np.arange(n)[None, :] < ends[:, None]
    E = np.where(keep, np.exp(beta * (x @ x.T) - beta + s[None, :] - s[:, None]), 0.0) * w
    want = np.concatenate([E @ x, E.sum(1, keepdims=True)], axis=1)
    assert np.all(np.abs(sums[0] - want) <= 1e-14 * E.sum(1, keepdims=True) + 1e-300)




@pytest.mark.parametrize("bias", [False, True])
def test_a_batch_of_masked_problems_each_with_its_own_mask_and_bias_gives_their_own_sums(bias, monkeypatch):
    """`masked_batch_sums`: K problems, each with its own ends and position bias, in one compiled call on
    one or two threads: row by row the bits of each problem's own `attention_sums`."""
    pytest.importorskip("numba")
    monkeypatch.setattr(kernelsums, "_PARALLEL_MIN", 0)
    K, r, m, beta = 5, 90, 70, 2.5
    rng = np.random.default_rng(37)
    x, y = _sphere(K * r, 3, 38).reshape(K, r, 3), _sphere(K * m, 3, 39).reshape(K, m, 3)
    w = rng.random((K, m))
    ends = np.sort(rng.integers(0, m + 1, (K, r)), axis=1)
    s = np.sort(rng.random((K, max(r, m))), axis=1)
    pair = (s[:, :r] + 1.0, s[:, :m]) if bias else None                # b_j <= a_i for every pair
    for threads in (1, 2):
        got = kernelsums.masked_batch_sums(x, y, w, beta, ends, pair, threads)
        for k in range(K):
            want, _ = attention_sums(x[k], y[k], w[k], beta, shift="fixed", unit=True, ends=ends[k], threads=1,
                                     bias=None if pair is None else (pair[0][k], pair[1][k]))
            np.testing.assert_array_equal(got[k], want)
@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded")
def test_a_forked_child_runs_the_fused_sums_on_its_own_thread():
    """GNU OpenMP terminates a child forked after the parent used its threads: the child runs the
    compiled pass on one thread instead, with the same bits."""
    pytest.importorskip("numba")
    x = _sphere((256, 32), 3, 35)
    w = np.full(32, 1 / 32)
    S = attention_sums(x, x, w, 2.0, threads=2, count_at=0.9)[0]      # the parent uses numba's threads
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_child_sums, args=(x, w, queue))
    child.start()
    got = queue.get(timeout=60)                 # before join: the child's queue flushes as it exits
    child.join(60)
    assert child.exitcode == 0
    np.testing.assert_array_equal(got, S)


def _child_sums(x, w, queue):
    queue.put(attention_sums(x, x, w, 2.0, threads=2, count_at=0.9)[0])
