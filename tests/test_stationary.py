"""solvers.stationary: stationary states with noise, their branches and the transition at ν_c.

Exact anchors: ν_c = a_1/β (USA), a_1/(β a_0) (SA); β_*(d), the root of I_{d/2+1}/I_{d/2} = 1/d;
the Landau coefficient against the computed branch; the linearised spectrum of the uniform state;
the free-energy envelope identity; and the noisy dynamics (PDE, particles) against the branches.
"""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st_
from scipy import optimize, special

import meanfield as mf
import solvers
from solvers import stationary as st
from solvers.stationary.zonal import ZonalSelfConsistency

DIMS = (2, 3)


def bessel_root(d):
    """The literature β_*: I_{d/2+1}(β)/I_{d/2}(β) = 1/d (independent of the Landau formula)."""
    return optimize.brentq(lambda b: special.ive(d / 2 + 1, b) / special.ive(d / 2, b) - 1 / d, 0.1, 20, xtol=1e-15)


@pytest.fixture(scope="module")
def branches():
    """USA branches at β = β_*/2 and 2β_* for d = 2, 3 (computed once)."""
    out = {}
    for d in DIMS:
        b = st.beta_star(d)
        out[d, "super"] = st.branch(b / 2, d, nu_min=0.5 * st.critical_noise(b / 2, d))
        out[d, "sub"] = st.branch(2 * b, d, nu_min=0.95 * st.critical_noise(2 * b, d))
    return out


# -- exact anchors ------------------------------------------------------------------------------------
@pytest.mark.parametrize("d", DIMS)
@pytest.mark.parametrize("beta", [0.0, 0.3, 1.7, 6.0, 40.0])
def test_critical_noise_is_the_linear_threshold(d, beta):
    a = mf.kernel_multipliers(beta, d, 1)
    nu_usa = st.critical_noise(beta, d)
    nu_sa = st.critical_noise(beta, d, normalized=True)
    if beta == 0:
        assert nu_usa == pytest.approx(1 / d, rel=1e-15) and nu_sa == pytest.approx(1 / d, rel=1e-15)
        return
    assert abs(nu_usa - a[1] / beta) <= 1e-13 * nu_usa
    assert abs(nu_sa - a[1] / (beta * a[0])) <= 1e-13 * nu_sa
    # the degree-1 rate of the exact linear theory vanishes there
    for normalized, nu in ((False, nu_usa), (True, nu_sa)):
        rates = mf.linear_growth_rates(mf.Model(beta=beta, dim=d, normalized=normalized, noise=nu), 2)
        assert abs(rates[1]) <= 1e-12 * nu


@pytest.mark.parametrize("d", DIMS)
def test_beta_star_is_the_bessel_root(d):
    ref = bessel_root(d)
    assert abs(st.beta_star(d) - ref) <= 1e-8
    assert st.beta_star(d) == pytest.approx({2: 2.4469, 3: 1.8162}[d], abs=1e-4)
    # the Landau coefficient changes sign there, and only there
    assert st.landau_coefficient(ref * (1 - 1e-6), d) < 0 < st.landau_coefficient(ref * (1 + 1e-6), d)
    assert abs(st.landau_coefficient(ref, d)) < 1e-12


@settings(max_examples=30, deadline=None)
@given(beta=st_.floats(0.05, 12.0), d=st_.integers(2, 8))
def test_landau_sign_is_the_bessel_ratio(beta, d):
    ratio = special.ive(d / 2 + 1, beta) / special.ive(d / 2, beta)
    c = st.landau_coefficient(beta, d)
    assert np.sign(c) == np.sign(ratio - 1 / d) or abs(ratio - 1 / d) < 1e-12


def test_sa_is_supercritical_for_every_beta():
    for d in (2, 3, 5):
        assert st.beta_star(d, normalized=True) == np.inf
        assert all(st.landau_coefficient(b, d, normalized=True) < 0 for b in (0.1, 1, 5, 20, 100))


@pytest.mark.parametrize("d", DIMS)
def test_uniform_spectrum_is_exact(d):
    """At ρ = 1 the discrete linearised operator has the exact eigenvalues (a_l/β − ν) l(l+d−2) in every sector."""
    beta, L = 1.3, 24
    problem = ZonalSelfConsistency(beta, d, L)
    nu = 0.7 * problem.nu_c
    spec = problem.spectrum(np.zeros(L), nu / problem.nu_c)
    c = mf.velocity_multipliers(beta, d, L)
    for m, ev in spec.items():
        ls = np.arange(max(m, 1), L + 1)
        exact = (c[ls] - nu) * ls * (ls + d - 2)
        assert np.max(np.abs(np.sort(ev.real) - np.sort(exact))) <= 1e-12 * np.max(np.abs(exact))
        assert np.max(np.abs(ev.imag)) <= 1e-12 * np.max(np.abs(exact))
    # the leading eigenvalue crosses zero exactly at ν_c
    assert abs(problem.leading_eigenvalue(np.zeros(L), 1.0)) <= 1e-12 * problem.nu_c


# -- branches ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("d", DIMS)
@pytest.mark.parametrize("kind", ["super", "sub"])
def test_branch_bifurcates_at_nu_c(branches, d, kind):
    ds = branches[d, kind]
    beta = ds.attrs["beta"]
    a1 = mf.kernel_multipliers(beta, d, 1)[1]
    assert abs(ds.attrs["nu_c"] - a1 / beta) <= 1e-13 * ds.attrs["nu_c"]
    assert abs(ds.attrs["nu_bifurcation"] - a1 / beta) <= 1e-10 * ds.attrs["nu_c"]
    # the Landau coefficient formula against the branch: ν = ν_c(1 + c r² + O(r⁴))
    c = ds.attrs["landau_coefficient"]
    assert abs(ds.attrs["landau_fit"] - c) <= 1e-6 * abs(c)
    assert ds.attrs["transition"] == ("supercritical" if kind == "super" else "subcritical")


@pytest.mark.parametrize("d", DIMS)
def test_supercritical_branch(branches, d):
    ds = branches[d, "super"]
    nu_c = ds.attrs["nu_c"]
    nu, r = ds["nu"].values, ds["order"].values
    assert np.all(nu < nu_c) and bool(ds["stable"].all())
    assert np.isnan(ds.attrs["nu_fold"])
    near = (nu_c - nu > 1e-6 * nu_c) & (nu_c - nu < 1e-2 * nu_c)
    assert near.sum() >= 5
    slope = np.polyfit(np.log(nu_c - nu[near]), np.log(r[near] ** 2), 1)[0]
    assert abs(slope - 1) <= 0.02
    # and the amplitude is the Landau one: r² ≈ (ν_c − ν)/(|c| ν_c)
    c = ds.attrs["landau_coefficient"]
    closest = np.argmin(np.where(near, nu_c - nu, np.inf))
    assert r[closest] ** 2 == pytest.approx((nu_c - nu[closest]) / (-c * nu_c), rel=1e-2)


@pytest.mark.parametrize("d", DIMS)
def test_subcritical_branch_fold_and_stability(branches, d):
    ds = branches[d, "sub"]
    nu_c, nu_fold, r_fold = ds.attrs["nu_c"], ds.attrs["nu_fold"], ds.attrs["order_fold"]
    nu, r, stable = ds["nu"].values, ds["order"].values, ds["stable"].values
    assert nu_fold > 1.01 * nu_c
    assert np.max(nu) <= nu_fold * (1 + 1e-12)
    assert abs(np.max(nu) - nu_fold) <= 1e-3 * nu_c          # the refined fold is the top of the branch
    lower = (r < r_fold) & (nu > nu_c)                        # the branch between ν_c and ν_fold, before the fold
    assert lower.sum() >= 10 and not stable[lower].any()
    upper = r > r_fold * 1.05
    assert stable[upper].all()
    # the leading eigenvalue changes sign at the fold
    lead = ds["leading_eigenvalue"].values
    k = np.argmin(np.abs(r - r_fold))
    assert lead[max(k - 2, 0)] > 0 > lead[min(k + 2, len(r) - 1)]
    # a stable clustered state at 1.01 ν_c, coexisting with the (stable) uniform state
    state = st.branch_state(ds, 1.01 * nu_c, stable=True)
    assert state.residual <= 1e-11 and state.order > r_fold
    assert state.leading_eigenvalue < 0 and state.stable
    unstable = st.branch_state(ds, 1.01 * nu_c, stable=False)
    assert unstable.order < r_fold and unstable.leading_eigenvalue > 0
    # the Maxwell point lies between ν_c and ν_fold
    assert nu_c < ds.attrs["nu_maxwell"] < nu_fold


def test_branch_from_a_state_follows_the_fold(branches):
    """Continuation started at a stable state (``start=``), towards larger ν, turns at the same fold and
    comes back along the unstable part."""
    ds = branches[2, "sub"]
    nu_c = ds.attrs["nu_c"]
    state = st.self_consistent(mf.Model(beta=ds.attrs["beta"], dim=2, normalized=False, noise=1.05 * nu_c), 64,
                               zonal=True)
    again = st.branch(ds.attrs["beta"], 2, start=state, direction=+1, nu_min=1.02 * nu_c, sectors=(0, 1))
    assert again.attrs["nu_fold"] == pytest.approx(ds.attrs["nu_fold"], rel=1e-10)
    assert bool(again["stable"][0]) and not bool(again["stable"][-1])
    assert again["order"].values[-1] < again.attrs["order_fold"] < again["order"].values[0]


def test_fold_point_matches_the_branch(branches):
    ds = branches[2, "sub"]
    fold = st.fold_point(ds.attrs["beta"], 2)
    assert fold.nu == pytest.approx(ds.attrs["nu_fold"], rel=1e-10)
    assert fold.order == pytest.approx(ds.attrs["order_fold"], rel=1e-4)
    assert np.isnan(st.fold_point(1.0, 2).nu)


@pytest.mark.parametrize("d", DIMS)
def test_free_energy_envelope_identity(branches, d):
    """Along a branch of critical points, d(F − F[1])/dν = ∫ρ log ρ dσ (F[1] does not depend on ν)."""
    ds = branches[d, "super"]
    problem = ZonalSelfConsistency(ds.attrs["beta"], d, int(ds.attrs["resolution"]))
    nu, F, U = ds["nu"].values, ds["free_energy"].values, ds["coefficients"].values[:, 1:]
    assert np.all(F < 0)                                         # clustered states beat the unstable uniform one
    i = np.argmin(np.abs(nu - 0.8 * ds.attrs["nu_c"]))
    h = 1e-4 * nu[i]
    f = []
    for dn in (-h, h):
        u, _ = problem.newton(U[i], (nu[i] + dn) / problem.nu_c)
        f.append(problem.free_energy(u, (nu[i] + dn) / problem.nu_c))
    rho, hh, _, _ = problem.gibbs(U[i], nu[i] / problem.nu_c)
    entropy = problem.w @ (rho * np.log(rho))
    assert (f[1] - f[0]) / (2 * h) == pytest.approx(entropy, rel=1e-6)


@pytest.mark.parametrize("d", [4, 6])
def test_zonal_branches_in_any_dimension(d):
    ds = st.branch(st.beta_star(d) / 2, d, resolution=32, nu_min=0.9 * st.critical_noise(st.beta_star(d) / 2, d),
                   sectors=(0, 1, 2))
    assert abs(ds.attrs["nu_bifurcation"] - ds.attrs["nu_c"]) <= 1e-10 * ds.attrs["nu_c"]
    assert abs(ds.attrs["landau_fit"] - ds.attrs["landau_coefficient"]) <= 1e-6 * abs(ds.attrs["landau_coefficient"])
    assert abs(st.beta_star(d) - bessel_root(d)) <= 1e-8


@pytest.mark.parametrize("d", DIMS)
@pytest.mark.parametrize("beta", [1.0, 4.0])
def test_sa_landau_coefficient_against_the_branch(d, beta):
    ds = st.branch(beta, d, normalized=True, resolution=32, sectors=(0, 1),
                   nu_min=0.95 * st.critical_noise(beta, d, True))
    assert abs(ds.attrs["nu_bifurcation"] - st.critical_noise(beta, d, True)) <= 1e-10 * ds.attrs["nu_c"]
    assert abs(ds.attrs["landau_fit"] - ds.attrs["landau_coefficient"]) <= 1e-6 * abs(ds.attrs["landau_coefficient"])


# -- single states --------------------------------------------------------------------------------------
@pytest.mark.parametrize("d, L", [(2, 64), (3, 64)])
def test_full_solve_agrees_with_zonal(d, L):
    """The Fourier (S^1) / spherical-harmonic (S^2, ducc0) solve about a tilted axis reproduces the
    zonal Gegenbauer solve, rotated, and the same leading eigenvalue."""
    beta = 2 * st.beta_star(d)
    model = mf.Model(beta=beta, dim=d, normalized=False, noise=1.05 * st.critical_noise(beta, d))
    zonal = st.self_consistent(model, L, zonal=True)
    axis = np.ones(d) / np.sqrt(d)
    full = st.self_consistent(model, L, axis=axis)
    assert zonal.residual <= 1e-11 and full.residual <= 1e-11
    assert np.max(np.abs(full.axis - axis)) <= 1e-6           # rotations are neutral: the axis may drift a little
    x = mf.sample(mf.densities.uniform(), 400, d, rng=1)[0]
    profile = zonal._problem.density(zonal.zonal[1][1:], x @ full.axis)
    assert np.max(np.abs(full.density(x) - profile)) <= 1e-10
    assert full.order == pytest.approx(zonal.order, rel=1e-12)
    assert full.free_energy == pytest.approx(zonal.free_energy, rel=1e-10)
    assert full.leading_eigenvalue == pytest.approx(zonal.leading_eigenvalue, rel=1e-8)
    # the state carries the library's representation
    assert type(full.representation).__name__ == ("FourierSeries" if d == 2 else "SphericalHarmonicSeries")
    assert full.mass == pytest.approx(1.0, abs=1e-14)
    assert np.max(np.abs(zonal.density(x) - zonal._problem.density(zonal.zonal[1][1:], x @ zonal.axis))) <= 1e-12


def test_self_consistent_in_higher_dimension_and_sa():
    model = mf.Model(beta=1.0, dim=5, normalized=False, noise=0.8 * st.critical_noise(1.0, 5))
    s = st.self_consistent(model, 40)
    assert s.residual <= 1e-11 and s.order > 0.1 and s.stable
    x = mf.sample(mf.densities.uniform(), 4000, 5, rng=0)[0]
    assert np.mean(s.density(x)) == pytest.approx(1.0, abs=0.05)
    sa = st.self_consistent(mf.Model(beta=3.0, dim=2, noise=0.7 * st.critical_noise(3.0, 2, True)), 32)
    assert np.isnan(sa.free_energy) and sa.order > 0.5 and sa.residual <= 1e-11


def test_failure_names_the_residual():
    model = mf.Model(beta=2.0, dim=2, normalized=False, noise=0.5 * st.critical_noise(2.0, 2))
    with pytest.raises(mf.SolverError, match=r"residual max\|R\| = .* after 1 iterations"):
        st.self_consistent(model, 32, maxiter=1)
    with pytest.raises(mf.UnderResolved, match=r"`resolution`"):
        st.self_consistent(mf.Model(beta=6.0, dim=2, normalized=False, noise=0.3 * st.critical_noise(6.0, 2)), 8)


@pytest.mark.parametrize("call, match", [
    (lambda: st.critical_noise(np.nan, 2), r"`beta`"),
    (lambda: st.beta_star(1), r"`dim`"),
    (lambda: st.branch(1.0, 2, resolution=2), r"`resolution`"),
    (lambda: st.branch(1.0, 2, nu_min=-1.0), r"`nu_min`"),
    (lambda: st.branch(1.0, 2, direction=0), r"`direction`"),
    (lambda: st.self_consistent(mf.Model(beta=1.0, dim=2), 16), r"`model.noise`"),
    (lambda: st.self_consistent(mf.Model(beta=1.0, dim=4, noise=0.1), 16, zonal=False), r"`zonal`"),
    (lambda: st.self_consistent(mf.Model(beta=1.0, dim=2, noise=0.1), 16, guess=np.ones((3, 3))), r"`guess`"),
    (lambda: st.self_consistent("model", 16), r"`model`"),
])
def test_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_non_zonal_model_is_unsupported():
    model = mf.Model(beta=1.0, dim=2, noise=0.1, Q=np.diag([1.0, 2.0]))
    with pytest.raises(mf.UnsupportedModel):
        st.self_consistent(model, 16)


# -- against the dynamics -----------------------------------------------------------------------------
def _sup_distance(sol, state, d, i=-1):
    x = mf.sample(mf.densities.uniform(), 2000, d, rng=3)[0]
    return float(np.max(np.abs(sol.density(x, i) - state.density(x))))


@pytest.mark.parametrize("normalized", [False, True])
def test_linearised_rate_matches_the_pde(normalized):
    """A sector-0 eigenvector added to a stable state decays in the PDE at the predicted rate."""
    beta = st.beta_star(2) / 2 if not normalized else 3.0
    nu_c = st.critical_noise(beta, 2, normalized)
    model = mf.Model(beta=beta, dim=2, normalized=normalized, noise=0.8 * nu_c)
    state = st.self_consistent(model, 32, zonal=True)
    problem, u = state._zonal_problem()
    L = problem.linearised(u, model.noise / nu_c, 0)
    ev, vec = np.linalg.eig(L)
    k = np.argmax(ev.real)
    lam, v = nu_c * ev[k].real, vec[:, k].real
    v *= 2e-3 / np.max(np.abs(problem.basis.table @ v))
    e = state.axis

    def rho0(x):
        return state.density(x) + problem.basis.values(np.clip(x @ e, -1, 1)) @ v

    T = 3.0 / abs(lam)
    sol = solvers.FourierCircle(model, modes=32).solve(rho0, np.array([0.0, T / 2, T]), rtol=1e-10, atol=1e-13,
                                                       progress=False)
    d1, d2 = _sup_distance(sol, state, 2, 1), _sup_distance(sol, state, 2, 2)
    assert np.log(d2 / d1) / (T / 2) == pytest.approx(lam, rel=1e-3)


def test_noisy_pde_lands_on_the_branch(branches):
    """FourierCircle with noise from a perturbed branch state converges to it in sup norm."""
    ds = branches[2, "super"]
    nu = 0.8 * ds.attrs["nu_c"]
    state = st.branch_state(ds, nu)
    model = state.model
    e = state.axis

    def rho0(x):
        return state.density(x) * (1 + 0.2 * (x @ e) ** 2)

    sol = solvers.FourierCircle(model, modes=32).solve(rho0, np.array([0.0, 60.0]), rtol=1e-10, atol=1e-12,
                                                       progress=False, normalize=True)
    assert _sup_distance(sol, state, 2, 0) > 1e-2
    assert _sup_distance(sol, state, 2) <= 1e-6


@pytest.mark.slow
@pytest.mark.parametrize("d", DIMS)
@pytest.mark.parametrize("kind", ["super", "sub"])
def test_long_noisy_pde_lands_on_the_branch(branches, d, kind):
    """PDE runs started near stable states of both kinds of branch converge to them to 1e-6 in sup
    norm: to t = 200 at β_*/2 (ν = 0.8 ν_c), and at 2β_* (ν = 1.05 ν_c, a clustered state coexisting
    with the stable uniform one) for 16 relaxation times 1/|λ| (λ the leading eigenvalue)."""
    ds = branches[d, kind]
    state = st.branch_state(ds, (0.8 if kind == "super" else 1.05) * ds.attrs["nu_c"])
    L = 32 if kind == "super" else (64 if d == 2 else 48)
    state = st.self_consistent(state.model, L, guess=state, zonal=True, tail_tol=1e-7)   # tail 2e-8 at lmax 48
    e = state.axis

    def rho0(x):
        return state.density(x) * (1 + 0.1 * (x @ e))

    solver = solvers.FourierCircle(state.model, modes=L) if d == 2 else solvers.SphericalHarmonics(state.model, lmax=L)
    t_end = 200.0 if kind == "super" else 16.0 / abs(state.leading_eigenvalue)
    sol = solver.solve(rho0, np.array([0.0, t_end]), rtol=1e-9, atol=1e-12, progress=False, normalize=True)
    assert _sup_distance(sol, state, d, 0) > 1e-2
    assert _sup_distance(sol, state, d) <= 1e-6


@pytest.mark.slow
def test_noisy_particles_land_on_the_branch(branches):
    """n = 2000 noisy particles: the time-averaged order parameter is within 3 standard errors (of
    the realisations' averages, plus the finite-n bias bound) of the branch."""
    ds = branches[2, "super"]
    nu = 0.7 * ds.attrs["nu_c"]
    state = st.branch_state(ds, nu)
    n, B = 2000, 4
    rng = np.random.default_rng(0)
    x0 = np.stack([mf.sample(state.density, n, 2, rng=rng)[0] for _ in range(B)])
    t = np.linspace(0.0, 20.0, 41)
    sol = solvers.Particles(state.model, diagnostics="none").solve(x0, t, rng=1, dt=0.01, progress=False)
    x = np.asarray(sol.positions)[10:]                         # (T, B, n, d) from t = 5 on
    r = np.linalg.norm(x.mean(axis=2), axis=-1)                # (T, B)
    means = r.mean(axis=0)
    se = means.std(ddof=1) / np.sqrt(B)
    bias = 1.0 / (2 * n * state.order)                          # E|m_n| − |m| <= Var/(2|m|), Var <= 1/n
    assert abs(means.mean() - state.order) <= 3 * se + bias, (means, state.order)


# -- the experiment --------------------------------------------------------------------------------------
def test_noise_transition_experiment_reduced(tmp_path):
    """A reduced `noise_transition` (S^1, β = β_*/2, no SA) writes its files and its checks pass."""
    import json

    from meanfield.experiments import noise_transition

    report = noise_transition(tmp_path, dims=(2,), factors=(0.5,), sa=False, quick=True, n_particles=100,
                              progress=False)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["status"] == "finished" and summary["passed"], [c for c in summary["checks"] if not c["passed"]]
    res = summary["results"]["d2"]
    assert abs(res["beta_star"] - bessel_root(2)) <= 1e-8
    (key, b), = res["beta"].items()
    assert b["transition"] == "supercritical"
    assert abs(b["nu_bifurcation"] - b["nu_c"]) <= 1e-10 * b["nu_c"]
    assert {"branch_d2_beta1.223.nc", "dynamics_d2_beta1.223.nc", "noise_transition_d2.png"} <= set(summary["files"])
    ds = __import__("xarray").open_dataset(tmp_path / "branch_d2_beta1.223.nc")
    assert ds["stable"].values.all() and ds.attrs["transition"] == "supercritical"
    ds.close()
    assert report.passed


def test_noise_transition_cli_bad_input(capsys):
    from meanfield.cli import main

    assert main(["noise-transition", "--dims", "4", "--out", "/tmp/never-written"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "`dims`" in err[0]
