"""meanfield.fluctuations: the linear theory about the uniform state, its mode coupling, the statistics of
ensembles of particle runs, the first BBGKY equation (docs/fluctuations.md)."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from scipy import special

import meanfield as mf
import solvers
from meanfield import fluctuations as F
from meanfield.cli import main
from meanfield.fluctuations.ensemble import circle_coefficients, circle_pair_correlation, sphere_statistics
from meanfield.fluctuations.linear import coupling_excess, velocity_coefficients
from meanfield.spaces.harmonics import real_sh

from tolerances import assert_rounding_close

USA = mf.Model(beta=1.0, dim=2, normalized=False)


def uniform(shape, rng):
    x = rng.standard_normal(shape)
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


# -- the linear theory ---------------------------------------------------------------------------------
@pytest.mark.parametrize("normalized", [False, True])
def test_the_linear_prediction_on_the_circle_is_e_2_sigma_t_over_n(normalized):
    """Without noise E|ρ̂_k(t)|² = e^{2ς_k t}/n with ς_k = k² I_k(β)/β ((USA)), divided by I_0(β) for (SA)."""
    beta, n, k, t = 2.5, 300, np.arange(1, 6), np.array([0.0, 0.7, 3.0])
    rate = k ** 2 * special.iv(k, beta) / beta / (special.iv(0, beta) if normalized else 1.0)
    got = F.linear_prediction(mf.Model(beta, 2, normalized=normalized), n, k, t)
    np.testing.assert_allclose(got, np.exp(2 * np.outer(t, rate)) / n, rtol=1e-12)


@pytest.mark.parametrize("dim", [3, 4])
def test_the_linear_prediction_starts_at_the_harmonic_dimension_over_n(dim):
    """n·E P_l(0) = N_l = dim H_l for i.i.d. uniform tokens (the addition theorem)."""
    got = F.linear_prediction(mf.Model(1.0, dim), 50, [1, 2, 3], 0.0)[0] * 50
    np.testing.assert_allclose(got, {3: [3, 5, 7], 4: [4, 9, 16]}[dim], rtol=1e-14)


@settings(max_examples=25, deadline=None)
@given(beta=st.floats(-3, 4).filter(lambda b: abs(b) > 0.05), noise=st.floats(0.0, 0.5), dim=st.sampled_from([2, 3]),
       n=st.integers(2, 10 ** 6), t=st.floats(0.01, 5.0))
def test_the_linear_prediction_solves_its_moment_equation(beta, noise, dim, n, t):
    """dP/dt = 2ς_l P + 2ν l(l+d−2) N_l/n (Itô's formula for the linearised dynamics), P(0) = N_l/n."""
    model = mf.Model(beta, dim, normalized=False, noise=noise)
    modes = np.array([1, 2, 3])
    h = 1e-4 * t
    p = F.linear_prediction(model, n, modes, [t, t + h, t - h])
    derivative = (p[1] - p[2]) / (2 * h)
    rate = mf.linear_growth_rates(model, 3)[modes]
    N = 1.0 if dim == 2 else mf.kernels.harmonic_dimension(dim, modes)
    rhs = 2 * rate * p[0] + 2 * noise * modes * (modes + dim - 2) * N / n
    np.testing.assert_allclose(derivative, rhs, rtol=1e-5, atol=1e-12 * p[0].max() / t)


def test_beta_zero_is_the_limit_of_the_kernel_one():
    """At β = 0 the velocity is P_x Σ_j w_j x_j: only k = 1 moves, at the rate lim I_1(β)/β = 1/2, and the
    mode coupling is the limit of small β."""
    zero, small = mf.Model(0.0, 2, normalized=False), mf.Model(1e-7, 2, normalized=False)
    t = [0.0, 1.0, 3.0]
    np.testing.assert_allclose(F.linear_prediction(zero, 100, [1, 2], t), F.linear_prediction(small, 100, [1, 2], t),
                               rtol=1e-6)
    np.testing.assert_allclose(F.linear_prediction(zero, 100, [1, 2, 3], t, order=2),
                               F.linear_prediction(small, 100, [1, 2, 3], t, order=2), rtol=1e-6)


def test_a_neutral_mode_grows_linearly_by_the_noise():
    """With ν = I_1(β)/β the mode k = 1 is neutral (ς_1 = 0): E|ρ̂_1(t)|² = (1 + 2νt)/n, the noise's input alone."""
    nu = special.iv(1, 1.0)
    got = F.linear_prediction(mf.Model(1.0, 2, normalized=False, noise=nu), 10, [1], [0.0, 1.0, 10.0])[:, 0] * 10
    np.testing.assert_allclose(got, 1 + 2 * nu * np.array([0.0, 1.0, 10.0]), rtol=1e-12)


def test_the_onset_time_is_log_n_over_twice_the_top_rate():
    rate = special.iv(1, 1.0)               # k = 1 is the fastest mode at β = 1 (ς_2 = 4 I_2(1) < I_1(1))
    for n in (100, 10 ** 5):
        assert F.onset_time(USA, n) == pytest.approx(np.log(n / 4) / (2 * rate), rel=1e-13)
        assert F.onset_time(USA, n, level=1.0) == pytest.approx(np.log(n) / (2 * rate), rel=1e-13)
    noisy = mf.Model(1.0, 2, normalized=False, noise=0.2)
    t = F.onset_time(noisy, 1000)
    assert F.linear_prediction(noisy, 1000, [1], t)[0, 0] == pytest.approx(0.25, rel=1e-10)
    assert F.onset_time(mf.Model(1.0, 2, normalized=False, noise=5.0), 1000) == np.inf      # nothing grows
    sphere = mf.Model(1.0, 3, normalized=False)                 # per harmonic: N_l does not enter
    top = mf.linear_growth_rates(sphere, 32)[1:].max()
    assert F.onset_time(sphere, 1000) == pytest.approx(np.log(250) / (2 * top), rel=1e-13)


def test_the_mode_coupling_matches_its_monte_carlo():
    """E|B_k(t)|² of the module docstring (Wick's rule) against B_k computed from i.i.d. uniform samples of
    ρ̂(0): the second-order excess, within 4 standard errors of 4000 samples (n = 60)."""
    n, t, A, samples = 60, 2.0, 20, 4000
    c = velocity_coefficients(USA, A + 8)
    rate = np.arange(len(c)) ** 2 * c
    rng = np.random.default_rng(3)
    x = uniform((samples, n, 2), rng)
    coeffs = circle_coefficients(x, A + 8)

    def rho(a):
        return coeffs[:, a] if a >= 0 else np.conj(coeffs[:, -a])

    for k in (1, 3):
        B = 0
        for a in range(k - A, A + 1):
            if a in (0, k):
                continue
            mu = rate[abs(a)] + rate[abs(k - a)] - rate[k]
            B = B + k * a * c[abs(a)] * rho(a) * rho(k - a) * np.expm1(mu * t) / mu
        B = B * np.exp(rate[k] * t)
        sample = np.abs(B) ** 2
        want = coupling_excess(USA, n, [k], [t])[0, 0]
        assert abs(sample.mean() - want) < 4 * sample.std() / np.sqrt(samples), (k, sample.mean(), want)


# -- statistics of clouds ------------------------------------------------------------------------------
def test_circle_coefficients_are_the_fourier_sums():
    rng = np.random.default_rng(0)
    x = uniform((3, 40, 2), rng)
    theta = np.arctan2(x[..., 1], x[..., 0])
    want = np.exp(-1j * np.arange(6)[:, None, None] * theta).mean(axis=-1).transpose(1, 0)
    got = circle_coefficients(x, 5)
    assert_rounding_close(got.real, want.real, terms=40 * 5)
    assert_rounding_close(got.imag, want.imag, terms=40 * 5)


def test_the_pair_correlation_of_a_regular_polygon():
    """M tokens in the M circle bins (one each): no pair at lag 0, and at every lag m ≠ 0 exactly the
    expected n(n−1)/M · M/(n−1) pairs, so g_2 = M/(M − 1)."""
    bins = 9
    M = 2 * (bins - 1)
    theta = 2 * np.pi * (np.arange(M) + 0.5) / M
    x = np.stack([np.cos(theta), np.sin(theta)], -1)
    g2 = circle_pair_correlation(x, bins)
    assert g2[0] == 0
    np.testing.assert_allclose(g2[1:], M / (M - 1), rtol=1e-12)


def test_the_pair_correlation_of_iid_tokens_is_one():
    rng = np.random.default_rng(1)
    g2 = circle_pair_correlation(uniform((400, 100, 2), rng), 17).mean(axis=0)
    np.testing.assert_allclose(g2, 1.0, atol=0.05)
    _, g3 = sphere_statistics(uniform((100, 80, 3), rng), np.array([1]), 12)
    np.testing.assert_allclose(g3.mean(axis=0), 1.0, atol=0.08)


@pytest.mark.parametrize("dim", [3, 4, 7])
def test_the_gegenbauer_recurrence_is_scipys(dim):
    from meanfield.fluctuations.ensemble import gegenbauer_sums

    s = np.random.default_rng(0).uniform(-1, 1, 500)
    a = 0.5 * (dim - 2)
    want = [special.eval_gegenbauer(l, a, s).sum() / special.eval_gegenbauer(l, a, 1.0) for l in range(7)]
    assert_rounding_close(gegenbauer_sums(s, 6, dim), want, terms=500 * 7)


def test_the_sphere_power_is_the_sum_of_squared_harmonic_coefficients():
    """Σ_m |(1/n) Σ_j Y_lm(x_j)|² (real harmonics orthonormal in L²(σ)) = the Gegenbauer form on the Gram matrix."""
    rng = np.random.default_rng(2)
    x = uniform((2, 30, 3), rng)
    power, _ = sphere_statistics(x, np.array([1, 2, 4]), 8)
    want = [[sum(np.mean(real_sh(l, m, cloud)) ** 2 for m in range(-l, l + 1)) for l in (1, 2, 4)] for cloud in x]
    assert_rounding_close(power, want, terms=30 * 30)


# -- the ensemble --------------------------------------------------------------------------------------
def test_a_small_ensemble_agrees_with_the_linear_theory():
    """n = 500, R = 64 (seeded), t <= 1 where E|ρ̂_1|² < 0.01: every |z| < 3 (at a 99.7 % level per point)."""
    ens = F.ensemble(USA, 500, 64, [0.0, 0.5, 1.0], rng=5)
    assert ens.power.shape == (3, 4) and ens.g2.shape == (3, 65) and ens.order.shape == (3, 64)
    assert np.all(ens.power[:, 0] < 0.01)
    assert np.all(np.abs(ens.z_scores()) < 3), ens.z_scores()
    lo, hi = ens.confidence(0.95)
    assert np.all((lo < ens.power) & (ens.power < hi))
    ds = ens.to_dataset()
    assert ds["power"].shape == (3, 4) and ds.attrs["n"] == 500


def test_the_ensemble_does_not_depend_on_the_batch():
    """The same seed in batches of 5 or in one call: the same initial tokens; the statistics agree to the
    solver's tolerance (the adaptive steps are shared within a batch)."""
    one = F.ensemble(USA, 50, 12, [0.0, 1.0], rng=7, rtol=1e-10, atol=1e-12)
    five = F.ensemble(USA, 50, 12, [0.0, 1.0], rng=7, batch=5, rtol=1e-10, atol=1e-12)
    assert five.stats["calls"] == 3 and one.stats["calls"] == 1
    np.testing.assert_allclose(one.power[0], five.power[0], rtol=1e-14)      # the same tokens
    np.testing.assert_allclose(one.power, five.power, rtol=1e-7)
    np.testing.assert_allclose(one.order, five.order, rtol=1e-7)


def test_the_order_parameter_is_the_norm_of_the_mean_token():
    ens = F.ensemble(mf.Model(2.0, 3), 40, 4, [0.0], rng=9, modes=[1])
    x = uniform((4, 40, 3), np.random.default_rng(9))
    np.testing.assert_allclose(ens.order[0], np.linalg.norm(x.mean(axis=1), axis=-1), rtol=1e-12)
    # Y_1m = sqrt(3) x_m: the degree-1 power is 3 |mean x|²
    np.testing.assert_allclose(ens.power[0, 0], np.mean(3 * np.linalg.norm(x.mean(axis=1), axis=-1) ** 2), rtol=1e-12)


def test_an_ensemble_with_noise():
    ens = F.ensemble(mf.Model(1.0, 2, normalized=False, noise=0.1), 100, 8, [0.0, 0.1], rng=1, dt=0.01, modes=[1])
    assert np.all(np.isfinite(ens.power)) and ens.power.shape == (2, 1)


# -- the first BBGKY equation --------------------------------------------------------------------------
def test_the_interaction_term_is_the_mean_of_the_particles_rate_of_change():
    """At t = 0 the measured J_k is the realisations' mean of dρ̂_k/dt = (1/n) Σ_j (−ik) e^{−ikθ_j} θ̇_j,
    with θ̇_j from the particles' velocity: the first BBGKY equation, to rounding (and the tail < 1e-9)."""
    n, R = 40, 6
    rho0 = mf.densities.perturbed_uniform(0.5, 1)
    ens = F.ensemble(USA, n, R, [0.0], rng=11, initial=rho0, pair_modes=14)
    eq = F.first_equation(ens, modes=3)
    rng = np.random.default_rng(11)
    x = np.stack([mf.sample(rho0, n, 2, rng=rng)[0] for _ in range(R)])
    solver = solvers.Particles(USA)
    theta = np.arctan2(x[..., 1], x[..., 0])
    rate = np.zeros(3, complex)
    for cloud, th in zip(x, theta):
        v = solver.velocity(cloud)
        dtheta = -np.sin(th) * v[:, 0] + np.cos(th) * v[:, 1]
        k = np.arange(1, 4)[:, None]
        rate += (-1j * k * np.exp(-1j * k * th) * dtheta).mean(axis=1) / R
    assert eq.tail < 1e-9
    np.testing.assert_allclose(eq.measured[0], rate, rtol=0, atol=1e-12 * np.abs(rate).max() + eq.tail)


def test_the_interaction_term_is_the_rate_of_change_of_the_mean():
    """d E ρ̂_k/dt (finite differences of the measured means, dt = 0.05) = J_k from the pair moments."""
    ens = F.ensemble(USA, 60, 16, np.linspace(0, 0.5, 11), rng=2, initial=mf.densities.perturbed_uniform(0.4, 1),
                     pair_modes=12, rtol=1e-11, atol=1e-13)
    eq = F.first_equation(ens, modes=2)
    scale = np.abs(eq.measured).max()
    assert np.abs(eq.derivative - eq.measured).max() < 2e-3 * scale


def test_kirkwood_counts_the_distinct_triples():
    """The binned f_3 counts ordered triples of distinct tokens (inclusion–exclusion), checked by enumeration."""
    import itertools

    from meanfield.fluctuations.ensemble import circle_bins, distinct_densities

    x = uniform((1, 2, 7, 2), np.random.default_rng(0))
    G = 3
    _, f2, f3 = distinct_densities(x, G)
    idx = circle_bins(x, G)[0]
    pairs, triples = np.zeros((G, G)), np.zeros((G, G, G))
    for b in range(2):
        for p, q in itertools.permutations(range(7), 2):
            pairs[idx[b, p], idx[b, q]] += 1
        for p, q, r in itertools.permutations(range(7), 3):
            triples[idx[b, p], idx[b, q], idx[b, r]] += 1
    assert_rounding_close(f2[0], pairs * G ** 2 / 42, terms=4)
    assert_rounding_close(f3[0], triples * G ** 3 / 210, terms=8)


def test_kirkwood_is_exact_for_independent_tokens():
    from meanfield.fluctuations.closure import kirkwood

    f1 = 1 + 0.3 * np.cos(np.linspace(0, 2 * np.pi, 8, endpoint=False))
    f2 = np.outer(f1, f1)
    np.testing.assert_allclose(kirkwood(f1, f2), np.einsum("i,j,k->ijk", f1, f1, f1), rtol=1e-14)


def test_both_closures_hold_at_the_start_and_fail_later():
    """For i.i.d. tokens f_2 = f_1 ⊗ f_1 and f_3 = Kirkwood's superposition exactly: at t = 0 both residuals are
    sampling error only (n = 300, R = 32); once the fluctuations are of order one (t = 5 > t_* = 3.8) both fail."""
    ens = F.ensemble(USA, 300, 32, [0.0, 5.0], rng=6, initial=mf.densities.perturbed_uniform(0.5, 1), grid=16,
                     pair_modes=10)
    chaos, superposition = F.first_equation(ens, 2).residual, F.second_equation(ens).residual
    ds = ens.to_dataset()
    assert ds["f3"].shape == (2, 16, 16, 16) and ds["pair_moments_re"].shape == (2, 21, 21)
    assert chaos[0] < 0.03 and superposition[0] < 0.01, (chaos, superposition)
    assert chaos[1] > 1 and superposition[1] > 0.3, (chaos, superposition)


# -- bad input -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("call, name", [
    (lambda: F.ensemble(USA, 1, 4, [0.0]), "`n`"),
    (lambda: F.ensemble(USA, 10, 1, [0.0]), "`realizations`"),
    (lambda: F.ensemble(USA, 10, 4, [-1.0, 0.0]), "`t_eval`"),
    (lambda: F.ensemble(USA, 10, 4, [0.0], modes=[0]), "`modes`"),
    (lambda: F.ensemble(USA, 10, 4, [0.0], bins=2), "`bins`"),
    (lambda: F.ensemble(mf.Model(1.0, 3), 10, 4, [0.0], pair_modes=3), "`pair_modes`"),
    (lambda: F.ensemble(USA, 10, 4, [0.0], initial=3), "`initial`"),
    (lambda: F.ensemble("model", 10, 4, [0.0]), "`model`"),
    (lambda: F.ensemble(mf.Model(1.0, 2, Q=np.diag([1.0, 2.0])), 10, 4, [0.0]), "`model`"),
    (lambda: F.linear_prediction(USA, 10, [1], [np.nan]), "`t`"),
    (lambda: F.linear_prediction(USA, 10, [1], [1.0], order=3), "`order`"),
    (lambda: F.linear_prediction(mf.Model(1.0, 2), 10, [1], [1.0], order=2), "`order`"),
    (lambda: F.onset_time(USA, 10, level=2.0), "`level`"),
    (lambda: F.first_equation(F.ensemble(USA, 10, 2, [0.0])), "`ens`"),
    (lambda: F.second_equation(F.ensemble(USA, 10, 2, [0.0])), "`ens`"),
    (lambda: F.ensemble(USA, 10, 4, [0.0], grid=2), "`grid`"),
    (lambda: F.ensemble(mf.Model(1.0, 3), 10, 4, [0.0], grid=8), "`grid`"),
])
def test_bad_input_names_the_argument(call, name):
    with pytest.raises(ValueError, match=name):
        call()


@pytest.mark.parametrize("args, shown", [
    (["--n", "1"], ["`n`", ">= 2"]),
    (["--modes", "0"], ["`modes`", ">= 1"]),
    (["--realizations", "1"], ["`realizations`"]),
])
def test_the_command_exits_2_in_one_line(args, shown, tmp_path, capsys):
    assert main(["fluctuations", *args, "--out", str(tmp_path / "o"), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and all(s in err[0] for s in shown), err


# -- the experiment ------------------------------------------------------------------------------------
def test_the_experiment_on_small_settings():
    from meanfield.experiments import fluctuations

    rep = fluctuations(n=150, realizations=24, t_end=1.0, t_count=5, onset_n=(), closure_n=(40, 80),
                       closure_realizations=8, progress=False)
    names = [c["name"] for c in rep.checks]
    assert rep.status == "finished" and len(names) == 5, names
    assert all(c["passed"] for c in rep.checks if "is d E rho_k/dt" in c["name"]), rep.checks
    assert rep.results["ensemble"]["n_power"].shape == (5, 4)
    assert set(rep.results["closure"]["n"]) == {"40", "80"}


# -- slow: the acceptance of issue 44 ------------------------------------------------------------------
@pytest.mark.slow
def test_acceptance_n2000_r400():
    """n = 2000, 400 realisations, (USA) on S^1, β = 1, t <= 4 (about a minute): while E|ρ̂_1|² < 0.01 the
    modes 1 and 2 are within 3 standard errors of the linear theory; the modes 3 and 4 are wherever its
    mode coupling is below one standard error, and leave it after (at 3.8 SE); the coupled theory
    (order 2) is closer there (docs/fluctuations.md)."""
    ens = F.ensemble(USA, 2000, 400, np.linspace(0.0, 4.0, 17), rng=44)
    from meanfield.experiments.fluctuations import compare_ensemble

    cmp = compare_ensemble(ens)
    assert cmp["fastest_mode"] == 1 and 2.4 <= cmp["window_end"] <= 2.8
    assert cmp["max_z_linear_valid"] < 3
    assert np.all(np.abs(cmp["z_linear"][cmp["inside"], :2]) < 3)
    out = cmp["inside"][:, None] & (np.abs(cmp["z_linear"]) > 3)
    assert out.any() and not out[:, :2].any()
    assert np.all(np.abs(cmp["z_coupled"][out]) < np.abs(cmp["z_linear"][out]))
    assert cmp["max_z_coupled_window"] < cmp["max_z_linear_window"]
