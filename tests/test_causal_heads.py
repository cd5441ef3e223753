"""Several heads under a causal mask, each with its own ALiBi slope and β (meanfield.Model(heads=...,
position_bias=[...]), docs/causal.md): the multi-head profile of the kinetic paper, the particles'
field against a dense reference, the layered continuum against a Volterra solve of its linear theory,
against the labels and against the particles; the refusals."""
import json

import numpy as np
import pytest

import meanfield as mf
import solvers
from meanfield.transformer.causal import critical_time, rate, response_profile
from meanfield.cli import main
from meanfield.transformer.masks import dense_mask
from meanfield.transformer.positions import position_kernel

DOUBLE_WELL = [(1.0, 0.2, 3.0), (-27.519314453632965, 0.2, 0.25), (-1.5515192155322617, 0.5, 0.25),
               (3.9262326774050965e-06, 3.0, 2.0)]


def _turning(x, s):
    """A bump whose direction turns with the position s (mass 1 at every s)."""
    return 1 + 0.6 * (x[..., 0] * np.cos(2 * s) + x[..., 1] * np.sin(2 * s))


def _two_heads(d, beta=1.0, normalized=True, slopes=(0.5, 4.0), V2=1.0):
    """Head 1: (I, I, I) with β; head 2: (2I, I, V2·I), i.e. β_2 = 2β."""
    eye = np.eye(d)
    return mf.Model(beta, d, normalized=normalized, mask="causal", heads=[(eye, eye, eye), (2 * eye, eye, V2 * eye)],
                    position_bias=list(slopes))


# -- the multi-head profile --------------------------------------------------------------------------------
def test_double_well_profile_of_the_numerology_script():
    """The kinetic paper's common-M double well (four heads, τ = 1.5, M = 8, n_max = 20) on its grid
    s_j = 0.02 + 0.96 j/799. Reference: `multi_head_profile_value` of generate_u_shape_numerology_data.py in
    the public repository borjanG/2026-lost-in-the-middle, run unchanged (pure-Python series) and printed
    with repr at j = 0, 100, 250, 400, 555, 700, 799."""
    j = np.array([0, 100, 250, 400, 555, 700, 799])
    reference = [-3.1571460274888947, -5.500208495517583, -5.4568669111427415, -5.466448380647695,
                 -5.493913710010556, -5.4975030155086, -5.467175585233169]
    s = 0.02 + j * (0.96 / 799.0)
    assert np.max(np.abs(response_profile(1.5, s, heads=DOUBLE_WELL) - reference)) <= 1e-10
    grid = 0.02 + np.arange(800) * (0.96 / 799.0)
    S = response_profile(1.5, grid, heads=DOUBLE_WELL)
    minima = grid[1:-1][(S[1:-1] < S[:-2]) & (S[1:-1] < S[2:])]
    assert minima == pytest.approx([0.12934, 0.79497], abs=1e-4)        # the script's two wells


def test_one_head_profile_is_the_head_list_of_one():
    s = np.linspace(0.05, 1.0, 20)
    assert np.array_equal(response_profile(0.7, s, 1.3, 2.0), response_profile(0.7, s, heads=[(1.0, 1.3, 2.0)]))
    # s = 1 is the limit s -> 1 of the formula (Y = 0)
    assert response_profile(0.7, 1.0, 1.3) == pytest.approx(response_profile(0.7, 1 - 1e-9, 1.3), rel=1e-7)


@pytest.mark.parametrize("call, name", [
    (lambda: response_profile(1.0, [0.0, 1.0, 1.5], 1.0), "`s`"),
    (lambda: response_profile(-1.0, [0.5], 1.0), "`tau`"),
    (lambda: response_profile(1.0, [0.5]), "`beta`"),
    (lambda: response_profile(1.0, [0.5], 1.0, heads=DOUBLE_WELL), "`heads`"),
    (lambda: response_profile(1.0, [0.5], heads=[(1.0, 0.0, 1.0)]), "`heads\\[0\\] beta`"),
    (lambda: response_profile(1.0, [0.5], heads=[(1.0, 1.0)]), "`heads`"),
    (lambda: critical_time(-1.0), "`beta`"),
    (lambda: critical_time(0.0), "`beta`"),
])
def test_profile_refuses(call, name):
    with pytest.raises(ValueError, match=name):
        call()


def test_heads_command(tmp_path):
    """``meanfield lost-in-the-middle --heads``: the double well's two minima, files; bad triples exit 2."""
    spec = ",".join(":".join(repr(v) for v in h) for h in DOUBLE_WELL)
    assert main(["lost-in-the-middle", "--heads", spec, "--out", str(tmp_path), "--no-progress"]) == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["results"]["multi_head"]["local_minima"][1] == pytest.approx([0.12934, 0.79497], abs=1e-4)
    assert {"profiles.nc", "multi_head_profile.png"} <= {p.name for p in tmp_path.iterdir()}
    for bad in ("1:1", "1:0:1", "x:1:1", "1:1:-1"):
        assert main(["lost-in-the-middle", "--heads", bad, "--out", str(tmp_path / "bad")]) == 2


# -- the model -----------------------------------------------------------------------------------------------
def test_model_slopes_per_head():
    model = _two_heads(2)
    assert model.position_biases == (0.5, 4.0) and model.position_bias == (0.5, 4.0)
    assert [(m.beta, m.v, m.position_bias) for m in model.head_models] == [(1.0, 1.0, 0.5), (2.0, 1.0, 4.0)]
    assert mf.Model.from_dict(model.to_dict()) == model
    assert _two_heads(2, slopes=(1.0, 1.0)).position_bias == 1.0


@pytest.mark.parametrize("bias, name", [("1", "`position_bias`"), ([1.0, "2"], "`position_bias\\[1\\]`"),
                                        ([1.0, 2.0, 3.0], "`position_bias`"), ([1.0, -1.0], "`position_bias\\[1\\]`"),
                                        (True, "`position_bias`")])
def test_model_refuses_slopes(bias, name):
    eye = np.eye(2)
    with pytest.raises(ValueError, match=name):
        mf.Model(1.0, 2, mask="causal", heads=[(eye, eye, eye)] * 2, position_bias=bias)


def test_string_slope_in_a_run_file_exits_2(tmp_path):
    config = tmp_path / "run.toml"
    config.write_text('[solver]\nname = "particles"\n[model]\nbeta = 2.0\ndim = 2\nmask = "causal"\n'
                      'position_bias = "1"\n[initial]\ndensity = "uniform"\nn = 64\n[times]\nt_end = 1.0\n')
    assert main(["run", str(config), "--out", str(tmp_path / "out")]) == 2


# -- particles -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("d", [2, 3])
@pytest.mark.parametrize("normalized", [True, False])
def test_particle_field_of_two_slopes(d, normalized):
    """The field Σ_h v_h P_x Σ_{k<=j} e^{β_h⟨x_j, x_k⟩ − λ_h(j−k)/n} x_k / (normaliser of head h), written
    out densely, against the direct sums (1e-13) and the blocked spectral ones (1e-12)."""
    n, beta = 1200, 1.5
    rng = np.random.default_rng(d)
    x = rng.standard_normal((n, d))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    model = _two_heads(d, beta, normalized, V2=-0.5)
    ref = np.zeros_like(x)
    for c, v, lam in ((1.0, 1.0, 0.5), (2.0, -0.5, 4.0)):
        mask = dense_mask(n, "causal", lam)
        W = mask * np.exp(c * beta * (x @ x.T))
        ref += v * (W @ x) / (W if normalized else mask).sum(1)[:, None]
    ref -= np.einsum("id,id->i", ref, x)[:, None] * x
    scale = np.abs(ref).max()
    assert np.abs(solvers.Particles(model, sums="direct").velocity(x) - ref).max() <= 1e-13 * scale
    assert np.abs(solvers.Particles(model, sums="spectral").velocity(x) - ref).max() <= 1e-12 * scale


def test_particle_parameters_keep_one_head_per_slope():
    x = mf.sample_tokens(lambda y: np.ones(len(y)), 16, 2, method="quasi", rng=0)[0]
    eye = np.eye(2)
    with pytest.raises(ValueError, match="`parameters`"):
        solvers.Particles(_two_heads(2)).solve(x, [0.0, 0.1], parameters=[(eye, eye, eye)])


# -- the layered continuum -----------------------------------------------------------------------------------
def _volterra(models, amplitude, t, sigma, cells=4000, terms=80):
    """∂_t A = Σ_h a_h ∫_0^σ k_{λ_h}(σ, r) A(r) dr (the linear theory of several heads) on a midpoint grid,
    each row of the kernel normalised to 1 (half a cell on the diagonal), by the Taylor series of e^{tL}."""
    r = (np.arange(cells) + 0.5) / cells
    L = np.zeros((cells, cells))
    for model in models:
        k = np.tril(position_kernel(model.position_bias, r[:, None], r[None, :]))
        k[np.diag_indices(cells)] *= 0.5
        L += rate(model, 1)[0] * k / k.sum(1, keepdims=True)
    term = total = amplitude(r)
    for j in range(1, terms):
        term = (t / j) * (L @ term)
        total = total + term
    return np.interp(sigma, r, total)


@pytest.mark.parametrize("d, normalized", [(2, True), pytest.param(2, False, marks=pytest.mark.slow),
                                           pytest.param(3, True, marks=pytest.mark.slow)])
def test_layered_linear_response_of_two_slopes(d, normalized):
    """1 + ε c(σ) Y with ε = 1e-6: the amplitude at σ = 0.5, 0.75, 1 after t = 2 against the Volterra
    equation of the two heads (λ = 0.5 and 4, β = 1 and 2) solved on 4000 cells (its own error about 1e-4)."""
    model = _two_heads(d, 1.0, normalized)
    eps, S = 1e-6, [0.5, 0.75, 1.0]

    def bump(s):
        return np.exp(-((s - 0.35) / 0.15) ** 2)

    if d == 2:
        sol = solvers.FourierCircle(model, 24, positions=32).solve(lambda x, s: 1 + eps * bump(s) * 2 * x[..., 0],
                                                                   [0.0, 2.0], rtol=1e-9, atol=1e-16)
        measured = [sol.representation.at(sol.data[-1], s)[1].real / eps for s in S]
    else:
        sol = solvers.SphericalHarmonics(model, 16, positions=32).solve(
            lambda x, s: 1 + eps * bump(s) * np.sqrt(3) * x[..., 2], [0.0, 2.0], rtol=1e-9, atol=1e-16)
        measured = [sol.representation.at(sol.data[-1], s)[0, 1, 0] / eps for s in S]
    exact = _volterra(model.head_models, bump, 2.0, S)
    assert np.max(np.abs(np.array(measured) / exact - 1)) <= 3e-4
    one = _volterra(_two_heads(d, 1.0, normalized, slopes=(0.5, 0.5)).head_models, bump, 2.0, S)
    assert np.max(np.abs(one / exact - 1)) > 0.02             # the second slope matters


def test_labels_follow_the_layered_spectral_run_of_two_slopes():
    """Lagrangian labels (48 per position) against FourierCircle (48 modes), 8 positions, (SA), t = 0.5, at
    three nodes of the position rule (measured 5.5e-5; the labels' own rule in x decides)."""
    model = _two_heads(2, 2.0, slopes=(0.5, 4.0))
    spectral = solvers.FourierCircle(model, 48, positions=8)
    a = spectral.solve(_turning, [0.0, 0.5], rtol=1e-9, atol=1e-12)
    b = solvers.Lagrangian(model, 48, positions=8).solve(_turning, [0.0, 0.5], rtol=1e-9, atol=1e-12)
    x = mf.sphere_quadrature(16, 2).points
    for s in spectral.layers.nodes[[1, 4, 7]]:
        assert np.abs(a.density(x, -1, position=s) - b.density(x, -1, position=s)).max() <= 2e-4


def _quarter_gaps(tokens, continuum):
    """|mean of the tokens' x in each quarter of the positions − the continuum's mean over that quarter|."""
    n = len(tokens)
    g, gw = np.polynomial.legendre.leggauss(16)
    gaps = []
    for k in range(4):
        a, b = k / 4, (k + 1) / 4
        c1 = sum(w / 2 * continuum.representation.at(continuum.data[-1], 0.5 * (a + b) + 0.5 * (b - a) * gi)[1]
                 for gi, w in zip(g, gw))
        gaps.append(np.linalg.norm(tokens[k * n // 4:(k + 1) * n // 4].mean(0) - [c1.real, -c1.imag]))
    return np.array(gaps)


def test_particles_follow_the_continuum_of_two_slopes():
    """1024 quasi-random tokens of a bump turning with σ ((SA), S^1, heads β = 1, 2 with λ = 0.5, 4) at t = 1:
    the quarters' mean directions are within a few 1e-2 of the layered continuum's (measured 0.029, 0.0075,
    0.0076, 0.0025; 0.012, 0.0017, 0.0019, 0.0004 at n = 4096), and far closer to it than to the continuum
    of the same heads with both slopes 0.5."""
    model = _two_heads(2)
    tokens, _ = mf.sample_tokens(_turning, 1024, 2, method="quasi", rng=0)
    x = solvers.Particles(model, diagnostics="none").solve(tokens, [0.0, 1.0], rtol=1e-8, atol=1e-10).positions[-1]
    right = solvers.FourierCircle(model, 64, positions=32).solve(_turning, [0.0, 1.0], rtol=1e-9, atol=1e-12)
    gaps = _quarter_gaps(x, right)
    assert np.all(gaps <= [0.05, 0.015, 0.015, 0.006])
    wrong = solvers.FourierCircle(_two_heads(2, slopes=(0.5, 0.5)), 64, positions=32).solve(
        _turning, [0.0, 1.0], rtol=1e-9, atol=1e-12)
    assert np.all(_quarter_gaps(x, wrong)[2:] >= 3 * gaps[2:])
