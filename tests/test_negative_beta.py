"""β < 0 (docs/negative-beta.md): multipliers, exact linear rates, energy bounds, kernel sums, particles.

References: scipy.special.iv and spherical_in at a negative argument (integer orders are real there),
Gauss–Gegenbauer quadrature of the Funk–Hecke integral, the closed forms of docs/mathematics.md §4–§5,
direct double sums, and the equilateral triangle of n = 3 on S^1, stable exactly for β < −2/3.
"""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import special

import meanfield as mf
import solvers
from meanfield.measures import densities as D
from meanfield.observables.energy import energy_bounds
from meanfield.sums.kernelsums import kernel_sums
from meanfield.representations.harmonics import alm_index
from meanfield.sums.spectralsums import error_bound, spectral_energy
from solvers import stationary
from tolerances import assert_rounding_close, rounding


def angle(x):
    return np.arctan2(x[..., 1], x[..., 0])


def funk_hecke(beta, dim, lmax, nodes=80):
    """a_l(β) = ∫ e^{βs} C_l^λ(s)/C_l^λ(1) (1 − s²)^{λ−1/2} ds / ∫ (1 − s²)^{λ−1/2} ds (λ = (d−2)/2), by
    Gauss–Gegenbauer quadrature: an independent reference for any sign of β (docs/mathematics.md §3)."""
    lam = 0.5 * (dim - 2)
    s, w = special.roots_gegenbauer(nodes, lam)
    C = np.array([special.eval_gegenbauer(l, lam, s) / special.eval_gegenbauer(l, lam, 1.0) for l in range(lmax + 1)])
    return C @ (w * np.exp(beta * s)) / w.sum()


# -- the multipliers: a_l(−β) = (−1)^l a_l(β) ------------------------------------------------------------
@settings(max_examples=40, deadline=None)
@given(beta=st.floats(-40.0, -1e-3), dim=st.sampled_from([3, 4, 5, 7]))
def test_multipliers_match_funk_hecke_quadrature(beta, dim):
    L = 12
    a = mf.kernel_multipliers(beta, dim, L)
    ref = funk_hecke(beta, dim, L)
    big = np.abs(ref) > 1e-200
    assert np.all(np.sign(a[big]) == (-1.0) ** np.arange(L + 1)[big])       # alternating signs
    assert np.allclose(a, ref, rtol=1e-11, atol=1e-14 * np.exp(abs(beta)))


@settings(max_examples=40, deadline=None)
@given(beta=st.floats(-300.0, -1e-3))
def test_multipliers_on_s1_and_s2_are_bessel_at_a_negative_argument(beta):
    L = 40
    k = np.arange(L + 1)
    scale = np.exp(-abs(beta))
    assert np.allclose(mf.kernel_multipliers(beta, 2, L, scaled=True), special.ive(k, beta),
                       rtol=1e-12, atol=1e-300)           # ive = iv·e^{−|x|}; I_k(β) = (−1)^k I_k(|β|)
    if abs(beta) < 200:
        ref = special.spherical_in(k, beta) * scale
        assert np.allclose(mf.kernel_multipliers(beta, 3, L, scaled=True), ref, rtol=1e-11, atol=1e-14 * abs(ref[0]))


def bessel_series(beta, dim, lmax, terms=60):
    """a_l(β) = Γ(d/2) Σ_k (β/2)^{2k+l} / (k! Γ(k + l + d/2)), summed at the signed β (docs/mathematics.md §3)."""
    l, k = np.arange(lmax + 1)[:, None], np.arange(terms)[None, :]
    return special.gamma(dim / 2) * np.sum((beta / 2) ** (2 * k + l) / (special.factorial(k)
                                                                          * special.gamma(k + l + dim / 2)), axis=1)


@pytest.mark.parametrize("dim", [2, 3, 6])
@pytest.mark.parametrize("beta", [-1e-5, -5e-4, -2e-3, -0.7, -9.0])
def test_velocity_multipliers_are_even_or_odd(beta, dim):
    """c_l = a_l/β: c_l(β) = (−1)^{l+1} c_l(|β|), both through the small-β series (|β| < 1e-3) and the
    Bessel functions, against a_l/β from the power series at the signed β."""
    c = mf.velocity_multipliers(beta, dim, 8)
    ref = bessel_series(beta, dim, 8) / beta
    assert np.allclose(c[1:], ref[1:], rtol=1e-12, atol=0)
    assert np.all(c[1::2] > 0) and np.all(c[2::2] < 0)


@pytest.mark.parametrize("dim", [2, 3, 5])
def test_funk_hecke_sums_at_the_poles(dim):
    """Σ_l N_l a_l(β) = e^β (the kernel at ⟨x,y⟩ = 1) and Σ_l (−1)^l N_l a_l(β) = e^{−β} (at −1)."""
    beta, L = -3.0, 60
    N = mf.kernels.harmonic_dimension(dim, np.arange(L + 1))
    a = mf.kernel_multipliers(beta, dim, L)
    assert abs(N @ a - np.exp(beta)) <= 1e-13 * np.exp(abs(beta))
    assert abs((N * (-1.0) ** np.arange(L + 1)) @ a - np.exp(-beta)) <= 1e-13 * np.exp(abs(beta))


def test_minimum_degree_is_even_in_beta():
    for beta in (0.3, 7.0, 150.0):
        assert mf.kernels.minimum_degree(-beta, 3) == mf.kernels.minimum_degree(beta, 3)


# -- exact linear rates, measured from the solvers' runs (docs/mathematics.md §5) ------------------------
def rate_s1(beta, k, sa):
    """ς_k = k² I_k(β)/(β I_0(β)) (SA), k² I_k(β)/β (USA); for β < 0 odd k grow, even k decay."""
    r = k * k * special.iv(k, beta) / beta
    return r / special.iv(0, beta) if sa else r


def rate_s2(beta, l, sa):
    """ς_l = l(l+1) i_l(β)/(β i_0(β)) (SA), l(l+1) i_l(β)/β (USA)."""
    r = l * (l + 1) * special.spherical_in(l, beta) / beta
    return r / special.spherical_in(0, beta) if sa else r


@pytest.mark.parametrize("sa", [True, False], ids=["SA", "USA"])
@pytest.mark.parametrize("beta", [-0.5, -2.0, -8.0])
def test_fourier_rates(beta, sa):
    model = mf.Model(beta=beta, dim=2, normalized=sa)
    eps = 1e-8
    for k in range(1, 7):
        rate = rate_s1(beta, k, sa)
        assert (rate > 0) == (k % 2 == 1)
        T = 1.0 / max(abs(rate), 1.0)
        sol = solvers.FourierCircle(model, modes=32, w1=False).solve(lambda x, k=k: 1 + eps * np.cos(k * angle(x)),
                                                                     [0.0, T], rtol=1e-12, atol=1e-24)
        measured = np.log(abs(sol.data[1, k]) / abs(sol.data[0, k])) / T
        assert abs(measured - rate) <= 1e-6 * abs(rate), (k, measured, rate)
        assert abs(mf.linear_growth_rates(model, 6)[k] - rate) <= 1e-12 * abs(rate)


@pytest.mark.parametrize("sa", [True, False], ids=["SA", "USA"])
@pytest.mark.parametrize("beta,l,m", [(-1.0, 1, 0), (-1.0, 2, 1), (-4.0, 3, -2), (-4.0, 4, 0)])
def test_harmonics_rates(beta, l, m, sa):
    """log(ρ_lm(T)/ρ_lm(0))/T = ς_l of the S^2 formula, to 1e-6 relative (integrated in time)."""
    model = mf.Model(beta=beta, dim=3, normalized=sa)
    L = max(8, mf.kernels.minimum_degree(beta, 3))
    rate = rate_s2(beta, l, sa)
    assert (rate > 0) == (l % 2 == 1)
    assert abs(mf.linear_growth_rates(model, L)[l] - rate) <= 1e-12 * abs(rate)
    T = 1.0 / abs(rate)
    sol = solvers.SphericalHarmonics(model, lmax=L).solve(D.perturbed_uniform(1e-9, l, order=m), [0, T],
                                                          rtol=1e-12, atol=1e-22, progress=False)
    c = sol.data[:, 0 if m >= 0 else 1, l, abs(m)]
    measured = np.log(c[1] / c[0]) / T
    assert abs(measured - rate) <= 1e-6 * abs(rate), (measured, rate)
    rhs = solvers.SphericalHarmonics(model, lmax=L).start(D.uniform()).rhs     # and the Jacobian of the rhs
    S = solvers.SphericalHarmonics(model, lmax=L)
    ap, am = S.alm_of(D.perturbed_uniform(1e-4, l, order=m)), S.alm_of(D.perturbed_uniform(-1e-4, l, order=m))
    i = alm_index(l, abs(m), L)
    assert abs(((rhs(0, ap) - rhs(0, am))[i] / (ap[i] - am[i])).real - rate) <= 1e-6 * abs(rate)


@pytest.mark.parametrize("sa", [True, False], ids=["SA", "USA"])
@pytest.mark.parametrize("dim", [3, 4])
def test_gegenbauer_rates(dim, sa):
    """Zonal perturbations p_l: the rate of the S^2 formula (d = 3) and of a_l = (2/β) I_{l+1}(β) (d = 4)."""
    beta, L = -2.5, 24
    model = mf.Model(beta=beta, dim=dim, normalized=sa)
    for l in (1, 2, 3):
        if dim == 3:
            rate = rate_s2(beta, l, sa)
        else:
            a = (2 / beta) * special.iv(np.array([l, 0]) + 1, beta)
            rate = l * (l + 2) * a[0] / beta / (a[1] if sa else 1.0)
        c0 = np.zeros(L + 1)
        c0[0], c0[l] = 1.0, 1e-9
        T = 1.0 / abs(rate)
        sol = solvers.Gegenbauer(model, L).solve(c0, [0.0, T], rtol=1e-12, atol=1e-24)
        measured = np.log(sol.data[1, l] / sol.data[0, l]) / T
        assert abs(measured - rate) <= 1e-6 * abs(rate), (l, measured, rate)


def test_energy_identity_of_a_spectral_run():
    """dE/dt = ∫ Z|X|² dμ (3.6) holds for β < 0 too (δE/δμ = Z/β): the discrete rate matches the
    identity, and the energy increases."""
    rho0 = D.mixture([D.von_mises_fisher([1.0, 0.0], 3.0), D.von_mises_fisher([-0.6, 0.8], 2.0)], [0.6, 0.4])
    for sa in (True, False):
        sol = solvers.FourierCircle(mf.Model(beta=-2.0, dim=2, normalized=sa), modes=96, w1=False).solve(
            rho0, np.linspace(0, 0.5, 6), rtol=1e-11, atol=1e-13)
        assert np.max(sol.diagnostics["energy_rate_error"]) < 1e-9
        assert np.all(np.diff(sol.energy) > 0)


# -- energy: e^β <= ∬ e^{β⟨x,y⟩} dμ dμ <= cosh β for β < 0 (docs/mathematics.md §4) ---------------------------
@settings(max_examples=30, deadline=None)
@given(beta=st.floats(-30.0, -1e-2), n=st.integers(1, 40), dim=st.sampled_from([2, 3, 5]), seed=st.integers(0, 10 ** 6))
def test_energy_between_the_dirac_and_the_antipodal_pair(beta, n, dim, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, dim))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    w = rng.random(n) + 0.01
    w /= w.sum()
    e = mf.interaction_energy(beta, (x, w))
    direct = w @ np.exp(beta * (x @ x.T)) @ w / (2 * beta)
    assert e == pytest.approx(direct, rel=1e-12)
    low, high = energy_bounds(beta, dim)
    assert low * (1 + 1e-12) <= e <= high * (1 - 1e-12) or n == 1


@pytest.mark.parametrize("dim", [2, 3, 4])
def test_the_extremes_for_negative_beta(dim):
    beta = -1.3
    e = np.eye(dim)[0]
    low, high = energy_bounds(beta, dim)
    assert mf.interaction_energy(beta, (e[None], [1.0])) == pytest.approx(high, rel=1e-15)
    assert high == pytest.approx(np.exp(beta) / (2 * beta), rel=1e-15)
    assert mf.interaction_energy(beta, (np.stack([e, -e]), [0.5, 0.5])) == pytest.approx(low, rel=1e-15)
    assert low == pytest.approx(np.cosh(beta) / (2 * beta), rel=1e-15)
    uniform = mf.uniform_energy(beta, dim)                       # strictly between: I_0(β)/(2β) on S^1
    assert low < uniform < high
    if dim == 2:
        assert uniform == pytest.approx(special.iv(0, beta) / (2 * beta), rel=1e-14)
    if dim <= 3:                                                 # quasi points integrate well on S^1, S^2
        x, w = mf.sample(D.uniform(), 4000, dim, method="quasi")
        assert mf.interaction_energy(beta, (x, w)) == pytest.approx(uniform, rel=1e-6)


def test_energy_from_spectrum_and_scaled_energy():
    beta = -4.0
    x, w = mf.sample(D.von_mises_fisher([0.0, 1.0], 2.0), 64, 2, method="quasi")
    direct = w @ np.exp(beta * (x @ x.T)) @ w / (2 * beta)
    K = 40
    th = angle(x)
    mu = np.array([w @ np.exp(-1j * k * th) for k in range(K + 1)])
    power = np.abs(mu) ** 2 * np.where(np.arange(K + 1) == 0, 1.0, 2.0)
    assert mf.energy_from_spectrum(beta, 2, power) == pytest.approx(direct, rel=1e-13)
    assert mf.interaction_energy(beta, (x, w), scaled=True) == pytest.approx(direct * np.exp(beta), rel=1e-13)
    big = mf.interaction_energy(-800.0, (x, w), scaled=True)                 # e^{|β|} would overflow
    assert big == pytest.approx(w @ np.exp(-800.0 * (x @ x.T) - 800.0) @ w / -1600.0, rel=1e-12)


def test_spectral_energy_for_negative_beta():
    x, w = mf.sample(D.von_mises_fisher([0.0, 0.0, 1.0], 1.0), 300, 3)
    ref = w @ np.exp(-2.0 * (x @ x.T) - 2.0) @ w
    assert spectral_energy(-2.0, x, w) == pytest.approx(ref, rel=1e-11)


# -- kernel sums: the shift is |β| -------------------------------------------------------------------------
@pytest.mark.parametrize("shift", ["none", "fixed", "running", "auto"])
@pytest.mark.parametrize("beta", [-3.0, -450.0])
def test_kernel_sums_shifts(beta, shift):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((40, 3))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    values = rng.random((40, 2))
    if shift == "none" and abs(beta) > 300:
        return
    S, c = kernel_sums(x, x, values, beta, shift=shift)
    L = beta * (x @ x.T)
    top = L.max(axis=1, keepdims=True)
    ref = np.exp(L - top) @ values                                             # Σ e^{β⟨x_i,x_j⟩ − max_j}
    unshifted = S * np.exp(np.asarray(c)[..., None] - top) if np.ndim(c) else S * np.exp(c - top)
    assert np.allclose(unshifted, ref, rtol=1e-12, atol=0)
    if shift == "fixed":
        assert c == abs(beta)


def test_particle_sums_spectral_against_direct():
    """The spectral sums with alternating multipliers give the field of the direct sums (S^1, S^2)."""
    for dim in (2, 3):
        x, w = mf.sample(D.von_mises_fisher(np.eye(dim)[0], 1.0), 400, dim, rng=3)
        for sa in (True, False):
            model = mf.Model(beta=-2.0, dim=dim, normalized=sa)
            direct = solvers.Particles(model, sums="direct").velocity(x, w)
            spectral = solvers.Particles(model, sums="spectral").velocity(x, w)
            size = np.abs(direct).max()
            assert np.abs(spectral - direct).max() <= max(error_bound(w, -2.0), 1e-11) * size


# -- particles: the equilateral triangle of n = 3 on S^1 loses stability at β = −2/3 ------------------------
def perturbed_triangle():
    """The equilateral triangle, its angles moved by (0, 0.01, −0.02)."""
    theta = 2 * np.pi * np.arange(3) / 3 + np.array([0.0, 0.01, -0.02])
    return np.stack([np.cos(theta), np.sin(theta)], -1)


@pytest.mark.parametrize("beta,synchronises", [(-0.6, True), (-0.75, False)])
def test_triangle_threshold(beta, synchronises):
    sol = solvers.Particles(mf.Model(beta=beta, dim=2)).solve(perturbed_triangle(), [0.0, 100.0, 200.0])
    x = sol.positions[-1]
    gram = x @ x.T
    off = gram[np.triu_indices(3, 1)]
    if synchronises:
        assert off.min() > 1 - 1e-8                                # one cluster
    else:
        assert np.abs(off + 0.5).max() < 1e-8                      # back to the triangle
    assert np.all(np.diff(sol.energy) >= -rounding(sol.energy, terms=9))   # E_β increases (3.6), a 9-term sum


@pytest.mark.parametrize("sa", [True, False], ids=["SA", "USA"])
def test_triangle_linear_threshold(sa):
    """Linearised at the triangle (S^1), the two non-rotational modes have the rate (docs/mathematics.md §13)

        λ(β) = 3 e^{−β/2}(1/2 + 3β/4)/(e^β + 2e^{−β/2})  (SA),    e^{−β/2}(1/2 + 3β/4)  (USA),

    zero at β = −2/3: finite differences of the particle field."""
    def rate(beta):
        model = mf.Model(beta=beta, dim=2, normalized=sa)
        p = solvers.Particles(model, sums="direct")
        theta0 = 2 * np.pi * np.arange(3) / 3

        def field(theta):
            x = np.stack([np.cos(theta), np.sin(theta)], -1)
            v = p.velocity(x)
            return v[:, 1] * np.cos(theta) - v[:, 0] * np.sin(theta)          # dθ_i/dt

        h = 1e-6
        J = np.stack([(field(theta0 + h * e) - field(theta0 - h * e)) / (2 * h) for e in np.eye(3)], 1)
        ev = np.linalg.eigvals(J).real
        return ev[np.argsort(np.abs(ev))][1:]                                # λ twice (0 left out: rotations)

    for beta in (-1.0, -0.75, -2 / 3, -0.6, 0.5):
        exact = np.exp(-beta / 2) * (0.5 + 0.75 * beta)
        if sa:
            exact *= 3 / (np.exp(beta) + 2 * np.exp(-beta / 2))
        assert np.allclose(rate(beta), exact, rtol=0, atol=1e-8), (beta, rate(beta), exact)
    assert rate(-0.6).min() > 0.05 and rate(-0.75).max() < -0.05


# -- stationary states with noise --------------------------------------------------------------------------
def test_critical_noise_is_even_and_the_state_is_stationary():
    """ν_c(β) = ν_c(|β|) (a_1/β and a_0 are even), the zero of the degree-1 rate; a state of (SC) at
    0.7 ν_c stays put under the Fourier solver."""
    beta = -1.0
    for normalized in (False, True):
        nu_c = stationary.critical_noise(beta, 2, normalized)
        assert nu_c == pytest.approx(stationary.critical_noise(-beta, 2, normalized), rel=1e-15)
        model = mf.Model(beta=beta, dim=2, normalized=normalized, noise=nu_c)
        assert abs(mf.linear_growth_rates(model, 3)[1]) < 1e-14
        model = mf.Model(beta=beta, dim=2, normalized=normalized, noise=0.7 * nu_c)
        state = stationary.self_consistent(model, 48)
        sol = solvers.FourierCircle(model, modes=48, w1=False).solve(state.density, [0, 2.0], rtol=1e-11, atol=1e-13)
        t = np.linspace(0, 2 * np.pi, 64, endpoint=False)
        x = np.stack([np.cos(t), np.sin(t)], -1)
        assert np.abs(sol.density(x, -1) - state.density(x)).max() < 1e-9 * state.density(x).max()


def test_landau_coefficient_matches_the_branch():
    """ν = ν_c(1 + c r² + O(r⁴)) along the computed branch at β = −1: c from `landau_coefficient`."""
    for normalized in (False, True):
        ds = stationary.branch(-1.0, 2, normalized, resolution=32)
        nu, r = ds["nu"].values, ds["order"].values
        sel = (r > 0.01) & (r < 0.08)
        fit = np.polyfit(r[sel] ** 2, nu[sel] / ds.attrs["nu_c"] - 1, 2)
        assert fit[-2] == pytest.approx(stationary.landau_coefficient(-1.0, 2, normalized), rel=1e-4)
        assert ds.attrs["transition"] == "supercritical"


def test_large_negative_beta_particles_take_the_direct_sums_and_keep_the_energy():
    """β = −400: the spectral bound ε e^{2|β|} overflows to inf, so "auto" takes the direct sums (no
    division by zero), and the energy from the running shift equals `discrete_energy` to 1e-12."""
    from meanfield.observables.energy import discrete_energy
    from meanfield.sums.spectralsums import error_bound

    x0 = mf.sampling.uniform_points(20, 3, np.random.default_rng(0))
    assert error_bound(np.full(20, 0.05), -400.0) == np.inf
    sol = solvers.Particles(mf.Model(beta=-400.0, dim=3), diagnostics=("energy",)).solve(x0, [0.0, 0.01])
    assert sol.stats["sums"] == "direct"
    assert sol.energy[0] == pytest.approx(discrete_energy(-400.0, x0, np.full(20, 0.05)), rel=1e-12)
