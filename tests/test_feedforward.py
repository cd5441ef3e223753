"""The feed-forward term P_x W act(Ux + b): its closed-form divergence, and the particles and the continuum
solvers (Fourier, harmonics, characteristics) moving under it together with the attention."""
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import assume, given, settings, strategies as st
from scipy.integrate import solve_ivp

import meanfield as mf
import solvers
from meanfield.experiments.phase_diagram import random_mlp as phase_diagram_mlp
from meanfield.transformer.feedforward import FeedForward
from meanfield.spaces.quadrature import gauss_legendre, trapezoid
from tolerances import assert_rounding_close, rounding


def mlp_of(dim, width, seed, scale=0.25):
    """W (d, w) of size ``scale``/√w, U (w, d) and b (w,) of size 1 and 1/2."""
    rng = np.random.default_rng(seed)
    return (scale * rng.standard_normal((dim, width)) / np.sqrt(width), rng.standard_normal((width, dim)),
            0.5 * rng.standard_normal(width))


def surface_divergence_by_differences(field, x, h=1e-3):
    """div_S G(x) = Σ_a ⟨∂_{e_a} G(x), e_a⟩ over an orthonormal basis e_a of the tangent space (any
    extension G of the tangent field off the sphere), by the fourth-order central difference."""
    d = x.size
    basis = np.linalg.svd(np.eye(d) - np.outer(x, x))[0][:, :d - 1]
    total = 0.0
    for e in basis.T:
        g = [field(x + k * h * e) for k in (-2, -1, 1, 2)]
        total += e @ (g[0] - 8 * g[1] + 8 * g[2] - g[3]) / (12 * h)
    return total


@settings(max_examples=40, deadline=None)
@given(dim=st.sampled_from([2, 3, 5]), width=st.integers(1, 8), activation=st.sampled_from(["gelu", "tanh", "relu"]),
       seed=st.integers(0, 2 ** 32 - 1))
def test_the_closed_form_divergence_matches_finite_differences(dim, width, activation, seed):
    W, U, b = mlp_of(dim, width, seed, scale=1.0)
    ff = FeedForward(W, U, b, activation)
    rng = np.random.default_rng(seed + 1)
    x = rng.standard_normal(dim)
    x /= np.linalg.norm(x)
    if activation == "relu":            # no kink of act within the stencil: the difference is then exact
        assume(np.min(np.abs(U @ x + b)) > 1e-2 * (1 + np.abs(U).sum()))
    tangent = lambda y: ff.value(y[None])[0] - (y @ ff.value(y[None])[0]) * y      # P_y F(y), extended off the sphere
    np.testing.assert_allclose(ff.divergence(x[None])[0], surface_divergence_by_differences(tangent, x), rtol=0, atol=1e-8)
    F, _ = ff.tangent_divergence(x[None])
    assert_rounding_close(F[0], tangent(x), scale=np.linalg.norm(ff.value(x[None])[0]), terms=dim)
    jac = np.array([(ff.value((x + 1e-6 * e)[None]) - ff.value((x - 1e-6 * e)[None]))[0] / 2e-6 for e in np.eye(dim)]).T
    if activation != "relu":
        np.testing.assert_allclose(ff.jacobian(x[None])[0], jac, rtol=0, atol=1e-7)


def test_one_token_in_euclidean_space_moves_by_its_value_plus_the_mlp():
    """n = 1 in R^d: the softmax puts all weight on the token itself, so ẋ = Vx + F(x) exactly."""
    W, U, b = mlp_of(3, 6, 0, scale=1.0)
    V = np.diag([0.3, -0.2, 0.1])
    model = mf.Model(beta=1.0, dim=3, V=V, Q=np.eye(3), K=np.eye(3), mlp=(W, U, b), activation="tanh")
    x0 = np.array([[0.4, -0.7, 1.1]])
    sol = solvers.Particles(model).solve(x0, [0.0, 1.0], domain="euclidean", rtol=1e-12, atol=1e-13)
    ff = model.feedforward
    ref = solve_ivp(lambda t, x: V @ x + ff.value(x[None])[0], (0, 1), x0[0], rtol=1e-12, atol=1e-13, method="DOP853")
    np.testing.assert_allclose(sol.positions[-1, 0], ref.y[:, -1], rtol=0, atol=1e-9)


@pytest.mark.parametrize("normalization", ["post", "ngpt", "peri"])
def test_the_mlp_adds_to_the_attention_output_before_the_speed(normalization):
    """θ̇ = s⁻¹ P_θ(A + F) with A the attention output of the model without the MLP (and s of A + F)."""
    D, n = 4, 6
    rng = np.random.default_rng(3)
    x = rng.standard_normal((n, D))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    radii = rng.uniform(0.5, 2.0, n)
    mlp = mlp_of(D, 5, 4, scale=1.0)
    with_mlp = solvers.Particles(mf.Model(1.5, D, normalization=normalization, mlp=mlp), sums="direct")
    weights = np.exp(1.5 * x @ x.T)
    A = (weights / weights.sum(axis=1, keepdims=True)) @ x             # (SA), Q = K = V = I
    total = A + with_mlp.model.feedforward.value(x)
    s_inv = {"post": np.ones(n), "ngpt": 1.0 / np.linalg.norm(total, axis=1),
             "peri": 1.0 / (radii * np.linalg.norm(total, axis=1))}[normalization]
    expected = s_inv[:, None] * (total - np.einsum("nd,nd->n", x, total)[:, None] * x)
    # n-term attention sums (weights up to e^β) plus the MLP's, divided by the speed
    assert_rounding_close(with_mlp.velocity(x, radii=radii), expected, scale=np.max(np.abs(total)) * np.max(s_inv),
                          terms=n * D, factor=16)


def circle_density(x):
    return 1.0 + 0.5 * x[..., 0] + 0.3 * x[..., 1]


@pytest.mark.parametrize("normalization", ["post", "sqrt-depth"])
def test_on_the_circle_fourier_characteristics_and_particles_agree(normalization):
    model = mf.Model(beta=2.0, dim=2, mlp=mlp_of(2, 8, 0, scale=1.0), normalization=normalization)
    t = [0.0, 1.0]
    fourier = solvers.FourierCircle(model, modes=256).solve(circle_density, t)
    characteristics = solvers.Lagrangian(model, nodes=1024).solve(circle_density, t)
    rule = trapezoid(4096)
    w = rule.weights * circle_density(rule.points)
    particles = solvers.Particles(model).solve((rule.points, w / w.sum()), t)
    final = [s.measure(-1) for s in (fourier, characteristics, particles)]
    assert mf.kernel_distance(final[0], final[1]) < 1e-10
    assert mf.kernel_distance(final[2], final[1]) < 1e-8
    without = solvers.Lagrangian(mf.Model(beta=2.0, dim=2, normalization=normalization), nodes=1024)
    assert mf.kernel_distance(without.solve(circle_density, t).measure(-1), final[1]) > 0.1   # the MLP matters
    # the mass is exact, and dE/dt of the discrete flow is the identity s∫Z⟨X, u⟩ρ with u the velocity
    np.testing.assert_allclose(fourier.diagnostics["mass"], 1.0, rtol=0, atol=1e-15)
    np.testing.assert_allclose(characteristics.diagnostics["mass"], 1.0, rtol=0, atol=1e-15)
    assert np.max(fourier.diagnostics["energy_rate_error"]) < 1e-10


def sphere_density(x):
    return 1.0 + 0.5 * x[..., 0] + 0.3 * x[..., 2]


@pytest.mark.slow
def test_on_the_sphere_harmonics_characteristics_and_quasi_particles_agree_at_t_2():
    """A random MLP of width 8: Lagrangian, SphericalHarmonics and 20 000 quasi particles to 2e-3 in D_4."""
    model = mf.Model(beta=1.0, dim=3, mlp=mlp_of(3, 8, 1))
    t = [0.0, 1.0, 2.0]
    harmonics = solvers.SphericalHarmonics(model, lmax="auto").solve(sphere_density, t)
    characteristics = solvers.Lagrangian(model, nodes=2048).solve(sphere_density, t)
    rule = gauss_legendre(100, 200)
    w = rule.weights * sphere_density(rule.points)
    particles = solvers.Particles(model).solve((rule.points, w / w.sum()), t)
    final = [s.measure(-1) for s in (harmonics, characteristics, particles)]
    for a, b in ((0, 1), (0, 2), (1, 2)):
        assert mf.kernel_distance(final[a], final[b], kappa=4.0) < 2e-3
    without = solvers.Lagrangian(mf.Model(beta=1.0, dim=3), nodes=2048).solve(sphere_density, t)
    assert mf.kernel_distance(without.measure(-1), final[1], kappa=4.0) > 0.02
    np.testing.assert_allclose(harmonics.diagnostics["mass"], 1.0, rtol=0, atol=1e-14)
    assert np.max(harmonics.diagnostics["energy_rate_error"]) < 1e-10


def test_harmonics_and_characteristics_agree_over_a_short_time():
    model = mf.Model(beta=1.0, dim=3, mlp=mlp_of(3, 8, 1), activation="tanh")
    t = [0.0, 0.25]
    harmonics = solvers.SphericalHarmonics(model, lmax=63).solve(sphere_density, t)
    characteristics = solvers.Lagrangian(model, nodes=512).solve(sphere_density, t)
    assert mf.kernel_distance(harmonics.measure(-1), characteristics.measure(-1)) < 1e-8
    np.testing.assert_allclose(harmonics.diagnostics["mass"], 1.0, rtol=0, atol=1e-14)
    assert np.max(harmonics.diagnostics["energy_rate_error"]) < 1e-10


def test_noise_and_heads_still_work_with_the_mlp():
    """Noise: the spectral right-hand side is the noiseless one (attention and MLP) minus νk²c_k. Heads:
    the particles move by P_x(Σ_h A_h + F)."""
    mlp = mlp_of(2, 4, 5, scale=1.0)
    noisy, quiet = (solvers.FourierCircle(mf.Model(beta=1.0, dim=2, noise=nu, mlp=mlp), modes=32) for nu in (0.3, 0.0))
    c = noisy.coefficients(circle_density)
    k = np.arange(33)
    np.testing.assert_allclose(noisy.rhs(c), quiet.rhs(c) - 0.3 * k ** 2 * c, rtol=0, atol=1e-14)
    rng = np.random.default_rng(6)
    heads = [(rng.standard_normal((2, 3)), rng.standard_normal((2, 3)), rng.standard_normal((3, 3))) for _ in range(2)]
    mlp3 = mlp_of(3, 4, 7, scale=1.0)
    x = rng.standard_normal((5, 3))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    with_mlp = solvers.Particles(mf.Model(beta=1.0, dim=3, heads=heads, mlp=mlp3)).velocity(x)
    plain = solvers.Particles(mf.Model(beta=1.0, dim=3, heads=heads)).velocity(x)
    F = mf.Model(beta=1.0, dim=3, mlp=mlp3).feedforward.tangent(x)
    np.testing.assert_allclose(with_mlp, plain + F, rtol=0, atol=1e-14)


def test_bad_input_names_mlp():
    with pytest.raises(ValueError, match=r"`mlp`.*\(3, 4\), \(4, 2\), \(4,\)"):
        mf.Model(beta=1.0, dim=3, mlp=(np.zeros((3, 4)), np.zeros((4, 2)), np.zeros(4)))
    ngpt = mf.Model(beta=1.0, dim=2, normalization="ngpt", mlp=mlp_of(2, 3, 0))
    for cls in (solvers.FourierCircle, solvers.Lagrangian):
        with pytest.raises(mf.UnsupportedModel, match="`mlp`"):
            cls(ngpt)


def test_cli_exits_2_for_a_bad_mlp_in_toml(tmp_path):
    config = tmp_path / "bad.toml"
    config.write_text('[solver]\nname = "fourier"\nmodes = 64\n\n[model]\nbeta = 1.0\ndim = 2\n'
                      'mlp = [[[1.0, 0.0]], [[1.0, 0.0]], [0.0]]\n\n[initial]\ndensity = "uniform"\n\n'
                      '[times]\nt_end = 1.0\n')
    proc = subprocess.run([sys.executable, "-m", "meanfield", "run", str(config), "--out", str(tmp_path / "o")],
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert "`model.mlp`" in proc.stderr and "(1, 2)" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_one_mlp_per_realisation_equals_separate_runs():
    """``mlp`` with a leading realisation axis (the phase diagram's ``--mlp-width``): realisation b moves as a
    run of the model with MLP b alone."""
    B, n, D = 3, 5, 3
    rng = np.random.default_rng(8)
    x0 = rng.standard_normal((B, n, D))
    x0 /= np.linalg.norm(x0, axis=-1, keepdims=True)
    W, U, b = phase_diagram_mlp(4, D, np.random.default_rng(9), size=B)
    options = dict(method="bs32", rtol=1e-10, atol=1e-12)
    batch = solvers.Particles(mf.Model(2.0, D)).solve(x0, [0.0, 1.0], mlp=(W, U, b), **options)
    for k in range(B):
        alone = solvers.Particles(mf.Model(2.0, D, mlp=(W[k], U[k], b[k]))).solve(x0[k], [0.0, 1.0], **options)
        np.testing.assert_allclose(batch.positions[-1, k], alone.positions[-1], rtol=0, atol=1e-8)
    with pytest.raises(ValueError, match="`mlp`"):
        solvers.Particles(mf.Model(2.0, D)).solve(x0, [0.0, 1.0], mlp=(W[:2], U[:2], b[:2]))


def test_masked_models_take_the_mlp_in_the_layered_continuum():
    """A causal mask: the layered FourierCircle and the labels in (σ, x) carry the MLP alike at every position."""
    model = mf.Model(beta=1.0, dim=2, mask="causal", position_bias=1.0,
                     mlp=phase_diagram_mlp(4, 2, np.random.default_rng(0)))
    options = dict(rtol=1e-10, atol=1e-12)
    spectral = solvers.FourierCircle(model, 48, positions=8).solve(circle_density, [0.0, 0.25], **options)
    labels = solvers.Lagrangian(model, 128, positions=8).solve(circle_density, [0.0, 0.25], **options)
    plain = solvers.Lagrangian(mf.Model(beta=1.0, dim=2, mask="causal", position_bias=1.0), 128,
                               positions=8).solve(circle_density, [0.0, 0.25], **options)
    for s in (0.25, 1.0):
        assert mf.kernel_distance(spectral.measure(-1, position=s), labels.measure(-1, position=s)) < 1e-10
        assert mf.kernel_distance(plain.measure(-1, position=s), labels.measure(-1, position=s)) > 0.02


def _rate_against_energy_difference(solver, density, h=1e-3, t=0.3):
    """The recorded energy rate identity at t and the central difference (E(t+h) − E(t−h))/(2h) of the
    recorded energy (error O(h²), about 1e-7 relative here)."""
    sol = solver.solve(density, [0.0, t - h, t, t + h], rtol=1e-12, atol=1e-14, progress=False)
    return sol.diagnostics["energy_rate_identity"][2], (sol.energy[3] - sol.energy[1]) / (2 * h)


@pytest.mark.parametrize("make, density", [
    (lambda mlp: solvers.FourierCircle(mf.Model(beta=2.0, dim=2, mlp=mlp_of(2, 8, 0, scale=1.0) if mlp else None),
                                       modes=48), circle_density),
    (lambda mlp: solvers.SphericalHarmonics(mf.Model(beta=1.0, dim=3, mlp=mlp_of(3, 8, 1) if mlp else None),
                                            lmax=32), sphere_density),
])
def test_the_energy_rate_identity_includes_the_mlp_term(make, density):
    """dE/dt of a run with an MLP is s∫Z⟨X, u⟩ρ with u = X + P_x F, not s∫Z|X|²ρ: the recorded identity
    matches a finite difference of the recorded energy, and the MLP changes the rate by far more than that."""
    identity, difference = _rate_against_energy_difference(make(True), density)
    assert identity == pytest.approx(difference, rel=1e-5)
    plain, _ = _rate_against_energy_difference(make(False), density)
    assert abs(plain - identity) > 0.05 * abs(identity)         # omitting the MLP term would fail above


def test_layered_runs_with_heads_and_an_mlp_record_no_energy_rate():
    """Several heads exist only in the layered (masked) equation, which has no energy identity and records
    none (solvers.layered): the one-density energy diagnostics, which take the model's MLP term, never
    see the heads' models (which carry no MLP). If the layered runs ever record an energy rate, it must
    include the MLP term as the test above does."""
    eye = np.eye(2)
    model = mf.Model(1.0, 2, mask="causal", heads=[(eye, eye, eye), (2 * eye, eye, eye)], position_bias=[0.5, 4.0],
                     mlp=mlp_of(2, 8, 0))
    sol = solvers.FourierCircle(model, modes=24, positions=8).solve(circle_density, [0.0, 0.1], progress=False)
    assert not any(key.startswith("energy") for key in sol.diagnostics)
    np.testing.assert_allclose(sol.diagnostics["mass"], 1.0, rtol=0, atol=1e-14)
