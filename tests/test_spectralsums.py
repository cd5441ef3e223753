"""Spectral kernel sums (meanfield.sums.spectralsums) against the direct sums, and their use by the solvers."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import meanfield as mf
import solvers
from meanfield.observables import diagnostics
from meanfield.transformer.kernels import kernel_multipliers
from meanfield.sums.kernelsums import kernel_energy
from meanfield.sums.spectralsums import (EPSILON, MIN_DEGREE, ZonalSums, choose_sums, crossover, error_bound, multiplicity,
                                    spectral_energy, truncation_degree)
from solvers.lagrangian import velocity_divergence


def cloud(n, d, kind, rng):
    if kind == "uniform":
        x = rng.standard_normal((n, d))
    else:                                                # five tight clusters and a few stragglers
        centres = rng.standard_normal((5, d))
        x = centres[rng.integers(0, 5, n)] + 0.02 * rng.standard_normal((n, d))
        x[: n // 50] = rng.standard_normal((n // 50, d))
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


@pytest.mark.parametrize("d", [2, 3])
@pytest.mark.parametrize("beta", [0.0, 0.5, 4.0, 10.0])
@pytest.mark.parametrize("normalized", [True, False])
@pytest.mark.parametrize("v", [1.0, -1.0])
@pytest.mark.parametrize("kind", ["uniform", "clustered"])
def test_particle_field_matches_direct(d, beta, normalized, v, kind):
    """(SA)/(USA), V = ±I: the spectral field equals the direct one to 1e-11 of max|X| (measured
    1e-13 – 3e-13 at n = 20 000, benchmarks/bench_fast_sums.py)."""
    x = cloud(1500, d, kind, np.random.default_rng(int(10 * beta) + d))
    model = mf.Model(beta=beta, dim=d, normalized=normalized, V=v)
    direct = solvers.Particles(model, sums="direct").velocity(x)
    spectral = solvers.Particles(model, sums="spectral").velocity(x)
    assert np.max(np.abs(spectral - direct)) <= 1e-11 * np.max(np.abs(direct))


@settings(deadline=None)
@given(beta=st.floats(0.0, 20.0), d=st.sampled_from([2, 3]), seed=st.integers(0, 2 ** 31),
       n=st.integers(2, 300))
def test_pointwise_error_within_stated_bound(beta, d, seed, n):
    """At every point carrying weight w_i the (SA) field's error is at most about ε/max(w_i, e^{−2β})
    relative to the field's size (the bound of docs/mathematics.md §12), for any weights."""
    rng = np.random.default_rng(seed)
    x = cloud(n, d, "clustered" if seed % 2 else "uniform", rng)
    w = rng.random(n) ** 3 + 1e-6
    w /= w.sum()
    model = mf.Model(beta=beta, dim=d)
    direct = solvers.Particles(model, sums="direct").velocity(x, w)
    spectral = solvers.Particles(model, sums="spectral").velocity(x, w)
    err = np.linalg.norm(spectral - direct, axis=-1)
    scale = np.max(np.linalg.norm(direct, axis=-1)) + 1.0
    assert np.all(err <= 100 * EPSILON / np.maximum(w, np.exp(-2 * beta)) * scale)    # ducc0: ε in norm, not pointwise


@pytest.mark.parametrize("d", [2, 3])
@pytest.mark.parametrize("beta", [0.0, 1.0, 8.0])
@pytest.mark.parametrize("normalized", [True, False])
def test_velocity_divergence_matches_direct(d, beta, normalized):
    """The Lagrangian velocity, divergence (from the Laplacian of Z) and partition function."""
    rng = np.random.default_rng(d)
    x = cloud(1200, d, "uniform", rng)
    w = rng.random(1200)
    w /= w.sum()
    direct = velocity_divergence(x, x, w, beta, normalized=normalized, v=-1.0, partition=True)
    spectral = velocity_divergence(x, x, w, beta, normalized=normalized, v=-1.0, partition=True, sums="spectral")
    for a, b in zip(direct, spectral):
        assert np.max(np.abs(a - b)) <= 2e-12 * np.max(np.abs(a))


def test_divergence_is_the_derivative_of_the_velocity_on_the_circle():
    """v'(θ) from the spectral Laplacian against a centred finite difference of the spectral velocity."""
    rng = np.random.default_rng(3)
    y = cloud(400, 2, "clustered", rng)
    w = np.full(400, 1 / 400)
    theta = np.linspace(0, 2 * np.pi, 50, endpoint=False)
    h = 1e-5
    pts = lambda t: np.stack([np.cos(t), np.sin(t)], -1)
    X, div = velocity_divergence(pts(theta), y, w, 4.0, sums="spectral")
    speed = lambda t: np.einsum("nd,nd->n", velocity_divergence(pts(t), y, w, 4.0, sums="spectral")[0],
                                np.stack([-np.sin(t), np.cos(t)], -1))
    fd = (speed(theta + h) - speed(theta - h)) / (2 * h)
    assert np.max(np.abs(fd - div)) <= 1e-7 * np.max(np.abs(div))


@pytest.mark.parametrize("d", [2, 3])
@pytest.mark.parametrize("beta", [0.5, 4.0, 60.0])
def test_energy_from_coefficients(d, beta):
    """Σ_l ã_l |μ̂_l|² equals the double sum Σ_ij w_i w_j e^{β(⟨x_i,x_j⟩−1)}, and discrete_energy
    takes that route for large clouds."""
    rng = np.random.default_rng(7)
    x = cloud(5000, d, "clustered", rng)
    w = rng.random(5000)
    w /= w.sum()
    exact = kernel_energy(beta, x, w)
    assert spectral_energy(beta, x, w) == pytest.approx(exact, rel=1e-12)
    E = mf.interaction_energy(beta, (x, w))
    assert E == pytest.approx(np.exp(beta) * exact / (2 * beta), rel=1e-12)


@pytest.mark.parametrize("d", [2, 3])
@pytest.mark.parametrize("beta", [0.0, 2.0, 30.0, 300.0])
def test_truncation_tail_below_epsilon(d, beta):
    """The degrees beyond `truncation_degree` weigh less than ε in Zs, G and H together."""
    L = truncation_degree(beta, d)
    ls = np.arange(4 * L + 64)
    a = kernel_multipliers(beta, d, ls[-1], scaled=True)
    tail = np.sum((multiplicity(d, ls) * (1 + ls * (ls + d - 2)) * a)[L + 1:])
    assert tail <= EPSILON
    assert np.sum((multiplicity(d, ls) * (1 + ls * (ls + d - 2)) * a)[L:]) > EPSILON or L == MIN_DEGREE


def test_batches_are_summed_per_realisation():
    """(B, n, d) clouds: each realisation is its own measure, as in the direct sums."""
    rng = np.random.default_rng(11)
    x = np.stack([cloud(700, 2, "uniform", rng), cloud(700, 2, "clustered", rng)])
    model = mf.Model(beta=3.0, dim=2)
    direct = solvers.Particles(model, sums="direct").velocity(x)
    spectral = solvers.Particles(model, sums="spectral").velocity(x)
    assert spectral.shape == direct.shape == (2, 700, 2)
    assert np.max(np.abs(spectral - direct)) <= 1e-11 * np.max(np.abs(direct))


@pytest.mark.parametrize("d", [2, 3])
def test_particle_runs_agree_and_record_the_choice(d):
    """An adaptive run with "auto" takes the spectral sums beyond the crossover, records the choice and
    its bound, and follows the direct run to 1e-10; energies agree too."""
    n = 2 * crossover(d, truncation_degree(4.0, d))
    x, w = mf.sample(mf.densities.uniform(), n, d, rng=d)
    model = mf.Model(beta=4.0, dim=d)
    t = [0.0, 0.25, 0.5]
    auto = solvers.Particles(model).solve(x, t, progress=False, diagnostics=("energy",))
    direct = solvers.Particles(model, sums="direct").solve(x, t, progress=False, diagnostics=("energy",))
    assert auto.stats["sums"] == "spectral" and direct.stats["sums"] == "direct"
    assert auto.stats["sums_error_bound"] == pytest.approx(EPSILON / max(1 / n, np.exp(-8.0)))
    assert np.max(np.abs(auto.positions - direct.positions)) <= 1e-10
    np.testing.assert_allclose(auto.energy, direct.energy, rtol=1e-12)
    ds = auto.to_xarray()
    assert ds.attrs["sums"] == "spectral" and ds.attrs["sums_error_bound"] == auto.stats["sums_error_bound"]


def test_figure3_workload_stays_direct():
    """Many small problems (B realisations of n = 32) keep the fused direct sums under "auto"."""
    x = cloud(32 * 4, 3, "uniform", np.random.default_rng(0)).reshape(4, 32, 3)
    sol = solvers.Particles(mf.Model(beta=4.0, dim=3)).solve(x, [0.0, 0.1], progress=False)
    assert sol.stats["sums"] == "direct"


def test_auto_refuses_a_loose_bound():
    """"auto" keeps the direct sums when ε/max(min w, e^{−2β}) exceeds the tolerance."""
    w = np.full(1000, 1.0)
    w[0] = 1e-9
    w /= w.sum()
    assert error_bound(w, 1.0) == pytest.approx(EPSILON * np.e ** 2)       # the kernel's floor e^{−2β}
    model = mf.Model(beta=20.0, dim=2)
    assert error_bound(w, 20.0) == pytest.approx(EPSILON / w[0]) and error_bound(w, 20.0) > 1e-6
    assert choose_sums("auto", model, 1000, w)[0] == "direct"
    assert choose_sums("spectral", model, 1000, w) == ("spectral", error_bound(w, 20.0))
    assert choose_sums("auto", model, 1000, np.full(1000, 1e-3))[0] == "spectral"
    assert choose_sums("auto", model, 100, np.full(100, 1e-2))[0] == "direct"


@pytest.mark.parametrize("d", [2, 3])
def test_lagrangian_spectral_follows_direct(d):
    """The Lagrangian labels under both sums agree to 1e-10 in position and log-Jacobian at t = 1."""
    model = mf.Model(beta=4.0, dim=d)
    rho0 = mf.densities.perturbed_uniform(0.2, degree=2)
    nodes = 1024 if d == 2 else 1152
    sols = {s: solvers.Lagrangian(model, nodes, sums=s, estimate=False).solve(rho0, [0.0, 0.5], progress=False)
            for s in ("direct", "spectral")}
    assert sols["spectral"].stats["sums"] == "spectral"
    assert np.max(np.abs(sols["spectral"].data[-1] - sols["direct"].data[-1])) <= 1e-10


def test_large_cloud_diagnostics_match_the_pairwise_ones(monkeypatch):
    """Beyond `diagnostics.LARGE` the cluster count and the clustered-pair fraction come from a spatial
    index: the same numbers as the pairwise computation."""
    rng = np.random.default_rng(5)
    for d in (2, 3):
        x = cloud(5000, d, "clustered", rng)
        big = diagnostics.count_clusters(x, 1e-3), diagnostics.clustered_pair_fraction(x, 1e-3)
        monkeypatch.setattr(diagnostics, "LARGE", 10 ** 9)
        small = diagnostics.count_clusters(x, 1e-3), diagnostics.clustered_pair_fraction(x, 1e-3)
        monkeypatch.setattr(diagnostics, "LARGE", 4096)
        assert big[0] == small[0] and big[0] > 5
        assert big[1] == small[1]


def test_zonal_sums_checks_its_arguments():
    with pytest.raises(ValueError, match="`epsilon`"):
        ZonalSums(1.0, 3, epsilon=1e-14)
    with pytest.raises(ValueError, match="`dim` must be 2 or 3"):
        ZonalSums(1.0, 4)


@pytest.mark.parametrize("solver", ["Particles", "Lagrangian"])
def test_bad_sums(solver):
    """Unknown values name the accepted ones; "spectral" where it cannot apply names `sums` and why."""
    cls = getattr(solvers, solver)
    with pytest.raises(ValueError, match=r"`sums` must be one of \('auto', 'direct', 'spectral'\)"):
        cls(mf.Model(beta=1.0, dim=2), sums="fast")
    if solver == "Particles":
        with pytest.raises(ValueError, match=r"`sums`='spectral' needs S\^1 or S\^2"):
            cls(mf.Model(beta=1.0, dim=4), sums="spectral")
        Q = np.diag([1.0, 2.0, 0.5])
        with pytest.raises(ValueError, match="`sums`='spectral' needs a zonal model"):
            cls(mf.Model(beta=1.0, dim=3, Q=Q, K=np.eye(3), V=np.eye(3)), sums="spectral")
        with pytest.raises(ValueError, match=r"`sums`='spectral' applies on the sphere, not with domain='euclidean'"):
            cls(mf.Model(beta=1.0, dim=3), sums="spectral").solve(np.ones((5, 3)), [0, 1], domain="euclidean",
                                                                  progress=False)


@pytest.mark.parametrize("d", [2, 3])
def test_kernel_distance(d):
    """D_κ against its double-sum definition, the bound D_κ <= √κ W1, and the iid mean E D² = (1 − ã_0)/n."""
    rng = np.random.default_rng(d)
    x, y = cloud(600, d, "clustered", rng), cloud(400, d, "uniform", rng)
    w, v = rng.random(600), rng.random(400)
    w, v = w / w.sum(), v / v.sum()
    kappa = 3.0
    k = lambda A, B: np.exp(kappa * (A @ B.T - 1))
    exact = np.sqrt(w @ k(x, x) @ w + v @ k(y, y) @ v - 2 * w @ k(x, y) @ v)
    D = mf.kernel_distance((x, w), (y, v), kappa)
    assert D == pytest.approx(exact, rel=1e-11)
    assert D <= np.sqrt(kappa) * mf.wasserstein((x, w), (y, v))
    assert mf.kernel_distance((x, w), (x, w), kappa) <= 1e-6
    n, reps = 200, 200
    ref = mf.sphere_quadrature(4096 if d == 2 else 60_000, d)        # σ to far below the sampling error
    sq = np.mean([mf.kernel_distance(mf.sample(mf.densities.uniform(), n, d, rng=s), ref, kappa) ** 2
                  for s in range(reps)])
    a0 = kernel_multipliers(kappa, d, 0, scaled=True)[0]
    assert sq == pytest.approx((1 - a0) / n, rel=0.15)        # 200 repetitions: standard error ~ 7%
    with pytest.raises(ValueError, match="`kappa`"):
        mf.kernel_distance((x, w), (y, v), -1.0)


@settings(max_examples=20, deadline=None)
@given(st.integers(1, 40), st.integers(1, 6), st.integers(1, 3), st.integers(2, 700), st.integers(0, 2 ** 31))
def test_the_circles_block_transforms_are_their_fourier_sums(lmax, blocks, fields, n, seed):
    """`compiled.circle_block_coefficients` and `circle_block_synthesis` (the causal spectral sums on S^1):
    c[k, m] = Σ_{j in block k} w_j e^{−imθ_j} and Re Σ_{|m|<=L} g_m e^{imθ_j} (g_{−m} = conj g_m) of 1 to 3
    fields to 1e-13 of their size, for blocks longer and shorter than the kernels' chunks of points, the same
    bits on one and two threads."""
    from meanfield.sums import compiled
    pytest.importorskip("numba")
    rng = np.random.default_rng(seed)
    bounds = np.concatenate([[0], np.sort(rng.integers(0, n, blocks - 1)), [n]])
    theta, w = rng.uniform(-np.pi, np.pi, n), rng.random(n)
    cos, sin = np.cos(theta), np.sin(theta)
    m = np.arange(lmax + 1)
    c = [compiled.circle_block_coefficients(cos, sin, w, bounds, lmax, k) for k in (1, 2)]
    np.testing.assert_array_equal(c[0], c[1])
    want = np.array([(w[a:b, None] * np.exp(-1j * np.outer(theta[a:b], m))).sum(0) for a, b in zip(bounds[:-1], bounds[1:])])
    assert np.abs(c[0] - want).max() <= 1e-13 * max(w.sum(), 1.0)
    g = rng.standard_normal((blocks, fields, lmax + 1)) + 1j * rng.standard_normal((blocks, fields, lmax + 1))
    f = [compiled.circle_block_synthesis(cos, sin, g, bounds, k) for k in (1, 2)]
    np.testing.assert_array_equal(f[0], f[1])
    assert f[0].shape == (fields, n)
    k_of = np.repeat(np.arange(blocks), np.diff(bounds))
    terms = g[k_of] * np.exp(1j * np.outer(theta, m))[:, None, :]
    want = (terms[..., 0].real + 2 * terms[..., 1:].sum(-1).real).T
    assert np.abs(f[0] - want).max() <= 1e-13 * np.abs(g).sum(-1).max()


@settings(max_examples=12, deadline=None)
@given(beta=st.sampled_from([-3.0, 0.5, 4.0, 40.0]), n=st.sampled_from([7, 3000, 70_000]), seed=st.integers(0, 2 ** 31))
def test_the_circles_sums_by_recurrence(beta, n, seed):
    """On S^1 with numba and lmax <= RECURRENCE_LMAX the sums go by the Fourier recurrence, block by block
    (`spectralsums.recurrences`): Zs, G, H within 1e-12 of ducc0's NUFFTs (their ε is 3e-13), the same bits on
    one and two threads over several blocks, and the coefficients the NUFFT's."""
    from meanfield.sums import compiled, spectralsums
    if not compiled.fused_available(3, 3):
        pytest.skip("the recurrences need numba")
    rng = np.random.default_rng(seed)
    theta = rng.uniform(-np.pi, np.pi, n)
    x, w = np.stack([np.cos(theta), np.sin(theta)], axis=1), rng.random(n) / n
    sums = [ZonalSums(beta, 2, threads=k) for k in (1, 2)]
    assert spectralsums.recurrences(sums[0].lmax)
    one, two = (s.sums(x, x, w, laplacian=True) for s in sums)
    coeff = sums[0].coefficients(x, w)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(spectralsums, "RECURRENCE_LMAX", -1)
        nufft = sums[0].sums(x, x, w, laplacian=True)
        nufft_coeff = sums[0].coefficients(x, w)
    for a, b, c in zip(one, two, nufft):
        np.testing.assert_array_equal(a, b)
        assert np.abs(a - c).max() <= 1e-12 * np.abs(c).max()
    assert np.abs(coeff - nufft_coeff).max() <= 1e-12 * w.sum()
