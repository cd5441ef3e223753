"""Causal attention for particles (meanfield.transformer.masks, the masked kernel sums, solvers.Particles with a mask):
the kinetic paper's ALiBi particles, the first token, dense masked references, spectral bounds, Rényi
centres (docs/causal.md)."""
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy.integrate import solve_ivp

import meanfield as mf
import solvers
from meanfield.observables.diagnostics import count_clusters, expected_renyi_centres, renyi_centres
from meanfield.observables.energy import discrete_energy
from meanfield.sums.kernelsums import FUSED_ROWS, attention_sums, kernel_sums
from meanfield.transformer.masks import decayed_prefix, dense_mask, token_mask
from meanfield.sums.spectralsums import EPSILON, causal_zonal_sums, masked_error_bound, zonal_sums
from tolerances import assert_rounding_close, rounding

Particles = solvers.Particles


def _sphere(shape, d, seed):
    x = np.random.default_rng(seed).standard_normal(tuple(np.atleast_1d(shape)) + (d,))
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def _angles(x):
    return np.arctan2(x[..., 1], x[..., 0])


def _circle(theta):
    return np.stack([np.cos(theta), np.sin(theta)], -1)


# -- the kinetic paper's particles (Duerinckx, Geshkovski, Rossi), written from their formula ----------------
def _alibi_weights(n, lam):
    """w_jk = e^{−λ(j−k)/N} / Σ_{k'<j} e^{−λ(j−k')/N} for k < j, 0 otherwise (token 1: no interaction)."""
    j, k = np.arange(n)[:, None], np.arange(n)[None, :]
    W = np.where(k < j, np.exp(-(lam / n) * (j - k)), 0.0)
    total = W.sum(axis=1, keepdims=True)
    return W / np.where(total > 0, total, 1.0)


def _their_force(theta, beta, W):
    """θ_j' = Σ_{k<j} w_jk w_β'(θ_j − θ_k), w_β'(x) = −β sin x e^{β cos x}."""
    diff = theta[:, None] - theta[None, :]
    return np.sum(W * (-beta * np.sin(diff) * np.exp(beta * np.cos(diff))), axis=1)


def _their_rk4(theta, beta, lam, t_end, dt):
    W = _alibi_weights(theta.size, lam)
    for _ in range(int(round(t_end / dt))):
        k1 = _their_force(theta, beta, W)
        k2 = _their_force(theta + 0.5 * dt * k1, beta, W)
        k3 = _their_force(theta + 0.5 * dt * k2, beta, W)
        k4 = _their_force(theta + dt * k3, beta, W)
        theta = theta + dt / 6.0 * (k1 + 2.0 * k2 + 2.0 * k3 + k4)
    return theta


def _their_start(n, mode, seed=17):
    """Uniform angles from default_rng(17), or four Gaussian clusters (σ = 0.075) at linspace(0.1, 1.9, 4)·π."""
    rng = np.random.default_rng(seed)
    if mode == "uniform":
        return rng.uniform(0.0, 2.0 * math.pi, n)
    labels = np.repeat(np.arange(4), math.ceil(n / 4))[:n]
    return np.mod(np.linspace(0.1, 1.9, 4)[labels] * math.pi + rng.normal(0.0, 0.075, n), 2.0 * math.pi)


CASES = [(64, 1.0, "uniform")] + [pytest.param(n, lam, mode, marks=pytest.mark.slow)
                                   for n in (64, 48) for lam in (1.0, 3.0) for mode in ("uniform", "clusters")
                                   if (n, lam, mode) != (64, 1.0, "uniform")]


@pytest.mark.parametrize("n, lam, mode", CASES)
def test_kinetic_paper_alibi_particles(n, lam, mode):
    """Strictly causal (USA) with ALiBi slope λ, β = 1, their RK4 at dt = 0.0025 to τ = 10: our adaptive
    particles at t = βτ agree to 1e-7 in angle (measured 7e-10 at most over the eight cases)."""
    beta, tau = 1.0, 10.0
    theta0 = _their_start(n, mode)
    reference = _their_rk4(theta0, beta, lam, tau, 0.0025)
    model = mf.Model(beta=beta, dim=2, normalized=False, mask="causal-strict", position_bias=lam)
    sol = Particles(model, diagnostics="none").solve(_circle(theta0), [0.0, beta * tau], rtol=1e-12, atol=1e-14)
    ours = _angles(sol.positions[-1])
    assert np.max(np.abs(np.angle(np.exp(1j * (ours - reference))))) < 1e-7
    assert ours[0] == pytest.approx(_angles(_circle(theta0[:1]))[0], abs=1e-15)       # token 1 never moves


# -- the first token ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("normalized", [True, False])
def test_every_token_converges_to_the_first(normalized):
    """V = I, n = 32, d = 3, β = 1, Q, K = I + 0.2·N(0, 1) (‖QᵀK‖ about 1), mask "causal", 8 random starts:
    at t = 100 every token is within 1e-8 of x_1(0) (measured 1e-9; the first token moves by 1e-15)."""
    rng = np.random.default_rng(0)
    Q, K = np.eye(3) + 0.2 * rng.standard_normal((3, 3)), np.eye(3) + 0.2 * rng.standard_normal((3, 3))
    x0 = _sphere((8, 32), 3, 1)
    model = mf.Model(beta=1.0, dim=3, Q=Q, K=K, mask="causal", normalized=normalized)
    sol = Particles(model, diagnostics="none").solve(x0, [0.0, 100.0], rtol=1e-10, atol=1e-13)
    end = sol.positions[-1]
    assert np.max(np.linalg.norm(end - x0[:, :1], axis=-1)) < 1e-8
    # the first token attends to itself only: its velocity P_x x is rounding, accumulated over t = 100
    assert np.max(np.abs(end[:, 0] - x0[:, 0])) < rounding(1.0, terms=100)
    assert np.min(np.linalg.norm(x0 - x0[:, :1], axis=-1)[:, 1:]) > 0.05                # they did move


# -- the masked field against np.tril ------------------------------------------------------------------------
def _reference_field(x, beta, heads, mask, lam, normalized, w, positions=None, project=True):
    """(SA)/(USA) under the mask, with dense matrices: the masked ALiBi factors of `dense_mask` times w_k."""
    n = x.shape[-2]
    A = dense_mask(n, mask, lam, positions) * w[None, :]
    out = 0.0
    for Q, K, V in heads:
        E = A * np.exp(beta * (x @ Q.T) @ np.swapaxes(x @ K.T, -1, -2))
        den = E.sum(-1) if normalized else A.sum(-1)
        out = out + (E @ (x @ V.T)) / np.where(den > 0, den, 1.0)[..., None]
    return out - np.sum(out * x, -1, keepdims=True) * x if project else out


@given(n=st.integers(1, 160), mask=st.sampled_from(["causal", "causal-strict"]), lam=st.sampled_from([0.0, 1.0, 7.5]),
       beta=st.floats(-4.0, 6.0), normalized=st.booleans(), heads=st.integers(1, 2), batch=st.sampled_from([None, 3]),
       d=st.sampled_from([2, 3, 5]), seed=st.integers(0, 2 ** 20))
def test_masked_field_matches_dense_reference(n, mask, lam, beta, normalized, heads, batch, d, seed):
    """The triangle sums (fused pass for n <= 256, numpy blocks above) equal the np.tril reference to 1e-13
    of max|X|, for (SA)/(USA), general heads, batches, β of either sign, any weights."""
    rng = np.random.default_rng(seed)
    H = [(np.eye(d) + 0.3 * rng.standard_normal((d, d)), np.eye(d) + 0.3 * rng.standard_normal((d, d)),
          rng.standard_normal((d, d))) for _ in range(heads)]
    w = rng.random(n) + 0.01
    w /= w.sum()
    x = _sphere(n if batch is None else (batch, n), d, seed)
    model = mf.Model(beta=beta, dim=d, heads=H, mask=mask, position_bias=lam, normalized=normalized)
    ours = Particles(model, chunk=64).velocity(x, w)
    ref = _reference_field(x, beta, H, mask, lam, normalized, w)
    assert np.max(np.abs(ours - ref)) <= 1e-13 * max(np.max(np.abs(ref)), 1.0)
    if mask == "causal-strict":
        assert np.all(ours[..., 0, :] == 0.0)                                        # token 1 is silent


def test_tied_positions_and_weights_that_silence_a_token():
    """Tokens at equal positions see each other (both masks), the ALiBi factor uses the positions, and a
    token whose C(j) has no weight (w_1 = 0 under "causal") does not move."""
    rng = np.random.default_rng(5)
    x = _sphere(9, 3, 5)
    positions = np.array([0.05, 0.1, 0.1, 0.3, 0.3, 0.3, 0.8, 0.8, 1.0])
    w = rng.random(9)
    w[0] = 0.0
    w /= w.sum()
    for mask in ("causal", "causal-strict"):
        model = mf.Model(beta=1.5, dim=3, mask=mask, position_bias=2.0, normalized=False)
        ours = Particles(model).velocity(x, w, token_positions=positions)
        ref = _reference_field(x, 1.5, [(np.eye(3), np.eye(3), np.eye(3))], mask, 2.0, False, w, positions)
        assert_rounding_close(ours, ref, scale=np.exp(1.5), terms=9)           # 9 terms of size up to e^β
        assert np.all(ours[0] == 0.0)


@pytest.mark.parametrize("lam", [1e3, 3e4, 1e6, 1e300])
def test_a_steep_slope_attends_to_the_nearest_earlier_token(lam):
    """λ → ∞ (ALiBi): the weights e^{−λ(σ_j − σ_k)} over C(j), normalised, tend to the nearest visible token:
    token j itself under "causal" (no motion), token j − 1 under "causal-strict", whose (SA) field is
    P_{x_j} x_{j−1}, exactly at any slope (each row takes its own shift once its terms fall below the
    exponent floor; before, they were all clamped to one floor and D_j underflowed to 0, so the tokens
    stood still from λ/n ≈ 745 on). (USA) adds e^{β⟨x_j, x_{j−1}⟩}, to ε·λ in the exponent (λ <= 1e6)."""
    x = _sphere(24, 3, 2)
    still = Particles(mf.Model(beta=1.5, dim=3, mask="causal", position_bias=lam)).velocity(x)
    assert np.abs(still).max() <= rounding(1.0, terms=2)          # P_{x_j} x_j = 0 to rounding
    prev = x[:-1] - np.einsum("jd,jd->j", x[:-1], x[1:])[:, None] * x[1:]
    strict = Particles(mf.Model(beta=1.5, dim=3, mask="causal-strict", position_bias=lam)).velocity(x)
    assert np.all(strict[0] == 0.0)
    assert_rounding_close(strict[1:], prev, scale=1.0, terms=4)
    if lam > 1e6:                     # the spectral sums carry D_j, which underflows: "auto" sums directly
        many = _sphere(600, 2, 3)
        model = mf.Model(beta=1.5, dim=2, mask="causal-strict", position_bias=lam)
        field = Particles(model, sums="auto").velocity(many)
        near = many[:-1] - np.einsum("jd,jd->j", many[:-1], many[1:])[:, None] * many[1:]
        assert_rounding_close(field[1:], near, scale=1.0, terms=4)
        with pytest.raises(ValueError, match="`sums`"):
            Particles(model, sums="spectral").velocity(many)
    if lam <= 1e6:
        usa = Particles(mf.Model(beta=1.5, dim=3, mask="causal-strict", position_bias=lam, normalized=False)).velocity(x)
        want = np.exp(1.5 * np.einsum("jd,jd->j", x[:-1], x[1:]))[:, None] * prev
        assert np.abs(usa[1:] - want).max() < 1e-15 * lam * np.exp(1.5)


@given(n=st.integers(1, 700), m=st.integers(1, 700), chunk=st.sampled_from([7, 64, 512]),
       shift=st.sampled_from(["auto", "none", "fixed", "running"]), lam=st.floats(0.0, 50.0),
       strict=st.booleans(), seed=st.integers(0, 2 ** 20))
def test_staircase_kernel_sums_equal_np_tril(n, m, chunk, shift, lam, strict, seed):
    """`kernel_sums` with ``ends`` and ``bias`` against e^{L + b_j − a_i} masked with np.tril, to 1e-13 per row."""
    rng = np.random.default_rng(seed)
    x, y = _sphere(n, 3, seed), _sphere(m, 3, seed + 1)
    F = rng.standard_normal((m, 2))
    ends = np.minimum(np.arange(n) + 1 - strict, m)
    s = np.sort(rng.random(max(n, m)))
    a, b = lam * s[:n], lam * s[:m]
    S, c = kernel_sums(x, y, F, 2.0, shift=shift, chunk=chunk, ends=ends, bias=(a, b), unit=True)
    L = 2.0 * x @ y.T + b[None, :] - a[:, None]
    keep = np.tril(np.ones((n, m), dtype=bool), k=-1 if strict else 0)
    ref = np.where(keep, np.exp(L), 0.0) @ F
    size = np.where(keep, np.exp(L), 0.0) @ np.abs(F)
    got = S * np.exp(np.asarray(c))[..., None] if np.ndim(c) else S * np.exp(c)
    assert np.all(np.abs(got - ref) <= 1e-13 * size + 1e-300)


@pytest.mark.parametrize("n", [40, 600])
def test_full_ends_and_zero_bias_give_todays_sums_bit_for_bit(n):
    """A mask that lets every row see every column, with a zero bias, is today's sum: the same bits where
    both take the fused pass (n <= FUSED_ROWS). Masked sums take the fused pass at any size, unmasked ones
    above FUSED_ROWS rows the numpy blocks: there they agree to the passes' rounding, (10 + max|L|)·1e-15
    of each row's size (tests/test_kernelsums.py)."""
    x = _sphere((2, n), 3, 3)
    w = np.random.default_rng(3).random(n)
    full = np.full(n, n)
    for shift in ("none", "fixed"):
        today = attention_sums(x, x, w, 3.0, shift=shift, unit=True)
        masked = attention_sums(x, x, w, 3.0, shift=shift, unit=True, ends=full, bias=(np.zeros(n), np.zeros(n)))
        if n <= FUSED_ROWS:
            assert np.array_equal(today[0], masked[0])
        else:
            size = today[0][..., -1:]                                          # Σ_j w_j e^{L_ij}, the row's size
            assert np.all(np.abs(masked[0] - today[0]) <= 1e-15 * (10 + 6.0) * size)
            assert not np.array_equal(today[0], masked[0])                    # the two passes did run


# -- the spectral masked sums ----------------------------------------------------------------------------
@given(n=st.integers(2, 600), lam=st.floats(0.0, 40.0), beta=st.floats(0.0, 12.0), d=st.sampled_from([2, 3]),
       mask=st.sampled_from(["causal", "causal-strict"]), block=st.sampled_from([None, 37]),
       batch=st.sampled_from([None, 2]), seed=st.integers(0, 2 ** 20))
def test_spectral_masked_sums_within_the_stated_bound(n, lam, beta, d, mask, block, batch, seed):
    """Blocks of positions with running coefficients: the (SA) field at every token errs by at most the
    bound of `masked_error_bound` times the field's scale (as for the unmasked spectral sums)."""
    rng = np.random.default_rng(seed)
    x = _sphere(n if batch is None else (batch, n), d, seed)
    w = rng.random(n) ** 2 + 1e-3
    w /= w.sum()
    causal = token_mask(mask, lam, w)
    sums = zonal_sums(beta, d, EPSILON)
    Zs, G = causal_zonal_sums(sums, x, w, causal.ends, causal.positions, lam, block)
    ref = _reference_field(x, beta, [(np.eye(d),) * 3], mask, lam, True, w)
    live = ~causal.silent
    ours = G[..., live, :] / Zs[..., live, None]
    bound = masked_error_bound(w, beta, causal.normaliser, causal.includes_self)
    assert np.max(np.abs(ours - ref[..., live, :])) <= 10 * bound * (np.max(np.abs(ref)) + 1.0)
    assert np.all(Zs[..., ~live] == 0.0)


@pytest.mark.parametrize("d", [2, 3])
@pytest.mark.parametrize("mask", ["causal", "causal-strict"])
def test_masked_spectral_sums_with_and_without_numba_agree(d, mask, monkeypatch):
    """The compiled passes over runs of blocks (`_causal_circle`, `_causal_sphere`) against the block-by-block
    path without numba (`attention_sums` and ducc0 per block): the same sums within the transforms' error
    ε·Σ_j w_j = ε (`masked_error_bound`; on S^1 one side sums by recurrence, exact to round-off), with ties in
    position (2400 tokens in blocks of 256, β = 3, λ = 1.5, 1 and 2 threads)."""
    from meanfield.sums import compiled
    rng = np.random.default_rng(4)
    x = _sphere(2400, d, 5)
    w = rng.random(2400) + 0.5
    w /= w.sum()
    causal = token_mask(mask, 1.5, w)
    sums = zonal_sums(3.0, d, EPSILON)
    fast = [causal_zonal_sums(sums, x, w, causal.ends, causal.positions, 1.5, 256, threads) for threads in (1, 2)]
    monkeypatch.setattr(compiled, "ENABLED", False)
    slow = causal_zonal_sums(sums, x, w, causal.ends, causal.positions, 1.5, 256)
    for Zs, G in fast:
        assert np.max(np.abs(Zs - slow[0])) <= EPSILON
        assert np.max(np.abs(G - slow[1])) <= EPSILON
    assert all(np.array_equal(a, b) for a, b in zip(*fast))


@pytest.mark.parametrize("d", [2, 3])
@pytest.mark.parametrize("normalized", [True, False])
def test_auto_takes_the_masked_spectral_sums_at_large_n(d, normalized):
    """n = 6000 tokens, β = 3, λ = 2: sums="auto" goes spectral with a bound below 1e-8, and the field
    equals the direct triangle sums to 1e-10 of its size."""
    x = _sphere(6000, d, 11)
    model = mf.Model(beta=3.0, dim=d, mask="causal", position_bias=2.0, normalized=normalized)
    sol = Particles(model, diagnostics="none").solve(x, [0.0, 1e-3])
    assert sol.stats["sums"] == "spectral" and sol.stats["sums_error_bound"] < 1e-8
    spectral = Particles(model, sums="spectral").velocity(x)
    direct = Particles(model, sums="direct").velocity(x)
    assert np.max(np.abs(spectral - direct)) <= 1e-10 * np.max(np.abs(direct))


def test_decayed_prefix_over_many_blocks():
    """P_j = Σ_{k<=j} w_k e^{−λ(σ_j−σ_k)} at λ = 5000 (167 blocks of λΔσ <= 30) against the dense sum in logs."""
    rng = np.random.default_rng(2)
    s = np.sort(rng.random(400))
    w = rng.random(400)
    P = decayed_prefix(w, s, 5000.0)
    dense = w[None, :] * np.exp(-5000.0 * np.clip(s[:, None] - s[None, :], 0.0, None)) * (s[None, :] <= s[:, None])
    assert np.allclose(P, dense.sum(1), rtol=1e-13, atol=0)


# -- time stepping: euler-normalize, noise, R^d, diagnostics ------------------------------------------------
def test_euler_normalize_is_the_authors_step_under_the_mask():
    """scheme="euler-normalize": x ← N(x + h Σ_k A_jk V x_k) with the masked (SA) weights, 200 steps, to 1e-13."""
    x0 = _sphere((2, 20), 3, 4)
    model = mf.Model(beta=2.0, dim=3, V=-0.5, mask="causal", position_bias=1.5)
    h, steps = 0.01, 200
    sol = Particles(model, diagnostics="none").solve(x0, [0.0, h * steps], scheme="euler-normalize", dt=h)
    x = x0.copy()
    w = np.full(20, 1 / 20)
    for _ in range(steps):
        f = _reference_field(x, 2.0, [(np.eye(3), np.eye(3), -0.5 * np.eye(3))], "causal", 1.5, True, w, project=False)
        x = x + h * f
        x /= np.linalg.norm(x, axis=-1, keepdims=True)
    assert np.max(np.abs(sol.positions[-1] - x)) < 1e-13


def test_euclidean_masked_particles_follow_the_formula():
    """domain="euclidean": ẋ_j = Σ_{k≤j} A_jk V x_k (no projection), against solve_ivp of the dense formula."""
    rng = np.random.default_rng(6)
    x0 = rng.standard_normal((12, 2))
    V = np.array([[0.0, -1.0], [1.0, -0.2]])
    model = mf.Model(beta=0.7, dim=2, V=V, mask="causal", position_bias=1.0)
    sol = Particles(model, diagnostics="none").solve(x0, [0.0, 1.5], domain="euclidean", rtol=1e-11, atol=1e-12)
    w = np.full(12, 1 / 12)

    def rhs(t, y):
        return _reference_field(y.reshape(12, 2), 0.7, [(np.eye(2), np.eye(2), V)], "causal", 1.0, True, w,
                                project=False).ravel()

    ref = solve_ivp(rhs, (0.0, 1.5), x0.ravel(), rtol=1e-12, atol=1e-12, method="DOP853").y[:, -1].reshape(12, 2)
    assert np.max(np.abs(sol.positions[-1] - ref)) < 1e-8


def test_the_silent_token_diffuses_as_brownian_motion():
    """With noise ν, the first token under "causal-strict" has no drift: E⟨x_1(t), x_1(0)⟩ = r(h)^N with
    r(h) = E(1 + 2νhχ²_{d−1})^{−1/2} per step (the Euler–Maruyama step, docs/mathematics.md §6), which is
    e^{−ν(d−1)t} up to O(h); 4000 realisations, within 5 standard errors."""
    d, nu, h, steps, B = 3, 0.5, 0.01, 100, 4000
    x0 = np.broadcast_to(_sphere(5, d, 8), (B, 5, d)).copy()
    model = mf.Model(beta=1.0, dim=d, noise=nu, mask="causal-strict", position_bias=1.0)
    sol = Particles(model, diagnostics="none").solve(x0, [0.0, h * steps], dt=h, rng=1)
    c = np.sum(sol.positions[-1][:, 0] * x0[:, 0], -1)
    chi = np.random.default_rng(0).chisquare(d - 1, 2_000_000)
    r = np.mean((1.0 + 2.0 * nu * h * chi) ** -0.5)
    assert abs(c.mean() - r ** steps) < 5 * c.std() / np.sqrt(B)
    assert abs(r ** steps - np.exp(-nu * (d - 1) * h * steps)) < 0.01


def test_energy_of_a_masked_run_is_the_unmasked_energy_of_the_configuration():
    """The recorded energy is (3.5) of the positions (the mask does not enter it; it is not monotone)."""
    x0 = _sphere(40, 3, 9)
    model = mf.Model(beta=2.0, dim=3, mask="causal", position_bias=1.0)
    sol = Particles(model, diagnostics="full").solve(x0, [0.0, 1.0, 2.0])
    w = np.full(40, 1 / 40)
    assert np.allclose(sol.energy, [discrete_energy(2.0, p, w) for p in sol.positions], rtol=1e-13)


# -- bad input ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs, name", [
    (dict(token_positions=np.linspace(1.0, 0.1, 10)), "token_positions"),
    (dict(token_positions=np.linspace(0.1, 1.0, 9)), "token_positions"),
    (dict(token_positions=np.linspace(0.0, 1.0, 10)), "token_positions"),
    (dict(token_positions=np.full(10, np.nan)), "token_positions"),
    (dict(weights=np.full(9, 1 / 9)), "weights"),
    (dict(weights=-np.full(10, 0.1)), "weights"),
])
def test_bad_input_to_a_masked_run(kwargs, name):
    model = mf.Model(beta=1.0, dim=3, mask="causal", position_bias=1.0)
    with pytest.raises(ValueError, match=f"`{name}`"):
        Particles(model).solve(_sphere(10, 3, 0), [0.0, 1.0], **kwargs)


def test_bad_input_names_the_argument():
    x = _sphere(10, 3, 0)
    with pytest.raises(ValueError, match="`token_positions`"):
        Particles(mf.Model(beta=1.0, dim=3)).solve(x, [0.0, 1.0], token_positions=np.linspace(0.1, 1, 10))
    with pytest.raises(ValueError, match="`sums`"):
        Particles(mf.Model(beta=1.0, dim=4, mask="causal"), sums="spectral")
    with pytest.raises(ValueError, match="`ends`"):
        kernel_sums(x, x, np.ones((10, 1)), 1.0, ends=np.arange(10)[::-1])
    with pytest.raises(ValueError, match="`ends`"):
        kernel_sums(x, x, np.ones((10, 1)), 1.0, ends=np.arange(10) + 2)
    with pytest.raises(ValueError, match="`bias`"):
        kernel_sums(x, x, np.ones((10, 1)), 1.0, bias=(np.zeros(10), np.zeros(9)))
    with pytest.raises(ValueError, match="`count_at`"):
        kernel_sums(x, x, np.ones((10, 1)), 1.0, ends=np.arange(10) + 1, count_at=0.5)
    with pytest.raises(ValueError, match="`delta`"):
        renyi_centres(x, 4.0)


@pytest.mark.parametrize("n", [100, 600])
def test_masked_sums_do_not_depend_on_the_threads(n):
    """8 realisations under a causal mask with ALiBi: the same bits on one thread and on two (the fused
    pass shares the realisations, the numpy blocks share the row blocks)."""
    x = _sphere((8, n), 3, 12)
    w = np.random.default_rng(12).random(n)
    causal = token_mask("causal", 2.0, w)
    one, two = (attention_sums(x, x, w, 4.0, unit=True, ends=causal.ends, bias=causal.bias, threads=k)[0]
                for k in (1, 2))
    assert np.array_equal(one, two)


# -- Rényi centres -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("d, delta, limit", [(2, 0.2, math.pi / 0.2), (3, 0.5, 1.0 / math.sin(0.25) ** 2)])
def test_renyi_count_of_uniform_tokens(d, delta, limit):
    """E[#centres] = (1 − (1 − p)^n)/p for iid uniform tokens (p the cap fraction): π/δ on S^1 and
    1/sin²(δ/2) on S^2 at n = 400 (the finite-n correction is below 1e-10); 2000 clouds, within 5 standard errors."""
    x = _sphere((2000, 400), d, d)
    count = renyi_centres(x, delta).sum(-1)
    expected = expected_renyi_centres(400, delta, d)
    assert expected == pytest.approx(limit, rel=1e-10)
    assert abs(count.mean() - expected) < 5 * count.std() / np.sqrt(2000)


def test_renyi_centres_by_hand():
    """Angles 0, 0.1, 1, 1.05, 3: δ = 0.5 leaves 0, 1, 3; δ = 0.04 all five; δ = 1.5 leaves 0 and 3."""
    x = _circle(np.array([0.0, 0.1, 1.0, 1.05, 3.0]))
    assert renyi_centres(x, 0.5).tolist() == [True, False, True, False, True]
    assert renyi_centres(x, 0.04).all()
    assert renyi_centres(x, 1.5).tolist() == [True, False, False, False, True]
    assert renyi_centres(np.stack([x, x[::-1]]), 0.5).sum(-1).tolist() == [3, 3]


@pytest.mark.slow
def test_metastable_clusters_match_the_renyi_count():
    """n = 200 on S^1, β = 64, Q = K = V = I, (SA), mask "causal" (Karagodin–Polyanskiy–Rigollet's setting):
    at t = 1000 the number of clusters is within 1 of the number of Rényi centres at δ = 4β^{−1/2} for each
    of 8 uniform starts (measured: equal for 5, one more or less for 3)."""
    beta = 64.0
    theta = np.random.default_rng(0).uniform(0, 2 * np.pi, (8, 200))
    x0 = _circle(theta)
    model = mf.Model(beta=beta, dim=2, mask="causal")
    sol = Particles(model, diagnostics="none").solve(x0, [0.0, 1000.0], rtol=1e-8)
    clusters = count_clusters(sol.positions[-1], 1e-3)
    centres = renyi_centres(x0, 4.0 / math.sqrt(beta)).sum(-1)
    assert np.max(np.abs(clusters - centres)) <= 1
    assert np.mean(clusters == centres) >= 0.5
