"""Metastability: the fastest linear mode k*(β) (docs/mathematics.md §5), the cluster detector on any
weighted measure, and the number of clusters of the continuum and of particles (Section 6.3,
Figure 4 and Problem 1 of the paper)."""
import importlib

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy.sparse.csgraph import connected_components
from scipy.special import ive

import meanfield as mf
import solvers
from meanfield.cli import main
from meanfield.observables import diagnostics as G
from meanfield.measures.densities import seeded_perturbation
from meanfield.observables.diagnostics import find_clusters
from meanfield.spaces.quadrature import fibonacci
from meanfield.measures.sampling import uniform_points

R = importlib.import_module("meanfield.experiments.metastability_runs")


# -- the fastest mode ----------------------------------------------------------------------------------


@pytest.mark.parametrize("dim, beta, k", [(2, 2.0, 2), (2, 4.0, 3), (2, 5.0, 3), (2, 8.0, 4),
                                          (3, 3.0, 2), (3, 5.0, 3), (3, 6.0, 3)])
def test_fastest_mode_degree_and_closed_form_rate(dim, beta, k):
    got, rate = mf.fastest_mode(mf.Model(beta=beta, dim=dim))
    assert got == k
    nu = 0.5 * (dim - 2)                       # ς_k = k(k+d−2) I_{k+ν}(β) / (β I_ν(β)) for (SA)
    assert rate == pytest.approx(k * (k + dim - 2) * ive(k + nu, beta) / (beta * ive(nu, beta)), rel=1e-13)


@given(beta=st.floats(0.05, 40.0), dim=st.sampled_from([2, 3, 5]), normalized=st.booleans())
def test_fastest_mode_is_the_argmax_over_many_more_degrees(beta, dim, normalized):
    model = mf.Model(beta=beta, dim=dim, normalized=normalized)
    k, rate = mf.fastest_mode(model)
    rates = mf.linear_growth_rates(model, 200)
    assert k == int(np.argmax(rates)) and rate == rates[k] and rate > 0


def test_fastest_mode_of_a_stable_uniform_state_is_degree_zero():
    assert mf.fastest_mode(mf.Model(beta=4.0, dim=2, V=-1.0)) == (0, 0.0)           # repulsive
    assert mf.fastest_mode(mf.Model(beta=4.0, dim=3, noise=1.0)) == (0, 0.0)        # noise above ν_c
    k, rate = mf.fastest_mode(mf.Model(beta=4.0, dim=2, noise=0.05))                 # ς_l − ν l²
    assert (k, round(rate, 6)) == (2, round(4 * ive(2, 4.0) / (4 * ive(0, 4.0)) - 0.2, 6))
    with pytest.raises(mf.UnsupportedModel):
        mf.fastest_mode(mf.Model(beta=1.0, dim=3, V=np.diag([1.0, 2.0, 3.0])))


# -- the cluster detector --------------------------------------------------------------------------------


def _sharp_clusters(dim, centres, sizes, width, rng):
    x = np.concatenate([c + width * rng.standard_normal((s, dim)) for c, s in zip(centres, sizes)])
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _separated_centres(dim, k, rng, min_angle=0.3):
    while True:
        c = uniform_points(k, dim, rng)
        g = np.clip(c @ c.T, -1, 1)
        if k == 1 or np.arccos(g[~np.eye(k, dtype=bool)]).min() > min_angle:
            return c


@given(dim=st.sampled_from([2, 3]), k=st.integers(1, 6), seed=st.integers(0, 2 ** 31),
       log_tol=st.floats(-4.0, -2.5), log_width=st.floats(-9.0, -6.0))
def test_sharp_clusters_do_not_depend_on_a_tenfold_change_of_tolerance(dim, k, seed, log_tol, log_width):
    rng = np.random.default_rng(seed)
    centres = _separated_centres(dim, k, rng)
    sizes = rng.integers(30, 300, k)
    x = _sharp_clusters(dim, centres, sizes, 10.0 ** log_width, rng)
    w = rng.random(len(x)) + 0.1
    tol = 10.0 ** log_tol
    a, b = find_clusters((x, w), tol), find_clusters((x, w), 10 * tol)
    assert a.count == b.count == k and a.separated and b.separated
    assert np.array_equal(a.masses, b.masses) and np.allclose(a.positions, b.positions, rtol=0, atol=1e-14)
    # the masses are the weights of each cluster's points, the positions their centres
    truth = np.repeat(np.arange(k), sizes)
    wn = w / w.sum()
    exact = np.bincount(truth, weights=wn)
    order = np.argsort(-exact, kind="stable")
    assert np.allclose(a.masses, exact[order], rtol=0, atol=1e-14)
    assert np.allclose(a.positions, centres[order], rtol=0, atol=1e-5)
    assert a.clustered_mass == pytest.approx(1.0, abs=1e-14) and np.all(a.spread < 1e-5)


@pytest.mark.parametrize("dim", [2, 3])
@pytest.mark.parametrize("method", ["iid", "quasi"])
def test_a_nearly_uniform_cloud_is_never_counted(dim, method):
    """2000 points from a near-uniform density: no tolerance gives a count, neither by chaining into
    one component (large tol) nor by falling apart into light ones (small tol)."""
    rho = seeded_perturbation(dim, 1e-2, 8, seed=3)
    measure = mf.sample(rho, 2000, dim, rng=7, method=method)
    for tol in np.geomspace(1e-5, np.pi / 4, 14):
        c = find_clusters(measure, tol)
        assert c.count is None and not c.separated, tol
        assert c.clustered_mass < 0.5
    big = find_clusters(measure, np.pi / 4)
    assert big.components == 1                           # chained into one component, still not a cluster


def test_a_balanced_ring_has_no_centre_and_is_not_a_cluster():
    theta = 2 * np.pi * np.arange(400) / 400
    ring = np.stack([np.cos(theta), np.sin(theta), np.zeros_like(theta)], axis=1)
    c = find_clusters(ring, 0.1, min_mass=1e-3)
    assert c.components == 1 and c.count is None and c.spread[0] == pytest.approx(np.pi)


@pytest.mark.parametrize("seed", range(6))
def test_components_equal_the_connected_components_of_the_distance_graph(seed):
    """Single linkage at geodesic distance tol, against the dense adjacency matrix (clouds of every
    sharpness, so that cells with several points and the band chord < D <= 1.25 chord both occur)."""
    rng = np.random.default_rng(seed)
    dim = 3 if seed % 3 else 4
    x = _sharp_clusters(dim, uniform_points(4, dim, rng), [150, 150, 100, 100], 10.0 ** rng.uniform(-3.5, -1), rng)
    tol = 10.0 ** rng.uniform(-3, -1.5)
    c = find_clusters(x, tol, min_mass=1e-9, stray=0.0)
    chord = 2 * np.sin(tol / 2)
    n_ref, ref = connected_components(np.linalg.norm(x[:, None] - x[None], axis=-1) <= chord, directed=False)
    assert c.components == n_ref and np.all(c.labels >= 0)
    # the same partition: every reference component maps to one label and conversely
    assert len(np.unique(ref * len(x) + c.labels)) == n_ref


def test_circle_components_wrap_around():
    """A cluster across θ = ±π (where the sorted angles restart) is one cluster."""
    theta = np.concatenate([np.pi + np.linspace(-4e-4, 4e-4, 60), np.linspace(2.0, 2.0008, 40)])
    x = np.stack([np.cos(theta), np.sin(theta)], axis=1)
    c = find_clusters(x, 1e-3)
    assert c.count == 2 and c.components == 2 and np.allclose(c.masses, [0.6, 0.4], rtol=0, atol=1e-15)
    assert np.allclose(c.positions, [[-1.0, 0.0], [np.cos(2.0004), np.sin(2.0004)]], rtol=0, atol=1e-9)


def test_a_stray_fraction_decides_separation():
    rng = np.random.default_rng(0)
    x = np.concatenate([_sharp_clusters(2, [[1.0, 0.0], [-1.0, 0.0]], [450, 450], 1e-7, rng),
                        uniform_points(100, 2, rng)])        # 10% of the mass spread out
    assert find_clusters(x, 1e-3).count is None
    c = find_clusters(x, 1e-3, stray=0.15)
    assert c.count == 2 and 0.89 <= c.clustered_mass <= 0.91


@pytest.mark.parametrize("dim", [2, 3])
def test_a_satellite_closer_than_the_gap_is_not_a_second_cluster(dim):
    rng = np.random.default_rng(1)
    e = np.eye(dim)
    for distance, count in [(3e-3, None), (4.9e-3, None), (5.1e-3, 2), (2e-2, 2)]:
        satellite = np.cos(distance) * e[0] + np.sin(distance) * e[1]
        x = _sharp_clusters(dim, [e[0], satellite], [300, 20], 1e-8, rng)
        c = find_clusters(x, 1e-3)                     # gap = 5 tol
        assert c.count == count and c.components == 2 and c.clustered_mass == pytest.approx(1.0)
        assert find_clusters(x, 1e-3, gap=2.0).count == 2


def test_lagrangian_nodes_give_the_clusters_of_the_representation():
    """The detector on the Lagrangian node measure against `LagrangianNodes.clusters` (run-length
    components on S^1, an independent code), three clusters at β = 5 (k* = 3)."""
    model = mf.Model(beta=5.0, dim=2)
    rho0 = seeded_perturbation(2, 1e-2, 8, seed=0)
    sol = solvers.Lagrangian(model, panels=16, estimate=False).solve(rho0, [0.0, 5.0, 30.0], rtol=1e-8, atol=1e-10)
    early, late = find_clusters(sol.measure(1), 1e-3), find_clusters(sol.measure(2), 1e-3)
    assert early.count is None
    masses, centres = sol.representation.clusters(sol.data[-1])
    assert late.count == len(masses) == 3
    assert np.allclose(late.masses, masses / sol.mass[-1], rtol=0, atol=1e-12)
    assert np.allclose(late.positions, centres, rtol=0, atol=1e-6)


def test_lagrangian_records_only_the_diagnostics_asked_for():
    """``diagnostics=("energy",)`` (what the continuum runs of the experiment record): E_β alone (a
    Solution keeps it as ``sol.energy``, not among ``sol.diagnostics``), the same values as the full
    diagnostics, and the same states."""
    model = mf.Model(beta=5.0, dim=2)
    rho0 = seeded_perturbation(2, 1e-2, 8, seed=0)
    t = [0.0, 2.0, 6.0]
    full = solvers.Lagrangian(model, 256, estimate=False).solve(rho0, t)
    energy = solvers.Lagrangian(model, 256, estimate=False, diagnostics=("energy",)).solve(rho0, t)
    assert not set(energy.diagnostics)
    assert {"mass", "energy_rate_identity", "n_clusters", "w1_to_dirac", "max_density"} <= set(full.diagnostics)
    assert np.array_equal(energy.energy, full.energy) and np.array_equal(energy.data, full.data)
    none = solvers.Lagrangian(model, 256, estimate=False, diagnostics="none").solve(rho0, t)
    assert not set(none.diagnostics) and np.allclose(none.energy, full.energy, rtol=1e-14, atol=0)
    with pytest.raises(ValueError, match=r"`diagnostics` must be 'full', 'none' or names among .*'w2'"):
        solvers.Lagrangian(model, 256, diagnostics=("energy", "w2"))


def test_a_resolved_spectral_density_is_not_separated():
    model = mf.Model(beta=5.0, dim=2)
    sol = solvers.FourierCircle(model, modes=64).solve(seeded_perturbation(2, 1e-2, 8, seed=0), [0.0, 3.0])
    for i in range(2):
        c = find_clusters(sol.measure(i), 1e-3)
        assert c.count is None and c.clustered_mass < 0.05


@pytest.mark.parametrize("kw, name", [({"tol": 0.0}, "tol"), ({"tol": 1.0}, "tol"), ({"stray": 0.5}, "stray"),
                                      ({"min_mass": 0.0}, "min_mass"), ({"gap": 0.5}, "gap")])
def test_find_clusters_bad_input(kw, name):
    x = uniform_points(10, 2, 0)
    with pytest.raises(ValueError, match=rf"`{name}`"):
        find_clusters(x, **kw)


def test_find_clusters_bad_measure():
    with pytest.raises(ValueError, match=r"`measure"):
        find_clusters((uniform_points(10, 2, 0), -np.ones(10)))
    with pytest.raises(ValueError, match=r"`measure`"):
        find_clusters(np.ones((2, 3, 4)))


# -- initial data, the linear prediction and the bookkeeping ------------------------------------------------


@pytest.mark.parametrize("dim", [2, 3])
def test_seeded_perturbation_mass_and_equal_amplitudes(dim):
    rho = seeded_perturbation(dim, 1e-3, 6, seed=4)
    x, q = mf.sphere_quadrature(64, 2) if dim == 2 else _gauss(16)      # exact for the degrees involved
    assert np.sum(q * rho(x)) == pytest.approx(1.0, abs=1e-15)
    for l in range(1, 7):                       # ‖Y_l‖²_{L²(σ)} = 1/2 on both spheres; orthogonal degrees
        assert np.sum(q * rho.component(l, x) ** 2) == pytest.approx(0.5, rel=1e-12)
        assert abs(np.sum(q * rho.component(l, x) * rho.component(1 + l % 6, x))) < 1e-13
    with pytest.raises(ValueError, match=r"`epsilon`"):
        seeded_perturbation(dim, 0.2, 8)


def _gauss(nt):
    from meanfield.spaces.quadrature import gauss_legendre

    r = gauss_legendre(nt, 2 * nt)
    return r.points, r.weights


def test_count_maxima_of_harmonics():
    x = fibonacci(4000).points
    edges = G.sphere_neighbours(x)
    assert G.count_maxima(x[:, 2], edges) == 1                                  # degree 1
    assert G.count_maxima(x[:, 0] * x[:, 1], edges) == 2                        # degree 2: ± (1, 1, 0)/√2
    # Re (x + iy)³ = x³ − 3xy², a degree-3 harmonic: three maxima on the equator
    f = x[:, 0] ** 3 - 3 * x[:, 0] * x[:, 1] ** 2
    assert G.count_maxima(f, edges) == 3
    # the seeded harmonics: the same count on a 5x finer grid
    fine = fibonacci(20000).points
    fine_edges = G.sphere_neighbours(fine)
    for seed in range(3):
        rho = seeded_perturbation(3, 1e-4, 8, seed)
        for l in (2, 3, 4):
            assert G.count_maxima(rho.component(l, x), edges) == G.count_maxima(rho.component(l, fine), fine_edges)


def test_white_noise_prediction_matches_iid_samples_on_the_circle():
    """The Gaussian model of the empirical Fourier coefficients against the coefficients of actual iid
    samples: the distributions of the first degree to reach size 1 agree to Monte Carlo accuracy."""
    beta, n, draws = 4.0, 256, 3000
    pred = G.white_noise_prediction(beta, 2, n, samples=20000, rng=1)
    assert sum(pred.values()) == pytest.approx(1.0)
    rates = mf.linear_growth_rates(mf.Model(beta=beta, dim=2), 16)[1:]
    theta = np.random.default_rng(2).uniform(0, 2 * np.pi, (draws, n))
    amp = 2 * np.abs(np.exp(-1j * theta[:, :, None] * np.arange(1, 17)).mean(axis=1))
    first = 1 + np.argmin(np.log(1 / amp) / rates, axis=1)
    for k in range(1, 7):
        assert abs(np.mean(first == k) - pred.get(k, 0.0)) < 0.03
    # more particles: less noise, and the fastest mode k* = 3 dominates more often
    assert G.white_noise_prediction(beta, 2, 4096)[3] > pred[3] > G.white_noise_prediction(beta, 2, 16)[3]


def test_history_events_and_plateaus():
    t = np.arange(12.0)
    nan = np.nan
    count = np.array([nan, nan, 4, 4, nan, 4, 3, 3, 3, 2, 2, 2])
    energy = np.arange(12.0)
    ev = G.history_events(t, count, energy)
    assert ev["t_form"] == 2.0 and ev["first_count"] == 4.0
    assert ev["merges"] == [(6.0, 4.0, 3.0), (9.0, 3.0, 2.0)]
    p = ev["plateaus"]
    assert [(q["count"], q["start"], q["end"], q["censored"]) for q in p] == \
        [(4.0, 2.0, 6.0, False), (3.0, 6.0, 9.0, False), (2.0, 9.0, 11.0, True)]
    assert p[0]["energy"] == pytest.approx(np.mean([2, 3, 5]))
    assert G.history_events(t, np.full(12, nan))["merges"] == []
    # compare_events: relative differences of formation and of each merge before the cut-off
    other = G.history_events(t * 1.05, count)
    tf, merges = G.compare_events(ev, other, merge_before=8.0)
    assert tf == pytest.approx(0.05) and merges == [pytest.approx(0.05)]


def test_energy_plateaus_of_a_synthetic_staircase():
    t = np.geomspace(0.01, 400, 800)
    s = np.log(t)
    e = 1 + np.tanh(4 * (s - np.log(8))) + np.tanh(4 * (s - np.log(80)))       # steps at t = 8 and 80
    p = G.energy_plateaus(t, e)             # flat where 4 sech²(4(s − s_k)) <= 0.01·4: |s − s_k| >= 0.75
    assert len(p) == 3
    assert p[0]["start"] == pytest.approx(1.0, rel=0.02) and p[0]["end"] == pytest.approx(8 / np.exp(0.75), rel=0.02)
    assert p[1]["start"] == pytest.approx(8 * np.exp(0.75), rel=0.02)
    assert p[1]["end"] == pytest.approx(80 / np.exp(0.75), rel=0.02) and p[2]["end"] == pytest.approx(400)
    assert [round(q["energy"]) for q in p] == [-1, 1, 3]


def test_time_grid():
    t = R.time_grid(10.0, 200.0)
    assert t[0] == 0 and t[-1] == pytest.approx(200.0) and np.all(np.diff(t) > 0)
    assert np.allclose(np.diff(t[t <= 10]), 0.25) and np.max(t[1:][t[1:] > 10] / t[:-1][t[1:] > 10]) <= 1.0301


# -- the command line and a small end-to-end run --------------------------------------------------------------


@pytest.mark.parametrize("args, name", [(["--tol", "2"], "tol"), (["--dims", "4"], "dims"),
                                        (["--epsilon", "0.5"], "epsilon"), (["--seeds", "0"], "seeds")])
def test_cli_bad_input_exits_2(args, name, tmp_path, capsys):
    assert main(["metastability", "--out", str(tmp_path), *args]) == 2
    assert f"`{name}`" in capsys.readouterr().err


def test_small_run_agrees_with_the_theory(tmp_path):
    """S^1, β = 8, one seed to t = 24: the continuum forms k* = 4 clusters, 128 quasi particles too at
    the same time; every file is written (the staircase is cut at t = 20, too short for two plateaus)."""
    rep = importlib.import_module("meanfield.experiments").metastability(
        tmp_path, dims=(2,), betas_circle=(8.0,), seeds=1, t_end=24.0, quasi_ns=(128,), iid_ns=(32,), iid_seeds=2,
        iid_betas=(8.0,), iid_t_end=10.0, figure4_betas=(8.0,), figure4_n=32, figure4_seeds=2,
        staircase_seeds=(0,), staircase_t_end=20.0, progress=False)
    failed = [c["name"] for c in rep.checks if not c["passed"]]
    assert failed == ["staircase n = 5, β = 4 on S^1 to t = 20: at least two energy plateaus"]
    r = rep.results
    assert r["continuum"]["S1_beta8"]["first_count"] == [4.0]
    assert r["particles_quasi"]["S1_beta8"]["n128"]["first_count"] == [4.0]
    assert r["particles_quasi"]["S1_beta8"]["t_form_rel_diff"][0] <= 0.1
    files = {"summary.json", "clusters_S1_beta8.nc", "figure4.nc", "staircase.nc", "prediction_S1.nc",
             "prediction.png", "continuum.png", "figure4.png", "particles_iid.png", "staircase.png"}
    assert files <= {p.name for p in tmp_path.iterdir()}


# -- acceptance (slow): ε = 1e-4, L = 8, five seeds --------------------------------------------------------------

DETECTOR = dict(tol=1e-3, min_mass=1e-2, stray=0.05)
CONTINUUM = dict(epsilon=1e-4, degrees=8, panels=16, nodes_sphere=512, rtol=1e-8, adaptive_tol=1e-3, **DETECTOR)


@pytest.mark.slow
@pytest.mark.parametrize("dim, beta, t_end", [(2, 2.0, 200.0), (2, 4.0, 200.0), (2, 8.0, 200.0), (3, 3.0, 60.0)])
def test_acceptance_continuum_and_particles(dim, beta, t_end):
    k = mf.fastest_mode(mf.Model(beta=beta, dim=dim))[0]
    for seed in range(5):
        cont = R.continuum_run((dim, beta, seed), t_end=t_end, **CONTINUUM)
        assert cont["events"]["first_count"] == k, (seed, cont["events"])
        times = {(dim, beta, seed): cont["t"]}
        tf = cont["events"]["t_form"]
        quasi = R.particle_run((dim, beta, seed, 4000, 1.25 * tf + 2.0), epsilon=1e-4, degrees=8, rtol=1e-7,
                               times=times, **DETECTOR)
        assert quasi["events"]["first_count"] == k
        assert G.compare_events(cont["events"], quasi["events"])[0] <= 0.10
        if dim == 2:                             # merge times before t = 200 within 20% (n = 1000)
            long = R.particle_run((dim, beta, seed, 1000, t_end), epsilon=1e-4, degrees=8, rtol=1e-7,
                                  times=times, **DETECTOR)
            merges = G.compare_events(cont["events"], long["events"])[1]
            assert all(m is not None and m <= 0.20 for m in merges), (seed, merges)


@pytest.mark.slow
def test_acceptance_staircase_has_two_plateaus():
    r = R.staircase_run(0, n=5, beta=4.0, t_end=400.0, tol=1e-3, rtol=1e-9)
    assert len(r["plateaus"]) >= 2
    assert [p["clusters"] for p in r["plateaus"]] == [3.0, 2.0]
    assert r["plateaus"][0]["energy"] < r["plateaus"][1]["energy"]            # E_β increases along (SA)
