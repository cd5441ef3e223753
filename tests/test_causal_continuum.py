"""The layered continuity equation of causal attention (solvers.layered, meanfield.transformer.positions,
meanfield.transformer.causal, meanfield.representations.layered): against the exact Green's function, the
conservation of the mass of every position, the two masks, files and bad input."""
import numpy as np
import pytest
import scipy.linalg
from hypothesis import given, strategies as st
from scipy import integrate

import meanfield as mf
import solvers
from meanfield.transformer.causal import green_function, linear_response, psi, rate
from meanfield.transformer.kernels import minimum_degree
from meanfield.transformer.positions import (MOMENT_SWITCH, PANEL_NODES, PositionRule, _lagrange,
                                             exponential_moments, position_kernel)
from tolerances import rounding

EPS = 1e-6
SIGMAS = (0.5, 0.75, 1.0)


def bump(s):
    return np.exp(-((np.asarray(s) - 0.35) / 0.15) ** 2)


def causal(beta=1.0, dim=2, normalized=True, lam=1.0, mask="causal", **kw):
    return mf.Model(beta, dim, normalized=normalized, mask=mask, position_bias=lam, **kw)


def layered(model, positions=32, **kw):
    L = minimum_degree(model.beta, model.dim)
    if model.dim == 2:
        return solvers.FourierCircle(model, L, positions=positions, **kw)
    return solvers.SphericalHarmonics(model, L, positions=positions, **kw)


def perturbation(dim):
    """ρ0 = 1 + ε c(σ) Y(x) with Y = 2cos θ on S^1 (c_1 = ε c) and Y = x_3 on S^2 (clm[0, 1, 0] = ε c/√3)."""
    if dim == 2:
        return lambda x, s: 1 + EPS * bump(s) * 2 * x[..., 0]
    return lambda x, s: 1 + EPS * bump(s) * x[..., 2]


def amplitude(sol, i, s):
    """A(t_i, σ) of the degree-1 mode (the coefficient of Y over ε)."""
    data = sol.representation.at(sol.data[i], s)
    return data[1].real / EPS if sol.model.dim == 2 else data[0, 1, 0] * np.sqrt(3) / EPS


# -- the closed form ---------------------------------------------------------------------------------
@given(c=st.floats(-30, 30), y=st.floats(0, 20))
def test_psi_is_its_series(c, y):
    """ψ_c(y) = Σ c^{k+1} y^k/(k!(k+1)!), summed to 40 digits (mpmath: for c < 0 it alternates and
    cancels), equals the Bessel form to 1e-13 relative to ψ's scale |c|, for either sign of c."""
    mpmath = pytest.importorskip("mpmath")
    with mpmath.workdps(40):
        series = mpmath.nsum(lambda k: mpmath.mpf(c) ** (k + 1) * mpmath.mpf(y) ** k
                             / (mpmath.factorial(k) * mpmath.factorial(k + 1)), [0, mpmath.inf])
    assert psi(c, y) == pytest.approx(float(series), rel=1e-13, abs=1e-13 * max(1.0, abs(c)))


def test_constant_profile_grows_like_the_unmasked_mode():
    """A(0, ·) ≡ 1 gives A(t, σ) = e^{at} at every σ (∫ψ_c(y)e^{−y}dy = e^c − 1): the quadrature in Y
    of `linear_response` and the rates of `rate`."""
    model = causal(2.0, 3, normalized=False, lam=1.5)
    a, _ = rate(model, 2)
    got = linear_response(model, 2, lambda s: np.ones_like(s), 1.3, [0.1, 0.6, 1.0])
    np.testing.assert_allclose(got, np.exp(1.3 * a), rtol=1e-10)


@pytest.mark.parametrize("lam", [0.0, 1.0, 3.0])
def test_green_function_against_the_discrete_volterra_equation(lam):
    """exp(a t W) A0 with W the prefix means of `PositionRule` (an independent discretisation of the
    Volterra equation) converges to the Green's function's A(t, σ) at order >= 8 in the panel width."""
    model = causal(2.0, 2, normalized=False, lam=lam)
    a, _ = rate(model, 1)
    exact = linear_response(model, 1, bump, 2.0, SIGMAS)
    errors = []
    for M in (16, 32, 64):
        rule = PositionRule(M, lam)
        A = scipy.linalg.expm(a * 2.0 * rule.prefix_mean(np.eye(M))) @ bump(rule.nodes)
        errors.append(max(abs(rule.interpolate(A, s) / e - 1) for s, e in zip(SIGMAS, exact)))
    assert errors[-1] < 1e-5
    assert errors[0] / errors[1] > 8 and errors[1] / errors[2] > 30


def test_prefix_mean_is_exact_for_low_degree_and_averages():
    """ρ̄(s_i) = ∫_0^{s_i} k_λ(s_i, r) f(r) dr exactly for polynomials of degree <= 7 (the interpolant is
    exact), and the prefix mean of a constant is the constant (∫k_λ = 1)."""
    rule = PositionRule(24, 2.0)
    s = rule.nodes
    f = lambda r: 1 - 3 * r + r ** 7
    want = [integrate.quad(lambda r: position_kernel(2.0, si, r) * f(r), 0, si, epsabs=1e-14)[0] for si in s]
    np.testing.assert_allclose(rule.prefix_mean(f(s)), want, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(rule.prefix_mean(np.ones((24, 3))), 1.0, rtol=1e-14)
    assert rule.weights.sum() == pytest.approx(1.0, rel=1e-15) and np.all(rule.weights > 0)
    assert np.all(np.diff(rule.breaks)[:2] < np.diff(rule.breaks)[-1])          # graded towards σ = 0


SLOPES = (0.0, 0.5, 3.0, 30.0, 1e3, 1e6, 1e12, 1e300)


def exact_prefix_mean(lam, sigma, coef):
    """∫_0^σ k_λ(σ, r) f(r) dr for the polynomial f = Σ coef_k r^k, in 40 digits: with u = σ − r,
    f(σ − u) = Σ_m f^{(m)}(σ)(−u)^m/m! and λ∫_0^σ e^{−λu} u^m du = m! P(m + 1, λσ)/λ^m (P the regularised
    incomplete gamma function), over 1 − e^{−λσ}."""
    mpmath = pytest.importorskip("mpmath")
    with mpmath.workdps(40):
        lam, sigma = mpmath.mpf(lam), mpmath.mpf(sigma)
        f = [mpmath.mpf(c) for c in coef]
        total = mpmath.mpf(0)
        for m in range(len(f)):
            deriv = sum(f[k] * mpmath.ff(k, m) * sigma ** (k - m) for k in range(m, len(f)))
            if lam == 0:
                total += (-1) ** m * deriv * sigma ** (m + 1) / mpmath.factorial(m + 1)
            else:                                   # P = 1 to 40 digits beyond λσ = 1e4
                P = 1 if lam * sigma > 1e4 else mpmath.gammainc(m + 1, 0, lam * sigma, regularized=True)
                total += (-1) ** m * deriv * P / lam ** m
        return float(total / sigma if lam == 0 else total / -mpmath.expm1(-lam * sigma))


@pytest.mark.parametrize("lam", SLOPES)
def test_prefix_mean_is_exact_for_every_slope(lam):
    """The panel integrals are exact for any λ (`exponential_moments`; before, a Gauss rule in r lost
    the sharp factor e^{−λ(σ − r)} once λ·panel >> 10 and the runs stopped at t = 0 for λ = 1e6): for a
    polynomial of degree 7, ρ̄(s_i) equals the exact integral to 1e-13 of its scale at every node, finite."""
    rule = PositionRule(32, lam)
    coef = [1.0, -3.0, 0.5, 0.0, 2.0, 0.0, -1.0, 1.0]
    f = np.polynomial.polynomial.polyval(rule.nodes, coef)
    want = [exact_prefix_mean(lam, s, coef) for s in rule.nodes]
    got = rule.prefix_mean(f)
    assert np.all(np.isfinite(got))
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-13 * np.abs(want).max())


def test_exponential_moments_against_40_digits():
    """m_k(x) = ∫_0^1 e^{−xu} P_k(2u − 1) du on both sides of the switch between quadrature and the closed
    form, to 1e-14 of m_0, and m_k(x)·x → (−1)^k for x → ∞."""
    mpmath = pytest.importorskip("mpmath")
    x = np.array([0.0, 1.0, MOMENT_SWITCH, MOMENT_SWITCH * (1 + 1e-9), 1e4])
    got = exponential_moments(x, PANEL_NODES)
    for xi, row in zip(x, got):
        with mpmath.workdps(25):
            want = [float(mpmath.quad(lambda u: mpmath.exp(-mpmath.mpf(xi) * u) * mpmath.legendre(k, 2 * u - 1),
                                      [0, min(1, 1 / xi) if xi else 1, 1])) for k in range(PANEL_NODES)]
        np.testing.assert_allclose(row, want, rtol=0, atol=1e-14 * abs(want[0]))
    far = exponential_moments(np.array([1e100, 1e300]), PANEL_NODES) * np.array([[1e100], [1e300]])
    np.testing.assert_allclose(far, np.tile((-1.0) ** np.arange(PANEL_NODES), (2, 1)), rtol=1e-15)


def gauss_panel_weights(rule):
    """The panel integrals by a 2q-point Gauss rule in r over the whole integrand e^{−λ(end − r)} ℓ_j(r)
    (how they were formed before; exact to round-off while λ·panel is small)."""
    q = PANEL_NODES
    g, gw = np.polynomial.legendre.leggauss(2 * q)
    nodes = rule.nodes.reshape(rule.panels, q)
    out = []
    for p in range(rule.panels):
        a = rule.breaks[p]
        ends = np.append(nodes[p], rule.breaks[p + 1])
        r = a + 0.5 * (ends[:, None] - a) * (g + 1)
        wr = 0.5 * (ends[:, None] - a) * gw * np.exp(-rule.lam * (ends[:, None] - r))
        out.append(np.einsum("ek,ekj->ej", wr, _lagrange(nodes[p], r.ravel()).reshape(q + 1, 2 * q, q)))
    return np.array(out)


@pytest.mark.parametrize("lam", [0.0, 1.0, 3.0])
def test_moderate_slopes_keep_their_weights(lam):
    """At the slopes of the runs so far the exact panel integrals equal the former Gauss rule's to rounding."""
    rule = PositionRule(64, lam)
    window, across, inner = rule.prefix_parts()
    old = gauss_panel_weights(rule)
    scale = np.abs(old).max()
    assert np.abs(inner - old[:, :PANEL_NODES]).max() < 3e-14 * scale
    assert np.abs(across - old[:, PANEL_NODES]).max() < 3e-14 * scale


def test_the_infinite_slope_limit():
    """λ → ∞: k_λ(σ, ·) → δ(· − σ⁻), so ρ̄ = ρ (under either mask: for tokens, token i attends only to itself
    under "causal" and to token i − 1 under "causal-strict", both the density at σ in the continuum): every
    position moves as the unmasked equation from its own ρ0(·, σ). At λ = 1e300 the prefix means are the
    identity to rounding and the layered Fourier run (both masks) and SphericalHarmonics run equal unmasked
    runs per position to the time-stepping tolerance; at λ = 1e6 the Fourier run is within O(1/λ) of that."""
    assert np.abs(PositionRule(32, 1e300).prefix_mean(np.eye(32)) - np.eye(32)).max() < 1e-13
    t = [0.0, 0.5, 1.0]
    runs = {(lam, mask): solvers.FourierCircle(causal(2.0, lam=lam, mask=mask), 48, positions=16).solve(
        clustered, t, rtol=1e-11, atol=1e-13) for lam in (1e6, 1e300) for mask in ("causal", "causal-strict")}
    plain = solvers.FourierCircle(mf.Model(2.0, 2), 48)
    nodes = runs[1e300, "causal"].representation.positions
    for i in (0, 5, 11, 15):
        alone = plain.solve(lambda x: clustered(x, nodes[i]), t, rtol=1e-11, atol=1e-13)
        for mask in ("causal", "causal-strict"):
            np.testing.assert_allclose(runs[1e300, mask].data[:, i], alone.data, rtol=0, atol=1e-9)
            assert np.abs(runs[1e6, mask].data[:, i] - alone.data).max() < 1e-5
    assert np.abs(alone.data[-1] - alone.data[0]).max() > 0.05                       # it moves
    gentle = lambda x, s: 1 + 0.4 * x[..., 2] * np.cos(2 * s) + 0.3 * x[..., 0] * x[..., 1] * s   # noqa: E731
    sphere = solvers.SphericalHarmonics(causal(1.0, 3, lam=1e300), 16, positions=8).solve(
        gentle, t, rtol=1e-11, atol=1e-13)
    s = sphere.representation.positions[5]
    alone = solvers.SphericalHarmonics(mf.Model(1.0, 3), 16).solve(lambda x: gentle(x, s), t, rtol=1e-11,
                                                                    atol=1e-13)
    x = mf.sphere_quadrature(50, 3).points
    for i in range(len(t)):
        np.testing.assert_allclose(sphere.density(x, i, position=s), alone.density(x, i), rtol=0, atol=1e-9)


@pytest.mark.parametrize("dim", [2, 3])
def test_the_labels_at_a_huge_slope(dim):
    """The labels in (σ, x) at λ = 1e300: the field at each position is the unmasked field of that position's
    own labels (ρ̄ = ρ) to 1e-12, and a short run at λ = 1e6 is finite and moves."""
    from solvers.lagrangian import velocity_divergence
    from solvers.layered_lagrangian import layered_velocity_divergence
    rng = np.random.default_rng(3)
    rule, n = PositionRule(16, 1e300), 10
    z = rng.normal(size=(16, n, dim))
    z /= np.linalg.norm(z, axis=-1, keepdims=True)
    w = rng.random((16, n))
    w /= w.sum(1, keepdims=True)
    for normalized in (True, False):
        X, div = layered_velocity_divergence(z, w, rule, 1.5, normalized=normalized)
        for i in range(16):
            ref = velocity_divergence(z[i], z[i], w[i], 1.5, normalized=normalized)
            scale = 1 + np.abs(ref[1]).max()
            assert np.abs(X[i] - ref[0]).max() < 1e-12 * scale and np.abs(div[i] - ref[1]).max() < 1e-12 * scale
    labels = solvers.Lagrangian(causal(1.0, dim, lam=1e6), 32 if dim == 2 else 72, positions=8)
    sol = labels.solve(clustered, [0.0, 0.1])
    assert np.all(np.isfinite(sol.data[-1])) and np.abs(sol.data[-1] - sol.data[0]).max() > 3e-4


def test_green_function_vanishes_beyond_the_diagonal():
    assert green_function(1.0, 0.5, 0.7, 2.0, 1.0) == 0.0
    assert green_function(1.0, 0.5, 0.5 - 1e-12, 2.0, 1.0) == pytest.approx(position_kernel(1.0, 0.5, 0.5) * 2.0)


# -- linear response of the layered solvers -----------------------------------------------------------
@pytest.mark.parametrize("lam", [1.0, 2.0])
@pytest.mark.parametrize("normalized", [True, False], ids=["SA", "USA"])
@pytest.mark.parametrize("dim", [2, 3], ids=["S1", "S2"])
def test_linear_response_matches_the_green_function(dim, normalized, lam):
    """ρ0 = 1 + ε c(σ) Y: the amplitude at σ = 0.5, 0.75, 1 agrees with the exact Green's function to 1e-3."""
    model = causal(1.0, dim, normalized, lam)
    sol = layered(model).solve(perturbation(dim), [0.0, 3.0], rtol=1e-9, atol=1e-16)
    exact = linear_response(model, 1, bump, 3.0, SIGMAS)
    got = np.array([amplitude(sol, -1, s) for s in SIGMAS])
    np.testing.assert_allclose(got, exact, rtol=1e-3)
    assert np.all(got > bump(np.array(SIGMAS)))             # the mode grows (attractive)


# -- invariants ---------------------------------------------------------------------------------------
def clustered(x, s):
    """A finite perturbation that turns with the position (mass 1 and positive at every s, on S^1 and S^2):
    on S^1, 1 + 0.6 cos(θ − 2s) + 0.3 s cos 3θ."""
    x0, x1 = x[..., 0], x[..., 1]
    return 1 + 0.6 * (x0 * np.cos(2 * s) + x1 * np.sin(2 * s)) + 0.3 * s * (4 * x0 ** 3 - 3 * x0)


@pytest.mark.parametrize("dim", [2, 3])
def test_mass_of_every_position_is_conserved_to_round_off(dim):
    model = causal(3.0, dim, True, 1.0, noise=0.01)
    resolution = {"modes": 64} if dim == 2 else {"lmax": 24}
    solver = (solvers.FourierCircle if dim == 2 else solvers.SphericalHarmonics)(model, positions=16, **resolution)
    sol = solver.solve(clustered, [0.0, 0.5, 1.0])
    masses = np.array([sol.representation.mass(d, per_position=True) for d in sol.data])
    steps = sol.stats["nsteps"]                                              # round-off: a few eps per step
    np.testing.assert_allclose(masses - masses[0], 0.0, rtol=0, atol=rounding(1.0, terms=steps))
    np.testing.assert_allclose(sol.mass, 1.0, rtol=0, atol=rounding(1.0, terms=steps + 16))
    assert sol.representation.mass(sol.data[-1], position=0.3) == pytest.approx(1.0, abs=rounding(1.0, terms=steps + 16))
    assert np.abs(sol.data[-1] - sol.data[0]).max() > 0.05                # it moves


def test_causal_and_causal_strict_have_one_continuum():
    a = solvers.FourierCircle(causal(2.0, mask="causal"), 48, positions=16).solve(clustered, [0.0, 1.0])
    b = solvers.FourierCircle(causal(2.0, mask="causal-strict"), 48, positions=16).solve(clustered, [0.0, 1.0])
    np.testing.assert_array_equal(a.data, b.data)


@pytest.mark.parametrize("lam", [0.0, 2.0])
def test_position_independent_density_moves_like_the_unmasked_equation(lam):
    """If ρ(σ) does not depend on σ, neither does ρ̄ = ∫k_λ ρ dr = ρ: every layer solves the unmasked
    equation (an independent run of FourierCircle), and a callable of x alone is such a state."""
    f = lambda x: 1 + 0.5 * x[..., 0] + 0.2 * x[..., 1] ** 2 - 0.1
    solver = solvers.FourierCircle(causal(2.0, lam=lam), 48, positions=16)
    sol = solver.solve(f, [0.0, 1.0, 2.0])
    same = solver.solve(lambda x, s: f(x), [0.0, 1.0, 2.0])
    np.testing.assert_array_equal(sol.data, same.data)
    plain = solvers.FourierCircle(mf.Model(2.0, 2), 48).solve(f, [0.0, 1.0, 2.0])
    np.testing.assert_allclose(sol.data, plain.data[:, None, :].repeat(16, 1), atol=1e-8)
    assert abs(plain.data[-1, 1]) > 1.5 * abs(plain.data[0, 1])        # it does move


def test_density_and_measure_at_a_position():
    """``sol.density(x, i, position=s)`` is the σ-interpolant of the layers (a node gives its own
    density); ``sol.measure(i)`` is the joint measure; ``sol.measure(i, position=s)`` one layer's."""
    sol = solvers.FourierCircle(causal(2.0), 48, positions=32).solve(clustered, [0.0, 0.5])
    rep = sol.representation
    x = mf.sphere_quadrature(64, 2).points
    s5 = rep.positions[5]
    np.testing.assert_allclose(sol.density(x, 0, position=s5), clustered(x, s5), atol=1e-12)
    np.testing.assert_allclose(sol.density(x, 0, position=0.37), clustered(x, 0.37), atol=1e-9)
    th = np.arctan2(x[:, 1], x[:, 0])
    marginal = 1 + 0.6 * (np.sin(2 - th) + np.sin(th)) / 2 + 0.15 * np.cos(3 * th)     # ∫_0^1 ρ0(σ, θ) dσ
    np.testing.assert_allclose(sol.density(x, 0), marginal, atol=1e-12)
    pts, w = joint = sol.measure(-1)
    assert pts.shape == (w.size, 2) and joint.positions.shape == w.shape
    assert w.sum() == pytest.approx(1.0, abs=1e-13)
    np.testing.assert_allclose(np.bincount(np.searchsorted(rep.positions, joint.positions), w), rep.position_weights,
                               atol=1e-14)
    p1, w1 = sol.measure(-1, position=0.9)
    assert w1.sum() == pytest.approx(1.0) and p1.shape[1] == 2
    assert rep.energy(2.0, sol.data[-1], position=0.9) > rep.energy(2.0, sol.data[0], position=0.9)


def test_files_carry_a_cf_position_coordinate(tmp_path):
    sol = solvers.SphericalHarmonics(causal(2.0, 3), 24, positions=16).solve(clustered, [0.0, 0.2])
    path = sol.save(tmp_path / "layered.nc")
    import xarray as xr

    with xr.open_dataset(path, decode_times=False) as ds:
        assert ds["position"].attrs["units"] == "1" and "position" in ds["clm"].dims
        np.testing.assert_allclose(ds["position"].values, sol.representation.positions)
        np.testing.assert_allclose(ds["position_weight"].sum(), 1.0)
        np.testing.assert_allclose(ds["mass_per_position"].values, 1.0, atol=1e-14)
    back = mf.load(path)
    np.testing.assert_array_equal(back.data, sol.data)
    assert back.representation.positions.tolist() == sol.representation.positions.tolist()
    x = mf.sphere_quadrature(20, 3).points
    np.testing.assert_allclose(back.density(x, -1, position=0.6), sol.density(x, -1, position=0.6), rtol=1e-14)
    later = solvers.SphericalHarmonics(causal(2.0, 3), 24, positions=16).solve(back, [0.2, 0.3])       # a layered run continues a layered file
    assert later.t[0] == 0.2 and later.data.shape[1:] == sol.data.shape[1:]


def test_positions_auto_refines_a_sharp_profile():
    """``positions="auto"`` starts at 32 and doubles while the top Legendre degrees of the panels exceed
    tail_tol (the initial data is sampled at the start, so the refined run agrees with the fixed one at
    32 positions to within that sampling); a profile the panels resolve stays at 32."""
    sharp = lambda x, s: 1 + 0.5 * np.exp(-((s - 0.6) / 0.12) ** 2) * x[..., 0]
    model = causal(1.0, lam=1.0)
    sol = solvers.FourierCircle(model, 16, positions="auto").solve(sharp, [0.0, 0.5])
    assert sol.stats["positions_final"] >= 64 and sol.data.shape[1] == sol.stats["positions_final"]
    assert sol.diagnostics["position_tail"][-1] <= 1e-6 < sol.diagnostics["position_tail"][0]
    fixed = solvers.FourierCircle(model, 16, positions=32).solve(sharp, [0.0, 0.5])
    for s in (0.3, 0.55, 0.6, 0.62, 1.0):
        np.testing.assert_allclose(sol.representation.at(sol.data[-1], s), fixed.representation.at(fixed.data[-1], s),
                                   atol=2e-5)
    smooth = solvers.FourierCircle(model, 16, positions="auto").solve(lambda x, s: 1 + 0.5 * s * x[..., 0], [0, 0.5])
    assert smooth.stats["positions_final"] == 32


# -- bad input ----------------------------------------------------------------------------------------
def test_positions_and_masks_are_checked():
    with pytest.raises(ValueError, match="`positions`"):
        solvers.FourierCircle(mf.Model(1.0, 2), 16, positions=32)
    with pytest.raises(ValueError, match="`positions`"):
        solvers.FourierCircle(causal(1.0), 16)
    with pytest.raises(ValueError, match="`positions`"):
        solvers.SphericalHarmonics(causal(1.0, 3), 16)
    with pytest.raises(ValueError, match="`positions`"):
        solvers.FourierCircle(causal(1.0), 16, positions=20)
    with pytest.raises(ValueError, match="`positions`"):
        solvers.FourierCircle(causal(1.0), 16, positions="many")
    with pytest.raises(ValueError, match="`on_underresolved`"):
        layered(causal(1.0)).solve(clustered, [0, 1], on_underresolved="later")


@pytest.mark.parametrize("position", [0.0, -0.2, 1.5, np.nan, "end"])
def test_bad_position(position):
    sol = layered(causal(1.0), 8).solve(clustered, [0.0])
    with pytest.raises(ValueError, match="`position`"):
        sol.density(np.array([[1.0, 0.0]]), 0, position=position)
    with pytest.raises(ValueError, match="`position`"):
        sol.measure(0, position=position)


def test_position_on_an_unmasked_solution():
    sol = solvers.FourierCircle(mf.Model(1.0, 2), 16).solve(lambda x: 1 + 0.1 * x[..., 0], [0.0])
    with pytest.raises(ValueError, match="`position`"):
        sol.density(np.array([[1.0, 0.0]]), 0, position=0.5)


@pytest.mark.parametrize("rho0, what", [
    (lambda x, s: np.where(s > 0.5, np.nan, 1.0) + 0 * x[..., 0], "NaN"),
    (lambda x, s: 1 + (1 + s) * x[..., 0], "non-negative"),
    (lambda x, s: (1 + s) * np.ones(x.shape[:-1]), "mass"),
])
def test_initial_data_is_checked_per_position(rho0, what):
    with pytest.raises(ValueError, match=f"`rho0`.*{what}.*position s="):
        layered(causal(1.0), 16).solve(rho0, [0.0, 1.0])


# -- particles against the continuum ------------------------------------------------------------------
def signal(theta):
    return 1 + 0.6 * np.cos(theta) + 0.3 * np.sin(2 * theta)


def quasi_tokens(n):
    """n tokens in order with angles F^{-1}(frac(jφ)) (golden-ratio Kronecker sequence through the inverse
    law of `signal`): quasi-random in (position, angle), the same law at every position."""
    grid = np.linspace(0, 2 * np.pi, 1 << 16, endpoint=False)
    cdf = np.concatenate([[0.0], np.cumsum(signal(grid + np.pi / (1 << 16)))])
    u = np.mod(np.arange(1, n + 1) * (np.sqrt(5) - 1) / 2, 1.0)
    theta = np.interp(u, cdf / cdf[-1], np.linspace(0, 2 * np.pi, (1 << 16) + 1))
    return np.stack([np.cos(theta), np.sin(theta)], -1)


@pytest.fixture(scope="module")
def causal_runs():
    """(SA), S^1, β = 2, λ = 1 to t = 3: the layered continuum and the masked particles for n = 1024,
    4096, 16384 quasi-random tokens of `signal`."""
    model = causal(2.0, 2, True, 1.0)
    continuum = solvers.FourierCircle(model, 128, positions=16).solve(lambda x: signal(np.arctan2(x[..., 1], x[..., 0])),
                                                                       [0.0, 3.0])
    particles = {n: solvers.Particles(model, diagnostics="none").solve(quasi_tokens(n), [0.0, 3.0]).positions[-1]
                 for n in (1024, 4096, 16384)}
    return continuum, particles


def quarter_errors(continuum, x):
    """max |mean direction of the tokens in each quarter of positions − the continuum's| (4,): the
    continuum's mean of x over a quarter is ∫ (Re c_1, −Im c_1) dσ, by Gauss–Legendre in σ."""
    rep, n = continuum.representation, len(x)
    g, gw = np.polynomial.legendre.leggauss(12)
    out = []
    for q in range(4):
        s = (q + 0.5 + 0.5 * g) / 4
        c1 = sum(w / 2 * rep.at(continuum.data[-1], si)[1] for si, w in zip(s, gw))
        out.append(np.abs(x[q * n // 4:(q + 1) * n // 4].mean(0) - [c1.real, -c1.imag]).max())
    return np.array(out)


@pytest.mark.slow
@pytest.mark.skipif(not solvers.Particles.takes_mask, reason="needs the masked Particles")
def test_particles_against_the_continuum_mean_direction(causal_runs):
    """n = 4096: the mean direction of the tokens agrees with the continuum's to 1e-2 in the last three
    quarters of positions. The first quarter carries the tokens that attend to few predecessors (token 1
    does not move, the continuum's σ → 0 moves like the unmasked equation): its error falls like about
    n^{-2/3} and is below 1e-2 from n = 16384 on."""
    continuum, particles = causal_runs
    errors = {n: quarter_errors(continuum, x) for n, x in particles.items()}
    assert np.all(errors[4096][1:] < 1e-2)
    assert errors[1024][0] > 2 * errors[4096][0] > 4 * errors[16384][0]
    assert np.all(errors[16384] < 1e-2)


@pytest.mark.slow
@pytest.mark.skipif(not solvers.Particles.takes_mask, reason="needs the masked Particles")
def test_particles_against_the_continuum_w1_in_a_window(causal_runs):
    """W1 on S^1 between the tokens with positions in (1/2, 3/4] and the continuum's law of x over that
    window falls as n grows."""
    continuum, particles = causal_runs
    rep = continuum.representation
    g, gw = np.polynomial.legendre.leggauss(8)
    window = sum(w / 2 * rep.at(continuum.data[-1], 0.625 + 0.125 * gi) for gi, w in zip(g, gw))
    law = rep.base.measure(window)
    w1 = [mf.wasserstein((x[len(x) // 2:3 * len(x) // 4], np.full(len(x) // 4, 4.0 / len(x))), law)
          for x in particles.values()]
    assert w1[0] > w1[1] > w1[2]
    assert w1[2] < 5e-3


def test_picture_of_the_density_over_position_and_angle(tmp_path):
    """``sol.plot`` draws ρ over (θ, σ) at chosen times; the map's values are the layers' densities."""
    sol = solvers.FourierCircle(causal(2.0), 48, positions=16).solve(clustered, [0.0, 0.5, 1.0])
    sigma, theta, rho = sol.representation.position_map(sol.data[0], n=64, position_count=10)
    x = np.stack([np.cos(theta), np.sin(theta)], -1)
    np.testing.assert_allclose(rho, [clustered(x, s) for s in sigma], atol=1e-8)
    fig = sol.plot(times=[0, 2], path=tmp_path / "layered.png")
    assert (tmp_path / "layered.png").stat().st_size > 0
    assert [ax.get_ylabel() for ax in fig.axes[:2]] == [r"token position $\sigma$"] * 2
    assert "causal mask" in fig._suptitle.get_text() and "M = 16 positions" in fig._suptitle.get_text()


def test_grid_of_a_layered_file_holds_the_marginal(tmp_path):
    """``save(grid=True)``: the cell means of the x-marginal ∫ρ(σ, ·)dσ, whose mass is the run's."""
    import xarray as xr

    sol = solvers.FourierCircle(causal(2.0), 48, positions=16).solve(clustered, [0.0, 0.5])
    with xr.open_dataset(sol.save(tmp_path / "grid.nc", grid=True), decode_times=False) as ds:
        total = (ds["density"] * ds["cell_weight"]).sum(dim=[d for d in ds["density"].dims if d != "time"])
        np.testing.assert_allclose(total.values, 1.0, atol=1e-12)
        th = ds["theta"].values                     # t = 0: the marginal of `clustered` at the cell centres
        marginal = 1 + 0.6 * (np.sin(2 - th) + np.sin(th)) / 2 + 0.15 * np.cos(3 * th)
        np.testing.assert_allclose(ds["density"].isel(time=0).values, marginal, atol=1e-4)
