"""solvers.Gaussian: the exact Gaussian continuum of (SA) in R^d (docs/gaussian.md)."""
import numpy as np
import pytest
from scipy.integrate import solve_ivp
from scipy.stats import multivariate_normal

import meanfield as mf
import solvers
from gauss_hermite import gauss_hermite


def near_identity(rng, d, eps=0.1):
    return [np.eye(d) + eps * rng.standard_normal((d, d)) for _ in range(3)]


def test_the_mean_field_of_a_gaussian_is_affine():
    """The softmax average under N(m, Σ), by Gauss–Hermite quadrature, is V(m + βΣKᵀQx)."""
    rng = np.random.default_rng(0)
    d, beta = 2, 0.7
    Q, K, V = near_identity(rng, d, 0.3)
    m, A = np.array([0.3, -0.2]), rng.standard_normal((d, d))
    S = 0.2 * (A @ A.T) + 0.1 * np.eye(d)
    y, W, _ = gauss_hermite(m, S, 60)
    for x in (np.zeros(d), np.array([0.5, 1.0]), np.array([-1.3, 0.4])):
        e = W * np.exp(beta * (y @ K.T) @ (Q @ x))
        field = V @ (e @ y / e.sum())
        assert np.allclose(field, V @ (m + beta * S @ K.T @ Q @ x), rtol=0, atol=1e-12)


def test_matches_an_independent_integration_of_the_moment_equations():
    rng = np.random.default_rng(1)
    d, beta = 3, 1.3
    heads = [tuple(near_identity(rng, d)) for _ in range(2)]
    model = mf.Model(beta=beta, dim=d, heads=heads)
    m0, A = rng.standard_normal(d), rng.standard_normal((d, d))
    S0 = 0.02 * (A @ A.T) + 0.02 * np.eye(d)
    t = np.linspace(0, 1.5, 7)

    def rates(_, y):
        m, S = y[:d], y[d:].reshape(d, d)
        dm, B = np.zeros(d), np.zeros((d, d))
        for Q, K, V in heads:
            dm += V @ m
            B += beta * V @ S @ K.T @ Q
        return np.concatenate([dm + B @ m, (B @ S + S @ B.T).ravel()])

    ref = solve_ivp(rates, (0, t[-1]), np.concatenate([m0, S0.ravel()]), method="DOP853", t_eval=t,
                    rtol=1e-13, atol=1e-15)
    sol = solvers.Gaussian(model).solve((m0, S0), t, progress=False, rtol=1e-12, atol=1e-14)
    for i in range(t.size):
        assert np.allclose(sol.mean(i), ref.y[:d, i], rtol=1e-10, atol=1e-12)
        assert np.allclose(sol.covariance(i), ref.y[d:, i].reshape(d, d), rtol=1e-10, atol=1e-12)
    assert np.allclose(sol.covariance(-1), sol.covariance(-1).T, rtol=0, atol=1e-14)


def test_particles_follow_the_moment_equations_of_their_own_sample():
    """5000 iid Gaussian tokens in R^3 under (SA) with Q, K, V near I, t = 1: their mean and covariance
    are those of the Gaussian continuum started at the sample's moments, up to the sample's
    non-Gaussianity (about 1e-3)."""
    rng = np.random.default_rng(3)
    d, n = 3, 5000
    Q, K, V = near_identity(rng, d)
    model = mf.Model(beta=1.0, dim=d, Q=Q, K=K, V=V)
    x0 = 0.3 * rng.standard_normal((n, d)) + np.array([0.2, 0.0, -0.1])
    part = solvers.Particles(model).solve(x0, [0.0, 1.0], domain="euclidean", progress=False, rtol=1e-8)
    gauss = solvers.Gaussian(model).solve((x0, np.full(n, 1 / n)), [0.0, 1.0], progress=False)
    x = part.positions[-1]
    assert np.abs(x.mean(0) - gauss.mean()).max() < 1e-2
    assert np.abs(np.cov(x.T, bias=True) - gauss.covariance()).max() < 1e-2
    # the run moved the moments by far more than the tolerance
    assert np.abs(gauss.mean() - gauss.mean(0)).max() > 0.1


def test_the_blow_up_time_of_the_riccati_covariance():
    """With V = I, Q = diag(a, q), K = I and diagonal Σ, the first coordinate is the d = 1 case:
    σ²(t) = σ₀²/(1 − 2aβσ₀²t), which blows up at t* = 1/(2aβσ₀²)."""
    a, beta, s0 = 0.5, 1.0, 0.5
    model = mf.Model(beta=beta, dim=2, Q=np.diag([a, 0.1]), K=np.eye(2), V=np.eye(2))
    t = np.linspace(0, 3, 7)
    with pytest.raises(solvers.CovarianceBlowUp, match="blows up") as info:
        solvers.Gaussian(model).solve((np.zeros(2), np.diag([s0, 0.2])), t, progress=False)
    exc = info.value
    assert abs(exc.t_blowup - 1 / (2 * a * beta * s0)) < 1e-6
    sol = exc.solution
    assert np.allclose(sol.t, t[t < 2.0])
    s = np.array([sol.covariance(i)[0, 0] for i in range(len(sol.t))])
    assert np.allclose(s, s0 / (1 - 2 * a * beta * s0 * sol.t), rtol=1e-9)


def test_density_measure_and_file_round_trip(tmp_path):
    rng = np.random.default_rng(4)
    d = 3
    Q, K, V = near_identity(rng, d)
    sol = solvers.Gaussian(mf.Model(beta=0.5, dim=d, Q=Q, K=K, V=V)).solve(
        (np.zeros(d), 0.1 * np.eye(d)), [0.0, 0.5, 1.0], progress=False)
    x = rng.standard_normal((4, 5, d))
    pdf = multivariate_normal(sol.mean(1), sol.covariance(1)).pdf(x)
    assert np.allclose(sol.density(x, 1), pdf, rtol=1e-12)
    pts, w = sol.measure(-1, n=2 ** 14)
    assert np.isclose(w.sum(), 1.0) and pts.shape == (2 ** 14, d)
    assert np.abs(w @ pts - sol.mean()).max() < 3e-3
    assert np.isnan(sol.energy).all() and np.allclose(sol.mass, 1.0)
    sol.save(tmp_path / "g.nc")
    back = mf.load(tmp_path / "g.nc")
    assert np.array_equal(back.covariance(-1), sol.covariance(-1)) and np.array_equal(back.t, sol.t)
    more = solvers.Gaussian(sol.model).solve(back, [1.0, 1.5], progress=False)
    whole = solvers.Gaussian(sol.model).solve((np.zeros(d), 0.1 * np.eye(d)), [0.0, 1.0, 1.5], progress=False)
    assert np.allclose(more.covariance(-1), whole.covariance(-1), rtol=1e-9)


@pytest.mark.parametrize("kw, make, name", [
    (dict(normalized=False), lambda m: solvers.Gaussian(m), "`normalized`"),
    (dict(noise=0.1), lambda m: solvers.Gaussian(m), "`noise`"),
    ({}, lambda m: solvers.Gaussian(m, domain="sphere"), "`domain`"),
    (dict(mask="causal"), lambda m: solvers.Gaussian(m), "`mask`"),
])
def test_refuses_what_does_not_stay_gaussian(kw, make, name):
    with pytest.raises(ValueError, match=name):
        make(mf.Model(beta=1.0, dim=3, **kw))


def test_bad_initial_data_is_refused():
    g = solvers.Gaussian(mf.Model(beta=1.0, dim=2))
    with pytest.raises(ValueError, match="positive definite"):
        g.solve((np.zeros(2), np.diag([1.0, -1.0])), [0, 1], progress=False)
    with pytest.raises(ValueError, match="symmetric"):
        g.solve((np.zeros(2), np.array([[1.0, 0.5], [0.0, 1.0]])), [0, 1], progress=False)
    with pytest.raises(ValueError, match="`initial`"):
        g.solve((np.zeros(3), np.eye(3)), [0, 1], progress=False)
    with pytest.raises(ValueError, match="`initial`"):
        g.solve(lambda x: np.ones(len(x)), [0, 1], progress=False)
