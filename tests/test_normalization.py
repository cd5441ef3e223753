"""Where the normalisation sits (docs/normalization.md): the speed factors of every scheme, their
collapse laws, the continuum solvers that take them, and bad input."""
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import meanfield as mf
import solvers
from meanfield.errors import UnsupportedModel
from tolerances import assert_rounding_close, rounding

N, D = 8, 16
SCHEMES = ("post", "pre", "mix", "peri", "ngpt", "sqrt-depth")


def model(scheme, beta=1.0, **kw):
    extra = {"mix_depth": 1.0} if scheme == "mix" else {}
    return mf.Model(beta, D, normalization=scheme, **extra, **kw)


def inverse_speeds(scheme, beta, radii, t=0.0, alpha=1.0, normalized=True):
    """s_j⁻¹ at orthonormal tokens: A_j = (e^β θ_j + Σ_{k≠j} θ_k)/Z with Z = e^β + n − 1 ((SA)) or n
    ((USA)), so ‖A_j‖ = sqrt(e^{2β} + n − 1)/Z."""
    norm_a = np.sqrt(np.exp(2 * beta) + N - 1) / (np.exp(beta) + N - 1 if normalized else N)
    if scheme == "mix":
        scheme = "post" if t <= 1.0 else "pre"
    return {"post": np.ones(N), "pre": 1 / radii, "peri": 1 / (radii * norm_a),
            "ngpt": np.full(N, alpha / norm_a), "sqrt-depth": np.full(N, 1 / np.sqrt(t + 1))}[scheme]


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("t", [0.0, 3.0])
@settings(max_examples=10, deadline=None)
@given(beta=st.floats(-2.0, 4.0), radii=st.lists(st.floats(0.2, 5.0), min_size=N, max_size=N),
       normalized=st.booleans())
def test_gram_derivative_at_orthonormal_tokens(scheme, t, beta, radii, normalized):
    """d⟨θ_j, θ_k⟩/dt = (s_j⁻¹ + s_k⁻¹)/(e^β + n − 1) from orthonormal tokens ((USA): /n), to 1e-12."""
    radii = np.array(radii)
    theta = np.eye(D)[:N]
    v = solvers.Particles(model(scheme, beta, normalized=normalized)).velocity(theta, radii=radii, t=t)
    rate = v @ theta.T + theta @ v.T
    inv = inverse_speeds(scheme, beta, radii, t, normalized=normalized)
    expected = (inv[:, None] + inv[None, :]) / (np.exp(beta) + N - 1 if normalized else N)
    off = ~np.eye(N, dtype=bool)
    # the velocity is s⁻¹ times a quotient of N-term sums whose terms are up to e^{|β|} times the smallest
    scale = np.max(inv) * np.exp(abs(beta))
    assert_rounding_close(rate[off], expected[off], scale=scale, terms=N, factor=64)
    assert_rounding_close(np.diag(rate), 0.0, scale=scale, terms=N, factor=64)


def pair_gap(positions):
    """1 − mean pairwise ⟨θ_j, θ_k⟩ (j ≠ k) per saved time, as the mean of |θ_j − θ_k|²/2 (no cancellation)."""
    diff = positions[..., :, None, :] - positions[..., None, :, :]
    n = positions.shape[-2]
    return 0.5 * np.square(diff).sum((-1, -2, -3)) / (n * (n - 1))


def cap(n=N, d=D, spread=0.3, seed=0):
    """Tokens in a cap about e_1 (the law shows once the cloud is one cluster): e_1 + spread·g, normalised."""
    x = np.eye(d)[0] + spread * np.random.default_rng(seed).standard_normal((n, d))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


# (late window, the variable the log of the gap is linear in, the slope of the law)
LAWS = {"post": (np.linspace(4, 8, 9), lambda t: t, -2.0),                        # e^{−2t}
        "pre": (np.geomspace(200, 1000, 9), np.log, -2.0),                         # t^{−2}
        "peri": (np.geomspace(200, 1000, 9), np.log, -2.0),                        # t^{−2}
        "sqrt-depth": (np.linspace(30, 60, 9), lambda t: np.sqrt(t + 1), -4.0),    # e^{−4√t}
        "ngpt": (np.linspace(2, 4, 9), lambda t: t, -3.0)}                         # e^{−2∫α}, α = 1.5


@pytest.mark.parametrize("scheme", list(LAWS))
def test_collapse_rates(scheme):
    """1 − mean ⟨θ_j, θ_k⟩ decays at the scheme's law (fitted slope within 10%), n = 8, d = 16, β = 1."""
    window, variable, slope = LAWS[scheme]
    extra = {"ngpt_alpha": 1.5} if scheme == "ngpt" else {}
    sol = solvers.Particles(model(scheme, **extra), diagnostics="none").solve(
        cap(), np.concatenate([[0.0], window]), rtol=1e-11, atol=1e-14)
    fitted = np.polyfit(variable(window), np.log(pair_gap(sol.positions[1:])), 1)[0]
    assert abs(fitted / slope - 1) < 0.1


def test_pre_radii_grow_like_t_and_mix_switches_at_its_depth():
    """Near consensus ⟨θ, A⟩ → 1, so "pre" radii grow like t; "mix" keeps them fixed up to τ."""
    sol = solvers.Particles(model("pre"), diagnostics="none").solve(cap(), [0.0, 500.0, 1000.0], rtol=1e-10)
    growth = np.diff(sol.radii[1:], axis=0)[0] / 500.0
    np.testing.assert_allclose(growth, 1.0, atol=1e-4)
    mix = mf.Model(1.0, D, normalization="mix", mix_depth=2.0)
    sol = solvers.Particles(mix, diagnostics="none").solve(cap(), [0.0, 1.0, 2.0, 3.0], rtol=1e-11, atol=1e-13)
    np.testing.assert_allclose(sol.radii[:3], 1.0, atol=1e-9)
    assert np.all(sol.radii[3] > 1.5)
    post = solvers.Particles(mf.Model(1.0, D), diagnostics="none").solve(cap(), [0.0, 2.0], rtol=1e-11, atol=1e-13)
    np.testing.assert_allclose(sol.positions[2], post.positions[-1], atol=1e-8)


@pytest.mark.parametrize("scheme", ["pre", "peri", "ngpt"])
def test_fixed_steps_converge_to_adaptive(scheme):
    """Euler (plain for the radial schemes, θ ← N(θ + h s⁻¹A) otherwise) is first order: halving h halves the error."""
    P = solvers.Particles(model(scheme), diagnostics="none")
    r0 = np.linspace(0.5, 2.0, N)
    ref = P.solve(cap(), [0.0, 1.0], radii=r0, rtol=1e-12, atol=1e-14)
    errs = []
    for dt in (0.01, 0.005):
        sol = P.solve(cap(), [0.0, 1.0], radii=r0, method="euler-normalize", dt=dt)
        errs.append(np.abs(sol.positions[-1] - ref.positions[-1]).max() + np.abs(sol.radii[-1] - ref.radii[-1]).max())
    assert 1.8 < errs[0] / errs[1] < 2.2


def test_radii_restart_file_and_batches(tmp_path):
    """A run continued from its saved file (radii in the file) equals the run straight through;
    batches with their own radii run as one."""
    P = solvers.Particles(model("peri"), diagnostics="none")
    r0 = np.linspace(0.5, 2.0, N)
    whole = P.solve(cap(), [0.0, 1.0, 2.0], radii=r0, method="euler-normalize", dt=0.01)
    first = P.solve(cap(), [0.0, 1.0], radii=r0, method="euler-normalize", dt=0.01)
    first.save(tmp_path / "peri.nc")
    loaded = mf.load(tmp_path / "peri.nc")
    np.testing.assert_array_equal(loaded.radii, first.radii)
    rest = P.solve(tmp_path / "peri.nc", [1.0, 2.0], method="euler-normalize")
    np.testing.assert_allclose(rest.radii[-1], whole.radii[-1], rtol=1e-13)
    np.testing.assert_allclose(rest.positions[-1], whole.positions[-1], atol=1e-13)
    batch = P.solve(np.stack([cap(), cap(seed=1)]), [0.0, 1.0], radii=np.stack([r0, r0[::-1]]),
                    method="euler-normalize", dt=0.01)
    np.testing.assert_allclose(batch.radii[1, 0], first.radii[-1], rtol=1e-13)
    other = P.solve(cap(seed=1), [0.0, 1.0], radii=r0[::-1], method="euler-normalize", dt=0.01)
    np.testing.assert_allclose(batch.positions[-1, 1], other.positions[-1], atol=1e-13)


@pytest.mark.parametrize("scheme", ["peri", "ngpt"])
def test_masked_first_token_stays(scheme):
    """Under the strict causal mask the first token attends to nobody: A = 0, it does not move."""
    m = model(scheme, mask="causal-strict")
    sol = solvers.Particles(m, diagnostics="none").solve(cap(), [0.0, 1.0], rtol=1e-10)
    np.testing.assert_allclose(sol.positions[-1, 0], sol.positions[0, 0], rtol=0, atol=1e-15)
    assert np.all(np.isfinite(sol.positions)) and np.ptp(sol.positions[:, 1]) > 0


def test_bad_input():
    with pytest.raises(ValueError, match="`normalization`.*'post', 'pre'"):
        mf.Model(1.0, 3, normalization="layer")
    with pytest.raises(UnsupportedModel, match="`normalization`"):
        solvers.Gegenbauer(mf.Model(1.0, 3, normalization="pre"))
    P = solvers.Particles(model("pre"))
    with pytest.raises(ValueError, match="`radii`"):
        P.solve(cap(), [0.0, 1.0], radii=-np.ones(N))
    with pytest.raises(ValueError, match="`radii`"):
        P.solve(cap(), [0.0, 1.0], radii=np.ones(N + 1))
    with pytest.raises(ValueError, match="`normalization`"):
        P.solve(cap(), [0.0, 1.0], domain="euclidean")
    noisy = mf.Model(1.0, D, noise=0.1, normalization="ngpt")
    with pytest.raises(ValueError, match="`normalization`"):
        solvers.Particles(noisy).solve(cap(), [0.0, 1.0])


def test_cli_exits_2_for_an_unknown_normalization(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "meanfield", "phase-diagram", "--normalization", "layer",
                           "--out", str(tmp_path / "x")], capture_output=True, text=True)
    assert proc.returncode == 2
    assert "`normalization`" in proc.stderr or "normalization" in proc.stderr


def test_radial_multipliers_are_the_beta_derivative():
    """∂_β a_l = a_{l+1} + l a_l/β against a central difference in β, and 1/d at l = 1 for β = 0."""
    from meanfield.transformer.kernels import kernel_multipliers, radial_multipliers

    for beta, dim in ((1.0, 2), (-2.0, 3), (5.0, 5)):
        h = 1e-5
        fd = (kernel_multipliers(beta + h, dim, 8) - kernel_multipliers(beta - h, dim, 8)) / (2 * h)
        np.testing.assert_allclose(radial_multipliers(beta, dim, 8), fd, rtol=1e-8, atol=1e-12)
    np.testing.assert_array_equal(radial_multipliers(0.0, 3, 3), [0.0, 1 / 3, 0.0, 0.0])


def von_mises(x):
    return np.exp(2 * x[..., 0] + 0.5 * x[..., 1] * x[..., 0])


def spectral_run(scheme, dim, t_end):
    """The model ("ngpt" with α = 1.3) and its FourierCircle (modes 128) or SphericalHarmonics (lmax 32)
    run from `von_mises` to ``t_end``."""
    m = mf.Model(1.0, dim, normalization=scheme, **({"ngpt_alpha": 1.3} if scheme == "ngpt" else {}))
    solver = solvers.FourierCircle(m, 128) if dim == 2 else solvers.SphericalHarmonics(m, 32)
    return m, solver.solve(von_mises, [0.0, t_end], rtol=1e-10, atol=1e-12, normalize=True)


@pytest.mark.parametrize("scheme", ["ngpt", "sqrt-depth"])
def test_fourier_against_particles(scheme):
    """FourierCircle with X/s against 4000 weighted particles at t = 0.5: kernel distance 1e-10 (it
    is 0.1-0.2 between the start and the end); the mass stays exact."""
    m, sol = spectral_run(scheme, 2, 0.5)
    cloud = solvers.Particles(m).solve(sol.measure(0, n=4000), [0.0, 0.5], rtol=1e-10, atol=1e-12)
    assert mf.kernel_distance(sol.measure(-1, n=4000), cloud.measure(-1)) < 1e-10
    assert mf.kernel_distance(sol.measure(-1, n=4000), sol.measure(0, n=4000)) > 0.05
    np.testing.assert_array_equal(sol.diagnostics["mass"], sol.diagnostics["mass"][0])
    assert sol.diagnostics["energy_rate_error"].max() < 1e-10


@pytest.mark.slow
@pytest.mark.parametrize("scheme", ["ngpt", "sqrt-depth"])
def test_harmonics_against_particles(scheme):
    """SphericalHarmonics with X/s against 20 000 weighted quasi particles at t = 0.25 (D_4 < 1e-10)."""
    m, sol = spectral_run(scheme, 3, 0.25)
    cloud = solvers.Particles(m).solve(sol.measure(0, n=20000), [0.0, 0.25], rtol=1e-10, atol=1e-12)
    assert mf.kernel_distance(sol.measure(-1, n=20000), cloud.measure(-1)) < 1e-10
    assert abs(sol.diagnostics["mass"][-1] - 1.0) < 1e-14
    assert sol.diagnostics["energy_rate_error"].max() < 1e-10


@pytest.mark.parametrize("scheme", ["ngpt", "sqrt-depth"])
def test_lagrangian_against_fourier(scheme):
    """The characteristics with X/s (and div_S(X/s) = s⁻¹div_S X + ⟨∇s⁻¹, X⟩, ∇‖A‖ for "ngpt") against
    FourierCircle on S^1 at t = 0.25: densities at the nodes to 1e-10, kernel distance 1e-12, mass exact."""
    m, spectral = spectral_run(scheme, 2, 0.25)
    chars = solvers.Lagrangian(m, 1024).solve(von_mises, [0.0, 0.25], normalize=True)
    x, _ = chars.representation.nodes(chars.data[-1])
    np.testing.assert_allclose(chars.density(x), spectral.density(x), rtol=0, atol=1e-10)
    assert mf.kernel_distance(spectral.measure(-1, n=4000), chars.measure(-1)) < 1e-12
    np.testing.assert_array_equal(chars.diagnostics["mass"], chars.diagnostics["mass"][0])


@pytest.mark.slow
@pytest.mark.parametrize("scheme", ["ngpt", "sqrt-depth"])
def test_lagrangian_against_harmonics(scheme):
    """The same on S^2 (4608 labels, lmax 32): the densities carried by 200 labels (`node_density`, exact
    along the characteristics; by t = 0.25 `density` between the labels is the band-limited kernel density,
    since log ρ spans more than 1 over some label's 30 nearest) to 1e-10."""
    m, spectral = spectral_run(scheme, 3, 0.25)
    chars = solvers.Lagrangian(m, 4608).solve(von_mises, [0.0, 0.25], normalize=True)
    x, _ = chars.representation.nodes(chars.data[-1])
    rho = chars.representation.node_density(chars.data[-1])
    np.testing.assert_allclose(rho[:200], spectral.density(x[:200]), rtol=0, atol=1e-10)


def test_ngpt_sa_and_usa_agree():
    """(USA) multiplies A by the partition function Z > 0, which s = ‖A‖/α divides out: the same flow."""
    runs = [solvers.FourierCircle(mf.Model(1.0, 2, normalized=k, normalization="ngpt"), 64).solve(
        von_mises, [0.0, 0.2], normalize=True, rtol=1e-10, atol=1e-12) for k in (True, False)]
    np.testing.assert_allclose(runs[0].data[-1], runs[1].data[-1], atol=1e-9)


def test_spectral_solvers_refuse_radial_schemes():
    for scheme in ("pre", "peri"):
        with pytest.raises(UnsupportedModel, match="`normalization`"):
            solvers.FourierCircle(mf.Model(1.0, 2, normalization=scheme))
        with pytest.raises(UnsupportedModel, match="`normalization`"):
            solvers.SphericalHarmonics(mf.Model(1.0, 3, normalization=scheme))
        with pytest.raises(UnsupportedModel, match="`normalization`"):      # the Jacobian of A of one zonal head
            solvers.Lagrangian(mf.Model(1.0, 3, normalization=scheme, V=np.diag([1.0, 1.0, 2.0])))
    with pytest.raises(UnsupportedModel, match="`normalization`"):
        solvers.Lagrangian(mf.Model(1.0, 3, normalization="ngpt", V=np.diag([1.0, 1.0, 2.0])))
    with pytest.raises(ValueError, match="`sums`"):
        solvers.Particles(mf.Model(1.0, 3, normalization="ngpt"), sums="spectral")


@pytest.mark.parametrize("scheme", ["pre", "peri", "ngpt"])
def test_two_half_heads_are_one_head(scheme):
    """A_j sums the heads: two heads with V = I/2 give the velocity of one head with V = I."""
    half = 0.5 * np.eye(D)
    two = mf.Model(1.0, D, heads=[(None, None, half), (None, None, half)], normalization=scheme)
    r0 = np.linspace(0.5, 2.0, N)
    np.testing.assert_allclose(solvers.Particles(two).velocity(cap(), radii=r0),
                               solvers.Particles(model(scheme)).velocity(cap(), radii=r0), rtol=0, atol=1e-14)
