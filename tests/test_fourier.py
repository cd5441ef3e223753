"""solvers.FourierCircle against exact rates, exact identities, itself (convergence, symmetry) and particles.

References: the linear growth rates (docs/mathematics.md §5; scipy.special.iv), direct quadrature of
the convolution formulas on the circle (§2.5), exact W1 values on S^1 (§8), the energy identities
(3.6) and Lemma 3.7 (§4), and the particle solver (§1).
"""
import numpy as np
import pytest
from scipy.special import iv

import meanfield as mf
import solvers
from meanfield.measures import densities as D
from meanfield.representations.fourier import FourierSeries

FC = solvers.FourierCircle


def angle(x):
    return np.arctan2(x[..., 1], x[..., 0])


def two_bumps(k1=4.0, k2=6.0, a=0.0, b=2.0, w=0.6):
    """A smooth bimodal density: a von Mises mixture (σ-relative)."""
    return D.mixture([D.von_mises_fisher([np.cos(a), np.sin(a)], k1), D.von_mises_fisher([np.cos(b), np.sin(b)], k2)],
                     [w, 1 - w])


RHO0 = two_bumps()
RHO_SMOOTH = two_bumps(2.0, 3.0)


def exact_rate(beta, k, sa, s, noise=0.0):
    """ς_k = s k² I_k(β)/β (USA), s k² I_k(β)/(β I_0(β)) (SA), minus ν k² (docs/mathematics.md §5)."""
    r = s * k * k * iv(k, beta) / beta
    return (r / iv(0, beta) if sa else r) - noise * k * k


# --- linear stability (docs/mathematics.md §5) ---------------------------------------------------------
@pytest.mark.parametrize("noise", [0.0, 0.3])
@pytest.mark.parametrize("s", [1.0, -1.0])
@pytest.mark.parametrize("sa", [True, False])
@pytest.mark.parametrize("beta", [0.5, 2.0, 8.0])
def test_linear_growth_rates(beta, sa, s, noise):
    model = mf.Model(beta=beta, dim=2, normalized=sa, V=s, noise=noise)
    lib = mf.linear_growth_rates(model, 6)
    eps = 1e-8
    for k in range(1, 7):
        rate = exact_rate(beta, k, sa, s, noise)
        T = 1.0 / max(abs(rate), 1.0)            # e^{ςT} <= e: stays linear
        sol = FC(model, modes=32, w1=False).solve(lambda x, k=k: 1 + eps * np.cos(k * angle(x)), [0.0, T],
                                                  rtol=1e-12, atol=1e-24)
        measured = np.log(abs(sol.data[1, k]) / abs(sol.data[0, k])) / T
        assert abs(measured - rate) <= 1e-6 * abs(rate), (k, measured, rate)
        assert abs(lib[k] - rate) <= 1e-12 * abs(rate)
        others = np.delete(np.abs(sol.data[1, 1:]), k - 1)
        assert others.max() < 1e-15                  # the other modes only see O(ε²)


def test_beta_zero_sa_equals_usa_and_kuramoto_rate():
    """At β = 0 (SA) = (USA): v = s ∂_θ⟨x, m⟩ (4.1); mode 1 grows at s/2, higher modes are slaved."""
    sols = [FC(mf.Model(beta=0.0, dim=2, normalized=sa), modes=64, w1=False).solve(RHO0, [0, 0.5, 1.0], rtol=1e-11,
                                                                                  atol=1e-14)
            for sa in (True, False)]
    assert np.max(np.abs(sols[0].data - sols[1].data)) < 1e-13
    # E_0 = ½|m|² and its identity dE/dt = s∫|v|²ρ dσ (docs/mathematics.md §4 at β = 0)
    assert np.max(sols[0].diagnostics["energy_rate_error"]) < 1e-10 and np.all(sols[0].diagnostics["energy_rate"] > 0)
    eps = 1e-8
    sol = FC(mf.Model(beta=0.0, dim=2), modes=16, w1=False).solve(lambda x: 1 + eps * np.cos(angle(x)), [0, 1.0],
                                                                  rtol=1e-12, atol=1e-24)
    assert abs(np.log(abs(sol.data[1, 1] / sol.data[0, 1])) - 0.5) < 1e-9


# --- the velocity field against direct quadrature of (3.2) on the circle (docs/mathematics.md §2) --------
@pytest.mark.parametrize("sa", [True, False])
def test_velocity_against_quadrature(sa):
    beta, s = 3.0, -1.0
    solver = FC(mf.Model(beta=beta, dim=2, normalized=sa, V=s), modes=64)
    c = solver.coefficients(RHO0)
    theta, v = solver.velocity(c)
    n = 4096                                       # trapezoid rule: exact to round-off for smooth periodic integrands
    phi = 2 * np.pi * np.arange(n) / n
    rho = RHO0(np.stack([np.cos(phi), np.sin(phi)], -1))
    d = theta[:, None] - phi[None, :]
    h = np.exp(beta * np.cos(d))
    conv_h = (h * rho).mean(axis=1)                # (h*ρ) against σ
    conv_dh = (-beta * np.sin(d) * h * rho).mean(axis=1)
    expected = s * conv_dh / beta / (conv_h if sa else 1.0)
    assert np.max(np.abs(v - expected)) < 1e-12 * np.max(np.abs(expected))


# --- spectral convergence --------------------------------------------------------------------------------
def test_spectral_convergence_is_exponential():
    """Two-bump ρ0, β = 4, SA, t = 2: ‖c^K − c^{2K}‖ decays like e^{-αK}; measured α ≈ 0.27."""
    model = mf.Model(beta=4.0, dim=2)

    def final(K):
        return FC(model, modes=K, w1=False, tail_tol=1.0).solve(RHO0, [0, 2.0], rtol=1e-12, atol=1e-15).data[-1]

    Ks = np.array([32, 48, 64, 80])
    errs = []
    for K in Ks:
        a, b = final(K), final(2 * K)
        errs.append(np.sqrt(np.sum(np.abs(a - b[:K + 1]) ** 2) + np.sum(np.abs(b[K + 1:]) ** 2)))
    slope, _ = np.polyfit(Ks, np.log(errs), 1)
    assert slope < -0.22, (slope, errs)
    assert np.all(np.diff(np.log(errs)) < -0.2 * 16)   # every step of 16 modes gains > e^{3.2}
    assert errs[-1] < 1e-6


# --- conservation and the energy identity -----------------------------------------------------------------
@pytest.mark.parametrize("case", ["SA-repulsive", "USA-attractive-noise"])
def test_mass_conserved_to_round_off(case):
    if case == "SA-repulsive":
        model, modes = mf.Model(beta=2.0, dim=2, V=-1.0), 256
    else:
        model, modes = mf.Model(beta=1.0, dim=2, normalized=False, noise=1.0), 64
    sol = FC(model, modes=modes, w1=False).solve(RHO_SMOOTH, np.linspace(0, 20, 11))
    assert sol.t[-1] == 20.0
    rep = sol.representation
    grid_mass = np.array([rep.grid_values(c, 1024).mean() for c in sol.data])   # ∫ρ dσ of the evaluated density
    assert np.max(np.abs(grid_mass - grid_mass[0])) <= 1e-13 * grid_mass[0]
    assert np.all(sol.mass == sol.mass[0]) and abs(sol.mass[0] - 1) < 1e-12
    assert np.array_equal(sol.diagnostics["mass"], sol.mass)


@pytest.mark.parametrize("sa,s,noise", [(True, 1.0, 0.0), (False, 1.0, 0.0), (True, -1.0, 0.0), (False, -1.0, 0.05),
                                        (True, 1.0, 0.1)])
def test_energy_identity(sa, s, noise):
    """dE/dt of the discrete flow = s∫Z|v|²ρ (SA) or s∫|v|²ρ (USA) + noise term (mathematics §4), to 1e-6."""
    model = mf.Model(beta=2.0, dim=2, normalized=sa, V=s, noise=noise)
    h = 1e-3
    sol = FC(model, modes=64, w1=False).solve(RHO_SMOOTH, [0, 0.3 - h, 0.3, 0.3 + h, 0.6], rtol=1e-10, atol=1e-13)
    d = sol.diagnostics
    assert np.all(d["spectral_tail"] < 1e-6)
    assert np.max(d["energy_rate_error"]) < 1e-6
    # (3.6): the transport part, s∫Z|v|²ρ dσ (SA) or s∫|v|²ρ dσ (USA), has the sign s of V; the noise
    # adds −ν Σ_k k²(a_k/β)‖ρ_k‖² < 0 (docs/mathematics.md §4)
    from solvers.spectral import noise_dissipation

    power = np.abs(sol.data) ** 2
    power[:, 1:] *= 2
    noise_term = np.array([noise_dissipation(2.0, 2, noise, p) for p in power])
    assert np.all(noise_term < 0) if noise > 0 else np.all(noise_term == 0)
    assert np.all(s * (d["energy_rate"] - noise_term) > 0)
    # energy_rate is the time derivative of the recorded energy (central difference, O(h²))
    fd = (sol.energy[3] - sol.energy[1]) / (2 * h)
    assert abs(fd - d["energy_rate"][2]) < 1e-5 * abs(d["energy_rate"][2])
    assert np.allclose(sol.energy, [mf.interaction_energy(2.0, sol.measure(i, n=1024)) for i in range(len(sol.t))],
                       rtol=1e-10)


# --- Proposition 3.4, dynamically ------------------------------------------------------------------------
@pytest.mark.parametrize("sa", [True, False])
def test_repulsive_runs_converge_to_uniform(sa):
    beta = 2.0
    model = mf.Model(beta=beta, dim=2, normalized=sa, V=-1.0)
    sol = FC(model, modes=256).solve(RHO_SMOOTH, np.linspace(0, 60, 31))
    e = sol.energy
    assert np.all(np.diff(e) < 0) and np.all(sol.diagnostics["energy_rate"][1:] < 0)
    e_min = mf.uniform_energy(beta, 2)
    assert e_min == pytest.approx(iv(0, beta) / (2 * beta), rel=1e-14)
    assert np.all(e > e_min) and e[-1] - e_min < 1e-6 * e_min
    # weak convergence: W1 to σ and the low modes decay; the high modes decay ever more slowly
    # (rate k² I_k(β)/β → 0), which is why the strong (L∞) distance lags behind
    w1 = sol.diagnostics["w1_to_uniform"]
    assert w1[0] > 0.2 and w1[-1] < 0.02 * w1[0]
    assert np.max(np.abs(sol.data[-1, 1:4])) < 1e-4 * np.max(np.abs(sol.data[0, 1:4]))
    assert np.all(sol.diagnostics["spectral_tail"] < 1e-6)


def test_attractive_runs_increase_energy_until_under_resolved():
    beta = 4.0
    model = mf.Model(beta=beta, dim=2)
    with pytest.raises(mf.UnderResolved) as info:
        FC(model, modes=64).solve(RHO0, np.linspace(0, 20, 81))
    exc = info.value
    sol = exc.solution
    assert exc.tail > exc.tol == 1e-6 and 0 < exc.t < 20
    assert f"t={exc.t:.6g}" in str(exc) and "modes=64" in str(exc)
    assert sol.status == 1 and sol.t[-1] <= exc.t and sol.t[-1] > exc.t - 0.25 - 1e-12
    e = sol.energy
    assert len(e) > 4 and np.all(np.diff(e) > 0)
    assert np.all(e < mf.dirac_energy(beta))
    d = sol.diagnostics
    # every saved state passed the tail check, except the failing one when it fell on a saved time
    ok = sol.t < exc.t
    assert np.all(d["spectral_tail"][ok] <= 1e-6) and np.all(d["spectral_tail"] <= exc.tail)
    assert np.max(d["energy_rate_error"]) < 1e-6
    assert np.all(np.diff(d["w1_to_dirac"]) < 0)


def test_auto_modes_doubles_and_agrees_with_fixed_resolution(tmp_path):
    model = mf.Model(beta=4.0, dim=2)
    t_eval = np.linspace(0, 3.5, 8)
    auto = FC(model, modes="auto", w1=False).solve(RHO0, t_eval, rtol=1e-10, atol=1e-13, checkpoint=tmp_path / "a.nc")
    back = mf.load(tmp_path / "a.nc")
    assert np.array_equal(back.data, auto.data) and np.array_equal(back.t, auto.t)
    modes = auto.diagnostics["modes"]
    assert modes[0] == 64 and modes[-1] >= 256 and np.all(np.diff(modes) >= 0)
    assert auto.representation.modes == auto.data.shape[1] - 1 == auto.stats["modes_final"]
    assert np.array_equal(auto.t, t_eval)
    fixed = FC(model, modes=512, w1=False).solve(RHO0, t_eval, rtol=1e-10, atol=1e-13)
    K = auto.representation.modes
    assert np.max(np.abs(auto.data - fixed.data[:, :K + 1])) < 1e-5
    # the cap: past max_modes the run stops like a fixed-resolution run, with the merged Solution
    with pytest.raises(mf.UnderResolved) as info:
        FC(model, modes="auto", max_modes=128, w1=False).solve(RHO0, t_eval)
    part = info.value.solution
    assert part.data.shape[1] == 129 and part.diagnostics["modes"][-1] == 128 and 0 < part.t[-1] < 3.5


# --- symmetry ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("sa", [True, False])
def test_rotation_equivariance(sa):
    model = mf.Model(beta=4.0 if sa else 1.0, dim=2, normalized=sa, noise=0.01)
    alpha = 0.7
    t_eval = [0, 0.5, 1.5]
    a = FC(model, modes=128, w1=False).solve(RHO_SMOOTH, t_eval)
    b = FC(model, modes=128, w1=False).solve(two_bumps(2.0, 3.0, a=alpha, b=2.0 + alpha), t_eval)
    k = np.arange(129)
    shifted = a.data * np.exp(-1j * k * alpha)
    assert np.max(np.abs(b.data - shifted)) < 1e-12
    assert np.allclose(b.energy, a.energy, rtol=1e-13)


# --- diagnostics: exact W1 values ------------------------------------------------------------------------
def test_w1_diagnostics_exact_for_cosine_density():
    """ρ = 1 + a cos θ: W1(ρσ, σ) = 2a/π and min_φ W1(ρσ, δ_φ) = π/2 − 2a/π (docs/mathematics.md §8, by hand)."""
    a = 0.4
    sol = FC(mf.Model(beta=1.0, dim=2), modes=16).solve(lambda x: 1 + a * np.cos(angle(x)), [0.0])
    d = sol.diagnostics
    assert d["w1_to_uniform"][0] == pytest.approx(2 * a / np.pi, rel=1e-5)
    assert d["w1_to_dirac"][0] == pytest.approx(np.pi / 2 - 2 * a / np.pi, rel=1e-13)
    assert d["min_density"][0] == pytest.approx(1 - a, abs=1e-5)


def test_w1_to_dirac_matches_the_library():
    rep = FourierSeries(64)
    for c in (FC(mf.Model(beta=2.0, dim=2), modes=64).coefficients(RHO_SMOOTH),
              np.r_[1.0, 0, 0, 0.1j, np.zeros(61)]):
        exact, _ = rep.w1_to_dirac(c)
        assert exact == pytest.approx(mf.w1_to_dirac(rep.measure(c, n=16384)), abs=1e-6)


def test_solution_round_trip(tmp_path):
    """Saved and loaded, a solution is the same bits: times, coefficients, the energy computed from them
    and the density they give."""
    sol = FC(mf.Model(beta=2.0, dim=2), modes=32).solve(RHO0, [0, 0.5])
    sol.save(tmp_path / "c.nc")
    back = mf.load(tmp_path / "c.nc")
    x = mf.sphere_quadrature(100, 2)[0]
    np.testing.assert_array_equal(back.t, sol.t)
    np.testing.assert_array_equal(back.data, sol.data)
    np.testing.assert_array_equal(back.energy, sol.energy)
    np.testing.assert_array_equal(back.density(x, 1), sol.density(x, 1))
    np.testing.assert_allclose(sol.density(x, 0), RHO0(x), rtol=0, atol=1e-12)   # 32 modes resolve ρ0


# --- particles --------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_cross_validation_with_particles():
    """n = 10 000 quasi-uniform weighted particles from ρ0 vs the PDE: W1 < 1e-3 for t in [0, 5] (β = 4, SA)."""
    Particles = solvers.Particles
    model = mf.Model(beta=4.0, dim=2)
    rho0 = two_bumps(1.0, 1.0, 0.0, np.pi, 0.5)
    t_eval = np.linspace(0, 5, 6)
    pde = FC(model, modes=256).solve(rho0, t_eval)
    x0, w = mf.sample(rho0, 10_000, 2, method="quasi")
    part = Particles(model).solve(x0, t_eval, weights=w)
    dist = [mf.wasserstein(pde.measure(i), part.measure(i)) for i in range(len(t_eval))]
    assert max(dist) < 1e-3, dist


# --- bad input -------------------------------------------------------------------------------------------
def test_bad_input():
    model = mf.Model(beta=2.0, dim=2)
    with pytest.raises(ValueError, match="non-negative"):
        FC(model, modes=32).solve(lambda x: np.cos(angle(x)) + 0.5, [0, 1])
    with pytest.raises(ValueError, match="NaN"):
        FC(model, modes=32).solve(lambda x: np.full(x.shape[:-1], np.nan), [0, 1])
    with pytest.raises(ValueError, match="mass"):
        FC(model, modes=32).solve(lambda x: 2.0 + np.cos(angle(x)), [0, 1])
    ok = FC(model, modes=32, w1=False).solve(lambda x: 2.0 + np.cos(angle(x)), [0, 0.1], normalize=True)
    ref = FC(model, modes=32, w1=False).solve(lambda x: 1.0 + 0.5 * np.cos(angle(x)), [0, 0.1])
    assert np.allclose(ok.data, ref.data, atol=1e-14)
    with pytest.raises(ValueError, match="`modes`"):
        FC(model, modes=4)
    with pytest.raises(ValueError, match="`modes`=20.*modes >= 36"):
        FC(mf.Model(beta=16.0, dim=2), modes=20)
    with pytest.raises(ValueError, match="`modes`"):
        FC(model, modes="many")
    with pytest.raises(ValueError, match="t_eval"):
        FC(model, modes=32).solve(RHO0, [0, 2, 1])
    with pytest.raises(ValueError, match="tail_tol"):
        FC(model, modes=32, tail_tol=0)
    with pytest.raises(ValueError, match="dealias"):
        FC(model, modes=32, dealias=1.0)
    with pytest.raises(ValueError, match="rho0"):
        FC(model, modes=32).solve("not a density", [0, 1])
    with pytest.raises(mf.UnsupportedModel):
        FC(mf.Model(beta=1.0, dim=3), modes=32)
    with pytest.raises(mf.UnsupportedModel):
        FC(mf.Model(beta=1.0, dim=2, V=np.diag([1.0, 2.0])), modes=32)


@pytest.mark.parametrize("normalized, v, t_end", [(True, 1.0, 1.0), (False, 1.0, 0.25), (True, -1.0, 1.0)])
def test_agrees_with_plain_fourier_collocation(normalized, v, t_end):
    """The dealiased solver against the independent collocation reference
    `solvers.references.fourier_collocation` (β = 2): agreement to 1e-9."""
    from solvers.references import fourier_collocation

    model = mf.Model(beta=2.0, dim=2, normalized=normalized, V=v)
    rho0 = D.mixture([D.von_mises_fisher([1.0, 0.0], 1.0), D.von_mises_fisher([-0.6, 0.8], 2.0)], [0.5, 0.5])
    sol = solvers.FourierCircle(model, modes=64).solve(rho0, [0.0, t_end], progress=False, rtol=1e-11, atol=1e-13)
    ref = fourier_collocation(2.0, rho0, t_end, v=v, normalized=normalized, M=256)
    theta = np.linspace(0, 2 * np.pi, 97)
    x = np.stack([np.cos(theta), np.sin(theta)], -1)
    moved = np.max(np.abs(sol.density(x, 1) - rho0(x)))
    err = np.max(np.abs(sol.density(x, 1) - ref(theta)))
    print(f"moved {moved:.3f}, |Fourier − collocation| {err:.1e}")
    assert moved > 0.05 and err < 1e-9, (moved, err)
