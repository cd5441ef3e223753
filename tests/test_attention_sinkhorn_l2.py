"""L2 and Sinkhorn attention (docs/attention.md): the sums against dense formulas, the doubly stochastic
plan at every step, the Gaussian continuum against particles and against quadrature, the energy of the
Sinkhorn flow, bad input."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

import meanfield as mf
import solvers
from meanfield.cli import main
from meanfield.sums import sinkhorn as sk
from solvers import particles as particles_module
from solvers.gaussian import affine_field, moment_rates

from gauss_hermite import gauss_hermite
from tolerances import assert_rounding_close


def near_identity(rng, d, eps=0.2):
    return [np.eye(d) + eps * rng.standard_normal((d, d)) for _ in range(3)]


def dense_sinkhorn(C, w, iterations=5000):
    """Plain Sinkhorn on the dense kernel e^C (no log domain): A_ij = w_j a_i b_j e^{C_ij}."""
    K = np.exp(C - C.max())
    a, b = np.ones(len(w)), np.ones(len(w))
    for _ in range(iterations):
        b = 1.0 / (K.T @ (w * a))
        a = 1.0 / (K @ (w * b))
    return a[:, None] * K * (w * b)[None, :]


def rhs(model, x, **options):
    """The particles' field at x (R^d, unprojected) through a run of `solvers.Particles`."""
    return solvers.Particles(model).start(x, [0.0, 1.0], domain="euclidean", **options).rhs(0.0, x)


# -- the sums ---------------------------------------------------------------------------------------------
@given(st.integers(2, 12), st.integers(2, 4), st.floats(0.1, 3.0), st.booleans(), st.integers(0, 2 ** 31))
def test_sinkhorn_matches_plain_sinkhorn_and_is_doubly_stochastic(n, d, beta, symmetric, seed):
    """Both iterations (the symmetric one for M = Mᵀ, the alternating one else) against plain Sinkhorn."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, d)) / np.sqrt(d)
    M = np.eye(d) + 0.3 * rng.standard_normal((d, d))
    if symmetric:
        M = 0.5 * (M + M.T)
    w = rng.uniform(0.5, 1.5, n)
    w /= w.sum()
    res = sk.sinkhorn(x, w, beta, M=M, tol=1e-13)
    A = sk.sinkhorn_matrix(x, w, beta, M=M, f=res.f, g=res.g)
    assert np.abs(A.sum(1) - 1).max() <= 1e-13 and np.abs(w @ A / w - 1).max() <= 2e-13
    # the scaling diag(a) K diag(b) with these marginals is unique (Sinkhorn 1967): plain Sinkhorn, where
    # it has converged in its iterations (near a permutation it has not), finds the same matrix
    ref = dense_sinkhorn(beta * (x @ M) @ x.T, w, 3000)
    if np.abs(w @ ref / w - 1).max() <= 1e-12:
        assert np.allclose(A, ref, rtol=0, atol=1e-10)
    assert_rounding_close(res.out, A @ x, terms=n)


def test_sinkhorn_log_domain_survives_where_plain_sinkhorn_overflows():
    """Tokens far from the origin, x = c + ξ with |c| = 1000: e^{β⟨x_i, x_j⟩} ~ e^{10^6}, yet the plan is
    that of ξ (the terms ⟨c, ξ_i⟩ + ⟨c, ξ_j⟩ + |c|² are absorbed by the potentials)."""
    rng = np.random.default_rng(1)
    xi = 0.5 * rng.standard_normal((40, 3))
    w = np.full(40, 1 / 40)
    far = sk.sinkhorn(xi + [1000.0, 0.0, 0.0], w, 1.0, values=xi)
    near = sk.sinkhorn(xi, w, 1.0)
    assert far.error <= 1e-12 and np.allclose(far.out, near.out, rtol=0, atol=1e-7)


def test_sinkhorn_warm_start_and_refusal():
    rng = np.random.default_rng(2)
    x = 0.5 * rng.standard_normal((3, 60, 3))              # three realisations, each its own plan
    w = np.full(60, 1 / 60)
    cold = sk.sinkhorn(x, w, 2.0)
    moved = x + 1e-3 * rng.standard_normal(x.shape)
    warm = sk.sinkhorn(moved, w, 2.0, f=cold.f, g=cold.g)
    assert warm.iterations < sk.sinkhorn(moved, w, 2.0).iterations
    for b in range(3):
        one = sk.sinkhorn(moved[b], w, 2.0)
        assert np.allclose(one.out, warm.out[b], rtol=0, atol=1e-11)
    with pytest.raises(sk.SinkhornNotConverged, match="sinkhorn_tol") as info:
        sk.sinkhorn(x, w, 2.0, max_iterations=1)
    assert isinstance(info.value, mf.SolverError) and info.value.iterations == 1
    out = sk.sinkhorn_output(x[0, :5], x[0], w, 2.0, cold.g[0])       # at tokens: their own outputs
    assert np.allclose(out, cold.out[0, :5], rtol=0, atol=1e-12)


def test_l2_field_matches_the_dense_formula_with_heads_batches_and_masks():
    rng = np.random.default_rng(3)
    d, n, beta = 3, 30, 1.3
    heads = [tuple(near_identity(rng, d, 0.3)) for _ in range(2)]
    x = 0.7 * rng.standard_normal((2, n, d))
    model = mf.Model(beta=beta, dim=d, heads=heads, attention="l2")
    field = rhs(model, x)
    want = 0.0
    for Q, K, V in heads:
        L = -0.5 * beta * np.sum(((x @ Q.T)[:, :, None, :] - (x @ K.T)[:, None, :, :]) ** 2, -1)
        P = np.exp(L - L.max(-1, keepdims=True))
        want = want + (P / P.sum(-1, keepdims=True)) @ x @ V.T
    assert_rounding_close(field, want, terms=4 * n)
    Q, K, V = heads[0]
    masked = mf.Model(beta=beta, dim=d, Q=Q, K=K, V=V, attention="l2", mask="causal", position_bias=2.0)
    L = -0.5 * beta * np.sum(((x[0] @ Q.T)[:, None, :] - (x[0] @ K.T)[None, :, :]) ** 2, -1)
    P = np.exp(L - L.max(-1, keepdims=True)) * mf.transformer.masks.dense_mask(n, "causal", 2.0)
    assert_rounding_close(rhs(masked, x[0]), (P / P.sum(-1, keepdims=True)) @ x[0] @ V.T, terms=4 * n)


def test_l2_on_the_sphere_with_unit_keys_is_softmax():
    x, _ = mf.sample(mf.densities.uniform(), 50, 3, rng=4)
    for kw in ({}, {"Q": np.diag([1.0, 2.0, 0.5])}):
        soft = solvers.Particles(mf.Model(beta=3.0, dim=3, **kw), sums="direct").velocity(x)
        l2 = solvers.Particles(mf.Model(beta=3.0, dim=3, attention="l2", **kw)).velocity(x)
        assert_rounding_close(l2, soft, terms=50)


# -- the doubly stochastic plan at every step --------------------------------------------------------------
@pytest.mark.parametrize("domain", ["euclidean", "sphere"])
def test_sinkhorn_is_doubly_stochastic_to_1e_12_at_every_step(domain, monkeypatch):
    rng = np.random.default_rng(5)
    d, n = 3, 24
    Q, K, V = near_identity(rng, d)
    x0 = 0.5 * rng.standard_normal((2, n, d))
    if domain == "sphere":
        x0 /= np.linalg.norm(x0, axis=-1, keepdims=True)
    seen = []

    def checked(x, w, beta, **kw):
        res = sk.sinkhorn(x, w, beta, **kw)
        A = sk.sinkhorn_matrix(x, w, beta, M=kw["M"], eps=kw["eps"], f=res.f, g=res.g)
        seen.append((np.abs(A.sum(-1) - 1).max(), np.abs(A.sum(-2) - 1).max(), res.iterations))
        return res

    monkeypatch.setattr(particles_module, "sinkhorn", checked)
    model = mf.Model(beta=1.0, dim=d, Q=Q, K=K, V=V, attention="sinkhorn", sinkhorn_eps=0.5)
    sol = solvers.Particles(model).solve(x0, np.linspace(0, 0.5, 3), domain=domain, progress=False)
    rows, cols, its = np.array(seen).T
    assert len(seen) >= sol.stats["nfev"] and rows.max() <= 1e-13 and cols.max() <= 1e-12
    assert sol.stats["sinkhorn_max_error"] <= 1e-12 and sol.stats["sinkhorn_solves"] == len(seen)
    assert sol.stats["sinkhorn_iterations"] == sum(its)
    assert np.all(sol.diagnostics["sinkhorn_error"] <= 1e-12) and np.all(sol.diagnostics["sinkhorn_iterations"][1:] > 0)
    assert sol.diagnostics["sinkhorn_energy"].shape == (3, 2)


# -- the Gaussian continuum -------------------------------------------------------------------------------
def test_gaussian_rates_in_closed_form():
    """Q = K = V = I, Σ = sI: L2 ṁ = m, ṡ = 2βs²/(1 + βs); Sinkhorn ṁ = m, ṡ = 4(β/ε)s²/(1 + √(1 + 4(β/ε)²s²))."""
    d, s, beta, eps = 3, 0.7, 1.5, 0.6
    m, S, heads = np.array([0.1, -0.2, 0.3]), s * np.eye(d), [(np.eye(d), np.eye(d), np.eye(d))]
    dm, dS = moment_rates(m, S, beta, heads, "l2")
    assert np.allclose(dS, 2 * beta * s ** 2 / (1 + beta * s) * np.eye(d), rtol=1e-14)
    assert np.allclose(dm, m, rtol=1e-14)             # v(x) = (m + βs x)/(1 + βs) averages to m
    g = beta / eps
    dm, dS = moment_rates(m, S, beta, heads, "sinkhorn", eps)
    assert np.allclose(dS, 4 * g * s ** 2 / (1 + np.sqrt(1 + 4 * g ** 2 * s ** 2)) * np.eye(d), rtol=1e-14)
    assert np.allclose(dm, m, rtol=1e-14)


@pytest.mark.parametrize("attention", ["l2", "sinkhorn"])
def test_the_gaussian_field_is_the_quadrature_field(attention):
    """The attention average over N(m, Σ) by Gauss–Hermite quadrature (for Sinkhorn: the plan of the
    quadrature measure with itself) is the affine field of `moment_rates`."""
    rng = np.random.default_rng(6)
    d, beta, eps = 2, 0.8, 0.7
    Q, K, V = near_identity(rng, d, 0.3)
    m, A = np.array([0.3, -0.2]), rng.standard_normal((d, d))
    S = 0.2 * (A @ A.T) + 0.1 * np.eye(d)
    y, W, Z = gauss_hermite(m, S, 40)
    if attention == "l2":
        L = -0.5 * beta * np.sum(((y @ Q.T)[:, None, :] - (y @ K.T)[None, :, :]) ** 2, -1)
        P = W * np.exp(L - L.max(1, keepdims=True))
        field = (P / P.sum(1, keepdims=True)) @ y @ V.T
    else:
        res = sk.sinkhorn(y, W, beta, M=Q.T @ K, values=y @ V.T, eps=eps, tol=1e-13)
        field = res.out
    b, B = affine_field(m, S, beta, [(K.T @ Q, V, K.T @ K)], attention, eps)
    near = np.abs(Z).max(1) < 3                       # nodes where the quadrature resolves the tilted law
    assert np.abs(field - (b + y @ B.T))[near].max() < 1e-9


@pytest.mark.parametrize("attention", ["softmax", "l2", "sinkhorn"])
@pytest.mark.parametrize("n", [600, pytest.param(5000, marks=pytest.mark.slow)])
def test_gaussian_particles_match_the_gaussian_continuum_at_t_1(attention, n):
    """n Gaussian particles in R^3 against the continuum started from their own moments, to 2e-2 at t = 1
    (5000 particles: the acceptance check; 600 with two heads in the default tier)."""
    rng = np.random.default_rng(7)
    d = 3
    if n == 5000:
        Q, K, V = near_identity(rng, d)
        model = mf.Model(beta=1.0, dim=d, Q=Q, K=K, V=V, attention=attention, sinkhorn_eps=0.8)
    else:
        heads = [tuple(near_identity(rng, d)) for _ in range(2)]
        model = mf.Model(beta=0.7, dim=d, heads=heads, attention=attention, sinkhorn_eps=0.8)
    x0 = (0.5 if n == 5000 else 0.3) * rng.standard_normal((n, d)) + 0.2
    part = solvers.Particles(model).solve(x0, [0.0, 1.0], domain="euclidean", rtol=1e-6, progress=False)
    gauss = solvers.Gaussian(model).solve((x0, np.full(n, 1 / n)), [0.0, 1.0], progress=False)
    x = part.positions[-1]
    assert np.abs(x.mean(0) - gauss.mean(-1)).max() < 2e-2
    assert np.abs(np.cov(x.T, bias=True) - gauss.covariance(-1)).max() < 2e-2


# -- the energy of the Sinkhorn flow ------------------------------------------------------------------------
@pytest.mark.parametrize("domain", ["euclidean", "sphere"])
def test_sinkhorn_flow_increases_its_energy(domain):
    """QᵀK = A symmetric and V = A: the flow is the gradient ascent of F = (ε/2β)·OT_ε(μ, μ), so F is
    non-decreasing at the saved times and dF/dt = Σ_i w_i |ẋ_i|² (a centred difference along the field)."""
    rng = np.random.default_rng(8)
    d, n, beta, eps = 3, 40, 1.5, 0.7
    G = rng.standard_normal((d, d))
    A = np.eye(d) + 0.2 * (G + G.T)
    model = mf.Model(beta=beta, dim=d, Q=np.eye(d), K=A, V=A, attention="sinkhorn", sinkhorn_eps=eps)
    x0 = 0.5 * rng.standard_normal((n, d))
    if domain == "sphere":
        x0 /= np.linalg.norm(x0, axis=-1, keepdims=True)
    sol = solvers.Particles(model).solve(x0, np.linspace(0, 1, 6), domain=domain, progress=False)
    F = sol.diagnostics["sinkhorn_energy"]
    assert np.all(np.diff(F) >= -1e-12 * np.abs(F).max()) and F[-1] > F[0]
    w = np.full(n, 1 / n)
    x = sol.positions[3]
    v = solvers.Particles(model).start(x, [0.0, 1.0], domain=domain).rhs(0.0, x)

    def energy(y):
        res = sk.sinkhorn(y, w, beta, M=A, eps=eps, tol=1e-14)
        return sk.sinkhorn_energy(y, w, beta, eps, res.f, res.g, A)

    h = 1e-4
    slope = (energy(x + h * v) - energy(x - h * v)) / (2 * h)
    assert abs(slope - w @ np.sum(v * v, -1)) < 1e-6 * abs(slope)


# -- bad input ----------------------------------------------------------------------------------------------
def test_bad_input_names_the_argument(tmp_path, capsys):
    with pytest.raises(ValueError, match="`attention`"):
        mf.Model(beta=1.0, dim=3, attention="sparsemax")
    for eps in (0.0, -1.0):
        with pytest.raises(ValueError, match="`sinkhorn_eps`"):
            mf.Model(beta=1.0, dim=3, attention="sinkhorn", sinkhorn_eps=eps)
    with pytest.raises(ValueError, match="`attention`='sinkhorn' with `mask`='causal'"):
        mf.Model(beta=1.0, dim=3, attention="sinkhorn", mask="causal")
    hard = mf.Model(beta=1.0, dim=3, attention="hardmax")
    for make in (solvers.Gaussian, solvers.Particles, lambda m: solvers.SphericalHarmonics(m, lmax=8)):
        with pytest.raises(mf.UnsupportedModel, match="`attention`"):
            make(hard)
    with pytest.raises(mf.UnsupportedModel, match="`attention`"):
        solvers.SphericalHarmonics(mf.Model(beta=1.0, dim=3, attention="l2"), lmax=16)
    with pytest.raises(mf.UnsupportedModel, match="`attention`"):
        solvers.Gegenbauer(mf.Model(beta=1.0, dim=3, attention="sinkhorn"), lmax=32)
    for kind in ("l2", "sinkhorn"):
        with pytest.raises(mf.UnsupportedModel, match="`attention`"):
            solvers.Particles(mf.Model(beta=1.0, dim=3, attention=kind, normalized=False))
        with pytest.raises(ValueError, match="`sums`='spectral'.*attention"):
            solvers.Particles(mf.Model(beta=1.0, dim=3, attention=kind), sums="spectral")
    cfg = tmp_path / "bad.toml"
    for line in ('attention = "sinkhorn"\nmask = "causal"', 'attention = "sinkhorn"\nsinkhorn_eps = 0.0'):
        cfg.write_text('[solver]\nname = "particles"\nn = 16\n[model]\nbeta = 1.0\ndim = 3\n' + line +
                       '\n[initial]\ndensity = "uniform"\n[times]\nt_end = 1.0\n')
        assert main(["run", str(cfg), "--out", str(tmp_path / "out")]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "`model." in err, err


def test_the_table_of_docs_attention_is_what_the_solvers_declare():
    import pathlib
    import re
    text = (pathlib.Path(__file__).resolve().parents[1] / "docs" / "attention.md").read_text()
    table = text.split("## Which solver takes which", 1)[1]
    for name in ("Particles", "Gaussian", "FourierCircle", "SphericalHarmonics"):
        row = next(line for line in table.splitlines() if line.startswith(f"| `solvers.{name}` |"))
        assert tuple(re.findall(r'"(\w+)"', row)) == getattr(solvers, name).attentions, row


@pytest.mark.parametrize("attention", ["l2", "sinkhorn"])
def test_tracers_on_the_tokens_follow_them_and_batches_are_their_members(attention):
    """The field at a point that is not a token (the plan extended by its potentials) is, at a token,
    that token's field; a batch of two realisations is the two runs."""
    x0, _ = mf.sample(mf.densities.uniform(), 30, 3, rng=9)
    model = mf.Model(beta=2.0, dim=3, attention=attention, Q=np.diag([1.0, 1.5, 0.5]))
    sol = solvers.Particles(model).solve(x0, [0.0, 1.0], tracers=x0[:3], progress=False)
    assert np.abs(sol.tracers[-1] - sol.positions[-1][:3]).max() < 1e-10
    both = solvers.Particles(model).solve(np.stack([x0, x0[::-1]]), [0.0, 1.0], scheme="euler-normalize", dt=0.1,
                                          progress=False)
    one = solvers.Particles(model).solve(x0[::-1], [0.0, 1.0], scheme="euler-normalize", dt=0.1, progress=False)
    assert np.allclose(both.positions[-1][1], one.positions[-1], rtol=0, atol=1e-11)


# -- the Sinkhorn continuum on the circle ----------------------------------------------------------------
def test_sinkhorn_continuum_on_the_circle_matches_particles():
    """FourierCircle under Sinkhorn attention (the plan of its grid measure) against 500 weighted particles
    at the midpoints, started from the same density: the Fourier coefficients agree to 1e-8 at t = 1, and
    the energy of the flow increases."""
    model = mf.Model(beta=2.0, dim=2, attention="sinkhorn", sinkhorn_eps=0.8)
    rho0 = mf.densities.perturbed_uniform(0.3, 2)
    sol = solvers.FourierCircle(model, modes=32).solve(rho0, np.linspace(0, 1, 3), progress=False)
    n = 500
    theta = 2 * np.pi * (np.arange(n) + 0.5) / n
    x = np.stack([np.cos(theta), np.sin(theta)], -1)
    w = rho0(x) / rho0(x).sum()
    y = solvers.Particles(model).solve((x, w), [0.0, 1.0], rtol=1e-9, progress=False).positions[-1]
    angle = np.arctan2(y[:, 1], y[:, 0])
    ck = np.exp(-1j * np.outer(np.arange(1, 5), angle)) @ w
    assert np.abs(ck - sol.data[-1][1:5]).max() < 1e-8 and abs(sol.data[-1][2]) > 0.2
    F = sol.diagnostics["sinkhorn_energy"]
    assert np.all(np.diff(F) > 0) and np.all(sol.diagnostics["sinkhorn_iterations"][1:] > 0)
    with pytest.raises(mf.UnsupportedModel, match="`attention`"):
        solvers.FourierCircle(mf.Model(beta=2.0, dim=2, attention="sinkhorn", normalized=False), modes=16)


def test_sinkhorn_continuum_on_the_sphere_matches_particles():
    """SphericalHarmonics under Sinkhorn attention against weighted particles at the nodes of a finer
    Gauss–Legendre grid: the first and second moments agree to 1e-9 at t = 0.5; the energy increases."""
    from meanfield.spaces.harmonics import SphericalHarmonicBasis
    model = mf.Model(beta=2.0, dim=3, attention="sinkhorn")
    rho0 = mf.densities.von_mises_fisher([0, 0, 1.0], 1.0)
    sol = solvers.SphericalHarmonics(model, lmax=16).solve(rho0, [0.0, 0.25, 0.5], progress=False)
    grid = SphericalHarmonicBasis(20, 30)
    x, q = grid.points.reshape(-1, 3), grid.weights.ravel()
    w = q * rho0(x) / (q * rho0(x)).sum()
    y = solvers.Particles(model).solve((x, w), [0.0, 0.5], rtol=1e-9, progress=False).positions[-1]
    rho = q * sol.density(x, -1)
    rho /= rho.sum()
    assert np.abs(rho @ x - w @ y).max() < 1e-9
    assert np.abs(np.einsum("n,ni,nj->ij", rho, x, x) - np.einsum("n,ni,nj->ij", w, y, y)).max() < 1e-9
    assert np.all(np.diff(sol.diagnostics["sinkhorn_energy"]) > 0)
