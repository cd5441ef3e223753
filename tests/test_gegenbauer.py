"""solvers.Gegenbauer and GegenbauerSeries: zonal densities on S^{d-1} in any dimension.

References: the exact linear growth rates (docs/mathematics.md §5), SphericalHarmonics at d = 3 and
FourierCircle at d = 2 (independent discretisations), particles (solvers.Particles, stratified
samples of the same zonal law), the energy identity (3.6) against finite differences of E_β(t),
the d → ∞ limit of the equiangular ODE (6.9)/(6.10), closed forms of the zonal law (incomplete
beta function) and of the von Mises–Fisher energy (one-dimensional quadrature).
"""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate, special

import meanfield as mf
import solvers
from meanfield.measures import densities as D
from meanfield.transformer.kernels import harmonic_dimension, kernel_multipliers
from meanfield.spaces.quadrature import gauss_gegenbauer
from meanfield.representations.gegenbauer import GegenbauerSeries, gegenbauer_sum, gegenbauer_table
from meanfield.measures.sampling import sample_zonal, zonal_quantiles
from meanfield.observables.wasserstein import w1_marginal

G = solvers.Gegenbauer


def pole(d):
    return np.eye(d)[-1]


def points_with_s(s, d, seed=0):
    """Random points of S^{d-1} with ⟨x, e_d⟩ = s."""
    g = np.random.default_rng(seed).standard_normal((np.size(s), d))
    g[:, -1] = 0
    u = g / np.linalg.norm(g, axis=1, keepdims=True)
    return np.asarray(s)[:, None] * pole(d) + np.sqrt(1 - np.asarray(s) ** 2)[:, None] * u


def mean_s(sol, i):
    rep = sol.representation
    s, w = gauss_gegenbauer(2 * rep.lmax + 2, rep.dim)
    return float(w @ (rep.profile(sol.data[i], s) * s))


# -- the basis -------------------------------------------------------------------------------------
@settings(max_examples=12, deadline=None)
@given(d=st.integers(2, 2048), lmax=st.integers(1, 200))
def test_polynomials_are_orthonormal_in_l2_sigma(d, lmax):
    s, w = gauss_gegenbauer(lmax + 1, d)            # exact for degree <= 2 lmax + 1
    P = gegenbauer_table(lmax, d, s)
    assert np.all(np.isfinite(P))
    assert np.abs((P * w[:, None]).T @ P - np.eye(lmax + 1)).max() < 1e-12


@pytest.mark.parametrize("d", [2, 3, 5, 16])
def test_polynomials_are_the_normalised_zonal_harmonics(d):
    """p_l = sqrt(dim H_l)·C_l^λ/C_l^λ(1) (scipy), p_l' by finite differences."""
    lam, L = 0.5 * (d - 2), 30
    s = np.linspace(-0.95, 0.95, 9)
    ref = np.array([np.sqrt(harmonic_dimension(d, l)) * (special.eval_chebyt(l, s) if d == 2 else
                    special.eval_gegenbauer(l, lam, s) / special.eval_gegenbauer(l, lam, 1.0)) for l in range(L + 1)]).T
    P, dP = gegenbauer_table(L, d, s, derivative=True)
    assert np.abs(P - ref).max() <= 1e-12 * np.abs(ref).max()
    h = 1e-6
    fd = (gegenbauer_table(L, d, s + h) - gegenbauer_table(L, d, s - h)) / (2 * h)
    assert np.abs(dP - fd).max() <= 1e-7 * np.abs(fd).max()
    assert np.allclose(gegenbauer_table(L, d, 1.0) ** 2, harmonic_dimension(d, np.arange(L + 1)), rtol=1e-11)


def test_no_overflow_at_dimension_1024():
    """C_l^λ(1) overflows for d = 1024, l >= 303; the orthonormal recurrence does not: at the Gauss
    nodes Σ_l p_l(s_j)² w_j <= 1 (Christoffel), and p_l(1) = sqrt(dim H_l) stays finite."""
    d, L = 1024, 320
    assert special.gammaln(L + d - 2) - special.gammaln(L + 1) - special.gammaln(d - 2) > np.log(np.finfo(float).max)
    s, w = gauss_gegenbauer(G(mf.Model(beta=1.0, dim=d), L).nodes.size, d)
    P = gegenbauer_table(L, d, s)
    assert np.all(np.isfinite(P))
    assert np.max((P ** 2).sum(1) * w) <= 1 + 1e-10
    top = gegenbauer_table(L, d, 1.0)[-1]
    log_dim = np.log(2 * L + d - 2) + special.gammaln(L + d - 2) - special.gammaln(L + 1) - special.gammaln(d - 1)
    assert np.isfinite(top) and abs(2 * np.log(top) - log_dim) < 1e-9 * log_dim


@pytest.mark.parametrize("d", [2, 3, 7, 128])
def test_marginal_cdf_is_exact(d):
    rep = GegenbauerSeries(20, d)
    c = np.random.default_rng(d).standard_normal(21) * np.exp(-np.arange(21) / 3)
    c[0] = 1.0
    for s in (-0.6, 0.0, 0.4, 0.9):
        ref = integrate.quad(lambda t: rep.marginal_density(c, t), -1, s, epsabs=1e-14, limit=200)[0]
        assert abs(rep.marginal_cdf(c, s) - ref) < 1e-11
    assert np.allclose(rep.marginal_cdf(c, np.array([-1.0, 1.0])), [0.0, 1.0], atol=1e-15)


def test_energy_of_von_mises_fisher_matches_a_one_dimensional_integral():
    """E_β[vMF_κ] = (1/2β) ∫ a_0(|βx + κe|) e^{κs} dσ / a_0(κ)², with |βx + κe|² = β² + κ² + 2βκs."""
    d, beta, kappa = 16, 3.0, 5.0
    c = G(mf.Model(beta=beta, dim=d), 64).coefficients(D.von_mises_fisher(pole(d), kappa))
    rep = GegenbauerSeries(64, d)
    a0 = lambda r: kernel_multipliers(r, d, 0)[0]
    f = lambda s: a0(np.sqrt(beta ** 2 + kappa ** 2 + 2 * beta * kappa * s)) * np.exp(kappa * s) * \
        np.exp(special.gammaln(d / 2) - special.gammaln((d - 1) / 2)) / np.sqrt(np.pi) * (1 - s * s) ** ((d - 3) / 2)
    ref = integrate.quad(f, -1, 1, epsabs=0, epsrel=1e-13)[0] / (2 * beta * a0(kappa) ** 2)
    assert abs(rep.energy(beta, c) - ref) <= 1e-12 * ref


def test_representation_round_trip_grid_measure_and_embed(tmp_path):
    d = 9
    m = mf.Model(beta=2.0, dim=d)
    sol = G(m, 24).solve(D.von_mises_fisher(pole(d), 3.0), [0.0, 0.3])
    back = mf.load(sol.save(tmp_path / "g.nc"))
    assert back.representation.name == "gegenbauer" and back.representation.dim == d
    assert np.array_equal(back.data, sol.data) and np.allclose(back.energy, sol.energy, rtol=0, atol=0)
    x = points_with_s(np.linspace(-0.9, 0.9, 7), d)
    assert np.allclose(back.density(x, 1), sol.density(x, 1), rtol=1e-15)
    da = sol.state(1).to_grid(11)
    assert da.dims == ("s",) and np.allclose(da.values, sol.representation.profile(sol.data[1], da["s"].values))
    pts, w = sol.measure(1)
    assert np.allclose(np.linalg.norm(pts, axis=1), 1) and abs(w.sum() - 1) < 1e-14
    s, q = gauss_gegenbauer(50, d)
    moments = [w @ (pts @ pole(d)) ** k for k in (1, 2, 3)]
    exact = [q @ (sol.representation.profile(sol.data[1], s) * s ** k) for k in (1, 2, 3)]
    assert np.allclose(moments, exact, atol=1e-14)
    fine = GegenbauerSeries(48, d)
    assert np.array_equal(fine.embed(sol.data, sol.representation)[:, :25], sol.data)


def test_reliable_interval_bounds_the_effect_of_rounding():
    """On [−s*, s*] a perturbation of 1e-16·‖c‖ per coefficient moves f by <= 1e-6·‖c‖; at the pole of
    S^127 it would move f by more than ‖c‖ (p_l(1) = sqrt(dim H_l)), which is why grids stop at s*."""
    assert GegenbauerSeries(128, 3).reliable_interval() == 1.0
    rep = GegenbauerSeries(128, 128)
    edge = rep.reliable_interval()
    assert 0.5 < edge < 0.9
    noise = 1e-16 * np.ones(129)
    s = np.linspace(-edge, edge, 201)
    assert np.abs(gegenbauer_sum(noise, 128, s)).max() <= 1e-6
    assert abs(gegenbauer_sum(noise, 128, 1.0)) > 1.0
    assert rep.to_grid(np.r_[1.0, np.zeros(128)], 5)["s"].values[-1] == edge


# -- exact linear rates (docs/mathematics.md §5) ---------------------------------------------------
@pytest.mark.parametrize("noise", [0.0, 0.002])
@pytest.mark.parametrize("v", [1.0, -1.0])
@pytest.mark.parametrize("normalized", [True, False])
@pytest.mark.parametrize("d", [4, 5, 16, 128, 1024])
def test_linear_growth_rates(d, normalized, v, noise):
    """ς_l = v l(l+d−2) a_l/β (USA), v l(l+d−2) a_l/(β a_0) (SA), minus ν l(l+d−2): the derivative of
    the right-hand side at ρ = 1 in the direction p_l (central difference; exact for the quadratic USA)."""
    beta, L, K = 2.0, 24, 12
    model = mf.Model(beta=beta, dim=d, normalized=normalized, V=v, noise=noise)
    solver = G(model, L)
    # a_l = Γ(d/2)(β/2)^l Σ_k (β/2)^{2k}/(k! Γ(k + l + d/2)): the Bessel series, summed in log space
    l, k = np.arange(L + 1)[:, None], np.arange(80)[None, :]
    log_a = special.gammaln(d / 2) + special.logsumexp(
        (2 * k + l) * np.log(beta / 2) - special.gammaln(k + 1) - special.gammaln(k + l + d / 2), axis=1)
    l = np.arange(L + 1)
    exact = v * l * (l + d - 2) * np.exp(log_a - np.log(beta) - (log_a[0] if normalized else 0.0)) \
        - noise * l * (l + d - 2)
    eps = 1e-5
    for k in range(1, K + 1):
        c = np.zeros(L + 1)
        c[0], c[k] = 1.0, eps
        up = solver.rhs(c)
        c[k] = -eps
        column = (up - solver.rhs(c)) / (2 * eps)           # the Jacobian at ρ = 1 applied to p_k
        assert abs(column[k] - exact[k]) <= 1e-6 * abs(exact[k]), (k, column[k], exact[k])
        assert np.abs(np.delete(column, k)).max() <= 1e-9 * abs(exact[k])   # p_k is an eigenvector


def test_tiny_perturbation_grows_at_the_exact_rate():
    d, beta = 5, 3.0
    model = mf.Model(beta=beta, dim=d)
    rates = mf.linear_growth_rates(model, 4)
    eps, T = 1e-9, 0.5
    c0 = np.zeros(25)
    c0[0], c0[3] = 1.0, eps
    sol = G(model, 24).solve(c0, [0.0, T], rtol=1e-12, atol=1e-24)
    measured = np.log(sol.data[1, 3] / sol.data[0, 3]) / T
    assert abs(measured - rates[3]) <= 1e-6 * rates[3]


# -- agreement with the other solvers --------------------------------------------------------------
def two_caps(e, k1=6.0, k2=3.0, w=0.6):
    return D.mixture([D.von_mises_fisher(e, k1), D.von_mises_fisher(-e, k2)], [w, 1 - w])


@pytest.mark.parametrize("case", ["vmf-SA", "caps-SA", "vmf-USA", "caps-USA"])
def test_agrees_with_spherical_harmonics_at_d3(case):
    shape, kind = case.split("-")
    e = pole(3)
    rho0 = D.von_mises_fisher(e, 3.0) if shape == "vmf" else two_caps(e)
    model = mf.Model(beta=1.5 if kind == "SA" else 1.0, dim=3, normalized=kind == "SA", noise=0.02)
    t = [0.0, 0.25, 0.5]
    opts = dict(rtol=1e-12, atol=1e-14)
    sg = G(model, 64).solve(rho0, t, **opts)
    sh = solvers.SphericalHarmonics(model, 64).solve(rho0, t, **opts)
    x = mf.sample(D.uniform(), 400, 3, rng=1)[0]
    for i in range(len(t)):
        assert np.abs(sg.density(x, i) - sh.density(x, i)).max() <= 1e-9
    assert np.allclose(sg.energy, sh.energy, rtol=1e-12)


@pytest.mark.parametrize("axis", [None, (1.0, 0.0)])
@pytest.mark.parametrize("normalized", [True, False])
def test_agrees_with_fourier_circle_at_d2(axis, normalized):
    """Even densities on S^1 (symmetric about the axis; default axis e_2)."""
    e = np.array([0.0, 1.0]) if axis is None else np.array(axis)
    model = mf.Model(beta=1.0, dim=2, normalized=normalized, V=1.0 if normalized else -1.0, noise=0.05)
    t = [0.0, 0.5, 1.0]
    sg = G(model, 64, axis=axis).solve(two_caps(e, 4.0, 2.0, 0.7), t, rtol=1e-12, atol=1e-14)
    sf = solvers.FourierCircle(model, 64).solve(two_caps(e, 4.0, 2.0, 0.7), t, rtol=1e-12, atol=1e-14)
    x = mf.sample(D.uniform(), 400, 2, rng=2)[0]
    for i in range(len(t)):
        assert np.abs(sg.density(x, i) - sf.density(x, i)).max() <= 1e-9


def _particles_vs_pde(d, kappa, lmax, n, t):
    model = mf.Model(beta=2.0, dim=d)
    rho0 = D.von_mises_fisher(pole(d), kappa)
    pde = G(model, lmax).solve(rho0, t)
    cloud = solvers.Particles(model, diagnostics="none").solve(mf.sample(rho0, n, d, method="quasi"), t,
                                                               rtol=1e-5, atol=1e-8)
    rep = pde.representation
    return np.array([w1_marginal(lambda s, i=i: rep.marginal_cdf(pde.data[i], s), cloud.measure(i))
                     for i in range(len(t))])


def test_agrees_with_particles_quick():
    """1000 stratified particles at d = 8, (SA) β = 2, t in [0, 3]: s-marginal W1 <= 1e-2 (measured
    7e-3; the O(e^β/n) self-interaction bias of the particle softmax dominates)."""
    w1 = _particles_vs_pde(8, 0.1, 64, 1000, np.linspace(0, 3, 4))
    assert w1[0] < 1e-3 and w1.max() <= 1e-2


@pytest.mark.slow
@pytest.mark.parametrize("d, kappa, lmax", [(8, 0.1, 64), (32, 0.2, 128)])
def test_agrees_with_20000_particles(d, kappa, lmax):
    """s-marginal W1 between the PDE and 20 000 stratified particles <= 5e-3 on t in [0, 5] ((SA), β = 2)."""
    w1 = _particles_vs_pde(d, kappa, lmax, 20000, np.linspace(0, 5, 11))
    assert w1.max() <= 5e-3


# -- conservation and the energy identity ----------------------------------------------------------
@pytest.mark.parametrize("normalized", [True, False])
def test_mass_exact_and_energy_identity(normalized):
    """Mass is constant to the last bit (p_0' = 0) and 1 to 1e-13; dE_β/dt from finite differences of
    the saved energies matches the identity (3.6) (v∫Z|X|²dμ for (SA), v∫|X|²dμ for (USA))."""
    d = 6
    model = mf.Model(beta=2.0 if normalized else 1.0, dim=d, normalized=normalized)
    t = np.linspace(0.0, 0.5, 101)
    sol = G(model, 64).solve(two_caps(pole(d), 4.0, 2.0), t, rtol=1e-11, atol=1e-13)
    assert np.ptp(sol.mass) == 0.0 and abs(sol.mass[0] - 1) <= 1e-13
    assert np.max(sol.diagnostics["energy_rate_error"]) <= 1e-10
    h = t[1] - t[0]
    fd = (sol.energy[2:] - sol.energy[:-2]) / (2 * h)
    ident = sol.diagnostics["energy_rate_identity"][1:-1]
    assert np.abs(fd - ident).max() <= 1e-4 * np.abs(ident).max()
    assert np.all(np.diff(sol.energy) > 0)                  # (3.6): E_β increases for V = I


def test_stable_at_dimension_1024_and_follows_the_equiangular_limit():
    """d = 1024: a cap with s̄ ≈ 0.1 concentrates in s (width ~ 1/sqrt d), so every pair of points
    has ⟨x, y⟩ ≈ s̄² =: γ, and γ solves the n → ∞ limit of (6.9), γ' = 2γ(1 − γ), i.e. s̄' = s̄(1 − s̄²)."""
    d = 1024
    model = mf.Model(beta=2.0, dim=d)
    t = np.linspace(0.0, 0.6, 4)
    sol = G(model, 128).solve(D.von_mises_fisher(pole(d), 100.0), t)
    assert np.all(np.isfinite(sol.data)) and np.ptp(sol.mass) == 0.0
    s0 = mean_s(sol, 0)
    g0 = s0 * s0
    ode = np.sqrt(g0 * np.exp(2 * t) / (1 - g0 + g0 * np.exp(2 * t)))
    measured = np.array([mean_s(sol, i) for i in range(t.size)])
    assert measured[-1] > 1.5 * measured[0]
    assert np.abs(measured - ode).max() <= 2e-3
    assert np.max(sol.diagnostics["energy_rate_error"]) <= 1e-8


# -- automatic resolution and continuation ----------------------------------------------------------
def test_auto_doubles_lmax_and_matches_a_fixed_run():
    d = 4
    model = mf.Model(beta=4.0, dim=d)
    t = [0.0, 1.0, 2.0]
    auto = G(model, "auto", tail_tol=1e-10).solve(D.von_mises_fisher(pole(d), 4.0), t, rtol=1e-11, atol=1e-14)
    assert auto.stats["lmax_final"] > 32 and auto.data.shape[1] == auto.stats["lmax_final"] + 1
    fixed = G(model, auto.stats["lmax_final"]).solve(D.von_mises_fisher(pole(d), 4.0), t, rtol=1e-11, atol=1e-14)
    x = points_with_s(np.linspace(-0.9, 0.95, 9), d)
    assert np.abs(auto.density(x, -1) - fixed.density(x, -1)).max() <= 1e-8 * np.abs(fixed.density(x, -1)).max()


def test_under_resolved_and_continuation():
    d = 4
    model = mf.Model(beta=4.0, dim=d)
    with pytest.raises(mf.UnderResolved, match="lmax=32") as info:
        G(model, 32).solve(D.von_mises_fisher(pole(d), 4.0), [0.0, 0.1, 6.0])
    part = info.value.solution
    assert part.t[-1] == 0.1 and 0.1 < info.value.t < 6.0
    whole = G(model, 32).solve(D.von_mises_fisher(pole(d), 4.0), [0.0, 0.4, 0.8])
    rest = G(model, 32).solve(whole[:2], [0.4, 0.8])
    assert np.allclose(rest.data[-1], whole.data[-1], rtol=1e-7, atol=1e-10)


def test_ill_conditioned_state_stops_the_run():
    """d = 128: as the cap moves towards the pole ‖ρ‖_{L²(σ)} grows like e^{d s̄²/2}; past max_norm the run stops."""
    d = 128
    with pytest.raises(mf.UnderResolved, match="max_norm") as info:
        G(mf.Model(beta=2.0, dim=d), 128, max_norm=1e4).solve(D.von_mises_fisher(pole(d), 10.0), [0.0, 0.5, 3.0])
    sol = info.value.solution
    assert sol.diagnostics["l2_norm"][-1] < 1e4 and 0.5 < info.value.t < 3.0


def test_initial_forms_agree():
    """A callable, a profile (`densities.zonal`) and coefficients give the same state; a rotated axis too."""
    d = 7
    kappa = 2.5
    a0 = kernel_multipliers(kappa, d, 0)[0]
    profile = D.zonal(lambda s: np.exp(kappa * s) / a0, d)
    callable_ = lambda x: np.exp(kappa * x[..., -1]) / a0   # noqa: E731
    solver = G(mf.Model(beta=1.0, dim=d), 32)
    c1, c2 = solver.coefficients(profile), solver.coefficients(callable_)
    assert np.abs(c1 - c2).max() < 1e-14
    assert np.abs(solver.coefficients(D.von_mises_fisher(pole(d), kappa)) - c1).max() < 1e-14
    axis = np.ones(d) / np.sqrt(d)
    rotated = G(mf.Model(beta=1.0, dim=d), 32, axis=axis).coefficients(D.von_mises_fisher(axis, kappa))
    assert np.abs(rotated - c1).max() < 1e-13
    s1 = solver.solve(c1, [0.0, 0.2])
    s2 = solver.solve(callable_, [0.0, 0.2])
    assert np.abs(s1.data - s2.data).max() < 1e-13


# -- particles with the same law ---------------------------------------------------------------------
@pytest.mark.parametrize("d", [2, 3, 8, 128, 1024])
def test_stratified_zonal_sample_matches_the_law_of_s(d):
    """W1 between the law of s = ⟨x, e⟩ under σ (regularised incomplete beta) and n stratified points is
    at most 1/(2n) (half a quantile cell), and iid points are at the n^{-1/2} scale."""
    uniform = lambda s: special.betainc((d - 1) / 2, (d - 1) / 2, (1 + np.asarray(s)) / 2)  # noqa: E731
    flat = D.zonal(lambda s: np.ones_like(s), d)
    for n in (1000, 8000):
        x, w = mf.sample(flat, n, d, method="stratified")
        assert np.allclose(np.linalg.norm(x, axis=1), 1, atol=1e-14) and np.allclose(w, 1 / n)
        assert w1_marginal(uniform, (x, w)) <= 0.51 / n
    x, w = mf.sample(flat, 4000, d, method="iid", rng=3)
    assert 1e-4 < w1_marginal(uniform, (x, w)) < 3 / np.sqrt(4000)


def test_zonal_sample_directions_are_uniform_on_the_orthogonal_sphere():
    d, n = 6, 40000
    x, _ = sample_zonal(lambda s: np.ones_like(s), n, d, method="iid", rng=0)
    u = x[:, :-1] / np.linalg.norm(x[:, :-1], axis=1, keepdims=True)
    assert np.abs(u.T @ u / n - np.eye(d - 1) / (d - 1)).max() < 0.01
    q = zonal_quantiles(lambda s: np.exp(2 * s), d, np.array([0.1, 0.5, 0.9]))
    F = GegenbauerSeries(40, d).marginal_cdf
    c = G(mf.Model(beta=1.0, dim=d), 40).coefficients(D.zonal(lambda s: np.exp(2 * s), d), normalize=True)
    assert np.allclose(F(c, q), [0.1, 0.5, 0.9], atol=1e-8)


def test_w1_marginal_exact_values():
    d = 5
    a = (points_with_s(np.array([0.2]), d), np.ones(1))
    b = (points_with_s(np.array([-0.3, 0.7]), d, seed=1), np.array([0.5, 0.5]))
    assert abs(w1_marginal(a, b) - 0.5 * (0.5 + 0.5)) < 1e-15
    assert abs(w1_marginal(lambda s: (np.asarray(s) + 1) / 2, a) - (1.2 ** 2 + 0.8 ** 2) / 4) < 1e-12
    rng = np.random.default_rng(0)
    sa, sb = rng.uniform(-1, 1, 300), rng.uniform(-1, 1, 300)
    ref = np.mean(np.abs(np.sort(sa) - np.sort(sb)))       # equal sizes and weights: match sorted values
    got = w1_marginal((points_with_s(sa, d), np.full(300, 1 / 300)), (points_with_s(sb, d, 1), np.full(300, 1 / 300)))
    assert abs(got - ref) < 1e-13


# -- bad input -------------------------------------------------------------------------------------
def test_bad_input():
    d = 5
    model = mf.Model(beta=2.0, dim=d)
    not_zonal = D.von_mises_fisher(np.eye(d)[0], 2.0)
    with pytest.raises(ValueError, match=r"`rho0`"):
        G(model, 32).solve(not_zonal, [0.0, 0.1])
    with pytest.raises(ValueError, match=r"`lmax`"):
        G(mf.Model(beta=200.0, dim=d), 8)
    with pytest.raises(ValueError, match=r"`lmax`"):
        G(model, 2)
    with pytest.raises(ValueError, match=r"`lmax`"):
        G(model, "fine")
    with pytest.raises(ValueError, match=r"`axis`"):
        G(model, 32, axis=np.ones(d + 1))
    with pytest.raises(ValueError, match=r"`max_norm`"):
        G(model, 32, max_norm=0.5)
    with pytest.raises(mf.UnsupportedModel):
        G(mf.Model(beta=1.0, dim=d, V=np.diag(np.arange(1.0, d + 1))), 32)
    with pytest.raises(ValueError, match=r"`initial`"):
        G(model, 32).solve(np.ones(40), [0.0, 0.1])
    with pytest.raises(ValueError, match=r"`rho0`"):
        G(model, 32).solve(lambda x: -np.ones(x.shape[:-1]), [0.0, 0.1])
    with pytest.raises(ValueError, match=r"`method`"):
        mf.sample(lambda x: np.ones(x.shape[:-1]), 10, d, method="stratified")
