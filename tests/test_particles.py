"""solvers.Particles against exact solutions, identities and direct formulas (docs/mathematics.md §1, §4, §6, §7)."""
import numpy as np
import pytest
from scipy.integrate import solve_ivp
from scipy.linalg import expm
from scipy.sparse.csgraph import connected_components
from scipy.special import logsumexp

import meanfield as mf
import solvers
from meanfield.observables.diagnostics import clustered_pair_fraction, count_clusters, w1_to_nearest_dirac
from tolerances import assert_rounding_close, rounding

Particles = solvers.Particles


def _sphere(shape, d, seed):
    x = np.random.default_rng(seed).standard_normal(tuple(np.atleast_1d(shape)) + (d,))
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def _proj(x, y):
    return y - np.sum(x * y, -1, keepdims=True) * x


def _direct_field(model, x, w):
    """(2.3)/(2.7)/(3.2), weighted (docs/mathematics.md §1), straight from the formula (log-space weights)."""
    out = 0
    for Q, K, V in model.heads:
        L = model.beta * (x @ Q.T) @ (x @ K.T).T + np.log(w)[None, :]
        if model.normalized:
            A = np.exp(L - logsumexp(L, axis=1, keepdims=True))
        else:
            A = np.exp(L)
        out = out + A @ (x @ V.T)
    return _proj(x, out)


# -- the vector field -------------------------------------------------------------------------------------
@pytest.mark.parametrize("normalized", [True, False])
def test_general_QKV_multihead_weighted_field_matches_formula(normalized):
    rng = np.random.default_rng(0)
    d, n = 4, 23
    x = _sphere(n, d, 1)
    w = rng.random(n)
    w /= w.sum()
    heads = [(rng.standard_normal((2, d)), rng.standard_normal((2, d)), rng.standard_normal((d, d))),
             (rng.standard_normal((5, d)), rng.standard_normal((5, d)), 0.5 * np.eye(d))]
    for model in (mf.Model(beta=1.3, dim=d, normalized=normalized, Q=heads[0][0], K=heads[0][1], V=heads[0][2]),
                  mf.Model(beta=0.7, dim=d, normalized=normalized, heads=heads)):
        ref = _direct_field(model, x, w)
        for chunk in (1024, 5):
            v = Particles(model, chunk=chunk).velocity(x, w)
            assert np.max(np.abs(v - ref)) < 1e-13 * max(1.0, np.max(np.abs(ref)))
        # batches: one vectorised evaluation equals the realisations one by one
        xb = _sphere((10, n), d, 2)
        for chunk in (7, 4, 1024):      # blocks; blocks with batch slices; one block
            vb = Particles(model, chunk=chunk).velocity(xb, w)
            for b in range(10):
                assert np.allclose(vb[b], _direct_field(model, xb[b], w), rtol=0, atol=1e-13)


def test_equal_weights_reproduce_SA_and_USA():
    x = _sphere(30, 3, 3)
    G = np.exp(2.0 * x @ x.T)
    sa = _proj(x, (G / G.sum(1, keepdims=True)) @ x)
    usa = _proj(x, G @ x / 30)
    # sums of 30 terms: up to |x_j| = 1 for (SA)'s quotient, up to e^β for (USA)'s
    assert_rounding_close(Particles(mf.Model(beta=2.0, dim=3)).velocity(x), sa, scale=1.0, terms=30)
    assert_rounding_close(Particles(mf.Model(beta=2.0, dim=3, normalized=False)).velocity(x), usa,
                          scale=np.exp(2.0), terms=30)


def test_large_beta_is_safe():
    x = _sphere(40, 3, 4)
    # (SA) β = 1000: log-sum-exp softmax, finite and equal to the log-space formula
    m = mf.Model(beta=1000.0, dim=3)
    v = Particles(m, chunk=16).velocity(x)
    assert np.all(np.isfinite(v)) and np.allclose(v, _direct_field(m, x, np.full(40, 1 / 40)), rtol=0, atol=1e-13)
    # (USA) β = 500: exact rescaling e^β e^{β(⟨x,y⟩-1)}; direct e^{β⟨x,y⟩} still fits in float64 here
    m = mf.Model(beta=500.0, dim=3, normalized=False)
    v = Particles(m, chunk=16).velocity(x)
    ref = _direct_field(m, x, np.full(40, 1 / 40))
    assert np.max(np.abs(v - ref)) <= 1e-13 * np.max(np.abs(ref))
    # (USA) β = 1000 does not fit: a clear error, or the rescaled time τ = e^β t
    m = mf.Model(beta=1000.0, dim=3, normalized=False)
    with pytest.raises(ValueError, match="rescale_time"):
        Particles(m).solve(x, [0.0, 1.0], progress=False)
    sol = Particles(m).solve(x, [0.0, 1e-3], rescale_time=True, progress=False)
    G = x @ x.T
    ref = _proj(x, np.exp(1000.0 * (G - 1.0)) @ x / 40)               # e^{-β} X^U
    assert np.all(np.isfinite(sol.positions))
    assert np.allclose(Particles(m).velocity(x, rescale_time=True), ref, rtol=0, atol=1e-15)
    # general M with β‖M‖ > 300: running log-sum-exp
    Q = np.diag([1.0, 2.0, 0.5])
    m = mf.Model(beta=400.0, dim=3, Q=Q)
    assert np.allclose(Particles(m, chunk=9).velocity(x), _direct_field(m, x, np.full(40, 1 / 40)), rtol=0, atol=1e-12)
    xb = _sphere((5, 40), 3, 24)
    vb = Particles(m, chunk=9).velocity(xb)
    for b in range(5):
        assert np.allclose(vb[b], _direct_field(m, xb[b], np.full(40, 1 / 40)), rtol=0, atol=1e-12)


# -- exact solutions --------------------------------------------------------------------------------------
@pytest.mark.parametrize("normalized", [True, False])
@pytest.mark.parametrize("beta", [0.0, 1.0, 4.0])
def test_equiangular_reduction(normalized, beta):
    """Theorem 6.8 (docs/mathematics.md §7): n orthonormal points stay equiangular, ⟨x1,x2⟩ solves (6.9)/(6.10)."""
    n = 4
    t = np.linspace(0.0, 3.0, 7)
    sol = Particles(mf.Model(beta=beta, dim=n, normalized=normalized)).solve(np.eye(n), t, rtol=1e-12,
                                                                             atol=1e-14, progress=False)
    x = sol.positions
    g = np.einsum("tid,tjd->tij", x, x)[:, ~np.eye(n, dtype=bool)]
    if normalized:
        f = lambda s, y: 2 * np.exp(beta * y) * (1 - y) * ((n - 1) * y + 1) / (np.exp(beta) + (n - 1) * np.exp(beta * y))  # noqa: E731
    else:
        f = lambda s, y: 2 / n * np.exp(beta * y) * (1 - y) * ((n - 1) * y + 1)  # noqa: E731
    gamma = solve_ivp(f, (0, 3), [0.0], t_eval=t, rtol=1e-12, atol=1e-14, method="DOP853").y[0]
    assert np.max(np.abs(g - gamma[:, None])) < 1e-8
    if beta == 0.0:   # closed form γ_0 = (e^{2t} − 1)/(e^{2t} + n − 1)
        assert np.max(np.abs(gamma - (np.exp(2 * t) - 1) / (np.exp(2 * t) + n - 1))) < 1e-10


def test_beta_zero_is_gradient_ascent_and_collapses_exponentially():
    """β = 0 (4.1): X = P_x(mean) = P_x ∇_{x_i}E_0 / w_i; a hemisphere collapses with diameter ~ e^{-t}."""
    rng = np.random.default_rng(5)
    x = _sphere(12, 3, 5)
    w = rng.random(12)
    w /= w.sum()
    for normalized in (True, False):
        v = Particles(mf.Model(beta=0.0, dim=3, normalized=normalized)).velocity(x, w)
        assert np.allclose(v, _proj(x, np.broadcast_to(w @ x, x.shape)), rtol=0, atol=1e-15)
    # random start in the open hemisphere ⟨x, e3⟩ > 0 (Lemma 6.4)
    x0 = _sphere(10, 3, 6)
    x0[:, 2] = np.abs(x0[:, 2]) + 0.05
    x0 /= np.linalg.norm(x0, axis=1, keepdims=True)
    t = np.linspace(0, 20, 41)
    sol = Particles(mf.Model(beta=0.0, dim=3)).solve(x0, t, rtol=1e-11, atol=1e-14, progress=False)
    x = sol.positions
    diam = np.linalg.norm(x[:, :, None] - x[:, None, :], axis=-1).max(axis=(1, 2))
    assert np.all(np.diff(diam) < 0)
    late = t >= 10
    rate = -np.polyfit(t[late], np.log(diam[late]), 1)[0]
    assert rate == pytest.approx(1.0, abs=1e-3)        # linearisation at consensus: rate |mean| -> 1
    assert sol.diagnostics["clusters"][-1] == 1 and sol.diagnostics["clustered_fraction"][-1] == 1.0
    assert sol.diagnostics["w1_to_dirac"][-1] < 1e-7


@pytest.mark.parametrize("normalized", [True, False])
@pytest.mark.parametrize("v", [1.0, -1.0])
def test_energy_monotone_on_50_starts(normalized, v):
    """(3.6), Lemma 3.7: E_β non-decreasing for V = I, non-increasing for V = −I (50 starts in one batch)."""
    x0 = _sphere((50, 8), 3, 7)
    sol = Particles(mf.Model(beta=2.0, dim=3, normalized=normalized, V=v)).solve(
        x0, np.linspace(0, 3, 13), rtol=1e-9, atol=1e-12, progress=False)
    E = sol.energy
    assert E.shape == (13, 50)
    dE = np.diff(E, axis=0) * v
    assert np.all(dE >= -1e-12 * np.abs(E[1:]))
    assert np.all(dE[0] > 0)


@pytest.mark.parametrize("normalized", [True, False])
@pytest.mark.parametrize("v", [1.0, -1.0])
def test_energy_identity(normalized, v):
    """(3.6), Lemma 3.7 with weights (mathematics §4): dE/dt = s Σ w_i Z_i |ẋ_i|² (SA), s Σ w_i |ẋ_i|² (USA), Z_i = Σ_j w_j e^{β⟨x_i,x_j⟩}."""
    rng = np.random.default_rng(8)
    n, B, beta, t0, h = 15, 50, 1.5, 0.5, 0.01
    x0 = _sphere((B, n), 3, 9)
    w = rng.random(n) + 0.5
    w /= w.sum()
    model = mf.Model(beta=beta, dim=3, normalized=normalized, V=v)
    P = Particles(model)
    t = np.array([0.0, t0 - 2 * h, t0 - h, t0, t0 + h, t0 + 2 * h])
    sol = P.solve(x0, t, weights=w, rtol=1e-13, atol=1e-15, progress=False)
    E = sol.energy                                                    # (6, B): 50 starts at once
    numeric = (E[1] - 8 * E[2] + 8 * E[4] - E[5]) / (12 * h)
    x = sol.positions[3]
    xdot = P.velocity(x, w)
    G = np.exp(beta * x @ np.swapaxes(x, 1, 2))
    Z = G @ w
    speed2 = np.sum(xdot ** 2, -1)
    identity = v * ((Z * speed2) @ w if normalized else speed2 @ w)
    assert np.max(np.abs(numeric / identity - 1)) < 1e-6
    # the exact chain rule Σ_i ∇_{x_i}E · ẋ_i agrees to round-off
    chain = np.einsum("i,bid,bid->b", w, (G * w) @ x, xdot)
    assert np.max(np.abs(chain / identity - 1)) < 1e-12


# -- symmetries -------------------------------------------------------------------------------------------
def test_permutation_and_rotation_equivariance():
    x0 = _sphere(16, 3, 10)
    perm = np.random.default_rng(11).permutation(16)
    U = np.linalg.qr(np.random.default_rng(12).standard_normal((3, 3)))[0]
    t = np.linspace(0, 2, 5)
    for normalized in (True, False):
        model = mf.Model(beta=3.0, dim=3, normalized=normalized)
        P = Particles(model)
        v = P.velocity(x0)
        assert np.allclose(P.velocity(x0[perm]), v[perm], rtol=0, atol=1e-15)
        assert np.allclose(P.velocity(x0 @ U.T), v @ U.T, rtol=0, atol=1e-14)
        a = P.solve(x0, t, scheme="euler-normalize", dt=0.05, progress=False).positions
        b = P.solve(x0[perm], t, scheme="euler-normalize", dt=0.05, progress=False).positions
        c = P.solve(x0 @ U.T, t, scheme="euler-normalize", dt=0.05, progress=False).positions
        assert np.max(np.abs(b - a[:, perm])) < 1e-13
        assert np.max(np.abs(c - a @ U.T)) < 1e-13
        a = P.solve(x0, t, progress=False).positions
        b = P.solve(x0[perm], t, progress=False).positions
        assert np.max(np.abs(b - a[:, perm])) < 1e-13


@pytest.mark.parametrize("n,products", [(4, [-1 / 3]), (6, [-1.0, 0.0])])
def test_repulsive_usa_reaches_tetrahedron_and_octahedron(n, products):
    """V = −I (USA) on S^2: the universally optimal configurations (Section 9.1, Theorem 9.2)."""
    x0 = _sphere(n, 3, 13)
    sol = Particles(mf.Model(beta=3.0, dim=3, normalized=False, V=-1.0)).solve(x0, [0.0, 40.0], rtol=1e-10,
                                                                               atol=1e-12, progress=False)
    x = sol.positions[-1]
    g = (x @ x.T)[~np.eye(n, dtype=bool)]
    dist = np.min(np.abs(g[:, None] - np.array(products)[None, :]), axis=1)
    assert np.max(dist) < 1e-9
    assert np.all(np.diff(sol.energy) < 0)


def test_euler_normalize_is_the_authors_step():
    """x ← (x + dt·softmax(βxxᵀ)xVᵀ... ) / |·|: one step, re-implemented directly (docs/mathematics.md §1)."""
    x0 = _sphere(20, 3, 14)
    for normalized in (True, False):
        sol = Particles(mf.Model(beta=2.5, dim=3, normalized=normalized)).solve(
            x0, [0.0, 0.1], scheme="euler-normalize", dt=0.1, progress=False)
        S = np.exp(2.5 * x0 @ x0.T)
        S = S / S.sum(1, keepdims=True) if normalized else S / 20
        y = x0 + 0.1 * (S @ x0)
        y /= np.linalg.norm(y, axis=1, keepdims=True)
        assert_rounding_close(sol.positions[-1], y, scale=1.0, terms=20)      # one step: a 20-term sum, normalised
        assert sol.stats["nsteps"] == 1


# -- noise ------------------------------------------------------------------------------------------------
def _normalised_step_factor(nu, h, d):
    """r(h) = E[(1 + 2νh·χ²_{d−1})^{−1/2}]: one step x ← N(x + sqrt(2νh) P_xξ) maps E⟨x, x0⟩ to r(h)·E⟨x, x0⟩
    exactly (the odd part ⟨P_xξ, x0⟩ averages out), so E⟨x_k, x0⟩ = r(h)^k."""
    from scipy.integrate import quad
    from scipy.stats import chi2

    return quad(lambda q: chi2.pdf(q, d - 1) / np.sqrt(1 + 2 * nu * h * q), 0, np.inf, epsabs=1e-14, epsrel=1e-13)[0]


@pytest.mark.parametrize("d", [2, 3])
def test_noise_is_brownian_motion_on_the_sphere(d):
    """Pure noise (V = 0): E⟨x(t), x(0)⟩ = e^{−ν(d−1)t} for Brownian motion with generator νΔ (docs/mathematics.md §6).

    The scheme's exact discrete law gives E⟨x_k, x0⟩ = r(h)^k (see `_normalised_step_factor`):
    the simulation matches it within Monte Carlo error, and r(h)^{t/h} -> e^{−ν(d−1)t} at order 1
    in h — the normalisation supplies the Itô drift −ν(d−1)x of the Stratonovich SDE."""
    nu, B, h = 0.3, 40000, 0.01
    x0 = _sphere((B, 1), d, 15)
    t = np.array([0.0, 0.5, 1.5])
    sol = Particles(mf.Model(beta=1.0, dim=d, V=0.0, noise=nu), diagnostics="none").solve(
        x0, t, rng=1, dt=h, progress=False)
    c = np.einsum("tbid,bid->tb", sol.positions, x0)
    r = _normalised_step_factor(nu, h, d)
    for k in (1, 2):
        discrete = r ** round(t[k] / h)
        se = np.std(c[k]) / np.sqrt(B)
        assert abs(c[k].mean() - discrete) < 4.5 * se, (t[k], c[k].mean(), discrete, se)
    # weak order 1 towards the continuous law
    errs = [abs(_normalised_step_factor(nu, hh, d) ** round(1.5 / hh) - np.exp(-nu * (d - 1) * 1.5))
            for hh in (0.01, 0.005)]
    assert errs[0] / errs[1] == pytest.approx(2.0, rel=0.02) and errs[0] < 0.01
    # seeded: reproducible
    model = mf.Model(beta=1.0, dim=d, V=0.0, noise=nu)
    a, b = (Particles(model, diagnostics="none").solve(x0[:10], t, rng=1, dt=h, progress=False) for _ in range(2))
    assert np.array_equal(a.positions, b.positions)


# -- R^d (Section 9.2, the companion paper; docs/mathematics.md §1) -------------------------------------
def test_euclidean_rescaled_form_is_exact():
    """z = e^{−tV}x solves (9.2)–(9.3): both integrations agree, x(t) = e^{tV} z(t)."""
    rng = np.random.default_rng(16)
    d, n = 3, 7
    V = np.eye(d) + 0.3 * rng.standard_normal((d, d))
    Q, K = rng.standard_normal((2, d)), rng.standard_normal((2, d))
    x0 = rng.standard_normal((n, d))
    t = np.linspace(0, 1.5, 4)
    model = mf.Model(beta=0.8, dim=d, Q=Q, K=K, V=V)
    a = Particles(model).solve(x0, t, domain="euclidean", rtol=1e-12, atol=1e-13, progress=False)
    b = Particles(model).solve(x0, t, domain="euclidean", rescaled=True, rtol=1e-12, atol=1e-13, progress=False)
    for i, ti in enumerate(t):
        assert np.allclose(a.positions[i], b.positions[i] @ expm(ti * V).T, rtol=1e-9, atol=1e-9)
    assert np.all(np.isnan(a.energy))
    # the unprojected field is Σ_j P_ij V x_j
    run = Particles(model).start(x0, domain="euclidean")      # the run carries domain and weights
    L = 0.8 * (x0 @ Q.T) @ (x0 @ K.T).T
    A = np.exp(L - logsumexp(L, 1, keepdims=True))
    assert np.allclose(run.rhs(0.0, x0), A @ x0 @ V.T, rtol=0, atol=1e-13)


def test_euclidean_V_identity_clusters_in_a_shrinking_hull():
    """Companion paper, Thm 3.1 (V = I, QᵀK ≻ 0): z_i stay in the hull of z(0) (max |z_i| non-increasing), settle
    (ż -> 0) on far fewer points than n."""
    rng = np.random.default_rng(17)
    n, d = 20, 2
    x0 = rng.standard_normal((n, d))
    t = np.linspace(0, 12, 25)
    sol = Particles(mf.Model(beta=1.0, dim=d)).solve(x0, t, domain="euclidean", rescaled=True, rtol=1e-9,
                                                      atol=1e-11, progress=False)
    z = sol.positions
    r = np.linalg.norm(z, axis=-1).max(axis=1)
    assert np.all(np.diff(r) <= 1e-10)
    assert np.max(np.abs(z[-1] - z[-2])) < 1e-4
    limits = connected_components(np.linalg.norm(z[-1][:, None] - z[-1][None], axis=-1) < 1e-3)[0]
    assert limits < n / 2


# -- failures and bad input -------------------------------------------------------------------------------
@pytest.mark.parametrize("scheme", ["adaptive", "euler-normalize"])
def test_nan_stops_the_run_and_keeps_the_solution(scheme):
    x0 = np.random.default_rng(18).standard_normal((5, 2)) + 3.0
    model = mf.Model(beta=1.0, dim=2, normalized=False, V=5.0)
    # `dt` applies to the fixed-step scheme only; the adaptive one rejects it (one solver protocol)
    step = {"dt": 0.05} if scheme == "euler-normalize" else {}
    with pytest.raises(mf.NonFiniteState) as info:
        Particles(model).solve(x0, np.linspace(0, 20, 41), domain="euclidean", scheme=scheme, progress=False, **step)
    exc = info.value
    assert f"t={exc.t:.6g}" in str(exc) and f"step {exc.step}" in str(exc)      # the stepper's Failure
    assert exc.solution is not None and 1 <= len(exc.solution.t) < 41 and exc.t > exc.solution.t[-1] - 1e-12
    assert np.all(np.isfinite(exc.solution.positions))


def test_bad_input():
    model = mf.Model(beta=1.0, dim=3)
    P = Particles(model)
    x = _sphere(5, 3, 19)
    with pytest.raises(ValueError, match="unit sphere"):
        P.solve(1.01 * x, [0, 1], progress=False)
    sol = P.solve(1.01 * x, [0, 0.1], normalize=True, progress=False)
    assert np.allclose(np.linalg.norm(sol.positions, axis=-1), 1, atol=1e-15)
    with pytest.raises(ValueError, match="`Q` and `K`"):
        mf.Model(beta=1.0, dim=3, Q=np.eye(3), K=np.ones((2, 3)))
    with pytest.raises(ValueError, match="`V`"):
        mf.Model(beta=1.0, dim=3, V=np.eye(2))
    with pytest.raises(ValueError, match="`x0`"):
        P.solve(_sphere(5, 2, 1), [0, 1], progress=False)
    with pytest.raises(ValueError, match="`x0`"):
        P.solve(_sphere((2, 2, 5), 3, 1), [0, 1], progress=False)
    with pytest.raises(ValueError, match="`weights`"):
        P.solve(x, [0, 1], weights=np.ones(4) / 4, progress=False)
    with pytest.raises(ValueError, match="`weights`"):
        P.solve(x, [0, 1], weights=np.ones(5), progress=False)
    with pytest.raises(ValueError, match="`scheme`"):
        P.solve(x, [0, 1], scheme="rk4", progress=False)
    with pytest.raises(ValueError, match="`dt`"):
        P.solve(x, [0, 1], scheme="euler-normalize", dt=-1.0, progress=False)
    with pytest.raises(ValueError, match="`domain`"):
        P.solve(x, [0, 1], domain="plane", progress=False)
    with pytest.raises(ValueError, match="rescaled"):
        P.solve(x, [0, 1], rescaled=True, progress=False)
    with pytest.raises(ValueError, match="`t_eval`"):
        P.solve(x, [0.5, 1], progress=False)
    with pytest.raises(ValueError, match="`chunk`"):
        Particles(model, chunk=0)
    with pytest.raises(ValueError, match="`diagnostics`"):
        Particles(model, diagnostics="some")


# -- diagnostics and the Solution -------------------------------------------------------------------------
@pytest.mark.parametrize("compiled", [True, False])
def test_cluster_diagnostics(compiled, monkeypatch):
    """Both ways of counting clusters (the compiled union–find, the numpy closure / label propagation)
    against scipy's connected components."""
    from meanfield.sums import compiled

    monkeypatch.setattr(compiled, "ENABLED", compiled)
    e = np.eye(3)
    x = np.array([e[0], e[0], e[0], e[1], e[1]])
    assert clustered_pair_fraction(x, 1e-3) == pytest.approx(8 / 20)     # 3·2 + 2·1 ordered pairs
    assert count_clusters(x, 1e-3) == 2
    assert w1_to_nearest_dirac(x) == pytest.approx(0.4 * np.pi / 2)
    xb = _sphere((6, 40), 3, 20)
    for delta in (0.05, 0.5):
        ref = [connected_components(xi @ xi.T >= 1 - delta)[0] for xi in xb]
        assert np.array_equal(count_clusters(xb, delta), ref)
        big = _sphere(300, 3, 21)     # the label-propagation path (n > 256), in blocks
        assert count_clusters(big, delta, chunk=64) == connected_components(big @ big.T >= 1 - delta)[0]
        frac = [(np.sum(xi @ xi.T >= 1 - delta) - 40) / (40 * 39) for xi in xb]
        assert np.allclose(clustered_pair_fraction(xb, delta, chunk=7), frac, rtol=0, atol=1e-15)


def test_batch_solution_shapes_and_round_trip(tmp_path):
    x0 = _sphere((4, 6), 3, 22)
    sol = Particles(mf.Model(beta=1.0, dim=3)).solve(x0, [0, 0.5, 1.0], progress=False)
    assert sol.positions.shape == (3, 4, 6, 3) and sol.weights.shape == (6,)
    assert sol.energy.shape == (3, 4) and sol.diagnostics["clusters"].shape == (3, 4)
    for b in range(4):
        e = mf.interaction_energy(1.0, sol.measure(-1, batch=b))
        assert sol.energy[-1, b] == pytest.approx(e, rel=1e-13)
    sol.save(tmp_path / "p.nc")
    back = mf.load(tmp_path / "p.nc")
    assert np.array_equal(back.positions, sol.positions) and np.allclose(back.energy, sol.energy)


@pytest.mark.slow
def test_large_n_memory_is_chunk_squared():
    """n = 30 000 on S^2: one right-hand side in O(n·d + chunk²) memory (tracemalloc peak)."""
    import tracemalloc

    n = 30000
    x = _sphere(n, 3, 23)
    P = Particles(mf.Model(beta=4.0, dim=3), chunk=1024)
    tracemalloc.start()
    v = P.velocity(x)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert np.all(np.isfinite(v))
    assert peak < 12 * n * 3 * 8 + 3 * 1024 ** 2 * 8, peak


def test_checkpoint_and_full_diagnostics(tmp_path):
    x0 = _sphere((3, 10), 3, 25)
    path = tmp_path / "ck.nc"
    sol = Particles(mf.Model(beta=2.0, dim=3), diagnostics="full", delta=0.1).solve(
        x0, [0, 1.0, 2.0], checkpoint=path, progress=False)
    back = mf.load(path)
    assert np.array_equal(back.positions, sol.positions)
    assert sol.diagnostics["w1_to_dirac"].shape == (3, 3)
    for b in range(3):
        assert sol.diagnostics["w1_to_dirac"][-1, b] == pytest.approx(mf.w1_to_dirac(sol.measure(-1, batch=b)))
        assert sol.diagnostics["clusters"][-1, b] == count_clusters(sol.positions[-1, b], 0.1)


# -- saved times from the step's sums, memory, threads ----------------------------------------------------
def _counting(monkeypatch):
    """Count the kernel-sum passes of the particle solver (each one exponential per pair)."""
    from solvers import particles

    calls = [0]

    def counting(inner):
        def counted(*args, **kwargs):
            calls[0] += 1
            return inner(*args, **kwargs)
        return counted

    for name in ("kernel_sums", "attention_sums"):
        monkeypatch.setattr(particles, name, counting(getattr(particles, name)))
    return calls


def test_saved_times_reuse_the_steps_sums(monkeypatch):
    """euler-normalize with the energy and the clustered fraction at every one of 31 saved times: one
    pass of kernel sums per step and one for the last saved time (where no step starts), and the
    positions are those of the run without diagnostics, bit for bit."""
    calls = _counting(monkeypatch)
    x0 = _sphere((16, 20), 3, 40)
    t = np.linspace(0.0, 6.0, 31)
    model = mf.Model(beta=3.0, dim=3)
    sol = Particles(model, diagnostics=("energy", "clustered_fraction")).solve(
        x0, t, method="euler-normalize", dt=0.1, progress=False)
    assert sol.stats["nsteps"] == 60 and calls[0] == 61
    bare = Particles(model, diagnostics="none").solve(x0, t, method="euler-normalize", dt=0.1, progress=False)
    np.testing.assert_array_equal(sol.positions, bare.positions)
    # the adaptive pair: its first stage at a saved state gives that state's diagnostics
    calls[0] = 0
    ad = Particles(model, diagnostics=("energy", "clustered_fraction")).solve(x0, t, rtol=1e-6, atol=1e-9,
                                                                           progress=False)
    assert calls[0] == ad.stats["nfev"] + 1                   # + the diagnostics of the initial state
    assert ad.stats["nfev"] <= 6 * (ad.stats["nsteps"] + ad.stats["nrejected"]) + 2     # FSAL after the retraction


@pytest.mark.parametrize("method,kw", [("euler-normalize", {"dt": 0.1}), ("dopri5", {"rtol": 1e-7}),
                                       ("dopri5", {"rtol": 1e-7, "dense_output": True})])
def test_diagnostics_from_the_sums_equal_the_direct_ones(method, kw):
    """The energy from the denominators of (SA) equals E_β (3.5) of the saved positions (to rounding),
    the clustered fraction from the blocks equals `clustered_pair_fraction`, the clusters `count_clusters`
    at ``cluster_delta``."""
    x0 = _sphere((12, 24), 3, 41)
    t = np.linspace(0.0, 8.0, 17)
    model = mf.Model(beta=2.0, dim=3)
    sol = Particles(model, delta=1e-2, cluster_delta=5e-2,
                    diagnostics=("energy", "clustered_fraction", "clusters")).solve(
        x0, t, method=method, save="positions", progress=False, **kw)
    x = sol.positions
    w = np.full(24, 1 / 24)
    direct = np.array([[mf.interaction_energy(2.0, (xb, w)) for xb in xt] for xt in x])
    np.testing.assert_allclose(sol.energy, direct, rtol=1e-13)
    np.testing.assert_array_equal(sol.diagnostics["clustered_fraction"], clustered_pair_fraction(x, 1e-2))
    np.testing.assert_array_equal(sol.diagnostics["clusters"], count_clusters(x, 5e-2))
    assert 0 < sol.diagnostics["clustered_fraction"][-1].mean() and sol.diagnostics["clusters"][-1].max() < 24


@pytest.mark.parametrize("method,kw", [("euler-normalize", {"dt": 0.1}), ("dopri5", {"dense_output": True})])
def test_threads_do_not_change_the_run(method, kw, monkeypatch):
    """The kernel sums give the same bits on 1, 2 or 3 threads, so the runs are identical."""
    from meanfield.sums import kernelsums

    monkeypatch.setattr(kernelsums, "_PARALLEL_MIN", 0)
    x0 = _sphere((20, 16), 3, 42)
    t = np.linspace(0.0, 5.0, 11)
    runs = [Particles(mf.Model(beta=5.0, dim=3)).solve(x0, t, method=method, threads=k, progress=False, **kw)
            for k in (1, 2, 3)]
    for sol in runs[1:]:
        np.testing.assert_array_equal(sol.positions, runs[0].positions)
        np.testing.assert_array_equal(sol.energy, runs[0].energy)
        np.testing.assert_array_equal(sol.diagnostics["clustered_fraction"], runs[0].diagnostics["clustered_fraction"])


def test_save_chooses_what_each_saved_time_keeps(tmp_path):
    x0 = _sphere((6, 12), 3, 43)
    t = np.linspace(0.0, 4.0, 9)
    solver = Particles(mf.Model(beta=3.0, dim=3))
    kw = dict(method="euler-normalize", dt=0.1, progress=False)
    full = solver.solve(x0, t, save="positions", **kw)
    assert full.representation.name == "particles" and solver.solve(x0, t, **kw).representation.name == "particles"

    none = solver.solve(x0, t, save="diagnostics", **kw)
    assert none.representation.name == "sampled-particles" and all(s is None for s in none.data)
    np.testing.assert_array_equal(none.energy, full.energy)
    np.testing.assert_array_equal(none.diagnostics["clustered_fraction"], full.diagnostics["clustered_fraction"])
    np.testing.assert_array_equal(none.mass, full.mass)
    with pytest.raises(AttributeError, match="0 of its 9 saved times"):
        none.positions
    with pytest.raises(ValueError, match="not kept"):
        none.measure(-1)

    ends = solver.solve(x0, t, save="ends", **kw)
    np.testing.assert_array_equal(ends[0].positions, full.positions[:1])
    np.testing.assert_array_equal(ends[-1].positions, full.positions[-1:])
    picked = solver.solve(x0, t, save=[t[3], t[5]], **kw)
    assert list(picked.representation.kept(picked.data)) == [3, 5]
    np.testing.assert_array_equal(picked.measure(5, batch=2)[0], full.positions[5, 2])

    path = picked.save(tmp_path / "picked.nc")                 # the kept times survive the file
    back = mf.load(path)
    assert list(back.representation.kept(back.data)) == [3, 5]
    np.testing.assert_array_equal(back[3].positions, full.positions[3:4])
    np.testing.assert_array_equal(back.energy, full.energy)
    np.testing.assert_array_equal(mf.load(none.save(tmp_path / "none.nc")).energy, full.energy)

    more = solver.solve(ends, np.linspace(4.0, 6.0, 5), **kw)     # continued from the last kept positions
    ref = solver.solve(full, np.linspace(4.0, 6.0, 5), **kw)
    np.testing.assert_array_equal(more.positions, ref.positions)

    with pytest.raises(ValueError, match=r"`save`"):
        solver.solve(x0, t, save="all", **kw)
    with pytest.raises(ValueError, match=r"`save`"):
        solver.solve(x0, t, save=[0.123], **kw)
    with pytest.raises(ValueError, match=r"`diagnostics`"):
        solver.solve(x0, t, diagnostics=("energy", "entropy"), **kw)
    assert solver.solve(x0, t, diagnostics="none", **kw).diagnostics == {}


def test_dense_output_agrees_with_landing_on_every_saved_time():
    """dopri5 with dense_output=True (saved times from the order-4 interpolant, retracted) agrees with
    the run that lands on each of 161 saved times (whose short steps make it accurate to ~5e-11)
    within 30·rtol, the error is proportional to rtol, and it takes fewer right-hand sides."""
    x0 = _sphere((8, 16), 3, 44)
    t = np.linspace(0.0, 8.0, 161)
    solver = Particles(mf.Model(beta=4.0, dim=3), diagnostics="none")
    land = solver.solve(x0, t, rtol=1e-7, atol=1e-9, progress=False)
    errors = []
    for rtol in (1e-6, 1e-7, 1e-8):
        dense = solver.solve(x0, t, rtol=rtol, atol=1e-9, dense_output=True, progress=False)
        errors.append(np.abs(dense.positions - land.positions).max())
        assert errors[-1] < 30 * rtol
    assert 5 < errors[0] / errors[1] < 20 and 5 < errors[1] / errors[2] < 20
    dense = solver.solve(x0, t, rtol=1e-7, atol=1e-9, dense_output=True, progress=False)
    np.testing.assert_allclose(np.linalg.norm(dense.positions, axis=-1), 1.0, rtol=0, atol=1e-15)
    assert dense.stats["nfev"] < land.stats["nfev"] / 2


def test_blas_is_held_to_one_thread_while_the_sums_use_several():
    """A run holds BLAS to one thread (numba's threads and BLAS's would share the cores; on one thread
    its waiting threads would spin beside the run) and gives it back afterwards."""
    from threadpoolctl import threadpool_info, threadpool_limits

    def blas_threads():
        return max((lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"), default=None)

    seen = []

    class Recording(Particles):
        def _rhs(self, run, t, y):
            seen.append((run.threads, blas_threads()))
            return super()._rhs(run, t, y)

    x0 = _sphere((4, 8), 3, 3)
    with threadpool_limits(limits=2, user_api="blas"):
        if blas_threads() != 2:
            pytest.skip("no BLAS that can run two threads")
        solver = Recording(mf.Model(beta=2.0, dim=3), diagnostics="none")
        two = solver.solve(x0, [0.0, 0.5], threads=2, progress=False)
        assert blas_threads() == 2
        assert seen and all(s == (2, 1) for s in seen)
        seen.clear()
        one = solver.solve(x0, [0.0, 0.5], threads=1, progress=False)
        assert seen and all(s == (1, 1) for s in seen)
        assert blas_threads() == 2
    np.testing.assert_allclose(two.positions, one.positions, rtol=0, atol=1e-12)
